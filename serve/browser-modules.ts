/**
 * ferry's own TypeScript modules as the browser tab runs them: the files the tab's worker imports
 * (`TAB_ENTRIES`) and everything they import, each as JavaScript with its types removed by amaro
 * (Node's own type stripper, swc compiled to WebAssembly) on the fly, so there is no build step. A
 * module is served as the repository holds it, less its types: what runs in the tab is the audited
 * code, the zero-multiply audit (tests/kernels/audit.test.ts) covers it as it covers the server.
 *
 * The only change besides the types is to import specifiers a browser cannot resolve: each `node:`
 * built-in becomes serve/page/worker-node.js (a SHA-256, a CRC-32 and file-system calls that throw,
 * used only on load and by sessions), and `smol-toml`, `@huggingface/jinja` and
 * `@huggingface/tokenizers` the ES builds in their package folders. Specifiers
 * are rewritten relative to the module, so the same files work under any base path (the static folder
 * of scripts/page.ts too). The served set is exactly the import closure of the entries: a path outside
 * it is not a file the tab may have.
 *
 * @example
 * ```ts
 * import { browserModules } from "./browser-modules.ts";
 * const modules = browserModules();
 * modules.get("engines/int/from-bytes.ts")?.code; // JavaScript, importing "./engine.ts"
 * modules.get("scripts/chat.ts");                  // undefined: not in the tab's closure
 * ```
 * @module
 */
import { readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { transformSync } from "amaro";

/** The repository's root folder. */
export const REPO_ROOT: string = join(dirname(fileURLToPath(import.meta.url)), "..");

/**
 * Where the tab starts: its worker, and the workers of the integer engine's threads. They are served
 * with every module they import, nothing else. Every file keeps its repository path as its URL path
 * under `src/`, so a relative import means the same file on disk and in the browser (and `deno check`
 * resolves the worker's imports as the browser does).
 */
export const TAB_ENTRIES: readonly string[] = [
  "serve/page/worker.js",
  // The integer engine's threads in the tab: engines/int/pool.ts starts them by URL, not by import.
  "engines/int/worker-web.ts",
];

/** A `node:` built-in: the stand-in module. */
const NODE_STAND_IN = "serve/page/worker-node.js";
/** A package the modules import, and the file of its ES build the browser gets instead. */
const PACKAGES: Readonly<Record<string, string>> = {
  "smol-toml": "node_modules/smol-toml/dist/index.js",
  // formats/huggingface/huggingface-tokenizer.ts (which the lut4 reader imports) checks chat templates with it.
  "@huggingface/jinja": "node_modules/@huggingface/jinja/dist/index.js",
  // model/hf-tokenizer.ts encodes with it: the tokenizer of a lut4 file that carries one (schema /2).
  // Its ES build is one file that imports nothing.
  "@huggingface/tokenizers": "node_modules/@huggingface/tokenizers/dist/tokenizers.mjs",
};

/** One module as the browser gets it. */
export interface BrowserModule {
  /** Its path in the repository (also its URL path under `src/`). */
  path: string;
  /** The JavaScript served. */
  code: string;
  /** A strong validator of `code`, for `ETag`. */
  etag: string;
  /** The repository modules it imports (paths). */
  imports: string[];
}

/** Every import specifier in `code`, with where its string literal starts: static, re-export, bare, dynamic. */
function specifierSpans(code: string): Array<{ spec: string; at: number }> {
  const out: Array<{ spec: string; at: number }> = [];
  const patterns = [
    /^[ \t]*(?:import|export)\s[^;]*?\sfrom\s*(["'])([^"']+)\1/gm,
    /^[ \t]*import\s*(["'])([^"']+)\1/gm,
    /\bimport\(\s*(["'])([^"']+)\1\s*\)/g,
  ];
  for (const re of patterns) {
    for (const m of code.matchAll(re)) {
      out.push({ spec: m[2], at: m.index! + m[0].lastIndexOf(m[1] + m[2] + m[1]) + 1 });
    }
  }
  // One span per literal, in order (a line two patterns both match is rewritten once).
  return [...new Map(out.map((s) => [s.at, s])).values()].sort((a, b) => a.at - b.at);
}

/**
 * `source` without its types. Strip-only first (it keeps every line and column where they were, so a
 * stack trace in the tab points into the repository's file); a file that uses syntax with run-time
 * meaning (a constructor's parameter properties, in model/error.ts) is transformed instead.
 */
export function stripTypes(source: string, path: string): string {
  try {
    return transformSync(source, { mode: "strip-only", filename: path }).code;
  } catch (e) {
    if ((e as { code?: string }).code !== "UnsupportedSyntax") throw e;
    return transformSync(source, { mode: "transform", sourceMap: false, filename: path }).code;
  }
}

/** The repository file the browser gets for `spec` imported by `path`; an unknown package is an error. */
function browserTarget(spec: string, path: string): string {
  if (spec.startsWith(".")) return normalize(join(dirname(path), spec));
  if (spec.startsWith("node:")) return NODE_STAND_IN;
  if (Object.hasOwn(PACKAGES, spec)) return PACKAGES[spec];
  throw new Error(
    `${path}: imports ${spec}, which the browser tab has no file for (serve/browser-modules.ts)`,
  );
}

/** `target` relative to the folder of `path`, as an import specifier (`./x.ts`, `../y/z.js`). */
function relativeSpecifier(path: string, target: string): string {
  const rel = relative(dirname(path), target);
  return rel.startsWith("../") ? rel : `./${rel}`;
}

/**
 * One repository file as the browser gets it: TypeScript stripped, JavaScript as it is, specifiers
 * rewritten. With `jsNames`, `.ts` (and `.mjs`) specifiers end in `.js` instead (a static host knows `.js`
 * as JavaScript; many serve `.ts` as an MPEG transport stream, which a browser refuses as a module).
 */
function buildModule(path: string, jsNames: boolean): BrowserModule {
  const source = readFileSync(join(REPO_ROOT, path), "utf8");
  const stripped = path.endsWith(".ts") ? stripTypes(source, path) : source;
  const imports: string[] = [];
  let code = "", from = 0;
  for (const { spec, at } of specifierSpans(stripped)) {
    const target = browserTarget(spec, path);
    imports.push(target);
    const local = spec.startsWith(".") ? spec : relativeSpecifier(path, target);
    code += stripped.slice(from, at) + (jsNames ? jsName(local) : local);
    from = at + spec.length;
  }
  code += stripped.slice(from);
  return { path, code, etag: `"${hashText(code)}"`, imports };
}

/**
 * `path` with a `.ts` ending made `.js` (the name a static folder gives a stripped module), and an
 * `.mjs` one too (a package's ES build: not every static host knows `.mjs` as JavaScript).
 */
export function jsName(path: string): string {
  return path.replace(/\.(?:ts|mjs)$/, ".js");
}

/** A short content hash (FNV-1a, 2 × 32 bits): enough for an ETag. */
function hashText(text: string): string {
  let a = 0x811c9dc5, b = 0x01000193;
  for (let i = 0; i < text.length; i++) {
    a = Math.imul(a ^ text.charCodeAt(i), 0x01000193) >>> 0;
    b = Math.imul(b ^ text.charCodeAt(i), 0x5bd1e995) >>> 0;
  }
  return a.toString(16).padStart(8, "0") + b.toString(16).padStart(8, "0");
}

/** Built modules, kept while the file's modification time and size stay the same. */
const built = new Map<string, { stamp: string; module: BrowserModule }>();

/** One module, from the cache unless its file changed since it was built; `jsNames` as for a static folder. */
export function browserModule(path: string, jsNames = false): BrowserModule {
  const st = statSync(join(REPO_ROOT, path));
  const stamp = `${st.mtimeMs}:${st.size}`;
  const key = `${jsNames}:${path}`;
  const hit = built.get(key);
  if (hit?.stamp === stamp) return hit.module;
  const module = buildModule(path, jsNames);
  built.set(key, { stamp, module });
  return module;
}

/**
 * The import closure of `entries` (repository paths), each module built: exactly what the tab may
 * load, by repository path. With `jsNames` (a static folder), each `.ts` module imports the others
 * by `.js` names, as scripts/page.ts writes them.
 */
export function browserModules(
  entries: readonly string[] = TAB_ENTRIES,
  opts: { jsNames?: boolean } = {},
): Map<string, BrowserModule> {
  const out = new Map<string, BrowserModule>();
  const visit = (path: string) => {
    if (out.has(path)) return;
    if (!/\.(?:ts|js|mjs)$/.test(path) || path.startsWith("..")) {
      throw new Error(`${path}: not a repository module`);
    }
    const m = browserModule(path, opts.jsNames);
    out.set(path, m);
    for (const p of m.imports) visit(p);
  };
  for (const e of entries) visit(e);
  return out;
}

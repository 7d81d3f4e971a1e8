// The import rules that keep data flowing one way (docs/contributing.md, "Layout and the import rules"),
// checked on every .ts file: kernels know nothing above them; the model knows no file format and no engine;
// quantizers know numbers and shapes, not the files that hold them (and of the kernels only the integer
// ones, the WebAssembly compute and the thread pool); formats know their bytes, not how they
// are run, served or measured; engines know neither the server nor
// the measurements; the server reaches engines only through loadEngine; scripts are entry points nobody
// else imports; minimal readers stand alone on runtime built-ins; and no module imports itself through
// others. Also the tests' own layout, every test file in the folder of what it tests; and that every
// @example imports the names of its own module it uses.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { parse } from "@babel/parser";

const ROOT = join(import.meta.dir, "..");
const SKIP = new Set(["node_modules", ".git", "out", "tmp"]);

/** Every import specifier of a module: static imports and re-exports, bare `import "x"`, and `import("x")`. */
function specifiers(source: string): string[] {
  const out: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\s[^;]*?\sfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of source.matchAll(re)) out.push(m[1]);
  return out;
}

/** The repository folder a path lies in (`formats`, `scripts`, ...), or "" for a top-level file. */
function area(path: string): string {
  return path.includes("/") ? path.slice(0, path.indexOf("/")) : "";
}

/** The folders each folder must not import, lowest layer first (scripts/ and tests/ have rules of their own). */
const MUST_NOT_IMPORT: Record<string, string[]> = {
  kernels: ["model", "quantize", "formats", "engines", "serve", "measure", "scripts"],
  model: ["quantize", "formats", "engines", "serve", "measure", "scripts"],
  quantize: ["formats", "engines", "serve", "measure", "scripts", "tests"],
  formats: ["engines", "serve", "measure", "scripts", "tests"],
  engines: ["serve", "measure", "scripts"],
  measure: ["serve", "scripts"],
};

/** serve/'s parts below the app, and the app: docs/contributing.md, "Layout and the import rules". */
const SERVE_PARTS = ["serve/slots/", "serve/openai/", "serve/sessions/"];
const SERVE_APP = ["serve/routes/", "serve/chat/", "serve/app.ts", "serve/context.ts"];

/**
 * Every broken rule in a set of modules (repository path -> source), as `importer -> imported: rule`.
 * Relative imports are resolved against the importer; package and `node:` imports are kept as written.
 */
export function importViolations(modules: Map<string, string>): string[] {
  const bad: string[] = [];
  for (const [file, source] of modules) {
    const from = area(file);
    for (const spec of specifiers(source)) {
      const local = spec.startsWith(".");
      const target = local ? normalize(join(dirname(file), spec)) : spec;
      const to = local ? area(target) : "";
      const say = (rule: string) => bad.push(`${file} -> ${spec}: ${rule}`);
      if (from === "readers" && !spec.startsWith("node:")) {
        say("a minimal reader imports only node: built-ins");
      }
      if (!local) continue;
      if (target.startsWith("..")) say("imports from outside the repository");
      if (MUST_NOT_IMPORT[from]?.includes(to)) say(`${from}/ must not import ${to}/`);
      // lut4's tables are the integer kernels' own: formats/ may use kernels/int/, no other. quantize/
      // may also use the WebAssembly compute kernels and the thread pool (GPTQ's f64 factorisations and
      // error feedback, quantize/gptq.ts), never a float kernel set (kernels/kernels.ts) or the GPU's.
      if (from === "formats" && to === "kernels" && !target.startsWith("kernels/int/")) {
        say(`${from}/ imports only kernels/int/ of the kernels`);
      }
      const quantizeMay = ["kernels/int/", "kernels/wasm/", "kernels/pool.ts"];
      if (from === "quantize" && to === "kernels" && !quantizeMay.some((k) => target.startsWith(k))) {
        say("quantize/ imports only kernels/int/, kernels/wasm/ and kernels/pool.ts of the kernels");
      }
      // The server picks an engine by loadEngine; which engine runs is not its business.
      if (from === "serve" && to === "engines" && target !== "engines/mod.ts") {
        say("serve/ imports engines/ only through engines/mod.ts");
      }
      // Inside serve/: generation (slots/), the OpenAI protocol's shapes (openai/) and the session store
      // (sessions/) know nothing of the app above them: its routes, its chat prompts, its context.
      if (SERVE_PARTS.some((p) => file.startsWith(p)) && SERVE_APP.some((p) => target.startsWith(p))) {
        say("serve/'s slots/, openai/ and sessions/ do not import its routes/, chat/, app.ts or context.ts");
      }
      if (to === "scripts" && from !== "scripts") say("only scripts/ import scripts/");
      if (to === "tests" && from !== "tests") say("only tests/ import tests/");
    }
  }
  return bad;
}

/**
 * Every circle in the relative-import graph of a set of modules, type-only and dynamic imports included:
 * one line per strongly connected component, `a.ts -> b.ts -> a.ts` along a shortest circle through its
 * first module, and the component's other modules after it when there are more.
 */
export function importCircles(modules: Map<string, string>): string[] {
  const edges = new Map<string, string[]>();
  for (const [file, source] of modules) {
    const targets = specifiers(source).filter((s) => s.startsWith(".")).map((s) =>
      normalize(join(dirname(file), s))
    );
    edges.set(file, [...new Set(targets.filter((t) => modules.has(t)))].sort());
  }
  // Tarjan's strongly connected components.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = ""; w !== v;) {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    }
    if (component.length > 1 || edges.get(v)!.includes(v)) components.push(component.sort());
  };
  for (const v of [...edges.keys()].sort()) if (!index.has(v)) visit(v);

  return components.map((component) => {
    const members = new Set(component);
    const start = component[0];
    // Breadth-first from the first module, inside the component, back to it.
    const parent = new Map<string, string>();
    const queue = [start];
    let last = "";
    while (queue.length > 0 && last === "") {
      const v = queue.shift()!;
      for (const w of edges.get(v)!) {
        if (w === start) {
          last = v;
          break;
        }
        if (members.has(w) && !parent.has(w)) {
          parent.set(w, v);
          queue.push(w);
        }
      }
    }
    const path = [start];
    for (let v = last; v !== start; v = parent.get(v)!) path.splice(1, 0, v);
    const rest = component.filter((m) => !path.includes(m));
    const circle = [...path, start].join(" -> ");
    return rest.length > 0 ? `${circle} (in one circle with ${rest.join(", ")})` : circle;
  }).sort();
}

function repoModules(dir = ROOT, out = new Map<string, string>()): Map<string, string> {
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith(".")) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) repoModules(path, out);
    else if (name.endsWith(".ts")) out.set(relative(ROOT, path), readFileSync(path, "utf8"));
  }
  return out;
}

test("the checker catches each kind of broken rule", () => {
  const fake = new Map([
    ["formats/a.ts", 'import { x } from "../scripts/cli.ts";\nexport { y } from "../serve/engines.ts";'],
    ["formats/b.ts", 'const t = await import("../tests/helpers/x.ts");'],
    ["model/c.ts", 'import { readDmexp } from "../formats/dmexp.ts";'],
    ["kernels/d.ts", 'import "../scripts/train.ts";'],
    ["serve/e.ts", 'import { main } from "../scripts/export.ts";'],
    ["readers/f.ts", 'import { readFileSync } from "node:fs";\nimport { parse } from "smol-toml";'],
    ["readers/g.ts", 'import { numel } from "../model/tensor.ts";'],
    ["scripts/h.ts", 'import { cli } from "./cli.ts";\nimport { FORMATS } from "../formats/mod.ts";'],
    [
      "serve/i.ts",
      'import { FORMATS } from "../formats/mod.ts";\nimport { numel } from "../model/tensor.ts";',
    ],
    [
      "kernels/j.ts",
      'import { numel } from "../model/tensor.ts";\nimport { ENGINES } from "../engines/mod.ts";',
    ],
    [
      "model/k.ts",
      'import { createFloatEngine } from "../engines/float.ts";\nimport "../measure/metrics.ts";',
    ],
    [
      "formats/l.ts",
      [
        'import { ENGINES } from "../engines/mod.ts";',
        'import type { Metrics } from "../measure/metrics.ts";',
        'import { product } from "../kernels/wasm/kernels.ts";',
        'import { gemv } from "../kernels/int/gemv.ts";',
        'import { numel } from "../model/tensor.ts";',
      ].join("\n"),
    ],
    [
      "engines/m.ts",
      'import { app } from "../serve/app.ts";\nimport { FORMATS } from "../formats/mod.ts";\n' +
      'const llama = await import("../measure/llama-cpp.ts");',
    ],
    [
      "serve/n.ts",
      [
        'import { loadEngine } from "../engines/mod.ts";',
        'import type { Engine } from "../model/engine.ts";',
        'import { intEngine } from "../engines/int/engine.ts";',
        'import { createFloatEngine } from "../engines/float.ts";',
      ].join("\n"),
    ],
    ["measure/o.ts", 'import { app } from "../serve/app.ts";\nimport { FORMATS } from "../formats/mod.ts";'],
    [
      "quantize/p.ts",
      'import { f32Bytes } from "../formats/io.ts";\nimport { kernelSet } from "../kernels/kernels.ts";\n' +
      'import { update64 } from "../kernels/wasm/f64.ts";',
    ],
    ["model/q.ts", 'import { encodeTensor } from "../quantize/quants.ts";'],
    [
      "serve/slots/r.ts",
      'import { ApiError } from "../errors.ts";\nimport type { ServerContext } from "../context.ts";',
    ],
    [
      "serve/openai/s.ts",
      'import { routeLabel } from "../routes/table.ts";\nimport "../slots/generation.ts";',
    ],
    ["serve/chat/t.ts", 'import { ServerContext } from "../context.ts";\nimport "../openai/requests.ts";'],
  ]);
  expect(importViolations(fake)).toEqual([
    "formats/a.ts -> ../scripts/cli.ts: formats/ must not import scripts/",
    "formats/a.ts -> ../scripts/cli.ts: only scripts/ import scripts/",
    "formats/a.ts -> ../serve/engines.ts: formats/ must not import serve/",
    "formats/b.ts -> ../tests/helpers/x.ts: formats/ must not import tests/",
    "formats/b.ts -> ../tests/helpers/x.ts: only tests/ import tests/",
    "model/c.ts -> ../formats/dmexp.ts: model/ must not import formats/",
    "kernels/d.ts -> ../scripts/train.ts: kernels/ must not import scripts/",
    "kernels/d.ts -> ../scripts/train.ts: only scripts/ import scripts/",
    "serve/e.ts -> ../scripts/export.ts: only scripts/ import scripts/",
    "readers/f.ts -> smol-toml: a minimal reader imports only node: built-ins",
    "readers/g.ts -> ../model/tensor.ts: a minimal reader imports only node: built-ins",
    "kernels/j.ts -> ../model/tensor.ts: kernels/ must not import model/",
    "kernels/j.ts -> ../engines/mod.ts: kernels/ must not import engines/",
    "model/k.ts -> ../engines/float.ts: model/ must not import engines/",
    "model/k.ts -> ../measure/metrics.ts: model/ must not import measure/",
    "formats/l.ts -> ../engines/mod.ts: formats/ must not import engines/",
    "formats/l.ts -> ../measure/metrics.ts: formats/ must not import measure/",
    "formats/l.ts -> ../kernels/wasm/kernels.ts: formats/ imports only kernels/int/ of the kernels",
    "engines/m.ts -> ../serve/app.ts: engines/ must not import serve/",
    "engines/m.ts -> ../measure/llama-cpp.ts: engines/ must not import measure/",
    "serve/n.ts -> ../engines/int/engine.ts: serve/ imports engines/ only through engines/mod.ts",
    "serve/n.ts -> ../engines/float.ts: serve/ imports engines/ only through engines/mod.ts",
    "measure/o.ts -> ../serve/app.ts: measure/ must not import serve/",
    "quantize/p.ts -> ../formats/io.ts: quantize/ must not import formats/",
    "quantize/p.ts -> ../kernels/kernels.ts: quantize/ imports only kernels/int/, kernels/wasm/ and kernels/pool.ts of the kernels",
    "model/q.ts -> ../quantize/quants.ts: model/ must not import quantize/",
    "serve/slots/r.ts -> ../context.ts: serve/'s slots/, openai/ and sessions/ do not import its routes/, chat/, app.ts or context.ts",
    "serve/openai/s.ts -> ../routes/table.ts: serve/'s slots/, openai/ and sessions/ do not import its routes/, chat/, app.ts or context.ts",
  ]);
});

test("the circle finder finds a 2-circle of type-only imports, a 3-circle, two circles in one, no diamond", () => {
  const fake = new Map([
    ["formats/a.ts", 'import type { B } from "./b.ts";\nexport const a = 1;'],
    ["formats/b.ts", 'import type { A } from "./a.ts";\nexport type B = number;'],
    ["kernels/c.ts", 'import { d } from "./d.ts";'],
    ["kernels/d.ts", 'export { e as d } from "./int/e.ts";'],
    ["kernels/int/e.ts", 'export const e = async () => await import("../c.ts");'],
    ["model/top.ts", 'import "./left.ts";\nimport "./right.ts";'],
    ["model/left.ts", 'import "./bottom.ts";'],
    ["model/right.ts", 'import "./bottom.ts";\nimport "../formats/a.ts";'],
    ["model/bottom.ts", 'import { numel } from "node:fs";'],
    ["serve/p.ts", 'import "./q.ts";'],
    ["serve/q.ts", 'import "./p.ts";\nimport "./r.ts";'],
    ["serve/r.ts", 'import "./q.ts";'],
  ]);
  expect(importCircles(fake)).toEqual([
    "formats/a.ts -> formats/b.ts -> formats/a.ts",
    "kernels/c.ts -> kernels/d.ts -> kernels/int/e.ts -> kernels/c.ts",
    "serve/p.ts -> serve/q.ts -> serve/p.ts (in one circle with serve/r.ts)",
  ]);
});

test("every module of the repository keeps the import rules", () => {
  const modules = repoModules();
  expect(modules.size).toBeGreaterThan(40);
  expect(modules.has("formats/mod.ts") && modules.has("scripts/export.ts")).toBe(true);
  expect(importViolations(modules)).toEqual([]);
});

// A circle, even of type-only imports, means two modules that cannot be read, tested or moved apart.
// Each line names one: `a.ts -> b.ts -> a.ts`.
test("no module imports itself through others", () => {
  expect(importCircles(repoModules())).toEqual([]);
});

/** Where a test file may live: a folder named after the source folder it tests, e2e/ or llama/. */
const TEST_FOLDERS = [
  "engines",
  "formats",
  "kernels",
  "measure",
  "model",
  "quantize",
  "readers",
  "scripts",
  "serve",
];

// tests/ mirrors the source (docs/contributing.md, "Tests"): a module's tests sit in the folder named after
// its own; tests/e2e/ holds what drives a browser or other processes, tests/llama/ what runs llama.cpp.
test("every test file lives in its folder and is named in kebab-case", () => {
  const files = readdirSync(join(ROOT, "tests"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".test.ts"));
  expect(files.length).toBeGreaterThan(80);
  const misplaced = files.filter((f) => {
    const [folder, name] = f.split("/");
    if (name === undefined) return f !== "imports.test.ts";
    return ![...TEST_FOLDERS, "e2e", "llama"].includes(folder) ||
      !/^[a-z0-9]+(-[a-z0-9]+)*\.test\.ts$/.test(name);
  });
  expect(misplaced).toEqual([]);
});

// The preload (tests/setup.ts) sets the one default timeout; it runs again for each file because every run
// is isolated. A file that needs longer says so with a larger figure of its own.
test("no test file repeats the preload's default timeout", () => {
  const files = readdirSync(join(ROOT, "tests"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".test.ts"));
  const repeating = files.filter((f) =>
    /^setDefaultTimeout\(60_000\)/m.test(readFileSync(join(ROOT, "tests", f), "utf8"))
  );
  expect(repeating).toEqual([]);
});

// Every @example imports what it uses (docs/contributing.md, "Examples"). .ci/run type-checks each block as
// a module of its own (`deno check --doc-only`), but Deno first imports into a block every export of the
// module it documents, so a block that uses its own module's names without importing them passes there.
// This is the half the type-check cannot see: each name of the documented module that a block uses is
// imported (or declared) by the block.

/** The folders whose examples .ci/run type-checks, and mod.ts. */
const EXAMPLE_AREAS = [
  "model",
  "kernels",
  "quantize",
  "formats",
  "engines",
  "measure",
  "serve",
  "readers",
  "scripts",
  "",
];

type AstNode = { type: string; [key: string]: unknown };
const isNode = (v: unknown): v is AstNode => typeof (v as AstNode)?.type === "string";
const parseModule = (text: string) =>
  parse(text, {
    sourceType: "module",
    plugins: ["typescript"],
    errorRecovery: true,
    attachComment: false,
  });

/** The names a binding pattern declares (`a`, `{ a, b: c }`, `[a, ...b]`). */
function boundNames(p: unknown): string[] {
  if (!isNode(p)) return [];
  if (p.type === "Identifier") return [p.name as string];
  if (p.type === "ObjectPattern") {
    return (p.properties as AstNode[]).flatMap((q) => boundNames(q.argument ?? q.value));
  }
  if (p.type === "ArrayPattern") return (p.elements as unknown[]).flatMap(boundNames);
  if (p.type === "AssignmentPattern") return boundNames(p.left);
  if (p.type === "RestElement") return boundNames(p.argument);
  return [];
}

const scanner = new Bun.Transpiler({ loader: "ts" });

/**
 * The names a module exports, re-exports included: its values as Bun's transpiler scans them (a full
 * parse of every module took seconds), its types from their declarations and `export { type … }` lists.
 */
function exportedNames(source: string): Set<string> {
  const names = new Set(scanner.scan(source).exports);
  for (const m of source.matchAll(/^export (?:declare )?(?:interface|type) (\w+)/gm)) names.add(m[1]);
  for (const m of source.matchAll(/^export (type )?\{([^}]*)\}/gm)) {
    for (const item of m[2].split(",").map((i) => i.trim()).filter(Boolean)) {
      const typeOnly = m[1] !== undefined || item.startsWith("type ");
      if (typeOnly) names.add(item.replace(/^type /, "").split(/\s+as\s+/).pop()!);
    }
  }
  return names;
}

/** The ```ts and ```js blocks of a module's doc comments, each with the line its fence is on. */
function exampleBlocks(source: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = [];
  const lines = source.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*\* ```(ts|js)\s*$/.test(lines[i])) continue;
    let end = i + 1;
    while (end < lines.length && !/^\s*\* ```\s*$/.test(lines[end])) end++;
    const code = lines.slice(i + 1, end).map((l) => l.replace(/^\s*\*( |$)/, "")).join("\n");
    blocks.push({ line: i + 1, code });
    i = end;
  }
  return blocks;
}

/** What a block refers to by name, and what it imports or declares itself. */
function namesOf(code: string): { used: Set<string>; declared: Set<string> } {
  const used = new Set<string>(), declared = new Set<string>();
  const walk = (node: AstNode, parent: AstNode | undefined, key: string) => {
    if (node.type === "Identifier") {
      const p = parent?.type ?? "";
      const dotted = /MemberExpression$/.test(p) && key === "property" && !parent!.computed;
      const named = /^(ObjectProperty|ObjectMethod|ClassMethod|ClassProperty|TSPropertySignature)$/.test(p) &&
        key === "key" && !parent!.computed && !parent!.shorthand;
      if (!dotted && !named && !(p === "TSQualifiedName" && key === "right")) used.add(node.name as string);
    }
    if (/^Import(Default|Namespace)?Specifier$/.test(node.type)) {
      declared.add((node.local as AstNode).name as string);
    }
    if (node.type === "VariableDeclarator") boundNames(node.id).forEach((n) => declared.add(n));
    if (
      /^(FunctionDeclaration|ClassDeclaration|TSDeclareFunction|TSTypeAliasDeclaration|TSInterfaceDeclaration)$/
        .test(node.type) && isNode(node.id)
    ) declared.add(node.id.name as string);
    for (const [k, v] of Object.entries(node)) {
      if (k === "loc" || k === "extra") continue;
      for (const child of Array.isArray(v) ? v : [v]) if (isNode(child)) walk(child, node, k);
    }
  };
  walk(parseModule(code).program as unknown as AstNode, undefined, "");
  return { used, declared };
}

/** Each block that uses a name of the module it documents without importing it: `file:line: name, …`. */
export function unimportedExampleNames(modules: Map<string, string>): string[] {
  const bad: string[] = [];
  for (const [file, source] of modules) {
    const blocks = exampleBlocks(source);
    if (blocks.length === 0) continue;
    const exported = exportedNames(source);
    for (const { line, code } of blocks) {
      const { used, declared } = namesOf(code);
      const missing = [...used].filter((n) => exported.has(n) && !declared.has(n));
      if (missing.length > 0) bad.push(`${file}:${line}: ${missing.join(", ")}`);
    }
  }
  return bad;
}

test("the example checker finds a block using its own module's names without importing them", () => {
  const fake = new Map([
    [
      "model/a.ts",
      [
        "/**",
        " * @example",
        " * ```ts",
        ' * import { a } from "./a.ts";',
        " * declare const t: T;",
        " * a(t, { b: 1 }).b; // b: a key and a property, not the export",
        " * ```",
        " * @example",
        " * ```ts",
        " * const x: T = a(b);",
        " * ```",
        " */",
        "export function a(x: unknown, o?: object) { return o; }",
        "export const b = 1;",
        "export type T = number;",
      ].join("\n"),
    ],
  ]);
  expect(unimportedExampleNames(fake)).toEqual(["model/a.ts:3: T", "model/a.ts:9: T, a, b"]);
});

test("every example imports the names of its own module it uses", () => {
  const modules = new Map(
    [...repoModules()].filter(([f]) => EXAMPLE_AREAS.includes(area(f))),
  );
  expect(modules.size).toBeGreaterThan(150);
  expect(unimportedExampleNames(modules)).toEqual([]);
});

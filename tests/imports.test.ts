// The import rules that keep data flowing one way (the developers' guide, "Style"): formats know their
// bytes, not the CLI or the server; scripts are entry points nobody else imports; minimal readers stand
// alone on runtime built-ins; the model and the kernels know no file format. Checked on every .ts file.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

setDefaultTimeout(60_000); // per file: Bun 1.4.5 applies a preload's default to the first test file only

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
      if (from === "formats" && ["scripts", "serve", "tests"].includes(to)) {
        say(`formats/ must not import ${to}/`);
      }
      if ((from === "model" || from === "kernels") && (to === "formats" || to === "scripts")) {
        say(`${from}/ must not import ${to}/`);
      }
      if (to === "scripts" && from !== "scripts") say("only scripts/ import scripts/");
      if (to === "tests" && from !== "tests") say("only tests/ import tests/");
    }
  }
  return bad;
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
  ]);
});

test("every module of the repository keeps the import rules", () => {
  const modules = repoModules();
  expect(modules.size).toBeGreaterThan(40);
  expect(modules.has("formats/mod.ts") && modules.has("scripts/export.ts")).toBe(true);
  expect(importViolations(modules)).toEqual([]);
});

// Bun 1.4.5 applies a preload's setDefaultTimeout to the first test file only; the others keep the 5 s
// default and fail at random on a busy machine unless each file sets its own.
test("every test file sets its own default timeout", () => {
  const files = readdirSync(join(ROOT, "tests")).filter((f) => f.endsWith(".test.ts"));
  expect(files.length).toBeGreaterThan(30);
  const missing = files.filter((f) =>
    !/^setDefaultTimeout\(/m.test(readFileSync(join(ROOT, "tests", f), "utf8"))
  );
  expect(missing).toEqual([]);
});

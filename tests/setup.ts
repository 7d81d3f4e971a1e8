// Preloaded by bun test (bunfig.toml): on a fresh clone, install the npm dependencies first.
// Bun's resolver has already looked for node_modules by the time a preload runs, so after the
// install the same test command is run again in a fresh process, and its exit code is ours.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import { setDefaultTimeout } from "bun:test";

// Tests that spawn runtimes or llama.cpp can take longer than bun's 5 s default on 2 busy cores. Bun 1.4.5
// applies this only to the first test file, so every test file also sets it (tests/imports.test.ts checks).
setDefaultTimeout(60_000);

const root = join(import.meta.dir, "..");
// The test- and measurement-only packages are package.json's optionalDependencies, which
// `deno run` does not install: after a Deno-only first run, node_modules exists but lacks them.
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const needed = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.optionalDependencies ?? {})];
const missing = needed.filter((name) => !existsSync(join(root, "node_modules", name, "package.json")));
if (missing.length > 0) {
  console.error(`tests/setup.ts: node_modules lacks ${missing.join(", ")}; running bun install`);
  const install = spawnSync("bun", ["install", "--no-save"], { cwd: root, stdio: "inherit" });
  if (install.status !== 0) {
    throw new Error("bun install failed; install the dependencies with `bun install` or `npm ci`");
  }
}
// Deno keeps its own layout of node_modules (node_modules/.deno), which bun install and npm ci do not make;
// without it the first Deno command of the suite prints "Initialize <package>" lines on the stderr that
// the tests running Deno expect silent. `deno install` makes it from package.json's dependencies alone.
if (!existsSync(join(root, "node_modules", ".deno"))) {
  const deno = spawnSync("deno", ["install", "--quiet"], { cwd: root, stdio: "inherit" });
  if (deno.status !== 0) {
    console.error("tests/setup.ts: deno install failed; the tests that run Deno will say why");
  }
}
if (missing.length > 0) {
  // Installed: run the same test command again (see the top).
  // process.argv inside bun test lists one test file, not the command line; /proc has the real one.
  let args = ["test"];
  try {
    args = readFileSync("/proc/self/cmdline", "utf8").split("\0").filter(Boolean).slice(1);
  } catch { /* not Linux: rerun the whole suite */ }
  const again = spawnSync(process.execPath, args, { stdio: "inherit" });
  process.exit(again.status ?? 1);
}

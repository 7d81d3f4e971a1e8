// Preloaded by bun test (bunfig.toml) in every test process. Three jobs:
// 1. On a fresh clone, install the npm dependencies, then run the same test command again.
// 2. Turn a plain `bun test` (every file in one process, sharing one global) into `bun test --parallel
//    --timings=tests/timings.json`: one worker process per core and one more (many files wait on spawned
//    runtimes, servers or a browser; on 2 cores 3 workers took 263 s, 2 took 284), the slowest files started
//    first, and a fresh global for each file (--parallel implies --isolate), so no file pays for what an
//    earlier one left on the heap (in one shared process tests/kernels/int-lut.test.ts ran 19x slower late in
//    the run than alone, its collector tracing every earlier file's fixtures).
// 3. Set the default timeout. Under --isolate this preload runs again for each file, so once here covers all.
// 4. On a fresh clone, join the shipped model's checkpoint from its parts (formats/checkpoint/parts.ts).
// Knobs: FERRY_TEST_JOBS=N worker processes (default: cores + 1); FERRY_FAST=1 leaves out tests/e2e/,
// tests/llama/ and the *-qwen3 files (the fast loop, `bun run test:fast`); FERRY_TIMINGS_OUT=FILE writes each file's duration there
// (.ci/run prints the slowest).
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { setDefaultTimeout } from "bun:test";
import { joinParts, SHIPPED_CHECKPOINT } from "../formats/checkpoint/parts.ts";

// Tests that spawn runtimes or llama.cpp can take longer than bun's 5 s default on 2 busy cores.
setDefaultTimeout(60_000);

const root = join(import.meta.dir, "..");
joinParts(SHIPPED_CHECKPOINT);

/** This process's command line after the executable: `["test", ...]`. */
function testArgs(): string[] {
  try {
    return readFileSync("/proc/self/cmdline", "utf8").split("\0").filter(Boolean).slice(1);
  } catch {
    return ["test"]; // not Linux: the whole suite
  }
}

/** Runs bun with `args` in the foreground and exits with its status. */
function runInstead(args: string[]): never {
  const again = spawnSync(process.execPath, args, { stdio: "inherit", env: process.env });
  process.exit(again.status ?? 1);
}

/**
 * Runs the suite with every temporary file under one folder (TMPDIR, which os.tmpdir() and the spawned
 * runtimes and browsers follow), removed when the run ends, interrupted included: fixtures kept for a
 * worker's lifetime have no later moment to be removed, and each run left about 150 MB in /tmp.
 */
function runSuite(args: string[]): never {
  const scratch = mkdtempSync(join(tmpdir(), "ferry-test-"));
  // The children get the interrupt too; this process outlives them to clean up.
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => {});
  const run = spawnSync(process.execPath, args, {
    stdio: "inherit",
    // Digest records (formats/digest-record.ts) go there too, not into the user's cache.
    env: { ...process.env, TMPDIR: scratch, FERRY_DIGEST_DIR: join(scratch, "digests") },
  });
  rmSync(scratch, { recursive: true, force: true });
  process.exit(run.status ?? 1);
}

// 1. The test- and measurement-only packages are package.json's optional and dev dependencies, which
// `deno run` does not install: after a Deno-only first run, node_modules exists but lacks them. Bun's resolver has already
// looked for node_modules by the time a preload runs, hence the second process.
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const needed = [pkg.dependencies, pkg.optionalDependencies, pkg.devDependencies].flatMap((d) =>
  Object.keys(d ?? {})
);
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
if (missing.length > 0) runInstead(testArgs());

// 2. A worker (--test-worker), or a run that chose its own isolation, runs its files as it is.
const args = testArgs();
const chosen = args.some((a) => /^--(test-worker|parallel|isolate|no-isolate)(=|$)/.test(a));
if (!chosen && args[0] === "test") {
  const jobs = Number(process.env.FERRY_TEST_JOBS) || availableParallelism() + 1;
  const timings = join(root, "tests", "timings.json");
  const out = process.env.FERRY_TIMINGS_OUT;
  if (out) copyFileSync(timings, out);
  const flags = [`--parallel=${jobs}`, `--timings=${out || timings}`, ...(out ? ["--update-timings"] : [])];
  if (process.env.FERRY_FAST === "1") {
    // Also the files that run the real Qwen3 vocabulary (151,936 tokens, an 11 MB tokenizer.json).
    flags.push(
      "--path-ignore-patterns=tests/e2e/**",
      "--path-ignore-patterns=tests/llama/**",
      "--path-ignore-patterns=tests/**/*-qwen3.test.ts",
    );
  }
  runSuite(["test", ...flags, ...args.slice(1)]);
}

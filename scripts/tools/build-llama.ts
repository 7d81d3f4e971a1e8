/**
 * Builds llama.cpp's command-line tools (llama-quantize, llama-imatrix, llama-perplexity, llama-bench)
 * once, offline, from the source node-llama-cpp ships as a git bundle, pinned to the bundle's commit,
 * into a cache folder that benchmarks find through measure/llama-tools.ts. A second run finds the cache
 * and exits at once. Runs under Deno and Bun.
 *
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import {
  buildStep,
  BUNDLE_PATH,
  cacheProblem,
  cmakeFlags,
  LLAMA_TOOLS,
  readBundleCommit,
  STAMP_FILE,
  toolPaths,
  TOOLS_DIR_ENV,
  toolsDir,
  type ToolsStamp,
} from "../../measure/llama-tools.ts";

const HELP = `
deno run -A scripts/tools/build-llama.ts [options]      (or: bun scripts/tools/build-llama.ts)

Builds llama.cpp's ${LLAMA_TOOLS.join(", ")} from the source that node-llama-cpp
ships (node_modules/node-llama-cpp/llama/gitRelease.bundle), at the bundle's commit, CPU only, Release,
into ~/.cache/ferry/llama.cpp-<commit>/ (or $${TOOLS_DIR_ENV}). Offline: git clones the bundle into a
temporary folder, then cmake and Ninja (or make) build only those targets. Needs git, cmake and a C++
compiler (Debian: apt-get install cmake g++ ninja-build). A few minutes on two cores; once.

The cache is complete only once its stamp file (${STAMP_FILE}) is written, last, and the folder
is moved into place in one rename: an interrupted build never looks finished. When the cache is complete
this exits at once.

Options:
  --force      rebuild even when the cache is complete
  --jobs N     parallel compile jobs (default: one per core)
  --verbose    pass cmake's output through instead of a progress bar
  --json       print the folder, commit and each tool's path as JSON
  -h, --help   this text

Exit codes: 0 built or already built, 1 a prerequisite is missing or the build failed, 2 usage error.
`;

/** The process groups of the steps running now. */
const running = new Set<number>();

if (import.meta.main) {
  const { values, positionals } = cli(HELP, {
    force: { type: "boolean", default: false },
    jobs: { type: "string" },
    verbose: { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  if (positionals.length > 0) fail(`unexpected argument ${positionals[0]}\n(--help for more)`, EXIT_USAGE);
  const jobs = values.jobs === undefined ? availableParallelism() : Number(values.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) {
    fail(`--jobs ${values.jobs}: expected a whole number of at least 1\n(--help for more)`, EXIT_USAGE);
  }
  await run(async () => {
    const commit = readBundleCommit(BUNDLE_PATH);
    const dir = toolsDir(commit);
    const problem = cacheProblem(dir, commit);
    let seconds = 0;
    if (problem || values.force) {
      seconds = await build(commit, dir, { jobs, verbose: values.verbose });
    }
    const paths = toolPaths(dir);
    if (values.json) {
      console.log(JSON.stringify({ dir, commit, built: seconds > 0, seconds, tools: paths }, null, 2));
    } else {
      console.log(
        seconds > 0
          ? `built llama.cpp ${commit.slice(0, 12)} in ${seconds.toFixed(0)} s into ${dir}`
          : `llama.cpp ${commit.slice(0, 12)} tools already built in ${dir}`,
      );
      for (const tool of LLAMA_TOOLS) console.log(`  ${paths[tool]}`);
    }
  });
}

/** Whether `cmd --version` runs. */
function has(cmd: string): boolean {
  return spawnSync(cmd, ["--version"], { stdio: "ignore" }).status === 0;
}

/** Clones, configures and builds; moves the finished folder into `dir`; returns the seconds taken. */
async function build(commit: string, dir: string, opts: { jobs: number; verbose: boolean }): Promise<number> {
  const missing = ["git", "cmake"].filter((c) => !has(c));
  const cxx = ["c++", "g++", "clang++"].find(has);
  if (!cxx) missing.push("a C++ compiler (g++ or clang++)");
  if (missing.length > 0) {
    throw new Error(
      `cannot build llama.cpp's tools: ${missing.join(", ")} not found on PATH ` +
        `(Debian: apt-get install git cmake g++ ninja-build)`,
    );
  }
  const ninja = has("ninja");
  const start = performance.now();
  const work = mkdtempSync(join(tmpdir(), "ferry-llama-build-"));
  // The staging folder sits beside the cache so the final rename stays on one file system.
  mkdirSync(dirname(dir), { recursive: true });
  const staging = `${dir}.partial-${process.pid}`;
  const cleanUp = () => {
    rmSync(work, { recursive: true, force: true });
    rmSync(staging, { recursive: true, force: true });
  };
  // Ctrl-C mid-build: the running step's process group is stopped, then the clone, the build folder
  // and any staging folder are removed.
  const interrupted = () => {
    for (const pid of running) {
      try {
        process.kill(-pid, "SIGTERM");
      } catch { /* already gone */ }
    }
    cleanUp();
    process.exit(130);
  };
  process.on("SIGINT", interrupted);
  try {
    const src = join(work, "llama.cpp"), out = join(work, "build");
    say(`cloning ${BUNDLE_PATH} at ${commit.slice(0, 12)} into ${src}`);
    await step("git", ["clone", "--quiet", "--no-checkout", BUNDLE_PATH, src], opts.verbose);
    await step(
      "git",
      ["-C", src, "-c", "advice.detachedHead=false", "checkout", "--quiet", commit],
      opts.verbose,
    );
    const flags = cmakeFlags(ninja);
    say(`configuring (cmake ${flags.join(" ")})`);
    await step("cmake", ["-S", src, "-B", out, ...flags], opts.verbose);
    say(`building ${LLAMA_TOOLS.join(", ")} with ${opts.jobs} jobs (${ninja ? "Ninja" : "make"})`);
    await step(
      "cmake",
      ["--build", out, "--config", "Release", "-j", String(opts.jobs), "--target", ...LLAMA_TOOLS],
      opts.verbose,
      "build",
    );
    rmSync(staging, { recursive: true, force: true });
    mkdirSync(staging);
    for (const tool of LLAMA_TOOLS) copyFileSync(join(out, "bin", tool), join(staging, tool));
    const seconds = (performance.now() - start) / 1000;
    const stamp: ToolsStamp = {
      commit,
      tools: [...LLAMA_TOOLS],
      builtAt: new Date().toISOString(),
      seconds: Math.round(seconds),
      flags,
    };
    // The stamp last, then one rename: the cache is either absent, stale, or complete.
    writeFileSync(join(staging, STAMP_FILE), JSON.stringify(stamp, null, 2) + "\n");
    rmSync(dir, { recursive: true, force: true });
    renameSync(staging, dir);
    return seconds;
  } finally {
    process.off("SIGINT", interrupted);
    cleanUp();
  }
}

function say(line: string): void {
  process.stderr.write(`build-llama: ${line}\n`);
}

/**
 * Runs a command. Verbose: its output passes through. Otherwise its output is kept (the last 40 lines
 * are shown when it fails) and, with `bar`, its `[n/m]` step lines drive a progress bar; when stderr is
 * not a terminal, one line every tenth of the steps.
 */
function step(cmd: string, args: string[], verbose: boolean, bar?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    // A process group of its own, so an interrupt stops the compilers under it too.
    const child = spawn(cmd, args, {
      detached: true,
      stdio: ["ignore", verbose ? "inherit" : "pipe", verbose ? "inherit" : "pipe"],
    });
    if (child.pid !== undefined) running.add(child.pid);
    const tail: string[] = [];
    let meter: ReturnType<typeof progress> | undefined, done = 0, shown = 0;
    let pending = "";
    const onData = (chunk: Uint8Array) => {
      pending += new TextDecoder().decode(chunk);
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 40) tail.shift();
        const s = bar ? buildStep(line) : undefined;
        if (!s) continue;
        meter ??= progress(bar!, s.total, { unit: "step" });
        meter.tick(s.done - done);
        done = s.done;
        if (!process.stderr.isTTY && s.done >= shown + s.total / 10) {
          shown = s.done;
          say(`${s.done}/${s.total} steps`);
        }
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("error", (e) => reject(new Error(`${cmd}: ${e.message}`)));
    child.on("close", (code) => {
      if (child.pid !== undefined) running.delete(child.pid);
      meter?.done();
      if (code === 0) return resolve();
      if (pending) tail.push(pending);
      reject(
        new Error(
          `${cmd} ${args.slice(0, 3).join(" ")} ... exited with ${code}${
            verbose ? "" : `:\n${tail.join("\n")}`
          }`,
        ),
      );
    });
  });
}

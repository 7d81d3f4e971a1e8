/**
 * Where llama.cpp's own command-line tools (llama-quantize, llama-imatrix, llama-perplexity, llama-bench)
 * live once scripts/tools/build-llama.ts has built them from the source node-llama-cpp ships as a git
 * bundle, and whether a build there is complete. Benchmarks find the tools through `findLlamaTools`,
 * which refuses, saying how to build them, when they are absent. No test depends on the tools.
 *
 * A cache folder is valid only when its stamp file names the bundle's commit and every tool is there:
 * build-llama.ts writes the stamp last and moves the folder into place in one rename, so a build that
 * stopped half way never looks like a finished one.
 *
 * @example
 * ```ts
 * import { spawnSync } from "node:child_process";
 * import { findLlamaTools } from "./llama-tools.ts";
 * const tools = findLlamaTools();
 * spawnSync(tools.paths["llama-quantize"], ["in.gguf", "out.gguf", "Q4_K_M"]);
 * ```
 * @module
 */
import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { fileURLToPath } from "node:url";

/** The tools ferry builds, in build order; each is a cmake target of the same name. */
export const LLAMA_TOOLS = ["llama-quantize", "llama-imatrix", "llama-perplexity", "llama-bench"] as const;

/** One of the tools ferry builds. */
export type LlamaTool = typeof LLAMA_TOOLS[number];

/** The environment variable that overrides the cache folder. */
export const TOOLS_DIR_ENV = "FERRY_LLAMA_TOOLS";

/** The stamp file, written last into a finished cache folder. */
export const STAMP_FILE = "ferry-llama-tools.json";

/** The git bundle of llama.cpp's source that node-llama-cpp ships (found from this module, not the working folder). */
export const BUNDLE_PATH = fileURLToPath(
  new URL("../node_modules/node-llama-cpp/llama/gitRelease.bundle", import.meta.url),
);

/** The command that builds the tools, as the refusal prints it. */
export const BUILD_COMMAND = "deno run -A scripts/tools/build-llama.ts";

/** What the stamp file records. */
export interface ToolsStamp {
  /** The llama.cpp commit the tools were built from (the bundle's HEAD). */
  commit: string;
  tools: string[];
  /** ISO time the build finished, and how long it took. */
  builtAt: string;
  seconds: number;
  /** The cmake configure flags used. */
  flags: string[];
}

/** A complete cache folder: the folder, the commit, and each tool's path. */
export interface LlamaTools {
  dir: string;
  commit: string;
  paths: Record<LlamaTool, string>;
}

/**
 * The commit a git bundle pins: the object name of its HEAD reference, read from the bundle's text
 * header (`# v2 git bundle` or v3, then `<sha> <ref>` lines). Throws, naming the file, when the header
 * is not a bundle's or has no HEAD.
 *
 * @example
 * ```ts
 * import { bundleCommit } from "./llama-tools.ts";
 * bundleCommit("# v2 git bundle\n80fb11ac73e66d89eae2c6a91d8a77428fa733ed HEAD\n\nPACK", "x.bundle");
 * // "80fb11ac73e66d89eae2c6a91d8a77428fa733ed"
 * ```
 */
export function bundleCommit(header: string, path: string): string {
  const lines = header.split("\n");
  if (!/^# v[23] git bundle$/.test(lines[0] ?? "")) {
    throw new Error(`${path}: not a git bundle (expected a first line "# v2 git bundle")`);
  }
  for (const line of lines.slice(1)) {
    if (line === "") break;
    const m = /^([0-9a-f]{40}) (\S+)$/.exec(line);
    if (m && m[2] === "HEAD") return m[1];
  }
  throw new Error(`${path}: the bundle's header names no HEAD commit (expected a line "<40 hex> HEAD")`);
}

/**
 * The commit of the bundle at `path` (its first 4 KiB are read; the header is a few lines).
 *
 * @example
 * ```ts
 * import { readBundleCommit } from "./llama-tools.ts";
 * readBundleCommit("node_modules/node-llama-cpp/llama/gitRelease.bundle"); // "80fb11ac..."
 * ```
 */
export function readBundleCommit(path = BUNDLE_PATH): string {
  if (!existsSync(path)) {
    throw new Error(`${path}: no such file (llama.cpp's source ships with node-llama-cpp; run npm install)`);
  }
  const fd = openSync(path, "r");
  try {
    const buf = new Uint8Array(4096);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return bundleCommit(new TextDecoder("latin1").decode(buf.subarray(0, n)), path);
  } finally {
    closeSync(fd);
  }
}

/**
 * The cache folder for a commit: `$FERRY_LLAMA_TOOLS` when set, else `~/.cache/ferry/llama.cpp-<12 hex>`.
 *
 * @example
 * ```ts
 * import { toolsDir } from "./llama-tools.ts";
 * toolsDir("80fb11ac73e66d89eae2c6a91d8a77428fa733ed", {}, "/home/me");
 * // "/home/me/.cache/ferry/llama.cpp-80fb11ac73e6"
 * ```
 */
export function toolsDir(
  commit: string,
  env: Record<string, string | undefined> = process.env,
  home = homedir(),
): string {
  const override = env[TOOLS_DIR_ENV];
  if (override) return override;
  return join(home, ".cache", "ferry", `llama.cpp-${commit.slice(0, 12)}`);
}

/**
 * Why the folder `dir` is not a complete build of `commit`, or undefined when it is: no stamp, a stamp
 * that does not parse or names another commit, or a tool missing.
 *
 * @example
 * ```ts
 * import { cacheProblem } from "./llama-tools.ts";
 * declare const dir: string, commit: string; // the tools folder, and the llama.cpp commit it must hold
 * const why = cacheProblem(dir, commit);
 * if (why) console.log(`rebuilding: ${why}`);
 * ```
 */
export function cacheProblem(dir: string, commit: string): string | undefined {
  const stampPath = join(dir, STAMP_FILE);
  if (!existsSync(stampPath)) return `${dir}: no finished build (no ${STAMP_FILE})`;
  let stamp: Partial<ToolsStamp>;
  try {
    stamp = JSON.parse(readFileSync(stampPath, "utf8"));
  } catch {
    return `${stampPath}: not JSON`;
  }
  if (stamp.commit !== commit) {
    return `${stampPath}: built from llama.cpp ${String(stamp.commit)}, the bundle is at ${commit}`;
  }
  for (const tool of LLAMA_TOOLS) {
    const path = join(dir, tool);
    if (!existsSync(path) || !statSync(path).isFile()) return `${path}: missing`;
  }
  return undefined;
}

/**
 * The tools built from the bundle's commit, or an Error saying to run build-llama.ts when they are not
 * built (or were built from another commit).
 *
 * @example
 * ```ts
 * import { findLlamaTools } from "./llama-tools.ts";
 * const { paths } = findLlamaTools();
 * paths["llama-perplexity"]; // "/home/me/.cache/ferry/llama.cpp-80fb11ac73e6/llama-perplexity"
 * ```
 */
export function findLlamaTools(
  opts: { bundle?: string; env?: Record<string, string | undefined>; home?: string } = {},
): LlamaTools {
  const commit = readBundleCommit(opts.bundle);
  const dir = toolsDir(commit, opts.env, opts.home);
  const problem = cacheProblem(dir, commit);
  if (problem) {
    throw new Error(
      `llama.cpp's tools are not built (${problem}). Build them once (a few minutes, offline) with:\n  ${BUILD_COMMAND}`,
    );
  }
  return { dir, commit, paths: toolPaths(dir) };
}

/**
 * Each tool's path in a cache folder.
 *
 * @example
 * ```ts
 * import { toolPaths } from "./llama-tools.ts";
 * toolPaths("/c")["llama-bench"]; // "/c/llama-bench"
 * ```
 */
export function toolPaths(dir: string): Record<LlamaTool, string> {
  return Object.fromEntries(LLAMA_TOOLS.map((t) => [t, join(dir, t)])) as Record<LlamaTool, string>;
}

/**
 * The cmake configure flags of a CPU-only Release build of just what the tools need: static libraries
 * (so each binary stands alone once moved), no tests, examples, server, network or GPU back ends, and
 * code for this machine's CPU (the cache is per machine).
 *
 * @example
 * ```ts
 * import { cmakeFlags } from "./llama-tools.ts";
 * cmakeFlags(true); // ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", ...]
 * ```
 */
export function cmakeFlags(ninja: boolean): string[] {
  return [
    ...(ninja ? ["-G", "Ninja"] : []),
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DGGML_CCACHE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
  ];
}

/**
 * The step counter of one line of build output: Ninja's `[12/267] Building ...` or make's
 * `[ 45%] Building ...` (then out of 100); undefined for any other line.
 *
 * @example
 * ```ts
 * import { buildStep } from "./llama-tools.ts";
 * buildStep("[12/267] Building CXX object src/llama.cpp.o"); // { done: 12, total: 267 }
 * buildStep("[ 45%] Linking CXX executable bin/llama-bench"); // { done: 45, total: 100 }
 * ```
 */
export function buildStep(line: string): { done: number; total: number } | undefined {
  const ninja = /^\[(\d+)\/(\d+)\]/.exec(line);
  if (ninja) return { done: Number(ninja[1]), total: Number(ninja[2]) };
  const make = /^\[\s*(\d+)%\]/.exec(line);
  if (make) return { done: Number(make[1]), total: 100 };
  return undefined;
}

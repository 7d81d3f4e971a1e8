// The pure parts of finding llama.cpp's tools (measure/llama-tools.ts): the bundle's pinned commit, the
// cache folder, and when a cache counts as a finished build. No tool is built or run here.
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  BUILD_COMMAND,
  buildStep,
  bundleCommit,
  cacheProblem,
  cmakeFlags,
  findLlamaTools,
  LLAMA_TOOLS,
  readBundleCommit,
  STAMP_FILE,
  toolsDir,
} from "../../measure/llama-tools.ts";

const SHA = "80fb11ac73e66d89eae2c6a91d8a77428fa733ed";

/** A folder holding a stamp for `commit` and the given tools (empty executable files). */
function cache(commit: string, tools: readonly string[] = LLAMA_TOOLS): string {
  const dir = mkdtempSync(join(tmpdir(), "ferry-tools-"));
  for (const t of tools) writeFileSync(join(dir, t), ""), chmodSync(join(dir, t), 0o755);
  writeFileSync(join(dir, STAMP_FILE), JSON.stringify({ commit, tools, builtAt: "", seconds: 1, flags: [] }));
  return dir;
}

describe("bundleCommit", () => {
  test("reads HEAD's object name from a v2 or v3 header, past other refs", () => {
    expect(bundleCommit(`# v2 git bundle\n${SHA} HEAD\n\nPACK`, "b")).toBe(SHA);
    const other = "1".repeat(40);
    expect(bundleCommit(`# v3 git bundle\n@object-format=sha1\n${other} refs/heads/x\n${SHA} HEAD\n\n`, "b"))
      .toBe(SHA);
  });
  test("refuses a file that is not a bundle, or one without HEAD, naming the file", () => {
    expect(() => bundleCommit("PK\x03\x04", "x.bundle")).toThrow("x.bundle: not a git bundle");
    expect(() => bundleCommit(`# v2 git bundle\n${SHA} refs/heads/main\n\n${SHA} HEAD`, "y.bundle"))
      .toThrow("y.bundle: the bundle's header names no HEAD commit");
  });
  test("node-llama-cpp's bundle pins one commit", () => {
    expect(readBundleCommit()).toMatch(/^[0-9a-f]{40}$/);
  });
  test("a missing bundle says how to get it", () => {
    expect(() => readBundleCommit("/nonexistent/x.bundle")).toThrow("no such file");
  });
});

test("toolsDir: the env variable wins, else ~/.cache/ferry/llama.cpp-<12 hex>", () => {
  expect(toolsDir(SHA, {}, "/home/me")).toBe("/home/me/.cache/ferry/llama.cpp-80fb11ac73e6");
  expect(toolsDir(SHA, { FERRY_LLAMA_TOOLS: "/opt/llama" }, "/home/me")).toBe("/opt/llama");
});

describe("cacheProblem", () => {
  test("a stamp of the commit and every tool: complete", () => {
    expect(cacheProblem(cache(SHA), SHA)).toBeUndefined();
  });
  test("no stamp (a build that stopped), a bad stamp, another commit, a missing tool: not complete", () => {
    const empty = mkdtempSync(join(tmpdir(), "ferry-tools-"));
    expect(cacheProblem(empty, SHA)).toContain(`no ${STAMP_FILE}`);
    const bad = cache(SHA);
    writeFileSync(join(bad, STAMP_FILE), "{");
    expect(cacheProblem(bad, SHA)).toContain("not JSON");
    expect(cacheProblem(cache("2".repeat(40)), SHA)).toContain(`the bundle is at ${SHA}`);
    expect(cacheProblem(cache(SHA, LLAMA_TOOLS.slice(1)), SHA)).toContain("llama-quantize: missing");
  });
});

test("findLlamaTools finds a complete cache and refuses an absent one with the build command", () => {
  const bundle = join(mkdtempSync(join(tmpdir(), "ferry-bundle-")), "b.bundle");
  writeFileSync(bundle, `# v2 git bundle\n${SHA} HEAD\n\nPACK`);
  const dir = cache(SHA);
  const found = findLlamaTools({ bundle, env: { FERRY_LLAMA_TOOLS: dir } });
  expect(found.commit).toBe(SHA);
  expect(found.paths["llama-perplexity"]).toBe(join(dir, "llama-perplexity"));
  const absent = join(dir, "nothing-here");
  expect(() => findLlamaTools({ bundle, env: { FERRY_LLAMA_TOOLS: absent } })).toThrow(BUILD_COMMAND);
});

test("buildStep reads Ninja's and make's counters and nothing else", () => {
  expect(buildStep("[12/267] Building CXX object src/llama.cpp.o")).toEqual({ done: 12, total: 267 });
  expect(buildStep("[ 45%] Linking CXX executable bin/llama-bench")).toEqual({ done: 45, total: 100 });
  expect(buildStep("-- Configuring done")).toBeUndefined();
});

test("cmakeFlags: a CPU-only Release build without network, tests or server", () => {
  const flags = cmakeFlags(true);
  expect(flags.slice(0, 2)).toEqual(["-G", "Ninja"]);
  expect(cmakeFlags(false)).not.toContain("Ninja");
  for (const f of ["-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_SERVER=OFF"]) {
    expect(flags).toContain(f);
  }
});

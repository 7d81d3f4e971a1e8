// scripts/tools/build-llama.ts's command line, without building anything: usage errors exit 2, and a
// complete cache (here a fake one named by FERRY_LLAMA_TOOLS) is found at once and its tools printed.
import { describe, expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { LLAMA_TOOLS, readBundleCommit, STAMP_FILE } from "../../measure/llama-tools.ts";

const SCRIPT = "scripts/tools/build-llama.ts";

function runScript(args: string[], env: Record<string, string> = {}) {
  const r = spawnSync("bun", [SCRIPT, ...args], { encoding: "utf8", env: { ...process.env, ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe("build-llama.ts", () => {
  crossProcessTest("--help exits 0; a typo, a bad --jobs and an argument exit 2", () => {
    const help = runScript(["--help"]);
    expect(help.code).toBe(0);
    expect(help.out).toContain("llama-perplexity");
    const typo = runScript(["--jbos", "2"]);
    expect(typo.code).toBe(2);
    expect(typo.err).toContain("did you mean --jobs?");
    expect(runScript(["--jobs", "0"]).code).toBe(2);
    expect(runScript(["extra"]).code).toBe(2);
  });

  crossProcessTest("a complete cache is found at once: nothing is built, the paths are printed", () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-tools-"));
    for (const t of LLAMA_TOOLS) writeFileSync(join(dir, t), ""), chmodSync(join(dir, t), 0o755);
    const commit = readBundleCommit();
    writeFileSync(
      join(dir, STAMP_FILE),
      JSON.stringify({ commit, tools: LLAMA_TOOLS, seconds: 1, flags: [] }),
    );
    const r = runScript(["--json"], {
      FERRY_LLAMA_TOOLS: dir,
      PATH: "/nonexistent" + ":" + process.env.PATH,
    });
    expect(r.code).toBe(0);
    const json = JSON.parse(r.out);
    expect(json).toMatchObject({ dir, commit, built: false });
    expect(json.tools["llama-quantize"]).toBe(join(dir, "llama-quantize"));
  });
});

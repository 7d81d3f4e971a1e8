// scripts/tools/compare-llama-quant.ts's command line without llama.cpp's tools: a usage error exits 2,
// and with no tools built it refuses at once (exit 1), naming the command that builds them.
import { expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";

crossProcessTest(
  "compare-llama-quant.ts: bad --windows exits 2; without the tools, exit 1 and the build command",
  () => {
    const run = (args: string[]) =>
      spawnSync("bun", ["scripts/tools/compare-llama-quant.ts", ...args], {
        encoding: "utf8",
        env: {
          ...process.env,
          FERRY_LLAMA_TOOLS: join(mkdtempSync(join(tmpdir(), "ferry-no-tools-")), "none"),
        },
      });
    const usage = run(["--windows", "x"]);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("--windows x");
    const absent = run([]);
    expect(absent.status).toBe(1);
    expect(absent.stderr).toContain("llama.cpp's tools are not built");
    expect(absent.stderr).toContain("scripts/tools/build-llama.ts");
  },
);

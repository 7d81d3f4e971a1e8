// scripts/tools/bench-tab.ts's command line: usage errors exit 2 naming what is wrong, before any
// server or browser starts.
import { expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";

crossProcessTest("bench-tab.ts: --model without --gguf, a bad --threads or an unknown flag exit 2", () => {
  const run = (args: string[]) =>
    spawnSync("bun", ["scripts/tools/bench-tab.ts", ...args], { encoding: "utf8" });
  const alone = run(["--model", "m.lut4"]);
  expect(alone.status).toBe(2);
  expect(alone.stderr).toContain("--model and --gguf go together");
  const threads = run(["--threads", "0"]);
  expect(threads.status).toBe(2);
  expect(threads.stderr).toContain("--threads 0");
  const typo = run(["--modle", "m.lut4"]);
  expect(typo.status).toBe(2);
  expect(typo.stderr).toContain("did you mean --model?");
});

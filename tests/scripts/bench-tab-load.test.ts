// scripts/tools/bench-tab-load.ts's command line: usage errors exit 2 naming what is wrong, before any
// server or browser starts.
import { expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";

crossProcessTest("bench-tab-load.ts: no model, bad --rounds or a checkout without ferry exit 2", () => {
  const run = (args: string[]) =>
    spawnSync("bun", ["scripts/tools/bench-tab-load.ts", ...args], { encoding: "utf8" });
  const none = run([]);
  expect(none.status).toBe(2);
  expect(none.stderr).toContain("no MODEL");
  const rounds = run(["m.lut4", "--rounds", "0"]);
  expect(rounds.status).toBe(2);
  expect(rounds.stderr).toContain("--rounds 0");
  const against = run(["m.lut4", "--against", "/nonexistent"]);
  expect(against.status).toBe(2);
  expect(against.stderr).toContain("--against /nonexistent: no scripts/chat.ts there");
});

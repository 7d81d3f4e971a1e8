// scripts/tools/bench-page-chat.ts's command line: usage errors exit 2 naming the flag, before any
// server or browser starts.
import { expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";

crossProcessTest(
  "bench-page-chat.ts: no model, a bad --runtime or --turns exit 2, naming what is wrong",
  () => {
    const run = (args: string[]) =>
      spawnSync("bun", ["scripts/tools/bench-page-chat.ts", ...args], { encoding: "utf8" });
    const none = run([]);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain("expected the model file");
    const runtime = run(["m.lut4", "--runtime", "node"]);
    expect(runtime.status).toBe(2);
    expect(runtime.stderr).toContain("--runtime node");
    const turns = run(["m.lut4", "--turns", "9"]);
    expect(turns.status).toBe(2);
    expect(turns.stderr).toContain("--turns 9");
  },
);

// scripts/tools/bench-load.ts: usage errors exit 2 naming what is wrong, before any child starts; a round on a
// small lut4 file prints, as JSON, the read, the load and their ratio, the load's CPU time and the first token.
import { expect } from "bun:test";
import { spawnSync } from "node:child_process";
import { crossProcessTest } from "../helpers/fast.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";

const run = (args: string[]) =>
  spawnSync("bun", ["scripts/tools/bench-load.ts", ...args], { encoding: "utf8" });

crossProcessTest(
  "bench-load.ts: no file, a missing one, bad --rounds or a checkout without ferry exit 2",
  async () => {
    const file = await smallLut4();
    expect(run([]).status).toBe(2);
    const missing = run(["/nonexistent.lut4"]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain("/nonexistent.lut4: no such file");
    const rounds = run([file, "--rounds", "0"]);
    expect(rounds.status).toBe(2);
    expect(rounds.stderr).toContain("--rounds 0");
    const against = run([file, "--against", "/nonexistent"]);
    expect(against.status).toBe(2);
    expect(against.stderr).toContain("--against /nonexistent: no engines/mod.ts there");
  },
);

crossProcessTest("bench-load.ts: one round under Bun prints the load beside the read, as JSON", async () => {
  const r = run([await smallLut4(), "--rounds", "1", "--runtimes", "bun", "--prompt", "4", "--json"]);
  expect(r.status).toBe(0);
  const out = JSON.parse(r.stdout);
  expect(out.rows).toHaveLength(1);
  const [row] = out.rows;
  expect(row.runtime).toBe("bun");
  expect(row.read_ms).toBeGreaterThanOrEqual(0);
  expect(row.load_ms).toBeGreaterThan(0);
  expect(row.load_over_read).toBeGreaterThan(0);
  expect(row.load_cpu_s).toBeGreaterThan(0);
  expect(row.first_token_ms).toBeGreaterThan(0);
}, 60_000);

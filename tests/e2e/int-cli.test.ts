// The command line on a lut4 export: scripts/generate.ts streams the integer engine's text, greedy and
// sampled, identically under Deno and Bun; scripts/eval.ts reports its held-out bits per byte as JSON.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { smallLut4 } from "../helpers/lut4-fixture.ts";

const ROOT = join(import.meta.dir, "../..");
const run = (rt: string, args: string[]) =>
  spawnSync(rt, rt === "deno" ? ["run", "-A", ...args] : args, { cwd: ROOT, encoding: "utf8" });

test(
  "generate.ts on a lut4 file: the int engine, greedy and sampled, the same text on Deno and Bun",
  async () => {
    const lut = await smallLut4();
    const greedy = ["scripts/generate.ts", lut, "--prompt", "The jury said", "--max-tokens", "40"];
    const sampled = [...greedy, "--temperature", "0.8", "--top-k", "40", "--min-p", "0.05", "--seed", "11"];
    const out: Record<string, string[]> = {};
    for (const rt of ["deno", "bun"]) {
      out[rt] = [];
      for (const args of [greedy, sampled]) {
        const r = run(rt, args);
        expect(r.status).toBe(0);
        expect(r.stderr).toContain("on the int engine");
        expect(r.stdout.length).toBeGreaterThan(20);
        out[rt].push(r.stdout);
      }
    }
    expect(out.deno).toEqual(out.bun);
    expect(out.bun[0]).not.toBe(out.bun[1]);
  },
  180_000,
);

test("eval.ts FILE --json gives the integer engine's held-out bits per byte", async () => {
  const lut = await smallLut4();
  const r = run("bun", ["scripts/eval.ts", lut, "--windows", "2", "--tokens", "8", "--json"]);
  expect(r.status).toBe(0);
  const j = JSON.parse(r.stdout);
  expect(j.engine).toBe("int");
  expect(j.heldout_bpb).toBeGreaterThan(1.5);
  expect(j.heldout_bpb).toBeLessThan(3.5);
}, 180_000);

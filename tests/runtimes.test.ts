// Zero build, two runtimes: mod.ts loads unchanged under Deno and Bun, and the float reference gives
// the same bits on both.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";

const SCRIPT = `
import { buildModel, createCache, forward, initParams, PRESETS } from "./mod.ts";
const model = buildModel(PRESETS.tiny, initParams(PRESETS.tiny, 4, 0.3));
const logits = forward(model, createCache(model), [256, 70, 101, 114, 114, 121]);
let h = 2166136261;
for (const b of new Uint8Array(logits.buffer)) h = Math.imul(h ^ b, 16777619) >>> 0;
console.log(logits.length, h.toString(16));
`;

test("mod.ts runs under Deno and Bun and both give bit-identical logits", () => {
  const deno = spawnSync("deno", ["eval", "--ext=ts", SCRIPT], { encoding: "utf8" });
  const bun = spawnSync("bun", ["--eval", SCRIPT], { encoding: "utf8" });
  expect(deno.stderr).toBe("");
  expect(deno.status).toBe(0);
  expect(bun.status).toBe(0);
  expect(deno.stdout.trim()).toMatch(/^\d+ [0-9a-f]+$/);
  expect(deno.stdout).toBe(bun.stdout);
});

// Zero build, two runtimes: mod.ts loads unchanged under Deno and Bun, and the float reference gives
// the same bits on both, on the shipped model over full held-out windows and in greedy decoding.
import { expect, test } from "bun:test";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { spawnSync } from "node:child_process";

const TINY = `
import { buildModel, createCache, forward, initParams, PRESETS } from "./mod.ts";
const model = buildModel(PRESETS.tiny, initParams(PRESETS.tiny, 4, 0.3));
const logits = forward(model, createCache(model), [256, 70, 101, 114, 114, 121]);
let h = 2166136261;
for (const b of new Uint8Array(logits.buffer)) h = Math.imul(h ^ b, 16777619) >>> 0;
console.log(logits.length, h.toString(16));
`;

test("mod.ts runs under Deno and Bun and both give bit-identical logits", () => {
  const deno = spawnSync("deno", ["eval", "--ext=ts", TINY], { encoding: "utf8" });
  const bun = spawnSync("bun", ["--eval", TINY], { encoding: "utf8" });
  expect(withoutDenoDownloads(deno.stderr)).toBe("");
  expect(deno.status).toBe(0);
  expect(bun.status).toBe(0);
  expect(deno.stdout.trim()).toMatch(/^\d+ [0-9a-f]+$/);
  expect(deno.stdout).toBe(bun.stdout);
});

// The shipped model on the first and the last of the 64 held-out evaluation windows (256 bytes each,
// every position's 258 logits: a SHA-256 of their f32 bytes), and the greedy 64-token continuation of
// a prompt. The same script runs in this Bun process's children and in Deno.
const SHIPPED = `
import { createHash } from "node:crypto";
import { readCheckpoint } from "./formats/checkpoint/checkpoint.ts";
import { evalWindows, loadBrown } from "./model/corpus.ts";
import { windowLogits } from "./measure/metrics.ts";
import { buildModel } from "./model/qwen3.ts";
import { floatEngineOf } from "./engines/float.ts";
import { generateAll } from "./model/generate.ts";
import { encode } from "./model/tokenizer.ts";
const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
const model = buildModel(run.config, run.model);
const windows = evalWindows((await loadBrown()).heldOut);
for (const w of [windows[0], windows[windows.length - 1]]) {
  const logits = windowLogits(model, w);
  const sha = createHash("sha256").update(new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength));
  console.log(w.length, logits.length, sha.digest("hex"));
}
const ids = await generateAll(floatEngineOf(model), encode("The jury said", { bos: true }), { maxTokens: 64, stopAtEos: false });
console.log(ids.length, ids.join(","));
`;

test(
  "the shipped model: Deno and Bun give the same logits bit for bit over full held-out windows, and the same greedy text",
  () => {
    const deno = spawnSync("deno", ["eval", "--ext=ts", SHIPPED], { encoding: "utf8" });
    const bun = spawnSync("bun", ["--eval", SHIPPED], { encoding: "utf8" });
    expect(withoutDenoDownloads(deno.stderr)).toBe("");
    expect(deno.status).toBe(0);
    expect(bun.stderr).toBe("");
    expect(bun.status).toBe(0);
    const lines = deno.stdout.trim().split("\n");
    expect(lines.length).toBe(3);
    // Every position of the window (BOS and the first 255 bytes predict the 256 bytes) × 258 logits.
    for (const l of lines.slice(0, 2)) expect(l).toMatch(/^256 66048 [0-9a-f]{64}$/);
    expect(lines[0]).not.toBe(lines[1]);
    expect(lines[2]).toMatch(/^64 (\d+,){63}\d+$/);
    expect(bun.stdout).toBe(deno.stdout);
  },
  90_000,
);

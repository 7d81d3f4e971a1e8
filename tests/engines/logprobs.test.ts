// EngineSession.logprobs on the float and integer engines (WebGPU: tests/e2e/webgpu-session.test.ts): the
// float engine's equal an independent f64 log-softmax; the integer engine's are its own integers at
// 2^-16 nats, its normaliser the exp table's inverse of the sampler's masses, so they match its own
// sampler's distribution; both sum (exp) to 1 over the vocabulary, and the top list is ordered.
import { expect, test } from "bun:test";
import { CHECKPOINT, smallLut4 } from "../helpers/lut4-fixture.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { intLogprobs, logNormaliser } from "../../engines/int/logprobs.ts";
import { buildIntModel } from "../../engines/int/model.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import type { TokenLogprobs } from "../../model/engine.ts";
import { expNeg } from "../../kernels/int/tables.ts";

const PROMPT = [256, 84, 104, 101, 32, 106, 117, 114, 121];
const all = (V: number) => Array.from({ length: V }, (_, i) => i);

function expectOrdered(lp: TokenLogprobs) {
  for (let i = 1; i < lp.top.length; i++) {
    const [a, b] = [lp.top[i - 1], lp.top[i]];
    expect(a.logprob > b.logprob || (a.logprob === b.logprob && a.id < b.id)).toBe(true);
  }
}

test("float engine: logprobs equal an independent f64 log-softmax; sum to 1; top ordered", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const s = createFloatEngine(run.config, run.model!, "ferry.ckpt").start();
  const logits = await s.feed(PROMPT, "last"), V = logits.length;
  const x = Array.from(logits), max = Math.max(...x);
  const lse = max + Math.log(x.reduce((sum, v) => sum + Math.exp(v - max), 0));
  const lp = s.logprobs(all(V), 8);
  lp.of.forEach((v, id) => expect(Math.abs(v - (x[id] - lse))).toBeLessThan(1e-12));
  expect(Math.abs(lp.of.reduce((sum, v) => sum + Math.exp(v), 0) - 1)).toBeLessThan(1e-12);
  expect(lp.top.length).toBe(8);
  expect(lp.top[0].id).toBe(x.indexOf(max));
  expect(lp.top[0].id).toBe(s.pick());
  expectOrdered(lp);
  expect(() => s.logprobs([V], 1)).toThrow(RangeError);
  expect(() => createFloatEngine(run.config, run.model!).start().logprobs([0], 1)).toThrow(/nothing fed/);
});

test("integer engine: exact multiples of 2^-16, sum to 1, top[0] is the greedy pick, ordered", async () => {
  const s = (await loadIntEngine(await smallLut4())).start();
  await s.feed(PROMPT, "none");
  const lp = s.logprobs(all(258), 10);
  for (const v of lp.of) expect(Number.isInteger(v * 65536)).toBe(true);
  expect(Math.abs(lp.of.reduce((sum, v) => sum + Math.exp(v), 0) - 1)).toBeLessThan(2e-4);
  expect(lp.top[0].id).toBe(s.pick());
  expect(lp.top.map((t) => t.logprob)).toEqual(lp.top.map((t) => lp.of[t.id]));
  expectOrdered(lp);
});

test("integer engine: its logprobs are its sampler's masses at temperature 1, normalised through the exp table", async () => {
  const path = await smallLut4();
  const exp = buildIntModel((await readLut4(path)).weights).exp;
  const s = (await loadIntEngine(path)).start();
  const logits = Int32Array.from(await s.feed(PROMPT, "last"), (v) => v * 65536); // exact: at 2^-16
  const top = Math.max(...logits), c = logNormaliser(logits, top, exp);
  // The sampler's masses at temperature 1 (Q30 before its scaling) and their sum S.
  const mass = Array.from(logits, (v) => expNeg(exp, Math.min(top - v, 32 << 16)));
  const S = mass.reduce((a, b) => a + b, 0);
  // c is the smallest c with expNeg(c) · S ≤ 2^60: the table's own ln(S / 2^30).
  expect(BigInt(expNeg(exp, c)) * BigInt(S) <= 1n << 60n).toBe(true); // S < 2^53: exact as a number
  expect(BigInt(expNeg(exp, c - 1)) * BigInt(S) > 1n << 60n).toBe(true);
  const lp = s.logprobs(all(258), 0);
  expect(lp.top).toEqual([]);
  lp.of.forEach((v, id) => {
    expect(v * 65536).toBe(logits[id] - top - c);
    expect(Math.abs(Math.exp(v) - mass[id] / S)).toBeLessThan(1e-4);
  });
});

test("intLogprobs: ties rank the lower id first; an id outside the vocabulary is refused", async () => {
  const exp = buildIntModel((await readLut4(await smallLut4())).weights).exp;
  const logits = Int32Array.from([0, 5 << 16, 5 << 16, 1 << 16]);
  const lp = intLogprobs(logits, exp, [3], 3);
  expect(lp.top.map((t) => t.id)).toEqual([1, 2, 3]);
  expect(lp.top[0].logprob).toBe(lp.top[1].logprob);
  expect(() => intLogprobs(logits, exp, [4], 1)).toThrow(RangeError);
});

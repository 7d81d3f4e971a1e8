// The integer engine on the small test model (tests/fixtures/small-model): checked mode (every written
// bound asserted) over held-out windows, bits per byte within a hair of the float model on the same
// weights, prefill equal to decode, the sampler's rules, and refusals before any state changes.
import { expect, test } from "bun:test";
import { smallLut4 } from "../helpers/lut4-fixture.ts";
import { dequantizeLut4, readLut4 } from "../../formats/lut4/lut4.ts";
import { checked } from "../../kernels/int/check.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { bitsPerByte, windowBits, windowInputs } from "../../measure/metrics.ts";
import { buildModel } from "../../model/qwen3.ts";
import { encode } from "../../model/tokenizer.ts";
import { intEngineFromFile, toIntSampling } from "../../engines/int/engine.ts";
import { greedy } from "../../engines/int/sampler.ts";

test("checked mode holds every bound on held-out windows; the engine adds < 1e-3 bits per byte", async () => {
  const file = await readLut4(await smallLut4());
  // The TypeScript kernels assert each bound where it arises (the SIMD ones report saturation counts per
  // call instead; tests/kernels/int-lut.test.ts shows both give the same integers, in checked mode).
  const engine = intEngineFromFile(file, { simd: false });
  const { heldOut } = await loadBrown();
  const windows = evalWindows(heldOut, 2);
  checked.on = true;
  checked.asserts = 0;
  let bits = 0, bytes = 0;
  try {
    for (const w of windows) {
      const logits = await engine.start().feed(windowInputs(w), "all");
      bits += windowBits(logits, w, 258);
      bytes += w.length;
    }
  } finally {
    checked.on = false;
  }
  expect(checked.asserts).toBeGreaterThan(100000);
  const float = bitsPerByte(buildModel(file.config, dequantizeLut4(file)), windows);
  expect(Math.abs(bits / bytes - float)).toBeLessThan(1e-3);
}, 180_000);

test(
  "prefill and decode are the same code: feeding at once or token by token gives the same logits",
  async () => {
    const engine = intEngineFromFile(await readLut4(await smallLut4()));
    const ids = encode("The jury said that", { bos: true });
    const all = await engine.start().feed(ids, "all");
    const s = engine.start();
    for (let t = 0; t < ids.length; t++) {
      const row = await s.feed([ids[t]]);
      expect(Array.from(row)).toEqual(Array.from(all.subarray(t * 258, t * 258 + 258)));
    }
    expect(s.position).toBe(ids.length);
    expect(s.tokens).toEqual(ids);
  },
  180_000,
);

test("greedy takes the lowest id on a tie; top-k 1, min-p 1 and temperature 0 are greedy", async () => {
  expect(greedy(new Int32Array([3, 9, 9, -1, 9]))).toBe(1);
  const engine = intEngineFromFile(await readLut4(await smallLut4()));
  const s = engine.start();
  const logits = await s.feed(encode("The jury said", { bos: true }));
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  expect(s.pick()).toBe(best);
  expect(s.pick({ temperature: 0.8, topK: 1 })).toBe(best);
  for (let seed = 0; seed < 5; seed++) {
    s.seed(seed);
    expect(s.pick({ temperature: 1, minP: 1 })).toBe(best);
  }
}, 180_000);

test("seeded sampling repeats exactly, differs across seeds, and respects top-k", async () => {
  const engine = intEngineFromFile(await readLut4(await smallLut4()));
  const draw = async (seed: number, topK: number) => {
    const s = engine.start();
    s.seed(seed);
    await s.feed(encode("It was", { bos: true }), "none");
    const out: number[] = [];
    for (let i = 0; i < 40; i++) out.push(s.pick({ temperature: 1.5, topK }));
    return { out, logits: await s.feed([], "none") };
  };
  const a = await draw(1, 0), b = await draw(1, 0), c = await draw(2, 0);
  expect(a.out).toEqual(b.out);
  expect(a.out).not.toEqual(c.out);
  // With top-k 3, every draw is one of the 3 largest logits at that position.
  const s = engine.start();
  const logits = await s.feed(encode("It was", { bos: true }));
  const top3 = Array.from(logits.keys()).sort((x, y) => logits[y] - logits[x] || x - y).slice(0, 3);
  s.seed(9);
  for (let i = 0; i < 50; i++) expect(top3).toContain(s.pick({ temperature: 2, topK: 3 }));
}, 180_000);

test("bad tokens, a full context and bad options are refused before the state changes", async () => {
  const engine = intEngineFromFile(await readLut4(await smallLut4()));
  const s = engine.start();
  await s.feed([256, 65]);
  expect(s.feed([66, 999])).rejects.toThrow(/outside/);
  expect(s.position).toBe(2);
  expect(s.feed(new Array(511).fill(65))).rejects.toThrow(/context full/);
  expect(s.position).toBe(2);
  expect(() => s.pick({ temperature: -1 })).toThrow(/temperature/);
  expect(() => toIntSampling({ minP: 2 })).toThrow(/minP/);
  expect(() => engine.start().pick()).toThrow(/nothing fed/);
}, 180_000);

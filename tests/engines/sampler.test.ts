// The integer engine's sampler (engines/int/sampler.ts `sample`) at a real vocabulary: the tokens it
// draws for fixed seeds are pinned (recorded from the insertion-sort ranking it had before it found its
// candidates by radix selection; every tie broken by the lower id), and a draw is linear in the
// vocabulary. The float sampler's twin is tests/model/sample.test.ts.
import { expect, test } from "bun:test";
import process from "node:process";
import { toIntSampling } from "../../engines/int/engine.ts";
import { falls, sample, SAMPLE_KERNEL_ROOM, samplerScratch, seedRng } from "../../engines/int/sampler.ts";
import { createSampleKernel } from "../../kernels/wasm/int-sample.ts";
import { TABLES } from "../../quantize/lut4-quantize.ts";
import { prepareTable } from "../../kernels/int/tables.ts";
import type { SamplingOptions } from "../../model/engine.ts";
import { createRng } from "../../model/random.ts";

/** The exp table every lut4 file holds (quantize/lut4-quantize.ts `makeTables`). */
function expTable() {
  const len = TABLES.expRangeNats * 256 + 2, t = new Int32Array(len);
  for (let i = 0; i < len; i++) t[i] = Math.round(2 ** TABLES.expQ * Math.exp(-i / 256));
  return prepareTable(t, 0);
}

/** Seeded logits in [−8, 8] nats (a sum of four uniforms), on a grid of `step` nats: many exact ties. */
function gridLogits(n: number, seed: number, step: number): Int32Array {
  const r = createRng(seed), out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = Math.round(((r.next() + r.next() + r.next() + r.next() - 2) * 4) / step) * step;
  }
  // The small row: the top logit tied at ids 12 and 44, and at 17, which is never sampled.
  if (n === 50) out[12] = out[17] = out[44] = Math.max(...out);
  return Int32Array.from(out, (v) => Math.round(v * 65536));
}

// [name, options, the ids of 20 draws at 151,936 ids (step 1/64 nat, every 1009th id never sampled), of
// 20 draws at 50 ids (step 1/2 nat, ids 0, 17 and 34 never sampled)], seed 42.
const PINNED: Array<[string, SamplingOptions, string, string]> = [
  [
    "temperature 1",
    { temperature: 1 },
    "50955 102017 7106 101584 47746 63325 76057 37111 45139 132415 79484 82447 7546 71383 24199 17671 6302 107857 78976 23158",
    "12 35 44 44 12 44 44 44 44 44 21 47 12 44 35 44 35 26 47 44",
  ],
  [
    "t 0.8, top-k 40, min-p 0.05",
    { temperature: 0.8, topK: 40, minP: 0.05 },
    "50955 56766 31569 66250 59048 84895 25870 142287 120611 73582 66250 107922 107922 139687 74835 135472 142770 89252 59048 84895",
    "12 44 44 12 35 44 44 44 44 35 12 38 35 35 21 35 35 35 35 35",
  ],
  [
    "top-k 40, min-p 0.05",
    { temperature: 1, topK: 40, minP: 0.05 },
    "50955 59048 101299 31569 93637 117166 56766 87586 105724 68929 110366 66250 68929 99273 57432 57432 73582 139687 135472 101299",
    "12 44 44 12 35 44 44 44 44 35 12 38 35 35 21 35 35 35 35 35",
  ],
  [
    "top-p 0.95",
    { temperature: 1, topP: 0.95 },
    "50955 102017 7106 101584 47746 63325 76057 37111 45139 132415 79484 82447 7546 71383 24199 17671 6302 107857 78976 23158",
    "12 44 44 12 35 44 44 44 44 35 12 38 35 35 21 35 35 35 35 35",
  ],
  ["top-k 1", { temperature: 1, topK: 1 }, "50955 ".repeat(20), "12 ".repeat(20)],
  [
    "min-p 1",
    { temperature: 1, minP: 1 },
    "50955 ".repeat(20),
    "12 44 44 12 35 44 44 44 44 35 12 35 35 35 35 35 35 35 12 44",
  ],
  [
    "t 0.7, top-k 50, top-p 0.9",
    { temperature: 0.7, topK: 50, topP: 0.9 },
    "50955 118521 31569 120611 118521 83903 142287 73582 34955 68929 99273 99273 55346 117166 135472 86835 151890 66508 120611 35625",
    "12 44 44 12 35 44 44 44 44 35 12 35 35 21 35 35 35 35 35 12",
  ],
];

test("the tokens drawn for a seed are pinned: 151,936 and 50 ids with ties, seven option sets", () => {
  const exp = expTable();
  expect(falls(exp)).toBe(true);
  const rows = [[151936, 1, 1 / 64, 1009], [50, 2, 0.5, 17]].map(([n, seed, step, every]) => {
    const never = new Uint8Array(n);
    for (let i = 0; i < n; i += every) never[i] = 1;
    const kernel = createSampleKernel(n, SAMPLE_KERNEL_ROOM.divLen, exp.t.length)!;
    return {
      logits: gridLogits(n, seed, step),
      scratches: [samplerScratch(n, exp, never), samplerScratch(n, exp, never, kernel)],
    };
  });
  const ids = (s: string) => s.trim().split(" ").map(Number);
  // Skipping the ids past the last mass kept (a falling table) and computing every mass draw alike;
  // the pass over the vocabulary in TypeScript and in WebAssembly.
  for (const [falling, which] of [[true, 0], [false, 0], [true, 1], [false, 1]]) {
    const drawn = PINNED.map(([name, options]) => [
      name,
      ...rows.map(({ logits, scratches }) => {
        const rng = new Int32Array(2), o = toIntSampling(options), scratch = scratches[Number(which)];
        seedRng(rng, 0, 42);
        scratch.falling = Boolean(falling);
        return Array.from({ length: 20 }, () => sample(logits, o, rng, scratch));
      }),
    ]);
    expect(drawn).toEqual(PINNED.map(([name, , big, small]) => [name, ids(big), ids(small)]));
  }
});

test("the WebAssembly pass draws what the TypeScript one does: spreads, temperatures, extremes, masks", () => {
  const exp = expTable(), rng = createRng(3), n = 5000;
  const kernel = createSampleKernel(n, SAMPLE_KERNEL_ROOM.divLen, exp.t.length)!;
  const never = Uint8Array.from({ length: n }, (_, i) => (i % 97 === 5 ? 1 : 0));
  const plain = samplerScratch(n, exp, never), fast = samplerScratch(n, exp, never, kernel);
  const rows: Array<[string, () => number]> = [
    ["flat", () => Math.round((rng.next() - 0.5) * 8000)],
    ["spread", () => Math.round((rng.next() - 0.5) * 2 ** 22)],
    ["int32 extremes", () => (rng.next() < 0.5 ? -2147483648 : 2147483647 - Math.floor(rng.next() * 4))],
    ["near the top and far below", () => (rng.next() < 0.1 ? 2 ** 30 : -(2 ** 30))],
  ];
  const options: SamplingOptions[] = [
    { temperature: 1 },
    { temperature: 0.05, topP: 0.9 },
    { temperature: 3.7, minP: 0.01 },
    { temperature: 100, topK: 7 },
    { temperature: 0.8, topK: 40, minP: 0.05 },
  ];
  let draws = 0;
  for (const [name, value] of rows) {
    const logits = Int32Array.from({ length: n }, value);
    for (const o of options) {
      const a = new Int32Array(2), b = new Int32Array(2), q = toIntSampling(o);
      seedRng(a, 0, 9), seedRng(b, 0, 9);
      // Each draw's id, and every candidate's mass and place (the first id where they differ, or −1).
      const firstDiff = (x: Int32Array, y: Int32Array) => x.findIndex((v, i) => v !== y[i]);
      const got: number[][] = [], want: number[][] = [];
      for (let k = 0; k < 12; k++) {
        want.push([sample(logits, q, a, plain), -1, -1]);
        got.push([
          sample(logits, q, b, fast),
          firstDiff(fast.mass, plain.mass),
          firstDiff(fast.ids, plain.ids),
        ]);
      }
      expect([name, o, got, [...b]]).toEqual([name, o, want, [...a]]);
      draws += 12;
    }
  }
  expect(draws).toBe(240);
});

test("falls: the lut4 exp table falls; a rising entry or a step unlike its multiples does not", () => {
  const exp = expTable();
  const rising = prepareTable(Int32Array.from([1 << 30, 5, 6, 0]), 0);
  const odd = prepareTable(Int32Array.from([1 << 30, 5, 4, 0]), 0);
  odd.mul[17] = 0;
  expect([
    falls(exp),
    falls(rising),
    falls(odd),
    falls({ t: new Int32Array(0), mul: new Int32Array(0), half: 0 }),
  ])
    .toEqual([true, false, false, true]);
});

test("a top-k cut keeps exactly the k best ranked, a tie at the k-th broken by the lower ids", () => {
  // 100 ids at 20 levels 0.02 nats apart, five ids a level, scattered over 151,936; all the other ids
  // half a nat lower, with a mass well above 0, so only the cut leaves them out. Top-k 48 keeps the
  // first 9 levels and the 3 lowest ids of the 10th: every one is drawn in 1,000 draws (each has about
  // 1 chance in 60), and no other.
  const V = 151936, r = createRng(5), logits = new Int32Array(V).fill(-32768);
  const ids = new Set<number>();
  while (ids.size < 100) ids.add(Math.floor(r.next() * V));
  const levels = [...ids].map((id, i) => ({ id, level: Math.floor(i / 5) }));
  for (const { id, level } of levels) logits[id] = -Math.round(level * 0.02 * 65536);
  const tenth = levels.filter((x) => x.level === 9).map((x) => x.id).sort((a, b) => a - b);
  const kept = [...levels.filter((x) => x.level < 9).map((x) => x.id), ...tenth.slice(0, 3)];
  const s = samplerScratch(V, expTable()), rng = new Int32Array(2), drawn = new Set<number>();
  const o = toIntSampling({ temperature: 0.7, topK: 48 });
  seedRng(rng, 0, 3);
  for (let i = 0; i < 1000; i++) drawn.add(sample(logits, o, rng, s));
  expect([...drawn].sort((a, b) => a - b)).toEqual(kept.sort((a, b) => a - b));
});

test("a draw is linear in the vocabulary: 4× the ids cost at most 8× the time (quadratic: 16×)", () => {
  // Flat logits (0.05 nats): every id survives min-p, the case the insertion-sort ranking was quadratic in.
  const flat = (n: number) => {
    const r = createRng(n), out = new Int32Array(n);
    for (let i = 0; i < n; i++) out[i] = Math.round((r.next() + r.next() + r.next() + r.next() - 2) * 5677);
    return out;
  };
  const exp = expTable(), V = 151936;
  const sizes = [V, 4 * V].map((n) => ({ logits: flat(n), scratch: samplerScratch(n, exp) }));
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
  for (const options of [{ temperature: 1 }, { temperature: 0.8, topK: 40, minP: 0.05 }]) {
    const o = toIntSampling(options), rng = new Int32Array(2), ms: number[][] = [[], []];
    seedRng(rng, 0, 7);
    // CPU time, which other processes on a busy machine do not add to as they do to wall time (a 2 ms
    // draw preempted once took 6 ms there); each round times each size twice and keeps the faster; the
    // ratio is of the medians over 7 rounds, after one that warms up.
    for (let round = 0; round < 8; round++) {
      for (const [i, { logits, scratch }] of sizes.entries()) {
        let best = Infinity;
        for (let k = 0; k < 2; k++) {
          const t = process.cpuUsage();
          sample(logits, o, rng, scratch);
          const { user, system } = process.cpuUsage(t);
          best = Math.min(best, (user + system) / 1000);
        }
        if (round > 0) ms[i].push(best);
      }
    }
    const [small, big] = ms.map(median), ratio = big / small;
    const said = `${JSON.stringify(options)}: ${big.toFixed(2)} ms ÷ ${small.toFixed(2)} ms`;
    expect(`${said}${ratio <= 8 ? "" : ` = ${ratio.toFixed(1)}× > 8×`}`).toBe(said);
  }
});

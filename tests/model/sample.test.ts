// The float sampler (model/sample.ts `pickToken`, the float and WebGPU engines') at a real vocabulary:
// the tokens it draws for fixed seeds are pinned (recorded from the full sort of the vocabulary it had
// before it ranked only what can change its sums; every tie broken by the lower id), a row whose top
// logit is not finite keeps its old pick, and a draw is linear in the vocabulary. The integer sampler's
// twin is tests/engines/sampler.test.ts.
import { expect, test } from "bun:test";
import process from "node:process";
import type { SamplingOptions } from "../../model/engine.ts";
import { createRng } from "../../model/random.ts";
import { drawToken, EXP_ERROR, NEGLIGIBLE, type Row } from "../../model/draw.ts";
import { createDrawPass } from "../../kernels/wasm/draw-pass.ts";
import { pickToken, topIds } from "../../model/sample.ts";
import { checkSampling, type SamplingChoice } from "../../model/sampling.ts";

/** Seeded logits in [−8, 8] nats (a sum of four uniforms), on a grid of `step` nats: many exact ties. */
function gridLogits(n: number, seed: number, step: number): Float32Array {
  const r = createRng(seed), out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = Math.round(((r.next() + r.next() + r.next() + r.next() - 2) * 4) / step) * step;
  }
  // The small row: the top logit tied at ids 12 and 44, and at 17, which is never sampled.
  if (n === 50) out[12] = out[17] = out[44] = Math.max(...out);
  return out;
}

// [name, options, the ids of 20 draws at 151,936 ids (step 1/64 nat, every 1009th id never sampled), of
// 20 draws at 50 ids (step 1/2 nat, ids 0, 17 and 34 never sampled)], seed 42.
const PINNED: Array<[string, SamplingOptions, string, string]> = [
  [
    "temperature 1",
    { temperature: 1 },
    "91166 55952 46169 131715 17837 89252 68929 43174 105283 128281 23528 34263 40788 33553 101663 136457 34687 43221 39459 29633",
    "44 12 12 38 12 12 12 35 41 35 12 35 2 36 21 38 44 44 44 12",
  ],
  [
    "t 0.8, top-k 40, min-p 0.05",
    { temperature: 0.8, topK: 40, minP: 0.05 },
    "139687 135472 135472 101299 16735 50955 50955 31569 89252 35625 110366 99273 151890 59048 148167 31056 93637 120645 68929 16735",
    "44 12 12 44 12 12 12 12 44 35 12 35 38 38 44 44 35 44 35 12",
  ],
  [
    "top-k 40, min-p 0.05",
    { temperature: 1, topK: 40, minP: 0.05 },
    "97763 135472 135472 117166 16735 50955 50955 122788 89252 60803 142287 93637 151890 59048 31056 101299 66250 55346 120611 135472",
    "44 12 12 44 12 12 12 12 38 35 12 35 47 47 44 44 35 44 35 12",
  ],
  [
    "top-p 0.95",
    { temperature: 1, topP: 0.95 },
    "41540 50086 140469 56286 19768 151722 66250 67420 94653 149572 98473 11941 51158 50248 145757 4205 80229 70409 44574 83622",
    "44 12 12 21 12 12 12 35 38 35 12 35 26 15 21 21 35 44 44 12",
  ],
  ["top-k 1", { temperature: 1, topK: 1 }, "50955 ".repeat(20), "12 ".repeat(20)],
  [
    "min-p 1",
    { temperature: 1, minP: 1 },
    "50955 ".repeat(20),
    "35 12 12 44 12 12 12 12 44 12 12 35 44 44 44 44 35 44 35 12",
  ],
  [
    "t 0.7, top-k 50, top-p 0.9",
    { temperature: 0.7, topK: 50, topP: 0.9 },
    "139687 135472 135472 151722 16735 50955 50955 31569 56766 35625 110366 93637 86835 84895 101299 117166 93637 74835 68929 16735",
    "44 12 12 44 12 12 12 12 44 35 12 35 21 44 44 44 35 44 35 12",
  ],
];

test("the tokens drawn for a seed are pinned: 151,936 and 50 ids with ties, seven option sets", () => {
  const rows = [[151936, 1, 1 / 64, 1009], [50, 2, 0.5, 17]].map(([n, seed, step, every]) => {
    const never = new Uint8Array(n);
    for (let i = 0; i < n; i += every) never[i] = 1;
    return { n, logits: gridLogits(n, seed, step), never };
  });
  const drawn = PINNED.map(([name, options]) => [
    name,
    ...rows.map(({ n, logits, never }) => {
      const rng = createRng(42), choice = checkSampling(options);
      return Array.from({ length: 20 }, () => pickToken(logits, 0, n, choice, rng, never));
    }),
  ]);
  const ids = (s: string) => s.trim().split(" ").map(Number);
  expect(drawn).toEqual(PINNED.map(([name, , big, small]) => [name, ids(big), ids(small)]));
});

test("a row whose top logit is NaN or ±∞ spends one draw and picks the lowest id not masked", () => {
  const never = new Uint8Array([1, 0, 0, 0]), hot = checkSampling({ temperature: 1, topP: 0.5 });
  for (const row of [[0, 1, NaN, 2], [-1, 2, Infinity, 0], [0, -Infinity, -Infinity, -Infinity]]) {
    const rng = createRng(5), twin = createRng(5);
    expect(pickToken(new Float32Array(row), 0, 4, hot, rng, never)).toBe(1);
    twin.next();
    expect(rng.state()).toEqual(twin.state());
  }
});

test("a draw is linear in the vocabulary: 4× the ids cost at most 8× the time (quadratic: 16×)", () => {
  // Flat logits (0.05 nats): every id survives min-p, and all of them are ranked at temperature 1.
  const flat = (n: number) => {
    const r = createRng(n), out = new Float32Array(n);
    for (let i = 0; i < n; i++) out[i] = (r.next() + r.next() + r.next() + r.next() - 2) * 0.0866;
    return out;
  };
  const V = 151936, sizes = [V, 4 * V].map(flat);
  const median = (xs: number[]) => xs.sort((a, b) => a - b)[xs.length >> 1];
  for (const options of [{ temperature: 1 }, { temperature: 0.8, topK: 40, minP: 0.05 }]) {
    const choice = checkSampling(options), rng = createRng(7), ms: number[][] = [[], []];
    // CPU time, which other processes on a busy machine do not add to as they do to wall time (a 2 ms
    // draw preempted once took 6 ms there); each round times each size twice and keeps the faster; the
    // ratio is of the medians over 7 rounds, after one that warms up.
    for (let round = 0; round < 8; round++) {
      for (const [i, logits] of sizes.entries()) {
        let best = Infinity;
        for (let k = 0; k < 2; k++) {
          const t = process.cpuUsage();
          pickToken(logits, 0, logits.length, choice, rng);
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

test("topIds (logprobs' top list) is a stable sort's first k, ties by id, without sorting the vocabulary", () => {
  const rng = createRng(7);
  for (let trial = 0; trial < 300; trial++) {
    const n = 1 + rng.int(200), k = rng.int(25);
    const v = Array.from({ length: n }, () => rng.int(10)); // many ties
    const cmp = (a: number, b: number) => v[b] - v[a];
    const sorted = Array.from({ length: n }, (_, i) => i).sort((a, b) => cmp(a, b) || a - b);
    expect(topIds(n, k, cmp)).toEqual(sorted.slice(0, k));
  }
});

/**
 * The draw's definition, written plainly: every candidate ranked by a full sort (probability, then
 * id), the top k, the top-p prefix, and the walk, in f64 in rank order. Returns the walk for a u, and
 * the u's that put its target on the sums after some candidates (where a close sum could misjudge).
 */
function definition(row: Row, choice: SamplingChoice, never?: Uint8Array) {
  const { logits, off, n, max, temperature } = row;
  const floor = Math.max(choice.minP, NEGLIGIBLE), p = new Float64Array(n), ids: number[] = [];
  for (let i = 0; i < n; i++) {
    if (never?.[i]) continue;
    p[i] = Math.exp((logits[off + i] - max) / temperature);
    if (p[i] >= floor) ids.push(i);
  }
  ids.sort((a, b) => p[b] - p[a] || a - b);
  const ranked = choice.topK > 0 ? ids.slice(0, choice.topK) : ids;
  let sum = 0, kept = 0, mass = 0;
  for (const id of ranked) sum += p[id];
  while (kept < ranked.length && (kept === 0 || mass < choice.topP * sum)) mass += p[ranked[kept++]];
  const walk = (u: number) => {
    let r = u * mass;
    for (let j = 0; j < kept; j++) {
      r -= p[ranked[j]];
      if (r < 0) return ranked[j];
    }
    return ranked[kept - 1];
  };
  const boundaries: number[] = [];
  let c = 0;
  for (let j = 0; j < kept; j++) {
    c += p[ranked[j]];
    if (j % 499 !== 3) continue;
    for (const nudge of [-2e-16, 0, 2e-16]) {
      boundaries.push(Math.min(Math.max(c / mass + nudge, 0), 1 - 2 ** -53));
    }
  }
  return { walk, boundaries };
}

test("drawToken gives the definition's id: rows of 8,000 ids, ties, masks, every option, boundary draws", () => {
  const rng = createRng(11);
  const shapes: Array<[string, (i: number) => number]> = [
    ["flat", () => (rng.next() - 0.5) * 0.2],
    ["spread", () => (rng.next() + rng.next() + rng.next() - 1.5) * 6],
    ["ties on a 1/64 grid", () => Math.round((rng.next() - 0.5) * 512) / 64],
    ["ties on a 1/4096 grid", () => Math.round((rng.next() - 0.5) * 2048) / 4096],
    ["one hot, the rest equal", (i) => (i === 777 ? 9 : 0)],
  ];
  const choices: SamplingOptions[] = [
    { temperature: 1 },
    { temperature: 0.35, topP: 0.9 },
    { temperature: 2.5, topP: 0.5 },
    { temperature: 1, topK: 50 },
    { temperature: 0.8, topK: 40, minP: 0.05 },
    { temperature: 1, minP: 0.3, topP: 0.95 },
    { temperature: 1, topK: 3000, topP: 0.99 },
  ];
  const n = 8000;
  let draws = 0;
  for (const [name, value] of shapes) {
    const logits = Float32Array.from({ length: n }, (_, i) => value(i));
    const never = new Uint8Array(n);
    for (let i = 5; i < n; i += 613) never[i] = 1;
    let max = -Infinity;
    for (let i = 0; i < n; i++) if (!never[i]) max = Math.max(max, logits[i]);
    for (const options of choices) {
      const choice = checkSampling(options),
        row: Row = { logits, off: 0, n, max, temperature: choice.temperature };
      const { walk, boundaries } = definition(row, choice, never);
      const us = [...Array.from({ length: 30 }, () => rng.next()), ...boundaries];
      const got = us.map((u) => drawToken(row, choice, u, never));
      const want = us.map(walk);
      expect([name, options, got]).toEqual([name, options, want]);
      draws += us.length;
    }
  }
  expect(draws).toBeGreaterThan(1500);
});

test("pass 1 (WebAssembly): each bucket's mass within 2^-44 of Math.exp; the floor, the near ones, the masks", () => {
  // One id per bucket, spread over the buckets above the floor 2^-53 (36.7 nats down), at an offset in
  // its bucket that varies; then ids past the floor, and ids masked.
  const buckets = 38647, n = 6000, pass = createDrawPass(n, buckets)!;
  const logits = new Float32Array(n), never = new Uint8Array(n), x: number[] = [];
  for (let i = 0; i < 5000; i++) {
    const b = Math.floor((i * 37600) / 5000);
    logits[i] = Math.fround(-(b + 0.05 + 0.9 * ((i * 0.618) % 1)) / 1024);
    x.push(logits[i]);
  }
  for (let i = 5000; i < 5500; i++) logits[i] = i % 2 ? -40 : -Infinity; // past the floor
  for (let i = 5500; i < n; i++) logits[i] = -1e-3, never[i] = 1; // masked
  const out = -Math.log(NEGLIGIBLE) * 1024 + 2 ** -16;
  pass.mass.fill(0), pass.count.fill(0), pass.logits.set(logits), pass.never.set(never);
  const { at } = pass;
  const m = pass.run(at.logits, at.never, n, 0, -1024, out, out - 2 ** -15, 1, at.mass, at.count, at.result);
  let worst = 0, counted = 0;
  for (const xi of x) {
    const b = Math.trunc(xi * -1024);
    worst = Math.max(worst, Math.abs((pass.mass[b] * Math.exp(-b / 1024)) / Math.exp(xi) - 1));
  }
  for (let b = 0; b < buckets; b++) counted += pass.count[b];
  expect([m, counted, pass.result[0]]).toEqual([5000, 5000, 0]);
  expect(worst).toBeLessThan(2 ** -44);
  expect(EXP_ERROR).toBeGreaterThanOrEqual(2 ** 4 * 2 ** -44);
  // An id exactly at the floor is too near to say: counted in, and counted as near.
  const atFloor = Math.fround(-3.3), nearOut = -Math.log(Math.exp(atFloor)) * 1024 + 2 ** -16;
  pass.logits[0] = atFloor;
  pass.mass.fill(0), pass.count.fill(0);
  const again = pass.run(
    at.logits,
    at.never,
    1,
    0,
    -1024,
    nearOut,
    nearOut - 2 ** -15,
    0,
    at.mass,
    at.count,
    at.result,
  );
  expect([again, pass.result[0]]).toEqual([1, 1]);
});

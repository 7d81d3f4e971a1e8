/**
 * The integer engine's sampler: greedy (the lowest id on a tie), or a draw over integer masses from the
 * exp table after a fixed-point temperature, filtered by min-p, top-k and top-p, driven by a seeded
 * xorshift64 generator with an unbiased bounded draw (rejection, never a modulo). Integer-only, like the
 * forward it follows (tests/kernels/audit.test.ts).
 *
 * Fixed-point options: `tempQ16` is temperature · 2^16 (0: greedy); `minPQ16` and `topPQ16` are
 * probabilities · 2^16 (0 and 65536 switch them off); `topK` is a count (0: all).
 *
 * @example
 * ```ts
 * seedRng(rng, 0, 42);
 * const id = sample(logits, { tempQ16: 52429, topK: 40, minPQ16: 3277, topPQ16: 65536 }, rng, scratch);
 * ```
 * @module
 */
import { divShifted } from "../../kernels/int/isqrt.ts";
import { multiples, mulU16, mulU8 } from "../../kernels/int/mul.ts";
import { bitlen, sat32, shift } from "../../kernels/int/round.ts";
import { expNeg, type LookupTable } from "../../kernels/int/tables.ts";

/** Sampling options as integers. */
export interface IntSampling {
  tempQ16: number;
  topK: number;
  minPQ16: number;
  topPQ16: number;
}

/** Per-vocabulary scratch of the sampler, and the ids it never picks. */
export interface SamplerScratch {
  mass: Int32Array;
  ids: Int32Array;
  table: Int32Array;
  exp: LookupTable;
  /** One byte per id, 1 for an id never picked (model/sample.ts `neverSampled`, made by the adapter). */
  never: Uint8Array;
}

/**
 * Scratch for a vocabulary of `vocab` ids, using the model's exp table; `never` marks the ids never
 * picked (default none).
 */
export function samplerScratch(
  vocab: number,
  exp: LookupTable,
  never: Uint8Array = new Uint8Array(vocab),
): SamplerScratch {
  return { mass: new Int32Array(vocab), ids: new Int32Array(vocab), table: new Int32Array(32), exp, never };
}

/** Seeds the xorshift64 state (two 32-bit halves); the all-zero seed is replaced by 2^64 / φ. */
export function seedRng(rng: Int32Array, hi: number, lo: number): void {
  rng[0] = hi;
  rng[1] = lo;
  if (hi === 0 && lo === 0) {
    rng[0] = -1640531527; // 0x9E3779B9
    rng[1] = 2135587861; // 0x7F4A7C15
  }
}

/** Advances xorshift64 (shifts 13, 7, 17 on the 64-bit state held as two int32) and returns its high word. */
export function nextU32(rng: Int32Array): number {
  let hi = rng[0];
  let lo = rng[1];
  // x ^= x << 13
  hi = hi ^ ((hi << 13) | (lo >>> 19));
  lo = lo ^ (lo << 13);
  // x ^= x >> 7
  lo = lo ^ ((lo >>> 7) | (hi << 25));
  hi = hi ^ (hi >>> 7);
  // x ^= x << 17
  hi = hi ^ ((hi << 17) | (lo >>> 15));
  lo = lo ^ (lo << 17);
  rng[0] = hi;
  rng[1] = lo;
  return hi >>> 0;
}

/**
 * A uniform integer in [0, bound) for 1 ≤ bound < 2^31: the top bitlen(bound − 1) bits of a word,
 * rejected while ≥ bound (so never biased); at most 128 tries, then an error (probability < 2^-128).
 */
export function drawBelow(rng: Int32Array, bound: number): number {
  if (bound <= 1) return 0;
  const bits = bitlen(bound - 1);
  for (let i = 0; i < 128; i++) {
    const r = nextU32(rng) >>> (32 - bits);
    if (r < bound) return r;
  }
  throw new Error("drawBelow: 128 rejections in a row");
}

/** The largest logit's id among those `never` does not mark (default none), the lowest on a tie. */
export function greedy(logits: Int32Array, never?: Uint8Array): number {
  let best = -1;
  for (let i = 0; i < logits.length; i++) {
    if (never !== undefined && never[i] !== 0) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

/**
 * floor(v · f / 2^16) for 0 ≤ v < 2^31 and 0 ≤ f < 2^16: v's high 15 bits times f exactly, plus its
 * low 16 bits times f in two bytes, with nested floors (each product below 2^31).
 */
function mulQ16(v: number, f: number, t: Int32Array): number {
  multiples(f, t, 0);
  const hi = v >> 16;
  const lo = v & 65535;
  const low = (mulU8(t, 0, lo >> 8) + (mulU8(t, 0, lo & 255) >> 8)) >> 8;
  return mulU16(t, 0, hi) + low;
}

/**
 * Picks the next token from logits at 2^-16 nats; ids marked in `s.never` are never picked (they take
 * no mass and are never the greedy choice). Greedy (no draw) when tempQ16 is 0 or topK is 1.
 * Otherwise each token's mass is exp(−(max − logit) / T) from the exp table, scaled so the top token's
 * is exactly 2^M with M = 31 − bitlen(vocab) (the total stays below 2^31); min-p keeps masses ≥
 * minP · 2^M; the rest are ranked by mass (then id); top-k and top-p cut the ranking; one unbiased draw
 * below the kept total walks it.
 */
export function sample(logits: Int32Array, o: IntSampling, rng: Int32Array, s: SamplerScratch): number {
  if (o.tempQ16 <= 0 || o.topK === 1) return greedy(logits, s.never);
  const vocab = logits.length;
  const top = logits[greedy(logits, s.never)];
  let massBits = 31 - bitlen(vocab);
  if (massBits > 30) massBits = 30;
  // Beyond 32 nats the exp table gives 0; cap the scaled difference there.
  const cap = 2097152; // 32 · 2^16
  const thr = o.minPQ16 <= 0 ? 1 : shift(o.minPQ16, 16 - massBits);
  let n = 0;
  for (let i = 0; i < vocab; i++) {
    if (s.never[i] !== 0) continue;
    const scaled = divShifted(sat32(top - logits[i]), 16, o.tempQ16, cap);
    const m = shift(expNeg(s.exp, scaled), 30 - massBits);
    if (m > 0 && m >= thr) {
      s.mass[i] = m;
      // Insertion into the ranking: mass descending, then id ascending (ids arrive in order).
      let j = n;
      while (j > 0 && s.mass[s.ids[j - 1]] < m) {
        s.ids[j] = s.ids[j - 1];
        j = j - 1;
      }
      s.ids[j] = i;
      n = n + 1;
    }
  }
  if (o.topK > 0 && o.topK < n) n = o.topK;
  let total = 0;
  for (let j = 0; j < n; j++) total = total + s.mass[s.ids[j]];
  if (o.topPQ16 > 0 && o.topPQ16 < 65536) {
    const target = mulQ16(total, o.topPQ16, s.table);
    let kept = 0;
    let run = 0;
    while (kept < n && (kept === 0 || run < target)) {
      run = run + s.mass[s.ids[kept]];
      kept = kept + 1;
    }
    n = kept;
    total = run;
  }
  let r = drawBelow(rng, total);
  for (let j = 0; j < n; j++) {
    const m = s.mass[s.ids[j]];
    if (r < m) return s.ids[j];
    r = r - m;
  }
  return s.ids[n - 1];
}

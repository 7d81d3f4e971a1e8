/**
 * One query head's attention over the cached positions, on integers: scores q·k from the multiples
 * tables of q read at the digits of each cached key, a softmax through the exp table with the maximum
 * subtracted, weights normalised to Q15 by one reciprocal, and the value mix from the multiples of each
 * weight read at the digits of the cached values.
 *
 * Cache layout (per layer): keys and values int16, `[position][kv_head][head_dim]`, each (position,
 * kv head) row with its own exponent in `[position][kv_head]` (int16).
 *
 * @example
 * ```ts
 * attendHead(ctx, q16, 0, eq, kvHead, positions, out, 0);   // out: head_dim values at ACC_EXP
 * ```
 * @module
 */
import { assertBound, checked } from "./check.ts";
import { ACC_EXP } from "./gemv.ts";
import { recip16 } from "./isqrt.ts";
import { MUL_TABLE, mulS16, mulU16, multiples } from "./mul.ts";
import { bitlen, I32_MAX, I32_MIN, sat32, shift } from "./round.ts";
import { expNeg, type LookupTable } from "./tables.ts";

/** Exponent of attention scores and logits: 2^-16 nats. */
export const SCORE_EXP = -16;

/** One layer's cache and what attention needs around it. */
export interface AttentionContext {
  headDim: number;
  kvHeads: number;
  /** kv_heads · head_dim: the stride between positions. */
  kvDim: number;
  keys: Int16Array;
  keyExp: Int16Array;
  values: Int16Array;
  valueExp: Int16Array;
  exp: LookupTable;
  /** Scratch: scores and weights per position, q's multiples, one weight's multiples, the mix. */
  scores: Int32Array;
  weights: Int32Array;
  qt: Int32Array;
  pt: Int32Array;
  rt: Int32Array;
  mix: Int32Array;
}

/** Scratch for a cache of `capacity` positions and heads of `headDim`. */
export function attentionScratch(capacity: number, headDim: number) {
  return {
    scores: new Int32Array(capacity),
    weights: new Int32Array(capacity),
    qt: new Int32Array(headDim << 5),
    pt: new Int32Array(MUL_TABLE),
    rt: new Int32Array(MUL_TABLE),
    mix: new Int32Array(headDim),
  };
}

/**
 * round_half_up((hi · 2^8 + lo) · 2^-s), saturated, for int32 lanes hi and lo: a 40-bit sum held as two
 * 32-bit parts. For s > 8 the low lane's bits below 2^8 cannot change the result (nested floors).
 */
export function shiftLanes8(hi: number, lo: number, s: number): number {
  if (s > 8) return shift(hi + (lo >> 8), s - 8);
  if (s === 8) return hi + (lo >> 8) + ((lo >> 7) & 1);
  return sat32(shift(hi, s - 8) + shift(lo, s));
}

/**
 * Attends query head `q[qOff, qOff + head_dim)` (|q| ≤ 32767 at exponent `eq`) to positions
 * 0 … n − 1 of kv head `kvHead`; writes head_dim values at ACC_EXP to `out[oOff, ...)`.
 *
 * Bounds: per position the score's lanes are hi = Σ q · (k >> 8), |hi| ≤ head_dim · 2^22, and
 * lo = Σ q · (k & 255) < head_dim · 2^23, both int32 for head_dim ≤ 256. Weights w ≤ 2^15, their sum
 * T < n · 2^15 + 1 < 2^31 for n < 2^16. Q15 probabilities p sum to at most 2^15 + n, so the mix
 * |Σ p · v| ≤ (2^15 + n) · 32767 < 2^31 for n < 2^15.
 */
export function attendHead(
  ctx: AttentionContext,
  q: Int32Array,
  qOff: number,
  eq: number,
  kvHead: number,
  n: number,
  out: Int32Array,
  oOff: number,
): void {
  const hd = ctx.headDim;
  const qt = ctx.qt;
  const keys = ctx.keys;
  const scores = ctx.scores;
  const check = checked.on;
  let t = 0;
  for (let i = 0; i < hd; i++) {
    multiples(q[qOff + i], qt, t);
    t = t + 32;
  }
  // Scores, and their maximum.
  let best = I32_MIN;
  let ko = 0;
  for (let h = 0; h < kvHead; h++) ko = ko + hd;
  let eo = kvHead;
  const base = SCORE_EXP - eq;
  for (let u = 0; u < n; u++) {
    let hi = 0;
    let lo = 0;
    let tt = 0;
    const end = ko + hd;
    for (let i = ko; i < end; i++) {
      const k = keys[i];
      hi = hi + (qt[tt + 16 + ((k >> 12) & 15)] << 4) + qt[tt + ((k >> 8) & 15)];
      lo = lo + (qt[tt + ((k >> 4) & 15)] << 4) + qt[tt + (k & 15)];
      tt = tt + 32;
    }
    if (check) assertBound(hi <= I32_MAX && hi >= I32_MIN && lo <= I32_MAX && lo >= I32_MIN, "score lanes");
    const s = shiftLanes8(hi, lo, base - ctx.keyExp[eo]);
    scores[u] = s;
    if (s > best) best = s;
    ko = ko + ctx.kvDim;
    eo = eo + ctx.kvHeads;
  }
  // Softmax numerators in Q15 (the maximum gets exactly 2^15), their total, and 2^(L+15) / total.
  const w = ctx.weights;
  let total = 0;
  let emax = I32_MIN;
  eo = kvHead;
  for (let u = 0; u < n; u++) {
    const d = sat32(best - scores[u]);
    const wu = shift(expNeg(ctx.exp, d), 15);
    w[u] = wu;
    total = total + wu;
    const ev = ctx.valueExp[eo];
    if (ev > emax) emax = ev;
    eo = eo + ctx.kvHeads;
  }
  if (check) assertBound(total < 1073741824, `softmax total ${total} ≥ 2^30`);
  const lt = bitlen(total);
  multiples(recip16(total), ctx.rt, 0);
  // The value mix: each position's Q15 weight, aligned to the largest value exponent, times its row.
  const mix = ctx.mix;
  for (let i = 0; i < hd; i++) mix[i] = 0;
  let vo = 0;
  for (let h = 0; h < kvHead; h++) vo = vo + hd;
  eo = kvHead;
  const values = ctx.values;
  for (let u = 0; u < n; u++) {
    const p = shift(shift(mulU16(ctx.rt, 0, w[u]), lt), emax - ctx.valueExp[eo]);
    if (p !== 0) {
      multiples(p, ctx.pt, 0);
      for (let i = 0; i < hd; i++) mix[i] = mix[i] + mulS16(ctx.pt, 0, values[vo + i]);
    }
    vo = vo + ctx.kvDim;
    eo = eo + ctx.kvHeads;
  }
  const toAcc = ACC_EXP - (emax - 15);
  for (let i = 0; i < hd; i++) {
    if (check) assertBound(mix[i] <= I32_MAX && mix[i] >= I32_MIN, "value mix exceeds int32");
    out[oOff + i] = shift(mix[i], toAcc);
  }
}

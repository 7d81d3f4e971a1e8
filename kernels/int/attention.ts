/**
 * One query head's attention over the cached positions, on integers: scores q·k from the multiples
 * tables of q read at the digits of each cached key, a softmax through the exp table with the maximum
 * subtracted, weights normalised to Q15 by one reciprocal, and the value mix from the multiples of each
 * weight read at the digits of the cached values.
 *
 * Cache layout (per layer): keys and values as 12-bit integers (|v| ≤ 2047, stored in int16),
 * `[position][kv_head][head_dim]`, each (position, kv head) row with its own exponent, stored in
 * `[position][kv_head]` (int16). Twelve bits keep every dot product inside int32 with a 15-bit query
 * for head_dim ≤ 32 (the query gets fewer bits for wider heads, `queryBits`), and cost three digits.
 *
 * @example
 * ```ts
 * attendHead(ctx, q, 0, eq, kvHead, positions, out, 0);   // out: head_dim values at ACC_EXP
 * ```
 * @module
 */
import { assertBound, checked } from "./check.ts";
import { ACC_EXP } from "./gemv.ts";
import { recip16 } from "./isqrt.ts";
import { MUL_TABLE, mulS12, mulU16, multiples } from "./mul.ts";
import { bitlen, I32_MIN, sat32, shift } from "./round.ts";
import { expNeg, type LookupTable } from "./tables.ts";

/** Exponent of attention scores and logits: 2^-16 nats. */
export const SCORE_EXP = -16;
/** Magnitude bits of a cached key or value: |v| ≤ 2^11 − 1. */
export const CACHE_BITS = 11;

/** Magnitude bits of a query so that head_dim · (2^bits − 1) · 2047 < 2^31: 15 up to head_dim 32. */
export function queryBits(headDim: number): number {
  const b = 31 - CACHE_BITS - bitlen(headDim - 1);
  return b > 15 ? 15 : b;
}

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
 * Attends query head `q[qOff, qOff + head_dim)` (|q| < 2^queryBits(head_dim), exponent `eq`) to
 * positions 0 … n − 1 of kv head `kvHead`; writes head_dim values at ACC_EXP to `out[oOff, ...)`.
 *
 * Bounds: each dot product |Σ q · k| < head_dim · 2^queryBits · 2^11 ≤ 2^31. Weights w ≤ 2^15, their
 * sum T < n · 2^15 + 1 < 2^31 for n < 2^16. Q15 probabilities p sum to at most 2^15 + n, so the mix
 * |Σ p · v| ≤ (2^15 + n) · 2047 < 2^31.
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
  const first = ko;
  let eo = kvHead;
  const base = SCORE_EXP - eq;
  for (let u = 0; u < n; u++) {
    let dot = 0;
    let tt = 0;
    const end = ko + hd;
    for (let i = ko; i < end; i++) {
      const k = keys[i];
      dot = dot + (qt[tt + 16 + ((k >> 8) & 15)] << 8) + (qt[tt + ((k >> 4) & 15)] << 4) + qt[tt + (k & 15)];
      tt = tt + 32;
    }
    if (check) assertBound(dot < 2147483648 && dot >= -2147483648, `score dot ${dot} outside int32`);
    const s = shift(dot, base - ctx.keyExp[eo]);
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
  let vo = first;
  eo = kvHead;
  const values = ctx.values;
  for (let u = 0; u < n; u++) {
    const p = shift(shift(mulU16(ctx.rt, 0, w[u]), lt), emax - ctx.valueExp[eo]);
    if (p !== 0) {
      const pt = ctx.pt;
      multiples(p, pt, 0);
      for (let i = 0; i < hd; i++) mix[i] = mix[i] + mulS12(pt, 0, values[vo + i]);
    }
    vo = vo + ctx.kvDim;
    eo = eo + ctx.kvHeads;
  }
  const toAcc = ACC_EXP - (emax - 15);
  for (let i = 0; i < hd; i++) {
    if (check) assertBound(mix[i] < 2147483648 && mix[i] >= -2147483648, "value mix exceeds int32");
    out[oOff + i] = shift(mix[i], toAcc);
  }
}

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
 * import { type AttentionContext, attendGroup } from "./attention.ts";
 * declare const ctx: AttentionContext, q: Int32Array, out: Int32Array;
 * declare const eq0: number, eq1: number, kvHead: number, positions: number;
 * attendGroup(ctx, q, 0, eq0, eq1, true, kvHead, positions, out, 0);   // two query heads, one kv head
 * ```
 * @module
 */
import { assertBound, checked, holds } from "./check.ts";
import { ACC_EXP } from "./gemv.ts";
import type { LutSums } from "./gemv-lut.ts";
import { recip16 } from "./isqrt.ts";
import { MUL_TABLE, multiples, mulU16 } from "./mul.ts";
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
  /** Scratch (`attentionScratch`). */
  s: AttentionScratch;
  /**
   * Where the scores may run on WebAssembly SIMD: the instance (null: TypeScript only), the byte address
   * of this layer's key digit planes for kv head 0 (`LutSums.digitsAt`), and the stride between kv heads.
   */
  lut: LutSums | null;
  digitsAt: number;
  digitsHeadStride: number;
  /**
   * Where the value mix may run on WebAssembly SIMD (when `lut` is set): the byte address of this
   * layer's value digit planes for kv head 0 (`LutSums.valueDigitsAt`), the stride between kv heads,
   * the bytes of one (digit, block) plane and of one digit, and the blocks of 16 dimensions per head.
   */
  valueDigitsAt: number;
  valueHeadStride: number;
  valuePlane: number;
  valueDigitStride: number;
  dimBlocks: number;
  /**
   * The exponent mirrors of this layer for kv head 0 (`LutSums.keyExpAt`, `valueExpAt` plus the
   * layer's offset) and the stride between kv heads, in bytes.
   */
  keyExpAt: number;
  valueExpAt: number;
  expHeadStride: number;
}

/** Scratch of attention for up to two query heads at once. */
export interface AttentionScratch {
  scores0: Int32Array;
  scores1: Int32Array;
  /** Multiples tables of the queries: head_dim · 32 per head. */
  qt: Int32Array;
  /** Multiples tables of every position's probability: capacity · 32 per head. */
  pt0: Int32Array;
  pt1: Int32Array;
  /** Value-row offsets of the positions whose probability is not zero for some head. */
  live: Int32Array;
  rt: Int32Array;
}

/** Scratch for a cache of `capacity` positions and heads of `headDim`. */
export function attentionScratch(capacity: number, headDim: number): AttentionScratch {
  return {
    scores0: new Int32Array(capacity),
    scores1: new Int32Array(capacity),
    qt: new Int32Array(headDim << 6),
    pt0: new Int32Array(capacity << 5),
    pt1: new Int32Array(capacity << 5),
    live: new Int32Array(capacity),
    rt: new Int32Array(MUL_TABLE),
  };
}

/** Offset of kv head `kvHead` within a position's row. */
function headOffset(hd: number, kvHead: number): number {
  let o = 0;
  for (let h = 0; h < kvHead; h++) o = o + hd;
  return o;
}

/**
 * Softmax of `scores[0, n)` in place: each becomes its position's Q15 probability, aligned to the largest
 * value exponent of the kv head, which it returns. The numerators w ≤ 2^15 come from the exp table at
 * (max − score) (the maximum gets exactly 2^15), their total T < 2^30 is asserted, and
 * p = shift(w · R, bitlen(T)) with R = floor(2^(bitlen(T)+15) / T), read from R's multiples.
 */
function probabilities(ctx: AttentionContext, scores: Int32Array, n: number, kvHead: number): number {
  let best = I32_MIN;
  for (let u = 0; u < n; u++) if (scores[u] > best) best = scores[u];
  let total = 0;
  let emax = I32_MIN;
  let eo = kvHead;
  for (let u = 0; u < n; u++) {
    const wu = shift(expNeg(ctx.exp, sat32(best - scores[u])), 15);
    scores[u] = wu;
    total = total + wu;
    const ev = ctx.valueExp[eo];
    if (ev > emax) emax = ev;
    eo = eo + ctx.kvHeads;
  }
  if (checked.on && !holds(total < 1073741824)) assertBound(false, `softmax total ${total} ≥ 2^30`);
  const lt = bitlen(total);
  multiples(recip16(total), ctx.s.rt, 0);
  eo = kvHead;
  for (let u = 0; u < n; u++) {
    scores[u] = shift(shift(mulU16(ctx.s.rt, 0, scores[u]), lt), emax - ctx.valueExp[eo]);
    eo = eo + ctx.kvHeads;
  }
  return emax;
}

/**
 * Attends one or two query heads that share kv head `kvHead` (GQA), reading each cached key and value
 * once for both: query head j is `q[qOff + j·head_dim, … + head_dim)` with |q| < 2^queryBits(head_dim)
 * at exponent `eqs[j]`, over positions 0 … n − 1. Writes head_dim values per head at ACC_EXP to
 * `out[oOff + j·head_dim, …)`.
 *
 * Bounds: each dot product |Σ q · k| < head_dim · 2^queryBits · 2^11 ≤ 2^31. Weights w ≤ 2^15, their
 * sum T < n · 2^15 + 1 < 2^31 for n < 2^16. Q15 probabilities p sum to at most 2^15 + n, so the mix
 * |Σ p · v| ≤ (2^15 + n) · 2047 < 2^31. All three are asserted in checked mode.
 */
export function attendGroup(
  ctx: AttentionContext,
  q: Int32Array,
  qOff: number,
  eq0: number,
  eq1: number,
  two: boolean,
  kvHead: number,
  n: number,
  out: Int32Array,
  oOff: number,
): void {
  const hd = ctx.headDim;
  if (ctx.lut !== null) {
    attendLut(ctx, q, qOff, eq0, kvHead, n, out, oOff);
    if (two) attendLut(ctx, q, qOff + hd, eq1, kvHead, n, out, oOff + hd);
    return;
  }
  const sc = ctx.s;
  const qt = sc.qt;
  const keys = ctx.keys;
  const check = checked.on;
  const heads = two ? hd + hd : hd;
  let t = 0;
  for (let i = 0; i < heads; i++) {
    multiples(q[qOff + i], qt, t);
    t = t + 32;
  }
  const second = hd << 5; // the second head's tables follow the first's
  const first = headOffset(hd, kvHead);
  // Scores: q · k for each cached position.
  let ko = first;
  let eo = kvHead;
  for (let u = 0; u < n; u++) {
    let dot0 = 0;
    let dot1 = 0;
    let tt = 0;
    const end = ko + hd;
    for (let i = ko; i < end; i++) {
      const k = keys[i];
      const d2 = 16 + ((k >> 8) & 15);
      const d1 = (k >> 4) & 15;
      const d0 = k & 15;
      dot0 = dot0 + (qt[tt + d2] << 8) + (qt[tt + d1] << 4) + qt[tt + d0];
      if (two) dot1 = dot1 + (qt[tt + second + d2] << 8) + (qt[tt + second + d1] << 4) + qt[tt + second + d0];
      tt = tt + 32;
    }
    if (
      check && !holds(dot0 < 2147483648 && dot0 >= -2147483648 && dot1 < 2147483648 && dot1 >= -2147483648)
    ) {
      assertBound(false, `score dot outside int32`);
    }
    const ek = ctx.keyExp[eo];
    sc.scores0[u] = shift(dot0, SCORE_EXP - eq0 - ek);
    if (two) sc.scores1[u] = shift(dot1, SCORE_EXP - eq1 - ek);
    ko = ko + ctx.kvDim;
    eo = eo + ctx.kvHeads;
  }
  const emax = probabilities(ctx, sc.scores0, n, kvHead);
  if (two) probabilities(ctx, sc.scores1, n, kvHead);
  // Multiples tables of the probabilities, only for positions some head gives a non-zero one (the
  // others add nothing), packed in order, with each one's value-row offset.
  const pt0 = sc.pt0;
  const pt1 = sc.pt1;
  const live = sc.live;
  let count = 0;
  let tp = 0;
  let vo = first;
  for (let u = 0; u < n; u++) {
    const p0 = sc.scores0[u];
    const p1 = two ? sc.scores1[u] : 0;
    if (p0 !== 0 || p1 !== 0) {
      multiples(p0, pt0, tp);
      if (two) multiples(p1, pt1, tp);
      live[count] = vo;
      count = count + 1;
      tp = tp + 32;
    }
    vo = vo + ctx.kvDim;
  }
  // The value mix, one dimension at a time over those positions, both heads from one read of each value.
  const values = ctx.values;
  const toAcc = ACC_EXP - (emax - 15);
  for (let i = 0; i < hd; i++) {
    let m0 = 0;
    let m1 = 0;
    tp = 0;
    for (let j = 0; j < count; j++) {
      const v = values[live[j] + i];
      const d2 = 16 + ((v >> 8) & 15);
      const d1 = (v >> 4) & 15;
      const d0 = v & 15;
      m0 = m0 + (pt0[tp + d2] << 8) + (pt0[tp + d1] << 4) + pt0[tp + d0];
      if (two) m1 = m1 + (pt1[tp + d2] << 8) + (pt1[tp + d1] << 4) + pt1[tp + d0];
      tp = tp + 32;
    }
    if (check && !holds(m0 < 2147483648 && m0 >= -2147483648 && m1 < 2147483648 && m1 >= -2147483648)) {
      assertBound(false, "value mix exceeds int32");
    }
    out[oOff + i] = shift(m0, toAcc);
    if (two) out[oOff + hd + i] = shift(m1, toAcc);
  }
}

/**
 * Writes a query head's digit tables at `lut.planesAt`: first the table of the low and middle digits,
 * entry u = u · q_e, then the top digit's, entry u = (u < 8 ? u : u − 16) · q_e, at the address it
 * returns; 48 bytes per dimension each (bits 0–7, 8–15, 16–23), by the module's `planes_digits`.
 * |q_e| < 2^15, so every entry lies in (−2^19, 2^19).
 */
function queryPlanes(q: Int32Array, qOff: number, hd: number, lut: LutSums): number {
  const mem = lut.mem32;
  let j = lut.inIndex;
  let top = lut.planesAt;
  for (let i = qOff; i < qOff + hd; i++) {
    mem[j] = q[i];
    j = j + 1;
    top = top + 48;
  }
  lut.planes_digits(lut.inAt, hd, lut.planesAt, top);
  return top;
}

/**
 * One query head's attention on WebAssembly SIMD, the same integers as `attendGroup`'s TypeScript loops:
 * the query's digit tables (`queryPlanes`), the scores from them read at the keys' digit planes
 * (`scores`: one `i8x16.swizzle` per plane, 16 positions at a time), the softmax (`softmax`, the same
 * exp table, reciprocal and rounding as `probabilities`), the probabilities' tables (`planes_unsigned`)
 * and the value mix read at the values' digit planes (`mix`, 16 dimensions at a time, on v + 2048, so
 * 2048 · Σ p comes off after), then the shift to ACC_EXP. The module keeps everything in 32 bits: |dot| < 2^31 by `queryBits`, the softmax total
 * below 2^30 (checked mode asserts it, and that no difference saturated), and the mix
 * |Σ p · v| ≤ (2^15 + n) · 2047 < 2^31, as in `attendGroup`.
 */
function attendLut(
  ctx: AttentionContext,
  q: Int32Array,
  qOff: number,
  eq: number,
  kvHead: number,
  n: number,
  out: Int32Array,
  oOff: number,
): void {
  const lut = ctx.lut!;
  const hd = ctx.headDim;
  const mem = lut.mem32;
  const topAt = queryPlanes(q, qOff, hd, lut);
  let keys = ctx.digitsAt;
  let codes = ctx.valueDigitsAt;
  let keyExp = ctx.keyExpAt;
  let valueExp = ctx.valueExpAt;
  for (let h = 0; h < kvHead; h++) {
    keys = keys + ctx.digitsHeadStride;
    codes = codes + ctx.valueHeadStride;
    keyExp = keyExp + ctx.expHeadStride;
    valueExp = valueExp + ctx.expHeadStride;
  }
  lut.scores(lut.planesAt, topAt, keys, n, hd, keyExp, SCORE_EXP - eq, lut.scoresAt, lut.sumsAt);
  const emax = lut.softmax(
    lut.scoresAt,
    n,
    lut.expTAt,
    lut.expMulAt,
    lut.expLen1,
    valueExp,
    lut.inAt,
    lut.rtAt,
    lut.statAt,
  );
  if (checked.on && !holds(mem[lut.statIndex] < 1073741824 && mem[lut.statIndex + 1] === 0)) {
    assertBound(false, `softmax total ${mem[lut.statIndex]} ≥ 2^30 or a score difference saturates`);
  }
  lut.planes_unsigned(lut.inAt, n, lut.probAt);
  lut.mix(lut.probAt, codes, n, ctx.dimBlocks, ctx.valuePlane, ctx.valueDigitStride, lut.outAt);
  // The mix read the values in offset binary: Σ p · (v + 2048) − 2048 · Σ p = Σ p · v (|·| < 2^28).
  const offset = mem[lut.statIndex + 2] << 11;
  const toAcc = ACC_EXP - (emax - 15);
  let j = lut.outIndex;
  for (let i = oOff; i < oOff + hd; i++) {
    out[i] = shift(mem[j] - offset, toAcc);
    j = j + 1;
  }
}

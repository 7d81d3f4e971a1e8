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
   * Where the module's attention reads the keys (`writeHeadTask`, when the engine serves on WebAssembly
   * SIMD): the byte address of this layer's key digit planes for kv head 0 (`LutSums.digitsAt`), and
   * the stride between kv heads.
   */
  digitsAt: number;
  digitsHeadStride: number;
  /**
   * Where it reads the values: the byte address of this layer's value digit planes for kv head 0
   * (`LutSums.valueDigitsAt`), the stride between kv heads, the bytes of one (digit, block) plane and
   * of one digit, and the blocks of 16 dimensions per head.
   */
  valueDigitsAt: number;
  valueHeadStride: number;
  valueDimStride: number;
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

/** Bytes of one task of the module's `attend_heads`: eight int32 (`writeHeadTask` names them). */
export const TASK_BYTES = 32;

/**
 * Writes, at byte `taskAt`, the module's task (kernels/wasm/int-attention.ts `attend_heads`) of one
 * query head: its query at byte `qAt` (head_dim int32 at exponent `eq`, |q| < 2^queryBits), over the
 * first `n` cached positions of kv head `kvHead` in `ctx`'s digit planes and exponent mirrors, its
 * head_dim outputs at ACC_EXP to byte `outAt`: the same integers as `attendGroup`.
 */
export function writeHeadTask(
  ctx: AttentionContext,
  mem32: Int32Array,
  taskAt: number,
  qAt: number,
  eq: number,
  kvHead: number,
  n: number,
  outAt: number,
): void {
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
  const i = taskAt >> 2;
  mem32[i] = qAt;
  mem32[i + 1] = SCORE_EXP - eq;
  mem32[i + 2] = keys;
  mem32[i + 3] = codes;
  mem32[i + 4] = keyExp;
  mem32[i + 5] = valueExp;
  mem32[i + 6] = n;
  mem32[i + 7] = outAt;
}

/**
 * Runs the tasks at `tasks`, `tasks + stride`, … below `end` (`writeHeadTask`) on this thread, in the
 * work area `work` (thread 0's is `lut.attendAt`); checked mode turns a fault into the bound error.
 */
export function attendTasks(
  ctx: AttentionContext,
  lut: LutSums,
  tasks: number,
  end: number,
  stride: number,
  work: number,
): void {
  const faults = lut.attend_heads(
    tasks,
    end,
    stride,
    work,
    ctx.headDim,
    lut.attendPositions,
    lut.expTAt,
    lut.expMulAt,
    lut.expLen1,
    ctx.dimBlocks,
    ctx.valueDimStride,
    ctx.valueDigitStride,
  );
  if (checked.on && !holds(faults === 0)) {
    assertBound(false, `attention: ${faults} softmax totals ≥ 2^30 or saturated shifts`);
  }
}

/**
 * The integer-only Qwen3 forward: one token per `step`, or up to PREFILL_SLOTS positions per `prefill`
 * step through every projection at once (the same integers), using only additions, shifts, comparisons
 * and table look-ups (tests/kernels/audit.test.ts proves the absence of
 * `*`, `/`, `%`, floats and `Math`). Every kernel lives in kernels/int/; this module wires them in the
 * Qwen3 dataflow: RMSNorm → q, k, v → per-head q/k RMSNorm and gain → RoPE → GQA attention over a
 * 12-bit KV cache → o → residual; RMSNorm → gate, up → SiLU(gate) · up → down → residual; final norm →
 * head (tied or separate) → logits at 2^-16 nats. The model and state it steps are engines/int/model.ts.
 *
 * @example
 * ```ts
 * import { step } from "./forward.ts";
 * import { buildIntModel, newState } from "./model.ts";
 * import { greedy } from "./sampler.ts";
 * import type { Lut4Weights } from "../../quantize/lut4-types.ts";
 * declare const weights: Lut4Weights, prompt: number[];
 * const model = buildIntModel(weights);       // weights from formats/lut4/lut4.ts
 * const state = newState(model);
 * for (const id of prompt) step(model, state, id);   // or, with the module: prefill(model, state, prompt, 0, n)
 * greedy(state.logits);                        // the next token (sampler.ts)
 * ```
 * @module
 */
import { ACC_EXP, activationTables, gemv, type PreparedMatrix } from "../../kernels/int/gemv.ts";
import {
  attendGroup,
  attendTasks,
  CACHE_BITS,
  SCORE_EXP,
  TASK_BYTES,
  writeHeadTask,
} from "../../kernels/int/attention.ts";
import { gemvLanes, gemvLut, inputPlanes, type LutSums } from "../../kernels/int/gemv-lut.ts";
import { assertBound, checked, holds } from "../../kernels/int/check.ts";
import {
  GATED,
  type GemvPool,
  NORM,
  NORM_ROPE,
  QUANTIZE_HEADS,
  queueAttention,
  queueCall,
  queueGemv,
  queueHeadsByThread,
  runCall,
  runQueued,
} from "./threads.ts";
import { mulS16, mulScale, multiples } from "../../kernels/int/mul.ts";
import { applyGain, NORM_EXP } from "../../kernels/int/norm.ts";
import { ropeHead } from "../../kernels/int/rope.ts";
import { quantize16, shift } from "../../kernels/int/round.ts";
import { silu } from "../../kernels/int/tables.ts";
import { type IntLayer, type IntModel, type IntState, LANES_MAX } from "./model.ts";
import { addResidual, fillDigits, norm, quantize, useSlot } from "./simd.ts";

/** Exponent of the residual stream. */
export const RESIDUAL_EXP = -16;
/** Exponent of the logits (nats). */
export const LOGIT_EXP = SCORE_EXP;

/** Writes embedding row `id` at RESIDUAL_EXP into `x`. */
function embedRow(m: IntModel, id: number, x: Int32Array): void {
  const e = m.embed;
  const codes = m.embedBytes;
  const scales = m.embedScales;
  const stride = m.embedStride;
  let b = m.embedRow[id];
  let s = m.embedScaleRow[id];
  let c = 0;
  for (let g = 0; g < (m.width >> 5); g++) {
    const scale = scales[s];
    const mant = scale & 15;
    const toRes = RESIDUAL_EXP - (e.expBase + (scale >> 4) - 4);
    for (let j = 0; j < 16; j++) {
      const byte = codes[b];
      x[c] = shift(mulScale((byte & 15) - 8, mant), toRes);
      x[c + 1] = shift(mulScale((byte >> 4) - 8, mant), toRes);
      c = c + 2;
      b = b + stride;
    }
    s = s + stride;
  }
}

/**
 * Per-head q/k path: RMSNorm of `v[off, off + head_dim)` (int32 at `e`), the stored gain, requantised
 * to 16 bits, then RoPE at table offset `ropeAt`, requantised to `bits` bits. Returns the exponent.
 */
function normRope(
  m: IntModel,
  v: Int32Array,
  vAt: number,
  off: number,
  e: number,
  gain: Int32Array,
  gainExp: number,
  ropeAt: number,
  bits: number,
): number {
  const s = m.s;
  norm(m, v, vAt, off, e, m.normHead, s.head, s.at.head, 0);
  applyGain(s.head, 0, m.headDim, gain, v, off);
  const eg = quantize(m, v, vAt, off, m.headDim, NORM_EXP + gainExp, v, vAt, off, 15);
  const lut = m.lut;
  if (lut !== null && (m.half & 3) === 0 && vAt >= 0) {
    const table = ropeAt << 2;
    lut.rope(vAt + (off << 2), m.half, lut.ropeCosAt + table, lut.ropeSinAt + table);
  } else {
    ropeHead(v, off, m.half, m.ropeCos, m.ropeSin, ropeAt, s.rope);
  }
  return quantize(m, v, vAt, off, m.headDim, eg, v, vAt, off, bits);
}

/**
 * Whether the module serves the current slot's head work (`norm_rope`, `quantize_heads`): its vectors
 * are the module's views and the head width suits its four lanes.
 */
function headsOnModule(m: IntModel): boolean {
  const lut = m.lut;
  return lut !== null && (m.half & 3) === 0 && m.s.at.q >= 0 && m.s.at.head >= 0 &&
    ((m.layers.length << 1) - 1) < lut.tablesAt.length;
}

/**
 * Byte address of batch slot `b`'s exponents in the module: its q heads', k heads' and v heads', then
 * its gated product's shift (`gatedShiftOf`).
 */
function headExpsOf(m: IntModel, lut: LutSums, b: number): number {
  const slotBytes = (m.heads + m.kvHeads + m.kvHeads + 1) << 2; // and the slot's gated product's shift
  let at = lut.headExpsAt;
  for (let i = 0; i < b; i++) at = at + slotBytes;
  return at;
}

/**
 * Runs the module call of kind `kind` (threads.ts `NORM` … `GATED`) whose arguments are in `m.s.call`:
 * queued on the pool for thread `t` (its results read after the dispatch), or with `t` −1 here and now.
 */
function slotCall(m: IntModel, kind: number, t: number): void {
  if (t >= 0) queueCall(m.pool!, t, kind, m.s.call);
  else runCall(m.lut!, kind, m.s.call);
}

/** The thread that takes the next slot after thread `t`'s, in turn (`prepareHeads`, `gateSlots`, `normSlots`). */
function nextThread(pool: GemvPool, t: number): number {
  return t + 1 === pool.threads ? 0 : t + 1;
}

/**
 * `normRope` of each of `heads` heads of `v` (at byte `vAt` in the module's memory, or −1; at ACC_EXP),
 * with the gain `gain` (the module's copy: table `table` of `LutSums.tablesAt`), to `bits` bits at the
 * current slot's position; their exponents into `exps`. On the module's `norm_rope`, one call for all
 * the heads, where it serves (`headsOnModule`), the exponents through byte `expsAt`; with a thread
 * `t` ≥ 0 that call is queued on the pool for thread t instead, and `exps` filled after the dispatch
 * (`readHeadExps`). Else head by head: the same integers.
 */
function rotateHeads(
  m: IntModel,
  v: Int32Array,
  vAt: number,
  heads: number,
  gain: Int32Array,
  gainExp: number,
  table: number,
  bits: number,
  exps: Int32Array,
  expsAt: number,
  t: number,
): void {
  const lut = m.lut;
  const s = m.s;
  if (lut !== null && headsOnModule(m)) {
    const plan = m.normHead;
    const rope = s.cur.ropeAt << 2;
    const args = s.call;
    args[0] = vAt;
    args[1] = heads;
    args[2] = m.headDim;
    args[3] = ACC_EXP;
    args[4] = plan.bits;
    args[5] = plan.epsN;
    args[6] = plan.epsExp;
    args[7] = s.at.normY;
    args[8] = s.at.head;
    args[9] = lut.tablesAt[table];
    args[10] = NORM_EXP + gainExp;
    args[11] = lut.ropeCosAt + rope;
    args[12] = lut.ropeSinAt + rope;
    args[13] = bits;
    args[14] = expsAt;
    slotCall(m, NORM_ROPE, t);
    if (t >= 0) return;
    let j = expsAt >> 2;
    for (let h = 0; h < heads; h++) {
      exps[h] = lut.mem32[j];
      j = j + 1;
    }
    return;
  }
  let off = 0;
  for (let h = 0; h < heads; h++) {
    exps[h] = normRope(m, v, vAt, off, ACC_EXP, gain, gainExp, s.cur.ropeAt, bits);
    off = off + m.headDim;
  }
}

/**
 * Feeds one token at position `st.pos`: appends its keys and values, leaves the next token's logits in
 * `st.logits`, and advances the position. Refuses a full context and an id outside the vocabulary
 * before changing anything.
 */
export function step(m: IntModel, st: IntState, id: number): void {
  if (st.pos >= m.maxPositions) throw new RangeError(`context full: ${m.maxPositions} positions`);
  if (!(id >= 0 && id < m.vocab && (id | 0) === id)) {
    throw new RangeError(`token id ${id} is outside [0, ${m.vocab})`);
  }
  embedRow(m, id, m.s.x);
  startCursor(m, st, st.pos);
  // The batch of one: the same layer dataflow as `prefill`'s.
  for (let l = 0; l < m.layers.length; l++) {
    attentionBatch(m, st, l, 1);
    mlpBatch(m, m.layers[l], 1);
    nextLayer(m);
  }
  headLogits(m, st);
  st.tokens.push(id);
  st.pos = st.pos + 1;
}

/**
 * Points the step cursor at position `st.pos` of layer 0: its offsets in the RoPE tables, the KV cache
 * and the exponents, and, when the SIMD attention runs, in the digit planes (rewritten from `st`'s
 * cache first when they hold another state's).
 */
function startCursor(m: IntModel, st: IntState, pos: number): void {
  const c = m.s.cur;
  c.pos = pos;
  c.ropeAt = 0;
  c.cacheAt = 0;
  c.expAt = 0;
  for (let p = 0; p < pos; p++) {
    c.ropeAt = c.ropeAt + m.half;
    c.cacheAt = c.cacheAt + m.kvDim;
    c.expAt = c.expAt + m.kvHeads;
  }
  c.la = 0;
  const lut = m.lut;
  // SIMD scores need the keys' digit planes; they hold the last stepped state's cache.
  c.digits = lut !== null && m.digitBytes > 0 && m.headDim <= 128;
  c.digitsAt = 0;
  c.laneAt = 0;
  c.valuesAt = 0;
  c.valueRowAt = 0;
  c.expsAt = 0;
  if (lut !== null && c.digits) {
    if (m.digitOwner !== st) fillDigits(m, lut, st);
    c.digitsAt = lut.digitsAt;
    c.valuesAt = lut.valueDigitsAt;
    c.laneAt = pos & 15;
    c.valueRowAt = (pos & 15) << 4;
    for (let p = 16; p <= pos; p = p + 16) {
      c.laneAt = c.laneAt + m.digitsBlock;
      c.valueRowAt = c.valueRowAt + m.valueBlock;
    }
  }
}

/** Moves the step cursor to the next layer's matrices, digit planes and exponent mirrors. */
function nextLayer(m: IntModel): void {
  const c = m.s.cur;
  c.la = c.la + 7;
  c.digitsAt = c.digitsAt + m.digitsLayerStride;
  c.valuesAt = c.valuesAt + m.valueLayerStride;
  c.expsAt = c.expsAt + m.expLayerStride;
}

/**
 * Readies `n` values of `a` (at byte `aAt` in the module's memory, or −1) as a product's input: the
 * module's input planes, or the TypeScript kernels' activation tables in `tab`.
 */
function productInput(m: IntModel, a: Int32Array, aAt: number, n: number, tab: Int32Array): void {
  const lut = m.lut;
  if (lut !== null) inputPlanes(a, aAt, 0, n, lut);
  else activationTables(a, 0, n, tab);
}

/**
 * `out` (at byte `outAt`, or −1) = matrix `w` (entry `entry` of `m.lutAt`) times the input readied by
 * `productInput` (at exponent `inExp`, its tables in `tab`), at exponent `outExp`.
 */
function product(
  m: IntModel,
  out: Int32Array,
  outAt: number,
  w: PreparedMatrix,
  entry: number,
  tab: Int32Array,
  inExp: number,
  outExp: number,
  run = true,
): void {
  const lut = m.lut;
  const pool = m.pool;
  if (lut === null) gemv(out, 0, w, tab, inExp, outExp);
  else if (pool === null) gemvLut(out, outAt, 0, w, lut, m.lutAt[entry], m.lutScales[entry], inExp, outExp);
  else {
    const base = ACC_EXP + 4 - w.expBase - inExp;
    const to = outAt >= 0 ? outAt : lut.outAt;
    const groups = w.cols >> 5;
    queueGemv(
      pool,
      lut,
      entry,
      m.lutAt[entry],
      m.lutScales[entry],
      w.rows,
      groups,
      lut.planesAt,
      0,
      1,
      base,
      -1,
      outExp - ACC_EXP,
      to,
      0,
      0,
    );
    if (run) finishProducts(pool, lut, w.name);
    if (run && outAt < 0) {
      let j = lut.outIndex;
      for (let i = 0; i < w.rows; i++) {
        out[i] = lut.mem32[j];
        j = j + 1;
      }
    }
  }
}

/** Runs the queued projections on every thread; checked mode turns a saturation into the bound error. */
function finishProducts(pool: GemvPool, lut: LutSums, name: string): void {
  const saturated = runQueued(pool, lut);
  if (checked.on && !holds(saturated === 0)) assertBound(false, `${name}: ${saturated} saturations`);
}

/**
 * The attention of slots 0 … n − 1 in layer `l` (n = 1: `step`'s position), from their q, k and v: each
 * slot's q heads normed, gained and rotated and its keys and values appended to the cache, in position
 * order; then every query head of every slot attended (on the module's `attend_heads`, shared out on
 * the pool, where the engine serves on WebAssembly SIMD; else by the TypeScript kernels), each slot's
 * heads requantised to 15 bits in its `a16`, their exponent in `slotExp`. A slot attends only to the
 * positions up to its own, so all may run once the cache holds the batch.
 */
function attendSlots(m: IntModel, st: IntState, L: IntLayer, l: number, n: number): void {
  const s = m.s;
  prepareHeads(m, L, l, n);
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    appendKeysValues(m, st, l, n, b);
  }
  if (m.lut !== null && s.cur.digits) attendOnModule(m, st, l, n);
  else {
    for (let b = 0; b < n; b++) {
      if (n > 1) useSlot(m, b);
      pointContext(m, st, l);
      attendHeads(m, s.qExp[b]);
    }
  }
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b);
    s.slotExp[b] = quantize(m, s.att, s.at.att, 0, m.qDim, ACC_EXP, s.a16, s.at.a16, 0, 15);
  }
}

/**
 * Whether a decoded position's digit writes and attention go to two threads by kv head (threads.ts
 * `queueHeadsByThread`): the step's one slot, a pool of two, an even number of kv heads, the SIMD
 * attention.
 */
function byKvHead(m: IntModel, n: number): boolean {
  const pool = m.pool;
  return pool !== null && pool.threads === 2 && n === 1 && (m.kvHeads & 1) === 0 && m.s.cur.digits;
}

/**
 * Every query head of slots 0 … n − 1 as one `attend_heads` task each (kernels/int/attention.ts
 * `writeHeadTask`), run on this thread or, from `pool.attendSplit` (query head, position) pairs on,
 * shared out on the pool.
 */
function attendOnModule(m: IntModel, st: IntState, l: number, n: number): void {
  const s = m.s;
  const lut = m.lut!;
  const ctx = s.ctx;
  const headBytes = m.headDim << 2;
  let task = lut.attendTasksAt;
  let pairs = 0;
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b);
    pointContext(m, st, l);
    const positions = s.cur.pos + 1;
    const qExp = s.qExp[b];
    let off = 0;
    let h = 0;
    for (let kvHead = 0; kvHead < m.kvHeads; kvHead++) {
      for (let g = 0; g < m.group; g++) {
        writeHeadTask(ctx, lut.mem32, task, s.at.q + off, qExp[h], kvHead, positions, s.at.att + off);
        task = task + TASK_BYTES;
        pairs = pairs + positions;
        off = off + headBytes;
        h = h + 1;
      }
    }
  }
  const pool = m.pool;
  if (pool !== null && byKvHead(m, n)) {
    let split = lut.attendTasksAt;
    for (let h = 0; h < m.kvHeads; h = h + 2) {
      for (let g = 0; g < m.group; g++) split = split + TASK_BYTES;
    }
    const c = s.cur;
    queueHeadsByThread(
      pool,
      lut,
      lut.attendTasksAt,
      split,
      task,
      s.at.k,
      s.at.v,
      m.headDim,
      m.kvHeads,
      c.digitsAt + c.laneAt,
      m.digitsHeadStride,
      c.valuesAt + c.valueRowAt,
      m.valueHeadStride,
      ctx.dimBlocks,
      ctx.valueDimStride,
      ctx.valueDigitStride,
    );
    finishProducts(pool, lut, "attention");
    return;
  }
  if (pool === null || pairs < pool.attendSplit) {
    attendTasks(ctx, lut, lut.attendTasksAt, task, TASK_BYTES, lut.attendAt);
    return;
  }
  queueAttention(
    pool,
    lut,
    lut.attendTasksAt,
    task,
    m.headDim,
    ctx.dimBlocks,
    ctx.valueDimStride,
    ctx.valueDigitStride,
  );
  finishProducts(pool, lut, "attention");
}

/**
 * Slots 0 … n − 1's q and k heads normed, gained and rotated (`rotateHeads`) and v heads quantized to
 * CACHE_BITS, their exponents in `qExp`, `kExp` and `vExp`. A batch on the pool deals its slots out to
 * the threads in turn (slot b to thread b mod threads, each slot's three calls in order on one thread,
 * since they share its scratch) and reads the exponents after the dispatch; one position, or a batch
 * without the pool, goes slot by slot on this thread. The same integers.
 */
function prepareHeads(m: IntModel, L: IntLayer, l: number, n: number): void {
  const pool = m.pool;
  const onPool = pool !== null && n > 1 && headsOnModule(m);
  let t = 0;
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    prepareSlot(m, L, l, b, onPool ? t : -1);
    if (onPool) t = nextThread(pool!, t);
  }
  if (!onPool) return;
  finishProducts(pool!, m.lut!, "heads");
  for (let b = 0; b < n; b++) readHeadExps(m, m.lut!, b);
}

/** Slot `b`'s (the current slot's) q and k heads rotated and v heads quantized: `prepareHeads`, for one slot. */
function prepareSlot(m: IntModel, L: IntLayer, l: number, b: number, t: number): void {
  const s = m.s;
  const lut = m.lut;
  const qAt = lut !== null ? headExpsOf(m, lut, b) : -1;
  const kAt = qAt + (m.heads << 2);
  const vAt = kAt + (m.kvHeads << 2);
  rotateHeads(m, s.q, s.at.q, m.heads, L.qGain, L.qGainExp, l << 1, m.qBits, s.qExp[b], qAt, t);
  rotateHeads(m, s.k, s.at.k, m.kvHeads, L.kGain, L.kGainExp, (l << 1) + 1, CACHE_BITS, s.kExp[b], kAt, t);
  const vExp = s.vExp[b];
  if (lut !== null && headsOnModule(m)) {
    const args = s.call;
    args[0] = s.at.v;
    args[1] = m.kvHeads;
    args[2] = m.headDim;
    args[3] = CACHE_BITS;
    args[4] = vAt;
    slotCall(m, QUANTIZE_HEADS, t);
    if (t >= 0) return;
    let j = vAt >> 2;
    for (let h = 0; h < m.kvHeads; h++) {
      vExp[h] = ACC_EXP + lut.mem32[j];
      j = j + 1;
    }
    return;
  }
  let off = 0;
  for (let h = 0; h < m.kvHeads; h++) {
    vExp[h] = quantize(m, s.v, s.at.v, off, m.headDim, ACC_EXP, s.v, s.at.v, off, CACHE_BITS);
    off = off + m.headDim;
  }
}

/** Slot `b`'s heads' exponents, from where the pool's `norm_rope` and `quantize_heads` calls left them. */
function readHeadExps(m: IntModel, lut: LutSums, b: number): void {
  const s = m.s;
  let j = headExpsOf(m, lut, b) >> 2;
  const q = s.qExp[b];
  for (let h = 0; h < m.heads; h++) {
    q[h] = lut.mem32[j];
    j = j + 1;
  }
  const k = s.kExp[b];
  for (let h = 0; h < m.kvHeads; h++) {
    k[h] = lut.mem32[j];
    j = j + 1;
  }
  const v = s.vExp[b];
  for (let h = 0; h < m.kvHeads; h++) {
    v[h] = ACC_EXP + lut.mem32[j];
    j = j + 1;
  }
}

/**
 * Slot `b`'s (the current slot's) keys and values, rotated and quantized to CACHE_BITS by
 * `prepareHeads`, appended to layer `l`'s cache at its position with their exponents — and to the
 * digit planes and exponent mirrors when the SIMD attention runs.
 */
function appendKeysValues(m: IntModel, st: IntState, l: number, n: number, b: number): void {
  const s = m.s;
  const c = s.cur;
  const lut = m.lut;
  const keyExp = s.kExp[b];
  const valueExp = s.vExp[b];
  let mirror = c.expsAt;
  for (let h = 0; h < m.kvHeads; h++) {
    const ek = keyExp[h];
    const ev = valueExp[h];
    if (lut !== null && c.digits) {
      lut.mem32[((lut.keyExpAt + mirror) >> 2) + c.pos] = ek;
      lut.mem32[((lut.valueExpAt + mirror) >> 2) + c.pos] = ev;
    }
    st.keyExp[l][c.expAt + h] = ek;
    st.valueExp[l][c.expAt + h] = ev;
    mirror = mirror + m.expHeadStride;
  }
  // Every kv head's keys and values (|v| ≤ 2047: int16 holds them) into the cache, and their digits
  // (on two threads, a decoded position's digits are written by both: `attendOnModule`).
  st.keys[l].set(s.k, c.cacheAt);
  st.values[l].set(s.v, c.cacheAt);
  if (lut !== null && c.digits && !byKvHead(m, n)) {
    lut.cache_digits(
      s.at.k,
      s.at.v,
      m.headDim,
      m.kvHeads,
      c.digitsAt + c.laneAt,
      m.digitsHeadStride,
      c.valuesAt + c.valueRowAt,
      m.valueHeadStride,
      m.valueDimStride,
      m.valueDigitStride,
    );
  }
}

/** Points the one attention context at layer `l`'s cache (and its digit planes when SIMD runs). */
function pointContext(m: IntModel, st: IntState, l: number): void {
  const c = m.s.cur;
  const ctx = m.s.ctx;
  const lut = m.lut;
  ctx.keys = st.keys[l];
  ctx.keyExp = st.keyExp[l];
  ctx.values = st.values[l];
  ctx.valueExp = st.valueExp[l];
  ctx.digitsAt = c.digitsAt;
  ctx.valueDigitsAt = c.valuesAt;
  if (lut !== null && c.digits) {
    ctx.keyExpAt = lut.keyExpAt + c.expsAt;
    ctx.valueExpAt = lut.valueExpAt + c.expsAt;
  }
}

/**
 * Attention of every q head (at exponents `qExp`) over positions 0 … pos into `att`, by the TypeScript
 * kernels: the q heads of each kv head two at a time.
 */
function attendHeads(m: IntModel, qExp: Int32Array): void {
  const s = m.s;
  const n = s.cur.pos + 1;
  // GQA: keys and values are read once per pair of q heads.
  let off = 0;
  let h = 0;
  for (let kvHead = 0; kvHead < m.kvHeads; kvHead++) {
    let left = m.group;
    while (left > 0) {
      const two = left >= 2;
      attendGroup(s.ctx, s.q, off, qExp[h], two ? qExp[h + 1] : 0, two, kvHead, n, s.att, off);
      const done = two ? 2 : 1;
      h = h + done;
      left = left - done;
      off = two ? off + m.headDim + m.headDim : off + m.headDim;
    }
  }
}

/**
 * Slots 0 … n − 1's SiLU(gate) · up, requantised to 15 bits in their `a16`, exponents in `slotExp`: a
 * batch on the pool deals its slots out to the threads in turn (the module's `gated_product`, the
 * exponent read after the dispatch); else slot by slot here (`gatedProduct`). The same integers.
 */
function gateSlots(m: IntModel, n: number): void {
  const s = m.s;
  const pool = m.pool;
  const lut = m.lut;
  const onPool = pool !== null && lut !== null && n > 1 && gatedOnModule(m);
  let t = 0;
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    gatedProduct(m, b, onPool ? t : -1);
    if (onPool) t = nextThread(pool!, t);
  }
  if (!onPool) return;
  finishProducts(pool!, lut!, "gated products");
  for (let b = 0; b < n; b++) {
    s.slotExp[b] = RESIDUAL_EXP + ACC_EXP + lut!.mem32[gatedShiftOf(m, lut!, b) >> 2];
  }
}

/** Whether the module's `gated_product` serves the current slot: its vectors are views, n a multiple of 4. */
function gatedOnModule(m: IntModel): boolean {
  const at = m.s.at;
  return m.lut !== null && (m.ffn & 3) === 0 && at.gate >= 0 && at.up >= 0 && at.prod >= 0 && at.a16 >= 0 &&
    at.up16 >= 0;
}

/** Byte address of slot `b`'s `gated_product` shifts, after its heads' exponents (`headExpsOf`). */
function gatedShiftOf(m: IntModel, lut: LutSums, b: number): number {
  return headExpsOf(m, lut, b) + ((m.heads + m.kvHeads + m.kvHeads) << 2);
}

/**
 * SiLU(gate) · up of the current slot (`b`), requantised to 15 bits in `a16`, its exponent in
 * `slotExp[b]`; on the module's `gated_product` where it serves, with a thread `t` ≥ 0 queued for that
 * thread (`gateSlots` reads the exponent after the dispatch).
 */
function gatedProduct(m: IntModel, b: number, t: number): void {
  const s = m.s;
  const lut = m.lut;
  if (lut !== null && gatedOnModule(m)) {
    const at = gatedShiftOf(m, lut, b);
    const args = s.call;
    args[0] = s.at.gate;
    args[1] = s.at.up;
    args[2] = m.ffn;
    args[3] = lut.siluTAt;
    args[4] = lut.siluMulAt;
    args[5] = m.silu.t.length - 1;
    args[6] = m.silu.half;
    args[7] = s.at.a16;
    args[8] = s.at.up16;
    args[9] = s.at.prod;
    args[10] = at;
    slotCall(m, GATED, t);
    if (t < 0) s.slotExp[b] = RESIDUAL_EXP + ACC_EXP + lut.mem32[at >> 2];
    return;
  }
  if (lut !== null && s.at.gate >= 0) {
    lut.silu(s.at.gate, m.ffn, lut.siluTAt, lut.siluMulAt, m.silu.t.length - 1, m.silu.half);
  } else {
    for (let i = 0; i < m.ffn; i++) s.gate[i] = silu(m.silu, s.gate[i]);
  }
  const eg = quantize(m, s.gate, s.at.gate, 0, m.ffn, RESIDUAL_EXP, s.a16, s.at.a16, 0, 15);
  const eu = quantize(m, s.up, s.at.up, 0, m.ffn, ACC_EXP, s.up16, s.at.up16, 0, 15);
  if (lut !== null && (m.ffn & 3) === 0 && s.at.prod >= 0) {
    lut.swiglu(s.at.a16, s.at.up16, m.ffn, s.at.prod);
  } else {
    for (let i = 0; i < m.ffn; i++) {
      multiples(s.a16[i], s.mt, 0);
      s.prod[i] = mulS16(s.mt, 0, s.up16[i]);
    }
  }
  s.slotExp[b] = quantize(m, s.prod, s.at.prod, 0, m.ffn, eg + eu, s.a16, s.at.a16, 0, 15);
}

/** The final norm (and gain, for a tied head), then the head: the next token's logits in `st.logits`. */
function headLogits(m: IntModel, st: IntState): void {
  const s = m.s;
  norm(m, s.x, s.at.x, 0, RESIDUAL_EXP, m.normWidth, s.z, s.at.z, 0);
  let ez = NORM_EXP;
  if (m.finalGain !== null) {
    applyGain(s.z, 0, m.width, m.finalGain, s.a16, 0);
    ez = quantize16(s.a16, 0, m.width, NORM_EXP + m.finalGainExp, s.z, 0);
  }
  productInput(m, s.z, s.at.z, m.width, s.tabW);
  product(m, st.logits, -1, m.head, s.cur.la, s.tabW, ez, LOGIT_EXP);
}

/**
 * Feeds the `n` tokens `ids[from, from + n)` (2 ≤ n ≤ PREFILL_SLOTS, the module serving) at positions
 * `st.pos` …: exactly the integers of n calls of `step`, each position in its own batch slot, but every
 * projection runs once for all n (the positions in the vector lanes). Leaves the last position's
 * logits, or with `logits` false leaves `st.logits` as they were (for a batch whose logits the next
 * one overwrites); refuses a full context or a bad id before changing anything.
 */
export function prefill(
  m: IntModel,
  st: IntState,
  ids: readonly number[],
  from: number,
  n: number,
  logits = true,
): void {
  if (st.pos + n > m.maxPositions) throw new RangeError(`context full: ${m.maxPositions} positions`);
  for (let b = from; b < from + n; b++) {
    const id = ids[b];
    if (!(id >= 0 && id < m.vocab && (id | 0) === id)) {
      throw new RangeError(`token id ${id} is outside [0, ${m.vocab})`);
    }
  }
  for (let b = 0; b < n; b++) {
    useSlot(m, b);
    embedRow(m, ids[from + b], m.s.x);
    startCursor(m, st, st.pos + b);
  }
  for (let l = 0; l < m.layers.length; l++) {
    attentionBatch(m, st, l, n);
    mlpBatch(m, m.layers[l], n);
    for (let b = 0; b < n; b++) {
      useSlot(m, b);
      nextLayer(m);
    }
  }
  useSlot(m, n - 1);
  if (logits) headLogits(m, st);
  for (let b = from; b < from + n; b++) st.tokens.push(ids[b]);
  st.pos = st.pos + n;
  useSlot(m, 0);
}

/** The lane count of the lanes projection for a group of `n` inputs (n ≤ LANES_MAX): the narrowest P ≥ n. */
function lanesFor(n: number): number {
  if (n <= 4) return 4;
  return n <= 8 ? 8 : 16;
}

/**
 * Matrix `w` (entry `entry`) over slots 0 … n − 1's input vectors (slot 0's at `inAt`, the others a
 * slot apart) into each slot's vector at slot 0's `outAt`, at exponent `outExp`, by the lanes
 * projection (kernels/wasm/int-lanes.ts: every input in a vector lane), a group of up to 16 slots per
 * call; the inputs at `inExp`, or (`perSlot`) each at its slot's `slotExp`. On two threads a batch of
 * more than 24 gives each thread a group of 16 and every row (each builds the pair tables of its own
 * inputs, none twice); otherwise each group's rows are shared out. With `run` false the calls wait in
 * the pool's queue for the next.
 */
function productBatch(
  m: IntModel,
  n: number,
  w: PreparedMatrix,
  entry: number,
  inAt: number,
  outAt: number,
  inExp: number,
  perSlot: boolean,
  outExp: number,
  run: boolean,
): void {
  const lut = m.lut!;
  const s = m.s;
  const baseOf = ACC_EXP + 4 - w.expBase;
  let bases = -1;
  if (perSlot) {
    for (let b = 0; b < n; b++) lut.mem32[lut.basesIndex + b] = baseOf - s.slotExp[b];
    bases = lut.basesAt;
  }
  const groups = w.cols >> 5;
  const fin = outExp - ACC_EXP;
  const pool = m.pool;
  const codes = m.lutAt[entry];
  const scales = m.lutScales[entry];
  const stride = lut.slotVectorBytes;
  const groupBytes = stride << 4;
  const byThread = pool !== null && pool.threads === 2 && n > 24;
  let saturated = 0;
  let first = 0;
  let xs = inAt;
  let ys = outAt;
  let thread = 0;
  while (first < n) {
    const count = n - first > LANES_MAX ? LANES_MAX : n - first;
    const lanes = lanesFor(count);
    const base = baseOf - inExp;
    if (pool === null) {
      const got = gemvLanes(
        lut,
        lanes,
        xs,
        stride,
        count,
        codes,
        scales,
        w.rows,
        groups,
        base,
        bases,
        fin,
        ys,
        stride,
        lut.lanesAt,
      );
      saturated = saturated + got;
    } else {
      const only = byThread ? thread : -1;
      queueGemv(
        pool,
        lut,
        entry,
        codes,
        scales,
        w.rows,
        groups,
        xs,
        stride,
        count,
        base,
        bases,
        fin,
        ys,
        stride,
        lanes,
        only,
      );
    }
    first = first + LANES_MAX;
    xs = xs + groupBytes;
    ys = ys + groupBytes;
    if (bases >= 0) bases = bases + (LANES_MAX << 2);
    thread = thread + 1;
  }
  if (pool === null) {
    if (checked.on && !holds(saturated === 0)) assertBound(false, `${w.name}: ${saturated} saturations`);
    return;
  }
  if (run) finishProducts(pool, lut, w.name);
}

/**
 * Slots 0 … n − 1's residual streams normed into their `z`: a batch on the pool deals its slots out to
 * the threads in turn (the module's `rmsnorm`, each slot's own scratch); else slot by slot here.
 */
function normSlots(m: IntModel, n: number): void {
  const s = m.s;
  const pool = m.pool;
  const lut = m.lut;
  const plan = m.normWidth;
  const onPool = pool !== null && lut !== null && n > 1 && (plan.n & 3) === 0 && s.at.x >= 0 && s.at.z >= 0;
  let t = 0;
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    if (onPool) {
      const args = s.call;
      args[0] = s.at.x;
      args[1] = plan.n;
      args[2] = RESIDUAL_EXP;
      args[3] = plan.bits;
      args[4] = plan.epsN;
      args[5] = plan.epsExp;
      args[6] = s.at.normY;
      args[7] = s.at.z;
      queueCall(pool!, t, NORM, args);
      t = nextThread(pool!, t);
    } else norm(m, s.x, s.at.x, 0, RESIDUAL_EXP, plan, s.z, s.at.z, 0);
  }
  if (onPool) finishProducts(pool!, lut!, "norms");
}

/**
 * The attention block of layer `l` for slots 0 … n − 1 (n = 1: `step`'s position): norm, q/k/v, the
 * cache append, GQA attention, o, the residual, slot by slot but each projection once for all n. One
 * position's projections go through `product` (16 rows in the lanes, its input's byte planes), a
 * batch's through `productBatch` (the positions in the lanes): the same integers.
 */
function attentionBatch(m: IntModel, st: IntState, l: number, n: number): void {
  const s = m.s;
  const L = m.layers[l];
  const la = s.cur.la;
  normSlots(m, n);
  if (n === 1) {
    productInput(m, s.z, s.at.z, m.width, s.tabW);
    product(m, s.q, s.at.q, L.q, la, s.tabW, NORM_EXP, ACC_EXP, false);
    product(m, s.k, s.at.k, L.k, la + 1, s.tabW, NORM_EXP, ACC_EXP, false);
    product(m, s.v, s.at.v, L.v, la + 2, s.tabW, NORM_EXP, ACC_EXP);
  } else {
    const at = s.slots[0].at;
    productBatch(m, n, L.q, la, at.z, at.q, NORM_EXP, false, ACC_EXP, false);
    productBatch(m, n, L.k, la + 1, at.z, at.k, NORM_EXP, false, ACC_EXP, false);
    productBatch(m, n, L.v, la + 2, at.z, at.v, NORM_EXP, false, ACC_EXP, true);
  }
  attendSlots(m, st, L, l, n);
  if (n === 1) {
    productInput(m, s.a16, s.at.a16, m.qDim, s.tabQ);
    product(m, s.proj, s.at.proj, L.o, la + 3, s.tabQ, s.slotExp[0], RESIDUAL_EXP);
  } else {
    productBatch(m, n, L.o, la + 3, s.slots[0].at.a16, s.slots[0].at.proj, 0, true, RESIDUAL_EXP, true);
  }
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    addResidual(m);
  }
}

/**
 * The MLP block of layer `L` for slots 0 … n − 1 (n = 1: `step`'s position): norm, gate and up,
 * SiLU(gate) · up, down, the residual; the projections as `attentionBatch`'s.
 */
function mlpBatch(m: IntModel, L: IntLayer, n: number): void {
  const s = m.s;
  const la = s.cur.la;
  normSlots(m, n);
  if (n === 1) {
    productInput(m, s.z, s.at.z, m.width, s.tabW);
    product(m, s.gate, s.at.gate, L.gate, la + 4, s.tabW, NORM_EXP, RESIDUAL_EXP, false);
    product(m, s.up, s.at.up, L.up, la + 5, s.tabW, NORM_EXP, ACC_EXP);
  } else {
    const at = s.slots[0].at;
    productBatch(m, n, L.gate, la + 4, at.z, at.gate, NORM_EXP, false, RESIDUAL_EXP, false);
    productBatch(m, n, L.up, la + 5, at.z, at.up, NORM_EXP, false, ACC_EXP, true);
  }
  gateSlots(m, n);
  if (n === 1) {
    productInput(m, s.a16, s.at.a16, m.ffn, s.tabF);
    product(m, s.proj, s.at.proj, L.down, la + 6, s.tabF, s.slotExp[0], RESIDUAL_EXP);
  } else {
    productBatch(m, n, L.down, la + 6, s.slots[0].at.a16, s.slots[0].at.proj, 0, true, RESIDUAL_EXP, true);
  }
  for (let b = 0; b < n; b++) {
    if (n > 1) useSlot(m, b); // one position is the step's own slot already
    addResidual(m);
  }
}

/**
 * The integer-only Qwen3 forward: one token per step, prefill and decode through the same code, using
 * only additions, shifts, comparisons and table look-ups (tests/audit.test.ts proves the absence of
 * `*`, `/`, `%`, floats and `Math`). Every kernel lives in kernels/int/; this module wires them in the
 * Qwen3 dataflow: RMSNorm → q, k, v → per-head q/k RMSNorm and gain → RoPE → GQA attention over a
 * 12-bit KV cache → o → residual; RMSNorm → gate, up → SiLU(gate) · up → down → residual; final norm →
 * head (tied or separate) → logits at 2^-16 nats.
 *
 * @example
 * ```ts
 * const model = buildIntModel(weights);       // weights from formats/lut4.ts
 * const state = newState(model);
 * for (const id of prompt) step(model, state, id);
 * greedy(state.logits);                        // the next token (int-sampler.ts)
 * ```
 * @module
 */
import type { Lut4Weights } from "../../formats/lut4.ts";
import {
  ACC_EXP,
  activationTables,
  gemv,
  type LutMatrix,
  type PreparedMatrix,
  prepareMatrix,
} from "../../kernels/int/gemv.ts";
import {
  attendGroup,
  type AttentionContext,
  attentionScratch,
  CACHE_BITS,
  queryBits,
  SCORE_EXP,
} from "../../kernels/int/attention.ts";
import { gemvLut, inputPlanes, type LutSums } from "../../kernels/int/gemv-lut.ts";
import { mulS16, mulScale, multiples } from "../../kernels/int/mul.ts";
import { applyGain, gainTables, NORM_EXP, type NormPlan, normPlan } from "../../kernels/int/norm.ts";
import { ropeHead } from "../../kernels/int/rope.ts";
import { quantize16, shift } from "../../kernels/int/round.ts";
import { type LookupTable, prepareTable, silu } from "../../kernels/int/tables.ts";
import { addResidual, fillDigits, norm, quantize, writeDigits, writeValueDigits } from "./simd.ts";

/** Exponent of the residual stream. */
export const RESIDUAL_EXP = -16;
/** Exponent of the logits (nats). */
export const LOGIT_EXP = SCORE_EXP;

/** One decoder layer, ready to serve. */
export interface IntLayer {
  q: PreparedMatrix;
  k: PreparedMatrix;
  v: PreparedMatrix;
  o: PreparedMatrix;
  gate: PreparedMatrix;
  up: PreparedMatrix;
  down: PreparedMatrix;
  qGain: Int32Array;
  qGainExp: number;
  kGain: Int32Array;
  kGainExp: number;
}

/** A lut4 model prepared for the integer forward, with its scratch. */
export interface IntModel {
  vocab: number;
  width: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  half: number;
  /** Magnitude bits of a query (attention.ts `queryBits`). */
  qBits: number;
  ffn: number;
  maxPositions: number;
  qDim: number;
  kvDim: number;
  /** q heads per kv head. */
  group: number;
  embed: LutMatrix;
  /** Byte offset of each embedding row's codes and of its scale bytes. */
  embedRow: Int32Array;
  embedScaleRow: Int32Array;
  head: PreparedMatrix;
  finalGain: Int32Array | null;
  finalGainExp: number;
  layers: IntLayer[];
  exp: LookupTable;
  silu: LookupTable;
  ropeCos: Int16Array;
  ropeSin: Int16Array;
  normWidth: NormPlan;
  normHead: NormPlan;
  s: Scratch;
  /**
   * The WebAssembly SIMD group sums (kernels/int/gemv-lut.ts), or null for the TypeScript kernels alone;
   * set after `buildIntModel` by `useLut`. Either way the integers are the same.
   */
  lut: LutSums | null;
  /** Byte address of each matrix's codes in `lut`'s memory: per layer q, k, v, o, gate, up, down; then the head. */
  lutAt: Int32Array;
  /** Byte address of each matrix's scales in `lut`'s memory, in the same order. */
  lutScales: Int32Array;
  /**
   * The keys' digit planes in `lut`'s memory (kernels/int/gemv-lut.ts `LutSums.digitsAt`), for the SIMD
   * scores: bytes of one 16-position block, of one kv head, of one layer, of all; and the state they
   * were written for (another state's step rewrites them from its cache first).
   */
  digitsBlock: number;
  digitsHeadStride: number;
  digitsLayerStride: number;
  digitBytes: number;
  /**
   * The values' digit planes (`LutSums.valueDigitsAt`), for the SIMD value mix: bytes of one (digit,
   * block of 16 dimensions) plane over all positions, of one digit, of one kv head, of one layer, of all;
   * and the number of blocks of 16 dimensions in a head.
   */
  valuePlane: number;
  valueDigitStride: number;
  valueHeadStride: number;
  valueLayerStride: number;
  valueDigitBytes: number;
  dimBlocks: number;
  /**
   * The cache's exponents mirrored as int32 for the SIMD attention (`LutSums.keyExpAt`, `valueExpAt`):
   * bytes of one kv head's positions (rounded up to 16), of one layer, of all.
   */
  expHeadStride: number;
  expLayerStride: number;
  expMirrorBytes: number;
  /** The state whose cache the key and value digit planes and exponent mirrors hold. */
  digitOwner: IntState | null;
}

interface Scratch {
  x: Int32Array;
  z: Int32Array;
  a16: Int32Array;
  tabW: Int32Array;
  tabQ: Int32Array;
  tabF: Int32Array;
  q: Int32Array;
  k: Int32Array;
  v: Int32Array;
  qExp: Int32Array;
  att: Int32Array;
  proj: Int32Array;
  gate: Int32Array;
  up: Int32Array;
  up16: Int32Array;
  prod: Int32Array;
  mt: Int32Array;
  rope: Int32Array;
  head: Int32Array;
  /** The norms' 15-bit copy, for the module's `rmsnorm`. */
  normY: Int32Array;
  /** Byte addresses of the vectors that are views of the module's memory (`useLut`); −1 for the others. */
  at: VectorAddresses;
  attn: ReturnType<typeof attentionScratch>;
  /** One attention context, pointed at each layer's cache in turn (no allocation per token). */
  ctx: AttentionContext;
}

/** Where `useLut` put each vector in the module's memory (byte address), or −1. */
interface VectorAddresses {
  z: number;
  a16: number;
  q: number;
  k: number;
  v: number;
  proj: number;
  gate: number;
  up: number;
  att: number;
  up16: number;
  prod: number;
  x: number;
  head: number;
  normY: number;
}

/** A conversation's state: position, tokens, the 12-bit KV cache, pending logits and the sampler's RNG. */
export interface IntState {
  pos: number;
  tokens: number[];
  /** Per layer: [position][kv_head][head_dim] 12-bit values in int16, one exponent per (position, kv_head). */
  keys: Int16Array[];
  keyExp: Int16Array[];
  values: Int16Array[];
  valueExp: Int16Array[];
  /** Logits of the last position fed, at LOGIT_EXP (meaningful when pos > 0). */
  logits: Int32Array;
  /** xorshift64 state as two 32-bit halves (never both zero). */
  rng: Int32Array;
}

/** Prepares a model: multiples tables of the gains and of the table differences, norm plans, scratch. */
export function buildIntModel(w: Lut4Weights): IntModel {
  const sh = w.shape;
  let qDim = 0;
  for (let h = 0; h < sh.heads; h++) qDim = qDim + sh.headDim;
  let kvDim = 0;
  for (let h = 0; h < sh.kvHeads; h++) kvDim = kvDim + sh.headDim;
  let group = 0;
  for (let h = 0; h < sh.heads; h = h + sh.kvHeads) group = group + 1;
  const embedRow = new Int32Array(sh.vocab);
  const embedScaleRow = new Int32Array(sh.vocab);
  let at = 0;
  let sat = 0;
  for (let r = 0; r < sh.vocab; r++) {
    embedRow[r] = at;
    embedScaleRow[r] = sat;
    at = at + (sh.width >> 1);
    sat = sat + (sh.width >> 5);
  }
  const layers: IntLayer[] = [];
  for (const l of w.layers) {
    layers.push({
      q: prepareMatrix(l.q),
      k: prepareMatrix(l.k),
      v: prepareMatrix(l.v),
      o: prepareMatrix(l.o),
      gate: prepareMatrix(l.gate),
      up: prepareMatrix(l.up),
      down: prepareMatrix(l.down),
      qGain: gainTables(l.qGain.values),
      qGainExp: l.qGain.exp,
      kGain: gainTables(l.kGain.values),
      kGainExp: l.kGain.exp,
    });
  }
  const exp = prepareTable(w.exp, 0);
  const attn = attentionScratch(sh.maxPositions, sh.headDim);
  const digitsBlock = (sh.headDim << 5) + (sh.headDim << 4);
  let digitsHeadStride = 0;
  for (let p = 0; p < sh.maxPositions; p = p + 16) digitsHeadStride = digitsHeadStride + digitsBlock;
  let digitsLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) digitsLayerStride = digitsLayerStride + digitsHeadStride;
  let digitBytes = 0;
  for (let l = 0; l < w.layers.length; l++) digitBytes = digitBytes + digitsLayerStride;
  const valuePlane = sh.maxPositions << 4;
  let dimBlocks = 0;
  let valueDigitStride = 0;
  for (let d = 0; d < sh.headDim; d = d + 16) {
    dimBlocks = dimBlocks + 1;
    valueDigitStride = valueDigitStride + valuePlane;
  }
  const valueHeadStride = valueDigitStride + valueDigitStride + valueDigitStride;
  let valueLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) valueLayerStride = valueLayerStride + valueHeadStride;
  let valueDigitBytes = 0;
  for (let l = 0; l < w.layers.length; l++) valueDigitBytes = valueDigitBytes + valueLayerStride;
  let expHeadStride = 0;
  for (let p = 0; p < sh.maxPositions; p = p + 16) expHeadStride = expHeadStride + 64;
  let expLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) expLayerStride = expLayerStride + expHeadStride;
  let expMirrorBytes = 0;
  for (let l = 0; l < w.layers.length; l++) expMirrorBytes = expMirrorBytes + expLayerStride;
  const widest = qDim > sh.ffn ? qDim : sh.ffn;
  const wider = widest > sh.width ? widest : sh.width;
  return {
    vocab: sh.vocab,
    width: sh.width,
    heads: sh.heads,
    kvHeads: sh.kvHeads,
    headDim: sh.headDim,
    half: sh.headDim >> 1,
    qBits: queryBits(sh.headDim),
    ffn: sh.ffn,
    maxPositions: sh.maxPositions,
    qDim,
    kvDim,
    group,
    embed: w.embed,
    embedRow,
    embedScaleRow,
    head: prepareMatrix(w.head ?? w.embed),
    finalGain: w.finalGain ? gainTables(w.finalGain.values) : null,
    finalGainExp: w.finalGain ? w.finalGain.exp : 0,
    layers,
    exp,
    silu: prepareTable(w.silu, w.siluHalf),
    ropeCos: w.ropeCos,
    ropeSin: w.ropeSin,
    normWidth: normPlan(sh.width, w.epsMantissa, w.epsExp),
    normHead: normPlan(sh.headDim, w.epsMantissa, w.epsExp),
    s: {
      x: new Int32Array(sh.width),
      z: new Int32Array(wider),
      a16: new Int32Array(wider),
      tabW: new Int32Array(sh.width << 4),
      tabQ: new Int32Array(qDim << 4),
      tabF: new Int32Array(sh.ffn << 4),
      q: new Int32Array(qDim),
      k: new Int32Array(kvDim),
      v: new Int32Array(kvDim),
      qExp: new Int32Array(sh.heads),
      att: new Int32Array(qDim),
      proj: new Int32Array(sh.width),
      gate: new Int32Array(sh.ffn),
      up: new Int32Array(sh.ffn),
      up16: new Int32Array(sh.ffn),
      prod: new Int32Array(sh.ffn),
      mt: new Int32Array(32),
      rope: new Int32Array(64),
      head: new Int32Array(sh.headDim),
      normY: new Int32Array(0),
      at: {
        z: -1,
        a16: -1,
        q: -1,
        k: -1,
        v: -1,
        proj: -1,
        gate: -1,
        up: -1,
        att: -1,
        up16: -1,
        prod: -1,
        x: -1,
        head: -1,
        normY: -1,
      },
      attn,
      ctx: {
        headDim: sh.headDim,
        kvHeads: sh.kvHeads,
        kvDim,
        keys: new Int16Array(0),
        keyExp: new Int16Array(0),
        values: new Int16Array(0),
        valueExp: new Int16Array(0),
        exp,
        s: attn,
        lut: null,
        digitsAt: 0,
        digitsHeadStride,
        valueDigitsAt: 0,
        valueHeadStride,
        valuePlane,
        valueDigitStride,
        dimBlocks,
        keyExpAt: 0,
        valueExpAt: 0,
        expHeadStride,
      },
    },
    lut: null,
    lutAt: new Int32Array(0),
    lutScales: new Int32Array(0),
    digitsBlock,
    digitsHeadStride,
    digitsLayerStride,
    digitBytes,
    valuePlane,
    valueDigitStride,
    valueHeadStride,
    valueLayerStride,
    valueDigitBytes,
    dimBlocks,
    expHeadStride,
    expLayerStride,
    expMirrorBytes,
    digitOwner: null,
  };
}

/** A fresh state at position 0 (its RNG state is set by int-sampler.ts `seedRng`). */
export function newState(m: IntModel): IntState {
  const keys: Int16Array[] = [];
  const keyExp: Int16Array[] = [];
  const values: Int16Array[] = [];
  const valueExp: Int16Array[] = [];
  let cache = 0;
  let exps = 0;
  for (let p = 0; p < m.maxPositions; p++) {
    cache = cache + m.kvDim;
    exps = exps + m.kvHeads;
  }
  for (let l = 0; l < m.layers.length; l++) {
    keys.push(new Int16Array(cache));
    keyExp.push(new Int16Array(exps));
    values.push(new Int16Array(cache));
    valueExp.push(new Int16Array(exps));
  }
  const rng = new Int32Array(2);
  return { pos: 0, tokens: [], keys, keyExp, values, valueExp, logits: new Int32Array(m.vocab), rng };
}

/** Writes embedding row `id` at RESIDUAL_EXP into `x`. */
function embedRow(m: IntModel, id: number, x: Int32Array): void {
  const e = m.embed;
  let b = m.embedRow[id];
  let s = m.embedScaleRow[id];
  let c = 0;
  for (let g = 0; g < (m.width >> 5); g++) {
    const scale = e.scales[s];
    const mant = scale & 15;
    const toRes = RESIDUAL_EXP - (e.expBase + (scale >> 4) - 4);
    for (let j = 0; j < 16; j++) {
      const byte = e.nibbles[b];
      x[c] = shift(mulScale((byte & 15) - 8, mant), toRes);
      x[c + 1] = shift(mulScale((byte >> 4) - 8, mant), toRes);
      c = c + 2;
      b = b + 1;
    }
    s = s + 1;
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
 * Feeds one token at position `st.pos`: appends its keys and values, leaves the next token's logits in
 * `st.logits`, and advances the position. Refuses a full context and an id outside the vocabulary
 * before changing anything.
 */
export function step(m: IntModel, st: IntState, id: number): void {
  if (st.pos >= m.maxPositions) throw new RangeError(`context full: ${m.maxPositions} positions`);
  if (!(id >= 0 && id < m.vocab && (id | 0) === id)) {
    throw new RangeError(`token id ${id} is outside [0, ${m.vocab})`);
  }
  const s = m.s;
  const x = s.x;
  embedRow(m, id, x);
  const pos = st.pos;
  let ropeAt = 0;
  let cacheAt = 0;
  let expAt = 0;
  for (let p = 0; p < pos; p++) {
    ropeAt = ropeAt + m.half;
    cacheAt = cacheAt + m.kvDim;
    expAt = expAt + m.kvHeads;
  }
  const lut = m.lut;
  let la = 0; // this layer's first entry in m.lutAt
  // SIMD scores need the keys' digit planes; they hold the last stepped state's cache.
  const digits = lut !== null && m.digitBytes > 0 && m.headDim <= 128;
  let digitsAt = 0; // this layer's digit planes
  let laneAt = 0; // this position's lane in its block
  let valuesAt = 0; // this layer's value digit planes, at this position
  let expsAt = 0; // this layer's exponent mirrors' offset, in bytes
  if (digits) {
    if (m.digitOwner !== st) fillDigits(m, lut, st);
    digitsAt = lut.digitsAt;
    valuesAt = lut.valueDigitsAt + (pos << 4);
    laneAt = pos & 15;
    for (let p = 16; p <= pos; p = p + 16) laneAt = laneAt + m.digitsBlock;
  }
  for (let l = 0; l < m.layers.length; l++) {
    const L = m.layers[l];
    // Attention block.
    norm(m, x, s.at.x, 0, RESIDUAL_EXP, m.normWidth, s.z, s.at.z, 0);
    if (lut !== null) {
      inputPlanes(s.z, s.at.z, 0, m.width, lut);
      gemvLut(s.q, s.at.q, 0, L.q, lut, m.lutAt[la], m.lutScales[la], NORM_EXP, ACC_EXP);
      gemvLut(s.k, s.at.k, 0, L.k, lut, m.lutAt[la + 1], m.lutScales[la + 1], NORM_EXP, ACC_EXP);
      gemvLut(s.v, s.at.v, 0, L.v, lut, m.lutAt[la + 2], m.lutScales[la + 2], NORM_EXP, ACC_EXP);
    } else {
      activationTables(s.z, 0, m.width, s.tabW);
      gemv(s.q, 0, L.q, s.tabW, NORM_EXP, ACC_EXP);
      gemv(s.k, 0, L.k, s.tabW, NORM_EXP, ACC_EXP);
      gemv(s.v, 0, L.v, s.tabW, NORM_EXP, ACC_EXP);
    }
    let off = 0;
    for (let h = 0; h < m.heads; h++) {
      s.qExp[h] = normRope(m, s.q, s.at.q, off, ACC_EXP, L.qGain, L.qGainExp, ropeAt, m.qBits);
      off = off + m.headDim;
    }
    const keys = st.keys[l];
    const values = st.values[l];
    off = 0;
    let headDigits = 0;
    let headValues = valuesAt;
    for (let h = 0; h < m.kvHeads; h++) {
      const ek = normRope(m, s.k, s.at.k, off, ACC_EXP, L.kGain, L.kGainExp, ropeAt, CACHE_BITS);
      const ev = quantize(m, s.v, s.at.v, off, m.headDim, ACC_EXP, s.v, s.at.v, off, CACHE_BITS);
      for (let i = 0; i < m.headDim; i++) {
        keys[cacheAt + off + i] = s.k[off + i];
        values[cacheAt + off + i] = s.v[off + i];
      }
      if (digits) {
        writeDigits(m, lut.mem8, digitsAt + headDigits + laneAt, keys, cacheAt + off);
        writeValueDigits(m, lut.mem8, headValues, values, cacheAt + off);
        let mirror = expsAt;
        for (let i = 0; i < h; i++) mirror = mirror + m.expHeadStride;
        lut.mem32[((lut.keyExpAt + mirror) >> 2) + pos] = ek;
        lut.mem32[((lut.valueExpAt + mirror) >> 2) + pos] = ev;
      }
      headDigits = headDigits + m.digitsHeadStride;
      headValues = headValues + m.valueHeadStride;
      st.keyExp[l][expAt + h] = ek;
      st.valueExp[l][expAt + h] = ev;
      off = off + m.headDim;
    }
    const ctx = s.ctx;
    ctx.keys = keys;
    ctx.keyExp = st.keyExp[l];
    ctx.values = values;
    ctx.valueExp = st.valueExp[l];
    ctx.lut = digits ? lut : null;
    ctx.digitsAt = digitsAt;
    ctx.valueDigitsAt = valuesAt - (pos << 4);
    if (digits) {
      ctx.keyExpAt = lut.keyExpAt + expsAt;
      ctx.valueExpAt = lut.valueExpAt + expsAt;
    }
    // The q heads of each kv head, two at a time (GQA): keys and values are read once per pair.
    off = 0;
    let h = 0;
    for (let kvHead = 0; kvHead < m.kvHeads; kvHead++) {
      let left = m.group;
      while (left > 0) {
        const two = left >= 2;
        attendGroup(ctx, s.q, off, s.qExp[h], two ? s.qExp[h + 1] : 0, two, kvHead, pos + 1, s.att, off);
        const done = two ? 2 : 1;
        h = h + done;
        left = left - done;
        off = two ? off + m.headDim + m.headDim : off + m.headDim;
      }
    }
    const ea = quantize(m, s.att, s.at.att, 0, m.qDim, ACC_EXP, s.a16, s.at.a16, 0, 15);
    if (lut !== null) {
      inputPlanes(s.a16, s.at.a16, 0, m.qDim, lut);
      gemvLut(s.proj, s.at.proj, 0, L.o, lut, m.lutAt[la + 3], m.lutScales[la + 3], ea, RESIDUAL_EXP);
    } else {
      activationTables(s.a16, 0, m.qDim, s.tabQ);
      gemv(s.proj, 0, L.o, s.tabQ, ea, RESIDUAL_EXP);
    }
    addResidual(m);
    // MLP block.
    norm(m, x, s.at.x, 0, RESIDUAL_EXP, m.normWidth, s.z, s.at.z, 0);
    if (lut !== null) {
      inputPlanes(s.z, s.at.z, 0, m.width, lut);
      gemvLut(
        s.gate,
        s.at.gate,
        0,
        L.gate,
        lut,
        m.lutAt[la + 4],
        m.lutScales[la + 4],
        NORM_EXP,
        RESIDUAL_EXP,
      );
      gemvLut(s.up, s.at.up, 0, L.up, lut, m.lutAt[la + 5], m.lutScales[la + 5], NORM_EXP, ACC_EXP);
    } else {
      activationTables(s.z, 0, m.width, s.tabW);
      gemv(s.gate, 0, L.gate, s.tabW, NORM_EXP, RESIDUAL_EXP);
      gemv(s.up, 0, L.up, s.tabW, NORM_EXP, ACC_EXP);
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
    const ep = quantize(m, s.prod, s.at.prod, 0, m.ffn, eg + eu, s.a16, s.at.a16, 0, 15);
    if (lut !== null) {
      inputPlanes(s.a16, s.at.a16, 0, m.ffn, lut);
      gemvLut(s.proj, s.at.proj, 0, L.down, lut, m.lutAt[la + 6], m.lutScales[la + 6], ep, RESIDUAL_EXP);
    } else {
      activationTables(s.a16, 0, m.ffn, s.tabF);
      gemv(s.proj, 0, L.down, s.tabF, ep, RESIDUAL_EXP);
    }
    addResidual(m);
    la = la + 7;
    digitsAt = digitsAt + m.digitsLayerStride;
    valuesAt = valuesAt + m.valueLayerStride;
    expsAt = expsAt + m.expLayerStride;
  }
  norm(m, x, s.at.x, 0, RESIDUAL_EXP, m.normWidth, s.z, s.at.z, 0);
  let ez = NORM_EXP;
  if (m.finalGain !== null) {
    applyGain(s.z, 0, m.width, m.finalGain, s.a16, 0);
    ez = quantize16(s.a16, 0, m.width, NORM_EXP + m.finalGainExp, s.z, 0);
  }
  if (lut !== null) {
    inputPlanes(s.z, s.at.z, 0, m.width, lut);
    gemvLut(st.logits, -1, 0, m.head, lut, m.lutAt[la], m.lutScales[la], ez, LOGIT_EXP);
  } else {
    activationTables(s.z, 0, m.width, s.tabW);
    gemv(st.logits, 0, m.head, s.tabW, ez, LOGIT_EXP);
  }
  st.tokens.push(id);
  st.pos = pos + 1;
}

/**
 * The integer model: lut4 weights prepared for the integer forward (engines/int/forward.ts) — multiples
 * tables of the gains, norm plans, the layout of the KV cache's digit planes and exponent mirrors in
 * the WebAssembly module's memory, and the scratch one step works in — and a conversation's state.
 * The types live here, beside their builder, so the forward and its WebAssembly glue
 * (engines/int/simd.ts) both import them from one place and not from each other. Serving code: audited
 * with the forward (tests/kernels/audit.test.ts), so it builds with additions and shifts only.
 *
 * @example
 * ```ts
 * import { buildIntModel, newState } from "./model.ts";
 * import type { Lut4Weights } from "../../quantize/lut4-types.ts";
 * declare const weights: Lut4Weights;
 * const model = buildIntModel(weights);       // weights from formats/lut4/lut4.ts
 * const state = newState(model);              // position 0; seed its RNG with sampler.ts `seedRng`
 * ```
 * @module
 */
import type { Lut4Shape, Lut4Weights } from "../../formats/lut4/lut4.ts";
import { type LutMatrix, type PreparedMatrix, prepareMatrix } from "../../kernels/int/gemv.ts";
import {
  type AttentionContext,
  type AttentionScratch,
  attentionScratch,
  queryBits,
} from "../../kernels/int/attention.ts";
import type { LutSums } from "../../kernels/int/gemv-lut.ts";
import { CALL_INTS, type GemvPool } from "./threads.ts";
import { gainTables, type NormPlan, normPlan } from "../../kernels/int/norm.ts";
import { type LookupTable, prepareTable } from "../../kernels/int/tables.ts";

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

/**
 * Where the KV cache's copies live in the WebAssembly module's memory, for the SIMD attention (sizes
 * and strides in bytes; built by `cacheLayout`).
 */
export interface CacheLayout {
  /**
   * The keys' digit planes (kernels/int/gemv-lut.ts `LutSums.digitsAt`), for the SIMD scores: bytes of
   * one 16-position block, of one kv head, of one layer, of all.
   */
  digitsBlock: number;
  digitsHeadStride: number;
  digitsLayerStride: number;
  digitBytes: number;
  /**
   * The values' digit planes (`LutSums.valueDigitsAt`), for the SIMD value mix: per kv head, per block
   * of 16 dimensions, per block of 16 positions (768 bytes), per digit (256 bytes), one 16-byte row per
   * position. Bytes of one block of dimensions over all positions, of one block of 16 positions in it
   * (768), between digits (256), of one kv head, of one layer, of all; and the number of blocks of 16
   * dimensions in a head.
   */
  valueDimStride: number;
  valueBlock: number;
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
}

/** A lut4 model prepared for the integer forward, with its scratch. */
export interface IntModel extends CacheLayout {
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
  /**
   * Where the embedding's codes and scales are read: the file's (row-major, `embedStride` 1) or, for a
   * tied head laid out in the module, the module's memory (16-row blocks, `embedStride` 16, so the
   * codes are kept once); the byte offset of each row's first code byte and first scale byte in them.
   */
  embedBytes: Uint8Array;
  embedScales: Uint8Array;
  embedStride: number;
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
   * set after `buildIntModel` by simd.ts `useLut`. Either way the integers are the same.
   */
  lut: LutSums | null;
  /** Byte address of each matrix's codes in `lut`'s memory: per layer q, k, v, o, gate, up, down; head. */
  lutAt: Int32Array;
  /** Byte address of each matrix's scales in `lut`'s memory, in the same order. */
  lutScales: Int32Array;
  /** The state whose cache the digit planes and exponent mirrors hold (another's step rewrites them). */
  digitOwner: IntState | null;
  /** The threads the projections are split across (engines/int/threads.ts), or null for this one alone. */
  pool: GemvPool | null;
}

/**
 * One batch slot of a prefill step: its own vectors (views of the module's memory, at `at`), its
 * input planes and its cursor; simd.ts `useSlot` makes them the step's (slot 0's are a single step's).
 */
export interface Slot {
  views: Int32Array[];
  at: VectorAddresses;
  planesAt: number;
  cur: StepCursor;
}

/** The vectors and tables one step works in; allocated once per model, so a step allocates nothing. */
export interface Scratch {
  x: Int32Array;
  z: Int32Array;
  a16: Int32Array;
  tabW: Int32Array;
  tabQ: Int32Array;
  tabF: Int32Array;
  q: Int32Array;
  k: Int32Array;
  v: Int32Array;
  /** The exponents of each batch slot's q, k and v heads (forward.ts `prepareHeads`). */
  qExp: Int32Array[];
  kExp: Int32Array[];
  vExp: Int32Array[];
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
  /** The arguments of one module call a slot makes (forward.ts `slotCall`; threads.ts `queueCall`). */
  call: Int32Array;
  /** Byte addresses of the vectors that are views of the module's memory (`useLut`); −1 for the others. */
  at: VectorAddresses;
  attn: AttentionScratch;
  /** One attention context, pointed at each layer's cache in turn (no allocation per token). */
  ctx: AttentionContext;
  /** Where the step under way reads and writes (forward.ts). */
  cur: StepCursor;
  /** The batch slots (simd.ts `useLut`; none without the module), and each one's input exponent. */
  slots: Slot[];
  slotExp: Int32Array;
}

/** Where `useLut` put each vector in the module's memory (byte address), or −1. */
export interface VectorAddresses {
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

/** Where one step reads and writes: set by forward.ts `step` for its position, advanced layer by layer. */
export interface StepCursor {
  /** The position being fed. */
  pos: number;
  /** This position's offsets: in the RoPE tables, in a layer's KV cache, in a layer's exponents. */
  ropeAt: number;
  cacheAt: number;
  expAt: number;
  /** This layer's first entry in `IntModel.lutAt`. */
  la: number;
  /** Whether the scores and value mix run on SIMD (the key and value digit planes are kept). */
  digits: boolean;
  /** This layer's key digit planes, and this position's lane in its block. */
  digitsAt: number;
  laneAt: number;
  /** This layer's value digit planes, and this position's row in its block. */
  valuesAt: number;
  valueRowAt: number;
  /** This layer's exponent mirrors' offset, in bytes. */
  expsAt: number;
}

/** A conversation's state: position, tokens, the 12-bit KV cache, pending logits and the sampler's RNG. */
export interface IntState {
  pos: number;
  tokens: number[];
  /** Per layer: [position][kv_head][head_dim] 12-bit values in int16; an exponent per (position, kv_head). */
  keys: Int16Array[];
  keyExp: Int16Array[];
  values: Int16Array[];
  valueExp: Int16Array[];
  /** Logits of the last position fed, at LOGIT_EXP (meaningful when pos > 0). */
  logits: Int32Array;
  /** xorshift64 state as two 32-bit halves (never both zero). */
  rng: Int32Array;
}

/**
 * Prepares a model: multiples tables of the gains and of the table differences, norm plans, scratch.
 * `words` false leaves the matrices' word copies empty, for a model the WebAssembly module serves
 * (simd.ts `packAllWords` fills them if it cannot).
 */
export function buildIntModel(w: Lut4Weights, words = true): IntModel {
  const sh = w.shape;
  const { qDim, kvDim, group } = headDims(sh);
  const { embedRow, embedScaleRow } = embedOffsets(sh);
  const layers: IntLayer[] = [];
  for (const l of w.layers) layers.push(prepareLayer(l, words));
  const layout = cacheLayout(sh, w.layers.length);
  const exp = prepareTable(w.exp, 0);
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
    embedBytes: w.embed.nibbles,
    embedScales: w.embed.scales,
    embedStride: 1,
    embedRow,
    embedScaleRow,
    head: prepareMatrix(w.head ?? w.embed, words),
    finalGain: w.finalGain ? gainTables(w.finalGain.values) : null,
    finalGainExp: w.finalGain ? w.finalGain.exp : 0,
    layers,
    exp,
    silu: prepareTable(w.silu, w.siluHalf),
    ropeCos: w.ropeCos,
    ropeSin: w.ropeSin,
    normWidth: normPlan(sh.width, w.epsMantissa, w.epsExp),
    normHead: normPlan(sh.headDim, w.epsMantissa, w.epsExp),
    s: newScratch(sh, qDim, kvDim, exp, layout),
    lut: null,
    lutAt: new Int32Array(0),
    lutScales: new Int32Array(0),
    ...layout,
    digitOwner: null,
    pool: null,
  };
}

/** heads · head_dim, kv_heads · head_dim and heads / kv_heads, by addition. */
function headDims(sh: Lut4Shape): { qDim: number; kvDim: number; group: number } {
  let qDim = 0;
  for (let h = 0; h < sh.heads; h++) qDim = qDim + sh.headDim;
  let kvDim = 0;
  for (let h = 0; h < sh.kvHeads; h++) kvDim = kvDim + sh.headDim;
  let group = 0;
  for (let h = 0; h < sh.heads; h = h + sh.kvHeads) group = group + 1;
  return { qDim, kvDim, group };
}

/** The byte offset of each embedding row's codes (width / 2 bytes a row) and scales (width / 32). */
function embedOffsets(sh: Lut4Shape): { embedRow: Int32Array; embedScaleRow: Int32Array } {
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
  return { embedRow, embedScaleRow };
}

/** One layer's matrices prepared and its q/k gains as multiples tables. */
function prepareLayer(l: Lut4Weights["layers"][number], words: boolean): IntLayer {
  return {
    q: prepareMatrix(l.q, words),
    k: prepareMatrix(l.k, words),
    v: prepareMatrix(l.v, words),
    o: prepareMatrix(l.o, words),
    gate: prepareMatrix(l.gate, words),
    up: prepareMatrix(l.up, words),
    down: prepareMatrix(l.down, words),
    qGain: gainTables(l.qGain.values),
    qGainExp: l.qGain.exp,
    kGain: gainTables(l.kGain.values),
    kGainExp: l.kGain.exp,
  };
}

/** The cache's layout in the module's memory for `layers` layers of this shape (see `CacheLayout`). */
function cacheLayout(sh: Lut4Shape, layers: number): CacheLayout {
  // Keys: per block of 16 positions, three digit planes of 16 bytes per dimension (head_dim · 48 bytes).
  const digitsBlock = (sh.headDim << 5) + (sh.headDim << 4);
  let digitsHeadStride = 0;
  for (let p = 0; p < sh.maxPositions; p = p + 16) digitsHeadStride = digitsHeadStride + digitsBlock;
  let digitsLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) digitsLayerStride = digitsLayerStride + digitsHeadStride;
  let digitBytes = 0;
  for (let l = 0; l < layers; l++) digitBytes = digitBytes + digitsLayerStride;
  // Values: per block of 16 dimensions, per block of 16 positions, three digit rows of 16 bytes per
  // position. A position's 24 rows of a kv head then lie on 8 pages; when each (digit, dimensions)
  // plane held every position, they lay on 24, and writing a decoded position's digits (`cache_digits`,
  // pages the weights' stream has pushed out of the TLB and caches) took 140 µs a layer at Qwen3-0.6B's
  // shape, against 85 µs now. The mix reads each block's rows 768 bytes apart.
  const valueDigitStride = 256;
  const valueBlock = valueDigitStride + valueDigitStride + valueDigitStride;
  let valueDimStride = 0;
  for (let p = 0; p < sh.maxPositions; p = p + 16) valueDimStride = valueDimStride + valueBlock;
  let dimBlocks = 0;
  let valueHeadStride = 0;
  for (let d = 0; d < sh.headDim; d = d + 16) {
    dimBlocks = dimBlocks + 1;
    valueHeadStride = valueHeadStride + valueDimStride;
  }
  let valueLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) valueLayerStride = valueLayerStride + valueHeadStride;
  let valueDigitBytes = 0;
  for (let l = 0; l < layers; l++) valueDigitBytes = valueDigitBytes + valueLayerStride;
  // Exponents: one int32 per position, 64 bytes per 16 positions.
  let expHeadStride = 0;
  for (let p = 0; p < sh.maxPositions; p = p + 16) expHeadStride = expHeadStride + 64;
  let expLayerStride = 0;
  for (let h = 0; h < sh.kvHeads; h++) expLayerStride = expLayerStride + expHeadStride;
  let expMirrorBytes = 0;
  for (let l = 0; l < layers; l++) expMirrorBytes = expMirrorBytes + expLayerStride;
  return {
    digitsBlock,
    digitsHeadStride,
    digitsLayerStride,
    digitBytes,
    valueDimStride,
    valueBlock,
    valueDigitStride,
    valueHeadStride,
    valueLayerStride,
    valueDigitBytes,
    dimBlocks,
    expHeadStride,
    expLayerStride,
    expMirrorBytes,
  };
}

/** A step's vectors (plain arrays until simd.ts `useLut` makes them views of the module's memory). */
function newScratch(
  sh: Lut4Shape,
  qDim: number,
  kvDim: number,
  exp: LookupTable,
  layout: CacheLayout,
): Scratch {
  const widest = qDim > sh.ffn ? qDim : sh.ffn;
  const wider = widest > sh.width ? widest : sh.width;
  const attn = attentionScratch(sh.maxPositions, sh.headDim);
  return {
    x: new Int32Array(sh.width),
    z: new Int32Array(wider),
    a16: new Int32Array(wider),
    tabW: new Int32Array(sh.width << 4),
    tabQ: new Int32Array(qDim << 4),
    tabF: new Int32Array(sh.ffn << 4),
    q: new Int32Array(qDim),
    k: new Int32Array(kvDim),
    v: new Int32Array(kvDim),
    qExp: perSlot(sh.heads),
    kExp: perSlot(sh.kvHeads),
    vExp: perSlot(sh.kvHeads),
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
    call: new Int32Array(CALL_INTS),
    at: unplaced(),
    attn,
    ctx: attentionContext(sh, kvDim, exp, attn, layout),
    cur: newCursor(),
    slots: [],
    slotExp: new Int32Array(PREFILL_SLOTS),
  };
}

/**
 * Positions one prefill step carries through the projections at once (forward.ts `prefill`), in groups
 * of 16 inputs per lanes projection: two groups, so that two threads each take one.
 */
export const PREFILL_SLOTS = 32;
/** The most inputs one lanes projection takes (forward.ts `productBatch`'s groups). */
export const LANES_MAX = 16;

/** A step cursor at position 0. */
export function newCursor(): StepCursor {
  return {
    pos: 0,
    ropeAt: 0,
    cacheAt: 0,
    expAt: 0,
    la: 0,
    digits: false,
    digitsAt: 0,
    laneAt: 0,
    valuesAt: 0,
    valueRowAt: 0,
    expsAt: 0,
  };
}

/** The one attention context of a step, pointed at no cache yet (forward.ts points it per layer). */
function attentionContext(
  sh: Lut4Shape,
  kvDim: number,
  exp: LookupTable,
  attn: AttentionScratch,
  layout: CacheLayout,
): AttentionContext {
  return {
    headDim: sh.headDim,
    kvHeads: sh.kvHeads,
    kvDim,
    keys: new Int16Array(0),
    keyExp: new Int16Array(0),
    values: new Int16Array(0),
    valueExp: new Int16Array(0),
    exp,
    s: attn,
    digitsAt: 0,
    digitsHeadStride: layout.digitsHeadStride,
    valueDigitsAt: 0,
    valueHeadStride: layout.valueHeadStride,
    valueDimStride: layout.valueDimStride,
    valueDigitStride: layout.valueDigitStride,
    dimBlocks: layout.dimBlocks,
    keyExpAt: 0,
    valueExpAt: 0,
    expHeadStride: layout.expHeadStride,
  };
}

/** One vector of `n` int32 per batch slot. */
function perSlot(n: number): Int32Array[] {
  const out: Int32Array[] = [];
  for (let b = 0; b < PREFILL_SLOTS; b++) out.push(new Int32Array(n));
  return out;
}

/** Every vector outside the module's memory. */
function unplaced(): VectorAddresses {
  return {
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
  };
}

/** A fresh state at position 0 (its RNG state is set by sampler.ts `seedRng`). */
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

/**
 * Where the integer forward (engines/int/forward.ts) meets its WebAssembly module
 * (kernels/wasm/int-lut.ts): the matrices' order in the module, the engine's vectors as views of the
 * module's memory (`useLut`, one set per prefill batch slot, `useSlot` picking the step's), the KV
 * cache's digit planes and exponent mirrors kept there, and the steps
 * that run in the module when it is there and in the TypeScript kernels otherwise (`norm`, `quantize`,
 * `addResidual`) — the same integers either way. Serving code: audited with the forward
 * (tests/kernels/audit.test.ts).
 * @module
 */
import { packWords, type PreparedMatrix } from "../../kernels/int/gemv.ts";
import type { LutSums } from "../../kernels/int/gemv-lut.ts";
import { type NormPlan, rmsnorm } from "../../kernels/int/norm.ts";
import { quantizeBits, satAdd } from "../../kernels/int/round.ts";
import { type IntModel, type IntState, newCursor, PREFILL_SLOTS, type VectorAddresses } from "./model.ts";

/** The matrices `lutAt` addresses, in its order: per layer q, k, v, o, gate, up, down; then the head. */
export function lutMatrices(m: IntModel): PreparedMatrix[] {
  const mats: PreparedMatrix[] = [];
  for (const L of m.layers) {
    mats.push(L.q, L.k, L.v, L.o, L.gate, L.up, L.down);
  }
  mats.push(m.head);
  return mats;
}

/**
 * The vectors `useLut` places in the module's memory, in order: z, a16, q, k, v, proj, gate, up, att,
 * up16, prod, x, head, and the norms' scratch.
 */
function vectorLengths(m: IntModel): number[] {
  const widest = m.qDim > m.ffn ? m.qDim : m.ffn;
  const wider = widest > m.width ? widest : m.width;
  const norm = m.width > m.headDim ? m.width : m.headDim;
  return [
    wider,
    wider,
    m.qDim,
    m.kvDim,
    m.kvDim,
    m.width,
    m.ffn,
    m.ffn,
    m.qDim,
    m.ffn,
    m.ffn,
    m.width,
    m.headDim,
    norm,
  ];
}

/** int32 entries `useLut` needs for the vectors: each rounded up to 16 (the module writes whole blocks). */
export function vectorRoom(m: IntModel): number {
  let total = 0;
  for (const n of vectorLengths(m)) total = total + (((n + 15) >> 4) << 4);
  return total;
}

/**
 * Serves the projections and attention through `lut` (the codes and scales laid out at `at` and
 * `scalesAt`, in `lutMatrices` order; room for the digit planes, exponent mirrors and `vectorRoom`).
 * The projections' inputs and outputs become views of the module's memory, so nothing is copied.
 */
export function useLut(m: IntModel, lut: LutSums, at: Int32Array, scalesAt: Int32Array): void {
  m.lut = lut;
  m.lutAt = at;
  m.lutScales = scalesAt;
  m.digitOwner = null;
  const s = m.s;
  s.slots = [];
  let slotAt = lut.vectorsAt;
  let planesAt = lut.slotPlanesAt;
  for (let b = 0; b < PREFILL_SLOTS; b++) {
    const views: Int32Array[] = [];
    const bytes: number[] = [];
    let byte = slotAt;
    for (const n of vectorLengths(m)) {
      views.push(new Int32Array(lut.mem32.buffer, byte, n));
      bytes.push(byte);
      byte = byte + ((((n + 15) >> 4) << 4) << 2);
    }
    const cur = b === 0 ? s.cur : newCursor();
    s.slots.push({ views, at: slotAddresses(bytes), planesAt, cur });
    slotAt = slotAt + lut.slotVectorBytes;
    planesAt = planesAt + lut.slotPlaneBytes;
  }
  useSlot(m, 0);
}

/** The vectors' byte addresses, in `vectorLengths` order, by name. */
function slotAddresses(bytes: number[]): VectorAddresses {
  return {
    z: bytes[0],
    a16: bytes[1],
    q: bytes[2],
    k: bytes[3],
    v: bytes[4],
    proj: bytes[5],
    gate: bytes[6],
    up: bytes[7],
    att: bytes[8],
    up16: bytes[9],
    prod: bytes[10],
    x: bytes[11],
    head: bytes[12],
    normY: bytes[13],
  };
}

/** Makes batch slot `b`'s vectors, addresses and cursor the step's (`useLut` placed them). */
export function useSlot(m: IntModel, b: number): void {
  const s = m.s;
  const slot = s.slots[b];
  const views = slot.views;
  s.z = views[0];
  s.a16 = views[1];
  s.q = views[2];
  s.k = views[3];
  s.v = views[4];
  s.proj = views[5];
  s.gate = views[6];
  s.up = views[7];
  s.att = views[8];
  s.up16 = views[9];
  s.prod = views[10];
  s.x = views[11];
  s.head = views[12];
  s.normY = views[13];
  s.at = slot.at;
  s.cur = slot.cur;
}

/**
 * `rmsnorm` (kernels/int/norm.ts) of `x[off, off + plan.n)` into `out` at `oOff`, on the module's
 * `rmsnorm` when both are views of its memory (at bytes `xAt` and `outAt`, else −1) and n is a multiple
 * of 4: the same integers.
 */
export function norm(
  m: IntModel,
  x: Int32Array,
  xAt: number,
  off: number,
  xExp: number,
  plan: NormPlan,
  out: Int32Array,
  outAt: number,
  oOff: number,
): void {
  const lut = m.lut;
  if (lut !== null && (plan.n & 3) === 0 && xAt >= 0 && outAt >= 0) {
    const y = m.s.at.normY;
    lut.rmsnorm(xAt + (off << 2), plan.n, xExp, plan.bits, plan.epsN, plan.epsExp, y, outAt + (oOff << 2));
    return;
  }
  rmsnorm(x, off, xExp, plan, out, oOff);
}

/** The residual stream plus `proj` (round.ts `satAdd`), on the module when both are its views. */
export function addResidual(m: IntModel): void {
  const lut = m.lut;
  const s = m.s;
  if (lut !== null && (m.width & 3) === 0 && s.at.x >= 0 && s.at.proj >= 0) {
    lut.add_sat(s.at.x, s.at.proj, m.width);
    return;
  }
  for (let i = 0; i < m.width; i++) s.x[i] = satAdd(s.x[i], s.proj[i]);
}

/**
 * `quantizeBits` (kernels/int/round.ts) of `src[off, off + n)` into `dst` at `dOff`, on the module's
 * `quantize` when both are views of its memory (at bytes `srcAt` and `dstAt`, else −1) and n is a
 * multiple of 4: the same integers.
 */
export function quantize(
  m: IntModel,
  src: Int32Array,
  srcAt: number,
  off: number,
  n: number,
  e: number,
  dst: Int32Array,
  dstAt: number,
  dOff: number,
  bits: number,
): number {
  const lut = m.lut;
  if (lut !== null && (n & 3) === 0 && srcAt >= 0 && dstAt >= 0) {
    return e + lut.quantize(srcAt + (off << 2), n, dstAt + (dOff << 2), bits);
  }
  return quantizeBits(src, off, n, e, dst, dOff, bits);
}

/**
 * Writes the three base-16 digits of one position's `head_dim` cached values in offset binary
 * (v + 2048, in 1 … 4095): `at` is that position's row in its kv head's first block of dimensions
 * (`valueDigitsAt` + head + `valueBlock` · its block of 16 positions + 16 · its place in the block).
 */
function writeValueDigits(
  m: IntModel,
  mem8: Uint8Array,
  at: number,
  values: Int16Array,
  from: number,
): void {
  const two = m.valueDigitStride + m.valueDigitStride;
  let block = at;
  let lane = 0;
  for (let i = from; i < from + m.headDim; i++) {
    const v = values[i] + 2048;
    mem8[block + lane] = v & 15;
    mem8[block + m.valueDigitStride + lane] = (v >> 4) & 15;
    mem8[block + two + lane] = (v >> 8) & 15;
    lane = lane + 1;
    if (lane === 16) {
      lane = 0;
      block = block + m.valueDimStride;
    }
  }
}

/** Writes the three base-16 digits of `head_dim` cached key values at byte `at` (one position's lane). */
function writeDigits(m: IntModel, mem8: Uint8Array, at: number, keys: Int16Array, from: number): void {
  const plane = m.headDim << 4;
  let p = at;
  for (let i = from; i < from + m.headDim; i++) {
    const k = keys[i];
    mem8[p] = k & 15;
    mem8[p + plane] = (k >> 4) & 15;
    mem8[p + plane + plane] = (k >> 8) & 15;
    p = p + 16;
  }
}

/** Rewrites every layer's key digit planes from `st`'s cache (positions before `st.pos`). */
export function fillDigits(m: IntModel, lut: LutSums, st: IntState): void {
  let layerAt = lut.digitsAt;
  for (let l = 0; l < m.layers.length; l++) {
    let cacheAt = 0;
    let blockAt = 0;
    let lane = 0;
    for (let p = 0; p < st.pos; p++) {
      let headAt = layerAt;
      let off = 0;
      for (let h = 0; h < m.kvHeads; h++) {
        writeDigits(m, lut.mem8, headAt + blockAt + lane, st.keys[l], cacheAt + off);
        headAt = headAt + m.digitsHeadStride;
        off = off + m.headDim;
      }
      cacheAt = cacheAt + m.kvDim;
      lane = lane + 1;
      if (lane === 16) {
        lane = 0;
        blockAt = blockAt + m.digitsBlock;
      }
    }
    layerAt = layerAt + m.digitsLayerStride;
  }
  layerAt = lut.valueDigitsAt;
  for (let l = 0; l < m.layers.length; l++) {
    let cacheAt = 0;
    let rowAt = 0;
    let lane = 0;
    for (let p = 0; p < st.pos; p++) {
      let headAt = layerAt + rowAt;
      let off = 0;
      for (let h = 0; h < m.kvHeads; h++) {
        writeValueDigits(m, lut.mem8, headAt, st.values[l], cacheAt + off);
        headAt = headAt + m.valueHeadStride;
        off = off + m.headDim;
      }
      cacheAt = cacheAt + m.kvDim;
      rowAt = rowAt + 16;
      lane = lane + 1;
      if (lane === 16) {
        lane = 0;
        rowAt = rowAt - m.valueDigitStride + m.valueBlock; // from the 16th row to the next block
      }
    }
    layerAt = layerAt + m.valueLayerStride;
  }
  let keyLayer = lut.keyExpAt >> 2;
  let valueLayer = lut.valueExpAt >> 2;
  for (let l = 0; l < m.layers.length; l++) {
    let headAt = 0;
    for (let h = 0; h < m.kvHeads; h++) {
      let pe = h;
      for (let p = 0; p < st.pos; p++) {
        lut.mem32[keyLayer + headAt + p] = st.keyExp[l][pe];
        lut.mem32[valueLayer + headAt + p] = st.valueExp[l][pe];
        pe = pe + m.kvHeads;
      }
      headAt = headAt + (m.expHeadStride >> 2);
    }
    keyLayer = keyLayer + (m.expLayerStride >> 2);
    valueLayer = valueLayer + (m.expLayerStride >> 2);
  }
  m.digitOwner = st;
}

/**
 * Reads a tied head's embedding rows from the module's copy of the head (its last matrix), so that the
 * codes are held once: row r's first code byte is at block (r >> 4), lane (r & 15) of the 16-row
 * layout, and its pairs (and groups) lie 16 bytes apart.
 */
export function embedFromModule(m: IntModel, lut: LutSums): void {
  const last = m.lutAt.length - 1;
  const pairs = m.width >> 1;
  const groups = m.width >> 5;
  let blockCodes = m.lutAt[last];
  let blockScales = m.lutScales[last];
  let lane = 0;
  for (let r = 0; r < m.vocab; r++) {
    m.embedRow[r] = blockCodes + lane;
    m.embedScaleRow[r] = blockScales + lane;
    lane = lane + 1;
    if (lane === 16) {
      lane = 0;
      for (let j = 0; j < pairs; j++) blockCodes = blockCodes + 16;
      for (let g = 0; g < groups; g++) blockScales = blockScales + 16;
    }
  }
  m.embedBytes = lut.mem8;
  m.embedScales = lut.mem8;
  m.embedStride = 16;
}

/** Fills every matrix's word copy (gemv.ts `packWords`), for a model the TypeScript kernels serve. */
export function packAllWords(m: IntModel): void {
  for (const w of lutMatrices(m)) {
    if (w.words.length === 0) w.words = packWords(w.nibbles);
  }
}

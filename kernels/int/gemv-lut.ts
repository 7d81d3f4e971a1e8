/**
 * The 4-bit projection of kernels/int/gemv.ts on WebAssembly SIMD: the module's `gemv_lut`
 * (kernels/wasm/int-gemv.ts, built and laid out by kernels/wasm/int-lut.ts at load) computes, 16 rows at
 * a time, the group sums by `i8x16.swizzle` table look-ups and then every later step of `gemv` — the
 * scale (16 + m) by shifts and adds, the round-half-up shift, the saturating accumulate in group order
 * and the final shift — so the output is `gemv`'s, bit for bit; tests/kernels/int-lut.test.ts checks it on
 * every lut4 matrix of the default model and on saturating random inputs. Checked mode turns any
 * saturation the module counted into the same error `gemv` raises.
 *
 * Why the sums are exact: a table entry (u − 8) · x_c with |x_c| ≤ 32767 lies in (−2^18, 2^18), so its
 * 7-bit digits d0, d1 (unsigned) and top d2 = entry >> 14 (in [−16, 15]) rebuild it exactly as
 * d0 + 2^7 d1 + 2^14 d2; two columns' d0 (or d1) add as bytes (≤ 254), eight columns' d2 as signed
 * bytes (within [−128, 120]), and a group's 16-bit sums stay below 32 · 127.
 *
 * Memory of the instance (byte addresses): `planesAt` holds the input's tables as byte planes (48 bytes
 * per column: the digits d0, d1, d2 of each of the 16 entries), `inAt` and `outAt` the int32 input and
 * output vectors, and each matrix's codes and scales start at their own offsets: per 16-row block, per
 * pair of columns, the 16 rows' two codes a byte as the file packs them (the only copy of the codes the
 * engine keeps), then per block, per group, the 16 rows' scale bytes; rows past the matrix's last are
 * code 8 and scale 0 (weight 0).
 * @module
 */
import { assertBound, checked, holds } from "./check.ts";
import { ACC_EXP, type PreparedMatrix } from "./gemv.ts";

/** A lanes projection (`LutSums.gemv_lanes16` and the others): see there. */
export type LanesCall = (
  xs: number,
  xStride: number,
  count: number,
  codes: number,
  scales: number,
  rows: number,
  groups: number,
  base: number,
  bases: number,
  fin: number,
  out: number,
  outStride: number,
  work: number,
) => number;

/** The functions of the module a thread of the pool runs (engines/int/threads.ts). */
export type LutProjections = Pick<
  LutSums,
  | "gemv_lut"
  | "gemv_lanes4"
  | "gemv_lanes8"
  | "gemv_lanes16"
  | "gemv_lanes32"
  | "attend_heads"
  | "cache_digits"
  | "rmsnorm"
  | "norm_rope"
  | "quantize_heads"
  | "gated_product"
>;

/** A WebAssembly instance with the integer engine's functions and the matrices in its memory (kernels/wasm/int-lut.ts). */
export interface LutSums {
  /**
   * `gemv` of up to P inputs at once, the inputs in the vector lanes (kernels/wasm/int-lanes.ts): input
   * p < `count` at `xs + p · xStride` (int32), its output at `out + p · outStride`; the other arguments as
   * `gemv_lut`'s, `work` a thread's lanes work area (`lanesAt + t · lanesBytes`). Returns the saturations.
   */
  gemv_lanes4: LanesCall;
  gemv_lanes8: LanesCall;
  gemv_lanes16: LanesCall;
  gemv_lanes32: LanesCall;
  /** Byte planes of (u − 8) · x_i for `n` int32 at `x` (kernels/wasm/int-gemv.ts). */
  planes_offset(x: number, n: number, out: number): void;
  /** Byte planes of u · x_i at `outU` and of the signed top digit's table at `outS`. */
  planes_digits(x: number, n: number, outU: number, outS: number): void;
  /** Byte planes of u · x_i alone. */
  planes_unsigned(x: number, n: number, out: number): void;
  /** The whole projection of `count` inputs; returns the number of saturations. */
  gemv_lut(
    planes: number,
    planeStride: number,
    count: number,
    codes: number,
    scales: number,
    rows: number,
    groups: number,
    base: number,
    bases: number,
    fin: number,
    out: number,
    outStride: number,
    scratch: number,
  ): number;
  /** One query head's attention scores over `n` positions (kernels/wasm/int-attention.ts `scoresFn`). */
  scores(
    qU: number,
    qS: number,
    keys: number,
    n: number,
    hd: number,
    keyExp: number,
    scoreShift: number,
    out: number,
    sums: number,
  ): void;
  /** Q15 probabilities of `n` scores; returns the largest value exponent (`softmaxFn`). */
  softmax(
    scores: number,
    n: number,
    expT: number,
    expMul: number,
    tlen1: number,
    valueExp: number,
    out: number,
    rt: number,
    stat: number,
  ): number;
  /** One head's value mix Σ p · (v + 2048) over `n` positions, `blocks` blocks of 16 dimensions. */
  mix(
    tabs: number,
    codes: number,
    n: number,
    blocks: number,
    plane: number,
    digitStride: number,
    out: number,
  ): void;
  /** `quantizeBits` of `n` (a multiple of 4) int32 at `src` into `dst`; returns the shift. */
  quantize(src: number, n: number, dst: number, bits: number): number;
  /** out_i = a_i · b_i for 16-bit a_i, b_i, `n` a multiple of 4. */
  swiglu(a: number, b: number, n: number, out: number): void;
  /** kernels/int/norm.ts `rmsnorm` of `n` (a multiple of 4) int32 at `x` into `out`; `y` is scratch. */
  rmsnorm(
    x: number,
    n: number,
    xExp: number,
    bits: number,
    epsN: number,
    epsExp: number,
    y: number,
    out: number,
  ): void;
  /** x_i = sat32(x_i + y_i) for `n` (a multiple of 4) int32. */
  add_sat(x: number, y: number, n: number): void;
  /** kernels/int/tables.ts `silu` in place on `n` int32 at `x`. */
  silu(x: number, n: number, t: number, mul: number, len1: number, half: number): void;
  /**
   * Whole query heads' attention, one 32-byte task each from `tasks` to `end`, `stride` bytes apart, in
   * the work area `work` (kernels/wasm/int-attention.ts `attendHeadsFn`); returns the faults checked
   * mode refuses.
   */
  attend_heads(
    tasks: number,
    end: number,
    stride: number,
    work: number,
    hd: number,
    positions: number,
    expT: number,
    expMul: number,
    tlen1: number,
    blocks: number,
    plane: number,
    digitStride: number,
  ): number;
  /**
   * One position's keys and values, `heads` kv heads of `hd` int32 at `k` and `v`, into the cache's
   * digit planes (kernels/wasm/int-attention.ts `cacheDigitsFn`).
   */
  cache_digits(
    k: number,
    v: number,
    hd: number,
    heads: number,
    keyAt: number,
    keyHeadStride: number,
    valueAt: number,
    valueHeadStride: number,
    valueDimStride: number,
    valueDigitStride: number,
  ): void;
  /**
   * `heads` q or k heads of `hd` int32 at `v` normed, gained, requantised, rotated and requantised in
   * place, their exponents at `exps` (kernels/wasm/int-vector.ts `normRopeFn`).
   */
  norm_rope(
    v: number,
    heads: number,
    hd: number,
    xExp: number,
    normBits: number,
    epsN: number,
    epsExp: number,
    y: number,
    head: number,
    gains: number,
    gainExp: number,
    cos: number,
    sin: number,
    bits: number,
    exps: number,
  ): void;
  /** `quantize` of each of `heads` heads of `hd` int32 at `v` in place, head h's shift at `shifts + 4h`. */
  quantize_heads(v: number, heads: number, hd: number, bits: number, shifts: number): void;
  /**
   * SiLU(gate) · up of `n` int32 (a multiple of 4) requantised to 15 bits in `a16`, through `up16` and
   * `prod`; the sum of its three shifts at `shifts` (engines/int/forward.ts `gatedProduct`).
   */
  gated_product(
    gate: number,
    up: number,
    n: number,
    t: number,
    mul: number,
    len1: number,
    half: number,
    a16: number,
    up16: number,
    prod: number,
    shifts: number,
  ): void;
  /** kernels/int/rope.ts `ropeHead` in place on 2 · `half` int32 at `v` (half a multiple of 4). */
  rope(v: number, half: number, cos: number, sin: number): void;
  mem8: Uint8Array;
  mem32: Int32Array;
  /** Byte address of the input planes. */
  planesAt: number;
  /** 128 bytes of `gemv_lut` scratch. */
  scratchAt: number;
  /** The int32 input vector (byte address and index) and the int32 output vector. */
  inAt: number;
  inIndex: number;
  outAt: number;
  outIndex: number;
  /**
   * Byte address of the keys' digit planes (engines/int/forward.ts keeps them; kernels/int/attention.ts
   * reads them): per layer, per kv head, per block of 16 positions, per digit (low, middle, top), per
   * head dimension, the 16 positions' digits in 16 bytes.
   */
  digitsAt: number;
  /**
   * Byte address of the values' digit planes: per layer, per kv head, per digit, per block of 16
   * dimensions, per position, the 16 dimensions' digits in 16 bytes; the digits of v + 2048 (offset
   * binary, so every digit reads the same unsigned table).
   */
  valueDigitsAt: number;
  /** The exp table and its differences' multiples, and the table's length − 1. */
  expTAt: number;
  expMulAt: number;
  expLen1: number;
  /**
   * Mirrors of the cache's exponents as int32: per layer, per kv head, per position (rounded up to 16),
   * for keys and for values.
   */
  keyExpAt: number;
  valueExpAt: number;
  /** Room for the engine's vectors as views of this memory, so that no call copies its input or output. */
  vectorsAt: number;
  /**
   * Bytes of one batch slot's vectors (slot s's at `vectorsAt + s · slotVectorBytes`), and where the
   * slots' input planes lie (slot s's at `slotPlanesAt + s · slotPlaneBytes`; only with several slots).
   */
  slotVectorBytes: number;
  slotPlanesAt: number;
  slotPlaneBytes: number;
  /** One int32 per batch slot: the shift bases of a batched `gemv_lut` whose inputs' exponents differ. */
  basesAt: number;
  basesIndex: number;
  /** The lanes projections' work areas (one per thread, `lanesBytes` each; none when 0) and their widest P. */
  lanesAt: number;
  lanesBytes: number;
  lanesMax: number;
  /**
   * `attend_heads`' work areas (one per thread, `attendBytes` each, thread t's at `attendAt + t ·
   * attendBytes`), the positions they hold (a multiple of 16), and room for its tasks.
   */
  attendAt: number;
  attendBytes: number;
  attendPositions: number;
  attendTasksAt: number;
  /**
   * The batch slots' exponents (byte address and index): per slot (engines/int/forward.ts
   * `headExpsOf`), its q heads', its k heads' (`norm_rope`), its v heads' shifts (`quantize_heads`) and
   * its gated product's (`gated_product`).
   */
  headExpsAt: number;
  headExpsIndex: number;
  /** The byte address of each of `LutRoom.tables` (kernels/wasm/int-lut.ts). */
  tablesAt: Int32Array;
  /** RoPE's cos and sin tables as int32, [position][head_dim / 2]. */
  ropeCosAt: number;
  ropeSinAt: number;
  /** The SiLU table and its differences' multiples. */
  siluTAt: number;
  siluMulAt: number;
}

/**
 * Writes the byte planes of the tables of `x[off, off + cols)` at `lut.planesAt`, reading `x` where it
 * lies when it is a view of the instance's memory at byte `xAt`, else (`xAt` < 0) from a copy.
 */
export function inputPlanes(x: Int32Array, xAt: number, off: number, cols: number, lut: LutSums): void {
  if (xAt >= 0) {
    lut.planes_offset(xAt + (off << 2), cols, lut.planesAt);
    return;
  }
  const mem = lut.mem32;
  let j = lut.inIndex;
  const end = off + cols;
  for (let i = off; i < end; i++) {
    mem[j] = x[i];
    j = j + 1;
  }
  lut.planes_offset(lut.inAt, cols, lut.planesAt);
}

/**
 * `out[outOff + r] = (W · x)_r` at exponent `outExp`, exactly `gemv`'s result, for the input whose
 * planes are at `lut.planesAt` (`inputPlanes`) and the matrix whose codes and scales are at byte
 * `codesAt` and `scalesAt`. When `out` is a view of the instance's memory at byte `outAt` the module
 * writes it in place, whole blocks of 16 rows, so it must have room up to the next multiple of 16 past
 * the rows; with `outAt` < 0 the rows are copied into `out`.
 */
export function gemvLut(
  out: Int32Array,
  outAt: number,
  outOff: number,
  mat: PreparedMatrix,
  lut: LutSums,
  codesAt: number,
  scalesAt: number,
  xExp: number,
  outExp: number,
): void {
  const base = ACC_EXP + 4 - mat.expBase - xExp; // k = base − de
  const finalShift = outExp - ACC_EXP;
  const groups = mat.cols >> 5;
  const direct = outAt >= 0;
  const saturated = lut.gemv_lut(
    lut.planesAt,
    0,
    1,
    codesAt,
    scalesAt,
    mat.rows,
    groups,
    base,
    -1,
    finalShift,
    direct ? outAt + (outOff << 2) : lut.outAt,
    0,
    lut.scratchAt,
  );
  if (checked.on && !holds(saturated === 0)) assertBound(false, `${mat.name}: ${saturated} saturations`);
  if (direct) return;
  const mem = lut.mem32;
  let j = lut.outIndex;
  const end = outOff + mat.rows;
  for (let i = outOff; i < end; i++) {
    out[i] = mem[j];
    j = j + 1;
  }
}

/**
 * The module's lanes projection for `lanes` (4, 8, 16 or 32) inputs at once, over `count` ≤ `lanes`
 * of them (the rest of the lanes padded with zero inputs): `LutSums.gemv_lanes4` … `gemv_lanes32`
 * with the same arguments; returns the saturations.
 *
 * @example
 * ```ts
 * import { gemvLanes, type LutSums } from "./gemv-lut.ts";
 * declare const lut: LutSums, xsAt: number, stride: number, n: number, outAt: number; // offsets in its memory
 * declare const codesAt: number, scalesAt: number, rows: number, groups: number, base: number, fin: number;
 * const sat = gemvLanes(lut, 16, xsAt, stride, n, codesAt, scalesAt, rows, groups, base, -1, fin, outAt, stride, lut.lanesAt);
 * ```
 */
export function gemvLanes(
  lut: LutProjections,
  lanes: number,
  xs: number,
  xStride: number,
  count: number,
  codes: number,
  scales: number,
  rows: number,
  groups: number,
  base: number,
  bases: number,
  fin: number,
  out: number,
  outStride: number,
  work: number,
): number {
  if (lanes === 4) {
    return lut.gemv_lanes4(
      xs,
      xStride,
      count,
      codes,
      scales,
      rows,
      groups,
      base,
      bases,
      fin,
      out,
      outStride,
      work,
    );
  }
  if (lanes === 8) {
    return lut.gemv_lanes8(
      xs,
      xStride,
      count,
      codes,
      scales,
      rows,
      groups,
      base,
      bases,
      fin,
      out,
      outStride,
      work,
    );
  }
  if (lanes === 16) {
    return lut.gemv_lanes16(
      xs,
      xStride,
      count,
      codes,
      scales,
      rows,
      groups,
      base,
      bases,
      fin,
      out,
      outStride,
      work,
    );
  }
  return lut.gemv_lanes32(
    xs,
    xStride,
    count,
    codes,
    scales,
    rows,
    groups,
    base,
    bases,
    fin,
    out,
    outStride,
    work,
  );
}

/**
 * The 4-bit projection of kernels/int/gemv.ts with its step 1 (the group sums of table reads) done 16
 * rows at a time by WebAssembly SIMD (`lut16_rows`, kernels/wasm/lut.ts; the module is built and the
 * codes laid out by kernels/wasm/int-lut.ts, at load). Steps 2–4 (scale, round, saturating accumulate)
 * and the final shift are the same code as `gemv`, in the same group order, so the output is identical
 * to `gemv`'s bit for bit whenever the group sums are; tests/int-lut.test.ts checks it on every lut4
 * matrix of the default model and on saturating random inputs.
 *
 * Why the sums are exact: a table entry (u − 8) · x_c with |x_c| ≤ 32767 lies in (−2^18, 2^18), inside
 * `lut16_rows`' stated range [−2^23, 2^23); a group has 32 columns, within its 128.
 *
 * Memory of the instance (byte addresses): `planesAt` holds the input's tables as byte planes (48 bytes
 * per column: bits 0–7, 8–15, 16–23 of each of the 16 entries), `sumsAt` the group sums of one 16-row
 * block (16 int32 per group), and each matrix's codes start at its own offset: per 16-row block, per
 * column, the 16 rows' codes (0..15) in 16 bytes; rows past the matrix's last are code 8 (weight 0).
 * @module
 */
import { ACC_EXP, addGroup, type PreparedMatrix } from "./gemv.ts";
import { shift } from "./round.ts";

/** A WebAssembly instance with `lut16_rows` and the matrices' codes in its memory (kernels/wasm/int-lut.ts). */
export interface LutSums {
  /** 16 rows of Σ_c tab_c[code(r, c)] over `cols` columns (kernels/wasm/lut.ts). */
  lut16_rows(tabs: number, codes: number, cols: number, out: number): void;
  mem8: Uint8Array;
  mem32: Int32Array;
  /** Byte address of the input planes. */
  planesAt: number;
  /** Byte address of the group sums, and the same as an int32 index. */
  sumsAt: number;
  sumsIndex: number;
  /**
   * Byte address of the keys' digit planes (serve/int-forward.ts keeps them; kernels/int/attention.ts
   * reads them): per layer, per kv head, per block of 16 positions, per digit (low, middle, top), per
   * head dimension, the 16 positions' digits in 16 bytes.
   */
  digitsAt: number;
}

/**
 * Writes the byte planes of the tables of `x[off, off + cols)` at `mem8[at, …)`: 48 bytes per column,
 * entry u = (u − 8) · x_c made by addition from its neighbour, its three low bytes in three planes.
 */
export function inputPlanes(x: Int32Array, off: number, cols: number, mem8: Uint8Array, at: number): void {
  const end = off + cols;
  let p = at;
  for (let i = off; i < end; i++) {
    const v = x[i];
    let e = -v - v - v - v - v - v - v - v; // u = 0: −8 · x_c, by addition
    for (let u = 0; u < 16; u++) {
      mem8[p + u] = e & 255;
      mem8[p + 16 + u] = (e >> 8) & 255;
      mem8[p + 32 + u] = (e >> 16) & 255;
      e = e + v;
    }
    p = p + 48;
  }
}

/**
 * `out[outOff + r] = (W · x)_r` at exponent `outExp`, exactly `gemv`'s result, for the input whose
 * planes are at `lut.planesAt` (`inputPlanes`) and the matrix whose codes are at byte `codesAt`.
 */
export function gemvLut(
  out: Int32Array,
  outOff: number,
  mat: PreparedMatrix,
  lut: LutSums,
  codesAt: number,
  xExp: number,
  outExp: number,
): void {
  const sc = mat.scales;
  const sums = lut.mem32;
  const groups = mat.cols >> 5;
  const base = ACC_EXP + 4 - mat.expBase - xExp; // k = base − de
  const finalShift = outExp - ACC_EXP;
  const blockCodes = mat.cols << 4; // bytes of one 16-row block's codes
  let codes = codesAt;
  let s0 = 0; // scale index of the block's first row
  let o = outOff;
  for (let r0 = 0; r0 < mat.rows; r0 = r0 + 16) {
    // The block's group sums, group g at sums[sumsIndex + 16g + lane].
    let t = lut.planesAt;
    let c = codes;
    let at = lut.sumsAt;
    for (let g = 0; g < groups; g++) {
      lut.lut16_rows(t, c, 32, at);
      t = t + 1536;
      c = c + 512;
      at = at + 64;
    }
    codes = codes + blockCodes;
    const lanes = mat.rows - r0 < 16 ? mat.rows - r0 : 16;
    let s = s0;
    for (let lane = 0; lane < lanes; lane++) {
      let acc = 0;
      let idx = lut.sumsIndex + lane;
      for (let g = 0; g < groups; g++) {
        const a = sums[idx];
        idx = idx + 16;
        const scale = sc[s];
        s = s + 1;
        acc = addGroup(acc, a, scale, base, mat.name, r0 + lane);
      }
      out[o] = shift(acc, finalShift);
      o = o + 1;
    }
    s0 = s;
  }
}

/**
 * The 4-bit projection: `out = W · x` for a lut4 matrix W and a 16-bit activation vector x, with no
 * multiply. This file is the contract every port (WebGPU/WGSL, WebAssembly) must match bit for bit.
 *
 * ## Inputs
 * - `mat`: `rows` × `cols` (cols a multiple of 32), `expBase` (int), `nibbles` (rows · cols / 2 bytes,
 *   row-major, low nibble first: column 2i is `byte & 15`, column 2i + 1 is `byte >> 4`), and `scales`
 *   (rows · cols / 32 bytes, row-major, one per group of 32 columns: `m = byte & 15`, `de = byte >> 4`).
 *   Weight (r, c) is `(u − 8) · (16 + m) · 2^(expBase + de − 4)` with u its stored nibble.
 * - `x`: `cols` integers with |x_c| ≤ 32767, at exponent `xExp` (each means x_c · 2^xExp).
 * - `outExp`: the exponent of the output.
 *
 * ## Output, exactly
 * For each row r, walking its groups g = 0, 1, … in order, with `acc` starting at 0:
 *   1. a = Σ_{c in g} (u_{r,c} − 8) · x_c                 exact; |a| ≤ 32 · 8 · 32767 < 2^23
 *   2. p = (16 + m) · a                                   exact; |p| < 2^28
 *   3. k = ACC_EXP − (expBase + de − 4 + xExp)
 *      t = shift(p, k)                                    round half up, saturate to int32 (round.ts)
 *   4. acc = clamp_int32(acc + t)                          saturating, in group order
 * then `out[r] = shift(acc, outExp − ACC_EXP)`.
 * `shift(v, s)` for s > 0 is `(v >> s) + ((v >> (s − 1)) & 1)` (s ≥ 32 gives 0); for s < 0 it is
 * `v << −s` clamped to [−2^31, 2^31 − 1]; for s = 0 it is v.
 *
 * So each group is rounded once, at 2^ACC_EXP = 2^−24 (eight bits below the residual's 2^−16), and the
 * row is rounded once more to `outExp`. (The kernel reads the codes eight at a time from 32-bit
 * little-endian words of the same bytes; that changes no result.) The accumulator holds a real magnitude below 2^(31 + ACC_EXP) =
 * 128; beyond that it saturates (checked mode throws). The 16-entry table of an input element's
 * multiples, `tab[16c + u] = (u − 8) · x_c`, is built once per input vector by addition and shared by
 * every row (`activationTables`); step 1 reads it at each weight's nibble.
 *
 * @example
 * ```ts
 * import { activationTables, gemv, type LutMatrix, prepareMatrix } from "./gemv.ts";
 * declare const mat: LutMatrix, x: Int32Array, xExp: number, out: Int32Array;
 * const tab = new Int32Array(mat.cols << 4);
 * activationTables(x, 0, mat.cols, tab);
 * gemv(out, 0, prepareMatrix(mat), tab, xExp, -16);   // prepare once, at load
 * ```
 * @module
 */
import { assertBound, checked, holds } from "./check.ts";
import { mulScale } from "./mul.ts";
import { I32_MAX, I32_MIN, shift } from "./round.ts";

/** The exponent every group product is rounded to before it joins the row's accumulator. */
export const ACC_EXP = -24;

/** A lut4 matrix as stored: codes, scale bytes and the matrix's exponent base. */
export interface LutMatrix {
  name: string;
  rows: number;
  cols: number;
  expBase: number;
  /** rows · cols / 2 bytes, row-major, two codes per byte, low nibble first, code = q + 8. */
  nibbles: Uint8Array;
  /** rows · cols / 32 bytes: one scale byte per group of 32 along a row. */
  scales: Uint8Array;
}

/**
 * Writes the multiples tables of `x[off, off + cols)`: `tab[16c + u] = (u − 8) · x_c` for u in 0..15,
 * each entry from its neighbour by one addition. |x_c| ≤ 32767, so every entry is within ±2^18.
 */
export function activationTables(x: Int32Array, off: number, cols: number, tab: Int32Array): void {
  let t = 0;
  const end = off + cols;
  for (let i = off; i < end; i++) {
    const v = x[i];
    const neg = -v;
    tab[t + 8] = 0;
    tab[t + 9] = v;
    tab[t + 7] = neg;
    let up = v;
    let down = neg;
    for (let u = 10; u < 16; u++) {
      up = up + v;
      tab[t + u] = up;
    }
    for (let u = 6; u >= 0; u--) {
      down = down + neg;
      tab[t + u] = down;
    }
    t = t + 16;
  }
}

/** A matrix ready for `gemv`: its codes also as little-endian 32-bit words (eight codes per word). */
export interface PreparedMatrix extends LutMatrix {
  words: Int32Array;
}

/**
 * Packs a matrix's codes into words, by shifts, once at load (rows · cols is a multiple of 32); with
 * `withWords` false the words are left empty (the WebAssembly projection reads the packed bytes
 * themselves; `packWords` fills them later if the TypeScript kernels must serve after all).
 */
export function prepareMatrix(m: LutMatrix, withWords = true): PreparedMatrix {
  return {
    name: m.name,
    rows: m.rows,
    cols: m.cols,
    expBase: m.expBase,
    nibbles: m.nibbles,
    scales: m.scales,
    words: withWords ? packWords(m.nibbles) : new Int32Array(0),
  };
}

/** The codes `nibbles` as little-endian 32-bit words, eight codes a word. */
export function packWords(nibbles: Uint8Array): Int32Array {
  const n = nibbles.length >> 2;
  const words = new Int32Array(n);
  let b = 0;
  for (let i = 0; i < n; i++) {
    const nb = nibbles;
    words[i] = nb[b] | (nb[b + 1] << 8) | (nb[b + 2] << 16) | (nb[b + 3] << 24);
    b = b + 4;
  }
  return words;
}

/** Σ over the eight codes of word `w` of tab[t + 16j + code_j]: eight columns' table reads. */
function sum8(tab: Int32Array, t: number, w: number): number {
  return tab[t + (w & 15)] + tab[t + 16 + ((w >> 4) & 15)] + tab[t + 32 + ((w >> 8) & 15)] +
    tab[t + 48 + ((w >> 12) & 15)] + tab[t + 64 + ((w >> 16) & 15)] + tab[t + 80 + ((w >> 20) & 15)] +
    tab[t + 96 + ((w >> 24) & 15)] + tab[t + 112 + ((w >> 28) & 15)];
}

/** `out[outOff + r] = (W · x)_r` at exponent `outExp`, exactly as the module documentation specifies. */
export function gemv(
  out: Int32Array,
  outOff: number,
  mat: PreparedMatrix,
  tab: Int32Array,
  xExp: number,
  outExp: number,
): void {
  const words = mat.words;
  const sc = mat.scales;
  const groups = mat.cols >> 5;
  const base = ACC_EXP + 4 - mat.expBase - xExp; // k = base − de
  const finalShift = outExp - ACC_EXP;
  let b = 0;
  let s = 0;
  let o = outOff;
  for (let r = 0; r < mat.rows; r++) {
    let acc = 0;
    let t = 0;
    for (let g = 0; g < groups; g++) {
      const a = sum8(tab, t, words[b]) + sum8(tab, t + 128, words[b + 1]) + sum8(tab, t + 256, words[b + 2]) +
        sum8(tab, t + 384, words[b + 3]);
      b = b + 4;
      t = t + 512;
      const scale = sc[s];
      s = s + 1;
      acc = addGroup(acc, a, scale, base, mat.name, r);
    }
    out[o] = shift(acc, finalShift);
    o = o + 1;
  }
}

/**
 * One group's step of a row's accumulation, shared by every 4-bit projection kernel: the group's exact
 * sum `a` (|a| < 2^23) times its scale's (16 + m), shifted down to the row's common exponent (`base`
 * minus the group's de) with round half up, added to `acc` and saturated to int32. Checked mode asserts
 * the group-sum bound and reports a saturation; `name` and `row` name the place in those reports.
 */
export function addGroup(
  acc: number,
  a: number,
  scale: number,
  base: number,
  name: string,
  row: number,
): number {
  if (checked.on && !holds(a < 8388608 && a > -8388608)) {
    assertBound(false, `${name}: group sum ${a} outside ±2^23`);
  }
  const p = mulScale(a, scale & 15);
  const k = base - (scale >> 4);
  let c: number;
  if (k > 0) c = k >= 32 ? 0 : (p >> k) + ((p >> (k - 1)) & 1);
  else c = shift(p, k);
  const sum = acc + c;
  if (sum <= I32_MAX && sum >= I32_MIN) return sum;
  if (checked.on) assertBound(false, `${name}: row ${row} accumulator saturates`);
  return sum > 0 ? I32_MAX : I32_MIN;
}

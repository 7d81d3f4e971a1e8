/**
 * What every block codec shares: f32 rounding, C's `roundf`, f16 fields read and written in place,
 * the per-element importance of a row, the weighted least-squares scale fit, and the symmetric scale
 * search (ggml's make_qx_quants, in spirit) that Q6_K and the weighted Q5_0 use.
 *
 * @example
 * ```ts
 * import { getF16, putF16 } from "./quants-block.ts";
 * const block = new Uint8Array(18);
 * putF16(block, 0, 0.5); getF16(block, 0); // 0.5
 * ```
 * @module
 */
import { f16Bits, f16BitsToF32Bits } from "./float16.ts";

/** Round to f32: JavaScript computes in f64, and one unrounded product can move a byte. */
export const f32 = Math.fround;

/** C's roundf: halves go away from zero (Math.round would send -2.5 to -2). */
export function roundAway(v: number): number {
  // sign(v) · floor(|v| + 0.5), without the call to Math.sign (the K-quants' hottest line); a zero keeps
  // its sign, as the product did.
  return v > 0 ? Math.floor(v + 0.5) : v < 0 ? -Math.floor(0.5 - v) : v;
}

const scratchF = new Float32Array(1), scratchI = new Uint32Array(scratchF.buffer);

/**
 * Writes `v` as f16 (round to nearest even, as ggml) at `at`, little-endian; returns the stored value.
 *
 * @example
 * ```ts
 * import { putF16 } from "./quants-block.ts";
 * putF16(new Uint8Array(2), 0, 0.1); // 0.0999755859375
 * ```
 */
export function putF16(out: Uint8Array, at: number, v: number): number {
  scratchF[0] = v;
  const h = f16Bits(scratchI[0]);
  out[at] = h & 0xff, out[at + 1] = h >> 8;
  scratchI[0] = f16BitsToF32Bits(h);
  return scratchF[0];
}

/**
 * The f16 at `at`, widened to a number.
 *
 * @example
 * ```ts
 * import { getF16 } from "./quants-block.ts";
 * getF16(Uint8Array.of(0, 60), 0); // 1
 * ```
 */
export function getF16(bytes: Uint8Array, at: number): number {
  scratchI[0] = f16BitsToF32Bits(bytes[at] | (bytes[at + 1] << 8));
  return scratchF[0];
}

/**
 * Per-element weights of `n` values laid out in rows of `importance.length` (one weight per input
 * column, as llama.cpp's imatrix has them); all ones when no importance is given.
 *
 * @example
 * ```ts
 * import { elementWeights } from "./quants-block.ts";
 * elementWeights(4, Float32Array.of(1, 2)); // [1, 2, 1, 2]
 * ```
 */
export function elementWeights(n: number, importance?: Float32Array): Float32Array {
  const w = new Float32Array(n);
  if (!importance) return w.fill(1);
  if (importance.length === 0 || n % importance.length !== 0) {
    throw new RangeError(`importance of ${importance.length} columns does not divide ${n} values into rows`);
  }
  const bad = importance.findIndex((x) => !(x >= 0) || !Number.isFinite(x));
  if (bad >= 0) {
    throw new RangeError(`importance[${bad}] is ${importance[bad]}; expected a finite number ≥ 0`);
  }
  for (let i = 0; i < n; i++) w[i] = importance[i % importance.length];
  return w;
}

/**
 * The scale s minimising Σ w (s·q − x)² for fixed integer codes q, and that error; s = 0 when every
 * weighted q is 0. `x`, `w` and `q` are read from `o` for `n` values.
 *
 * @example
 * ```ts
 * import { fitScale } from "./quants-block.ts";
 * fitScale(Float32Array.of(2, 4), Float32Array.of(1, 1), Int8Array.of(1, 2), 0, 2); // { s: 2, err: 0 }
 * ```
 */
export function fitScale(
  x: Float32Array,
  w: Float32Array,
  q: ArrayLike<number>,
  o: number,
  n: number,
): { s: number; err: number } {
  let sqx = 0, sqq = 0, sxx = 0;
  for (let j = 0; j < n; j++) {
    const wj = w[o + j], qj = q[j], xj = x[o + j];
    sqx += wj * qj * xj, sqq += wj * qj * qj, sxx += wj * xj * xj;
  }
  const s = sqq > 0 ? sqx / sqq : 0;
  return { s, err: sxx - s * sqx };
}

// Candidate offsets of the scale searches, the plain rule's (0) first, so that on a tie (a constant
// block fits every one) the search keeps the scale ggml's reference picks.
const offsets = (k: number) => [0, ...Array.from({ length: 2 * k }, (_, i) => (i < k ? i - k : i - k + 1))];
/** Offsets 0, −7..−1, 1..7 and 0, −9..−1, 1..9 of the IQ4_NL and symmetric searches. */
export const CANDIDATES_7 = offsets(7), CANDIDATES_9 = offsets(9);

/**
 * The scale s of a symmetric code range −nmax..nmax−1 minimising Σ w (s·q − x)² over `n` values
 * from `o`, searched as ggml's make_qx_quants does: 19 candidate inverse scales around −nmax / max
 * (`max` the value of largest magnitude), each assignment refitted by least squares. 0 for a zero block.
 *
 * @example
 * ```ts
 * import { symmetricScale } from "./quants-block.ts";
 * declare const x: Float32Array, w: Float32Array, maxOf16: number; // values, weights, x[0..16)'s largest magnitude
 * symmetricScale(x, w, 0, 16, 32, maxOf16); // Q6_K's sub-block scale
 * ```
 */
export function symmetricScale(
  x: Float32Array,
  w: Float32Array,
  o: number,
  n: number,
  nmax: number,
  max: number,
): number {
  if (max === 0) return 0;
  // `fitScale` of each candidate's codes, its sums taken as they are made (the same terms in the same
  // order: the same bits, without a codes array or an object per candidate); Σ w x² is the same for all.
  let sxx = 0;
  for (let j = 0; j < n; j++) sxx += w[o + j] * x[o + j] * x[o + j];
  let bestS = 0, bestErr = Infinity;
  for (let c = 0; c < CANDIDATES_9.length; c++) {
    const id = -(nmax + 0.1 * CANDIDATES_9[c]) / max;
    let sqx = 0, sqq = 0;
    for (let j = 0; j < n; j++) {
      const xj = x[o + j], v = id * xj;
      let q = v > 0 ? Math.floor(v + 0.5) : v < 0 ? -Math.floor(0.5 - v) : 0;
      q = q < -nmax ? -nmax : q > nmax - 1 ? nmax - 1 : q;
      const wj = w[o + j];
      sqx += wj * q * xj, sqq += wj * q * q;
    }
    const s = sqq > 0 ? sqx / sqq : 0, err = sxx - s * sqx;
    if (err < bestErr) bestS = s, bestErr = err;
  }
  return bestS;
}

/** v limited to lo..hi. */
export function clamp(v: number, lo: number, hi: number): number {
  return v < lo ? lo : v > hi ? hi : v;
}

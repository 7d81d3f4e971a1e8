/**
 * IQ4_NL and Q5_0, ggml's two 32-value blocks that the K-quants fall back to or stand beside.
 *
 * - IQ4_NL (18 bytes): an f16 scale d, then 16 bytes of 4-bit codes into a fixed non-linear
 *   codebook (`IQ4NL_VALUES`): value j (j < 16) is d · book[low nibble of byte j], value j + 16 is
 *   d · book[high nibble of byte j].
 * - Q5_0 (22 bytes): an f16 scale d, 4 bytes holding bit 4 of each of the 32 codes (u32,
 *   little-endian, bit j for value j), 16 bytes of low nibbles laid out as Q4_0's; value = (q − 16) · d.
 *
 * The IQ4_NL quantizer searches the scale as ggml's does (candidates around the one that sends the
 * largest value to the codebook's end, each refitted by weighted least squares), at both ends; Q5_0's,
 * without an importance, is ggml's reference quantizer byte for byte, and with one, the same weighted
 * search.
 *
 * @example
 * ```ts
 * import { dequantizeIq4Nl, quantizeIq4Nl } from "./quants-iq4nl.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const bytes = quantizeIq4Nl(row);             // 18 bytes per 32 values
 * const back = dequantizeIq4Nl(bytes, row.length);
 * ```
 * @module
 */
import {
  CANDIDATES_7,
  clamp,
  elementWeights,
  f32,
  fitScale,
  getF16,
  putF16,
  roundAway,
  symmetricScale,
} from "./quants-block.ts";

/** ggml's `kvalues_iq4nl`: the 16 levels an IQ4_NL code indexes, in units of the block scale. */
export const IQ4NL_VALUES: readonly number[] = [
  -127,
  -104,
  -83,
  -65,
  -49,
  -35,
  -22,
  -10,
  1,
  13,
  25,
  38,
  53,
  69,
  89,
  113,
];

const QK = 32;
/** The codebook's two ends, where the scale search puts a block's largest value: ggml's first. */
const ENDS = [IQ4NL_VALUES[0], IQ4NL_VALUES[15]];
// Midpoints between neighbouring levels: a value below MID[k] is nearer level k than level k + 1.
const MID = IQ4NL_VALUES.slice(1).map((v, k) => (v + IQ4NL_VALUES[k]) / 2);

/** The index of the codebook level nearest `v` (ties to the lower level). */
export function nearestIq4Nl(v: number): number {
  let k = 0;
  while (k < 15 && v > MID[k]) k++;
  return k;
}

function checkBlocks(n: number, type: string): void {
  if (n % QK !== 0) throw new RangeError(`${n} values are not a whole number of ${QK}-value ${type} blocks`);
}

/**
 * IQ4_NL blocks of `x`; `importance` (one weight per column of rows of its length) weights the
 * squared error the scale search minimises, uniform by default.
 *
 * @example
 * ```ts
 * import { quantizeIq4Nl } from "./quants-iq4nl.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * declare const imatrixColumnMeans: Float32Array; // one importance per column, 256 here
 * quantizeIq4Nl(row, imatrixColumnMeans); // 18 bytes per 32 values
 * ```
 */
export function quantizeIq4Nl(x: Float32Array, importance?: Float32Array): Uint8Array {
  checkBlocks(x.length, "IQ4_NL");
  const w = elementWeights(x.length, importance);
  const out = new Uint8Array((x.length / QK) * 18), codes = new Uint8Array(QK), levels = new Float32Array(QK);
  for (let b = 0; b < x.length / QK; b++) {
    const o = b * QK;
    let amax = 0, max = 0;
    for (let j = 0; j < QK; j++) if (amax < Math.abs(x[o + j])) amax = Math.abs(x[o + j]), max = x[o + j];
    let best = { s: 0, err: Infinity };
    // Candidate inverse scales put the largest value at −127 ± 7 codebook units, as ggml's
    // quantize_row_iq4_nl_impl does, then at +113 ± 7: the codebook is not symmetric, and its other end
    // often fits a block better (on a 256-wide Qwen3 fold it lowered KL by 3% plain, 7% calibrated). Each
    // assignment's scale is refitted, so the search is over assignments.
    for (const end of amax > 0 ? ENDS : []) {
      for (const t of CANDIDATES_7) {
        const id = (end + t) / max;
        for (let j = 0; j < QK; j++) levels[j] = IQ4NL_VALUES[nearestIq4Nl(x[o + j] * id)];
        const fit = fitScale(x, w, levels, o, QK);
        if (fit.err < best.err) best = fit;
      }
    }
    const d = putF16(out, b * 18, best.s);
    // With the stored d, each value's nearest level is the best code whatever its weight.
    for (let j = 0; j < QK; j++) codes[j] = d ? nearestIq4Nl(f32(x[o + j] / d)) : 8;
    for (let j = 0; j < 16; j++) out[b * 18 + 2 + j] = codes[j] | (codes[j + 16] << 4);
  }
  return out;
}

/**
 * IQ4_NL blocks back to f32: d · book[code].
 *
 * @example
 * ```ts
 * import { dequantizeIq4Nl, quantizeIq4Nl } from "./quants-iq4nl.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeIq4Nl(quantizeIq4Nl(row), row.length); // ≈ row
 * ```
 */
export function dequantizeIq4Nl(bytes: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let b = 0; b < n / QK; b++) {
    const d = getF16(bytes, b * 18);
    for (let j = 0; j < 16; j++) {
      const q = bytes[b * 18 + 2 + j];
      out[b * QK + j] = d * IQ4NL_VALUES[q & 15];
      out[b * QK + j + 16] = d * IQ4NL_VALUES[q >> 4];
    }
  }
  return out;
}

/**
 * Q5_0 blocks of `x`. Without `importance`, ggml's `quantize_row_q5_0_ref`: the value of largest
 * magnitude (sign kept) sets d = max / −16, q = min(31, trunc(x / d + 16.5)). With it, the scale is
 * searched to minimise the weighted squared error (codes −16..15 around a fitted scale).
 *
 * @example
 * ```ts
 * import { quantizeQ5_0 } from "./quants-iq4nl.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * quantizeQ5_0(row); // 22 bytes per 32 values
 * ```
 */
export function quantizeQ5_0(x: Float32Array, importance?: Float32Array): Uint8Array {
  checkBlocks(x.length, "Q5_0");
  const w = importance ? elementWeights(x.length, importance) : undefined;
  const out = new Uint8Array((x.length / QK) * 22), q = new Int32Array(QK);
  for (let b = 0; b < x.length / QK; b++) {
    const o = b * QK;
    let amax = 0, max = 0;
    for (let j = 0; j < QK; j++) if (amax < Math.abs(x[o + j])) amax = Math.abs(x[o + j]), max = x[o + j];
    if (!w) {
      const d = f32(max / -16), id = d ? f32(1 / d) : 0;
      putF16(out, b * 22, d);
      for (let j = 0; j < QK; j++) q[j] = Math.min(31, Math.trunc(f32(f32(x[o + j] * id) + 16.5)));
    } else {
      const d = putF16(out, b * 22, symmetricScale(x, w, o, QK, 16, max));
      for (let j = 0; j < QK; j++) q[j] = d ? clamp(roundAway(x[o + j] / d), -16, 15) + 16 : 16;
    }
    let qh = 0;
    for (let j = 0; j < 16; j++) {
      out[b * 22 + 6 + j] = (q[j] & 15) | ((q[j + 16] & 15) << 4);
      qh |= ((q[j] >> 4) << j) | ((q[j + 16] >> 4) << (j + 16));
    }
    new DataView(out.buffer).setUint32(b * 22 + 2, qh >>> 0, true);
  }
  return out;
}

/**
 * Q5_0 blocks back to f32: (q − 16) · d.
 *
 * @example
 * ```ts
 * import { dequantizeQ5_0, quantizeQ5_0 } from "./quants-iq4nl.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeQ5_0(quantizeQ5_0(row), row.length);
 * ```
 */
export function dequantizeQ5_0(bytes: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n), dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < n / QK; b++) {
    const d = getF16(bytes, b * 22), qh = dv.getUint32(b * 22 + 2, true);
    for (let j = 0; j < 16; j++) {
      const lo = bytes[b * 22 + 6 + j];
      // An exact integer times an f32 is exact in f64, so the store's one rounding is C's f32 product.
      out[b * QK + j] = (((lo & 15) | (((qh >>> j) & 1) << 4)) - 16) * d;
      out[b * QK + j + 16] = (((lo >> 4) | (((qh >>> (j + 16)) & 1) << 4)) - 16) * d;
    }
  }
  return out;
}

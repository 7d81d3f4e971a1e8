/**
 * The two nonlinear functions, by table with linear interpolation: exp(−d) for the softmax and the
 * sampler, and SiLU for the MLP gate. The interpolation's product (a table difference times the
 * fraction bits of the argument) reads a multiples table of each difference, built once at load, at
 * the two base-16 digits of the 8-bit fraction.
 *
 * Formats (formats/lut4/lut4.md): arguments are int32 at exponent −16; the exp table holds
 * round(2^30 · exp(−i / 256)); the SiLU table holds round(2^16 · silu((i − half) / 256)).
 *
 * @example
 * ```ts
 * import { expNeg, prepareTable } from "./tables.ts";
 * const expTableValues = new Int32Array(32 * 256 + 2); // as a lut4 file holds it: 32 nats in steps of 1/256
 * for (let i = 0; i < expTableValues.length; i++) expTableValues[i] = Math.round(2 ** 30 * Math.exp(-i / 256));
 * const e = prepareTable(expTableValues, 0);
 * expNeg(e, 65536);   // ≈ 2^30 · e^-1
 * ```
 * @module
 */

/** A function table and, per interval, the 16 multiples of its difference. */
export interface LookupTable {
  t: Int32Array;
  /** mul[16i + k] = k · (t[i + 1] − t[i]). */
  mul: Int32Array;
  /** For SiLU: the index of x = 0 (2^(range − step)); 0 for exp. */
  half: number;
}

/** Builds the difference multiples of a table by addition. */
export function prepareTable(t: Int32Array, half: number): LookupTable {
  const mul = new Int32Array(t.length << 4);
  let o = 0;
  for (let i = 0; i + 1 < t.length; i++) {
    const d = t[i + 1] - t[i];
    let acc = 0;
    for (let k = 0; k < 16; k++) {
      mul[o + k] = acc;
      acc = acc + d;
    }
    o = o + 16;
  }
  return { t, mul, half };
}

/**
 * exp(−d · 2^-16) in Q30 for int32 d ≥ 0: entry i = d >> 8, fraction f = d & 255, and
 * t[i] + floor((t[i + 1] − t[i]) · f / 256); 0 past the table (d ≥ 32 nats).
 * |t[i + 1] − t[i]| < 2^23, so each shifted partial stays below 2^31.
 */
export function expNeg(e: LookupTable, d: number): number {
  const i = d >> 8;
  if (i >= e.t.length - 1) return 0;
  const f = d & 255;
  const o = i << 4;
  return e.t[i] + (((e.mul[o + (f >> 4)] << 4) + e.mul[o + (f & 15)]) >> 8);
}

/**
 * silu(x · 2^-16) at exponent −16 for an int32 x: 0 below the table, x itself above it (silu(x) = x to
 * within 2^-16 there), otherwise interpolated like `expNeg`.
 */
export function silu(s: LookupTable, x: number): number {
  const i = (x >> 8) + s.half;
  if (i < 0) return 0;
  if (i >= s.t.length - 1) return x;
  const f = x & 255;
  const o = i << 4;
  return s.t[i] + (((s.mul[o + (f >> 4)] << 4) + s.mul[o + (f & 15)]) >> 8);
}

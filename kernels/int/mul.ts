/**
 * The product of two run-time values without a multiply: a table of the multiples of one operand, built
 * by repeated addition, read at the base-16 digits of the other and summed with shifts:
 *
 *   a · b = Σ_k 16^k · T_a[d_k(b)],   T_a[q] = q · a,   T_a[q + 1] = T_a[q] + a.
 *
 * A multiples table here has 32 entries: `t[i] = i · a` for i < 16, and `t[16 + i]` the same for i < 8
 * and `(i − 16) · a` for i ≥ 8, so the top digit of a 16-bit two's-complement `b` reads as signed and
 * a negative `b` needs no branch.
 *
 * Bounds (the callers keep them): the operand `a` of a table satisfies |a| ≤ 2^16 − 1 and the read
 * operand |b| ≤ 2^15, with |a · b| < 2^31; then every entry (≤ 15 · |a| < 2^20) and every shifted term
 * (|t[16 + d3]| · 2^12 ≤ 8 · (2^16 − 1) · 2^12 < 2^31) stays inside int32.
 *
 * @example
 * ```ts
 * import { mulS16, multiples } from "./mul.ts";
 * const t = new Int32Array(32);
 * multiples(300, t, 0);
 * mulS16(t, 0, -7);   // -2100
 * ```
 * @module
 */

/** Entries in one multiples table. */
export const MUL_TABLE = 32;

/** Writes the 32-entry multiples table of `a` at `t[off, off + 32)`, by addition only. */
export function multiples(a: number, t: Int32Array, off: number): void {
  let acc = 0;
  for (let i = 0; i < 16; i++) {
    t[off + i] = acc;
    acc = acc + a;
  }
  // acc is now 16a: the signed top digit i ≥ 8 stands for i − 16.
  for (let i = 0; i < 8; i++) t[off + 16 + i] = t[off + i];
  for (let i = 8; i < 16; i++) t[off + 16 + i] = t[off + i] - acc;
}

/** `a · b` for a signed 16-bit `b` (−32768 ≤ b ≤ 32767), from the multiples table of `a` at `off`. */
export function mulS16(t: Int32Array, off: number, b: number): number {
  return (t[off + 16 + ((b >> 12) & 15)] << 12) + (t[off + ((b >> 8) & 15)] << 8) +
    (t[off + ((b >> 4) & 15)] << 4) + t[off + (b & 15)];
}

/** `a · b` for a signed 12-bit `b` (−2048 ≤ b ≤ 2047): three digits, the top one signed. */
export function mulS12(t: Int32Array, off: number, b: number): number {
  return (t[off + 16 + ((b >> 8) & 15)] << 8) + (t[off + ((b >> 4) & 15)] << 4) + t[off + (b & 15)];
}

/** `a · b` for an unsigned `b` in [0, 2^16), from the multiples table of `a` at `off`. */
export function mulU16(t: Int32Array, off: number, b: number): number {
  return (t[off + (b >> 12)] << 12) + (t[off + ((b >> 8) & 15)] << 8) + (t[off + ((b >> 4) & 15)] << 4) +
    t[off + (b & 15)];
}

/** `a · b` for an unsigned `b` in [0, 256), from the multiples table of `a` at `off`. */
export function mulU8(t: Int32Array, off: number, b: number): number {
  return (t[off + (b >> 4)] << 4) + t[off + (b & 15)];
}

/**
 * `(16 + m) · a` for a scale mantissa `m` in [0, 16): a shift-add over the four bits of m, with masks
 * instead of branches. |a| < 2^26 keeps the result inside int32.
 */
export function mulScale(a: number, m: number): number {
  return (a << 4) + (a & -(m & 1)) + ((a << 1) & -((m >> 1) & 1)) + ((a << 2) & -((m >> 2) & 1)) +
    ((a << 3) & -(m >> 3));
}

/**
 * The one rounding primitive of the integer engine, and the helpers built on it.
 *
 * A fixed-point value is an integer `v` with a power-of-two exponent `e`: it means v · 2^e. Every
 * change of exponent goes through `shift`, which rounds half up (ties toward +infinity, for negative
 * values too) and saturates to the int32 range. All values handed to these functions are int32 numbers
 * (JavaScript `>>` and `<<` work on 32 bits; every bound below keeps inputs and outputs inside int32).
 *
 * @example
 * ```ts
 * import { shift } from "./round.ts";
 * shift(5, 1);   // 3   (2.5 rounds up)
 * shift(-5, 1);  // -2  (-2.5 rounds up)
 * shift(3, -2);  // 12
 * ```
 * @module
 */
import { assertBound, checked } from "./check.ts";

/** Largest int32. */
export const I32_MAX = 2147483647;
/** Smallest int32. */
export const I32_MIN = -2147483648;
/** Largest 16-bit activation magnitude (−32768 never appears, so negation is safe). */
export const A16_MAX = 32767;

/**
 * `round_half_up(v · 2^-s)` saturated to int32, for an int32 `v` and any integer `s`.
 * s > 0 shifts right: floor(v / 2^s) plus bit s−1 of v (that bit is the half). This form never
 * overflows, unlike adding 2^(s−1) first. s ≥ 32 gives 0 (|v / 2^s| ≤ 1/2, and −1/2 rounds up to 0).
 * s < 0 shifts left and saturates.
 */
export function shift(v: number, s: number): number {
  if (s > 0) {
    if (s >= 32) return 0;
    return (v >> s) + ((v >> (s - 1)) & 1);
  }
  if (s === 0) return v;
  const k = -s;
  if (k >= 31) {
    if (v === 0) return 0;
    if (checked.on) assertBound(false, `shift(${v}, ${s}) saturates`);
    return v > 0 ? I32_MAX : I32_MIN;
  }
  const lim = I32_MAX >> k;
  if (v > lim) {
    if (checked.on) assertBound(false, `shift(${v}, ${s}) saturates`);
    return I32_MAX;
  }
  if (v < -lim - 1) {
    if (checked.on) assertBound(false, `shift(${v}, ${s}) saturates`);
    return I32_MIN;
  }
  return v << k;
}

/** Clamps any integer-valued number (exact below 2^53) to int32; checked mode refuses a clamp. */
export function sat32(v: number): number {
  if (v > I32_MAX) {
    if (checked.on) assertBound(false, `${v} exceeds int32`);
    return I32_MAX;
  }
  if (v < I32_MIN) {
    if (checked.on) assertBound(false, `${v} exceeds int32`);
    return I32_MIN;
  }
  return v;
}

/** Saturating int32 addition (the residual add): the sum of two int32 is exact in a double. */
export function satAdd(a: number, b: number): number {
  return sat32(a + b);
}

/** Number of bits of a non-negative integer below 2^32 (0 for 0): the position of its top set bit + 1. */
export function bitlen(v: number): number {
  let x = v >>> 0;
  let n = 0;
  if (x >= 65536) {
    x = x >>> 16;
    n = 16;
  }
  if (x >= 256) {
    x = x >>> 8;
    n = n + 8;
  }
  if (x >= 16) {
    x = x >>> 4;
    n = n + 4;
  }
  if (x >= 4) {
    x = x >>> 2;
    n = n + 2;
  }
  if (x >= 2) {
    x = x >>> 1;
    n = n + 1;
  }
  return n + x;
}

/** Largest |v| over `src[off, off + n)` (as a non-negative number; |I32_MIN| = 2^31 is exact). */
export function maxAbs(src: Int32Array, off: number, n: number): number {
  let mx = 0;
  const end = off + n;
  for (let i = off; i < end; i++) {
    const v = src[i];
    const a = v < 0 ? -v : v;
    if (a > mx) mx = a;
  }
  return mx;
}

/**
 * Act16 requantisation: writes `src[off, off + n)` (int32 at exponent `e`) to `dst[dOff, ...)` as
 * integers of at most 15 bits of magnitude (|v| ≤ 32767) sharing one exponent, which it returns.
 * The largest magnitude is normalised to exactly 15 bits: shifted right with rounding when larger,
 * left (exact) when smaller. An all-zero vector keeps exponent `e`.
 */
export function quantize16(
  src: Int32Array,
  off: number,
  n: number,
  e: number,
  dst: Int32Array,
  dOff: number,
): number {
  return quantizeBits(src, off, n, e, dst, dOff, 15);
}

/** `quantize16` to `bits` bits of magnitude (|v| ≤ 2^bits − 1), for 1 ≤ bits ≤ 15. */
export function quantizeBits(
  src: Int32Array,
  off: number,
  n: number,
  e: number,
  dst: Int32Array | Int16Array,
  dOff: number,
  bits: number,
): number {
  const mx = maxAbs(src, off, n);
  const s = mx === 0 ? 0 : bitlen(mx) - bits;
  const top = (1 << bits) - 1;
  let j = dOff;
  const end = off + n;
  for (let i = off; i < end; i++) {
    let v = shift(src[i], s);
    if (v > top) v = top;
    if (v < -top) v = -top;
    dst[j] = v;
    j = j + 1;
  }
  return e + s;
}

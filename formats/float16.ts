/**
 * Narrowing f32 to the two 16-bit float formats and widening back, on the host.
 *
 * f16 uses the platform's `Float16Array` (IEEE binary16, round to nearest even, NaN stays NaN, ±0,
 * ±inf and subnormals kept). bf16 has no platform type, so it is integer bit manipulation on the f32
 * bit pattern: the top 16 bits, rounded to nearest even. Both widen exactly.
 *
 * @example
 * ```ts
 * const bits = f32ToBf16(new Float32Array([1.00390625])); // Uint16Array [0x3f80] (tie to even)
 * bf16ToF32(bits); // Float32Array [1]
 * ```
 * @module
 */

/** Largest finite f16 value. */
export const F16_MAX = 65504;
/** Smallest positive normal f16 value (2^-14). */
export const F16_MIN_NORMAL = 6.103515625e-5;

/** f32 values to f16 bit patterns, rounded to nearest even. */
export function f32ToF16(x: Float32Array): Uint16Array {
  return new Uint16Array(new Float16Array(x).buffer);
}

/** f16 bit patterns to f32, exactly. */
export function f16ToF32(bits: Uint16Array): Float32Array {
  return new Float32Array(new Float16Array(bits.buffer, bits.byteOffset, bits.length));
}

/** f32 values to bf16 bit patterns, rounded to nearest even; a NaN stays a (quiet) NaN of the same sign. */
export function f32ToBf16(x: Float32Array): Uint16Array {
  const u = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(x.length);
  for (let i = 0; i < u.length; i++) out[i] = bf16Bits(u[i]);
  return out;
}

/** bf16 bit patterns to f32, exactly: the pattern becomes the top half of the f32. */
export function bf16ToF32(bits: Uint16Array): Float32Array {
  const u = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) u[i] = bits[i] << 16;
  return new Float32Array(u.buffer);
}

/** One f32 bit pattern to bf16 bits. */
export function bf16Bits(f32Bits: number): number {
  const u = f32Bits >>> 0;
  if ((u & 0x7f800000) === 0x7f800000 && (u & 0x007fffff) !== 0) {
    return ((u >>> 16) | 0x0040) & 0xffff; // keep it a NaN even when the payload sat in the low half
  }
  const roundingBias = 0x7fff + ((u >>> 16) & 1);
  return ((u + roundingBias) >>> 16) & 0xffff;
}

/** One f32 value narrowed to f16 and widened back (the value an f16 file stores for it). */
export function roundF16(x: number): number {
  return Math.f16round(x);
}

/** One f32 value narrowed to bf16 and widened back. */
export function roundBf16(x: number): number {
  const b = new Float32Array([x]);
  return bf16ToF32(f32ToBf16(b))[0];
}

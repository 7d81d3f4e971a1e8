/**
 * Narrowing f32 to the two 16-bit float formats (IEEE binary16 "f16" and bfloat16 "bf16") and
 * widening back, as integer arithmetic on bit patterns, on the host.
 *
 * Both directions round to nearest, ties to even; ±0 and ±inf are kept; subnormals are produced and
 * read; a NaN stays a NaN with its sign and the top bits of its payload (the quiet bit is set only
 * when the payload would otherwise vanish, so every 16-bit pattern survives widen-then-narrow bit
 * for bit). Widening is exact.
 *
 * f16 is hand-written although `Float16Array` exists: the platform type quiets and canonicalises
 * NaNs (so 16-bit patterns do not round-trip), and an independent implementation is what lets the
 * platform's `Math.f16round` serve as a test oracle rather than test itself.
 *
 * @example
 * ```ts
 * import { bf16ToF32, f32ToBf16, f32ToF16 } from "./float16.ts";
 * const bits = f32ToBf16(new Float32Array([1.00390625])); // Uint16Array [0x3f80] (tie to even)
 * bf16ToF32(bits); // Float32Array [1]
 * f32ToF16(new Float32Array([65520])); // Uint16Array [0x7c00]: past the largest f16, so +inf
 * ```
 * @module
 */

/** Largest finite f16 value. */
export const F16_MAX = 65504;
/** Smallest positive normal f16 value (2^-14). */
export const F16_MIN_NORMAL = 6.103515625e-5;
/** Smallest positive f16 value, a subnormal (2^-24). */
export const F16_MIN_SUBNORMAL = 5.960464477539063e-8;

/**
 * One f32 bit pattern to f16 bits, rounded to nearest even.
 *
 * @example
 * ```ts
 * import { f16Bits } from "./float16.ts";
 * f16Bits(0x3f800000); // 0x3c00 (1.0)
 * ```
 */
export function f16Bits(f32Bits: number): number {
  const sign = (f32Bits >>> 16) & 0x8000;
  const a = f32Bits & 0x7fffffff;
  if (a >= 0x38800000 && a < 0x477ff000) {
    // Normal in f16: rebias the exponent (127 → 15), then round away the low 13 mantissa bits.
    const v = (a - 0x38000000) | 0;
    return sign | ((v + 0xfff + ((v >>> 13) & 1)) >>> 13);
  }
  return sign | f16Edge(a);
}

// The rare cases, out of line so the hot path above stays small: inf/NaN, overflow, subnormal, zero.
function f16Edge(a: number): number {
  if (a > 0x7f800000) return 0x7c00 | ((a >>> 13) & 0x3ff || 0x200);
  if (a >= 0x477ff000) return 0x7c00; // ≥ 65520 = 65504 + half an ulp (a tie, and 0x7bff is odd): inf
  if (a <= 0x33000000) return 0; // ≤ 2^-25, half the smallest subnormal: rounds to (even) zero
  const shift = 126 - (a >>> 23); // 14..24: f16 subnormals count units of 2^-24
  const m = (a & 0x7fffff) | 0x800000;
  const half = 1 << (shift - 1), rest = m & ((half << 1) - 1);
  const q = m >>> shift;
  return rest > half || (rest === half && (q & 1) === 1) ? q + 1 : q; // q + 1 may carry into the smallest normal, correctly
}

/**
 * One f16 bit pattern to the f32 bit pattern of the same value (exact).
 *
 * @example
 * ```ts
 * import { f16BitsToF32Bits } from "./float16.ts";
 * f16BitsToF32Bits(0x0001); // 0x33800000 (2^-24)
 * ```
 */
export function f16BitsToF32Bits(h: number): number {
  const sign = (h & 0x8000) << 16;
  const e = (h >>> 10) & 0x1f;
  let m = h & 0x3ff;
  if (e === 0x1f) return (sign | 0x7f800000 | (m << 13)) >>> 0;
  if (e !== 0) return (sign | ((e + 112) << 23) | (m << 13)) >>> 0;
  if (m === 0) return sign >>> 0;
  // A subnormal: shift the mantissa up until its leading one is the implicit bit.
  let exp = 113;
  while ((m & 0x400) === 0) m <<= 1, exp--;
  return (sign | (exp << 23) | ((m & 0x3ff) << 13)) >>> 0;
}

/**
 * One f32 bit pattern to bf16 bits: the top half of the f32, rounded to nearest even.
 *
 * @example
 * ```ts
 * import { bf16Bits } from "./float16.ts";
 * bf16Bits(0x3f808000); // 0x3f80: a tie, kept even
 * ```
 */
export function bf16Bits(f32Bits: number): number {
  const u = f32Bits | 0;
  if ((u & 0x7fffffff) > 0x7f800000) {
    const top = (u >>> 16) & 0xffff;
    return top & 0x7f ? top : top | 0x40; // keep it a NaN even when the payload sat in the low half
  }
  return (((u + 0x7fff + ((u >>> 16) & 1)) | 0) >>> 16) & 0xffff;
}

// Every f16 pattern's f32 bits, built on first use: widening is then one table load per value.
let f16Table: Int32Array | undefined;
function widenTable(): Int32Array {
  if (!f16Table) {
    f16Table = new Int32Array(65536);
    for (let h = 0; h < 65536; h++) f16Table[h] = f16BitsToF32Bits(h);
  }
  return f16Table;
}

/**
 * f32 values to f16 bit patterns, rounded to nearest even. Writes into `out` when given
 * (it must hold `x.length` values), so a streaming writer can reuse one buffer.
 *
 * @example
 * ```ts
 * import { f32ToF16 } from "./float16.ts";
 * f32ToF16(new Float32Array([1, -2, 0.1])); // Uint16Array [0x3c00, 0xc000, 0x2e66]
 * ```
 */
export function f32ToF16(x: Float32Array, out: Uint16Array = new Uint16Array(x.length)): Uint16Array {
  checkLength(x.length, out.length);
  const u = new Int32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < u.length; i++) out[i] = f16Bits(u[i]);
  return out;
}

/**
 * f16 bit patterns to f32, exactly. Writes into `out` when given.
 *
 * @example
 * ```ts
 * import { f16ToF32 } from "./float16.ts";
 * f16ToF32(new Uint16Array([0x3c00, 0x7c00])); // Float32Array [1, Infinity]
 * ```
 */
export function f16ToF32(bits: Uint16Array, out: Float32Array = new Float32Array(bits.length)): Float32Array {
  checkLength(bits.length, out.length);
  const table = widenTable();
  const o = new Int32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < bits.length; i++) o[i] = table[bits[i]];
  return out;
}

/**
 * f32 values to bf16 bit patterns, rounded to nearest even. Writes into `out` when given.
 *
 * @example
 * ```ts
 * import { f32ToBf16 } from "./float16.ts";
 * f32ToBf16(new Float32Array([1, 3.14159])); // Uint16Array [0x3f80, 0x4049]
 * ```
 */
export function f32ToBf16(x: Float32Array, out: Uint16Array = new Uint16Array(x.length)): Uint16Array {
  checkLength(x.length, out.length);
  const u = new Int32Array(x.buffer, x.byteOffset, x.length);
  for (let i = 0; i < u.length; i++) {
    const v = u[i];
    out[i] = (v & 0x7fffffff) > 0x7f800000 ? bf16Bits(v) : ((v + 0x7fff + ((v >>> 16) & 1)) | 0) >>> 16;
  }
  return out;
}

/**
 * bf16 bit patterns to f32, exactly: each pattern becomes the top half of an f32. Writes into `out`
 * when given.
 *
 * @example
 * ```ts
 * import { bf16ToF32 } from "./float16.ts";
 * bf16ToF32(new Uint16Array([0x3f80, 0xff80])); // Float32Array [1, -Infinity]
 * ```
 */
export function bf16ToF32(
  bits: Uint16Array,
  out: Float32Array = new Float32Array(bits.length),
): Float32Array {
  checkLength(bits.length, out.length);
  const o = new Int32Array(out.buffer, out.byteOffset, out.length);
  for (let i = 0; i < bits.length; i++) o[i] = bits[i] << 16;
  return out;
}

const scratchF = new Float32Array(1);
const scratchI = new Int32Array(scratchF.buffer);

/**
 * One value rounded to f32, then narrowed to f16 and widened back: what an f16 file stores for it.
 *
 * @example
 * ```ts
 * import { roundF16 } from "./float16.ts";
 * roundF16(0.1); // 0.0999755859375
 * ```
 */
export function roundF16(x: number): number {
  scratchF[0] = x;
  scratchI[0] = f16BitsToF32Bits(f16Bits(scratchI[0]));
  return scratchF[0];
}

/**
 * One value rounded to f32, then narrowed to bf16 and widened back.
 *
 * @example
 * ```ts
 * import { roundBf16 } from "./float16.ts";
 * roundBf16(0.1); // 0.10009765625
 * ```
 */
export function roundBf16(x: number): number {
  scratchF[0] = x;
  scratchI[0] = bf16Bits(scratchI[0]) << 16;
  return scratchF[0];
}

function checkLength(n: number, out: number): void {
  if (out !== n) throw new RangeError(`output holds ${out} values, expected ${n}`);
}

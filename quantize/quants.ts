/**
 * Tensor codecs: ggml's F32, F16 and BF16 element types, its Q8_0 and Q4_0 blocks (32 values, one
 * f16 scale each) as gguf-py's `quants.py` has them, and, from their own modules, Q5_0 and IQ4_NL
 * (`quants-iq4nl.ts`) and the K-quants Q4_K and Q6_K (`quants-k.ts`). They are plain byte codecs with
 * no file around them, so any format that stores blocks (GGUF, and lut4's 4-bit codes) shares them.
 *
 * @example
 * ```ts
 * import { dequantizeQ4_0, quantizeQ4_0 } from "./quants.ts";
 * const weights = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const bytes = quantizeQ4_0(weights);             // 18 bytes per 32 values
 * const back = dequantizeQ4_0(bytes, weights.length);
 * ```
 * @module
 */
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "./float16.ts";
import { dequantizeIq4Nl, dequantizeQ5_0, quantizeIq4Nl, quantizeQ5_0 } from "./quants-iq4nl.ts";
import { dequantizeQ4K, dequantizeQ6K, quantizeQ4K, quantizeQ6K } from "./quants-k.ts";

export * from "./quants-iq4nl.ts";
export * from "./quants-k.ts";

/** `general.quantization_version` llama.cpp expects for Q4_0 / Q8_0 blocks. */
export const GGML_QNT_VERSION = 2;

/** The tensor types ferry writes and reads. */
export type GgmlType = "F32" | "F16" | "BF16" | "Q8_0" | "Q4_0" | "Q5_0" | "Q4_K" | "Q6_K" | "IQ4_NL";

/**
 * Per tensor type: ggml's type id, elements per block, bytes per block, and the llama_ftype id a
 * file whose matrices all have this type declares in `general.file_type`.
 */
export const GGML_TYPES: Readonly<
  Record<GgmlType, { id: number; blockSize: number; blockBytes: number; ftype: number }>
> = {
  F32: { id: 0, blockSize: 1, blockBytes: 4, ftype: 0 },
  F16: { id: 1, blockSize: 1, blockBytes: 2, ftype: 1 },
  Q4_0: { id: 2, blockSize: 32, blockBytes: 18, ftype: 2 },
  Q5_0: { id: 6, blockSize: 32, blockBytes: 22, ftype: 8 },
  Q8_0: { id: 8, blockSize: 32, blockBytes: 34, ftype: 7 },
  // llama_ftype has no "all Q4_K"; Q4_K_S (14) is the nearest, and what a pure Q4_K file declares.
  Q4_K: { id: 12, blockSize: 256, blockBytes: 144, ftype: 14 },
  Q6_K: { id: 14, blockSize: 256, blockBytes: 210, ftype: 18 },
  IQ4_NL: { id: 20, blockSize: 32, blockBytes: 18, ftype: 25 },
  BF16: { id: 30, blockSize: 1, blockBytes: 2, ftype: 32 },
};

// Names of the ggml types ferry does not handle, so a refusal can say what the file holds.
export const OTHER_GGML_TYPES: Record<number, string> = {
  3: "Q4_1",
  7: "Q5_1",
  9: "Q8_1",
  10: "Q2_K",
  11: "Q3_K",
  13: "Q5_K",
  15: "Q8_K",
  16: "IQ2_XXS",
  17: "IQ2_XS",
  18: "IQ3_XXS",
  19: "IQ1_S",
  21: "IQ3_S",
  22: "IQ2_S",
  23: "IQ4_XS",
  24: "I8",
  25: "I16",
  26: "I32",
  27: "I64",
  28: "F64",
  29: "IQ1_M",
  34: "TQ1_0",
  35: "TQ2_0",
  39: "MXFP4",
  40: "NVFP4",
};

// f32 arithmetic: every intermediate goes through Math.fround, because JavaScript computes in f64 and
// one unrounded product can move a value across a rounding boundary and change a byte.

const f32 = Math.fround;
/** Values per Q8_0 / Q4_0 block. */
export const QK = 32;

/**
 * Bytes a tensor of `n` elements of `type` occupies (n must be a whole number of blocks).
 *
 * @example
 * ```ts
 * import { tensorBytes } from "./quants.ts";
 * tensorBytes("Q4_0", 64); // 36
 * ```
 */
export function tensorBytes(type: GgmlType, n: number): number {
  const t = GGML_TYPES[type];
  return (n / t.blockSize) * t.blockBytes;
}

/**
 * Q8_0: per 32 values, d = amax / 127 (stored f16), q = round-half-away(x / d) as i8.
 *
 * @example
 * ```ts
 * import { quantizeQ8_0 } from "./quants.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const bytes = quantizeQ8_0(row); // row.length % 32 === 0; 34 bytes per 32 values
 * ```
 */
export function quantizeQ8_0(x: Float32Array): Uint8Array {
  checkBlocks(x.length);
  const nb = x.length / QK;
  const ds = new Float32Array(nb);
  const out = new Uint8Array(nb * 34);
  for (let b = 0; b < nb; b++) {
    const o = b * QK;
    let amax = 0;
    for (let j = 0; j < QK; j++) amax = Math.max(amax, Math.abs(x[o + j]));
    const d = f32(amax / 127);
    const id = d ? f32(1 / d) : 0;
    ds[b] = d;
    for (let j = 0; j < QK; j++) {
      const v = f32(x[o + j] * id);
      // C's roundf: halves go away from zero (Math.round would send -2.5 to -2).
      const q = Math.sign(v) * Math.floor(Math.abs(v) + 0.5);
      out[b * 34 + 2 + j] = q & 0xff;
    }
  }
  putScales(out, 34, ds);
  return out;
}

/**
 * Q4_0: per 32 values, the value of largest magnitude (first one on a tie, sign kept) sets
 * d = max / -8 (stored f16); q = min(15, trunc(x / d + 8.5)); byte j holds q[j] in its low nibble and
 * q[j + 16] in its high nibble.
 *
 * @example
 * ```ts
 * import { quantizeQ4_0 } from "./quants.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const bytes = quantizeQ4_0(row); // 18 bytes per 32 values
 * ```
 */
export function quantizeQ4_0(x: Float32Array): Uint8Array {
  checkBlocks(x.length);
  const nb = x.length / QK;
  const ds = new Float32Array(nb);
  const out = new Uint8Array(nb * 18);
  for (let b = 0; b < nb; b++) {
    const o = b * QK;
    let amax = 0, max = 0;
    for (let j = 0; j < QK; j++) {
      const v = x[o + j];
      if (amax < Math.abs(v)) amax = Math.abs(v), max = v;
    }
    const d = f32(max / -8);
    const id = d ? f32(1 / d) : 0;
    ds[b] = d;
    for (let j = 0; j < QK / 2; j++) {
      const lo = Math.min(15, Math.trunc(f32(f32(x[o + j] * id) + 8.5)));
      const hi = Math.min(15, Math.trunc(f32(f32(x[o + j + 16] * id) + 8.5)));
      out[b * 18 + 2 + j] = lo | (hi << 4);
    }
  }
  putScales(out, 18, ds);
  return out;
}

/**
 * Q8_0 blocks back to f32: q * d.
 *
 * @example
 * ```ts
 * import { dequantizeQ8_0, quantizeQ8_0 } from "./quants.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeQ8_0(quantizeQ8_0(row), row.length); // ≈ row
 * ```
 */
export function dequantizeQ8_0(bytes: Uint8Array, n: number): Float32Array {
  const d = getScales(bytes, 34, n / QK);
  const out = new Float32Array(n);
  for (let b = 0; b < d.length; b++) {
    for (let j = 0; j < QK; j++) out[b * QK + j] = ((bytes[b * 34 + 2 + j] << 24) >> 24) * d[b];
  }
  return out;
}

/**
 * Q4_0 blocks back to f32: (nibble - 8) * d, low nibbles first.
 *
 * @example
 * ```ts
 * import { dequantizeQ4_0, quantizeQ4_0 } from "./quants.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeQ4_0(quantizeQ4_0(row), row.length);
 * ```
 */
export function dequantizeQ4_0(bytes: Uint8Array, n: number): Float32Array {
  const d = getScales(bytes, 18, n / QK);
  const out = new Float32Array(n);
  for (let b = 0; b < d.length; b++) {
    for (let j = 0; j < QK / 2; j++) {
      const q = bytes[b * 18 + 2 + j];
      out[b * QK + j] = ((q & 15) - 8) * d[b];
      out[b * QK + j + 16] = ((q >> 4) - 8) * d[b];
    }
  }
  return out;
}

/**
 * f32 values to the bytes of a tensor of `type`, as llama.cpp stores them (little-endian).
 * `importance` (one weight per input column, the row width long) steers the scale searches of
 * Q5_0, Q4_K, Q6_K and IQ4_NL, as llama.cpp's imatrix does; the other types ignore it.
 *
 * @example
 * ```ts
 * import { encodeTensor } from "./quants.ts";
 * encodeTensor("F16", new Float32Array([1, 2])); // Uint8Array [0, 60, 0, 64]
 * ```
 */
export function encodeTensor(type: GgmlType, data: Float32Array, importance?: Float32Array): Uint8Array {
  switch (type) {
    case "F32":
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    case "F16":
      return new Uint8Array(f32ToF16(data).buffer);
    case "BF16":
      return new Uint8Array(f32ToBf16(data).buffer);
    case "Q8_0":
      return quantizeQ8_0(data);
    case "Q4_0":
      return quantizeQ4_0(data);
    case "Q5_0":
      return quantizeQ5_0(data, importance);
    case "Q4_K":
      return quantizeQ4K(data, importance);
    case "Q6_K":
      return quantizeQ6K(data, importance);
    case "IQ4_NL":
      return quantizeIq4Nl(data, importance);
  }
}

/**
 * The bytes of a tensor of `type` holding `n` elements, decoded (dequantized) to f32.
 *
 * @example
 * ```ts
 * import { decodeTensor, encodeTensor } from "./quants.ts";
 * const bytes = encodeTensor("Q4_0", new Float32Array(32).fill(0.5)); // 18 bytes
 * decodeTensor("Q4_0", bytes, 32); // Float32Array(32)
 * ```
 */
export function decodeTensor(type: GgmlType, bytes: Uint8Array, n: number): Float32Array {
  if (bytes.length !== tensorBytes(type, n)) {
    throw new RangeError(
      `${type} tensor of ${n} elements needs ${tensorBytes(type, n)} bytes, got ${bytes.length}`,
    );
  }
  // Copy so the typed-array views below start at an aligned offset whatever the file buffer's (a
  // constructor copy: a Node Buffer's slice() is a view, and its buffer starts at the file's byte 0).
  const own = new Uint8Array(bytes);
  switch (type) {
    case "F32":
      return new Float32Array(own.buffer, 0, n);
    case "F16":
      return f16ToF32(new Uint16Array(own.buffer, 0, n));
    case "BF16":
      return bf16ToF32(new Uint16Array(own.buffer, 0, n));
    case "Q8_0":
      return dequantizeQ8_0(own, n);
    case "Q4_0":
      return dequantizeQ4_0(own, n);
    case "Q5_0":
      return dequantizeQ5_0(own, n);
    case "Q4_K":
      return dequantizeQ4K(own, n);
    case "Q6_K":
      return dequantizeQ6K(own, n);
    case "IQ4_NL":
      return dequantizeIq4Nl(own, n);
  }
}

function checkBlocks(n: number): void {
  if (n % QK !== 0) throw new RangeError(`${n} values are not a whole number of ${QK}-value blocks`);
}

// Writes each block's scale as f16 into the first two bytes of the block.
function putScales(out: Uint8Array, blockBytes: number, ds: Float32Array): void {
  const h = f32ToF16(ds);
  for (let b = 0; b < h.length; b++) out[b * blockBytes] = h[b] & 0xff, out[b * blockBytes + 1] = h[b] >> 8;
}

/**
 * Byte offsets of the f16 scales in one block of each quantized type. Each value of a block is a small
 * integer times them (Q4_K: d·scale·q less dmin·min), so a block's values are all finite exactly when
 * its scales are: checking them checks the block without dequantizing it (`blockScalesFinite`).
 */
export const BLOCK_SCALES: Readonly<Partial<Record<GgmlType, readonly number[]>>> = {
  Q8_0: [0],
  Q4_0: [0],
  Q5_0: [0],
  IQ4_NL: [0],
  Q4_K: [0, 2],
  Q6_K: [208],
};

/**
 * Whether every f16 scale of the blocks in `bytes` (whole blocks of a quantized `type`) is finite, and so
 * every value they hold.
 *
 * @example
 * ```ts
 * import { blockScalesFinite, quantizeQ4_0 } from "./quants.ts";
 * blockScalesFinite("Q4_0", quantizeQ4_0(new Float32Array(64).fill(0.5))); // true
 * ```
 */
export function blockScalesFinite(type: GgmlType, bytes: Uint8Array): boolean {
  const at = BLOCK_SCALES[type] ?? [], size = GGML_TYPES[type].blockBytes;
  for (let b = 0; b < bytes.length; b += size) {
    // exponent bits all ones: infinite or NaN
    for (const o of at) if ((bytes[b + o + 1] & 0x7c) === 0x7c) return false;
  }
  return true;
}

/** The f16 scales of `nb` blocks of `blockBytes` each, widened to f32. */
export function getScales(bytes: Uint8Array, blockBytes: number, nb: number): Float32Array {
  const h = new Uint16Array(nb);
  for (let b = 0; b < nb; b++) h[b] = bytes[b * blockBytes] | (bytes[b * blockBytes + 1] << 8);
  return f16ToF32(h);
}

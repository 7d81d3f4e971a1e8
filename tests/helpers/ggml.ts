/**
 * llama.cpp's own ggml as a test oracle, through `bun:ffi`: the prebuilt libggml-base.so that
 * node-llama-cpp ships (resolved from node-llama-cpp itself, so it works whether npm hoisted the
 * binary package or nested it). Bun only.
 *
 * @example
 * ```ts
 * const ggml = openGgml();
 * const out = ggml.toBf16(new Float32Array([1, 2])); // ggml_fp32_to_bf16_row_ref
 * ggml.close();
 * ```
 * @module
 */
import { dlopen, FFIType, ptr } from "bun:ffi";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/** Path of node-llama-cpp's prebuilt libggml-base.so. */
export function ggmlBasePath(): string {
  const fromLlama = createRequire(createRequire(import.meta.url).resolve("node-llama-cpp/package.json"));
  return join(
    dirname(fromLlama.resolve("@node-llama-cpp/linux-x64/package.json")),
    "bins/linux-x64/libggml-base.so",
  );
}

/** ggml type ids (ggml.h `enum ggml_type`). */
export const GGML_TYPE_ID = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q5_0: 6,
  Q8_0: 8,
  Q4_K: 12,
  Q6_K: 14,
  IQ4_NL: 20,
  BF16: 30,
} as const;

/** The quantized types the oracle quantizes and dequantizes: values and bytes per block. */
export const GGML_BLOCKS = {
  Q4_0: [32, 18],
  Q5_0: [32, 22],
  Q8_0: [32, 34],
  Q4_K: [256, 144],
  Q6_K: [256, 210],
  IQ4_NL: [32, 18],
} as const;

/** The ggml converters the tests use, each on a whole row. */
export interface Ggml {
  /** ggml_fp32_to_bf16_row_ref: f32 → bf16 bits, round to nearest even (NaN forced quiet). */
  toBf16(x: Float32Array): Uint16Array;
  /** ggml_fp32_to_fp16_row: f32 → f16 bits. */
  toF16(x: Float32Array): Uint16Array;
  /**
   * ggml_quantize_chunk (llama-quantize's path) on rows of `perRow` values, no importance matrix;
   * returns the blocks and the byte count ggml reports.
   */
  quantize(
    type: keyof typeof GGML_BLOCKS,
    x: Float32Array,
    perRow: number,
    importance?: Float32Array,
  ): { bytes: Uint8Array; written: number };
  /** ggml_fp16_to_fp32_row / ggml_bf16_to_fp32_row / dequantize_row_<type>. */
  decode(type: keyof typeof GGML_TYPE_ID, bytes: Uint8Array, n: number): Float32Array;
  close(): void;
}

/** Opens libggml-base.so. */
export function openGgml(): Ggml {
  const row = { args: [FFIType.ptr, FFIType.ptr, FFIType.i64], returns: FFIType.void } as const;
  const lib = dlopen(ggmlBasePath(), {
    // size_t ggml_quantize_chunk(type, const float *src, void *dst, int64 start, int64 nrows, int64 n_per_row, const float *imatrix)
    ggml_quantize_chunk: {
      args: [FFIType.i32, FFIType.ptr, FFIType.ptr, FFIType.i64, FFIType.i64, FFIType.i64, FFIType.ptr],
      returns: FFIType.u64,
    },
    ggml_fp32_to_fp16_row: row,
    ggml_fp32_to_bf16_row_ref: row,
    ggml_fp16_to_fp32_row: row,
    ggml_bf16_to_fp32_row: row,
    dequantize_row_q8_0: row,
    dequantize_row_q4_0: row,
    dequantize_row_q5_0: row,
    dequantize_row_q4_K: row,
    dequantize_row_q6_K: row,
    dequantize_row_iq4_nl: row,
  });
  return {
    toBf16(x) {
      const out = new Uint16Array(x.length);
      if (x.length) lib.symbols.ggml_fp32_to_bf16_row_ref(ptr(x), ptr(out), x.length);
      return out;
    },
    toF16(x) {
      const out = new Uint16Array(x.length);
      if (x.length) lib.symbols.ggml_fp32_to_fp16_row(ptr(x), ptr(out), x.length);
      return out;
    },
    quantize(type, x, perRow, importance) {
      const [per, size] = GGML_BLOCKS[type];
      const bytes = new Uint8Array((x.length / per) * size);
      const written = lib.symbols.ggml_quantize_chunk(
        GGML_TYPE_ID[type],
        ptr(x),
        ptr(bytes),
        0,
        x.length / perRow,
        perRow,
        importance ? ptr(importance) : null,
      );
      return { bytes, written: Number(written) };
    },
    decode(type, bytes, n) {
      const out = new Float32Array(n);
      // ffi needs its own copy: `bytes` may be a view at an offset ggml should not care about.
      const src = bytes.slice();
      if (n === 0) return out;
      if (type === "F32") out.set(new Float32Array(src.buffer, 0, n));
      else if (type === "F16") lib.symbols.ggml_fp16_to_fp32_row(ptr(src), ptr(out), n);
      else if (type === "BF16") lib.symbols.ggml_bf16_to_fp32_row(ptr(src), ptr(out), n);
      else if (type === "Q8_0") lib.symbols.dequantize_row_q8_0(ptr(src), ptr(out), n);
      else if (type === "Q4_0") lib.symbols.dequantize_row_q4_0(ptr(src), ptr(out), n);
      else if (type === "Q5_0") lib.symbols.dequantize_row_q5_0(ptr(src), ptr(out), n);
      else if (type === "Q4_K") lib.symbols.dequantize_row_q4_K(ptr(src), ptr(out), n);
      else if (type === "Q6_K") lib.symbols.dequantize_row_q6_K(ptr(src), ptr(out), n);
      else lib.symbols.dequantize_row_iq4_nl(ptr(src), ptr(out), n);
      return out;
    },
    close: () => lib.close(),
  };
}

/**
 * GGUF v3, llama.cpp's model file: a writer, a validating reader, and the F32 / F16 / BF16 / Q8_0 /
 * Q4_0 tensor codecs, plus the mapping between a ferry Qwen3 model and llama.cpp's `qwen3`
 * architecture (metadata keys, tensor names, byte-level tokenizer). The spec is formats/gguf.md.
 *
 * The file is read whole into memory and every offset, length, type and name is checked before
 * anything is handed out; a refusal is a `GgufError` naming the file, the field and what was expected.
 *
 * @example
 * ```ts
 * await writeGguf("out/model.q4_0.gguf", tensors, config, { type: "q4_0" });
 * const { config: cfg, tensors: back } = await readGguf("out/model.q4_0.gguf"); // f32, HF names
 * ```
 * @module
 */
import { readFile } from "node:fs/promises";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "./float16.ts";
import { f32Bytes, LITTLE_ENDIAN, writeAtomic } from "./io.ts";
import { type ModelConfig, paramShapes } from "../model/config.ts";
import { numel, type Tensor } from "../model/tensor.ts";
import { FormatError, type RefusalDetail } from "../model/error.ts";
import { BOS, BYTE_VOCAB_SIZE, EOS } from "../model/tokenizer.ts";

// ─── Constants ────────────────────────────────────────────────────────────────────────────────────

/** "GGUF" as the first four bytes. */
export const GGUF_MAGIC = new Uint8Array([0x47, 0x47, 0x55, 0x46]);
/** The only version ferry writes and reads. */
export const GGUF_VERSION = 3;
/** Data alignment when `general.alignment` is absent; ferry always writes it explicitly as 32. */
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** ggml's tensor name buffer is 64 bytes including the NUL, so names are at most 63 bytes. */
export const GGML_MAX_NAME = 64;
/** ggml tensors have at most four dimensions. */
export const GGML_MAX_DIMS = 4;
/** `general.quantization_version` llama.cpp expects for Q4_0 / Q8_0 blocks. */
export const GGML_QNT_VERSION = 2;

/** The types a metadata value can have. */
export type GgufScalarType =
  | "u8"
  | "i8"
  | "u16"
  | "i16"
  | "u32"
  | "i32"
  | "f32"
  | "bool"
  | "string"
  | "u64"
  | "i64"
  | "f64";

/** Metadata value types as stored (u32 ids, gguf-py's `GGUFValueType`) and their fixed sizes in bytes. */
export const GGUF_VALUE_TYPES: ReadonlyArray<readonly [GgufScalarType | "array", number, number]> = [
  ["u8", 0, 1],
  ["i8", 1, 1],
  ["u16", 2, 2],
  ["i16", 3, 2],
  ["u32", 4, 4],
  ["i32", 5, 4],
  ["f32", 6, 4],
  ["bool", 7, 1],
  ["string", 8, 8], // the u64 length; the bytes follow
  ["array", 9, 12], // u32 element type + u64 count; the elements follow
  ["u64", 10, 8],
  ["i64", 11, 8],
  ["f64", 12, 8],
];

/** A typed metadata value. Integers wider than 32 bits are bigints so no value is silently rounded. */
export type GgufValue =
  | { type: "u8" | "i8" | "u16" | "i16" | "u32" | "i32" | "f32" | "f64"; value: number }
  | { type: "u64" | "i64"; value: bigint }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "array"; elem: GgufScalarType; value: Array<number | bigint | boolean | string> };

/** The tensor types ferry writes and reads. */
export type GgmlType = "F32" | "F16" | "BF16" | "Q8_0" | "Q4_0";

/** The `--dtype` names of those types. */
export type GgufDtype = "f32" | "f16" | "bf16" | "q8_0" | "q4_0";

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
  Q8_0: { id: 8, blockSize: 32, blockBytes: 34, ftype: 7 },
  BF16: { id: 30, blockSize: 1, blockBytes: 2, ftype: 32 },
};

// Names of the ggml types ferry does not handle, so a refusal can say what the file holds.
const OTHER_GGML_TYPES: Record<number, string> = {
  3: "Q4_1",
  6: "Q5_0",
  7: "Q5_1",
  9: "Q8_1",
  10: "Q2_K",
  11: "Q3_K",
  12: "Q4_K",
  13: "Q5_K",
  14: "Q6_K",
  15: "Q8_K",
  16: "IQ2_XXS",
  17: "IQ2_XS",
  18: "IQ3_XXS",
  19: "IQ1_S",
  20: "IQ4_NL",
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

/** tokenizer.ggml.token_type values (gguf-py's TokenType, llama.cpp's LLAMA_TOKEN_TYPE_*). */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

/** The architecture string and metadata key prefix. */
export const QWEN3_ARCH = "qwen3";

/** Hugging Face name ↔ llama.cpp name, for tensors outside the layers. */
export const QWEN3_GLOBAL_TENSORS: ReadonlyArray<readonly [string, string]> = [
  ["model.embed_tokens.weight", "token_embd.weight"],
  ["model.norm.weight", "output_norm.weight"],
  ["lm_head.weight", "output.weight"],
];

/** Hugging Face `model.layers.N.` suffix ↔ llama.cpp `blk.N.` suffix. */
export const QWEN3_LAYER_TENSORS: ReadonlyArray<readonly [string, string]> = [
  ["input_layernorm.weight", "attn_norm.weight"],
  ["self_attn.q_proj.weight", "attn_q.weight"],
  ["self_attn.k_proj.weight", "attn_k.weight"],
  ["self_attn.v_proj.weight", "attn_v.weight"],
  ["self_attn.q_norm.weight", "attn_q_norm.weight"],
  ["self_attn.k_norm.weight", "attn_k_norm.weight"],
  ["self_attn.o_proj.weight", "attn_output.weight"],
  ["post_attention_layernorm.weight", "ffn_norm.weight"],
  ["mlp.gate_proj.weight", "ffn_gate.weight"],
  ["mlp.up_proj.weight", "ffn_up.weight"],
  ["mlp.down_proj.weight", "ffn_down.weight"],
];

/**
 * `qwen3.*` hyperparameter keys: the suffix, its stored type (llama.cpp refuses any other type), the
 * config field it carries, and the default llama.cpp assumes when a file leaves it out
 * (`undefined` = required).
 */
export const QWEN3_HPARAMS: ReadonlyArray<
  readonly [
    string,
    "u32" | "f32",
    keyof ModelConfig,
    ((c: Partial<ModelConfig>) => number | undefined) | undefined,
  ]
> = [
  ["context_length", "u32", "max_position_embeddings", undefined],
  ["embedding_length", "u32", "hidden_size", undefined],
  ["block_count", "u32", "num_hidden_layers", undefined],
  ["feed_forward_length", "u32", "intermediate_size", undefined],
  ["attention.head_count", "u32", "num_attention_heads", undefined],
  ["attention.head_count_kv", "u32", "num_key_value_heads", (c) => c.num_attention_heads],
  ["attention.key_length", "u32", "head_dim", (c) => c.hidden_size! / c.num_attention_heads!],
  ["attention.value_length", "u32", "head_dim", (c) => c.hidden_size! / c.num_attention_heads!],
  ["rope.dimension_count", "u32", "head_dim", (c) => c.head_dim],
  ["attention.layer_norm_rms_epsilon", "f32", "rms_norm_eps", undefined],
  ["rope.freq_base", "f32", "rope_theta", () => 10000],
];

/** Names of the two special tokens in the GGUF vocabulary (ids 256 and 257). */
export const SPECIAL_TOKENS = ["<|startoftext|>", "<|endoftext|>"] as const;

// ─── Errors ───────────────────────────────────────────────────────────────────────────────────────

/**
 * A GGUF that cannot be written or read: `path` names the file, `field` the offending part
 * (`header.version`, a metadata key, `tensor blk.0.attn_q.weight`, ...).
 *
 * @example
 * ```ts
 * try { await readGguf("m.gguf"); } catch (e) { if (e instanceof GgufError) console.error(e.field); }
 * ```
 */
export class GgufError extends FormatError {
  constructor(path: string, field: string, message: string, detail?: RefusalDetail) {
    super(path, field, `${path}: ${field}: ${message}`, detail);
    this.name = "GgufError";
  }
}

// ─── Tokenizer tables ─────────────────────────────────────────────────────────────────────────────

/**
 * GPT-2's byte-to-character table (`bytes_to_unicode`): printable Latin-1 bytes stand for
 * themselves, the other 68 bytes, in order, for U+0100 onwards. llama.cpp's "gpt2" tokenizer looks
 * text up through it, so a byte vocabulary must be spelled with these characters.
 *
 * @example
 * ```ts
 * byteToUnicode()[0x20]; // "Ġ"
 * ```
 */
export function byteToUnicode(): string[] {
  const out: string[] = [];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    out.push(String.fromCodePoint(printable ? b : 0x100 + extra++));
  }
  return out;
}

/**
 * The GGUF vocabulary of ferry's byte tokenizer for a model with `vocab` rows: the 256 byte
 * characters, BOS and EOS, then `[PAD<i>]` placeholders for any rows beyond 258 (as llama.cpp's
 * converter pads).
 *
 * @example
 * ```ts
 * const { tokens, types } = byteVocabulary(258); // tokens[256] === "<|bos|>", types[256] === 3
 * ```
 */
export function byteVocabulary(vocab: number): { tokens: string[]; types: number[] } {
  const tokens = [...byteToUnicode(), ...SPECIAL_TOKENS];
  const types = [...new Array(256).fill(TOKEN_TYPE.NORMAL), TOKEN_TYPE.CONTROL, TOKEN_TYPE.CONTROL];
  for (let i = BYTE_VOCAB_SIZE; i < vocab; i++) tokens.push(`[PAD${i}]`), types.push(TOKEN_TYPE.UNUSED);
  return { tokens, types };
}

// ─── Tensor codecs ────────────────────────────────────────────────────────────────────────────────
// The quantizers follow ggml's reference rules (quantize_row_q8_0_ref / quantize_row_q4_0_ref) in
// f32 arithmetic: every intermediate goes through Math.fround, because JavaScript computes in f64 and
// one unrounded product can move a value across a rounding boundary and change a byte.

const f32 = Math.fround;
const QK = 32;

/**
 * Bytes a tensor of `n` elements of `type` occupies (n must be a whole number of blocks).
 *
 * @example
 * ```ts
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
 *
 * @example
 * ```ts
 * encodeTensor("F16", new Float32Array([1, 2])); // Uint8Array [0, 60, 0, 64]
 * ```
 */
export function encodeTensor(type: GgmlType, data: Float32Array): Uint8Array {
  if (!LITTLE_ENDIAN) throw new Error("ferry needs a little-endian host");
  switch (type) {
    case "F32":
      return f32Bytes(data);
    case "F16":
      return new Uint8Array(f32ToF16(data).buffer);
    case "BF16":
      return new Uint8Array(f32ToBf16(data).buffer);
    case "Q8_0":
      return quantizeQ8_0(data);
    case "Q4_0":
      return quantizeQ4_0(data);
  }
}

/**
 * The bytes of a tensor of `type` holding `n` elements, decoded (dequantized) to f32.
 *
 * @example
 * ```ts
 * decodeTensor("Q4_0", bytes, 32); // Float32Array(32)
 * ```
 */
export function decodeTensor(type: GgmlType, bytes: Uint8Array, n: number): Float32Array {
  if (bytes.length !== tensorBytes(type, n)) {
    throw new RangeError(
      `${type} tensor of ${n} elements needs ${tensorBytes(type, n)} bytes, got ${bytes.length}`,
    );
  }
  // Copy so the typed-array views below start at an aligned offset whatever the file buffer's.
  const own = bytes.slice();
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

function getScales(bytes: Uint8Array, blockBytes: number, nb: number): Float32Array {
  const h = new Uint16Array(nb);
  for (let b = 0; b < nb; b++) h[b] = bytes[b * blockBytes] | (bytes[b * blockBytes + 1] << 8);
  return f16ToF32(h);
}

// ─── Container: writer ────────────────────────────────────────────────────────────────────────────

/** One tensor to write: its GGUF name, `ne` (innermost dimension first), type and encoded bytes. */
export interface GgufTensorData {
  name: string;
  ne: number[];
  type: GgmlType;
  bytes: Uint8Array;
}

/**
 * Lays out a GGUF v3 file: header, metadata in the given order, tensor infos, then each tensor's
 * bytes at an offset aligned to `general.alignment` (32 when absent), zero-padded, the last included.
 * Returns the chunks to write in order. `where` names the destination in errors.
 *
 * @example
 * ```ts
 * const chunks = encodeGguf([["general.architecture", { type: "string", value: "qwen3" }]], [], "x.gguf");
 * ```
 */
export function encodeGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorData[],
  where = "gguf",
): Uint8Array[] {
  const w = new ByteWriter();
  w.bytes(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(BigInt(tensors.length));
  w.u64(BigInt(metadata.length));
  const keys = new Set<string>();
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  for (const [key, value] of metadata) {
    if (key.length === 0) throw new GgufError(where, "metadata", "a key is empty");
    if (keys.has(key)) throw new GgufError(where, key, "metadata key appears twice");
    keys.add(key);
    if (key === "general.alignment") alignment = checkAlignment(value, where);
    w.string(key);
    writeValue(w, value, key, where);
  }
  const names = new Set<string>();
  const offsets: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    const field = `tensor ${t.name}`;
    checkTensorName(t.name, where);
    if (names.has(t.name)) throw new GgufError(where, field, "tensor name appears twice");
    names.add(t.name);
    if (t.ne.length < 1 || t.ne.length > GGML_MAX_DIMS) {
      throw new GgufError(where, field, `has ${t.ne.length} dims; expected 1 to ${GGML_MAX_DIMS}`);
    }
    const spec = GGML_TYPES[t.type];
    if (t.ne[0] % spec.blockSize !== 0) {
      throw new GgufError(
        where,
        field,
        `innermost dim ${t.ne[0]} is not a multiple of ${t.type}'s block of ${spec.blockSize}`,
      );
    }
    const want = tensorBytes(t.type, numel(t.ne));
    if (t.bytes.length !== want) {
      throw new GgufError(
        where,
        field,
        `holds ${t.bytes.length} bytes; ${t.type} ne [${t.ne}] needs ${want}`,
      );
    }
    w.string(t.name);
    w.u32(t.ne.length);
    for (const n of t.ne) w.u64(BigInt(n));
    w.u32(spec.id);
    w.u64(BigInt(offset));
    offsets.push(offset);
    offset += pad(t.bytes.length, alignment);
  }
  if (tensors.length > 0) w.zeros(pad(w.length, alignment) - w.length);
  const chunks = [w.finish()];
  for (const t of tensors) {
    chunks.push(t.bytes);
    const fill = pad(t.bytes.length, alignment) - t.bytes.length;
    if (fill > 0) chunks.push(new Uint8Array(fill));
  }
  return chunks;
}

function writeValue(w: ByteWriter, v: GgufValue, key: string, where: string): void {
  const id = valueTypeId(v.type, key, where);
  w.u32(id);
  if (v.type === "array") {
    if (v.elem === ("array" as string)) {
      throw new GgufError(where, key, "arrays of arrays are not readable by llama.cpp");
    }
    w.u32(valueTypeId(v.elem, key, where));
    w.u64(BigInt(v.value.length));
    for (const x of v.value) writeScalar(w, v.elem, x, key, where);
  } else writeScalar(w, v.type, v.value, key, where);
}

function writeScalar(w: ByteWriter, type: GgufScalarType, x: unknown, key: string, where: string): void {
  const bad = (what: string) => new GgufError(where, key, `value ${String(x)} is not ${what}`);
  switch (type) {
    case "string":
      if (typeof x !== "string") throw bad("a string");
      return w.string(x);
    case "bool":
      if (typeof x !== "boolean") throw bad("a boolean");
      return w.u8(x ? 1 : 0);
    case "u64":
    case "i64":
      if (typeof x !== "bigint") throw bad("a bigint");
      return type === "u64" ? w.u64(x) : w.i64(x);
    case "f32":
    case "f64":
      if (typeof x !== "number") throw bad("a number");
      return type === "f32" ? w.f32(x) : w.f64(x);
    default: {
      if (typeof x !== "number" || !Number.isInteger(x)) throw bad(`an integer for ${type}`);
      const [lo, hi] = INT_RANGES[type];
      if (x < lo || x > hi) throw bad(`in the range of ${type}`);
      return w.int(type, x);
    }
  }
}

const INT_RANGES: Record<string, [number, number]> = {
  u8: [0, 0xff],
  i8: [-0x80, 0x7f],
  u16: [0, 0xffff],
  i16: [-0x8000, 0x7fff],
  u32: [0, 0xffffffff],
  i32: [-0x80000000, 0x7fffffff],
};

function valueTypeId(type: string, key: string, where: string): number {
  const row = GGUF_VALUE_TYPES.find(([n]) => n === type);
  if (!row) throw new GgufError(where, key, `unknown value type ${type}`);
  return row[1];
}

function checkAlignment(v: GgufValue, where: string): number {
  if (v.type !== "u32") throw new GgufError(where, "general.alignment", `has type ${v.type}; expected u32`);
  const a = v.value;
  if (a === 0 || (a & (a - 1)) !== 0) {
    throw new GgufError(where, "general.alignment", `${a} is not a power of two`);
  }
  return a;
}

function checkTensorName(name: string, where: string): void {
  const len = new TextEncoder().encode(name).length;
  if (len === 0 || len >= GGML_MAX_NAME) {
    throw new GgufError(where, `tensor ${name}`, `name is ${len} bytes; expected 1 to ${GGML_MAX_NAME - 1}`);
  }
}

function pad(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

class ByteWriter {
  private buf = new Uint8Array(4096);
  private dv = new DataView(this.buf.buffer);
  length = 0;
  private room(n: number): number {
    if (this.length + n > this.buf.length) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
      next.set(this.buf.subarray(0, this.length));
      this.buf = next;
      this.dv = new DataView(next.buffer);
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  bytes(b: Uint8Array): void {
    this.buf.set(b, this.room(b.length));
  }
  zeros(n: number): void {
    this.room(n);
  }
  u8(x: number): void {
    this.dv.setUint8(this.room(1), x);
  }
  u32(x: number): void {
    this.dv.setUint32(this.room(4), x, true);
  }
  u64(x: bigint): void {
    this.dv.setBigUint64(this.room(8), x, true);
  }
  i64(x: bigint): void {
    this.dv.setBigInt64(this.room(8), x, true);
  }
  f32(x: number): void {
    this.dv.setFloat32(this.room(4), x, true);
  }
  f64(x: number): void {
    this.dv.setFloat64(this.room(8), x, true);
  }
  int(type: string, x: number): void {
    const at = this.room(Number(type.slice(1)) / 8);
    if (type === "u8") this.dv.setUint8(at, x);
    else if (type === "i8") this.dv.setInt8(at, x);
    else if (type === "u16") this.dv.setUint16(at, x, true);
    else if (type === "i16") this.dv.setInt16(at, x, true);
    else if (type === "u32") this.dv.setUint32(at, x, true);
    else this.dv.setInt32(at, x, true);
  }
  string(s: string): void {
    const b = new TextEncoder().encode(s);
    this.u64(BigInt(b.length));
    this.bytes(b);
  }
  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

// ─── Container: reader ────────────────────────────────────────────────────────────────────────────

/** One tensor as the file describes it; `bytes` is a view of exactly its data. */
export interface GgufTensorInfo {
  name: string;
  /** Dimensions innermost first, as stored. */
  ne: number[];
  type: GgmlType;
  /** Offset from the start of the data section. */
  offset: number;
  bytes: Uint8Array;
}

/** A parsed and checked GGUF file. */
export interface GgufFile {
  version: number;
  alignment: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
  /** Absolute file offset of the data section. */
  dataOffset: number;
}

/**
 * Parses a whole GGUF file, refusing it (a `GgufError` naming `where` and the field) for: a short
 * or truncated file, a wrong magic, a version other than 3, an unknown value type, an array of
 * arrays, a duplicate or empty key, invalid UTF-8, a `general.alignment` that is not a u32 power of
 * two, a bad tensor name, rank or type (ferry reads F32, F16, BF16, Q8_0 and Q4_0), an innermost
 * dim that is not a whole number of blocks, an offset other than the packed, aligned one llama.cpp
 * expects, data running past the end, and trailing bytes after the last tensor's padding.
 *
 * @example
 * ```ts
 * const file = parseGguf(new Uint8Array(await readFile("m.gguf")), "m.gguf");
 * file.metadata.get("general.architecture"); // { type: "string", value: "qwen3" }
 * ```
 */
export function parseGguf(file: Uint8Array, where = "gguf"): GgufFile {
  const r = new ByteReader(file, where);
  if (file.length < 24) {
    throw new GgufError(where, "header", `${file.length} bytes is shorter than the 24-byte header`);
  }
  if (!GGUF_MAGIC.every((b, i) => file[i] === b)) {
    throw new GgufError(where, "header.magic", `expected "GGUF", got bytes [${[...file.subarray(0, 4)]}]`);
  }
  r.pos = 4;
  const version = r.u32("header.version");
  if (version !== GGUF_VERSION) {
    throw new GgufError(where, "header.version", `${version} is not supported (expected ${GGUF_VERSION})`);
  }
  const nTensors = r.count("header.tensor_count", 8 + 4 + 8 + 4 + 8);
  const nKv = r.count("header.metadata_kv_count", 8 + 1 + 4 + 1);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < nKv; i++) {
    const key = r.string(`metadata[${i}].key`);
    if (key.length === 0) throw new GgufError(where, `metadata[${i}].key`, "is empty");
    if (metadata.has(key)) throw new GgufError(where, key, "metadata key appears twice");
    metadata.set(key, r.value(key));
  }
  const alignValue = metadata.get("general.alignment");
  const alignment = alignValue ? checkAlignment(alignValue, where) : GGUF_DEFAULT_ALIGNMENT;
  const infos: Array<Omit<GgufTensorInfo, "bytes">> = [];
  const names = new Set<string>();
  let expected = 0;
  for (let i = 0; i < nTensors; i++) {
    const name = r.string(`tensors[${i}].name`);
    checkTensorName(name, where);
    const field = `tensor ${name}`;
    if (names.has(name)) throw new GgufError(where, field, "tensor name appears twice");
    names.add(name);
    const nDims = r.u32(`${field}.n_dims`);
    if (nDims < 1 || nDims > GGML_MAX_DIMS) {
      throw new GgufError(where, `${field}.n_dims`, `${nDims}; expected 1 to ${GGML_MAX_DIMS}`);
    }
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) ne.push(r.count(`${field}.ne[${d}]`, 0));
    const typeId = r.u32(`${field}.type`);
    const type = (Object.keys(GGML_TYPES) as GgmlType[]).find((t) => GGML_TYPES[t].id === typeId);
    if (!type) {
      const known = OTHER_GGML_TYPES[typeId];
      throw new GgufError(
        where,
        `${field}.type`,
        `${
          known ? `${known} (${typeId})` : `unknown type ${typeId}`
        }; ferry reads F32, F16, BF16, Q8_0 and Q4_0`,
      );
    }
    const n = numel(ne);
    if (!Number.isSafeInteger(n)) {
      throw new GgufError(where, `${field}.ne`, `[${ne}] holds too many elements`);
    }
    if (ne[0] % GGML_TYPES[type].blockSize !== 0) {
      throw new GgufError(
        where,
        `${field}.ne[0]`,
        `${ne[0]} is not a multiple of ${type}'s block of ${GGML_TYPES[type].blockSize}`,
      );
    }
    const offset = r.count(`${field}.offset`, 0);
    if (offset !== expected) {
      throw new GgufError(
        where,
        `${field}.offset`,
        `${offset}; expected ${expected} (tensors packed in order, each padded to ${alignment})`,
      );
    }
    infos.push({ name, ne, type, offset });
    expected += pad(tensorBytes(type, n), alignment);
  }
  const dataOffset = nTensors > 0 ? pad(r.pos, alignment) : r.pos;
  const tensors = infos.map((t) => {
    const start = dataOffset + t.offset, len = tensorBytes(t.type, numel(t.ne));
    if (start + len > file.length) {
      throw new GgufError(
        where,
        `tensor ${t.name}`,
        `data [${start}, ${start + len}) runs past the end of the ${file.length}-byte file`,
      );
    }
    return { ...t, bytes: file.subarray(start, start + len) };
  });
  const end = dataOffset + expected;
  if (file.length > end) {
    throw new GgufError(where, "size", `${file.length - end} bytes follow the last tensor's padding`);
  }
  if (nTensors === 0 && file.length > r.pos) {
    throw new GgufError(where, "size", `${file.length - r.pos} bytes follow the metadata`);
  }
  return { version, alignment, metadata, tensors, dataOffset };
}

/**
 * A tensor's values as f32 (dequantized when it is Q8_0 or Q4_0).
 *
 * @example
 * ```ts
 * const w = tensorToF32(file.tensors[0]);
 * ```
 */
export function tensorToF32(t: GgufTensorInfo): Float32Array {
  return decodeTensor(t.type, t.bytes, numel(t.ne));
}

class ByteReader {
  pos = 0;
  private dv: DataView;
  private utf8 = new TextDecoder("utf-8", { fatal: true });
  constructor(private file: Uint8Array, private where: string) {
    this.dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
  }
  private take(n: number, field: string): number {
    if (this.pos + n > this.file.length) {
      throw new GgufError(
        this.where,
        field,
        `truncated: needs ${n} bytes at offset ${this.pos}, the file has ${this.file.length}`,
      );
    }
    const at = this.pos;
    this.pos += n;
    return at;
  }
  u32(field: string): number {
    return this.dv.getUint32(this.take(4, field), true);
  }
  /** A u64 used as a count or size; `minEach` bytes per unit bounds it by what the file could hold. */
  count(field: string, minEach: number): number {
    const v = this.dv.getBigUint64(this.take(8, field), true);
    if (
      v > BigInt(Number.MAX_SAFE_INTEGER) ||
      (minEach > 0 && Number(v) * minEach > this.file.length - this.pos)
    ) {
      throw new GgufError(this.where, field, `${v} is more than the file can hold`);
    }
    return Number(v);
  }
  string(field: string): string {
    const n = this.count(field, 1);
    const at = this.take(n, field);
    try {
      return this.utf8.decode(this.file.subarray(at, at + n));
    } catch {
      throw new GgufError(this.where, field, "string is not valid UTF-8");
    }
  }
  value(key: string): GgufValue {
    const type = this.valueType(this.u32(key), key);
    if (type !== "array") return { type, value: this.scalar(type, key) } as GgufValue;
    const elem = this.valueType(this.u32(key), key);
    if (elem === "array") throw new GgufError(this.where, key, "array of arrays (llama.cpp refuses them)");
    const size = GGUF_VALUE_TYPES.find(([n]) => n === elem)![2];
    const n = this.count(key, size);
    const value: Array<number | bigint | boolean | string> = [];
    for (let i = 0; i < n; i++) value.push(this.scalar(elem, `${key}[${i}]`));
    return { type: "array", elem, value };
  }
  private valueType(id: number, key: string): GgufScalarType | "array" {
    const row = GGUF_VALUE_TYPES.find(([, i]) => i === id);
    if (!row) throw new GgufError(this.where, key, `unknown value type ${id} (expected 0 to 12)`);
    return row[0];
  }
  private scalar(type: GgufScalarType, field: string): number | bigint | boolean | string {
    const dv = this.dv;
    switch (type) {
      case "u8":
        return dv.getUint8(this.take(1, field));
      case "i8":
        return dv.getInt8(this.take(1, field));
      case "u16":
        return dv.getUint16(this.take(2, field), true);
      case "i16":
        return dv.getInt16(this.take(2, field), true);
      case "u32":
        return dv.getUint32(this.take(4, field), true);
      case "i32":
        return dv.getInt32(this.take(4, field), true);
      case "f32":
        return dv.getFloat32(this.take(4, field), true);
      case "bool":
        return dv.getUint8(this.take(1, field)) !== 0;
      case "string":
        return this.string(field);
      case "u64":
        return dv.getBigUint64(this.take(8, field), true);
      case "i64":
        return dv.getBigInt64(this.take(8, field), true);
      case "f64":
        return dv.getFloat64(this.take(8, field), true);
    }
  }
}

// ─── Qwen3 model: writer ──────────────────────────────────────────────────────────────────────────

/** Options of `writeGguf`. */
export interface GgufWriteOptions {
  /** Type of the matrices; norm vectors always stay F32, as llama.cpp's converter keeps them. */
  type: GgufDtype;
  /** `general.name` (default "ferry"). */
  name?: string;
}

/**
 * The ggml type of a `--dtype` name; an unknown name is a RangeError listing the known ones.
 *
 * @example
 * ```ts
 * ggmlType("q4_0"); // "Q4_0"
 * ```
 */
export function ggmlType(dtype: GgufDtype): GgmlType {
  const t = dtype.toUpperCase() as GgmlType;
  if (!(t in GGML_TYPES)) {
    throw new RangeError(`unknown GGUF dtype ${dtype} (expected f32, f16, bf16, q8_0 or q4_0)`);
  }
  return t;
}

/**
 * llama.cpp's name for a ferry (Hugging Face) tensor name, or undefined when it has none.
 *
 * @example
 * ```ts
 * ggufTensorName("model.layers.3.mlp.down_proj.weight"); // "blk.3.ffn_down.weight"
 * ```
 */
export function ggufTensorName(hf: string): string | undefined {
  const g = QWEN3_GLOBAL_TENSORS.find(([h]) => h === hf);
  if (g) return g[1];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const l = m && QWEN3_LAYER_TENSORS.find(([h]) => h === m[2]);
  return l ? `blk.${m![1]}.${l[1]}` : undefined;
}

/**
 * The ferry (Hugging Face) name of a llama.cpp tensor name, or undefined when it has none.
 *
 * @example
 * ```ts
 * hfTensorName("output_norm.weight"); // "model.norm.weight"
 * ```
 */
export function hfTensorName(gguf: string): string | undefined {
  const g = QWEN3_GLOBAL_TENSORS.find(([, n]) => n === gguf);
  if (g) return g[0];
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf);
  const l = m && QWEN3_LAYER_TENSORS.find(([, n]) => n === m[2]);
  return l ? `model.layers.${m![1]}.${l[0]}` : undefined;
}

/**
 * The metadata ferry writes for a model: general.*, the qwen3.* hyperparameters with the types
 * llama.cpp checks, and the byte tokenizer as a "gpt2" vocabulary with no merges.
 *
 * @example
 * ```ts
 * const kv = qwen3Metadata(PRESETS.default, "Q4_0", "ferry");
 * ```
 */
export function qwen3Metadata(
  config: ModelConfig,
  type: GgmlType,
  name = "ferry",
): Array<[string, GgufValue]> {
  const { tokens, types } = byteVocabulary(config.vocab_size);
  const kv: Array<[string, GgufValue]> = [
    ["general.architecture", { type: "string", value: QWEN3_ARCH }],
    ["general.name", { type: "string", value: name }],
    ["general.file_type", { type: "u32", value: GGML_TYPES[type].ftype }],
    ["general.quantization_version", { type: "u32", value: GGML_QNT_VERSION }],
    ["general.alignment", { type: "u32", value: GGUF_DEFAULT_ALIGNMENT }],
  ];
  for (const [suffix, t, field] of QWEN3_HPARAMS) {
    kv.push([`${QWEN3_ARCH}.${suffix}`, { type: t, value: config[field] as number }]);
  }
  kv.push(
    ["tokenizer.ggml.model", { type: "string", value: "gpt2" }],
    ["tokenizer.ggml.pre", { type: "string", value: "default" }],
    ["tokenizer.ggml.tokens", { type: "array", elem: "string", value: tokens }],
    ["tokenizer.ggml.token_type", { type: "array", elem: "i32", value: types }],
    ["tokenizer.ggml.merges", { type: "array", elem: "string", value: [] }],
    ["tokenizer.ggml.bos_token_id", { type: "u32", value: BOS }],
    ["tokenizer.ggml.eos_token_id", { type: "u32", value: EOS }],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: true }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
  );
  return kv;
}

/**
 * The GGUF tensors of a model: llama.cpp names, `ne` reversed from ferry's dims, matrices encoded as
 * `type` and 1-D tensors as F32. Checks the tensors against the config first (names, dims, finite
 * values, blocks, f16 range); `where` names the destination in errors.
 *
 * @example
 * ```ts
 * const chunks = encodeGguf(qwen3Metadata(cfg, "Q8_0"), qwen3Tensors(tensors, cfg, "Q8_0", "m.gguf"));
 * ```
 */
export function qwen3Tensors(
  tensors: readonly Tensor[],
  config: ModelConfig,
  type: GgmlType,
  where = "gguf",
): GgufTensorData[] {
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const expected = paramShapes(config);
  for (const t of tensors) {
    if (!expected.some((p) => p.name === t.name)) {
      throw new GgufError(where, `tensor ${t.name}`, "is not part of this config's model");
    }
  }
  if (config.vocab_size < BYTE_VOCAB_SIZE) {
    throw new GgufError(
      where,
      "vocab_size",
      `${config.vocab_size}; ferry's byte tokenizer needs at least ${BYTE_VOCAB_SIZE}`,
    );
  }
  return expected.map(({ name, dims }) => {
    const t = byName.get(name);
    const field = `tensor ${name}`;
    if (!t) throw new GgufError(where, field, `missing (expected dims [${dims}])`);
    if (t.dims.length !== dims.length || t.dims.some((d, i) => d !== dims[i])) {
      throw new GgufError(where, field, `has dims [${t.dims}]; the config implies [${dims}]`);
    }
    if (t.data.length !== numel(dims)) {
      throw new GgufError(where, field, `holds ${t.data.length} values for dims [${dims}]`);
    }
    const bad = t.data.findIndex((x) => !Number.isFinite(x));
    if (bad >= 0) {
      throw new GgufError(where, field, `element ${bad} is ${t.data[bad]}; expected a finite number`);
    }
    const ty = dims.length === 1 ? "F32" : type;
    const ne = [...dims].reverse();
    if (ne[0] % GGML_TYPES[ty].blockSize !== 0) {
      throw new GgufError(
        where,
        field,
        `${ty} needs the input dim (${ne[0]}) to be a multiple of ${
          GGML_TYPES[ty].blockSize
        }; choose f32, f16 or bf16`,
      );
    }
    const bytes = encodeTensor(ty, t.data);
    if (ty === "F16") {
      const back = decodeTensor(ty, bytes, t.data.length);
      const over = back.findIndex((x) => !Number.isFinite(x));
      if (over >= 0) {
        throw new GgufError(where, field, `element ${over} = ${t.data[over]} overflows f16 (max 65504)`);
      }
    }
    if (ty === "Q8_0" || ty === "Q4_0") {
      const d = getScales(bytes, GGML_TYPES[ty].blockBytes, t.data.length / QK);
      const over = d.findIndex((x) => !Number.isFinite(x));
      if (over >= 0) throw new GgufError(where, field, `block ${over}'s scale overflows f16`);
    }
    return { name: ggufTensorName(name)!, ne, type: ty, bytes };
  });
}

/**
 * Writes a ferry Qwen3 model as a GGUF v3 file llama.cpp loads (architecture `qwen3`), atomically.
 * `tensors` are ferry's (Hugging Face names, row-major dims); `opts.type` is the matrices' type.
 *
 * @example
 * ```ts
 * await writeGguf("out/model.f32.gguf", model.tensors, model.config, { type: "f32" });
 * ```
 */
export async function writeGguf(
  path: string,
  tensors: readonly Tensor[],
  config: ModelConfig,
  opts: GgufWriteOptions,
): Promise<void> {
  const type = ggmlType(opts.type);
  const chunks = encodeGguf(
    qwen3Metadata(config, type, opts.name),
    qwen3Tensors(tensors, config, type, path),
    path,
  );
  await writeAtomic(path, chunks);
}

// ─── Qwen3 model: reader ──────────────────────────────────────────────────────────────────────────

/** What `readGguf` gives back. */
export interface LoadedGguf {
  config: ModelConfig;
  /** f32 tensors under ferry's names, in `paramShapes` order, dequantized where stored quantized. */
  tensors: Tensor[];
  /** The type each tensor was stored as, by ferry name. */
  types: Record<string, GgmlType>;
  /** The parsed file, for metadata beyond the config. */
  file: GgufFile;
}

/**
 * Reads a GGUF written for llama.cpp's `qwen3` architecture into a ferry model: parses and checks the
 * container, then the architecture, the hyperparameters (with llama.cpp's strict types), the byte
 * tokenizer, and that the tensors are exactly the model's with the shapes the config implies.
 *
 * @example
 * ```ts
 * const { config, tensors } = await readGguf("out/model.f32.gguf");
 * const model = buildModel(config, tensors);
 * ```
 */
export async function readGguf(path: string): Promise<LoadedGguf> {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await readFile(path));
  } catch (e) {
    throw new GgufError(path, "file", `cannot be read: ${(e as Error).message}`);
  }
  return qwen3FromGguf(parseGguf(bytes, path), path);
}

/**
 * The ferry model in a parsed GGUF file (see `readGguf`); `where` names the source in errors.
 *
 * @example
 * ```ts
 * const { config, tensors } = qwen3FromGguf(parseGguf(bytes, "m.gguf"), "m.gguf");
 * ```
 */
export function qwen3FromGguf(file: GgufFile, where = "gguf"): LoadedGguf {
  const md = file.metadata;
  const arch = md.get("general.architecture");
  if (!arch) throw new GgufError(where, "general.architecture", "missing");
  if (arch.type !== "string" || arch.value !== QWEN3_ARCH) {
    throw new GgufError(
      where,
      "general.architecture",
      `${JSON.stringify(arch.value)}; expected "${QWEN3_ARCH}"`,
    );
  }
  const cfg: Partial<ModelConfig> = {};
  for (const [suffix, type, field, fallback] of QWEN3_HPARAMS) {
    const key = `${QWEN3_ARCH}.${suffix}`;
    const v = md.get(key);
    let x: number | undefined;
    if (v === undefined) {
      x = fallback?.(cfg);
      if (x === undefined) throw new GgufError(where, key, `missing (expected ${type})`);
    } else if (v.type !== type) {
      throw new GgufError(
        where,
        key,
        `has type ${v.type === "array" ? `array of ${v.elem}` : v.type}; expected ${type}`,
      );
    } else x = type === "f32" ? shortestF32Decimal(v.value as number) : v.value as number;
    if (!(x > 0) || !Number.isFinite(x) || (type === "u32" && !Number.isInteger(x))) {
      throw new GgufError(where, key, `${x}; expected a positive ${type === "u32" ? "integer" : "number"}`);
    }
    const prev = cfg[field];
    if (prev !== undefined && prev !== x) {
      throw new GgufError(
        where,
        key,
        `${x} differs from ${prev} set by another key; ferry needs one head size for q, k, v and RoPE`,
      );
    }
    (cfg as Record<string, number>)[field] = x;
  }
  const scaling = md.get(`${QWEN3_ARCH}.rope.scaling.type`);
  if (scaling && !(scaling.type === "string" && scaling.value === "none")) {
    throw new GgufError(
      where,
      `${QWEN3_ARCH}.rope.scaling.type`,
      `${JSON.stringify(scaling.value)}; ferry supports no RoPE scaling`,
    );
  }
  if (cfg.num_attention_heads! % cfg.num_key_value_heads! !== 0) {
    throw new GgufError(
      where,
      `${QWEN3_ARCH}.attention.head_count_kv`,
      `${cfg.num_key_value_heads} does not divide head_count ${cfg.num_attention_heads}`,
    );
  }
  if (cfg.head_dim! % 2 !== 0) {
    throw new GgufError(
      where,
      `${QWEN3_ARCH}.attention.key_length`,
      `${cfg.head_dim} is odd; RoPE needs it even`,
    );
  }

  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const embd = byName.get("token_embd.weight");
  if (!embd) throw new GgufError(where, "tensor token_embd.weight", "missing");
  if (embd.ne.length !== 2) {
    throw new GgufError(where, "tensor token_embd.weight", `has ne [${embd.ne}]; expected 2 dims`);
  }
  cfg.vocab_size = embd.ne[1];
  cfg.tie_word_embeddings = !byName.has("output.weight");
  const config = cfg as ModelConfig;
  checkTokenizer(md, config.vocab_size, where);

  const expected = paramShapes(config);
  for (const t of file.tensors) {
    const hf = hfTensorName(t.name);
    if (!hf || !expected.some((p) => p.name === hf)) {
      throw new GgufError(where, `tensor ${t.name}`, "is not a tensor of this qwen3 model");
    }
  }
  const tensors: Tensor[] = [];
  const types: Record<string, GgmlType> = {};
  for (const { name, dims } of expected) {
    const gname = ggufTensorName(name)!;
    const t = byName.get(gname);
    const field = `tensor ${gname}`;
    if (!t) throw new GgufError(where, field, `missing (expected ne [${[...dims].reverse()}])`);
    const ne = [...dims].reverse();
    if (t.ne.length !== ne.length || t.ne.some((n, i) => n !== ne[i])) {
      throw new GgufError(where, field, `has ne [${t.ne}]; the metadata implies [${ne}]`);
    }
    const data = tensorToF32(t);
    const bad = data.findIndex((x) => !Number.isFinite(x));
    if (bad >= 0) {
      throw new GgufError(where, field, `element ${bad} is ${data[bad]}; expected a finite number`);
    }
    tensors.push({ name, dims: [...dims], data });
    types[name] = t.type;
  }
  return { config, tensors, types, file };
}

// Ferry's tokenizer is fixed (bytes, BOS, EOS), so a file with any other vocabulary would be read
// with the wrong token meanings; refuse it rather than guess.
function checkTokenizer(md: Map<string, GgufValue>, vocab: number, where: string): void {
  const model = md.get("tokenizer.ggml.model");
  if (!model || model.type !== "string" || model.value !== "gpt2") {
    throw new GgufError(
      where,
      "tokenizer.ggml.model",
      `${model ? JSON.stringify(model.value) : "missing"}; expected "gpt2"`,
    );
  }
  const tokens = md.get("tokenizer.ggml.tokens");
  if (!tokens || tokens.type !== "array" || tokens.elem !== "string") {
    throw new GgufError(where, "tokenizer.ggml.tokens", "missing or not an array of strings");
  }
  if (tokens.value.length !== vocab) {
    throw new GgufError(
      where,
      "tokenizer.ggml.tokens",
      `has ${tokens.value.length} tokens; token_embd.weight has ${vocab} rows`,
    );
  }
  const want = byteToUnicode();
  const off = want.findIndex((s, i) => tokens.value[i] !== s);
  if (off >= 0) {
    throw new GgufError(
      where,
      "tokenizer.ggml.tokens",
      `token ${off} is ${JSON.stringify(tokens.value[off])}; ferry's byte tokenizer needs ${
        JSON.stringify(want[off])
      }`,
    );
  }
  for (
    const [key, id] of [["tokenizer.ggml.bos_token_id", BOS], ["tokenizer.ggml.eos_token_id", EOS]] as const
  ) {
    const v = md.get(key);
    if (!v || v.type !== "u32" || v.value !== id) {
      throw new GgufError(
        where,
        key,
        `${v ? `${v.type} ${String(v.value)}` : "missing"}; expected u32 ${id}`,
      );
    }
  }
}

/**
 * The shortest decimal that narrows to the same f32: a config value such as 1e-6 is stored as the
 * f32 nearest it, and this gives 1e-6 back rather than 9.999999974752427e-7.
 *
 * @example
 * ```ts
 * shortestF32Decimal(Math.fround(1e-6)); // 1e-6
 * ```
 */
export function shortestF32Decimal(x: number): number {
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return y;
  }
  return x;
}

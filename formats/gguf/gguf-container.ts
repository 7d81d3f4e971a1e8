/**
 * The GGUF v3 container, as gguf-py's reader and writer see it: header, typed metadata, tensor infos
 * and aligned tensor data, with nothing model-specific. `formats/gguf/gguf-qwen3.ts` maps a ferry model onto
 * it and `quantize/quants.ts` holds the tensor codecs. The spec is formats/gguf/gguf.md.
 *
 * The file is read whole into memory and every offset, length, type and name is checked before
 * anything is handed out; a refusal is a `GgufError` naming the file, the field and what was expected.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises";
 * import { parseGguf } from "./gguf-container.ts";
 * const file = parseGguf(new Uint8Array(await readFile("m.gguf")), "m.gguf");
 * file.metadata.get("general.architecture"); // { type: "string", value: "qwen3" }
 * ```
 * @module
 */
import { numel } from "../../model/tensor.ts";
import { formatErrorClass, TENSOR_REFUSALS } from "../../model/error.ts";
import {
  decodeTensor,
  GGML_TYPES,
  type GgmlType,
  OTHER_GGML_TYPES,
  tensorBytes,
} from "../../quantize/quants.ts";
import { GGUF_KEYS } from "./gguf-keys.ts";

// ─── Constants ───────────────────────────────────────────────────────────────────────────────────

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

// ─── Errors ──────────────────────────────────────────────────────────────────────────────────────

/**
 * Every rule a GGUF (or an imatrix in GGUF) can break, written or read; formats/gguf/gguf.md ("Refusals")
 * says what each means.
 */
export const GGUF_REFUSALS = [
  ["Unreadable", "Truncated", "TrailingBytes", "BadMagic", "UnsupportedVersion", "DigestMismatch"],
  ["InvalidUtf8", "InvalidName", "DuplicateKey", "InvalidValueType", "WrongType", "MissingField"],
  ["InvalidValue", "InvalidShape", "UnsupportedDtype", "InvalidOffset", "SizeMismatch", "NotFinite"],
  ["Unsupported", "InvalidJson", "InvalidTokenizer", "VocabMismatch"],
  TENSOR_REFUSALS,
] as const;
/** A code of `GGUF_REFUSALS`. */
export type GgufRefusal = typeof GGUF_REFUSALS[number][number];

/**
 * A GGUF that cannot be written or read: `path` names the file, `field` the offending part
 * (`header.version`, a metadata key, `tensor blk.0.attn_q.weight`, ...), `code` the rule.
 *
 * @example
 * ```ts
 * import { GgufError } from "./gguf-container.ts";
 * import { readGguf } from "./gguf.ts";
 * try { await readGguf("m.gguf"); } catch (e) { if (e instanceof GgufError) console.error(e.field); }
 * ```
 */
export class GgufError extends formatErrorClass(GGUF_REFUSALS) {}

// ─── Container: writer ────────────────────────────────────────────────────────────────────────────

/** One tensor to write: its GGUF name, `ne` (innermost dimension first), type and encoded bytes. */
export interface GgufTensorData {
  name: string;
  ne: number[];
  type: GgmlType;
  bytes: Uint8Array;
}

/** One tensor's place in a file before its bytes exist: GGUF name, `ne` (innermost first) and type. */
export type GgufTensorShape = Omit<GgufTensorData, "bytes">;

/** A file's layout from its metadata and tensor shapes alone (`encodeGgufHeader`). */
export interface GgufLayout {
  /** Header, metadata and tensor infos, zero-padded to the alignment when there are tensors. */
  header: Uint8Array;
  alignment: number;
  /** Each tensor's offset from the start of the data section (u64 in the file: may pass 2^32). */
  offsets: number[];
  /** Each tensor's exact byte length. */
  sizes: number[];
  /** The whole file's length. */
  fileBytes: number;
}

/**
 * Lays out a GGUF v3 file's header from shapes alone: header, metadata in the given order, tensor
 * infos with each tensor's offset (aligned to `general.alignment`, 32 when absent), then padding to
 * the data section. A writer streams each tensor's bytes after it, padding each to the alignment, the
 * last included. `where` names the destination in errors.
 *
 * @example
 * ```ts
 * import { encodeGgufHeader } from "./gguf-container.ts";
 * const { header, offsets } = encodeGgufHeader([], [{ name: "w", ne: [32, 4], type: "F32" }], "x.gguf");
 * ```
 */
export function encodeGgufHeader(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorShape[],
  where = "gguf",
): GgufLayout {
  const w = new ByteWriter();
  w.bytes(GGUF_MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(BigInt(tensors.length));
  w.u64(BigInt(metadata.length));
  const keys = new Set<string>();
  let alignment = GGUF_DEFAULT_ALIGNMENT;
  for (const [key, value] of metadata) {
    if (key.length === 0) throw new GgufError(where, "InvalidName", "metadata", "a key is empty");
    if (keys.has(key)) throw new GgufError(where, "DuplicateKey", key, "metadata key appears twice");
    if (!key.isWellFormed()) {
      throw new GgufError(where, "InvalidUtf8", key, "the key holds a lone surrogate (not Unicode text)");
    }
    keys.add(key);
    if (key === GGUF_KEYS.General.ALIGNMENT) alignment = checkAlignment(value, where);
    w.string(key);
    writeValue(w, value, key, where);
  }
  const names = new Set<string>();
  const offsets: number[] = [], sizes: number[] = [];
  let offset = 0;
  for (const t of tensors) {
    const field = `tensor ${t.name}`;
    checkTensorName(t.name, where);
    if (names.has(t.name)) throw new GgufError(where, "DuplicateTensor", field, "tensor name appears twice");
    names.add(t.name);
    if (t.ne.length < 1 || t.ne.length > GGML_MAX_DIMS) {
      throw new GgufError(
        where,
        "InvalidShape",
        field,
        `has ${t.ne.length} dims; expected 1 to ${GGML_MAX_DIMS}`,
      );
    }
    const spec = GGML_TYPES[t.type];
    if (t.ne[0] % spec.blockSize !== 0) {
      throw new GgufError(
        where,
        "InvalidShape",
        field,
        `innermost dim ${t.ne[0]} is not a multiple of ${t.type}'s block of ${spec.blockSize}`,
      );
    }
    w.string(t.name);
    w.u32(t.ne.length);
    for (const n of t.ne) w.u64(BigInt(n));
    w.u32(spec.id);
    w.u64(BigInt(offset));
    const size = tensorBytes(t.type, numel(t.ne));
    offsets.push(offset), sizes.push(size);
    offset += pad(size, alignment);
  }
  if (tensors.length > 0) w.zeros(pad(w.length, alignment) - w.length);
  const header = w.finish();
  return { header, alignment, offsets, sizes, fileBytes: header.length + offset };
}

/**
 * Lays out a whole GGUF v3 file in memory (`encodeGgufHeader`, then each tensor's bytes, each
 * zero-padded to the alignment, the last included). Returns the chunks to write in order.
 *
 * @example
 * ```ts
 * import { encodeGguf } from "./gguf-container.ts";
 * const chunks = encodeGguf([["general.architecture", { type: "string", value: "qwen3" }]], [], "x.gguf");
 * ```
 */
export function encodeGguf(
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorData[],
  where = "gguf",
): Uint8Array[] {
  const layout = encodeGgufHeader(metadata, tensors, where);
  const chunks = [layout.header];
  tensors.forEach((t, i) => {
    if (t.bytes.length !== layout.sizes[i]) {
      throw new GgufError(
        where,
        "SizeMismatch",
        `tensor ${t.name}`,
        `holds ${t.bytes.length} bytes; ${t.type} ne [${t.ne}] needs ${layout.sizes[i]}`,
      );
    }
    chunks.push(t.bytes);
    const fill = pad(t.bytes.length, layout.alignment) - t.bytes.length;
    if (fill > 0) chunks.push(new Uint8Array(fill));
  });
  return chunks;
}

/**
 * Streams a GGUF v3 file into `sink`, tensor by tensor: the header from shapes alone, then for each
 * tensor the pieces `pieces(i)` yields (checked to add up to exactly its size) and its padding. Only
 * one piece is held at a time, so a file of any size is written in bounded memory. Returns the layout.
 *
 * @example
 * ```ts
 * import { type GgufTensorShape, type GgufValue, streamGguf } from "./gguf-container.ts";
 * import type { AtomicWriter } from "../io.ts";
 * declare const out: AtomicWriter, metadata: [string, GgufValue][], shapes: GgufTensorShape[];
 * declare function piecesOf(index: number): AsyncIterable<Uint8Array>; // tensor `index`'s encoded bytes
 * await streamGguf({ write: (b) => out.write(b) }, metadata, shapes, (i) => piecesOf(i), "m.gguf");
 * ```
 */
export async function streamGguf(
  sink: { write(bytes: Uint8Array): void | Promise<void> },
  metadata: ReadonlyArray<readonly [string, GgufValue]>,
  tensors: readonly GgufTensorShape[],
  pieces: (index: number) => AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  where = "gguf",
): Promise<GgufLayout> {
  const layout = encodeGgufHeader(metadata, tensors, where);
  await sink.write(layout.header);
  for (let i = 0; i < tensors.length; i++) {
    let written = 0;
    for await (const piece of pieces(i)) {
      written += piece.length;
      if (written > layout.sizes[i]) break;
      await sink.write(piece);
    }
    if (written !== layout.sizes[i]) {
      throw new GgufError(
        where,
        "SizeMismatch",
        `tensor ${tensors[i].name}`,
        `gave ${written > layout.sizes[i] ? "more than" : written} bytes; ${tensors[i].type} ne [${
          tensors[i].ne
        }] needs ${layout.sizes[i]}`,
      );
    }
    const fill = pad(written, layout.alignment) - written;
    if (fill > 0) await sink.write(new Uint8Array(fill));
  }
  return layout;
}

function writeValue(w: ByteWriter, v: GgufValue, key: string, where: string): void {
  const id = valueTypeId(v.type, key, where);
  w.u32(id);
  if (v.type === "array") {
    if (v.elem === ("array" as string)) {
      throw new GgufError(where, "InvalidValueType", key, "arrays of arrays are not readable by llama.cpp");
    }
    w.u32(valueTypeId(v.elem, key, where));
    w.u64(BigInt(v.value.length));
    for (const x of v.value) writeScalar(w, v.elem, x, key, where);
  } else writeScalar(w, v.type, v.value, key, where);
}

function writeScalar(w: ByteWriter, type: GgufScalarType, x: unknown, key: string, where: string): void {
  const bad = (what: string) => new GgufError(where, "WrongType", key, `value ${String(x)} is not ${what}`);
  switch (type) {
    case "string":
      if (typeof x !== "string") throw bad("a string");
      // A lone surrogate has no UTF-8: the encoder would write U+FFFD, another string than asked for.
      if (!x.isWellFormed()) {
        throw new GgufError(where, "InvalidUtf8", key, "a string holds a lone surrogate (not Unicode text)");
      }
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
  if (!row) throw new GgufError(where, "InvalidValueType", key, `unknown value type ${type}`);
  return row[1];
}

function checkAlignment(v: GgufValue, where: string): number {
  if (v.type !== "u32") {
    throw new GgufError(where, "WrongType", GGUF_KEYS.General.ALIGNMENT, `has type ${v.type}; expected u32`);
  }
  const a = v.value;
  if (a === 0 || (a & (a - 1)) !== 0) {
    throw new GgufError(where, "InvalidValue", GGUF_KEYS.General.ALIGNMENT, `${a} is not a power of two`);
  }
  return a;
}

function checkTensorName(name: string, where: string): void {
  const len = new TextEncoder().encode(name).length;
  if (len === 0 || len >= GGML_MAX_NAME) {
    throw new GgufError(
      where,
      "InvalidName",
      `tensor ${name}`,
      `name is ${len} bytes; expected 1 to ${GGML_MAX_NAME - 1}`,
    );
  }
}

function pad(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

class ByteWriter {
  private buf = new Uint8Array(4096);
  private dv = new DataView(this.buf.buffer);
  length = 0;
  // Every write takes its offset first: `room` may grow the buffer, and `this.dv.setX(this.room(n), ...)`
  // (or `this.buf.set(b, this.room(n))`) reads the old view before the call, writing where growth left.
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
    const at = this.room(b.length);
    this.buf.set(b, at);
  }
  zeros(n: number): void {
    this.room(n);
  }
  u8(x: number): void {
    const at = this.room(1);
    this.dv.setUint8(at, x);
  }
  u32(x: number): void {
    const at = this.room(4);
    this.dv.setUint32(at, x, true);
  }
  u64(x: bigint): void {
    const at = this.room(8);
    this.dv.setBigUint64(at, x, true);
  }
  i64(x: bigint): void {
    const at = this.room(8);
    this.dv.setBigInt64(at, x, true);
  }
  f32(x: number): void {
    const at = this.room(4);
    this.dv.setFloat32(at, x, true);
  }
  f64(x: number): void {
    const at = this.room(8);
    this.dv.setFloat64(at, x, true);
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

/** A file's header, metadata and tensor infos, parsed without its tensor data. */
export interface GgufHeader {
  version: number;
  alignment: number;
  metadata: Map<string, GgufValue>;
  /** Each tensor's name, `ne`, type and offset from the data section; `bytes` is not read. */
  tensors: Array<Omit<GgufTensorInfo, "bytes">>;
  /** Absolute file offset of the data section. */
  dataOffset: number;
  /** Where the last tensor's padding ends: the file's length if it is whole. */
  end: number;
}

/**
 * Parses the header, metadata and tensor infos of a GGUF file from its first bytes (`prefix`) and its
 * size, with every check `parseGguf` makes of them; tensor data is neither read nor needed. Returns
 * "more" when the prefix ends before the tensor infos do (read a longer one and call again).
 *
 * @example
 * ```ts
 * import { parseGgufHeader } from "./gguf-container.ts";
 * declare const first16MiB: Uint8Array, fileSize: number;
 * const head = parseGgufHeader(first16MiB, fileSize, "m.gguf"); // or "more"
 * ```
 */
export function parseGgufHeader(prefix: Uint8Array, fileSize: number, where = "gguf"): GgufHeader | "more" {
  try {
    return parseHeader(new ByteReader(prefix, where, fileSize), fileSize, where);
  } catch (e) {
    if (e === NEED_MORE) return "more";
    throw e;
  }
}

function parseHeader(r: ByteReader, size: number, where: string): GgufHeader {
  if (size < 24) {
    throw new GgufError(where, "Truncated", "header", `${size} bytes is shorter than the 24-byte header`);
  }
  const magic = r.take(4, "header.magic");
  if (!GGUF_MAGIC.every((b, i) => r.byte(magic + i) === b)) {
    throw new GgufError(
      where,
      "BadMagic",
      "header.magic",
      `expected "GGUF", got bytes [${[0, 1, 2, 3].map((i) => r.byte(magic + i))}]`,
    );
  }
  const version = r.u32("header.version");
  if (version !== GGUF_VERSION) {
    throw new GgufError(
      where,
      "UnsupportedVersion",
      "header.version",
      `${version} is not supported (expected ${GGUF_VERSION})`,
    );
  }
  const nTensors = r.count("header.tensor_count", 8 + 4 + 8 + 4 + 8);
  const nKv = r.count("header.metadata_kv_count", 8 + 1 + 4 + 1);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < nKv; i++) {
    const key = r.string(`metadata[${i}].key`);
    if (key.length === 0) throw new GgufError(where, "InvalidName", `metadata[${i}].key`, "is empty");
    if (metadata.has(key)) throw new GgufError(where, "DuplicateKey", key, "metadata key appears twice");
    metadata.set(key, r.value(key));
  }
  const alignValue = metadata.get(GGUF_KEYS.General.ALIGNMENT);
  const alignment = alignValue ? checkAlignment(alignValue, where) : GGUF_DEFAULT_ALIGNMENT;
  const tensors: GgufHeader["tensors"] = [];
  const names = new Set<string>();
  let expected = 0;
  for (let i = 0; i < nTensors; i++) {
    const name = r.string(`tensors[${i}].name`);
    checkTensorName(name, where);
    const field = `tensor ${name}`;
    if (names.has(name)) throw new GgufError(where, "DuplicateTensor", field, "tensor name appears twice");
    names.add(name);
    const nDims = r.u32(`${field}.n_dims`);
    if (nDims < 1 || nDims > GGML_MAX_DIMS) {
      throw new GgufError(
        where,
        "InvalidShape",
        `${field}.n_dims`,
        `${nDims}; expected 1 to ${GGML_MAX_DIMS}`,
      );
    }
    const ne: number[] = [];
    for (let d = 0; d < nDims; d++) ne.push(r.count(`${field}.ne[${d}]`, 0));
    const typeId = r.u32(`${field}.type`);
    const type = (Object.keys(GGML_TYPES) as GgmlType[]).find((t) => GGML_TYPES[t].id === typeId);
    if (!type) {
      const known = OTHER_GGML_TYPES[typeId];
      throw new GgufError(
        where,
        "UnsupportedDtype",
        `${field}.type`,
        `${known ? `${known} (${typeId})` : `unknown type ${typeId}`}; ferry reads ${
          Object.keys(GGML_TYPES).join(", ")
        }`,
      );
    }
    const n = numel(ne);
    if (!Number.isSafeInteger(n)) {
      throw new GgufError(where, "InvalidShape", `${field}.ne`, `[${ne}] holds too many elements`);
    }
    if (ne[0] % GGML_TYPES[type].blockSize !== 0) {
      throw new GgufError(
        where,
        "InvalidShape",
        `${field}.ne[0]`,
        `${ne[0]} is not a multiple of ${type}'s block of ${GGML_TYPES[type].blockSize}`,
      );
    }
    const offset = r.count(`${field}.offset`, 0);
    if (offset !== expected) {
      throw new GgufError(
        where,
        "InvalidOffset",
        `${field}.offset`,
        `${offset}; expected ${expected} (tensors packed in order, each padded to ${alignment})`,
      );
    }
    tensors.push({ name, ne, type, offset });
    expected += pad(tensorBytes(type, n), alignment);
  }
  const dataOffset = nTensors > 0 ? pad(r.pos, alignment) : r.pos;
  for (const t of tensors) {
    const start = dataOffset + t.offset, len = tensorBytes(t.type, numel(t.ne));
    if (start + len > size) {
      throw new GgufError(
        where,
        "Truncated",
        `tensor ${t.name}`,
        `data [${start}, ${start + len}) runs past the end of the ${size}-byte file`,
      );
    }
  }
  const end = dataOffset + expected;
  if (size > end) {
    const after = nTensors > 0 ? "the last tensor's padding" : "the metadata";
    throw new GgufError(where, "TrailingBytes", "size", `${size - end} bytes follow ${after}`);
  }
  return { version, alignment, metadata, tensors, dataOffset, end };
}

/**
 * Parses a whole GGUF file, refusing it (a `GgufError` naming `where` and the field) for: a short
 * or truncated file, a wrong magic, a version other than 3, an unknown value type, an array of
 * arrays, a duplicate or empty key, invalid UTF-8, a `general.alignment` that is not a u32 power of
 * two, a bad tensor name, rank or type (ferry reads the types of quants.ts's GGML_TYPES), an innermost
 * dim that is not a whole number of blocks, an offset other than the packed, aligned one llama.cpp
 * expects, data running past the end, and trailing bytes after the last tensor's padding.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises";
 * import { parseGguf } from "./gguf-container.ts";
 * const file = parseGguf(new Uint8Array(await readFile("m.gguf")), "m.gguf");
 * file.metadata.get("general.architecture"); // { type: "string", value: "qwen3" }
 * ```
 */
export function parseGguf(file: Uint8Array, where = "gguf"): GgufFile {
  const head = parseHeader(new ByteReader(file, where, file.length), file.length, where);
  const tensors = head.tensors.map((t) => {
    const start = head.dataOffset + t.offset, len = tensorBytes(t.type, numel(t.ne));
    return { ...t, bytes: file.subarray(start, start + len) };
  });
  const { version, alignment, metadata, dataOffset } = head;
  return { version, alignment, metadata, tensors, dataOffset };
}

/**
 * A tensor's values as f32 (dequantized when it is Q8_0 or Q4_0).
 *
 * @example
 * ```ts
 * import { type GgufFile, tensorToF32 } from "./gguf-container.ts";
 * declare const file: GgufFile;
 * const w = tensorToF32(file.tensors[0]);
 * ```
 */
export function tensorToF32(t: GgufTensorInfo): Float32Array {
  return decodeTensor(t.type, t.bytes, numel(t.ne));
}

// Thrown (and caught by parseGgufHeader) when a read runs past the prefix but not past the file.
const NEED_MORE = Symbol("need more of the file");

class ByteReader {
  pos = 0;
  private dv: DataView;
  private utf8 = new TextDecoder("utf-8", { fatal: true });
  /** `file` holds the first bytes of a file of `size` bytes (all of it when the sizes agree). */
  constructor(private file: Uint8Array, private where: string, private size: number) {
    this.dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
  }
  take(n: number, field: string): number {
    if (this.pos + n > this.size) {
      throw new GgufError(
        this.where,
        "Truncated",
        field,
        `truncated: needs ${n} bytes at offset ${this.pos}, the file has ${this.size}`,
      );
    }
    if (this.pos + n > this.file.length) throw NEED_MORE;
    const at = this.pos;
    this.pos += n;
    return at;
  }
  byte(at: number): number {
    return this.file[at];
  }
  u32(field: string): number {
    return this.dv.getUint32(this.take(4, field), true);
  }
  /** A u64 used as a count or size; `minEach` bytes per unit bounds it by what the file could hold. */
  count(field: string, minEach: number): number {
    const v = this.dv.getBigUint64(this.take(8, field), true);
    if (
      v > BigInt(Number.MAX_SAFE_INTEGER) ||
      (minEach > 0 && Number(v) * minEach > this.size - this.pos)
    ) {
      throw new GgufError(this.where, "Truncated", field, `${v} is more than the file can hold`);
    }
    return Number(v);
  }
  string(field: string): string {
    const n = this.count(field, 1);
    const at = this.take(n, field);
    try {
      return this.utf8.decode(this.file.subarray(at, at + n));
    } catch {
      throw new GgufError(this.where, "InvalidUtf8", field, "string is not valid UTF-8");
    }
  }
  value(key: string): GgufValue {
    const type = this.valueType(this.u32(key), key);
    if (type !== "array") return { type, value: this.scalar(type, key) } as GgufValue;
    const elem = this.valueType(this.u32(key), key);
    if (elem === "array") {
      throw new GgufError(this.where, "InvalidValueType", key, "array of arrays (llama.cpp refuses them)");
    }
    const size = GGUF_VALUE_TYPES.find(([n]) => n === elem)![2];
    const n = this.count(key, size);
    const value: Array<number | bigint | boolean | string> = [];
    for (let i = 0; i < n; i++) value.push(this.scalar(elem, `${key}[${i}]`));
    return { type: "array", elem, value };
  }
  private valueType(id: number, key: string): GgufScalarType | "array" {
    const row = GGUF_VALUE_TYPES.find(([, i]) => i === id);
    if (!row) {
      throw new GgufError(this.where, "InvalidValueType", key, `unknown value type ${id} (expected 0 to 12)`);
    }
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

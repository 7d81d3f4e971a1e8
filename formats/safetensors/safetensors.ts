/**
 * safetensors: a writer and a strict reader, and the sharded `model.safetensors.index.json` layout.
 * The spec as ferry reads it is formats/safetensors/safetensors.md.
 *
 * The reader enforces every rule of the reference (Rust) implementation and refuses a few things it
 * lets through: duplicate keys anywhere, numbers that are not plain integer literals or that exceed
 * 2^53 - 1, unknown fields in a tensor entry, BOOL bytes other than 0 and 1. Every refusal is a
 * `SafetensorsError` with its own `code`.
 *
 * @example
 * ```ts
 * import { readSafetensors, writeSafetensors } from "./safetensors.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[];
 * await writeSafetensors("out/model.safetensors", tensors, { dtype: "BF16" });
 * const { metadata, tensors: back } = await readSafetensors("out/model.safetensors");
 * back[0].dtype; // "BF16"; back[0].data is the exact f32 widening
 * ```
 * @module
 */
import { DIGEST_KEY, DIGEST_PLACEHOLDER, digestOffset, digestStream, isDigest } from "../digest.ts";
import { open, readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "../../quantize/float16.ts";
import { f32Bytes, openAtomic } from "../io.ts";
import { materialize, numel, type Tensor, type TensorSource, tensorSource } from "../../model/tensor.ts";
import { formatErrorClass, messageWithoutCode } from "../../model/error.ts";
import {
  isJsonObject,
  JSON_REFUSALS,
  JsonNumber,
  type JsonObject,
  type JsonValue,
  parseStrictJson,
  StrictJsonError,
} from "../json.ts";

/** The element types ferry reads, with their size in bytes. */
export const DTYPE_BYTES = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U8: 1,
  BOOL: 1,
} as const;

/** A safetensors dtype ferry reads. */
export type Dtype = keyof typeof DTYPE_BYTES;

/** The dtypes ferry writes: the float types a model is stored in. */
export const WRITE_DTYPES = ["F32", "F16", "BF16"] as const;
/** A dtype ferry writes. */
export type WriteDtype = typeof WRITE_DTYPES[number];

// Valid in the reference implementation but not read by ferry: named so the error can say so.
const OTHER_REFERENCE_DTYPES = new Set([
  "F4",
  "F6_E2M3",
  "F6_E3M2",
  "U16",
  "U32",
  "U64",
  "C64",
  "F8_E5M2",
  "F8_E4M3",
  "F8_E8M0",
  "F8_E4M3FNUZ",
  "F8_E5M2FNUZ",
]);

/** The reference implementation's header limit, in bytes (decimal: 10^8, not 100 MiB). */
export const MAX_HEADER_BYTES = 100_000_000;
/** The key of the string-to-string metadata map in the header. */
export const METADATA_KEY = "__metadata__";
/** The index file of a sharded checkpoint. */
export const INDEX_FILE = "model.safetensors.index.json";

/**
 * Why a file was refused. Each code is one rule; formats/safetensors/safetensors.md lists them all.
 * The first group mirrors the reference implementation's errors; the rest are ferry's stricter rules.
 */
export const SAFETENSORS_REFUSALS = [
  ["HeaderTooSmall", "HeaderTooLarge", "InvalidHeaderLength", "InvalidUtf8"],
  JSON_REFUSALS,
  ["NotAnInteger", "IntegerTooLarge", "HeaderNotObject", "InvalidMetadata", "InvalidTensorEntry"],
  ["MissingField", "UnknownField", "UnsupportedDtype", "InvalidOffset", "ValidationOverflow"],
  ["TensorInvalidInfo", "MetadataIncompleteBuffer", "InvalidBool", "InvalidIndex", "ShardMismatch"],
  ["InvalidTensor", "ReservedName", "DigestMismatch"],
] as const;
/** A code of `SAFETENSORS_REFUSALS`. */
export type SafetensorsErrorCode = typeof SAFETENSORS_REFUSALS[number][number];

/** A safetensors file (or index) that was refused: names the file, the field and the rule. */
export class SafetensorsError extends formatErrorClass(SAFETENSORS_REFUSALS) {}

// ---------------------------------------------------------------------------------------------
// Header

/** One tensor as the header describes it. `begin`/`end` are relative to the data buffer. */
export interface SafetensorsEntry {
  name: string;
  dtype: Dtype;
  dims: number[];
  begin: number;
  end: number;
}

/** A checked header: everything needed to read the data, nothing left to trust. */
export interface SafetensorsHeader {
  /** The `__metadata__` map (empty when absent). */
  metadata: Record<string, string>;
  /** Tensors in data order (by offsets). */
  entries: SafetensorsEntry[];
  /** Byte offset of the data buffer in the file: 8 + header length. */
  dataStart: number;
}

const ENTRY_FIELDS = ["dtype", "shape", "data_offsets"];
const PLAIN_INTEGER = /^(?:0|[1-9][0-9]*)$/;

/**
 * Checks a file's header: `bytes` is the start of the file (at least 8 + header length bytes; the
 * whole file is fine) and `fileSize` its full size. The 100,000,000-byte limit is checked before
 * anything is decoded. Throws `SafetensorsError` naming `path`, the field and the rule.
 *
 * The steps, in the reference's order: the length prefix, the header as one strict JSON object, the
 * `__metadata__` map, each tensor entry, then the layout (offsets, sizes, coverage of the data).
 *
 * @example
 * ```ts
 * import { parseSafetensorsHeader } from "./safetensors.ts";
 * declare const bytes: Uint8Array; // the file, or its first bytes
 * const { entries, dataStart } = parseSafetensorsHeader(bytes, bytes.length, "model.safetensors");
 * ```
 */
export function parseSafetensorsHeader(
  bytes: Uint8Array,
  fileSize = bytes.length,
  path = "safetensors",
): SafetensorsHeader {
  const n = headerLength(bytes, fileSize, path);
  if (bytes.length < 8 + n) {
    throw new RangeError(`parseSafetensorsHeader needs the first ${8 + n} bytes, got ${bytes.length}`);
  }
  const root = headerObject(bytes.subarray(8, 8 + n), path);
  let metadata: Record<string, string> = {};
  const entries: SafetensorsEntry[] = [];
  for (const [name, v] of Object.entries(root)) {
    if (name === METADATA_KEY) metadata = metadataMap(v, path);
    else entries.push(tensorEntry(name, v, path));
  }
  checkLayout(entries, 8 + n, fileSize, path);
  return { metadata, entries, dataStart: 8 + n };
}

/** The header length N from the first 8 bytes, checked against the limit and the file size. */
function headerLength(first8: Uint8Array, fileSize: number, path: string): number {
  if (fileSize < 8) {
    throw new SafetensorsError(
      path,
      "HeaderTooSmall",
      "header length",
      `the file has ${fileSize} bytes, fewer than the 8-byte length prefix`,
      { expected: "at least 8 bytes", found: `${fileSize} bytes` },
    );
  }
  if (first8.length < 8) throw new RangeError("the header length needs the file's first 8 bytes");
  const n = new DataView(first8.buffer, first8.byteOffset, 8).getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_BYTES)) {
    throw new SafetensorsError(
      path,
      "HeaderTooLarge",
      "header length",
      `${n} bytes is above the limit of ${MAX_HEADER_BYTES}`,
      { expected: `at most ${MAX_HEADER_BYTES} bytes`, found: `${n} bytes` },
    );
  }
  if (8n + n > BigInt(fileSize)) {
    throw new SafetensorsError(
      path,
      "InvalidHeaderLength",
      "header length",
      `8 + ${n} runs past the end of the ${fileSize}-byte file`,
      { expected: `at most ${fileSize - 8} bytes`, found: `${n} bytes` },
    );
  }
  return Number(n);
}

// Step 2: the header bytes as UTF-8, the text as one strict JSON value (duplicates, nesting bounded),
// the value an object.
function headerObject(bytes: Uint8Array, path: string): JsonObject {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    throw new SafetensorsError(path, "InvalidUtf8", "header", "the header is not valid UTF-8", {
      expected: "UTF-8 text",
    });
  }
  let root: JsonValue;
  try {
    root = parseStrictJson(text);
  } catch (e) {
    if (!(e instanceof StrictJsonError)) throw e;
    const why = `${e.code === "DuplicateKey" ? "duplicate key" : "not valid JSON"}: ${messageWithoutCode(e)}`;
    throw new SafetensorsError(path, e.code, e.at || "header", why, e);
  }
  if (!isJsonObject(root)) {
    throw new SafetensorsError(path, "HeaderNotObject", "header", "expected a JSON object", {
      expected: "a JSON object",
      found: describe(root),
    });
  }
  return root;
}

// Step 3: `__metadata__`, an object of strings (null reads as absent, as in the reference).
function metadataMap(v: JsonValue, path: string): Record<string, string> {
  const metadata: Record<string, string> = {};
  if (v === null) return metadata;
  if (!isJsonObject(v)) {
    throw new SafetensorsError(path, "InvalidMetadata", METADATA_KEY, "expected an object of strings", {
      expected: "an object of strings",
      found: describe(v),
    });
  }
  for (const [k, s] of Object.entries(v)) {
    if (typeof s !== "string") {
      const field = `${METADATA_KEY}.${k}`;
      throw new SafetensorsError(path, "InvalidMetadata", field, `expected a string, got ${describe(s)}`, {
        expected: "a string",
        found: describe(s),
      });
    }
    metadata[k] = s;
  }
  return metadata;
}

// Step 4: one tensor entry: exactly `dtype`, `shape` and `data_offsets`, a dtype ferry reads, and
// plain integer literals below 2^53 for every dim and offset.
function tensorEntry(name: string, v: JsonValue, path: string): SafetensorsEntry {
  const refuse = (code: SafetensorsErrorCode, field: string, why: string, expected: string, found: string) =>
    new SafetensorsError(path, code, field, why, { expected, found });
  if (!isJsonObject(v)) {
    throw refuse(
      "InvalidTensorEntry",
      name,
      `expected an object, got ${describe(v)}`,
      "an object",
      describe(v),
    );
  }
  for (const k of Object.keys(v)) {
    if (!ENTRY_FIELDS.includes(k)) {
      const expected = `only ${ENTRY_FIELDS.join(", ")}`;
      throw refuse("UnknownField", `${name}.${k}`, `expected ${expected}`, expected, k);
    }
  }
  for (const k of ENTRY_FIELDS) {
    if (!(k in v)) throw refuse("MissingField", `${name}.${k}`, "missing", `a ${k} field`, "nothing");
  }
  const { dtype, shape, data_offsets: offsets } = v;
  const entryDtype = tensorDtype(name, dtype, path);
  if (!Array.isArray(shape)) {
    const expected = "an array of integers";
    throw refuse(
      "InvalidTensorEntry",
      `${name}.shape`,
      `expected ${expected}, got ${describe(shape)}`,
      expected,
      describe(shape),
    );
  }
  if (!Array.isArray(offsets) || offsets.length !== 2) {
    const field = `${name}.data_offsets`;
    throw refuse(
      "InvalidTensorEntry",
      field,
      `expected [begin, end], got ${describe(offsets)}`,
      "[begin, end]",
      describe(offsets),
    );
  }
  return {
    name,
    dtype: entryDtype,
    dims: shape.map((d, k) => entryInteger(d, `${name}.shape[${k}]`, path)),
    begin: entryInteger(offsets[0], `${name}.data_offsets[0]`, path),
    end: entryInteger(offsets[1], `${name}.data_offsets[1]`, path),
  };
}

// A dim or an offset: a plain non-negative integer literal (not `4.0`, `1e2`, `-4`) below 2^53.
function entryInteger(x: JsonValue, field: string, path: string): number {
  if (!(x instanceof JsonNumber)) {
    throw new SafetensorsError(path, "InvalidTensorEntry", field, `expected an integer, got ${describe(x)}`, {
      expected: "an integer",
      found: describe(x),
    });
  }
  if (!PLAIN_INTEGER.test(x.text)) {
    const expected = "a non-negative integer literal";
    throw new SafetensorsError(path, "NotAnInteger", field, `expected ${expected}, got ${x.text}`, {
      expected,
      found: x.text,
    });
  }
  if (x.value > Number.MAX_SAFE_INTEGER) {
    throw new SafetensorsError(path, "IntegerTooLarge", field, `${x.text} is above 2^53 - 1`, {
      expected: "at most 2^53 - 1",
      found: x.text,
    });
  }
  return x.value;
}

// A tensor's dtype: a string naming one ferry reads (one the reference knows but ferry does not read
// is named as such).
function tensorDtype(name: string, dtype: JsonValue, path: string): Dtype {
  const field = `${name}.dtype`;
  if (typeof dtype !== "string") {
    throw new SafetensorsError(
      path,
      "InvalidTensorEntry",
      field,
      `expected a string, got ${describe(dtype)}`,
      {
        expected: "a string",
        found: describe(dtype),
      },
    );
  }
  if (!Object.hasOwn(DTYPE_BYTES, dtype)) {
    const why = OTHER_REFERENCE_DTYPES.has(dtype)
      ? "a safetensors dtype ferry does not read"
      : "not a safetensors dtype";
    const expected = `one of ${Object.keys(DTYPE_BYTES).join(", ")}`;
    throw new SafetensorsError(
      path,
      "UnsupportedDtype",
      field,
      `${JSON.stringify(dtype)} is ${why} (expected ${expected})`,
      {
        expected,
        found: JSON.stringify(dtype),
      },
    );
  }
  return dtype as Dtype;
}

// Step 5, the reference's order of checks: walk tensors by offset; each must start where the last
// ended, hold exactly its shape's bytes, and together they cover the data buffer exactly. Sorts
// `entries` into data order.
function checkLayout(entries: SafetensorsEntry[], dataStart: number, fileSize: number, path: string): void {
  entries.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let cursor = 0;
  for (const e of entries) {
    if (e.begin !== cursor || e.end < e.begin) {
      const why = e.end < e.begin
        ? "end is before begin"
        : e.begin > cursor
        ? `leaves a hole (expected begin ${cursor})`
        : `overlaps the tensor before it (expected begin ${cursor})`;
      throw new SafetensorsError(
        path,
        "InvalidOffset",
        `${e.name}.data_offsets`,
        `[${e.begin}, ${e.end}] ${why}`,
        {
          expected: e.end < e.begin ? "end at or after begin" : `begin ${cursor}`,
          found: `[${e.begin}, ${e.end}]`,
        },
      );
    }
    cursor = e.end;
    const bytes = e.dims.reduce((p, d) => p * BigInt(d), 1n) * BigInt(DTYPE_BYTES[e.dtype]);
    if (bytes > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new SafetensorsError(
        path,
        "ValidationOverflow",
        `${e.name}.shape`,
        `[${e.dims}] × ${DTYPE_BYTES[e.dtype]} bytes overflows (above 2^53 - 1)`,
        { expected: "at most 2^53 - 1 bytes", found: `${bytes} bytes` },
      );
    }
    if (BigInt(e.end - e.begin) !== bytes) {
      throw new SafetensorsError(
        path,
        "TensorInvalidInfo",
        e.name,
        `${e.dtype} [${e.dims}] needs ${bytes} bytes but data_offsets span ${e.end - e.begin}`,
        { expected: `${bytes} bytes`, found: `${e.end - e.begin} bytes` },
      );
    }
  }
  if (BigInt(dataStart) + BigInt(cursor) !== BigInt(fileSize)) {
    throw new SafetensorsError(
      path,
      "MetadataIncompleteBuffer",
      "data",
      `tensors cover ${cursor} bytes but the data buffer holds ${fileSize - dataStart}`,
      { expected: `${fileSize - dataStart} bytes`, found: `${cursor} bytes` },
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Reading

/** A tensor read from safetensors: ferry's f32 tensor plus the dtype it was stored in. */
export interface SafetensorsTensor extends Tensor {
  dtype: Dtype;
}

/** What a reader gives back: every tensor, checked and decoded, and the metadata. */
export interface SafetensorsFile {
  path: string;
  metadata: Record<string, string>;
  /** In data order for one file; shard by shard for an index. */
  tensors: SafetensorsTensor[];
  /** The verdict on ferry's `ferry.sha256` metadata (one file only); absent when the file has none. */
  digest?: { stored: string; computed: string; ok: boolean };
}

/**
 * Reads and checks a whole file: `openSafetensors`, then every tensor read into memory. The header
 * length is checked before the header is read, the header before any tensor is read, and the digest
 * (when present) before any tensor is decoded. `data` is f32: exact for F32, F16, BF16, I16, I8, U8 and
 * BOOL (0 or 1); F64, I64 and I32 values are rounded to the nearest f32.
 *
 * @example
 * ```ts
 * import { readSafetensors } from "./safetensors.ts";
 * const { tensors } = await readSafetensors("model.safetensors");
 * ```
 */
export async function readSafetensors(path: string): Promise<SafetensorsFile> {
  const { entries, source, close, ...rest } = await openSafetensors(path);
  return { ...rest, tensors: await readAll(entries.map(source), close) };
}

/**
 * A file opened for streaming: its checked header, and each tensor as a `TensorSource` that reads and
 * widens one chunk at a time, so no more than the chunk asked for is ever in memory. A file carrying
 * ferry's `ferry.sha256` is hashed in one chunked pass before `openSafetensors` returns, so a source
 * never hands out a byte the digest has not vouched for. `close` releases the file.
 */
export interface SafetensorsOpened {
  path: string;
  metadata: Record<string, string>;
  /** In data order. */
  entries: SafetensorsEntry[];
  /** The verdict on `ferry.sha256` (always ok: a mismatch is refused); absent when the file has none. */
  digest?: { stored: string; computed: string; ok: boolean };
  /** The tensor of one entry as a source of f32 values (decoded as `readSafetensors` decodes them). */
  source(entry: SafetensorsEntry): TensorSource & { dtype: Dtype };
  close(): Promise<void>;
}

/**
 * Opens a file for streaming reads: the header checked (the length prefix first), the digest (when
 * present) verified in 4 MiB chunks, nothing else read until a source is asked for values.
 *
 * @example
 * ```ts
 * import { openSafetensors } from "./safetensors.ts";
 * const st = await openSafetensors("model.safetensors");
 * const embed = st.source(st.entries[0]);
 * const first = await embed.read(0, 1024, new Float32Array(1024));
 * await st.close();
 * ```
 */
export async function openSafetensors(path: string): Promise<SafetensorsOpened> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const first8 = await readAt(fh, new Uint8Array(Math.min(8, size)), 0);
    const n = headerLength(first8, size, path);
    const head = new Uint8Array(8 + n);
    head.set(first8);
    await readAt(fh, head.subarray(8), 8);
    const header = parseSafetensorsHeader(head, size, path);
    const digest = await verifyDigestStreaming(fh, head, header, size, path);
    // F32 is read straight into the caller's scratch; other dtypes through a read buffer for the chunk
    // (not kept per tensor: a source lives as long as the export, and so would its buffer). Handing
    // back `scratch` itself when it is the whole answer lets `materialize` skip its copy.
    const source = (e: SafetensorsEntry) => ({
      name: e.name,
      dims: [...e.dims],
      dtype: e.dtype,
      async read(start: number, count: number, scratch: Float32Array) {
        const width = DTYPE_BYTES[e.dtype];
        const at = header.dataStart + e.begin + start * width;
        const out = count === scratch.length ? scratch : scratch.subarray(0, count);
        if (e.dtype === "F32") await readAt(fh, new Uint8Array(out.buffer, out.byteOffset, count * 4), at);
        else decode(await readAt(fh, new Uint8Array(count * width), at), e, start, out, path);
        return out;
      },
    });
    return {
      path,
      metadata: header.metadata,
      entries: header.entries,
      ...(digest ? { digest } : {}),
      source,
      close: () => fh.close(),
    };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

// The in-memory readers are the streaming ones plus this: every source read whole, then the files
// closed. Beyond what it hands out, a read holds one tensor's stored bytes at most (none for F32).
async function readAll(
  sources: (TensorSource & { dtype: Dtype })[],
  close: () => Promise<void>,
): Promise<SafetensorsTensor[]> {
  try {
    const tensors: SafetensorsTensor[] = [];
    for (const s of sources) tensors.push({ ...await materialize(s), dtype: s.dtype });
    return tensors;
  } finally {
    await close();
  }
}

// The `ferry.sha256` check, over the file in chunks (after the header, before any tensor is read).
async function verifyDigestStreaming(
  fh: Handle,
  head: Uint8Array,
  header: SafetensorsHeader,
  size: number,
  path: string,
): Promise<{ stored: string; computed: string; ok: boolean } | undefined> {
  const stored = header.metadata[DIGEST_KEY];
  if (stored === undefined) return undefined;
  const found = digestOffset(head, SAFETENSORS_DIGEST_NEEDLE);
  if (!isDigest(stored) || !found || !("at" in found) || found.value !== stored) {
    throw new SafetensorsError(
      path,
      "InvalidMetadata",
      `${METADATA_KEY}.${DIGEST_KEY}`,
      "expected one string of 64 lowercase hex digits, as ferry writes it",
    );
  }
  const digest = digestStream(found.at);
  digest.update(head);
  const chunk = new Uint8Array(Math.min(4 << 20, Math.max(1, size - header.dataStart)));
  for (let at = header.dataStart; at < size; at += chunk.length) {
    const part = chunk.subarray(0, Math.min(chunk.length, size - at));
    digest.update(await readAt(fh, part, at));
  }
  const computed = digest.hex();
  if (computed !== stored) {
    throw new SafetensorsError(
      path,
      "DigestMismatch",
      `${METADATA_KEY}.${DIGEST_KEY}`,
      `stored ${stored} but the file's SHA-256 is ${computed}: the file was changed or is corrupt`,
    );
  }
  return { stored, computed, ok: true };
}

type Handle = Awaited<ReturnType<typeof open>>;

async function readAt(fh: Handle, into: Uint8Array, position: number): Promise<Uint8Array> {
  for (let off = 0; off < into.length;) {
    const { bytesRead } = await fh.read(into, off, into.length - off, position + off);
    if (bytesRead === 0) throw new Error(`file ended early at byte ${position + off}`);
    off += bytesRead;
  }
  return into;
}

/**
 * Stored bytes (little-endian, a fresh buffer so aligned) of elements `first`.. to f32 values in `out`.
 * A typed array's `set` converts element by element (F64 rounds to the nearest f32).
 */
function decode(raw: Uint8Array, e: SafetensorsEntry, first: number, out: Float32Array, path: string): void {
  const buf = raw.buffer as ArrayBuffer, count = out.length;
  switch (e.dtype) {
    case "F32":
      return out.set(new Float32Array(buf, 0, count));
    case "F16":
      return void f16ToF32(new Uint16Array(buf, 0, count), out);
    case "BF16":
      return void bf16ToF32(new Uint16Array(buf, 0, count), out);
    case "F64":
      return out.set(new Float64Array(buf, 0, count));
    case "I64": {
      const v = new BigInt64Array(buf, 0, count);
      for (let i = 0; i < count; i++) out[i] = Number(v[i]);
      return;
    }
    case "I32":
      return out.set(new Int32Array(buf, 0, count));
    case "I16":
      return out.set(new Int16Array(buf, 0, count));
    case "I8":
      return out.set(new Int8Array(buf, 0, count));
    case "U8":
      return out.set(raw);
    case "BOOL": {
      const bad = raw.findIndex((b) => b > 1);
      if (bad >= 0) {
        throw new SafetensorsError(
          path,
          "InvalidBool",
          e.name,
          `element ${first + bad} is byte ${raw[bad]}, expected 0 or 1`,
        );
      }
      return out.set(raw);
    }
  }
}

/**
 * Reads a sharded checkpoint through its index (`model.safetensors.index.json`):
 * `openSafetensorsIndex`, then every tensor read into memory. The index JSON is read strictly, every
 * shard's header is checked, and the tensors each shard holds must be exactly the ones the index
 * assigns to it, before any tensor is read. Shard names must be plain file names in the index's
 * directory.
 *
 * @example
 * ```ts
 * import { readSafetensorsIndex } from "./safetensors.ts";
 * const { tensors } = await readSafetensorsIndex("qwen3/model.safetensors.index.json");
 * ```
 */
export async function readSafetensorsIndex(indexPath: string): Promise<SafetensorsFile> {
  const { sources, close, ...rest } = await openSafetensorsIndex(indexPath);
  return { ...rest, tensors: await readAll(sources, close) };
}

/**
 * `readSafetensorsIndex` for streaming: every shard opened and its header checked against the index
 * (each shard holds exactly the tensors the index assigns it) before any tensor data is read. A shard
 * the index names that is missing is refused naming the index and the tensor's `weight_map` entry.
 *
 * @example
 * ```ts
 * import { openSafetensorsIndex } from "./safetensors.ts";
 * const shards = await openSafetensorsIndex("qwen3/model.safetensors.index.json");
 * for (const s of shards.sources) console.log(s.name, s.dims);
 * await shards.close();
 * ```
 */
export async function openSafetensorsIndex(indexPath: string): Promise<{
  path: string;
  /** Always empty: the shards' own metadata is not the model's. */
  metadata: Record<string, string>;
  /** Never set: a digest belongs to one file. */
  digest?: SafetensorsOpened["digest"];
  sources: (TensorSource & { dtype: Dtype })[];
  close(): Promise<void>;
}> {
  const byShard = indexShards(await readFile(indexPath), indexPath);
  // The shard the index names for each tensor (`byShard`'s sets empty as the shards are checked).
  const claimed = new Map([...byShard].flatMap(([shard, names]) => [...names].map((n) => [n, shard])));
  const opened: SafetensorsOpened[] = [];
  const close = async () => {
    for (const f of opened) await f.close();
  };
  try {
    const sources: (TensorSource & { dtype: Dtype })[] = [];
    for (const [shard, names] of byShard) {
      const file = await openShard(join(dirname(indexPath), shard), indexPath, names);
      opened.push(file);
      for (const e of file.entries) {
        if (!names.delete(e.name)) {
          const claim = claimed.get(e.name);
          const says = claim === undefined ? "does not list this tensor" : `assigns this tensor to ${claim}`;
          throw new SafetensorsError(
            file.path,
            "ShardMismatch",
            e.name,
            `the index ${says}, but it is in ${shard}`,
            { expected: claim === undefined ? "not in any shard" : `in ${claim}`, found: `in ${shard}` },
          );
        }
        sources.push(file.source(e));
      }
      const missing = [...names][0];
      if (missing !== undefined) {
        throw new SafetensorsError(
          indexPath,
          "ShardMismatch",
          `weight_map.${missing}`,
          `the index assigns this tensor to ${shard}, but ${shard} does not hold it`,
          { expected: `in ${shard}`, found: `not in ${shard}` },
        );
      }
    }
    return { path: indexPath, metadata: {}, sources, close };
  } catch (e) {
    await close();
    throw e;
  }
}

// One shard of an index, a missing one refused as the index's fault (it names a file that is not there).
async function openShard(path: string, indexPath: string, names: Set<string>): Promise<SafetensorsOpened> {
  try {
    return await openSafetensors(path);
  } catch (e) {
    throw (e as { code?: string }).code === "ENOENT" ? missingShard(basename(path), indexPath, names) : e;
  }
}

function missingShard(shard: string, indexPath: string, names: Set<string>): SafetensorsError {
  return new SafetensorsError(
    indexPath,
    "InvalidIndex",
    `weight_map.${[...names][0]}`,
    `names the shard ${shard}, which is not in the index's folder`,
    { expected: "a shard file beside the index", found: `no file ${join(dirname(indexPath), shard)}` },
  );
}

// The index's JSON: an object of `metadata` (optional) and `weight_map`, tensor name to a plain shard
// file name beside the index; the tensor names each shard must hold.
function indexShards(bytes: Uint8Array, indexPath: string): Map<string, Set<string>> {
  const err = (field: string, detail: string) =>
    new SafetensorsError(indexPath, "InvalidIndex", field, detail);
  let root: JsonValue;
  try {
    // A byte-order mark is kept, so the strict parse refuses it, as it does in a shard's header.
    root = parseStrictJson(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes));
  } catch (e) {
    if (e instanceof StrictJsonError) {
      throw new SafetensorsError(indexPath, e.code, e.at || "index", messageWithoutCode(e), e);
    }
    if (e instanceof TypeError) {
      throw new SafetensorsError(indexPath, "InvalidUtf8", "index", "not valid UTF-8");
    }
    throw e;
  }
  if (!isJsonObject(root)) throw err("index", "expected a JSON object");
  for (const k of Object.keys(root)) {
    if (k !== "metadata" && k !== "weight_map") {
      throw err(k, "unknown field (expected metadata, weight_map)");
    }
  }
  if (root.metadata !== undefined && root.metadata !== null && !isJsonObject(root.metadata)) {
    throw err("metadata", "expected an object");
  }
  const map = root.weight_map;
  if (!isJsonObject(map)) {
    throw err("weight_map", `expected an object of tensor name to shard file, got ${describe(map)}`);
  }
  const byShard = new Map<string, Set<string>>();
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== "string") {
      throw err(`weight_map.${name}`, `expected a shard file name, got ${describe(shard)}`);
    }
    if (!/^[^/\\]+$/.test(shard) || shard === "." || shard === "..") {
      throw err(`weight_map.${name}`, `${JSON.stringify(shard)} is not a plain file name beside the index`);
    }
    if (!byShard.has(shard)) byShard.set(shard, new Set());
    byShard.get(shard)!.add(name);
  }
  if (byShard.size === 0) throw err("weight_map", "lists no tensors");
  return byShard;
}

// ---------------------------------------------------------------------------------------------
// Writing

/** Options for `writeSafetensors`. */
export interface WriteSafetensorsOptions {
  /** The stored element type; default F32 (lossless). */
  dtype?: WriteDtype;
  /** Extra metadata; `format: "pt"` is always written, because transformers refuses files without it. */
  metadata?: Record<string, string>;
  /** Store `ferry.sha256` in the metadata, the digest of the whole file (default true). */
  digest?: boolean;
}

// Values per write: 1 Mi f32 values (4 MiB), a chunk small beside any budget and large enough to be fast.
const CHUNK_VALUES = 1 << 20;

// `"ferry.sha256":"` as the compact JSON header spells it, up to the value's first digit.
/** Where the digest's value starts: the key as this format encodes it, up to the value. */
export const SAFETENSORS_DIGEST_NEEDLE = new TextEncoder().encode(`${JSON.stringify(DIGEST_KEY)}:"`);

/**
 * Writes tensors as one safetensors file, atomically. The layout follows the reference writer:
 * compact JSON with `__metadata__` first, tensors ordered by name (UTF-8 byte order) and packed with
 * no gaps, the header padded with spaces to a multiple of 8 so the data is 8-byte aligned.
 * Values are narrowed to F16/BF16 with round-to-nearest-even.
 *
 * @example
 * ```ts
 * import { writeSafetensors } from "./safetensors.ts";
 * import { PRESETS } from "../../model/config.ts";
 * import { initParams } from "../../model/init.ts";
 * await writeSafetensors("model.safetensors", initParams(PRESETS.tiny, 1), { dtype: "F16" });
 * ```
 */
export async function writeSafetensors(
  path: string,
  tensors: readonly (Tensor | TensorSource)[],
  opts: WriteSafetensorsOptions = {},
): Promise<void> {
  const withDigest = opts.digest !== false;
  const metadata = withDigest ? { ...opts.metadata, [DIGEST_KEY]: DIGEST_PLACEHOLDER } : opts.metadata;
  const { header, order, dtype } = safetensorsHeaderBytes(tensors, { ...opts, metadata }, path);
  const at = withDigest ? (digestOffset(header, SAFETENSORS_DIGEST_NEEDLE) as { at: number }).at : -1;
  const digest = digestStream(at);
  const w = await openAtomic(path);
  try {
    await w.write(header);
    digest.update(header);
    // A chunk at a time, so neither the model nor a narrowed copy of one tensor sits in memory.
    const scratch = new Float32Array(CHUNK_VALUES);
    for (const t of order) {
      const src = "data" in t ? tensorSource(t) : t;
      const count = numel(t.dims);
      for (let at = 0; at < count; at += CHUNK_VALUES) {
        const n = Math.min(CHUNK_VALUES, count - at);
        const bytes = encode(await src.read(at, n, scratch), dtype);
        if (withDigest) digest.update(bytes);
        await w.write(bytes);
      }
    }
    if (withDigest) await w.patch(at, new TextEncoder().encode(digest.hex()));
  } catch (e) {
    await w.abort();
    throw e;
  }
  await w.commit();
}

/**
 * The 8-byte length prefix and padded header `writeSafetensors` writes for these tensors, with the
 * tensors in file order. Checks names (no duplicates, not `__metadata__`) and dims against data.
 */
export function safetensorsHeaderBytes<T extends Tensor | TensorSource>(
  tensors: readonly T[],
  opts: WriteSafetensorsOptions = {},
  path = "safetensors",
): { header: Uint8Array; order: T[]; dtype: WriteDtype } {
  const dtype = opts.dtype ?? "F32";
  if (!(WRITE_DTYPES as readonly string[]).includes(dtype)) {
    throw new SafetensorsError(
      path,
      "UnsupportedDtype",
      "dtype",
      `ferry writes ${WRITE_DTYPES.join(", ")}, not ${dtype}`,
    );
  }
  const metadata: Record<string, string> = { ...opts.metadata, format: "pt" };
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== "string") {
      throw new SafetensorsError(
        path,
        "InvalidMetadata",
        `${METADATA_KEY}.${k}`,
        "metadata values must be strings",
      );
    }
  }
  const seen = new Set<string>();
  for (const t of tensors) {
    if (t.name === METADATA_KEY) {
      throw new SafetensorsError(path, "ReservedName", t.name, "a tensor cannot be named __metadata__");
    }
    if (!t.name.isWellFormed()) {
      throw new SafetensorsError(
        path,
        "InvalidTensor",
        JSON.stringify(t.name),
        "the name has a lone surrogate",
      );
    }
    if (seen.has(t.name)) {
      throw new SafetensorsError(path, "DuplicateKey", t.name, "two tensors have this name");
    }
    seen.add(t.name);
    const length = "data" in t ? t.data.length : numel(t.dims);
    if (!t.dims.every((d) => Number.isSafeInteger(d) && d >= 0) || numel(t.dims) !== length) {
      throw new SafetensorsError(
        path,
        "InvalidTensor",
        t.name,
        `dims [${t.dims}] do not describe ${length} values`,
      );
    }
  }
  const utf8 = new TextEncoder();
  const order = [...tensors].sort((a, b) => compareBytes(utf8.encode(a.name), utf8.encode(b.name)));
  const size = DTYPE_BYTES[dtype];
  const meta = Object.keys(metadata).sort().map((k) => `${JSON.stringify(k)}:${JSON.stringify(metadata[k])}`);
  const parts = [`${JSON.stringify(METADATA_KEY)}:{${meta.join(",")}}`];
  let offset = 0;
  for (const t of order) {
    const end = offset + numel(t.dims) * size;
    parts.push(
      `${JSON.stringify(t.name)}:{"dtype":"${dtype}","shape":[${t.dims}],"data_offsets":[${offset},${end}]}`,
    );
    offset = end;
  }
  const json = utf8.encode(`{${parts.join(",")}}`);
  const padded = Math.ceil(json.length / 8) * 8;
  if (padded > MAX_HEADER_BYTES) {
    throw new SafetensorsError(
      path,
      "HeaderTooLarge",
      "header length",
      `${padded} bytes is above the limit of ${MAX_HEADER_BYTES}`,
    );
  }
  const header = new Uint8Array(8 + padded).fill(0x20, 8 + json.length);
  new DataView(header.buffer).setBigUint64(0, BigInt(padded), true);
  header.set(json, 8);
  return { header, order, dtype };
}

function encode(data: Float32Array, dtype: WriteDtype): Uint8Array {
  if (dtype === "F32") return f32Bytes(data);
  const bits = dtype === "F16" ? f32ToF16(data) : f32ToBf16(data);
  return new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength);
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < a.length && i < b.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

function describe(v: JsonValue | undefined): string {
  if (v === undefined) return "nothing";
  if (v instanceof JsonNumber) return v.text;
  if (Array.isArray(v)) return `[${v.map(describe).join(", ")}]`;
  if (isJsonObject(v)) return "an object";
  return JSON.stringify(v);
}

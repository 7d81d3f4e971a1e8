/**
 * dmexp: the self-describing, checksummed export container (spec: formats/dmexp.md).
 *
 * A 24-byte prefix (magic `DMEXPRT` + version byte, header length, payload length, CRC-32 of the
 * payload), a UTF-8 TOML header that carries the model config and every tensor's name and dims, then
 * the tensors in header order as f32, f16 or bf16, contiguous. The writer streams a chunk at a time;
 * the readers check everything before they hand anything out.
 *
 * @example
 * ```ts
 * await writeDmexp("out/m.dmexp", tensors, config, { dtype: "bf16", source: "a.ckpt@step10", step: 10 });
 * const info = await inspectDmexp("out/m.dmexp");    // header + checksum verdict, no model built
 * const { config, tensors } = await readDmexp("out/m.dmexp"); // f32, widened from the stored bits
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { type FileHandle, open } from "node:fs/promises";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { chunksAt, openAtomic, readExact as readInto } from "./io.ts";
import { bf16ToF32, f16BitsToF32Bits, f16ToF32, f32ToBf16, f32ToF16 } from "./float16.ts";
import { isCheckpoint } from "./checkpoint.ts";
import { checkTensors, ConfigError, configToToml, type ModelConfig, parseConfig } from "../model/config.ts";
import { numel, type Tensor, type TensorSource, tensorSource } from "../model/tensor.ts";
import { FormatError, type RefusalDetail } from "../model/error.ts";
import type { FormatDescriptor } from "./format.ts";

export type { TensorSource };
export { tensorSource };

/** The 7 magic letters; the 8th byte of the file is the format version. */
export const DMEXP_MAGIC = "DMEXPRT";
/** The only format version there is. */
export const DMEXP_VERSION = 1;
/** Bytes before the header: magic + version, header length, payload length, CRC-32. */
export const PREFIX_BYTES = 24;
/** The weight dtypes a file can hold (one per file). */
export const DTYPES = ["f32", "f16", "bf16"] as const;
/** One of `DTYPES`. */
export type DmexpDtype = typeof DTYPES[number];
/** Bytes per stored value. */
export const DTYPE_BYTES: Record<DmexpDtype, number> = { f32: 4, f16: 2, bf16: 2 };
/** Keys ferry adds to the header beyond the reference schema (readers elsewhere ignore them). */
export const FERRY_KEYS = { arch: "qwen3", tokenizer: "bytes" };

const MAGIC_BYTES = new TextEncoder().encode(DMEXP_MAGIC);
const DEFAULT_CHUNK_BYTES = 4 << 20;

/** Every refusal of the format: `path` names the file, `field` what is wrong in it. */
export class DmexpError extends FormatError {
  constructor(path: string, field: string, message: string, detail?: RefusalDetail) {
    super(path, field, `${path}: ${field}: ${message}`, detail);
    this.name = "DmexpError";
  }
}

/** One `[[tensors]]` entry: the payload holds the tensors in this order. */
export interface DmexpTensorEntry {
  name: string;
  dims: number[];
  /** Values that were not finite after narrowing; 0 in every file that exists. */
  overflowed: number;
}

/** The header, with the reference implementation's keys; `extra` holds any other key, as parsed. */
export interface DmexpHeader {
  format: number;
  dtype: DmexpDtype;
  source: string;
  step: number;
  num_params: number;
  num_tensors: number;
  /** Non-zero weights that narrowing made zero. */
  flushed: number;
  /** Largest |w| after narrowing. */
  max_abs: number;
  /** Smallest non-zero |w| after narrowing; 0 for an all-zero model. */
  min_nonzero_abs: number;
  /** The full model config, as TOML text. */
  config: string;
  tensors: DmexpTensorEntry[];
  extra: Record<string, unknown>;
}

/** Keys in the order the reference writes them (`tensors` goes last, as an array of tables). */
export const HEADER_KEYS = [
  "format",
  "dtype",
  "source",
  "step",
  "num_params",
  "num_tensors",
  "flushed",
  "max_abs",
  "min_nonzero_abs",
  "config",
  "tensors",
] as const;

/** What the writer needs besides the tensors. */
export interface DmexpWriteOptions {
  /** Default `bf16`. */
  dtype?: DmexpDtype;
  /** What the file came from, by convention `<checkpoint path>@step<N>`. */
  source: string;
  step: number;
  /** Extra header keys; default `FERRY_KEYS`. */
  extra?: Record<string, string | boolean>;
  /** Called as values are processed: `done` of `total`, over both passes. */
  onProgress?: (done: number, total: number) => void;
  /** Chunk size in bytes of source f32 (tests make it tiny to cross every boundary). */
  chunkBytes?: number;
  /** Write the `header_crc32` key (default true); false writes the reference's keys only. */
  headerChecksum?: boolean;
}

/** What `writeDmexp` wrote. */
export interface DmexpWriteResult {
  path: string;
  bytes: number;
  headerLength: number;
  crc32: number;
  header: DmexpHeader;
}

/**
 * Writes tensors as a dmexp file: streaming, a chunk at a time, to a temporary name renamed into place
 * when complete. The tensors must be exactly those `config` implies (any order; the file keeps the
 * given order). Narrowing that produces a non-finite value refuses the whole file, and an f16 export
 * of a weight above 65504 names bf16 as the format that works.
 *
 * Two passes over the source: the first narrows to learn the header's statistics and the payload's
 * CRC (both come before the payload in the file), the second narrows again and writes, and must
 * reproduce that CRC, so a source that changed in between is refused rather than written.
 *
 * @example
 * ```ts
 * const tensors = initParams(PRESETS.tiny, 1);
 * await writeDmexp("tiny.dmexp", tensors, PRESETS.tiny, { dtype: "f16", source: "init@step0", step: 0 });
 * ```
 */
export async function writeDmexp(
  path: string,
  tensors: ReadonlyArray<Tensor | TensorSource>,
  config: ModelConfig,
  opts: DmexpWriteOptions,
): Promise<DmexpWriteResult> {
  const dtype = opts.dtype ?? "bf16";
  if (!DTYPES.includes(dtype)) {
    throw new DmexpError(path, "dtype", `expected one of ${DTYPES.join(", ")}, got ${dtype}`);
  }
  if (!Number.isSafeInteger(opts.step) || opts.step < 0) {
    throw new DmexpError(path, "step", `expected a non-negative integer, got ${opts.step}`);
  }
  const sources = tensors.map((t) => ("data" in t ? tensorSource(t) : t));
  checkTensorsAgainstConfig(path, sources, config);
  const chunkElems = Math.max(1, Math.floor((opts.chunkBytes ?? DEFAULT_CHUNK_BYTES) / 4));
  const total = sources.reduce((n, s) => n + numel(s.dims), 0);
  let done = 0;
  const tick = (n: number) => opts.onProgress?.(done += n, 2 * total);

  const narrowOut = new Uint16Array(dtype === "f32" ? 0 : chunkElems);
  const narrow = (data: Float32Array): Uint8Array => {
    if (dtype === "f32") return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const out = narrowOut.subarray(0, data.length);
    (dtype === "f16" ? f32ToF16 : f32ToBf16)(data, out);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  };

  // Pass 1: the statistics and the CRC.
  const stats = { max: 0, min: Infinity, flushed: 0 };
  let crc = 0;
  for await (const { index, start, data } of sourceChunks(sources, chunkElems)) {
    const bytes = narrow(data);
    const bad = scanNarrowed(dtype, data, bytes, stats);
    if (bad >= 0) throw narrowingError(path, dtype, sources[index].name, start + bad, data[bad]);
    crc = crc32(bytes, crc);
    tick(data.length);
  }
  const header: DmexpHeader = {
    format: DMEXP_VERSION,
    dtype,
    source: opts.source,
    step: opts.step,
    num_params: total,
    num_tensors: sources.length,
    flushed: stats.flushed,
    max_abs: widenAbs(dtype, stats.max),
    min_nonzero_abs: stats.min === Infinity ? 0 : widenAbs(dtype, stats.min),
    config: configToToml(config),
    tensors: sources.map((s) => ({ name: s.name, dims: [...s.dims], overflowed: 0 })),
    extra: { ...(opts.extra ?? FERRY_KEYS) },
  };
  if (opts.headerChecksum !== false) header.extra[HEADER_CRC_KEY] = "00000000";
  let headerBytes: Uint8Array = new TextEncoder().encode(encodeHeader(header));
  const payloadLength = total * DTYPE_BYTES[dtype];
  const prefix = encodePrefix(headerBytes.length, payloadLength, crc >>> 0);
  if (opts.headerChecksum !== false) {
    headerBytes = sealHeader(prefix, headerBytes);
    header.extra[HEADER_CRC_KEY] = headerChecksum(prefix, headerBytes)!.stored;
  }

  // Pass 2: narrow again and write.
  const w = await openAtomic(path);
  try {
    await w.write(prefix);
    await w.write(headerBytes);
    let crc2 = 0;
    for await (const { data } of sourceChunks(sources, chunkElems)) {
      const bytes = narrow(data);
      crc2 = crc32(bytes, crc2);
      await w.write(bytes);
      tick(data.length);
    }
    if (crc2 >>> 0 !== crc >>> 0) {
      throw new DmexpError(
        path,
        "crc32",
        "the source changed between the two passes of the writer; nothing was written",
      );
    }
    await w.commit();
  } catch (e) {
    await w.abort();
    throw e;
  }
  return {
    path,
    bytes: PREFIX_BYTES + headerBytes.length + payloadLength,
    headerLength: headerBytes.length,
    crc32: crc >>> 0,
    header,
  };
}

/**
 * The header as TOML text: the reference's keys in its order, then `extra`, then `[[tensors]]`.
 * Integers are written as TOML integers and the two magnitudes always as TOML floats.
 *
 * @example
 * ```ts
 * encodeHeader(header); // 'format = 1\ndtype = "bf16"\n…\n[[tensors]]\nname = "model.embed_tokens.weight"\n…'
 * ```
 */
export function encodeHeader(h: DmexpHeader): string {
  // smol-toml writes a bigint as an integer and, with numbersAsFloat, every number as a float.
  const doc: Record<string, unknown> = {
    format: BigInt(h.format),
    dtype: h.dtype,
    source: h.source,
    step: BigInt(h.step),
    num_params: BigInt(h.num_params),
    num_tensors: BigInt(h.num_tensors),
    flushed: BigInt(h.flushed),
    max_abs: h.max_abs,
    min_nonzero_abs: h.min_nonzero_abs,
    config: h.config,
  };
  for (const [k, v] of Object.entries(h.extra)) {
    if (!(k in doc) && k !== "tensors") doc[k] = typeof v === "number" && Number.isInteger(v) ? BigInt(v) : v;
  }
  doc.tensors = h.tensors.map((t) => ({
    name: t.name,
    dims: t.dims.map(BigInt),
    overflowed: BigInt(t.overflowed),
  }));
  return stringifyToml(doc, { numbersAsFloat: true });
}

/** The 24-byte prefix for a header and payload of these lengths and this payload CRC. */
export function encodePrefix(headerLength: number, payloadLength: number, crc: number): Uint8Array {
  const prefix = new Uint8Array(PREFIX_BYTES);
  const dv = new DataView(prefix.buffer);
  prefix.set(MAGIC_BYTES);
  prefix[7] = DMEXP_VERSION;
  dv.setUint32(8, headerLength, true);
  dv.setBigUint64(12, BigInt(payloadLength), true);
  dv.setUint32(20, crc >>> 0, true);
  return prefix;
}

/** ferry's own header key: the CRC-32 of the prefix and the header, so an edited header is refused. */
export const HEADER_CRC_KEY = "header_crc32";
const HEADER_CRC_LINE = /^header_crc32 = "([0-9a-f]{8})"$/gm;

/**
 * The header checksum of a file, when its header carries one: `stored` is the `header_crc32` value,
 * `computed` the CRC-32 (as 8 lowercase hex digits) of the 24-byte prefix followed by the header bytes
 * with that value written as `00000000`. The key must be written as the line
 * `header_crc32 = "xxxxxxxx"` exactly once; `malformed` says when it is present in any other way.
 * Undefined when the header has no such key (a file written by the reference implementation).
 *
 * @example
 * ```ts
 * const c = headerChecksum(prefix, headerBytes); // { stored: "1a2b3c4d", computed: "1a2b3c4d" }
 * ```
 */
export function headerChecksum(
  prefix: Uint8Array,
  header: Uint8Array,
): { stored: string; computed: string; malformed?: string } | undefined {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(header);
  } catch {
    return undefined; // not UTF-8: the header's own check reports it
  }
  const lines = [...text.matchAll(HEADER_CRC_LINE)];
  if (lines.length === 0) {
    if (!/^\s*"?header_crc32"?\s*=/m.test(text)) return undefined;
    return { stored: "", computed: "", malformed: 'expected one line header_crc32 = "<8 hex digits>"' };
  }
  if (lines.length > 1) {
    return { stored: lines[0][1], computed: "", malformed: `appears ${lines.length} times` };
  }
  // The value's bytes: ASCII, so its string index is its byte index once the text before it is encoded.
  const at = new TextEncoder().encode(text.slice(0, lines[0].index! + lines[0][0].length - 9)).length;
  const zeroed = header.slice();
  zeroed.fill(0x30, at, at + 8); // "00000000"
  const computed = (crc32(zeroed, crc32(prefix)) >>> 0).toString(16).padStart(8, "0");
  return { stored: lines[0][1], computed };
}

/**
 * The header with its `header_crc32` value filled in (see `headerChecksum`); a header without the key
 * is returned unchanged. Writers call it last; a test that forges a header calls it too.
 */
export function sealHeader(prefix: Uint8Array, header: Uint8Array): Uint8Array {
  const c = headerChecksum(prefix, header);
  if (!c || c.malformed) return header;
  const text = new TextDecoder().decode(header);
  const m = [...text.matchAll(HEADER_CRC_LINE)][0];
  const at = new TextEncoder().encode(text.slice(0, m.index! + m[0].length - 9)).length;
  const out = header.slice();
  out.set(new TextEncoder().encode(c.computed), at);
  return out;
}

// Refuses a header whose checksum is present and wrong (or present in another form than the one
// ferry writes); returns whether there was one.
function checkHeaderChecksum(p: Prefix, header: Uint8Array, path: string): boolean {
  const c = headerChecksum(encodePrefix(p.headerLength, p.payloadLength, p.crc), header);
  if (!c) return false;
  if (c.malformed) throw new DmexpError(path, HEADER_CRC_KEY, c.malformed);
  if (c.stored !== c.computed) {
    throw new DmexpError(
      path,
      HEADER_CRC_KEY,
      `stored ${c.stored} but the prefix and header give ${c.computed}: the header was changed or is corrupt`,
      { expected: c.stored, found: c.computed },
    );
  }
  return true;
}

/**
 * Parses and checks header bytes: UTF-8, TOML, `format` equal to the version byte, every reference
 * key present with its type, the tensor list consistent with the counts and with the payload length.
 * Unknown keys are kept in `extra`. Does not look at the config (see `checkShapes`).
 */
export function parseHeader(
  bytes: Uint8Array,
  path: string,
  version = DMEXP_VERSION,
  payloadLength?: number,
): DmexpHeader {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new DmexpError(path, "header", "not valid UTF-8");
  }
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(text, { integersAsBigInt: true }) as Record<string, unknown>;
  } catch (e) {
    throw new DmexpError(path, "header", `not valid TOML: ${(e as Error).message.split("\n")[0]}`);
  }
  const format = intField(raw, "format", path);
  if (format !== version) {
    throw new DmexpError(
      path,
      "format",
      `the header says format ${format} but the magic's version byte is ${version}`,
    );
  }
  const dtype = stringField(raw, "dtype", path);
  if (!(DTYPES as readonly string[]).includes(dtype)) {
    throw new DmexpError(
      path,
      "dtype",
      `expected one of ${DTYPES.map((d) => `"${d}"`).join(", ")}, got ${JSON.stringify(dtype)}`,
    );
  }
  const h: DmexpHeader = {
    format,
    dtype: dtype as DmexpDtype,
    source: stringField(raw, "source", path),
    step: intField(raw, "step", path),
    num_params: intField(raw, "num_params", path),
    num_tensors: intField(raw, "num_tensors", path),
    flushed: intField(raw, "flushed", path),
    max_abs: floatField(raw, "max_abs", path),
    min_nonzero_abs: floatField(raw, "min_nonzero_abs", path),
    config: stringField(raw, "config", path),
    tensors: [],
    extra: {},
  };
  const list = raw.tensors;
  if (list === undefined) throw new DmexpError(path, "tensors", "missing (every dmexp header has it)");
  if (!Array.isArray(list)) {
    throw new DmexpError(path, "tensors", `expected an array of tables, got ${describe(list)}`);
  }
  const seen = new Set<string>();
  let params = 0;
  list.forEach((entry, i) => {
    const where = `tensors[${i}]`;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
      throw new DmexpError(path, where, `expected a table, got ${describe(entry)}`);
    }
    const e = entry as Record<string, unknown>;
    const name = stringField(e, "name", path, `${where}.name`);
    if (name === "") throw new DmexpError(path, `${where}.name`, "empty");
    if (seen.has(name)) throw new DmexpError(path, `${where}.name`, `${name} appears twice`);
    seen.add(name);
    const dims = e.dims;
    if (
      !Array.isArray(dims) ||
      dims.some((d) => typeof d !== "bigint" || d < 0n || d > BigInt(Number.MAX_SAFE_INTEGER))
    ) {
      throw new DmexpError(
        path,
        `${where}.dims`,
        `expected an array of non-negative integers, got ${describe(dims)}`,
      );
    }
    const overflowed = intField(e, "overflowed", path, `${where}.overflowed`);
    if (overflowed !== 0) {
      throw new DmexpError(
        path,
        `${where}.overflowed`,
        `${overflowed} values of ${name} are not finite; a valid file has none`,
      );
    }
    const d = dims.map(Number);
    params += numel(d);
    h.tensors.push({ name, dims: d, overflowed });
  });
  if (!Number.isSafeInteger(params)) {
    throw new DmexpError(path, "tensors", "the tensors hold more than 2^53 values");
  }
  if (h.num_tensors !== h.tensors.length) {
    throw new DmexpError(
      path,
      "num_tensors",
      `says ${h.num_tensors} but the header lists ${h.tensors.length} tensors`,
    );
  }
  if (h.num_params !== params) {
    throw new DmexpError(
      path,
      "num_params",
      `says ${h.num_params} but the listed tensors hold ${params} values`,
    );
  }
  if (payloadLength !== undefined && payloadLength !== params * DTYPE_BYTES[h.dtype]) {
    throw new DmexpError(
      path,
      "payload_length",
      `the payload holds ${payloadLength} bytes but the tensors take ${params} × ${
        DTYPE_BYTES[h.dtype]
      } (${h.dtype}) = ${params * DTYPE_BYTES[h.dtype]}`,
    );
  }
  for (const [k, v] of Object.entries(raw)) {
    if (!(HEADER_KEYS as readonly string[]).includes(k)) h.extra[k] = v;
  }
  return h;
}

/**
 * Builds the config from the header's `config` text and checks every tensor against the shape it
 * implies: an unknown name, a missing tensor or different dims is refused. Returns the config.
 *
 * @example
 * ```ts
 * const config = checkShapes(header, "m.dmexp"); // throws DmexpError("config" | "tensors.<name>…")
 * ```
 */
export function checkShapes(header: DmexpHeader, path: string): ModelConfig {
  let config: ModelConfig;
  try {
    config = parseConfig(header.config, "config");
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new DmexpError(
      path,
      "config",
      `not a ferry model config, so ferry cannot build a model from it (${e.message})`,
    );
  }
  checkTensorsAgainstConfig(path, header.tensors, config, "the header's config");
  return config;
}

/** What `inspectDmexp` found: the prefix, the checksum verdict, the header, and whether ferry can load it. */
export interface DmexpInfo {
  path: string;
  fileBytes: number;
  version: number;
  headerLength: number;
  payloadLength: number;
  crc32: { stored: number; computed: number; ok: boolean };
  /** The verdict of ferry's header checksum; absent from files written without it (the reference's). */
  headerCrc32?: { stored: string; computed: string; ok: boolean };
  header: DmexpHeader;
  /** Whether the header's config is a ferry config whose shapes match every tensor. */
  model: { ok: true; config: ModelConfig } | { ok: false; field: string; reason: string };
}

/** Options of the readers. */
export interface DmexpReadOptions {
  /** Called as the payload is read: bytes `done` of `total`. */
  onProgress?: (done: number, total: number) => void;
  /** Read size in bytes. */
  chunkBytes?: number;
}

/**
 * Checks a file without building a model, reading the payload in chunks only for its CRC: the same
 * checks as a load up to and including the header. A CRC mismatch does not throw (it is reported in
 * `crc32.ok`, so `info` can still show the header); every other fault does. Neither does a config
 * ferry cannot build (reported in `model`), so a file from another implementation can be inspected.
 *
 * @example
 * ```ts
 * const info = await inspectDmexp("m.dmexp");
 * if (!info.crc32.ok) console.log("corrupt payload");
 * ```
 */
export async function inspectDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpInfo> {
  const fh = await openForRead(path);
  try {
    const p = await readPrefix(fh, path);
    const headerBytes = await readExact(fh, PREFIX_BYTES, p.headerLength, path);
    let computed = 0;
    for await (const chunk of chunksAt(fh, p.payloadStart, p.payloadLength, () => shortFile(path), opts)) {
      computed = crc32(chunk, computed);
    }
    computed >>>= 0;
    let header: DmexpHeader;
    const hc = headerChecksum(encodePrefix(p.headerLength, p.payloadLength, p.crc), headerBytes);
    if (hc?.malformed) throw new DmexpError(path, HEADER_CRC_KEY, hc.malformed);
    try {
      header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    } catch (e) {
      // The CRC comes first in the check order: a corrupt payload is the fault to report.
      if (computed !== p.crc) throw crcError(path, p.crc, computed);
      if (hc && hc.stored !== hc.computed) checkHeaderChecksum(p, headerBytes, path);
      throw e;
    }
    if (!hc && HEADER_CRC_KEY in header.extra) {
      throw new DmexpError(path, HEADER_CRC_KEY, "not in the form ferry writes");
    }
    let model: DmexpInfo["model"];
    try {
      model = { ok: true, config: checkShapes(header, path) };
    } catch (e) {
      if (!(e instanceof DmexpError)) throw e;
      model = { ok: false, field: e.field, reason: e.message };
    }
    return {
      path,
      fileBytes: p.size,
      version: p.version,
      headerLength: p.headerLength,
      payloadLength: p.payloadLength,
      crc32: { stored: p.crc, computed, ok: computed === p.crc },
      ...(hc
        ? { headerCrc32: { stored: hc.stored, computed: hc.computed, ok: hc.stored === hc.computed } }
        : {}),
      header,
      model,
    };
  } finally {
    await fh.close();
  }
}

/**
 * `inspectDmexp`, refusing a CRC mismatch: verifies a file of any size in chunks.
 *
 * @example
 * ```ts
 * await verifyDmexp("big.dmexp"); // throws DmexpError with field "crc32" on a corrupt payload
 * ```
 */
export async function verifyDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpInfo> {
  const info = await inspectDmexp(path, opts);
  if (!info.crc32.ok) throw crcError(path, info.crc32.stored, info.crc32.computed);
  if (info.headerCrc32 && !info.headerCrc32.ok) {
    throw new DmexpError(
      path,
      HEADER_CRC_KEY,
      `stored ${info.headerCrc32.stored} but the prefix and header give ${info.headerCrc32.computed}: the header was changed or is corrupt`,
    );
  }
  return info;
}

/** A fully checked file: its header, the config it was built from, and its tensors as f32. */
export interface DmexpContents {
  header: DmexpHeader;
  config: ModelConfig;
  tensors: Tensor[];
}

/**
 * Reads a whole file, in one pass, and hands out its tensors only after every check has passed: the
 * prefix, the CRC, the header, the config and each tensor's dims against the shape the config implies.
 * 16-bit values are widened to f32 from the stored bits.
 *
 * @example
 * ```ts
 * const { header, config, tensors } = await readDmexp("m.dmexp");
 * ```
 */
export async function readDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpContents> {
  const fh = await openForRead(path);
  try {
    const p = await readPrefix(fh, path);
    const headerBytes = await readExact(fh, PREFIX_BYTES, p.headerLength, path);
    // The header is needed to lay the payload out while it streams past; a fault in it is reported
    // after the CRC's verdict, in the documented order.
    let header: DmexpHeader | undefined, headerFault: unknown;
    try {
      header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    } catch (e) {
      headerFault = e;
    }
    const bpe = header ? DTYPE_BYTES[header.dtype] : 1;
    const tensors: Tensor[] = header
      ? header.tensors.map((t) => ({
        name: t.name,
        dims: [...t.dims],
        data: new Float32Array(numel(t.dims)),
      }))
      : [];
    let crc = 0, ti = 0, inTensor = 0;
    let nonFinite: { name: string; index: number; value: number } | undefined;
    for await (const chunk of chunksAt(fh, p.payloadStart, p.payloadLength, () => shortFile(path), opts)) {
      crc = crc32(chunk, crc);
      if (!header) continue;
      for (let at = 0; at < chunk.length;) {
        while (inTensor === tensors[ti].data.length * bpe) ti++, inTensor = 0;
        const t = tensors[ti];
        const n = Math.min(chunk.length - at, t.data.length * bpe - inTensor);
        decodeInto(header.dtype, chunk.subarray(at, at + n), t.data, inTensor / bpe);
        if (!nonFinite) {
          const bad = firstNonFinite(t.data, inTensor / bpe, (inTensor + n) / bpe);
          if (bad >= 0) nonFinite = { name: t.name, index: bad, value: t.data[bad] };
        }
        at += n, inTensor += n;
      }
    }
    if (crc >>> 0 !== p.crc) throw crcError(path, p.crc, crc >>> 0);
    const sealed = checkHeaderChecksum(p, headerBytes, path);
    if (!header) throw headerFault;
    if (!sealed && HEADER_CRC_KEY in header.extra) {
      throw new DmexpError(path, HEADER_CRC_KEY, "not in the form ferry writes");
    }
    const config = checkShapes(header, path);
    if (nonFinite) {
      throw new DmexpError(
        path,
        `tensors.${nonFinite.name}`,
        `holds ${nonFinite.value} at index ${nonFinite.index}; an export holds only finite weights`,
        { expected: "finite values", found: String(nonFinite.value) },
      );
    }
    return { header, config, tensors };
  } finally {
    await fh.close();
  }
}

/**
 * `inspectDmexp`'s answer as plain data, the form `info --json` prints: every header key (the extra
 * ones after the standard ones), the checksum verdict and whether ferry can build a model from it.
 */
export function dmexpInfoJson(info: DmexpInfo): Record<string, unknown> {
  const { extra, tensors, ...keys } = info.header;
  return {
    file: info.path,
    bytes: info.fileBytes,
    version: info.version,
    header_length: info.headerLength,
    payload_length: info.payloadLength,
    crc32: { stored: hex32(info.crc32.stored), computed: hex32(info.crc32.computed), ok: info.crc32.ok },
    header_crc32: info.headerCrc32 ?? null,
    header: { ...keys, ...extra, tensors },
    model: info.model.ok ? { ok: true } : { ok: false, field: info.model.field, reason: info.model.reason },
  };
}

/**
 * The dmexp format in the registry (formats/mod.ts): streamed writes, checked reads, and `inspect`
 * without building a model.
 *
 * @example
 * ```ts
 * const { config, tensors } = await dmexpFormat.read("out/ferry.bf16.dmexp");
 * ```
 */
export const dmexpFormat: FormatDescriptor<DmexpDtype> = {
  name: "dmexp",
  summary: "ferry's self-describing container: TOML header with the config, CRC-32, f32/f16/bf16",
  extension: ".dmexp",
  recognises: (path) => path.endsWith(".dmexp"),
  dtypes: DTYPES,
  defaultDtype: "bf16",
  weights: "float",
  async write(path, input, { dtype, onProgress }) {
    const r = await writeDmexp(path, input.tensors, input.config, {
      dtype,
      source: input.source,
      step: input.step,
      onProgress,
    });
    return {
      file: r.path,
      bytes: r.bytes,
      params: r.header.num_params,
      tensors: r.header.num_tensors,
      max_abs: r.header.max_abs,
      min_nonzero_abs: r.header.min_nonzero_abs,
      flushed: r.header.flushed,
      crc32: hex32(r.crc32),
    };
  },
  async read(path, options) {
    const { config, tensors } = await readDmexp(path, options);
    return { config, tensors };
  },
  inspect: async (path, options) => dmexpInfoJson(await inspectDmexp(path, options)),
};

// ---- internals ----

interface Prefix {
  size: number;
  version: number;
  headerLength: number;
  payloadLength: number;
  payloadStart: number;
  crc: number;
}

async function openForRead(path: string): Promise<FileHandle> {
  try {
    return await open(path, "r");
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new DmexpError(
      path,
      "file",
      code === "ENOENT" ? "no such file" : `cannot open: ${(e as Error).message}`,
    );
  }
}

// Size, magic, version, then both lengths against the file size (in BigInt: a u64 cannot overflow it).
async function readPrefix(fh: FileHandle, path: string): Promise<Prefix> {
  const size = (await fh.stat()).size;
  if (size < PREFIX_BYTES) {
    throw new DmexpError(path, "size", `${size} bytes is shorter than the 24-byte prefix`);
  }
  const b = await readExact(fh, 0, PREFIX_BYTES, path);
  if (!MAGIC_BYTES.every((x, i) => b[i] === x)) {
    if (isCheckpoint(b)) {
      const why = "a ferry training checkpoint (magic FERRYCK): a training run with its optimizer state, " +
        "not an inference export; export it first";
      throw new DmexpError(path, "magic", why);
    }
    const found = Array.from(b.subarray(0, 8), (x) => x.toString(16).padStart(2, "0")).join(" ");
    throw new DmexpError(
      path,
      "magic",
      `expected "DMEXPRT" and a version byte, found bytes ${found}: not a dmexp file`,
    );
  }
  const version = b[7];
  if (version !== DMEXP_VERSION) {
    throw new DmexpError(
      path,
      "version",
      `format version ${version} is not supported (this reader knows ${DMEXP_VERSION})`,
    );
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const headerLength = dv.getUint32(8, true);
  const payloadLength = dv.getBigUint64(12, true);
  if (BigInt(PREFIX_BYTES + headerLength) > BigInt(size)) {
    throw new DmexpError(
      path,
      "header_length",
      `a ${headerLength}-byte header runs past the end of the ${size}-byte file (truncated?)`,
    );
  }
  const expected = BigInt(PREFIX_BYTES + headerLength) + payloadLength;
  if (expected !== BigInt(size)) {
    throw new DmexpError(
      path,
      "payload_length",
      `24 + header ${headerLength} + payload ${payloadLength} = ${expected} bytes, but the file has ${size} (${
        expected > BigInt(size) ? "truncated" : "trailing bytes"
      })`,
    );
  }
  return {
    size,
    version,
    headerLength,
    payloadLength: Number(payloadLength),
    payloadStart: PREFIX_BYTES + headerLength,
    crc: dv.getUint32(20, true),
  };
}

async function readExact(
  fh: FileHandle,
  position: number,
  length: number,
  path: string,
): Promise<Uint8Array> {
  return await readExactInto(fh, new Uint8Array(length), position, path);
}

function readExactInto(
  fh: FileHandle,
  into: Uint8Array,
  position: number,
  path: string,
): Promise<Uint8Array> {
  return readInto(fh, into, position, () => shortFile(path));
}

function shortFile(path: string): DmexpError {
  return new DmexpError(path, "size", "the file ended early (it changed while being read)");
}

// Yields each source's elements in order, a chunk at a time, with the next chunk's read already started.
async function* sourceChunks(
  sources: TensorSource[],
  chunkElems: number,
): AsyncGenerator<{ index: number; start: number; data: Float32Array }> {
  const scratch = [new Float32Array(chunkElems), new Float32Array(chunkElems)];
  function* plan() {
    for (let index = 0; index < sources.length; index++) {
      const n = numel(sources[index].dims);
      for (let start = 0; start < n; start += chunkElems) {
        yield { index, start, count: Math.min(chunkElems, n - start) };
      }
    }
  }
  const steps = plan();
  let k = 0;
  const fetch = () => {
    const s = steps.next();
    if (s.done) return undefined;
    const { index, start, count } = s.value;
    const data = Promise.resolve(sources[index].read(start, count, scratch[k++ & 1])).then((d) => {
      if (d.length !== count) {
        throw new RangeError(`source ${sources[index].name} gave ${d.length} values for ${count}`);
      }
      return d;
    });
    data.catch(() => {});
    return { index, start, data };
  };
  let next = fetch();
  while (next) {
    const data = await next.data;
    const cur = { index: next.index, start: next.start, data };
    next = fetch();
    yield cur;
  }
}

// Folds a narrowed chunk into the statistics; returns the index of the first non-finite value, or -1.
// Magnitudes are compared as integers: for non-negative floats the bit patterns order like the values.
function scanNarrowed(
  dtype: DmexpDtype,
  src: Float32Array,
  narrowed: Uint8Array,
  stats: { max: number; min: number; flushed: number },
): number {
  let { max, min, flushed } = stats;
  let bad = -1;
  if (dtype === "f32") {
    const u = new Int32Array(src.buffer, src.byteOffset, src.length);
    for (let i = 0; i < u.length; i++) {
      const a = u[i] & 0x7fffffff;
      if (a >= 0x7f800000) {
        bad = i;
        break;
      }
      if (a > max) max = a;
      if (a !== 0 && a < min) min = a;
    }
  } else {
    const expAll = dtype === "f16" ? 0x7c00 : 0x7f80;
    const u = new Int32Array(src.buffer, src.byteOffset, src.length);
    const h = new Uint16Array(narrowed.buffer, narrowed.byteOffset, src.length);
    for (let i = 0; i < h.length; i++) {
      const a = h[i] & 0x7fff;
      if ((a & expAll) === expAll) {
        bad = i;
        break;
      }
      if (a > max) max = a;
      if (a !== 0) {
        if (a < min) min = a;
      } else if ((u[i] & 0x7fffffff) !== 0) flushed++;
    }
  }
  stats.max = max, stats.min = min, stats.flushed = flushed;
  return bad;
}

// A magnitude's bit pattern (as kept by scanNarrowed) back to its value.
function widenAbs(dtype: DmexpDtype, bits: number): number {
  const f = new Float32Array(1), i = new Int32Array(f.buffer);
  i[0] = dtype === "f32" ? bits : dtype === "bf16" ? bits << 16 : f16BitsToF32Bits(bits);
  return f[0];
}

function narrowingError(
  path: string,
  dtype: DmexpDtype,
  name: string,
  index: number,
  value: number,
): DmexpError {
  if (!Number.isFinite(value)) {
    return new DmexpError(
      path,
      `tensors.${name}`,
      `holds ${value} at index ${index}; an export holds only finite weights`,
    );
  }
  return new DmexpError(
    path,
    "dtype",
    `tensor ${name} holds ${value} at index ${index}, which is beyond ${dtype}'s range ` +
      `(largest finite ${dtype === "f16" ? "65504" : "3.39e38"}) and would become infinite. ` +
      `Export with --dtype bf16, which keeps f32's exponent range and accepts this model.`,
  );
}

// The shared shape check, its refusal worded for dmexp: the field is the tensor's header entry.
function checkTensorsAgainstConfig(
  path: string,
  tensors: ReadonlyArray<{ name: string; dims: readonly number[] }>,
  config: ModelConfig,
  what = "the config",
): void {
  const bad = checkTensors(config, tensors);
  if (!bad) return;
  const field = bad.kind === "dims" ? `tensors.${bad.tensor}.dims` : `tensors.${bad.tensor}`;
  throw new DmexpError(path, field, bad.problem.replace("the config", what), bad);
}

function decodeInto(dtype: DmexpDtype, bytes: Uint8Array, out: Float32Array, at: number): void {
  if (dtype === "f32") {
    new Uint8Array(out.buffer, out.byteOffset + at * 4, bytes.length).set(bytes);
    return;
  }
  const n = bytes.length / 2;
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  (dtype === "f16" ? f16ToF32 : bf16ToF32)(bits, out.subarray(at, at + n));
}

// The index of the first NaN or infinity in data[from, to), or -1.
function firstNonFinite(data: Float32Array, from: number, to: number): number {
  for (let i = from; i < to; i++) if (data[i] - data[i] !== 0) return i;
  return -1;
}

function crcError(path: string, stored: number, computed: number): DmexpError {
  return new DmexpError(
    path,
    "crc32",
    `stored ${hex32(stored)} but the payload's is ${hex32(computed)}: the payload is corrupt`,
  );
}

/** A CRC as `0x` and 8 hex digits. */
export function hex32(x: number): string {
  return "0x" + (x >>> 0).toString(16).padStart(8, "0");
}

function intField(raw: Record<string, unknown>, key: string, path: string, field = key): number {
  const v = raw[key];
  if (v === undefined) throw new DmexpError(path, field, "missing (every dmexp header has it)");
  if (typeof v !== "bigint") throw new DmexpError(path, field, `expected an integer, got ${describe(v)}`);
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new DmexpError(path, field, `expected a non-negative integer below 2^53, got ${v}`);
  }
  return Number(v);
}

// The reference reads these into floats and, like any serde float, accepts a TOML integer too.
function floatField(raw: Record<string, unknown>, key: string, path: string): number {
  const v = raw[key];
  if (v === undefined) throw new DmexpError(path, key, "missing (every dmexp header has it)");
  const x = typeof v === "bigint" ? Number(v) : v;
  if (typeof x !== "number" || !Number.isFinite(x) || x < 0) {
    throw new DmexpError(path, key, `expected a finite non-negative float, got ${describe(v)}`);
  }
  return x;
}

function stringField(raw: Record<string, unknown>, key: string, path: string, field = key): string {
  const v = raw[key];
  if (v === undefined) throw new DmexpError(path, field, "missing (every dmexp header has it)");
  if (typeof v !== "string") throw new DmexpError(path, field, `expected a string, got ${describe(v)}`);
  return v;
}

function describe(v: unknown): string {
  if (typeof v === "bigint") return `the integer ${v}`;
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)}`;
  if (Array.isArray(v)) return "an array";
  if (v === null || v === undefined) return String(v);
  return typeof v === "object" ? "a table" : `${typeof v} ${String(v)}`;
}

/**
 * The dmexp header (spec: formats/dmexp/dmexp.md): the 24-byte prefix, the TOML header's schema and its
 * checks, ferry's header checksum (`header_crc32`), and the check of the tensor list against the
 * config. `formats/dmexp/dmexp.ts` re-exports all of it; the payload's streaming is `dmexp-payload.ts`.
 *
 * @example
 * ```ts
 * import { checkShapes, parseHeader } from "./dmexp-header.ts";
 * declare const headerBytes: Uint8Array, payloadLength: number; // as the file's prefix gives them
 * const header = parseHeader(headerBytes, "m.dmexp", 1, payloadLength); // every key checked
 * const config = checkShapes(header, "m.dmexp");                         // tensors against the config
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { checkTensors, ConfigError, type ModelConfig, notToml, parseConfig } from "../../model/config.ts";
import { numel } from "../../model/tensor.ts";
import { formatErrorClass, messageWithoutCode, TENSOR_REFUSALS } from "../../model/error.ts";
import { TOKENIZER_SECTION_REFUSALS } from "../tokenizer-section.ts";

/** The 7 magic letters; the 8th byte of the file is the format version. */
export const DMEXP_MAGIC = "DMEXPRT";
/** The version of a file without a tokenizer section (a byte model's): the reference's version. */
export const DMEXP_VERSION = 1;
/** The version of a file that ends with a tokenizer section (formats/dmexp/dmexp.md, "Tokenizer section"). */
export const DMEXP_TOKENIZER_VERSION = 2;
/** Every version this reader reads. */
export const DMEXP_VERSIONS: readonly number[] = [DMEXP_VERSION, DMEXP_TOKENIZER_VERSION];
/** The version-2 header key that states the tokenizer section's length in bytes. */
export const TOKENIZER_BYTES_KEY = "tokenizer_bytes";
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

/** The magic and version byte as the file's first 8 bytes. */
export const MAGIC_BYTES = new TextEncoder().encode(DMEXP_MAGIC);

/**
 * Every rule a dmexp file (or a write of one) can break, the tokenizer section's included;
 * formats/dmexp/dmexp.md ("Refusals") says what each means.
 */
export const DMEXP_REFUSALS = [
  ["Unreadable", "Truncated", "TrailingBytes", "BadMagic", "UnsupportedVersion", "ChecksumMismatch"],
  ["InvalidUtf8", "InvalidToml", "MissingField", "WrongType", "InvalidValue", "UnsupportedDtype"],
  ["InvalidName", "InvalidShape", "CountMismatch", "NotFinite", "InvalidConfig"],
  TENSOR_REFUSALS,
  ...TOKENIZER_SECTION_REFUSALS,
] as const;

/** Every refusal of the format: `path` names the file, `field` what is wrong in it, `code` the rule. */
export class DmexpError extends formatErrorClass(DMEXP_REFUSALS) {}

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

// ---- writing ----

/**
 * The header as TOML text: the reference's keys in its order, then `extra`, then `[[tensors]]`.
 * Integers are written as TOML integers and the two magnitudes always as TOML floats.
 *
 * @example
 * ```ts
 * import { type DmexpHeader, encodeHeader } from "./dmexp-header.ts";
 * declare const header: DmexpHeader;
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

/**
 * The 24-byte prefix for a header and payload of these lengths and this payload CRC.
 *
 * @example
 * ```ts
 * import { encodePrefix } from "./dmexp-header.ts";
 * declare const headerBytes: Uint8Array, payloadLength: number, crc: number;
 * const prefix = encodePrefix(headerBytes.length, payloadLength, crc); // "DMEXPRT\x01" + lengths + CRC
 * ```
 */
export function encodePrefix(
  headerLength: number,
  payloadLength: number,
  crc: number,
  version = DMEXP_VERSION,
): Uint8Array {
  const prefix = new Uint8Array(PREFIX_BYTES);
  const dv = new DataView(prefix.buffer);
  prefix.set(MAGIC_BYTES);
  prefix[7] = version;
  dv.setUint32(8, headerLength, true);
  dv.setBigUint64(12, BigInt(payloadLength), true);
  dv.setUint32(20, crc >>> 0, true);
  return prefix;
}

// ---- the header checksum ----

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
 * import { headerChecksum } from "./dmexp-header.ts";
 * declare const prefix: Uint8Array, headerBytes: Uint8Array;
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
 *
 * @example
 * ```ts
 * import { sealHeader } from "./dmexp-header.ts";
 * declare const prefix: Uint8Array, headerBytes: Uint8Array;
 * const sealed = sealHeader(prefix, headerBytes); // header_crc32 = "<the CRC of prefix + header>"
 * ```
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

/**
 * Refuses a header whose checksum is present and wrong (or present in another form than the one ferry
 * writes); returns whether there was one.
 */
export function checkHeaderChecksum(prefix: Uint8Array, header: Uint8Array, path: string): boolean {
  const c = headerChecksum(prefix, header);
  if (!c) return false;
  if (c.malformed) throw malformedChecksum(path, c.malformed);
  if (c.stored !== c.computed) throw headerChecksumError(path, c.stored, c.computed);
  return true;
}

/** The refusal of a `header_crc32` in another form than ferry writes. */
export function malformedChecksum(path: string, why: string): DmexpError {
  return new DmexpError(path, "InvalidValue", HEADER_CRC_KEY, why, {
    expected: 'one line header_crc32 = "<8 hex digits>"',
  });
}

/** The refusal of a header whose `header_crc32` is not the CRC of the prefix and header. */
export function headerChecksumError(path: string, stored: string, computed: string): DmexpError {
  return new DmexpError(
    path,
    "ChecksumMismatch",
    HEADER_CRC_KEY,
    `stored ${stored} but the prefix and header give ${computed}: the header was changed or is corrupt`,
    { expected: stored, found: computed },
  );
}

// ---- reading ----

/**
 * Parses and checks header bytes, in steps: UTF-8, TOML, the reference's keys (`format` equal to the
 * version byte, each key present with its type), the tensor list, and the counts against the list and
 * the payload length. Unknown keys are kept in `extra`. Does not look at the config (see `checkShapes`).
 *
 * @example
 * ```ts
 * import { parseHeader } from "./dmexp-header.ts";
 * declare const headerBytes: Uint8Array, payloadLength: number;
 * const header = parseHeader(headerBytes, "m.dmexp", 1, payloadLength);
 * ```
 */
export function parseHeader(
  bytes: Uint8Array,
  path: string,
  version = DMEXP_VERSION,
  payloadLength?: number,
): DmexpHeader {
  const raw = headerToml(bytes, path);
  const h = headerKeys(raw, path, version);
  const { entries, params } = tensorList(raw.tensors, path);
  h.tensors = entries;
  checkCounts(h, params, payloadLength, path);
  for (const [k, v] of Object.entries(raw)) {
    if (!(HEADER_KEYS as readonly string[]).includes(k)) h.extra[k] = v;
  }
  // Version 2 states its tokenizer section's length, so the header checksum covers it too.
  if (version === DMEXP_TOKENIZER_VERSION) {
    h.extra[TOKENIZER_BYTES_KEY] = intField(raw, TOKENIZER_BYTES_KEY, path);
  }
  return h;
}

// Step 1: the bytes as UTF-8 text, the text as TOML (integers as bigints, so none is rounded).
function headerToml(bytes: Uint8Array, path: string): Record<string, unknown> {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new DmexpError(path, "InvalidUtf8", "header", "not valid UTF-8", { expected: "UTF-8 text" });
  }
  try {
    return parseToml(text, { integersAsBigInt: true }) as Record<string, unknown>;
  } catch (e) {
    throw new DmexpError(path, "InvalidToml", "header", notToml(e), { expected: "a TOML document" });
  }
}

// Step 2: the reference's scalar keys, each present with its type; `format` the version byte.
function headerKeys(raw: Record<string, unknown>, path: string, version: number): DmexpHeader {
  const format = intField(raw, "format", path);
  if (format !== version) {
    throw new DmexpError(
      path,
      "InvalidValue",
      "format",
      `the header says format ${format} but the magic's version byte is ${version}`,
      { expected: String(version), found: String(format) },
    );
  }
  const dtype = stringField(raw, "dtype", path);
  if (!(DTYPES as readonly string[]).includes(dtype)) {
    const expected = `one of ${DTYPES.map((d) => `"${d}"`).join(", ")}`;
    throw new DmexpError(
      path,
      "UnsupportedDtype",
      "dtype",
      `expected ${expected}, got ${JSON.stringify(dtype)}`,
      {
        expected,
        found: JSON.stringify(dtype),
      },
    );
  }
  return {
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
}

// Step 3: `[[tensors]]`, each a table with a unique non-empty name, integer dims and `overflowed = 0`;
// and the values they hold, in total (below 2^53).
function tensorList(list: unknown, path: string): { entries: DmexpTensorEntry[]; params: number } {
  if (list === undefined) {
    throw new DmexpError(path, "MissingField", "tensors", "missing (every dmexp header has it)", {
      expected: "an array of tables",
      found: "nothing",
    });
  }
  if (!Array.isArray(list)) {
    throw new DmexpError(path, "WrongType", "tensors", `expected an array of tables, got ${describe(list)}`, {
      expected: "an array of tables",
      found: describe(list),
    });
  }
  const seen = new Set<string>();
  const entries = list.map((entry, i) => tensorEntry(entry, `tensors[${i}]`, seen, path));
  const params = entries.reduce((n, e) => n + numel(e.dims), 0);
  if (!Number.isSafeInteger(params)) {
    throw new DmexpError(path, "InvalidShape", "tensors", "the tensors hold more than 2^53 values", {
      expected: "at most 2^53 values",
      found: String(params),
    });
  }
  return { entries, params };
}

function tensorEntry(entry: unknown, where: string, seen: Set<string>, path: string): DmexpTensorEntry {
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) {
    throw new DmexpError(path, "WrongType", where, `expected a table, got ${describe(entry)}`, {
      expected: "a table",
      found: describe(entry),
    });
  }
  const e = entry as Record<string, unknown>;
  const name = stringField(e, "name", path, `${where}.name`);
  if (name === "") {
    throw new DmexpError(path, "InvalidName", `${where}.name`, "empty", { expected: "a name", found: '""' });
  }
  if (seen.has(name)) {
    throw new DmexpError(path, "DuplicateTensor", `${where}.name`, `${name} appears twice`, {
      expected: "a name no other tensor has",
      found: name,
    });
  }
  seen.add(name);
  const dims = e.dims;
  if (
    !Array.isArray(dims) ||
    dims.some((d) => typeof d !== "bigint" || d < 0n || d > BigInt(Number.MAX_SAFE_INTEGER))
  ) {
    const expected = "an array of non-negative integers";
    throw new DmexpError(
      path,
      "InvalidShape",
      `${where}.dims`,
      `expected ${expected}, got ${describe(dims)}`,
      {
        expected,
        found: describe(dims),
      },
    );
  }
  const overflowed = intField(e, "overflowed", path, `${where}.overflowed`);
  if (overflowed !== 0) {
    throw new DmexpError(
      path,
      "NotFinite",
      `${where}.overflowed`,
      `${overflowed} values of ${name} are not finite; a valid file has none`,
      { expected: "0", found: String(overflowed) },
    );
  }
  return { name, dims: dims.map(Number), overflowed };
}

// Step 4: the counts agree with the list, and the payload length with the values and the dtype.
function checkCounts(h: DmexpHeader, params: number, payloadLength: number | undefined, path: string): void {
  if (h.num_tensors !== h.tensors.length) {
    throw new DmexpError(
      path,
      "CountMismatch",
      "num_tensors",
      `says ${h.num_tensors} but the header lists ${h.tensors.length} tensors`,
      { expected: String(h.tensors.length), found: String(h.num_tensors) },
    );
  }
  if (h.num_params !== params) {
    throw new DmexpError(
      path,
      "CountMismatch",
      "num_params",
      `says ${h.num_params} but the listed tensors hold ${params} values`,
      {
        expected: String(params),
        found: String(h.num_params),
      },
    );
  }
  const bytes = params * DTYPE_BYTES[h.dtype];
  if (payloadLength !== undefined && payloadLength !== bytes) {
    throw new DmexpError(
      path,
      "CountMismatch",
      "payload_length",
      `the payload holds ${payloadLength} bytes but the tensors take ${params} × ${
        DTYPE_BYTES[h.dtype]
      } (${h.dtype}) = ${bytes}`,
      { expected: String(bytes), found: String(payloadLength) },
    );
  }
}

/**
 * Builds the config from the header's `config` text and checks every tensor against the shape it
 * implies: an unknown name, a missing tensor or different dims is refused. Returns the config.
 *
 * @example
 * ```ts
 * import { checkShapes, type DmexpHeader } from "./dmexp-header.ts";
 * declare const header: DmexpHeader;
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
      "InvalidConfig",
      "config",
      `not a ferry model config, so ferry cannot build a model from it (${messageWithoutCode(e)})`,
      e,
    );
  }
  checkTensorsAgainstConfig(path, header.tensors, config, "the header's config");
  return config;
}

/**
 * The shared shape check, its refusal worded for dmexp: the field is the tensor's header entry.
 *
 * @example
 * ```ts
 * import { checkTensorsAgainstConfig } from "./dmexp-header.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[], config: ModelConfig;
 * checkTensorsAgainstConfig("m.dmexp", tensors, config); // throws DmexpError("tensors.<name>.dims")
 * ```
 */
export function checkTensorsAgainstConfig(
  path: string,
  tensors: ReadonlyArray<{ name: string; dims: readonly number[] }>,
  config: ModelConfig,
  what = "the config",
): void {
  const bad = checkTensors(config, tensors);
  if (!bad) return;
  const field = bad.kind === "dims" ? `tensors.${bad.tensor}.dims` : `tensors.${bad.tensor}`;
  throw new DmexpError(path, bad.code, field, bad.problem.replace("the config", what), bad);
}

/**
 * A CRC as `0x` and 8 hex digits.
 *
 * @example
 * ```ts
 * import { hex32 } from "./dmexp-header.ts";
 * hex32(0x1a2b); // "0x00001a2b"
 * ```
 */
export function hex32(x: number): string {
  return "0x" + (x >>> 0).toString(16).padStart(8, "0");
}

// ---- typed fields ----

const missing = (path: string, field: string, expected: string) =>
  new DmexpError(path, "MissingField", field, "missing (every dmexp header has it)", {
    expected,
    found: "nothing",
  });

function intField(raw: Record<string, unknown>, key: string, path: string, field = key): number {
  const v = raw[key];
  if (v === undefined) throw missing(path, field, "an integer");
  if (typeof v !== "bigint") {
    throw new DmexpError(path, "WrongType", field, `expected an integer, got ${describe(v)}`, {
      expected: "an integer",
      found: describe(v),
    });
  }
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    const expected = "a non-negative integer below 2^53";
    throw new DmexpError(path, "InvalidValue", field, `expected ${expected}, got ${v}`, {
      expected,
      found: String(v),
    });
  }
  return Number(v);
}

// The reference reads these into floats and, like any serde float, accepts a TOML integer too.
function floatField(raw: Record<string, unknown>, key: string, path: string): number {
  const v = raw[key];
  const expected = "a finite non-negative float";
  if (v === undefined) throw missing(path, key, expected);
  const x = typeof v === "bigint" ? Number(v) : v;
  if (typeof x !== "number" || !Number.isFinite(x) || x < 0) {
    throw new DmexpError(path, "InvalidValue", key, `expected ${expected}, got ${describe(v)}`, {
      expected,
      found: describe(v),
    });
  }
  return x;
}

function stringField(raw: Record<string, unknown>, key: string, path: string, field = key): string {
  const v = raw[key];
  if (v === undefined) throw missing(path, field, "a string");
  if (typeof v !== "string") {
    throw new DmexpError(path, "WrongType", field, `expected a string, got ${describe(v)}`, {
      expected: "a string",
      found: describe(v),
    });
  }
  return v;
}

function describe(v: unknown): string {
  if (typeof v === "bigint") return `the integer ${v}`;
  if (typeof v === "string") return `the string ${JSON.stringify(v.length > 40 ? v.slice(0, 40) + "…" : v)}`;
  if (Array.isArray(v)) return "an array";
  if (v === null || v === undefined) return String(v);
  return typeof v === "object" ? "a table" : `${typeof v} ${String(v)}`;
}

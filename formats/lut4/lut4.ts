/**
 * lut4: the integer engine's file (spec: formats/lut4/lut4.md). UORLUT01 framing — magic, u64 header length,
 * a JSON header, a 64-byte-aligned data section — with the schema `ferry.lut-qwen3/1`: 4-bit codes in
 * offset binary, one scale byte per group of 32, and the integer tables the engine needs. ferry adds a
 * CRC-32 of the data section to the header and names the model by the SHA-256 of the whole file.
 * Schema `ferry.lut-qwen3/2` is the same file followed by the model's tokenizer files, in the
 * checksummed section of `tokenizer-section.ts`; `/1` files (byte models) still read.
 *
 * @example
 * ```ts
 * import { lut4Format, readLut4, writeLut4 } from "./lut4.ts";
 * import type { Lut4Weights } from "../../quantize/lut4-types.ts";
 * declare const weights: Lut4Weights; // quantize/lut4-quantize.ts quantizeModel's
 * await writeLut4("out/ferry.lut4", weights, {
 *   source: "ferry.ckpt@step10", ropeTheta: 1e6, rmsNormEps: 1e-6, // the config's rope_theta and rms_norm_eps
 * });
 * const file = await readLut4("out/ferry.lut4");   // checked: framing, CRC, inventory, every span
 * const { config, tensors } = await lut4Format.read("out/ferry.lut4"); // dequantized, for the float engine
 * ```
 * @module
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import process from "node:process";
import { crc32 } from "node:zlib";
import type { FormatDescriptor, ReadResult, WriteResult } from "../format.ts";
import { chunksAt, openAtomic, readExact, readExactAside } from "../io.ts";
import { recordDigest, recordedDigest } from "../digest-record.ts";
import {
  BLOCK_VALUES,
  defaultPoolSize,
  dequantizeMatrix,
  epsFixed,
  GPTQ_DAMP,
  LUT4_GROUP,
  notWholeGroups,
  quantizeModelStreamed,
  quantizePool,
  TABLES,
  type TensorError,
} from "../../quantize/lut4-quantize.ts";
import type {
  CalibrationRecord,
  GainTable,
  HeadMode,
  Lut4Shape,
  Lut4Tables,
  Lut4Weights,
} from "../../quantize/lut4-types.ts";
import type { LutMatrix } from "../../kernels/int/gemv.ts";
import { type ModelConfig, validateConfig } from "../../model/config.ts";
import { FormatError, formatErrorClass, messageWithoutCode, type RefusalDetail } from "../../model/error.ts";
import { decodeShared, JSON_REFUSALS, jsonHeader } from "../json.ts";
import { calibrationLine } from "../calibration-record.ts";
import { numel, type Tensor } from "../../model/tensor.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import {
  decodeTokenizerSection,
  encodeTokenizerSection,
  TOKENIZER_SECTION_REFUSALS,
} from "../tokenizer-section.ts";
import { tokenizerInfo } from "../huggingface/huggingface-tokenizer.ts";

/** The framing's 8 magic bytes (the reference's). */
export const LUT4_MAGIC = "UORLUT01";
/** ferry's schema name: the Qwen3 layout. */
export const LUT4_SCHEMA = "ferry.lut-qwen3/1";
/** The schema of a file that ends with a tokenizer section (formats/lut4/lut4.md, "Tokenizer section"). */
export const LUT4_SCHEMA_TOKENIZER = "ferry.lut-qwen3/2";
const SCHEMAS: readonly string[] = [LUT4_SCHEMA, LUT4_SCHEMA_TOKENIZER];
/** Largest header ferry reads (the reference's limit). */
export const MAX_HEADER_BYTES = 64 << 20;
/** The most positions a lut4 file may have (`shape.max_positions`; quantize/lut4-quantize.ts caps at it). */
import { lut4ShapeOf, MAX_LUT4_POSITIONS } from "../../quantize/lut4-types.ts";
import { gptqEngine, gptqPays, gptqThreads } from "../../quantize/gptq.ts";
/** Alignment of the data section and of every span in it. */
export const ALIGN = 64;

/** A lut4 file read and checked. */
export interface Lut4File {
  path: string;
  header: Lut4Header;
  weights: Lut4Weights;
  /** The float model's config (for the dequantized read). */
  config: ModelConfig;
  /** SHA-256 of the whole file, hex: the model's identity (sessions name it). */
  sha256: string;
  bytes: number;
  /** The model's tokenizer files (schema `/2`), checked; absent for a byte model. */
  tokenizer?: TokenizerFiles;
}
// The matrices' codes and scales in `weights` are views of the file's bytes (checked like everything
// else before they are handed out): copying 0.2–0.3 GB of codes only to copy them again into an
// engine's layout cost a real model's load a second. A caller that keeps them copies them.

/** A span of the data section: offset from the data section's start, and length. */
export interface Span {
  offset: number;
  bytes: number;
}

/** The JSON header as written. */
export interface Lut4Header {
  schema: string;
  shape: {
    vocab: number;
    width: number;
    layers: number;
    heads: number;
    kv_heads: number;
    head_dim: number;
    ffn: number;
    max_positions: number;
  };
  rope_theta: number;
  rms_norm_eps: number;
  rms_eps: { mantissa: number; exp: number };
  head: HeadMode;
  exp_step_log2: number;
  exp_q: number;
  silu_step_log2: number;
  silu_range_log2: number;
  silu_q: number;
  rope_q: number;
  matrices: { name: string; rows: number; cols: number; exp_base: number; nibbles: Span; scales: Span }[];
  /** Each entry's value is entry · 2^exp. */
  tables: { name: string; kind: "i16" | "i32"; length: number; exp: number; span: Span }[];
  data_bytes: number;
  data_crc32: number;
  source: string;
  quantizer: Record<string, unknown>;
  /** Present when the quantizer was calibrated: the data it saw (formats/lut4/lut4.md, "Calibration"). */
  calibration?: CalibrationRecord;
  /** Schema `/2` only: the length of the tokenizer section after the data section. */
  tokenizer?: { bytes: number };
}

/**
 * Every rule a lut4 file (or a write of one) can break, the tokenizer section's included;
 * formats/lut4/lut4.md ("Refusals") says what each means.
 */
export const LUT4_REFUSALS = [
  ["Unreadable", "Truncated", "TrailingBytes", "BadMagic", "UnsupportedVersion", "ChecksumMismatch"],
  ["InvalidUtf8", "WrongType", "MissingField", "InvalidValue", "Unsupported", "InvalidConfig"],
  ["InvalidShape", "ShapeMismatch", "SizeMismatch", "Misaligned", "InvalidOffset", "NonZeroPadding"],
  ["InvalidTable"],
  JSON_REFUSALS,
  ...TOKENIZER_SECTION_REFUSALS,
] as const;
/** A code of `LUT4_REFUSALS`. */
export type Lut4Refusal = typeof LUT4_REFUSALS[number][number];

/** A refusal of a lut4 file: names the file, the field and the rule. */
export class Lut4Error extends formatErrorClass(LUT4_REFUSALS) {}

/** The refusal "expected X, got Y", with X and Y also as the error's `expected` and `found`. */
function mismatch(
  code: Lut4Refusal,
  path: string,
  field: string,
  expected: unknown,
  found: unknown,
): Lut4Error {
  const [e, f] = [String(expected), String(found)];
  return new Lut4Error(path, code, field, `expected ${e}, got ${f}`, { expected: e, found: f });
}

const align = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/** The names of the matrices and tables a file with this shape and head holds, in file order. */
export function inventory(shape: Lut4Shape, head: HeadMode): { matrices: string[]; tables: string[] } {
  const matrices = ["embed"];
  const tables = ["exp", "silu", "rope_cos", "rope_sin"];
  for (let i = 0; i < shape.layers; i++) {
    for (const m of ["q", "k", "v", "o", "gate", "up", "down"]) matrices.push(`layers.${i}.${m}`);
    tables.push(`layers.${i}.q_gain`, `layers.${i}.k_gain`);
  }
  if (head === "separate") matrices.push("head");
  else tables.push("final_gain");
  return { matrices, tables };
}

/** What a lut4 writer records beside the weights. */
export interface Lut4Meta {
  source: string;
  ropeTheta: number;
  rmsNormEps: number;
  quantizer?: Record<string, unknown>;
  calibration?: CalibrationRecord;
  /** The model's own tokenizer: schema `/2` with a tokenizer section after the data (absent: `/1`). */
  tokenizer?: TokenizerFiles;
}

/** Writes a lut4 file atomically from integer weights. */
export function writeLut4(
  path: string,
  w: Lut4Weights,
  meta: Lut4Meta,
): Promise<{ bytes: number; sha256: string; crc32: number }> {
  const { embed, head, layers, ...rest } = w;
  const tables: Lut4Tables = {
    ...rest,
    head: head ? "separate" : "tied",
    gains: layers.map((l) => ({ qGain: l.qGain, kGain: l.kGain })),
  };
  return writeLut4Streamed(path, w.shape, tables.head, meta, async (put) => {
    await put(embed);
    for (const l of layers) for (const m of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) await put(m);
    if (head) await put(head);
    return tables;
  });
}

/**
 * Writes a lut4 file atomically with its matrices handed over one at a time: `produce` calls `put`
 * with each matrix in file order (`inventory`), each written out before the next is made, and returns
 * the tables. Only the header, built at the end, is held: the data section goes to a temporary file
 * beside the target (its CRC-32 computed on the way), and the file is the framing, the header and
 * that section copied after it. Bytes equal `writeLut4`'s for the same weights.
 *
 * @example
 * ```ts
 * import { type Lut4Meta, writeLut4Streamed } from "./lut4.ts";
 * import type { Lut4Shape, Lut4Tables } from "../../quantize/lut4-types.ts";
 * import type { LutMatrix } from "../../kernels/int/gemv.ts";
 * declare const shape: Lut4Shape, meta: Lut4Meta, matrices: LutMatrix[], tables: Lut4Tables;
 * await writeLut4Streamed("out/m.lut4", shape, "tied", meta, async (put) => {
 *   for (const m of matrices) await put(m);
 *   return tables;
 * });
 * ```
 */
export async function writeLut4Streamed(
  path: string,
  shape: Lut4Shape,
  head: HeadMode,
  meta: Lut4Meta,
  produce: (put: (m: LutMatrix) => Promise<void>) => Promise<Lut4Tables>,
): Promise<{ bytes: number; sha256: string; crc32: number }> {
  // The reader requires both provenance keys: refuse here what could not be read back.
  if (typeof meta.source !== "string") {
    throw mismatch("WrongType", path, "source", "a string", JSON.stringify(meta.source));
  }
  const quantizer = meta.quantizer ?? {};
  if (typeof quantizer !== "object" || quantizer === null || Array.isArray(quantizer)) {
    throw mismatch("WrongType", path, "quantizer", "an object", JSON.stringify(quantizer));
  }
  if (meta.calibration) checkCalibration(meta.calibration, path);
  const tokenizer = meta.tokenizer ? encodeTokenizerSection(meta.tokenizer) : undefined;
  const section = await openDataSection(path);
  try {
    const inv = inventory(shape, head), dims = matrixDims(shape);
    const matrices: Lut4Header["matrices"] = [];
    const tables = await produce(async (m) => {
      const want = inv.matrices[matrices.length];
      if (m.name !== want) {
        throw mismatch("ShapeMismatch", path, `matrices[${matrices.length}].name`, want, m.name);
      }
      const [rows, cols] = dims[want];
      if (m.rows !== rows || m.cols !== cols) {
        throw mismatch("ShapeMismatch", path, m.name, `${rows} x ${cols}`, `${m.rows} x ${m.cols}`);
      }
      const nibbles = await section.put(m.nibbles), scales = await section.put(m.scales);
      matrices.push({ name: m.name, rows, cols, exp_base: m.expBase, nibbles, scales });
    });
    if (matrices.length !== inv.matrices.length) {
      throw mismatch(
        "ShapeMismatch",
        path,
        "matrices",
        `${inv.matrices.length} matrices for this shape`,
        matrices.length,
      );
    }
    const tableList = await putTables(tables, section);
    const header = lut4HeaderFor(
      tables,
      meta,
      quantizer,
      matrices,
      tableList,
      section.bytes(),
      section.crc(),
      tokenizer?.length,
    );
    return await section.writeFramed(framingOf(header), tokenizer);
  } finally {
    await section.abort();
  }
}

// The tables in the header's order (exp, silu, RoPE, each layer's gains, the final gain), appended.
async function putTables(w: Lut4Tables, section: DataSection): Promise<Lut4Header["tables"]> {
  const tables: Lut4Header["tables"] = [];
  const bytesOf = (a: Int16Array | Int32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const table = async (name: string, a: Int16Array | Int32Array, exp: number) =>
    tables.push({
      name,
      kind: a instanceof Int16Array ? "i16" : "i32",
      length: a.length,
      exp,
      span: await section.put(bytesOf(a)),
    });
  await table("exp", w.exp, -TABLES.expQ);
  await table("silu", w.silu, -TABLES.siluQ);
  await table("rope_cos", w.ropeCos, -TABLES.ropeQ);
  await table("rope_sin", w.ropeSin, -TABLES.ropeQ);
  for (const [i, g] of w.gains.entries()) {
    await table(`layers.${i}.q_gain`, g.qGain.values, g.qGain.exp);
    await table(`layers.${i}.k_gain`, g.kGain.values, g.kGain.exp);
  }
  if (w.finalGain) await table("final_gain", w.finalGain.values, w.finalGain.exp);
  return tables;
}

// The header a writer writes for these tables, spans and data section.
function lut4HeaderFor(
  w: Lut4Tables,
  meta: Lut4Meta,
  quantizer: Record<string, unknown>,
  matrices: Lut4Header["matrices"],
  tables: Lut4Header["tables"],
  dataBytes: number,
  dataCrc32: number,
  tokenizerBytes: number | undefined,
): Lut4Header {
  const s = w.shape;
  return {
    schema: tokenizerBytes === undefined ? LUT4_SCHEMA : LUT4_SCHEMA_TOKENIZER,
    shape: {
      vocab: s.vocab,
      width: s.width,
      layers: s.layers,
      heads: s.heads,
      kv_heads: s.kvHeads,
      head_dim: s.headDim,
      ffn: s.ffn,
      max_positions: s.maxPositions,
    },
    rope_theta: meta.ropeTheta,
    rms_norm_eps: meta.rmsNormEps,
    rms_eps: { mantissa: w.epsMantissa, exp: w.epsExp },
    head: w.head,
    exp_step_log2: TABLES.expStepLog2,
    exp_q: TABLES.expQ,
    silu_step_log2: TABLES.siluStepLog2,
    silu_range_log2: TABLES.siluRangeLog2,
    silu_q: TABLES.siluQ,
    rope_q: TABLES.ropeQ,
    matrices,
    tables,
    data_bytes: dataBytes,
    data_crc32: dataCrc32,
    source: meta.source,
    quantizer,
    ...(meta.calibration ? { calibration: meta.calibration } : {}),
    ...(tokenizerBytes === undefined ? {} : { tokenizer: { bytes: tokenizerBytes } }),
  };
}

/** A data section being written to a temporary file: spans appended, 64-aligned and zero-padded. */
interface DataSection {
  /** Appends bytes (then zeros up to a multiple of 64) and returns their span. */
  put(bytes: Uint8Array): Promise<Span>;
  bytes(): number;
  crc(): number;
  /**
   * Writes the file atomically: `framing` (magic, length, header), then the section, then the tokenizer
   * section when there is one; removes the temporary.
   */
  writeFramed(
    framing: Uint8Array[],
    tokenizer?: Uint8Array,
  ): Promise<{ bytes: number; sha256: string; crc32: number }>;
  /** Removes the temporary (a no-op once written). */
  abort(): Promise<void>;
}

/** Bytes per read when the data section is copied into the file. */
const COPY_CHUNK = 8 << 20;

// The section goes to `path.data`'s atomic temporary (removed on every exit, and by the next writer if
// this one is killed), which is never renamed: it is copied after the header and deleted.
async function openDataSection(path: string): Promise<DataSection> {
  const spool = `${path}.data`, spoolTemp = `${spool}.${process.pid}.tmp`;
  const out = await openAtomic(spool);
  let at = 0, crc = 0;
  const zeros = new Uint8Array(ALIGN);
  const append = async (b: Uint8Array) => {
    await out.write(b);
    crc = crc32(b, crc);
    at += b.length;
  };
  return {
    async put(bytes) {
      const span = { offset: at, bytes: bytes.length };
      await append(bytes);
      if (align(at) > at) await append(zeros.subarray(0, align(at) - at));
      return span;
    },
    bytes: () => at,
    crc: () => crc >>> 0,
    async writeFramed(framing, tokenizer) {
      const file = await openAtomic(path), sha = createHash("sha256");
      let bytes = 0;
      try {
        for (const c of framing) await file.write(c), sha.update(c), bytes += c.length;
        const fh = await open(spoolTemp, "r");
        try {
          const buf = new Uint8Array(Math.min(COPY_CHUNK, Math.max(at, 1)));
          for (let off = 0; off < at;) {
            const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, at - off), off);
            if (bytesRead === 0) throw new Error(`${spoolTemp}: ended at ${off} of ${at} bytes`);
            const chunk = buf.subarray(0, bytesRead);
            await file.write(chunk), sha.update(chunk);
            off += bytesRead, bytes += bytesRead;
          }
        } finally {
          await fh.close();
        }
        if (tokenizer) await file.write(tokenizer), sha.update(tokenizer), bytes += tokenizer.length;
        await file.commit();
      } catch (e) {
        await file.abort();
        throw e;
      }
      return { bytes, sha256: sha.digest("hex"), crc32: crc >>> 0 };
    },
    abort: () => out.abort(),
  };
}

// The file's first bytes: magic, header length, the JSON header padded with spaces (still JSON) so that
// the data section (which follows) starts on a 64-byte boundary. The padding counts UTF-8 bytes: a
// `source` with a non-ASCII character is longer in bytes than in characters.
function framingOf(header: Lut4Header): Uint8Array[] {
  const json = new TextEncoder().encode(JSON.stringify(header));
  const headBytes = new Uint8Array(align(16 + json.length) - 16).fill(0x20);
  headBytes.set(json);
  const prefix = new Uint8Array(16);
  prefix.set(new TextEncoder().encode(LUT4_MAGIC));
  new DataView(prefix.buffer).setBigUint64(8, BigInt(headBytes.length), true);
  return [prefix, headBytes];
}

/** The largest KV cache (keys, values and their exponents, bytes) a lut4 file of `fileBytes` may imply. */
export function maxCacheBytes(fileBytes: number): number {
  return 16 * fileBytes + (16 << 20);
}

function int(v: unknown, path: string, field: string, lo: number, hi: number): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < lo || v > hi) {
    throw mismatch("InvalidValue", path, field, `an integer in [${lo}, ${hi}]`, JSON.stringify(v));
  }
  return v;
}

/**
 * Parses and checks a lut4 file's bytes and hashes them: `checkLut4`, then the SHA-256 of every byte
 * (the model's identity). Hands out nothing until every check has passed.
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * import { parseLut4 } from "./lut4.ts";
 * const file = parseLut4(new Uint8Array(readFileSync("out/ferry.lut4")), "out/ferry.lut4");
 * file.weights.shape.layers; // 4
 * ```
 */
export function parseLut4(bytes: Uint8Array, path: string): Lut4File {
  const checked = checkLut4(bytes, path);
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return { ...checked, sha256: createHash("sha256").update(view).digest("hex") };
}

/** A lut4 file read and checked, all but its SHA-256 (`checkLut4`). */
export type Lut4Checked = Omit<Lut4File, "sha256">;

/**
 * Checks a lut4 file's bytes, everything but its SHA-256; hands out nothing until every check has passed.
 * The checks run in the spec's order ("Limits a reader enforces"), one step each: the framing, the header
 * (JSON, schema, provenance), the data section, the shape, the fixed parameters, the matrices and tables
 * with their spans, the tables' values, and the float config. The digest, an identity rather than a check,
 * is the caller's: `parseLut4` hashes here, and the browser tab's worker takes Web Crypto's, computed on
 * another thread while these checks run.
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * import { checkLut4 } from "./lut4.ts";
 * const file = checkLut4(new Uint8Array(readFileSync("out/ferry.lut4")), "out/ferry.lut4");
 * file.weights.shape.layers; // 4
 * ```
 */
export function checkLut4(bytes: Uint8Array, path: string): Lut4Checked {
  return checkLut4Reusing(bytes, path);
}

/**
 * A tokenizer section `readLut4` has already checked and decoded from the same bytes (`decodeTokenizerSection`
 * on `bytes[at, at + length)` against a vocabulary of `vocab`), which nothing has written since.
 */
interface DecodedSection {
  at: number;
  length: number;
  vocab: number;
  files: TokenizerFiles;
}

// `checkLut4`, taking the tokenizer section's files from `decoded` where it is that very section, decoded
// against the config's vocabulary: its checks and decoding (11 MB of text at Qwen3's size) are not run twice.
function checkLut4Reusing(bytes: Uint8Array, path: string, decoded?: DecodedSection): Lut4Checked {
  // A plain Uint8Array view: node's Buffer.slice would share memory where we mean to copy.
  const file = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { header: headerBytes, data: rest } = lut4Framing(file, path);
  const h = lut4Header(headerBytes, path);
  const { data, section } = splitSection(h, rest, path);
  checkDataSection(h, data, path);
  const shape = lut4Shape(h.shape, file.length, path);
  const fixed = fixedParameters(h, path);
  const inv = inventory(shape, fixed.head);
  if (!Array.isArray(h.matrices) || !Array.isArray(h.tables)) {
    throw new Lut4Error(path, "WrongType", "matrices", "matrices and tables must be arrays", {
      expected: "two arrays",
      found: `${kindOf(h.matrices)} and ${kindOf(h.tables)}`,
    });
  }
  const spans = spanCutter(data, path);
  const mats = lut4Matrices(h.matrices, inv.matrices, shape, spans, path);
  const tabs = lut4Tables(h.tables, inv.tables, shape, spans, path);
  spans.finish();
  const m = (n: string) => mats.get(n)!;
  const g = (n: string): GainTable => ({ values: tabs.get(n)!.data as Int16Array, exp: tabs.get(n)!.exp });
  const weights: Lut4Weights = {
    shape,
    epsMantissa: fixed.epsMantissa,
    epsExp: fixed.epsExp,
    embed: m("embed"),
    head: fixed.head === "separate" ? m("head") : null,
    finalGain: fixed.head === "tied" ? g("final_gain") : null,
    layers: Array.from({ length: shape.layers }, (_, i) => ({
      q: m(`layers.${i}.q`),
      k: m(`layers.${i}.k`),
      v: m(`layers.${i}.v`),
      o: m(`layers.${i}.o`),
      gate: m(`layers.${i}.gate`),
      up: m(`layers.${i}.up`),
      down: m(`layers.${i}.down`),
      qGain: g(`layers.${i}.q_gain`),
      kGain: g(`layers.${i}.k_gain`),
    })),
    exp: tabs.get("exp")!.data as Int32Array,
    silu: tabs.get("silu")!.data as Int32Array,
    siluHalf: 2 ** (TABLES.siluRangeLog2 - TABLES.siluStepLog2),
    ropeCos: tabs.get("rope_cos")!.data as Int16Array,
    ropeSin: tabs.get("rope_sin")!.data as Int16Array,
  };
  checkTableValues(weights, path);
  const config = lut4Config(h, weights, path);
  const same = decoded !== undefined && section !== undefined &&
    decoded.at === section.byteOffset - file.byteOffset && decoded.length === section.length &&
    decoded.vocab === config.vocab_size;
  const tokenizer = same ? decoded.files : section &&
    decodeTokenizerSection(
      section,
      path,
      config.vocab_size,
      (code, f, why, d) => new Lut4Error(path, code, f, why, d),
    );
  return {
    path,
    header: h,
    weights,
    config,
    bytes: file.length,
    ...(tokenizer ? { tokenizer } : {}),
  };
}

// Schema `/2`: the bytes after the header are the data section, then the tokenizer section whose
// length the header's `tokenizer.bytes` states. Schema `/1`: all of them are the data section.
function splitSection(
  h: Lut4Header,
  rest: Uint8Array,
  path: string,
): { data: Uint8Array; section?: Uint8Array } {
  const bytes = sectionBytes(h, rest.length, path);
  if (bytes === 0) return { data: rest };
  return { data: rest.subarray(0, rest.length - bytes), section: rest.subarray(rest.length - bytes) };
}

// The tokenizer section's length (0 for schema `/1`), of the `rest` bytes after the header.
function sectionBytes(h: Lut4Header, rest: number, path: string): number {
  if (h.schema !== LUT4_SCHEMA_TOKENIZER) return 0;
  const t = h.tokenizer as unknown;
  if (typeof t !== "object" || t === null || Array.isArray(t)) {
    throw mismatch("WrongType", path, "tokenizer", "an object {bytes}", JSON.stringify(t));
  }
  return int((t as { bytes: unknown }).bytes, path, "tokenizer.bytes", 16, rest);
}

function kindOf(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : typeof v;
}

// Step 1, the framing: the magic, a header length that fits the file and the limit, a 64-aligned data section.
function lut4Framing(file: Uint8Array, path: string): { header: Uint8Array; data: Uint8Array } {
  const start = 16 + headerLength(file.subarray(0, 16), file.length, path);
  return { header: file.subarray(16, start), data: file.subarray(start) };
}

// The framing from a file's first 16 bytes and its size: the header's length, once it fits and aligns.
function headerLength(first: Uint8Array, size: number, path: string): number {
  if (size < 16) {
    throw new Lut4Error(path, "Truncated", "magic", `file of ${size} bytes is too short for the framing`, {
      expected: "at least 16 bytes",
      found: `${size} bytes`,
    });
  }
  const magic = decodeShared(new TextDecoder(), first.subarray(0, 8));
  if (magic !== LUT4_MAGIC) {
    throw new Lut4Error(path, "BadMagic", "magic", `expected ${LUT4_MAGIC}, this is not a lut4 file`, {
      expected: LUT4_MAGIC,
      found: JSON.stringify(magic),
    });
  }
  const hlen = new DataView(first.buffer, first.byteOffset, first.byteLength).getBigUint64(8, true);
  const room = Math.min(MAX_HEADER_BYTES, size - 16);
  if (hlen > BigInt(room)) {
    throw new Lut4Error(
      path,
      "Truncated",
      "header_length",
      `${hlen} bytes does not fit the file (${size} bytes, limit 64 MiB)`,
      { expected: `at most ${room} bytes`, found: `${hlen} bytes` },
    );
  }
  const start = 16 + Number(hlen);
  if (start % ALIGN !== 0) {
    throw new Lut4Error(
      path,
      "Misaligned",
      "header_length",
      `data section at ${start} is not 64-byte aligned`,
      {
        expected: "16 + header_length a multiple of 64",
        found: String(start),
      },
    );
  }
  return Number(hlen);
}

// Step 2, the header: one UTF-8 JSON object (strict JSON, nesting bounded), ferry's schema, and the
// provenance keys that no later step reads (`source`, `quantizer`) present with their types.
function lut4Header(bytes: Uint8Array, path: string): Lut4Header {
  const raw = jsonHeader(bytes, (code, why, detail) => {
    throw new Lut4Error(path, code, "header", why, detail);
  });
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new Lut4Error(path, "WrongType", "header", "not a JSON object", {
      expected: "a JSON object",
      found: kindOf(raw),
    });
  }
  const h = raw as Lut4Header;
  if (!SCHEMAS.includes(h.schema)) {
    throw new Lut4Error(
      path,
      "UnsupportedVersion",
      "schema",
      `expected ${SCHEMAS.join(" or ")}, got ${
        JSON.stringify(h.schema)
      } (ferry serves only its Qwen3 schema)`,
      { expected: SCHEMAS.join(" or "), found: String(JSON.stringify(h.schema)) },
    );
  }
  if (typeof h.source !== "string") {
    throw mismatch("WrongType", path, "source", "a string", JSON.stringify(h.source));
  }
  if (typeof h.quantizer !== "object" || h.quantizer === null || Array.isArray(h.quantizer)) {
    throw mismatch("WrongType", path, "quantizer", "an object", JSON.stringify(h.quantizer));
  }
  if (h.calibration !== undefined) checkCalibration(h.calibration, path);
  return h;
}

const positive = (v: unknown) => Number.isSafeInteger(v) && (v as number) > 0;

/** The `calibration` record's keys, whether each is required, and what each must be. */
const CALIBRATION_KEYS: Record<keyof CalibrationRecord, [boolean, string, (v: unknown) => boolean]> = {
  source: [true, "a string", (v) => typeof v === "string"],
  windows: [true, "a positive integer", positive],
  window_tokens: [false, "a positive integer", positive],
  tokens: [false, "a positive integer", positive],
  window_bytes: [false, "a positive integer", positive],
  seed: [
    true,
    "an integer in [0, 2^32)",
    (v) => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) < 2 ** 32,
  ],
};

// Informational like `quantizer` (nothing serves from it), but typed: a record that says what data the
// file was calibrated on must say it in the spec's terms. A window's size is `window_tokens` with
// `tokens` (files from any tokenizer's calibration) or `window_bytes` (earlier files).
function checkCalibration(c: unknown, path: string): void {
  if (typeof c !== "object" || c === null || Array.isArray(c)) {
    throw mismatch("WrongType", path, "calibration", "an object", JSON.stringify(c));
  }
  const r = c as Record<string, unknown>;
  for (const [key, [required, what, ok]] of Object.entries(CALIBRATION_KEYS)) {
    if (!required && r[key] === undefined) continue;
    if (!ok(r[key])) throw mismatch("InvalidValue", path, `calibration.${key}`, what, JSON.stringify(r[key]));
  }
  const missing = r.window_tokens === undefined
    ? (r.window_bytes === undefined ? "window_tokens" : undefined)
    : (r.tokens === undefined ? "tokens" : undefined);
  if (missing) throw mismatch("MissingField", path, `calibration.${missing}`, "a positive integer", "absent");
}

// Step 3, the data section: its length as the header says and a multiple of 64, its CRC-32 as stated,
// before any byte of it is used.
function checkDataSection(h: Lut4Header, data: Uint8Array, path: string): void {
  checkDataLength(h, data.length, path);
  checkDataCrc(h, crc32(data) >>> 0, path);
}

function checkDataLength(h: Lut4Header, length: number, path: string): void {
  if (h.data_bytes !== length) {
    throw new Lut4Error(
      path,
      "SizeMismatch",
      "data_bytes",
      `header says ${h.data_bytes}, the file holds ${length}`,
      {
        expected: String(length),
        found: String(JSON.stringify(h.data_bytes)),
      },
    );
  }
  if (length % ALIGN !== 0) {
    throw new Lut4Error(path, "Misaligned", "data_bytes", `${length} is not a multiple of 64`, {
      expected: "a multiple of 64",
      found: String(length),
    });
  }
}

function checkDataCrc(h: Lut4Header, crc: number, path: string): void {
  if (crc !== h.data_crc32) {
    throw new Lut4Error(
      path,
      "ChecksumMismatch",
      "data_crc32",
      `the data section's CRC-32 is ${crc}, the header says ${h.data_crc32}: corrupt`,
      { expected: String(crc), found: String(JSON.stringify(h.data_crc32)) },
    );
  }
}

// Step 4, the shape: each dim an integer in its range, the divisibility the kernels need, and a KV
// cache the file's size justifies.
function lut4Shape(raw: unknown, fileBytes: number, path: string): Lut4Shape {
  const sh = (raw ?? {}) as Lut4Header["shape"];
  const shape: Lut4Shape = {
    vocab: int(sh.vocab, path, "shape.vocab", 1, 1 << 20),
    width: int(sh.width, path, "shape.width", LUT4_GROUP, 1 << 14),
    layers: int(sh.layers, path, "shape.layers", 1, 1024),
    heads: int(sh.heads, path, "shape.heads", 1, 1024),
    kvHeads: int(sh.kv_heads, path, "shape.kv_heads", 1, 1024),
    headDim: int(sh.head_dim, path, "shape.head_dim", 2, 256),
    ffn: int(sh.ffn, path, "shape.ffn", LUT4_GROUP, 1 << 16),
    maxPositions: int(sh.max_positions, path, "shape.max_positions", 1, MAX_LUT4_POSITIONS),
  };
  const refuse = (field: string, why: string, expected: string, found: number) => {
    throw new Lut4Error(path, "InvalidShape", field, why, { expected, found: String(found) });
  };
  // Every matrix's columns are whole groups of one scale (quantize/lut4-quantize.ts `notWholeGroups`).
  const groups = (field: string, n: number, what: string, expected: string) => {
    const why = notWholeGroups(n, what);
    if (why) refuse(field, why, expected, n);
  };
  groups("shape.width", shape.width, `${shape.width}`, `a multiple of ${LUT4_GROUP}`);
  groups("shape.ffn", shape.ffn, `${shape.ffn}`, `a multiple of ${LUT4_GROUP}`);
  if (shape.headDim % 2) {
    refuse(
      "shape.head_dim",
      `${shape.headDim} is odd; RoPE pairs dimensions`,
      "an even number",
      shape.headDim,
    );
  }
  if (shape.heads % shape.kvHeads) {
    refuse(
      "shape.kv_heads",
      `${shape.kvHeads} does not divide heads = ${shape.heads}`,
      `a divisor of heads = ${shape.heads}`,
      shape.kvHeads,
    );
  }
  groups(
    "shape.heads",
    shape.heads * shape.headDim,
    "heads · head_dim",
    `heads · head_dim a multiple of ${LUT4_GROUP}`,
  );
  // The engine sizes its KV cache from the shape, not from the file: a small forged file claiming a long
  // context and many kv heads would have it allocate gigabytes. The cache must be justified by the file.
  const cacheBytes = shape.layers * shape.maxPositions * shape.kvHeads * (shape.headDim + 1) * 4;
  if (cacheBytes > maxCacheBytes(fileBytes)) {
    throw new Lut4Error(
      path,
      "InvalidShape",
      "shape",
      `layers · max_positions · kv_heads · (head_dim + 1) · 4 = ${cacheBytes} bytes of KV cache exceeds ` +
        `${maxCacheBytes(fileBytes)} (16 × the file's ${fileBytes} bytes + 16 MiB)`,
      { expected: `a KV cache of at most ${maxCacheBytes(fileBytes)} bytes`, found: `${cacheBytes} bytes` },
    );
  }
  return shape;
}

// Step 5, the fixed parameters: the table parameters this engine serves, the head mode, rms_eps's range.
function fixedParameters(
  h: Lut4Header,
  path: string,
): { head: HeadMode; epsMantissa: number; epsExp: number } {
  const fixed: [keyof Lut4Header, number][] = [
    ["exp_step_log2", TABLES.expStepLog2],
    ["exp_q", TABLES.expQ],
    ["silu_step_log2", TABLES.siluStepLog2],
    ["silu_range_log2", TABLES.siluRangeLog2],
    ["silu_q", TABLES.siluQ],
    ["rope_q", TABLES.ropeQ],
  ];
  for (const [k, v] of fixed) {
    if (h[k] !== v) {
      throw mismatch("Unsupported", path, k, `${v} (the one value this engine serves)`, JSON.stringify(h[k]));
    }
  }
  if (h.head !== "tied" && h.head !== "separate") {
    throw mismatch("InvalidValue", path, "head", `"tied" or "separate"`, JSON.stringify(h.head));
  }
  const eps = h.rms_eps ?? {};
  return {
    head: h.head,
    epsMantissa: int(eps.mantissa, path, "rms_eps.mantissa", 1 << 15, 65535),
    epsExp: int(eps.exp, path, "rms_eps.exp", -120, 0),
  };
}

/** Cuts spans out of the data section in header order, and checks that what lies between them is zero. */
interface SpanCutter {
  /** The bytes of span `s` (named `field`), which must be `want` bytes long. */
  take(s: Span | undefined, field: string, want: number): Uint8Array;
  /** Checks the bytes after the last span. */
  finish(): void;
}

// Step 6, the spans: inside the data section, 64-aligned, in increasing order without overlap, and
// zero bytes in the padding and gaps between them, so one model has one data section (and one SHA-256).
function spanCutter(data: Uint8Array, path: string): SpanCutter {
  const dataBytes = data.length;
  let end = 0;
  const zeros = (from: number, to: number, field: string) => {
    for (let i = from; i < to; i++) {
      if (data[i] !== 0) {
        throw new Lut4Error(
          path,
          "NonZeroPadding",
          field,
          `byte ${i} of the data section is padding before this span, not 0`,
          {
            expected: "0",
            found: String(data[i]),
          },
        );
      }
    }
  };
  return {
    take(s, field, want) {
      if (!s || typeof s !== "object") {
        throw new Lut4Error(path, "MissingField", field, "missing span", {
          expected: "a span {offset, bytes}",
          found: kindOf(s),
        });
      }
      const off = int(s.offset, path, `${field}.offset`, 0, dataBytes);
      const n = int(s.bytes, path, `${field}.bytes`, 0, dataBytes);
      if (n !== want) throw mismatch("SizeMismatch", path, `${field}.bytes`, want, n);
      if (off % ALIGN) {
        throw new Lut4Error(path, "Misaligned", `${field}.offset`, `${off} is not 64-byte aligned`, {
          expected: "a multiple of 64",
          found: String(off),
        });
      }
      if (off < end) {
        throw new Lut4Error(
          path,
          "InvalidOffset",
          `${field}.offset`,
          `${off} overlaps the span before it (ends at ${end})`,
          {
            expected: `at least ${end}`,
            found: String(off),
          },
        );
      }
      if (off + n > dataBytes) {
        throw new Lut4Error(
          path,
          "InvalidOffset",
          field,
          `span [${off}, ${off + n}) runs past the data section (${dataBytes})`,
          {
            expected: `a span inside [0, ${dataBytes})`,
            found: `[${off}, ${off + n})`,
          },
        );
      }
      zeros(end, off, field);
      end = off + n;
      return data.subarray(off, off + n);
    },
    finish: () => zeros(end, dataBytes, "data_bytes"),
  };
}

// The rows × cols of every matrix a shape implies, by name.
function matrixDims(shape: Lut4Shape): Record<string, [number, number]> {
  const qDim = shape.heads * shape.headDim, kvDim = shape.kvHeads * shape.headDim;
  const dims: Record<string, [number, number]> = {
    embed: [shape.vocab, shape.width],
    head: [shape.vocab, shape.width],
  };
  for (let i = 0; i < shape.layers; i++) {
    const p = `layers.${i}.`;
    Object.assign(dims, {
      [p + "q"]: [qDim, shape.width],
      [p + "k"]: [kvDim, shape.width],
      [p + "v"]: [kvDim, shape.width],
      [p + "o"]: [shape.width, qDim],
      [p + "gate"]: [shape.ffn, shape.width],
      [p + "up"]: [shape.ffn, shape.width],
      [p + "down"]: [shape.width, shape.ffn],
    });
  }
  return dims;
}

// Step 7, the matrices: exactly the inventory's, in order, each with its dims, exp_base and two spans.
function lut4Matrices(
  list: Lut4Header["matrices"],
  names: string[],
  shape: Lut4Shape,
  spans: SpanCutter,
  path: string,
): Map<string, LutMatrix> {
  if (list.length !== names.length) {
    throw mismatch("ShapeMismatch", path, "matrices", `${names.length} matrices for this shape`, list.length);
  }
  const dims = matrixDims(shape);
  const mats = new Map<string, LutMatrix>();
  list.forEach((m, i) => {
    if (m?.name !== names[i]) {
      throw mismatch("ShapeMismatch", path, `matrices[${i}].name`, names[i], JSON.stringify(m?.name));
    }
    const [rows, cols] = dims[m.name];
    if (m.rows !== rows || m.cols !== cols) {
      throw mismatch("ShapeMismatch", path, m.name, `${rows} x ${cols}`, `${m.rows} x ${m.cols}`);
    }
    const expBase = int(m.exp_base, path, `${m.name}.exp_base`, -100, 60);
    const nibbles = spans.take(m.nibbles, `${m.name}.nibbles`, (rows * cols) / 2);
    const scales = spans.take(m.scales, `${m.name}.scales`, (rows * cols) / LUT4_GROUP);
    mats.set(m.name, { name: m.name, rows, cols, expBase, nibbles, scales });
  });
  return mats;
}

// The kind, length and (when fixed; gains carry their own) exponent of every table a shape implies.
function tableKinds(shape: Lut4Shape): Record<string, ["i16" | "i32", number, number | null]> {
  const half = shape.headDim / 2;
  const siluHalf = 2 ** (TABLES.siluRangeLog2 - TABLES.siluStepLog2);
  const want: Record<string, ["i16" | "i32", number, number | null]> = {
    exp: ["i32", TABLES.expRangeNats * 256 + 2, -TABLES.expQ],
    silu: ["i32", 2 * siluHalf + 1, -TABLES.siluQ],
    rope_cos: ["i16", shape.maxPositions * half, -TABLES.ropeQ],
    rope_sin: ["i16", shape.maxPositions * half, -TABLES.ropeQ],
    final_gain: ["i16", shape.width, null],
  };
  for (let i = 0; i < shape.layers; i++) {
    want[`layers.${i}.q_gain`] = ["i16", shape.headDim, null];
    want[`layers.${i}.k_gain`] = ["i16", shape.headDim, null];
  }
  return want;
}

// Step 8, the tables: exactly the inventory's, in order, each with its kind, length, exponent and span.
function lut4Tables(
  list: Lut4Header["tables"],
  names: string[],
  shape: Lut4Shape,
  spans: SpanCutter,
  path: string,
): Map<string, { data: Int16Array | Int32Array; exp: number }> {
  if (list.length !== names.length) {
    throw mismatch("ShapeMismatch", path, "tables", `${names.length} tables for this shape`, list.length);
  }
  const want = tableKinds(shape);
  const tabs = new Map<string, { data: Int16Array | Int32Array; exp: number }>();
  list.forEach((t, i) => {
    if (t?.name !== names[i]) {
      throw mismatch("ShapeMismatch", path, `tables[${i}].name`, names[i], JSON.stringify(t?.name));
    }
    const [kind, length, fixedExp] = want[t.name];
    if (t.kind !== kind || t.length !== length) {
      throw mismatch(
        "ShapeMismatch",
        path,
        t.name,
        `${kind} x ${length}`,
        `${JSON.stringify(t.kind)} x ${JSON.stringify(t.length)}`,
      );
    }
    const exp = int(t.exp, path, `${t.name}.exp`, -100, 60);
    if (fixedExp !== null && exp !== fixedExp) {
      throw mismatch("InvalidValue", path, `${t.name}.exp`, fixedExp, exp);
    }
    const bytes = spans.take(t.span, `${t.name}.span`, length * (kind === "i16" ? 2 : 4)).slice();
    const data = kind === "i16" ? new Int16Array(bytes.buffer) : new Int32Array(bytes.buffer);
    tabs.set(t.name, { data, exp });
  });
  return tabs;
}

// Step 9, the tables' values: the exp table falls from 2^30 (softmax bounds rely on it), SiLU stays
// within ±2^22, RoPE within ±2^14.
function checkTableValues(w: Lut4Weights, path: string): void {
  if (w.exp[0] !== 2 ** 30) {
    throw new Lut4Error(path, "InvalidTable", "exp", `entry 0 must be 2^30, got ${w.exp[0]}`, {
      expected: String(2 ** 30),
      found: String(w.exp[0]),
    });
  }
  for (let i = 1; i < w.exp.length; i++) {
    if (w.exp[i] < 0 || w.exp[i] > w.exp[i - 1]) {
      throw new Lut4Error(path, "InvalidTable", "exp", `entry ${i} is not in [0, entry ${i - 1}]`, {
        expected: `[0, ${w.exp[i - 1]}]`,
        found: String(w.exp[i]),
      });
    }
  }
  for (const v of w.silu) {
    if (v > 1 << 22 || v < -(1 << 22)) {
      throw new Lut4Error(path, "InvalidTable", "silu", `entry ${v} outside ±2^22`, {
        expected: "within ±2^22",
        found: String(v),
      });
    }
  }
  for (const t of [w.ropeCos, w.ropeSin]) {
    for (const v of t) {
      if (v > 16384 || v < -16384) {
        throw new Lut4Error(path, "InvalidTable", "rope", `entry ${v} outside ±2^14`, {
          expected: "within ±2^14",
          found: String(v),
        });
      }
    }
  }
}

// Step 10, the float model's config: the shape with rope_theta and rms_norm_eps through the config
// check, and rms_eps exactly rms_norm_eps in fixed point (the engine and the float model use one epsilon).
function lut4Config(h: Lut4Header, w: Lut4Weights, path: string): ModelConfig {
  const shape = w.shape;
  let config: ModelConfig;
  try {
    config = validateConfig({
      vocab_size: shape.vocab,
      hidden_size: shape.width,
      intermediate_size: shape.ffn,
      num_hidden_layers: shape.layers,
      num_attention_heads: shape.heads,
      num_key_value_heads: shape.kvHeads,
      head_dim: shape.headDim,
      rms_norm_eps: h.rms_norm_eps,
      rope_theta: h.rope_theta,
      max_position_embeddings: shape.maxPositions,
      tie_word_embeddings: h.head === "tied",
    }, path);
  } catch (e) {
    throw new Lut4Error(
      path,
      "InvalidConfig",
      "header",
      messageWithoutCode(e),
      e instanceof FormatError ? e : undefined,
    );
  }
  const epsWant = epsFixed(config.rms_norm_eps);
  if (w.epsMantissa !== epsWant.mantissa || w.epsExp !== epsWant.exp) {
    const asFixed = (m: number, e: number) => `{mantissa: ${m}, exp: ${e}}`;
    throw mismatch(
      "InvalidValue",
      path,
      "rms_eps",
      `${asFixed(epsWant.mantissa, epsWant.exp)} (rms_norm_eps = ${config.rms_norm_eps} in fixed point)`,
      asFixed(w.epsMantissa, w.epsExp),
    );
  }
  return config;
}

/** How `readLut4` reads: where the bytes land, and who hears of the tokenizer while the rest is read. */
export interface ReadLut4Options {
  /**
   * A view of exactly `size` bytes for the file (default: a new `Uint8Array`). The integer engine hands
   * a view of its WebAssembly memory, so the bytes land once, where they are served from.
   */
  into?: (size: number) => Uint8Array;
  /**
   * Told the tokenizer files as soon as the tokenizer section has passed its own checks (framing,
   * CRC-32, the files against the header's vocabulary), while the weights are still being read, so a
   * caller can build the tokenizer meanwhile. The file as a whole is checked only when `readLut4`
   * resolves: what a caller builds here it must throw away if the read rejects. Not called for a file
   * without a tokenizer, nor where the section or the header before it is refused (the full checks
   * then name what is wrong, as for any read).
   */
  onTokenizer?: (files: TokenizerFiles) => void;
}

/**
 * Bytes per read of `readLut4`, all in flight at once. Few and large: each is a thread of the runtime
 * faulting fresh pages in, and on two cores ten reads of 32 MB slowed the caller's own work (checking
 * and building the tokenizer meanwhile) enough that a 328 MB load took 2.4 s under Deno against 2.15 s
 * with one read (medians of four, the 0.6B shape, a throwaway loop over this constant, 2026-12-04).
 */
const READ_CHUNK = 512 << 20;

/**
 * Reads and checks a lut4 file (`parseLut4`'s checks and digest). The reads are issued at once and run
 * off this thread; the SHA-256 runs on it over each piece as it arrives, unless a record of this very
 * file's digest is found (formats/digest-record.ts); a digest computed is recorded once the checks
 * pass. With `onTokenizer`, the header and the tokenizer section are read first, and the section is
 * checked and handed over (and decoded once: the full checks take it as it is) while the weights arrive.
 */
export async function readLut4(path: string, opts: ReadLut4Options = {}): Promise<Lut4File> {
  const fh = await open(path, "r");
  try {
    const seen = await fh.stat(), started = Date.now();
    const size = seen.size;
    const bytes = opts.into?.(size) ?? new Uint8Array(size);
    const short = () =>
      new Lut4Error(path, "Unreadable", "data_bytes", "the file ended early (it changed while read)");
    const ends = opts.onTokenizer ? await readEnds(fh, bytes, path, short) : undefined;
    // What is still to read: with `ends`, all but the header before it and the tokenizer section after.
    const from = ends?.head ?? 0, to = ends?.section ?? size;
    const reads = readChunks(fh, path, bytes.subarray(from, to), from, short);
    const recording = recordedDigest(seen);
    const decoded = ends?.decode();
    if (decoded) opts.onTokenizer!(decoded.files);
    const recorded = await recording;
    const sha = recorded ? undefined : createHash("sha256").update(bytes.subarray(0, from));
    for (const read of reads) {
      const piece = await read;
      sha?.update(piece);
    }
    sha?.update(bytes.subarray(to));
    const checked = checkLut4Reusing(bytes, path, decoded);
    const sha256 = recorded ?? sha!.digest("hex");
    if (!recorded) await recordDigest(path, seen, sha256, started);
    return { ...checked, sha256 };
  } finally {
    await fh.close();
  }
}

/** Reads of `into` from `position` in `READ_CHUNK` pieces, all issued now and run off this thread, in order. */
function readChunks(
  fh: Awaited<ReturnType<typeof open>>,
  path: string,
  into: Uint8Array,
  position: number,
  short: () => Error,
): Promise<Uint8Array>[] {
  const reads: Promise<Uint8Array>[] = [];
  for (let at = 0; at < into.length; at += READ_CHUNK) {
    const piece = into.subarray(at, Math.min(into.length, at + READ_CHUNK));
    const read = readExactAside(fh, path, piece, position + at, short);
    read.catch(() => {}); // awaited in order by the caller; this only stops a later rejection going unhandled
    reads.push(read);
  }
  return reads;
}

/**
 * Reads a lut4 file's framing and header, and its tokenizer section, into `bytes` at their places.
 * `head` is where the data section starts, `section` where the tokenizer section starts (the size when
 * there is none); `decode` checks and decodes the section, undefined where there is none or where any of
 * it is refused (the full checks then say why; `checkLut4Reusing` takes it as it is).
 */
async function readEnds(
  fh: Awaited<ReturnType<typeof open>>,
  bytes: Uint8Array,
  path: string,
  short: () => Error,
): Promise<{ head: number; section: number; decode: () => DecodedSection | undefined }> {
  const size = bytes.length;
  const first = await readExact(fh, bytes.subarray(0, Math.min(16, size)), 0, short);
  const none = () => undefined;
  let head = first.length;
  try {
    head = 16 + headerLength(first, size, path);
    const h = lut4Header(await readExact(fh, bytes.subarray(16, head), 16, short), path);
    const length = sectionBytes(h, size - head, path);
    if (length === 0) return { head, section: size, decode: none };
    const vocab = lut4Shape(h.shape, size, path).vocab;
    const section = await readExact(fh, bytes.subarray(size - length), size - length, short);
    const decode = () => {
      try {
        const error = (c: Lut4Refusal, f: string, why: string, d: RefusalDetail) =>
          new Lut4Error(path, c, f, why, d);
        return {
          at: size - length,
          length,
          vocab,
          files: decodeTokenizerSection(section, path, vocab, error),
        };
      } catch {
        return undefined; // refused again, and named, by the full checks
      }
    };
    return { head, section: size - length, decode };
  } catch {
    // Refused or unreadable: everything after the bytes read so far is read as data and checked whole.
    return { head, section: size, decode: none };
  }
}

/**
 * Only the tokenizer of a lut4 file, without parsing the rest: the framing, the header, the data
 * section's length and CRC-32 (streamed past, a few MiB at a time), the shape (for the vocabulary) and
 * the tokenizer section's own checks (magic, CRC-32 first, framing, the files against `shape.vocab`), as
 * `parseLut4` makes them; undefined for schema `/1` (a byte model). What a reader of the tokenizer alone
 * reads (a chat server's own thread, the float engine's load of a lut4 file); the integer engine takes
 * it from `readLut4`'s `onTokenizer`, in the same pass as the weights.
 *
 * @example
 * ```ts
 * import { readLut4Tokenizer } from "./lut4.ts";
 * const files = await readLut4Tokenizer("out/qwen3.q4.lut4"); // files?.["tokenizer.json"]
 * ```
 */
export async function readLut4Tokenizer(path: string): Promise<TokenizerFiles | undefined> {
  const fh = await open(path, "r");
  try {
    const size = (await fh.stat()).size;
    const at = async (position: number, length: number) => {
      const buf = new Uint8Array(length);
      const { bytesRead } = await fh.read(buf, 0, length, position);
      return buf.subarray(0, bytesRead);
    };
    const hlen = headerLength(await at(0, Math.min(16, size)), size, path);
    const h = lut4Header(await at(16, hlen), path);
    const bytes = sectionBytes(h, size - 16 - hlen, path);
    const dataBytes = size - 16 - hlen - bytes;
    checkDataLength(h, dataBytes, path);
    let crc = 0;
    const short = () =>
      new Lut4Error(path, "Unreadable", "data_bytes", "the file ended early (it changed while read)");
    for await (const chunk of chunksAt(fh, 16 + hlen, dataBytes, short)) crc = crc32(chunk, crc);
    checkDataCrc(h, crc >>> 0, path);
    if (bytes === 0) return undefined;
    const shape = lut4Shape(h.shape, size, path);
    const section = await at(size - bytes, bytes);
    return decodeTokenizerSection(
      section,
      path,
      shape.vocab,
      (code, f, why, d) => new Lut4Error(path, code, f, why, d),
    );
  } finally {
    await fh.close();
  }
}

/**
 * The float tensors a lut4 file stands for, under Hugging Face Qwen3 names: matrices and gains
 * dequantized exactly; the folded norms become the constant 1/sqrt(n) (ferry's norm divides by
 * sqrt(Σx²), the float norm by the RMS); k's gain is divided by sqrt(head_dim) again.
 */
export function dequantizeLut4(file: Lut4File): Tensor[] {
  const w = file.weights, s = w.shape;
  const out: Tensor[] = [];
  const flat = (name: string, v: number, n: number) =>
    out.push({ name, dims: [n], data: new Float32Array(n).fill(v) });
  const mat = (name: string, m: LutMatrix) =>
    out.push({ name, dims: [m.rows, m.cols], data: dequantizeMatrix(m) });
  const gain = (name: string, g: GainTable, f = 1) =>
    out.push({
      name,
      dims: [g.values.length],
      data: Float32Array.from(g.values, (v) => (v * 2 ** g.exp) / f),
    });
  const invRootW = 1 / Math.sqrt(s.width);
  mat("model.embed_tokens.weight", w.embed);
  w.layers.forEach((l, i) => {
    const p = `model.layers.${i}.`;
    flat(p + "input_layernorm.weight", invRootW, s.width);
    mat(p + "self_attn.q_proj.weight", l.q);
    mat(p + "self_attn.k_proj.weight", l.k);
    mat(p + "self_attn.v_proj.weight", l.v);
    gain(p + "self_attn.q_norm.weight", l.qGain);
    gain(p + "self_attn.k_norm.weight", l.kGain, Math.sqrt(s.headDim));
    mat(p + "self_attn.o_proj.weight", l.o);
    flat(p + "post_attention_layernorm.weight", invRootW, s.width);
    mat(p + "mlp.gate_proj.weight", l.gate);
    mat(p + "mlp.up_proj.weight", l.up);
    mat(p + "mlp.down_proj.weight", l.down);
  });
  if (w.finalGain) gain("model.norm.weight", w.finalGain, Math.sqrt(s.width));
  else flat("model.norm.weight", invRootW, s.width);
  if (w.head) mat("lm_head.weight", w.head);
  return out;
}

/** Export options: the head stored once (tied, final-norm gain at run time) or twice (gain folded). */
export const LUT4_DTYPES = ["q4", "q4-head"] as const;
export type Lut4Dtype = typeof LUT4_DTYPES[number];

/** The lut4 format for the registry: written by the quantizer, run by the integer engine. */
export const lut4Format: FormatDescriptor<Lut4Dtype> = {
  name: "lut4",
  summary: "4-bit codes, one-byte group scales and integer tables (UORLUT01 framing) for the integer engine",
  extension: ".lut4",
  recognises: (path) => path.endsWith(".lut4"),
  dtypes: LUT4_DTYPES,
  defaultDtype: "q4",
  weights: "lut4",
  calibrates: () => "covariance",
  lossy: () => Promise.resolve("4-bit codes"),
  cannotStore(config) {
    // Scales come one per group of LUT4_GROUP (32) along every matrix's input dimension.
    const widths = [
      ["hidden_size", config.hidden_size],
      ["intermediate_size", config.intermediate_size],
      ["num_attention_heads · head_dim", config.num_attention_heads * config.head_dim],
    ] as const;
    for (const [field, n] of widths) {
      if (notWholeGroups(n, field)) {
        return {
          field,
          expected: `a multiple of ${LUT4_GROUP} (one scale per ${LUT4_GROUP} weights)`,
          found: `${n}`,
        };
      }
    }
    // More positions than the reader's limit are capped, not refused (lut4ShapeOf; the summary says so).
    return null;
  },
  async write(path, input, options): Promise<WriteResult> {
    const { config } = input;
    const head: HeadMode = options.dtype === "q4-head" ? "separate" : "tied";
    let params = 0;
    for (const t of input.tensors) params += numel(t.dims);
    // The quantizer reads one matrix at a time, a block of rows at a time (formats/lut4/lut4.md, "The
    // quantizer"). Calibration statistics, when handed them: GPTQ error feedback on the calibration inputs.
    const sources = input.tensors, cal = options.calibration;
    const stored: HeadMode = head === "tied" && config.tie_word_embeddings ? "tied" : "separate";
    let errors: TensorError[] = [], done = 0;
    const meta = {
      source: input.source,
      ropeTheta: config.rope_theta,
      rmsNormEps: config.rms_norm_eps,
      quantizer: cal?.covariance
        ? { head, scale_search: "gptq", grid: "(16+m)*2^(e-4)", damp: GPTQ_DAMP }
        : { head, scale_search: cal ? "weighted-mse" : "mse", grid: "(16+m)*2^(e-4)" },
      calibration: cal?.record,
      ...(input.tokenizer ? { tokenizer: input.tokenizer } : {}),
    };
    // Workers only where a matrix spans several blocks of rows: a small model is not worth starting them.
    const size = input.tensors.some((t) => numel(t.dims) > BLOCK_VALUES) ? defaultPoolSize() : 0;
    const pool = size > 0 ? quantizePool(size) : undefined;
    // GPTQ on WebAssembly, its rows and factorisations split between the cores (the same bits on any number).
    const gptq = cal?.covariance && gptqPays(config) ? gptqEngine(gptqThreads()) : undefined;
    const r = await writeLut4Streamed(path, lut4ShapeOf(config), stored, meta, async (put) => {
      await gptq?.ready;
      const opts = { head, covariance: cal?.covariance, importance: cal?.importance, pool, gptq };
      const out = await quantizeModelStreamed(config, sources, opts, async (m) => {
        await put(m);
        // In values, as the export CLI counts a writer's progress.
        options.onProgress?.(done += m.rows * m.cols, params);
      });
      errors = out.errors;
      return out.tables;
    }).finally(() => (pool?.close(), gptq?.close()));
    options.onProgress?.(params, params);
    const worst = errors.reduce((a, b) => (b.relRmse > a.relRmse ? b : a));
    const mean = errors.reduce((s, e) => s + e.relRmse, 0) / errors.length;
    return {
      file: path,
      bytes: r.bytes,
      params,
      tensors: input.tensors.length,
      sha256: r.sha256,
      data_crc32: r.crc32,
      head,
      ...(config.max_position_embeddings > MAX_LUT4_POSITIONS
        ? {
          positions:
            `${MAX_LUT4_POSITIONS} (the config's ${config.max_position_embeddings} capped at lut4's limit)`,
        }
        : {}),
      // One line, as the export CLI prints each detail; the header keeps the record as an object.
      ...(cal ? { calibration: calibrationLine(cal.record) } : {}),
      rounding: `relative RMS error ${mean.toFixed(4)} mean, ${
        worst.relRmse.toFixed(4)
      } worst (${worst.name}); per tensor: scripts/gap.ts`,
    };
  },
  async read(path): Promise<ReadResult> {
    const file = await readLut4(path);
    // The header keeps where the weights came from (`source`); the name and step are not recorded.
    const origin = { source: file.header.source };
    const tokenizer = file.tokenizer ? { tokenizer: file.tokenizer } : {};
    return { config: file.config, tensors: dequantizeLut4(file), origin, ...tokenizer };
  },
  // The integer engine loads the whole file anyway; the section is checked with everything else.
  readTokenizer: readLut4Tokenizer,
  async inspect(path) {
    const file = await readLut4(path);
    const { matrices, tables, tokenizer: _, ...rest } = file.header;
    return {
      file: path,
      bytes: file.bytes,
      sha256: file.sha256,
      checks: { framing: "ok", data_crc32: "ok", inventory: "ok", spans: "ok", tables: "ok" },
      config: file.config,
      ...rest,
      matrices: matrices.map((m) => ({ name: m.name, rows: m.rows, cols: m.cols, exp_base: m.exp_base })),
      tables: tables.map((t) => ({ name: t.name, kind: t.kind, length: t.length, exp: t.exp })),
      tokenizer: {
        section_bytes: file.header.tokenizer?.bytes ?? 0,
        ...tokenizerInfo(file.tokenizer, file.config.vocab_size, path),
      },
    };
  },
  spec: "formats/lut4/lut4.md",
  minimalReader: "readers/lut4.ts",
  fuzzHook: "formats/lut4/lut4-fuzz.ts",
};

export type { TensorError };
export type {
  CalibrationRecord,
  GainTable,
  HeadMode,
  Lut4Calibration,
  Lut4Calibrator,
  Lut4Shape,
  Lut4Weights,
} from "../../quantize/lut4-types.ts";

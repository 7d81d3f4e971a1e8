/**
 * GGUF v3, llama.cpp's model file, for a ferry Qwen3 model: `writeGguf` and the validating `readGguf`.
 * The work is split along gguf-py's seams: the container (`gguf-container.ts`), the tensor codecs
 * (`quants.ts`, shared with other block formats), the byte vocabulary (`gguf-vocab.ts`) and the
 * `qwen3` architecture mapping (`gguf-qwen3.ts`); this module re-exports them all. The spec is
 * formats/gguf/gguf.md.
 *
 * @example
 * ```ts
 * import { readGguf, writeGguf } from "./gguf.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[], config: ModelConfig;
 * await writeGguf("out/model.q4_0.gguf", tensors, config, { type: "q4_0" });
 * const { config: cfg, tensors: back } = await readGguf("out/model.q4_0.gguf"); // f32, HF names
 * ```
 * @module
 */
import { Buffer } from "node:buffer";
import { type FileHandle, open, stat } from "node:fs/promises";
import { chunksAt, openAtomic, readExact } from "../io.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import { numel, type StoredBlocks, type Tensor, type TensorSource } from "../../model/tensor.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { rememberLast } from "../../model/remember.ts";
import type { ExportOrigin, FormatDescriptor, OpenedExport } from "../format.ts";
import {
  GgufError,
  type GgufFile,
  type GgufHeader,
  type GgufValue,
  parseGgufHeader,
  streamGguf,
} from "./gguf-container.ts";
import {
  DIGEST_KEY,
  DIGEST_PLACEHOLDER,
  digestOffset,
  digestStream,
  fileDigest,
  isDigest,
} from "../digest.ts";
import {
  BLOCK_SCALES,
  blockScalesFinite,
  decodeTensor,
  type GgmlType,
  tensorBytes,
} from "../../quantize/quants.ts";
import type { CalibrationRecord } from "../../quantize/lut4-types.ts";
import { calibrationLine } from "../calibration-record.ts";
import {
  checkedValues,
  encodeTensorPieces,
  ggufTensorName,
  type LoadedGguf,
  qwen3ConfigFromGguf,
  qwen3Metadata,
  qwen3TensorPlans,
} from "./gguf-qwen3.ts";
import {
  hasBpeVocabulary,
  isByteTokenizer,
  tokenizerFromMetadata,
  tokenizerMetadata,
} from "./gguf-tokenizer.ts";
import { GGUF_DTYPE_TYPES, type GgufDtype, ggufTensorType } from "../../quantize/gguf-mix.ts";
import { GGUF_KEYS } from "./gguf-keys.ts";

// The GGUF API in one import: the container, the codecs, the vocabulary and the qwen3 mapping.
export * from "./gguf-container.ts";
export * from "../../quantize/quants.ts";
export * from "./gguf-vocab.ts";
export * from "./gguf-qwen3.ts";
export * from "../../quantize/gguf-mix.ts";
export * from "./gguf-tokenizer.ts";

/** Options of `writeGguf`. */
export interface GgufWriteOptions {
  /**
   * Type of the matrices (or, for q4_k_m, llama.cpp's mix; for the K-quants, llama.cpp's fallback on
   * narrow rows: gguf-mix.ts); norm vectors always stay F32, as llama.cpp's converter keeps them.
   */
  type: GgufDtype;
  /**
   * Per matrix (ferry name), one importance weight per input column (e.g. the mean square of that
   * input's activation on calibration text, as llama.cpp's imatrix): the Q5_0, Q4_K, Q6_K and IQ4_NL
   * quantizers minimise the so-weighted squared error. Default: uniform.
   */
  importance?: Readonly<Record<string, Float32Array>>;
  /** `general.name` (default "ferry"). */
  name?: string;
  /** Where the weights came from (`path@stepN`), written as `ferry.source` when given. */
  source?: string;
  /** The training step of the weights, written as `ferry.step` (u64) when given. */
  step?: number;
  /** Store `ferry.sha256`, the digest of the whole file (default true). */
  digest?: boolean;
  /**
   * What the importance was measured on, written under llama.cpp's imatrix keys
   * (`quantize.imatrix.dataset`, `.chunks_count`, `.entries_count`) and `ferry.calibration.*`.
   */
  calibration?: CalibrationRecord;
  /**
   * The model's own tokenizer, written as llama.cpp's converter writes a Qwen3 one (gguf-tokenizer.ts);
   * absent: ferry's byte vocabulary.
   */
  tokenizer?: TokenizerFiles;
}

/** The tensor types whose values widen back to f32 exactly: a file of only these is a lossless input. */
const WIDENS_EXACTLY: ReadonlySet<GgmlType> = new Set(["F32", "F16", "BF16"]);

/** The GGUF dtypes whose quantizers weigh their error by per-column importance (llama.cpp's imatrix). */
export const IMPORTANCE_DTYPES: ReadonlySet<GgufDtype> = new Set(["q4_k", "q6_k", "iq4_nl", "q4_k_m"]);

/**
 * Per-column importance from calibration statistics: the diagonal of each matrix's input covariance,
 * the mean square of the activation that multiplies each column (what llama.cpp's imatrix holds).
 */
export function importanceOf(covariance: ReadonlyMap<string, Float64Array>): Record<string, Float32Array> {
  const out: Record<string, Float32Array> = {};
  for (const [name, c] of covariance) {
    const cols = Math.round(Math.sqrt(c.length));
    out[name] = Float32Array.from({ length: cols }, (_, i) => c[i * cols + i]);
  }
  return out;
}

// `ferry.sha256` as a GGUF key-value up to its value's first byte: key length, key, type 8 (string),
// string length 64.
/** Where the digest's value starts: the key as this format encodes it, up to the value. */
export const GGUF_DIGEST_NEEDLE = (() => {
  const key = new TextEncoder().encode(DIGEST_KEY);
  const b = new Uint8Array(8 + key.length + 4 + 8);
  const dv = new DataView(b.buffer);
  dv.setBigUint64(0, BigInt(key.length), true);
  b.set(key, 8);
  dv.setUint32(8 + key.length, 8, true);
  dv.setBigUint64(12 + key.length, 64n, true);
  return b;
})();

/**
 * The verdict on a parsed file's `ferry.sha256`: undefined when the file has none (a file not written by
 * ferry); otherwise the stored and computed digests. A `ferry.sha256` that is not a single 64-digit
 * string in the metadata is refused.
 *
 * @example
 * ```ts
 * import { ggufDigest } from "./gguf.ts";
 * import { parseGguf } from "./gguf-container.ts";
 * declare const bytes: Uint8Array; // the file
 * const d = ggufDigest(bytes, parseGguf(bytes, "m.gguf"), "m.gguf"); // { stored, computed, ok }
 * ```
 */
export function ggufDigest(
  bytes: Uint8Array,
  file: Pick<GgufFile, "metadata" | "dataOffset">,
  where: string,
): { stored: string; computed: string; ok: boolean } | undefined {
  const v = file.metadata.get(DIGEST_KEY);
  if (!v) return undefined;
  const { stored, at } = storedDigest(v, bytes, file.dataOffset, where);
  const computed = fileDigest([bytes], at);
  return { stored, computed, ok: computed === stored };
}

/** The stored `ferry.sha256` and where it is, refused unless it is in the one form ferry writes. */
function storedDigest(v: GgufValue, head: Uint8Array, dataOffset: number, where: string) {
  const found = digestOffset(head, GGUF_DIGEST_NEEDLE, dataOffset);
  if (v.type !== "string" || !isDigest(v.value) || !found || !("at" in found) || found.value !== v.value) {
    const why = "expected one string of 64 lowercase hex digits, as ferry writes it";
    throw new GgufError(where, "InvalidValue", DIGEST_KEY, why);
  }
  return { stored: v.value, at: found.at };
}

/** Every `--dtype` GGUF takes, in the order help and tables list them. */
export const GGUF_DTYPE_NAMES = Object.keys(GGUF_DTYPE_TYPES) as GgufDtype[];

/**
 * The matrices' default ggml type of a `--dtype` name (q4_k_m: Q4_K, its mix aside); an unknown name
 * is a RangeError listing the known ones.
 *
 * @example
 * ```ts
 * import { ggmlType } from "./gguf.ts";
 * ggmlType("q4_0"); // "Q4_0"
 * ```
 */
export function ggmlType(dtype: GgufDtype): GgmlType {
  if (!Object.hasOwn(GGUF_DTYPE_TYPES, dtype)) {
    throw new RangeError(`unknown GGUF dtype ${dtype} (expected ${GGUF_DTYPE_NAMES.join(", ")})`);
  }
  return GGUF_DTYPE_TYPES[dtype].type;
}

/**
 * Writes a ferry Qwen3 model as a GGUF v3 file llama.cpp loads (architecture `qwen3`), atomically and
 * tensor by tensor: the header is laid out from shapes alone, then each tensor is read, encoded and
 * written a few rows at a time, so memory stays at a piece of one tensor whatever the model's size.
 * `tensors` are ferry's (Hugging Face names, row-major dims), in memory or streamed; `opts.type` is the
 * matrices' type. A bad tokenizer or tensor set is refused before the file is opened.
 *
 * @example
 * ```ts
 * import { writeGguf } from "./gguf.ts";
 * import type { Model } from "../../model/qwen3.ts";
 * declare const model: Model;
 * await writeGguf("out/model.f32.gguf", model.tensors, model.config, { type: "f32" });
 * ```
 */
export async function writeGguf(
  path: string,
  tensors: ReadonlyArray<Tensor | TensorSource>,
  config: ModelConfig,
  opts: GgufWriteOptions,
): Promise<void> {
  const type = ggmlType(opts.type);
  // ferry's own byte tokenizer (a Hugging Face folder of a byte model carries it) is the byte vocabulary.
  const own = opts.tokenizer && !isByteTokenizer(opts.tokenizer) ? opts.tokenizer : undefined;
  const vocabulary = own ? tokenizerMetadata(own, config.vocab_size, path) : undefined;
  const metadata = qwen3Metadata(config, type, opts.name, GGUF_DTYPE_TYPES[opts.type].ftype, vocabulary);
  if (opts.source !== undefined) metadata.push([SOURCE_KEY, { type: "string", value: opts.source }]);
  if (opts.step !== undefined) {
    if (!Number.isSafeInteger(opts.step) || opts.step < 0) {
      throw new GgufError(
        path,
        "InvalidValue",
        STEP_KEY,
        `expected a non-negative integer, got ${opts.step}`,
        {
          expected: "a non-negative integer",
          found: String(opts.step),
        },
      );
    }
    metadata.push([STEP_KEY, { type: "u64", value: BigInt(opts.step) }]);
  }
  if (opts.calibration) metadata.push(...calibrationMetadata(opts.calibration, opts.importance));
  const digest = opts.digest !== false;
  if (digest) metadata.push([DIGEST_KEY, { type: "string", value: DIGEST_PLACEHOLDER }]);
  const model = { layers: config.num_hidden_layers, tied: config.tie_word_embeddings };
  const rule = (name: string, ne: number[]) => ggufTensorType(opts.type, name, ne, model);
  const plans = qwen3TensorPlans(tensors, config, rule, path, {
    importance: opts.importance,
    ownTokenizer: vocabulary !== undefined,
  });
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const out = await openAtomic(path);
  try {
    let hash: ReturnType<typeof digestStream> | undefined, at = -1;
    const sink = {
      async write(bytes: Uint8Array) {
        if (digest && !hash) {
          // The first write is the header, which holds the placeholder.
          at = (digestOffset(bytes, GGUF_DIGEST_NEEDLE) as { at: number }).at;
          hash = digestStream(at);
        }
        hash?.update(bytes);
        await out.write(bytes);
      },
    };
    await streamGguf(sink, metadata, plans, (i) => {
      const t = byName.get(plans[i].hf)!;
      const read = "data" in t
        ? (start: number, count: number) => t.data.subarray(start, start + count)
        : t.read.bind(t);
      return encodeTensorPieces(plans[i], read, path, opts.importance?.[plans[i].hf]);
    }, path);
    if (hash) await out.patch(at, new TextEncoder().encode(hash.hex()));
    await out.commit();
  } catch (e) {
    await out.abort();
    throw e;
  }
}

/** ferry's metadata keys for where the weights came from (`general.name` is GGUF's own). */
export const SOURCE_KEY = "ferry.source", STEP_KEY = "ferry.step";

/**
 * The calibration's record as metadata: llama.cpp's imatrix keys (`chunks_count` its windows), and
 * ferry's window size, token count and seed.
 */
function calibrationMetadata(
  record: CalibrationRecord,
  importance: Readonly<Record<string, Float32Array>> | undefined,
): Array<[string, GgufValue]> {
  return [
    ["quantize.imatrix.dataset", { type: "string", value: record.source }],
    ["quantize.imatrix.entries_count", { type: "i32", value: Object.keys(importance ?? {}).length }],
    ["quantize.imatrix.chunks_count", { type: "i32", value: record.windows }],
    ...(record.window_tokens !== undefined
      ? [
        ["ferry.calibration.window_tokens", { type: "u32", value: record.window_tokens }],
        ["ferry.calibration.tokens", { type: "u64", value: BigInt(record.tokens ?? 0) }],
      ] as Array<[string, GgufValue]>
      : []),
    ["ferry.calibration.seed", { type: "i64", value: BigInt(record.seed) }],
  ];
}

/**
 * What a file records of where its weights came from: `general.name`, and ferry's `ferry.step` and
 * `ferry.source` when present. A key present with another type than ferry writes is refused.
 *
 * @example
 * ```ts
 * import { ggufOrigin } from "./gguf.ts";
 * import { parseGguf } from "./gguf-container.ts";
 * declare const bytes: Uint8Array; // the file
 * ggufOrigin(parseGguf(bytes, "m.gguf"), "m.gguf"); // { name: "ferry", step: 1200, source: "run.ckpt@step1200" }
 * ```
 */
export function ggufOrigin(file: Pick<GgufFile, "metadata">, where: string): ExportOrigin {
  const origin: ExportOrigin = {};
  const typed = (key: string, types: string[]) => {
    const v = file.metadata.get(key);
    if (v && !types.includes(v.type)) {
      throw new GgufError(where, "WrongType", key, `has type ${v.type}; expected ${types.join(" or ")}`, {
        expected: types.join(" or "),
        found: v.type,
      });
    }
    return v;
  };
  const name = typed(GGUF_KEYS.General.NAME, ["string"]), source = typed(SOURCE_KEY, ["string"]);
  const step = typed(STEP_KEY, ["u64", "u32"]);
  if (name) origin.name = name.value as string;
  if (step) {
    const n = Number(step.value);
    if (!Number.isSafeInteger(n)) {
      throw new GgufError(where, "InvalidValue", STEP_KEY, `${step.value} is above 2^53`, {
        expected: "an integer below 2^53",
        found: String(step.value),
      });
    }
    origin.step = n;
  }
  if (source) origin.source = source.value as string;
  return origin;
}

/** The first read of a header; it doubles until the tensor infos fit (a Qwen3 vocabulary is ~6 MB). */
const HEADER_READ = 8 << 20;
/** Bytes per read when hashing or reading a file: the reader's own buffer, beside one tensor. */
const READ_PIECE = 16 << 20;

/** An open GGUF file and its checked header; `prefix` holds the file's first bytes, the header whole. */
interface OpenGguf {
  path: string;
  fh: FileHandle;
  size: number;
  head: GgufHeader;
  prefix: Uint8Array;
}

async function openGguf(path: string): Promise<OpenGguf> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (e) {
    throw new GgufError(path, "Unreadable", "file", `cannot be read: ${(e as Error).message}`);
  }
  try {
    const info = await fh.stat();
    if (info.isDirectory()) throw new GgufError(path, "Unreadable", "file", "is a folder, expected a file");
    const size = info.size;
    for (let want = Math.min(HEADER_READ, size);; want = Math.min(want * 2, size)) {
      const prefix = await readAt({ fh, path }, 0, want);
      const head = parsedHeader(prefix, size, path);
      if (head !== "more") return { path, fh, size, head, prefix };
    }
  } catch (e) {
    await fh.close();
    throw e;
  }
}

/**
 * `parseGgufHeader`, remembered for the last headers read, by their bytes (compared exactly, as text): a
 * load opens a file twice (its tokenizer, then its tensors), and a Qwen3 vocabulary's header is megabytes
 * of strings whose parse and checks took a second each time. The header object is shared: read-only.
 */
function parsedHeader(prefix: Uint8Array, size: number, path: string): GgufHeader | "more" {
  const bytes = Buffer.from(prefix.buffer, prefix.byteOffset, prefix.byteLength).toString("latin1");
  return parsedHeaders([path, size, bytes], () => parseGgufHeader(prefix, size, path));
}

const parsedHeaders = rememberLast<GgufHeader | "more">(2);

function readAt(g: Pick<OpenGguf, "fh" | "path">, position: number, length: number): Promise<Uint8Array> {
  return readExact(g.fh, new Uint8Array(length), position, () => changed(g.path));
}

function changed(path: string): GgufError {
  return new GgufError(path, "Unreadable", "file", "ended early: it changed while being read");
}

/** `ggufDigest` of an open file, hashing it a piece at a time rather than holding it. */
async function streamedDigest(g: OpenGguf, where: string) {
  const v = g.head.metadata.get(DIGEST_KEY);
  if (!v) return undefined;
  const { stored, at } = storedDigest(v, g.prefix, g.head.dataOffset, where);
  const hash = digestStream(at);
  for await (const piece of chunksAt(g.fh, 0, g.size, () => changed(where), { chunkBytes: READ_PIECE })) {
    hash.update(piece);
  }
  const computed = hash.hex();
  return { stored, computed, ok: computed === stored };
}

/** `streamedDigest`, refusing a mismatch: the file was changed after ferry wrote it. */
async function verifiedDigest(g: OpenGguf, path: string) {
  const digest = await streamedDigest(g, path);
  if (digest && !digest.ok) {
    throw new GgufError(
      path,
      "DigestMismatch",
      DIGEST_KEY,
      `stored ${digest.stored} but the file's SHA-256 is ${digest.computed}: the file was changed or is corrupt`,
      { expected: digest.stored, found: digest.computed },
    );
  }
  return digest;
}

/**
 * Reads a GGUF written for llama.cpp's `qwen3` architecture into a ferry model: checks the header
 * (container, architecture, hyperparameters with llama.cpp's strict types, vocabulary, that the
 * tensors are exactly the model's) and ferry's digest, hashing the file a piece at a time, then reads
 * and decodes one tensor at a time. Holds the header, one tensor's bytes and the f32 model it returns.
 *
 * @example
 * ```ts
 * import { readGguf } from "./gguf.ts";
 * import { buildModel } from "../../model/qwen3.ts";
 * const { config, tensors } = await readGguf("out/model.f32.gguf");
 * const model = buildModel(config, tensors);
 * ```
 */
export async function readGguf(path: string): Promise<LoadedGguf> {
  const g = await openGguf(path);
  try {
    const digest = await verifiedDigest(g, path);
    const config = qwen3ConfigFromGguf(g.head, path);
    const byName = new Map(g.head.tensors.map((t) => [t.name, t]));
    const tensors: Tensor[] = [];
    const types: Record<string, GgmlType> = {};
    for (const { name, dims } of paramShapes(config)) {
      const t = byName.get(ggufTensorName(name)!)!;
      const n = numel(t.ne);
      const bytes = await readAt(g, g.head.dataOffset + t.offset, tensorBytes(t.type, n));
      tensors.push({ name, dims: [...dims], data: checkedValues(t, decodeTensor(t.type, bytes, n), path) });
      types[name] = t.type;
    }
    const { end: _, ...file } = g.head;
    const model: LoadedGguf = { config, tensors, types, file, origin: ggufOrigin(g.head, path) };
    return digest ? { ...model, digest } : model;
  } finally {
    await g.fh.close();
  }
}

/**
 * A GGUF opened for streaming, checked as `readGguf` checks it (the header, the model's tensors, ferry's
 * digest over the whole file) before anything is handed out; then each tensor is a source that reads and
 * decodes only the values asked for (whole blocks of its type: a chunk of whole rows always is), refusing
 * a non-finite value (field `tensor NAME`). A quantized matrix also offers its stored blocks
 * (`TensorSource.blocks`: whole rows' bytes, refused as `read` refuses their values where a block's f16
 * scale is not finite). The float engine loads a GGUF this way, keeping the blocks as they are.
 *
 * @example
 * ```ts
 * import { openGgufSources } from "./gguf.ts";
 * const g = await openGgufSources("out/model.q4_0.gguf");
 * const first = await g.sources[0].read(0, 1024, new Float32Array(1024));
 * await g.close();
 * ```
 */
export async function openGgufSources(path: string): Promise<OpenedExport> {
  const g = await openGguf(path);
  try {
    await verifiedDigest(g, path);
    const config = qwen3ConfigFromGguf(g.head, path);
    const byName = new Map(g.head.tensors.map((t) => [t.name, t]));
    const sources = paramShapes(config).map(({ name, dims }): TensorSource => {
      const t = byName.get(ggufTensorName(name)!)!;
      const at = g.head.dataOffset + t.offset;
      return {
        name,
        dims: [...dims],
        async read(start, count) {
          if (
            !Number.isInteger(tensorBytes(t.type, start)) || !Number.isInteger(tensorBytes(t.type, count))
          ) {
            throw new RangeError(`${name}: a read of a ${t.type} tensor must cover whole blocks`);
          }
          const bytes = await readAt(g, at + tensorBytes(t.type, start), tensorBytes(t.type, count));
          return checkedValues(t, decodeTensor(t.type, bytes, count), path, start);
        },
        // A quantized matrix's blocks as stored, checked by their scales (the same refusal as `read`'s).
        ...(BLOCK_SCALES[t.type] && dims.length === 2 ? { blocks: storedBlocks(g, t, at, dims[1]) } : {}),
      };
    });
    return { config, sources, close: () => g.fh.close() };
  } catch (e) {
    await g.fh.close();
    throw e;
  }
}

/**
 * The stored blocks of quantized tensor `t` (data at byte `at`, rows of `K` values): a chunk of rows read
 * as they are; where a scale is not finite, the rows are decoded so that the refusal is `read`'s own.
 */
function storedBlocks(g: OpenGguf, t: GgufHeader["tensors"][number], at: number, K: number): StoredBlocks {
  const rowBytes = tensorBytes(t.type, K);
  return {
    type: t.type,
    async read(row, rows) {
      const bytes = await readAt(g, at + row * rowBytes, rows * rowBytes);
      if (!blockScalesFinite(t.type, bytes)) {
        checkedValues(t, decodeTensor(t.type, bytes, rows * K), g.path, row * K);
      }
      return bytes;
    },
  };
}

/**
 * The tokenizer a GGUF carries, rebuilt as Hugging Face files from its `tokenizer.*` keys
 * (gguf-tokenizer.ts), after `readGguf`'s checks of the header and of `ferry.sha256` (hashed a piece at
 * a time); undefined for ferry's byte vocabulary. Decodes no tensor.
 *
 * @example
 * ```ts
 * import { readGgufTokenizer } from "./gguf.ts";
 * const files = await readGgufTokenizer("out/qwen3.f16.gguf"); // files["tokenizer.json"], ...
 * ```
 */
export async function readGgufTokenizer(path: string): Promise<TokenizerFiles | undefined> {
  const g = await openGguf(path);
  try {
    await verifiedDigest(g, path);
    const config = qwen3ConfigFromGguf(g.head, path);
    return hasBpeVocabulary(g.head.metadata)
      ? tokenizerFromMetadata(g.head.metadata, config.vocab_size, path)
      : undefined;
  } finally {
    await g.fh.close();
  }
}

/**
 * GGUF in the registry (formats/mod.ts): matrices in the chosen type, norms in F32, the metadata and
 * vocabulary llama.cpp needs. `inspect` lists the metadata (vocabulary arrays by length) and tensors.
 *
 * @example
 * ```ts
 * import { ggufFormat } from "./gguf.ts";
 * const { config, tensors } = await ggufFormat.read("out/ferry.f16.gguf"); // dequantized to f32
 * ```
 */
export const ggufFormat: FormatDescriptor<GgufDtype> = {
  name: "gguf",
  summary:
    "llama.cpp's GGUF v3, architecture qwen3: f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, iq4_nl or q4_k_m",
  extension: ".gguf",
  recognises: (path) => path.endsWith(".gguf"),
  dtypes: GGUF_DTYPE_NAMES,
  defaultDtype: "f16",
  weights: "float",
  calibrates: (dtype) => IMPORTANCE_DTYPES.has(dtype) ? "importance" : undefined,
  async lossy(path) {
    // The tensor types are in the header: no weight needs reading.
    const g = await openGguf(path);
    await g.fh.close();
    qwen3ConfigFromGguf(g.head, path);
    const blocks = new Set(g.head.tensors.map((t) => t.type).filter((type) => !WIDENS_EXACTLY.has(type)));
    return blocks.size > 0 ? `${[...blocks].join(", ")} blocks` : undefined;
  },
  async write(path, input, { dtype, calibration }) {
    // Calibration statistics, when handed them, weigh the K-quants' and IQ4_NL's scale search (llama.cpp's
    // imatrix); the other types take none. The tensors stream, one piece at a time.
    const cal = ggufFormat.calibrates!(dtype) !== undefined ? calibration : undefined;
    const tensors = input.tensors;
    await writeGguf(path, tensors, input.config, {
      tokenizer: input.tokenizer,
      type: dtype,
      name: input.name,
      source: input.source,
      step: input.step,
      importance: cal?.importance
        ? Object.fromEntries(cal.importance)
        : cal?.covariance
        ? importanceOf(cal.covariance)
        : undefined,
      calibration: cal?.record,
    });
    const params = tensors.reduce((n, t) => n + numel(t.dims), 0);
    return {
      file: path,
      bytes: (await stat(path)).size,
      params,
      tensors: tensors.length,
      ...(cal ? { calibration: calibrationLine(cal.record) } : {}),
    };
  },
  async read(path) {
    const { config, tensors, origin, file } = await readGguf(path);
    if (!hasBpeVocabulary(file.metadata)) return { config, tensors, origin };
    return {
      config,
      tensors,
      origin,
      tokenizer: tokenizerFromMetadata(file.metadata, config.vocab_size, path),
    };
  },
  open: (path) => openGgufSources(path),
  readTokenizer: readGgufTokenizer,
  async inspect(path) {
    const { config, file, digest } = await readGguf(path);
    const show = (v: GgufValue) =>
      v.type === "array"
        ? `[${v.value.length} × ${v.elem}]`
        : typeof v.value === "bigint"
        ? String(v.value)
        : v.value;
    return {
      file: path,
      version: file.version,
      alignment: file.alignment,
      [DIGEST_KEY]: digest
        ? `${digest.stored}: ok, the whole file is as written`
        : "none (not written by ferry)",
      metadata: Object.fromEntries([...file.metadata].map(([k, v]) => [k, show(v)])),
      config,
      tensors: file.tensors.map((t) => ({ name: t.name, ne: t.ne, type: t.type })),
    };
  },
  spec: "formats/gguf/gguf.md",
  minimalReader: "readers/gguf.ts",
  fuzzHook: "formats/gguf/gguf-fuzz.ts",
};

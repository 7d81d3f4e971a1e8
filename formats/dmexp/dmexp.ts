/**
 * dmexp: the self-describing, checksummed export container (spec: formats/dmexp/dmexp.md).
 *
 * A 24-byte prefix (magic `DMEXPRT` + version byte, header length, payload length, CRC-32 of the
 * payload), a UTF-8 TOML header that carries the model config and every tensor's name and dims, then
 * the tensors in header order as f32, f16 or bf16, contiguous; version 2 then ends with the model's
 * tokenizer files in a checksummed section (`tokenizer-section.ts`). The writer streams a chunk at a
 * time; the readers check everything before they hand anything out.
 *
 * The module group: this module is the format's descriptor and its public readers and writer, and
 * re-exports the rest; `dmexp-header.ts` is the prefix and the TOML header (schema, checks, checksum);
 * `dmexp-payload.ts` the tensors' bytes (narrowing, streaming, CRC).
 *
 * @example
 * ```ts
 * import { inspectDmexp, readDmexp, writeDmexp } from "./dmexp.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[], config: ModelConfig;
 * await writeDmexp("out/m.dmexp", tensors, config, { dtype: "bf16", source: "a.ckpt@step10", step: 10 });
 * const info = await inspectDmexp("out/m.dmexp");    // header + checksum verdict, no model built
 * const back = await readDmexp("out/m.dmexp");       // config and tensors: f32, widened from the stored bits
 * ```
 * @module
 */
import type { FileHandle } from "node:fs/promises";
import { openAtomic } from "../io.ts";
import { configToToml, type ModelConfig } from "../../model/config.ts";
import { numel, type Tensor, type TensorSource, tensorSource } from "../../model/tensor.ts";
import type { ExportOrigin, FormatDescriptor } from "../format.ts";
import {
  checkHeaderChecksum,
  checkShapes,
  checkTensorsAgainstConfig,
  DMEXP_TOKENIZER_VERSION,
  DMEXP_VERSION,
  type DmexpDtype,
  DmexpError,
  type DmexpHeader,
  DTYPE_BYTES,
  DTYPES,
  encodeHeader,
  encodePrefix,
  FERRY_KEYS,
  HEADER_CRC_KEY,
  headerChecksum,
  headerChecksumError,
  hex32,
  malformedChecksum,
  parseHeader,
  PREFIX_BYTES,
  sealHeader,
  TOKENIZER_BYTES_KEY,
} from "./dmexp-header.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { decodeTokenizerSection, encodeTokenizerSection } from "../tokenizer-section.ts";
import { tokenizerInfo } from "../huggingface/huggingface-tokenizer.ts";
import {
  crcError,
  decodeInto,
  firstNonFinite,
  narrowedStats,
  openForRead,
  payloadChunks,
  type Prefix,
  readExact,
  readPayload,
  readPrefix,
  widenAbs,
  writeNarrowed,
} from "./dmexp-payload.ts";

export * from "./dmexp-header.ts";
export type { TensorSource };
export { tensorSource };

const DEFAULT_CHUNK_BYTES = 4 << 20;

/** What the writer needs besides the tensors. */
export interface DmexpWriteOptions {
  /** Default `bf16`. */
  dtype?: DmexpDtype;
  /** What the file came from, by convention `<checkpoint path>@step<N>`. */
  source: string;
  step: number;
  /** The model's name, written as ferry's `name` key (absent when not given). */
  name?: string;
  /** Extra header keys; default `FERRY_KEYS`. */
  extra?: Record<string, string | boolean>;
  /** Called as values are processed: `done` of `total`, over both passes. */
  onProgress?: (done: number, total: number) => void;
  /** Chunk size in bytes of source f32 (tests make it tiny to cross every boundary). */
  chunkBytes?: number;
  /** Write the `header_crc32` key (default true); false writes the reference's keys only. */
  headerChecksum?: boolean;
  /** The model's own tokenizer: written as version 2's tokenizer section (absent: version 1). */
  tokenizer?: TokenizerFiles;
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
 * import { writeDmexp } from "./dmexp.ts";
 * import { PRESETS } from "../../model/config.ts";
 * import { initParams } from "../../model/init.ts";
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
  const dtype = checkWriteOptions(path, opts);
  const sources = tensors.map((t) => ("data" in t ? tensorSource(t) : t));
  checkTensorsAgainstConfig(path, sources, config);
  const chunkElems = Math.max(1, Math.floor((opts.chunkBytes ?? DEFAULT_CHUNK_BYTES) / 4));
  const total = sources.reduce((n, s) => n + numel(s.dims), 0);
  let done = 0;
  const tick = (n: number) => opts.onProgress?.(done += n, 2 * total);
  const { stats, crc } = await narrowedStats(sources, dtype, chunkElems, path, tick);
  const section = opts.tokenizer ? encodeTokenizerSection(opts.tokenizer) : undefined;
  const version = section ? DMEXP_TOKENIZER_VERSION : DMEXP_VERSION;
  const tokenizerKeys = section ? { tokenizer: "huggingface", [TOKENIZER_BYTES_KEY]: section.length } : {};
  const header: DmexpHeader = {
    format: version,
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
    extra: {
      ...(opts.extra ?? FERRY_KEYS),
      ...tokenizerKeys,
      ...(opts.name !== undefined ? { name: opts.name } : {}),
    },
  };
  const { prefix, headerBytes } = sealedHeader(header, total * DTYPE_BYTES[dtype], crc, opts, version);
  const w = await openAtomic(path);
  try {
    await w.write(prefix);
    await w.write(headerBytes);
    if (await writeNarrowed(w, sources, dtype, chunkElems, tick) !== crc) {
      throw new DmexpError(
        path,
        "Unreadable",
        "crc32",
        "the source changed between the two passes of the writer; nothing was written",
      );
    }
    if (section) await w.write(section);
    await w.commit();
  } catch (e) {
    await w.abort();
    throw e;
  }
  const bytes = PREFIX_BYTES + headerBytes.length + header.num_params * DTYPE_BYTES[dtype] +
    (section?.length ?? 0);
  return { path, bytes, headerLength: headerBytes.length, crc32: crc, header };
}

// The dtype, the step and the name a writer is asked for, refused before anything is read.
function checkWriteOptions(path: string, opts: DmexpWriteOptions): DmexpDtype {
  const dtype = opts.dtype ?? "bf16";
  if (!DTYPES.includes(dtype)) {
    throw new DmexpError(
      path,
      "UnsupportedDtype",
      "dtype",
      `expected one of ${DTYPES.join(", ")}, got ${dtype}`,
      {
        expected: `one of ${DTYPES.join(", ")}`,
        found: String(dtype),
      },
    );
  }
  if (!Number.isSafeInteger(opts.step) || opts.step < 0) {
    throw new DmexpError(path, "InvalidValue", "step", `expected a non-negative integer, got ${opts.step}`, {
      expected: "a non-negative integer",
      found: String(opts.step),
    });
  }
  if (opts.name !== undefined && typeof opts.name !== "string") {
    throw new DmexpError(path, "WrongType", "name", `expected a string, got ${typeof opts.name}`, {
      expected: "a string",
      found: typeof opts.name,
    });
  }
  return dtype;
}

// The prefix and the header bytes, with `header_crc32` filled in unless the writer was told not to.
function sealedHeader(
  header: DmexpHeader,
  payloadLength: number,
  crc: number,
  opts: DmexpWriteOptions,
  version: number,
): { prefix: Uint8Array; headerBytes: Uint8Array } {
  const seal = opts.headerChecksum !== false;
  if (seal) header.extra[HEADER_CRC_KEY] = "00000000";
  let headerBytes: Uint8Array = new TextEncoder().encode(encodeHeader(header));
  const prefix = encodePrefix(headerBytes.length, payloadLength, crc, version);
  if (seal) {
    headerBytes = sealHeader(prefix, headerBytes);
    header.extra[HEADER_CRC_KEY] = headerChecksum(prefix, headerBytes)!.stored;
  }
  return { prefix, headerBytes };
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
  /** Version 2's tokenizer files, checked (CRC-32 included); absent in version 1. */
  tokenizer?: TokenizerFiles;
}

/** Options of the readers. */
export interface DmexpReadOptions {
  /** Called as the payload is read: bytes `done` of `total`. */
  onProgress?: (done: number, total: number) => void;
  /** Read size in bytes. */
  chunkBytes?: number;
}

// Opens the file, reads and checks its prefix and reads its header bytes, hands them to `use`, closes.
async function withFile<T>(
  path: string,
  use: (fh: FileHandle, p: Prefix, headerBytes: Uint8Array) => Promise<T>,
): Promise<T> {
  const fh = await openForRead(path);
  try {
    const p = await readPrefix(fh, path);
    return await use(fh, p, await readExact(fh, PREFIX_BYTES, p.headerLength, path));
  } finally {
    await fh.close();
  }
}

const prefixOf = (p: Prefix) => encodePrefix(p.headerLength, p.payloadLength, p.crc, p.version);

// Version 2's tokenizer section: its length as the header states it, then its own checks (magic,
// CRC-32, framing, the files against the config's vocab). Undefined for version 1.
async function readSection(
  fh: FileHandle,
  p: Prefix,
  header: DmexpHeader,
  config: ModelConfig,
  path: string,
): Promise<TokenizerFiles | undefined> {
  if (p.version !== DMEXP_TOKENIZER_VERSION) return undefined;
  const stated = Number(header.extra[TOKENIZER_BYTES_KEY]);
  if (stated !== p.sectionLength) {
    throw new DmexpError(
      path,
      "CountMismatch",
      TOKENIZER_BYTES_KEY,
      `the header says ${stated} bytes but ${p.sectionLength} follow the payload`,
      { expected: `${p.sectionLength}`, found: `${stated}` },
    );
  }
  const bytes = await readExact(fh, p.payloadStart + p.payloadLength, p.sectionLength, path);
  return decodeTokenizerSection(
    bytes,
    path,
    config.vocab_size,
    (code, f, why, d) => new DmexpError(path, code, f, why, d),
  );
}

// A `header_crc32` key that the checksum did not find in ferry's one-line form.
function checkChecksumForm(header: DmexpHeader, sealed: boolean, path: string): void {
  if (!sealed && HEADER_CRC_KEY in header.extra) {
    throw new DmexpError(path, "InvalidValue", HEADER_CRC_KEY, "not in the form ferry writes", {
      expected: 'one line header_crc32 = "<8 hex digits>"',
    });
  }
}

/**
 * Checks a file without building a model, reading the payload in chunks only for its CRC: the same
 * checks as a load up to and including the header. A CRC mismatch does not throw (it is reported in
 * `crc32.ok`, so `info` can still show the header); every other fault does. Neither does a config
 * ferry cannot build (reported in `model`), so a file from another implementation can be inspected.
 *
 * @example
 * ```ts
 * import { inspectDmexp } from "./dmexp.ts";
 * const info = await inspectDmexp("m.dmexp");
 * if (!info.crc32.ok) console.log("corrupt payload");
 * ```
 */
export function inspectDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpInfo> {
  return withFile(path, async (fh, p, headerBytes) => {
    const { crc: computed } = await readPayload(payloadChunks(fh, p, path, opts), undefined);
    const hc = headerChecksum(prefixOf(p), headerBytes);
    if (hc?.malformed) throw malformedChecksum(path, hc.malformed);
    let header: DmexpHeader;
    try {
      header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    } catch (e) {
      // The CRC comes first in the check order: a corrupt payload is the fault to report.
      if (computed !== p.crc) throw crcError(path, p.crc, computed);
      if (hc && hc.stored !== hc.computed) throw headerChecksumError(path, hc.stored, hc.computed);
      throw e;
    }
    checkChecksumForm(header, hc !== undefined, path);
    let model: DmexpInfo["model"];
    try {
      model = { ok: true, config: checkShapes(header, path) };
    } catch (e) {
      if (!(e instanceof DmexpError)) throw e;
      model = { ok: false, field: e.field, reason: e.message };
    }
    const tokenizer = model.ok ? await readSection(fh, p, header, model.config, path) : undefined;
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
      ...(tokenizer ? { tokenizer } : {}),
    };
  });
}

/**
 * `inspectDmexp`, refusing a CRC mismatch: verifies a file of any size in chunks.
 *
 * @example
 * ```ts
 * import { verifyDmexp } from "./dmexp.ts";
 * await verifyDmexp("big.dmexp"); // throws DmexpError with field "crc32" on a corrupt payload
 * ```
 */
export async function verifyDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpInfo> {
  const info = await inspectDmexp(path, opts);
  if (!info.crc32.ok) throw crcError(path, info.crc32.stored, info.crc32.computed);
  if (info.headerCrc32 && !info.headerCrc32.ok) {
    throw headerChecksumError(path, info.headerCrc32.stored, info.headerCrc32.computed);
  }
  return info;
}

/** A fully checked file: its header, the config it was built from, and its tensors as f32. */
export interface DmexpContents {
  header: DmexpHeader;
  config: ModelConfig;
  tensors: Tensor[];
  /** Version 2's tokenizer files, checked; absent in version 1. */
  tokenizer?: TokenizerFiles;
}

/**
 * Reads a whole file, in one pass, and hands out its tensors only after every check has passed: the
 * prefix, the CRC, the header, the config and each tensor's dims against the shape the config implies.
 * 16-bit values are widened to f32 from the stored bits.
 *
 * @example
 * ```ts
 * import { readDmexp } from "./dmexp.ts";
 * const { header, config, tensors } = await readDmexp("m.dmexp");
 * ```
 */
export function readDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpContents> {
  return withFile(path, async (fh, p, headerBytes) => {
    // The header is needed to lay the payload out while it streams past; a fault in it is reported
    // after the CRC's verdict, in the documented order.
    let header: DmexpHeader | undefined, headerFault: unknown;
    try {
      header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    } catch (e) {
      headerFault = e;
    }
    const { crc, tensors, nonFinite } = await readPayload(payloadChunks(fh, p, path, opts), header);
    if (crc !== p.crc) throw crcError(path, p.crc, crc);
    const sealed = checkHeaderChecksum(prefixOf(p), headerBytes, path);
    if (!header) throw headerFault;
    checkChecksumForm(header, sealed, path);
    const config = checkShapes(header, path);
    if (nonFinite) {
      throw new DmexpError(
        path,
        "NotFinite",
        `tensors.${nonFinite.name}`,
        `holds ${nonFinite.value} at index ${nonFinite.index}; an export holds only finite weights`,
        { expected: "finite values", found: String(nonFinite.value) },
      );
    }
    const tokenizer = await readSection(fh, p, header, config, path);
    return { header, config, tensors, ...(tokenizer ? { tokenizer } : {}) };
  });
}

/** A file opened for streaming: checked as `readDmexp` checks it, its tensors read a chunk at a time. */
export interface DmexpOpened extends DmexpContentsHead {
  /** The tensors in header order; each `read` widens one chunk and refuses a non-finite value in it. */
  sources: TensorSource[];
  close(): Promise<void>;
}
type DmexpContentsHead = Omit<DmexpContents, "tensors">;

/**
 * Opens a file as export input without reading it into memory: the prefix, the payload's CRC-32 (one
 * chunked pass), the header and its checksum, the config and the tokenizer section are checked first,
 * as `readDmexp` checks them; then each tensor is a source that reads and widens only the values asked
 * for, refusing (field `tensors.<name>`) a non-finite value before handing it out.
 *
 * @example
 * ```ts
 * import { openDmexp } from "./dmexp.ts";
 * import { exportHuggingFace } from "../huggingface/huggingface.ts";
 * const m = await openDmexp("out/q.bf16.dmexp");
 * await exportHuggingFace("out/q.hf", m.sources, m.config, { tokenizerFiles: m.tokenizer });
 * await m.close();
 * ```
 */
export async function openDmexp(path: string, opts: DmexpReadOptions = {}): Promise<DmexpOpened> {
  const fh = await openForRead(path);
  try {
    const p = await readPrefix(fh, path);
    const headerBytes = await readExact(fh, PREFIX_BYTES, p.headerLength, path);
    let header: DmexpHeader | undefined, headerFault: unknown;
    try {
      header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    } catch (e) {
      headerFault = e;
    }
    const { crc } = await readPayload(payloadChunks(fh, p, path, opts), undefined);
    if (crc !== p.crc) throw crcError(path, p.crc, crc);
    const sealed = checkHeaderChecksum(prefixOf(p), headerBytes, path);
    if (!header) throw headerFault;
    checkChecksumForm(header, sealed, path);
    const config = checkShapes(header, path);
    const tokenizer = await readSection(fh, p, header, config, path);
    const { dtype } = header, bpe = DTYPE_BYTES[dtype];
    let offset = p.payloadStart;
    // One byte buffer for every chunk read (grown as asked): a load reads hundreds of chunks, and a new
    // buffer each left hundreds of MB of garbage that the collector returned late.
    let bytesScratch = new Uint8Array(0);
    const sources = header.tensors.map((t): TensorSource => {
      const begin = offset;
      offset += numel(t.dims) * bpe;
      return {
        name: t.name,
        dims: [...t.dims],
        async read(start, count, scratch) {
          if (bytesScratch.length < count * bpe) bytesScratch = new Uint8Array(count * bpe);
          const bytes = await readExact(fh, begin + start * bpe, count * bpe, path, bytesScratch);
          const out = scratch.subarray(0, count);
          decodeInto(dtype, bytes, out, 0);
          const bad = firstNonFinite(out, 0, count);
          if (bad >= 0) {
            throw new DmexpError(
              path,
              "NotFinite",
              `tensors.${t.name}`,
              `holds ${out[bad]} at index ${start + bad}; an export holds only finite weights`,
              { expected: "finite values", found: String(out[bad]) },
            );
          }
          return out;
        },
      };
    });
    return { header, config, sources, ...(tokenizer ? { tokenizer } : {}), close: () => fh.close() };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

/**
 * Only the tokenizer of a file, checked as `readDmexp` checks it (prefix, header, header checksum,
 * config, then the section's own CRC-32 and files), without reading the payload; undefined for a
 * version-1 file (a byte model).
 *
 * @example
 * ```ts
 * import { readDmexpTokenizer } from "./dmexp.ts";
 * const files = await readDmexpTokenizer("out/q.bf16.dmexp");
 * ```
 */
export function readDmexpTokenizer(path: string): Promise<TokenizerFiles | undefined> {
  return withFile(path, async (fh, p, headerBytes) => {
    const header = parseHeader(headerBytes, path, p.version, p.payloadLength);
    const sealed = checkHeaderChecksum(prefixOf(p), headerBytes, path);
    checkChecksumForm(header, sealed, path);
    return await readSection(fh, p, header, checkShapes(header, path), path);
  });
}

/**
 * What a header records of where its weights came from: `source` and `step` (reference keys) and
 * ferry's `name` when present.
 *
 * @example
 * ```ts
 * import { dmexpOrigin, readDmexp } from "./dmexp.ts";
 * dmexpOrigin((await readDmexp("m.dmexp")).header); // { name: "ferry", step: 1200, source: "run.ckpt@step1200" }
 * ```
 */
export function dmexpOrigin(header: DmexpHeader): ExportOrigin {
  const name = header.extra.name;
  return { ...(typeof name === "string" ? { name } : {}), step: header.step, source: header.source };
}

/**
 * `inspectDmexp`'s answer as plain data, the form `info --json` prints: every header key (the extra
 * ones after the standard ones), the checksum verdict and whether ferry can build a model from it.
 *
 * @example
 * ```ts
 * import { dmexpInfoJson, inspectDmexp } from "./dmexp.ts";
 * console.log(JSON.stringify(dmexpInfoJson(await inspectDmexp("m.dmexp"))));
 * ```
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
    tokenizer: {
      section_bytes: info.version === DMEXP_TOKENIZER_VERSION
        ? info.fileBytes - PREFIX_BYTES - info.headerLength - info.payloadLength
        : 0,
      ...(info.model.ok ? tokenizerInfo(info.tokenizer, info.model.config.vocab_size, info.path) : {}),
    },
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
 * import { dmexpFormat } from "./dmexp.ts";
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
  lossy: () => Promise.resolve(undefined), // every dtype widens back exactly
  async write(path, input, { dtype, onProgress }) {
    const r = await writeDmexp(path, input.tensors, input.config, {
      dtype,
      source: input.source,
      step: input.step,
      name: input.name,
      onProgress,
      ...(input.tokenizer ? { tokenizer: input.tokenizer } : {}),
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
    const { header, config, tensors, tokenizer } = await readDmexp(path, options);
    return { config, tensors, origin: dmexpOrigin(header), ...(tokenizer ? { tokenizer } : {}) };
  },
  open: (path, options) => openDmexp(path, options),
  readTokenizer: readDmexpTokenizer,
  inspect: async (path, options) => dmexpInfoJson(await inspectDmexp(path, options)),
  spec: "formats/dmexp/dmexp.md",
  minimalReader: "readers/dmexp.ts",
  fuzzHook: "formats/dmexp/dmexp-fuzz.ts",
};

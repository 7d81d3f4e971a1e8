/**
 * The dmexp payload (spec: formats/dmexp/dmexp.md): the 24-byte prefix read and checked against the file's
 * size, the tensors narrowed and streamed out a chunk at a time (two passes: statistics and CRC, then
 * the bytes), and streamed back in, widened to f32 and checked for non-finite values as they arrive.
 * `formats/dmexp/dmexp.ts` puts these steps together into the public readers and writer.
 *
 * @example
 * ```ts
 * import { openForRead, readPrefix } from "./dmexp-payload.ts";
 * const fh = await openForRead("m.dmexp");
 * const prefix = await readPrefix(fh, "m.dmexp");   // size, magic, version, both lengths
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { type FileHandle, open } from "node:fs/promises";
import { type AtomicWriter, chunksAt, readExact as readInto } from "../io.ts";
import { bf16ToF32, f16BitsToF32Bits, f16ToF32, f32ToBf16, f32ToF16 } from "../../quantize/float16.ts";
import { isCheckpoint } from "../checkpoint/checkpoint.ts";
import { numel, type Tensor, type TensorSource } from "../../model/tensor.ts";
import {
  DMEXP_TOKENIZER_VERSION,
  DMEXP_VERSIONS,
  type DmexpDtype,
  DmexpError,
  type DmexpHeader,
  DTYPE_BYTES,
  hex32,
  MAGIC_BYTES,
  PREFIX_BYTES,
} from "./dmexp-header.ts";

/** The checked prefix: the file's size, the version byte, both lengths, the payload's stored CRC. */
export interface Prefix {
  size: number;
  version: number;
  headerLength: number;
  payloadLength: number;
  payloadStart: number;
  crc: number;
  /** Bytes after the payload: version 2's tokenizer section (0 in version 1). */
  sectionLength: number;
}

/** Opens a file to read; a missing or unreadable file is a `DmexpError` on the field `file`. */
export async function openForRead(path: string): Promise<FileHandle> {
  try {
    return await open(path, "r");
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new DmexpError(
      path,
      "Unreadable",
      "file",
      code === "ENOENT" ? "no such file" : `cannot open: ${(e as Error).message}`,
    );
  }
}

/**
 * Reads and checks the prefix: the size, the magic (a training checkpoint is named as one), the
 * version, then both lengths against the file size (in BigInt: a u64 cannot overflow it).
 */
export async function readPrefix(fh: FileHandle, path: string): Promise<Prefix> {
  const size = (await fh.stat()).size;
  if (size < PREFIX_BYTES) {
    throw new DmexpError(path, "Truncated", "size", `${size} bytes is shorter than the 24-byte prefix`, {
      expected: `at least ${PREFIX_BYTES} bytes`,
      found: `${size} bytes`,
    });
  }
  const b = await readExact(fh, 0, PREFIX_BYTES, path);
  checkMagic(b, path);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const headerLength = dv.getUint32(8, true);
  const payloadLength = dv.getBigUint64(12, true);
  if (BigInt(PREFIX_BYTES + headerLength) > BigInt(size)) {
    throw new DmexpError(
      path,
      "Truncated",
      "header_length",
      `a ${headerLength}-byte header runs past the end of the ${size}-byte file (truncated?)`,
      { expected: `at most ${size - PREFIX_BYTES} bytes`, found: `${headerLength} bytes` },
    );
  }
  const expected = BigInt(PREFIX_BYTES + headerLength) + payloadLength;
  // Version 2 ends with a tokenizer section: whatever follows the payload is that section.
  const withSection = b[7] === DMEXP_TOKENIZER_VERSION;
  if (withSection ? expected > BigInt(size) : expected !== BigInt(size)) {
    throw new DmexpError(
      path,
      expected > BigInt(size) ? "Truncated" : "TrailingBytes",
      "payload_length",
      `24 + header ${headerLength} + payload ${payloadLength} = ${expected} bytes, but the file has ${size} (${
        expected > BigInt(size) ? "truncated" : "trailing bytes"
      })`,
      { expected: `${size - PREFIX_BYTES - headerLength} bytes`, found: `${payloadLength} bytes` },
    );
  }
  return {
    size,
    version: b[7],
    headerLength,
    payloadLength: Number(payloadLength),
    payloadStart: PREFIX_BYTES + headerLength,
    crc: dv.getUint32(20, true),
    sectionLength: size - Number(expected),
  };
}

// The magic and the version byte; a ferry training checkpoint is named as what it is.
function checkMagic(b: Uint8Array, path: string): void {
  if (!MAGIC_BYTES.every((x, i) => b[i] === x)) {
    if (isCheckpoint(b)) {
      const why = "a ferry training checkpoint (magic FERRYCK): a training run with its optimizer state, " +
        "not an inference export; export it first";
      throw new DmexpError(path, "BadMagic", "magic", why, { expected: "DMEXPRT", found: "FERRYCK" });
    }
    const found = Array.from(b.subarray(0, 8), (x) => x.toString(16).padStart(2, "0")).join(" ");
    throw new DmexpError(
      path,
      "BadMagic",
      "magic",
      `expected "DMEXPRT" and a version byte, found bytes ${found}: not a dmexp file`,
      { expected: '"DMEXPRT" and a version byte', found: `bytes ${found}` },
    );
  }
  if (!DMEXP_VERSIONS.includes(b[7])) {
    throw new DmexpError(
      path,
      "UnsupportedVersion",
      "version",
      `format version ${b[7]} is not supported (this reader knows ${DMEXP_VERSIONS.join(" and ")})`,
      { expected: DMEXP_VERSIONS.join(" or "), found: String(b[7]) },
    );
  }
}

/**
 * `length` bytes at `position`, into `into` when it is given and holds them (a reader's reused buffer)
 * or a new array; a file that ends early (it changed while read) is refused.
 */
export async function readExact(
  fh: FileHandle,
  position: number,
  length: number,
  path: string,
  into?: Uint8Array,
): Promise<Uint8Array> {
  const buf = into && into.length >= length ? into.subarray(0, length) : new Uint8Array(length);
  return await readInto(fh, buf, position, () => shortFile(path));
}

function shortFile(path: string): DmexpError {
  return new DmexpError(path, "Unreadable", "size", "the file ended early (it changed while being read)");
}

/** The payload's chunks as they are read, in order (the progress callback and chunk size passed on). */
export function payloadChunks(
  fh: FileHandle,
  p: Prefix,
  path: string,
  opts: { onProgress?: (done: number, total: number) => void; chunkBytes?: number },
): AsyncIterable<Uint8Array> {
  return chunksAt(fh, p.payloadStart, p.payloadLength, () => shortFile(path), opts);
}

/** The refusal of a payload whose CRC-32 is not the stored one. */
export function crcError(path: string, stored: number, computed: number): DmexpError {
  return new DmexpError(
    path,
    "ChecksumMismatch",
    "crc32",
    `stored ${hex32(stored)} but the payload's is ${hex32(computed)}: the payload is corrupt`,
    { expected: hex32(stored), found: hex32(computed) },
  );
}

// ---- writing ----

/** What narrowing found: the largest and smallest non-zero magnitude (as bit patterns), and the flushed. */
export interface NarrowStats {
  max: number;
  min: number;
  flushed: number;
}

/** The narrowing of one dtype: f32 chunks in, the stored bytes out (a view into scratch, reused). */
export function narrower(dtype: DmexpDtype, chunkElems: number): (data: Float32Array) => Uint8Array {
  const out = new Uint16Array(dtype === "f32" ? 0 : chunkElems);
  return (data) => {
    if (dtype === "f32") return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const bits = out.subarray(0, data.length);
    (dtype === "f16" ? f32ToF16 : f32ToBf16)(data, bits);
    return new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength);
  };
}

/**
 * Pass 1 of the writer: narrows every chunk for the header's statistics and the payload's CRC, and
 * refuses a value that is not finite, or not finite once narrowed.
 */
export async function narrowedStats(
  sources: TensorSource[],
  dtype: DmexpDtype,
  chunkElems: number,
  path: string,
  tick: (n: number) => void,
): Promise<{ stats: NarrowStats; crc: number }> {
  const narrow = narrower(dtype, chunkElems);
  const stats = { max: 0, min: Infinity, flushed: 0 };
  let crc = 0;
  for await (const { index, start, data } of sourceChunks(sources, chunkElems)) {
    const bytes = narrow(data);
    const bad = scanNarrowed(dtype, data, bytes, stats);
    if (bad >= 0) throw narrowingError(path, dtype, sources[index].name, start + bad, data[bad]);
    crc = crc32(bytes, crc);
    tick(data.length);
  }
  return { stats, crc: crc >>> 0 };
}

/** Pass 2 of the writer: narrows again and writes; returns the CRC of what it wrote. */
export async function writeNarrowed(
  w: AtomicWriter,
  sources: TensorSource[],
  dtype: DmexpDtype,
  chunkElems: number,
  tick: (n: number) => void,
): Promise<number> {
  const narrow = narrower(dtype, chunkElems);
  let crc = 0;
  for await (const { data } of sourceChunks(sources, chunkElems)) {
    const bytes = narrow(data);
    crc = crc32(bytes, crc);
    await w.write(bytes);
    tick(data.length);
  }
  return crc >>> 0;
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
  stats: NarrowStats,
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

/** A magnitude's bit pattern (as kept by the statistics) back to its value. */
export function widenAbs(dtype: DmexpDtype, bits: number): number {
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
      "NotFinite",
      `tensors.${name}`,
      `holds ${value} at index ${index}; an export holds only finite weights`,
      { expected: "finite values", found: String(value) },
    );
  }
  return new DmexpError(
    path,
    "NotFinite",
    "dtype",
    `tensor ${name} holds ${value} at index ${index}, which is beyond ${dtype}'s range ` +
      `(largest finite ${dtype === "f16" ? "65504" : "3.39e38"}) and would become infinite. ` +
      `Export with --dtype bf16, which keeps f32's exponent range and accepts this model.`,
    { expected: `values within ${dtype}'s range`, found: String(value) },
  );
}

// ---- reading ----

/** The first non-finite value of a payload read back, by tensor and index. */
export interface NonFinite {
  name: string;
  index: number;
  value: number;
}

/**
 * Streams the payload once: its CRC-32 always, and, when the header could be parsed, the tensors it
 * lays out, widened to f32, with the first non-finite value noted (the caller refuses it after the
 * CRC's verdict, in the documented order).
 */
export async function readPayload(
  chunks: AsyncIterable<Uint8Array>,
  header: DmexpHeader | undefined,
): Promise<{ crc: number; tensors: Tensor[]; nonFinite?: NonFinite }> {
  const bpe = header ? DTYPE_BYTES[header.dtype] : 1;
  const tensors: Tensor[] = header
    ? header.tensors.map((t) => ({ name: t.name, dims: [...t.dims], data: new Float32Array(numel(t.dims)) }))
    : [];
  let crc = 0, ti = 0, inTensor = 0;
  let nonFinite: NonFinite | undefined;
  for await (const chunk of chunks) {
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
  return { crc: crc >>> 0, tensors, nonFinite };
}

/** Widens stored values (f32, f16 or bf16 bytes, 2-byte aligned) into `out` from index `at`, exactly. */
export function decodeInto(dtype: DmexpDtype, bytes: Uint8Array, out: Float32Array, at: number): void {
  if (dtype === "f32") {
    new Uint8Array(out.buffer, out.byteOffset + at * 4, bytes.length).set(bytes);
    return;
  }
  const n = bytes.length / 2;
  const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, n);
  (dtype === "f16" ? f16ToF32 : bf16ToF32)(bits, out.subarray(at, at + n));
}

/** The index of the first NaN or infinity in data[from, to), or -1. */
export function firstNonFinite(data: Float32Array, from: number, to: number): number {
  for (let i = from; i < to; i++) if (data[i] - data[i] !== 0) return i;
  return -1;
}

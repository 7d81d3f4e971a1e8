/**
 * The fuzz hook of lut4 (formats/lut4/lut4.md) for scripts/tools/fuzz.ts: a small valid file, its byte map
 * (framing, header, data, every span), its JSON header as text, edits a forger would make (swapped
 * spans and names, exponents, lengths, shape, table entries and padding with the data CRC-32
 * recomputed), and the minimal reader `readers/lut4.ts`. The integer engine's loader is fed the same
 * cases by the fuzzer itself (engines/ lies outside formats/). A second target is the same file in schema
 * `/2`, ending with a tokenizer section (mapped file by file, its CRC-32 resealed with the data's).
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * import { lut4Format } from "./lut4.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(lut4Format.fuzzHook); // [the lut4 target]
 * ```
 * @module
 */
import { join } from "node:path";
import { crc32 } from "node:zlib";
import {
  concat,
  FORGED,
  FUZZ_LUT4_CONFIG,
  FUZZ_TOKENIZER,
  type FuzzTarget,
  type Region,
  resealTokenizerSection,
  tokenizerSectionMap,
  view,
} from "../fuzz-kit.ts";
import { encodeTokenizerSection } from "../tokenizer-section.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { type Lut4Calibration, Lut4Error, lut4Format, readLut4 } from "./lut4.ts";
import { initParams } from "../../model/init.ts";
import { tensorSource } from "../../model/tensor.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

/**
 * The calibration record the campaign's file carries, so that the optional header key is attacked too
 * (no statistics come with it: the weights are rounded plainly, the record is all that is read).
 */
const FUZZ_CALIBRATION: Lut4Calibration = {
  covariance: new Map(),
  record: { source: "brown train split", windows: 4, window_tokens: 256, tokens: 1024, seed: 1 },
};

/**
 * Writes the campaign's lut4 file (the model `FUZZ_LUT4_CONFIG` describes) at `file`; with `tokenizer`,
 * schema `/2` with that tokenizer's section.
 */
export async function makeLut4(file: string, tokenizer?: TokenizerFiles): Promise<void> {
  await lut4Format.write(file, {
    config: FUZZ_LUT4_CONFIG,
    tensors: initParams(FUZZ_LUT4_CONFIG, 7).map(tensorSource),
    source: "fuzz@step1",
    step: 1,
    name: "fuzz",
    ...(tokenizer ? { tokenizer } : {}),
  }, { dtype: "q4", calibration: FUZZ_CALIBRATION });
}

// The header, the data section and (schema /2, when the header's `tokenizer.bytes` fits) the tokenizer section.
function lut4Parts(f: Uint8Array) {
  const h = f.length < 16 ? 0 : Number(view(f).getBigUint64(8, true));
  const rest = f.subarray(16 + h);
  let t = 0;
  try {
    const bytes = JSON.parse(dec.decode(f.subarray(16, 16 + h)))?.tokenizer?.bytes;
    if (Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= rest.length) t = bytes;
  } catch { /* a header that is not JSON has no section to keep apart */ }
  return {
    header: f.subarray(16, 16 + h),
    data: rest.subarray(0, rest.length - t),
    section: rest.subarray(rest.length - t),
  };
}

// Frames a header text and a data section (and a tokenizer section) as a lut4 file, padding the header with
// spaces as the writer does.
function lut4Join(text: string, data: Uint8Array, section: Uint8Array = new Uint8Array(0)): Uint8Array {
  const head = enc.encode(text + " ".repeat((64 - ((16 + enc.encode(text).length) % 64)) % 64));
  const out = concat(enc.encode("UORLUT01"), new Uint8Array(8), head, data, section);
  view(out).setBigUint64(8, BigInt(head.length), true);
  return out;
}

type Lut4Json = {
  matrices: {
    name: string;
    rows: number;
    cols: number;
    exp_base: number;
    nibbles: { offset: number };
    scales: { offset: number };
  }[];
  tables: {
    name: string;
    kind: string;
    length: number;
    exp: number;
    span: { offset: number; bytes: number };
  }[];
  [k: string]: unknown;
};

// Edits the header object of a valid lut4 file (the data section and its CRC-32 stay as they are).
function lut4Edit(f: Uint8Array, edit: (h: Lut4Json) => boolean): Uint8Array | undefined {
  const p = lut4Parts(f);
  const h = JSON.parse(dec.decode(p.header)) as Lut4Json;
  return edit(h) ? lut4Join(JSON.stringify(h), p.data, p.section) : undefined;
}

// Rewrites bytes of a valid lut4 file's data section and recomputes `data_crc32`, as a forger would.
function lut4Forge(f: Uint8Array, edit: (h: Lut4Json, data: Uint8Array) => boolean): Uint8Array | undefined {
  const p = lut4Parts(f);
  const h = JSON.parse(dec.decode(p.header)) as Lut4Json;
  const data = p.data.slice();
  if (!edit(h, data)) return undefined;
  h.data_crc32 = crc32(data) >>> 0;
  return lut4Join(JSON.stringify(h), data, p.section);
}

// Whether a (mutated) lut4 file's data section still has the CRC-32 its header states.
function lut4DataIntact(f: Uint8Array): boolean {
  try {
    const p = lut4Parts(f);
    const h = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(p.header));
    return h?.data_crc32 === crc32(p.data) >>> 0;
  } catch {
    return false;
  }
}

const LUT4_HEADER_OPEN =
  "data section intact by its CRC-32; the lut4 header has no checksum (formats/lut4/lut4.md): a header value that " +
  "passes its check is read as written, and the file's SHA-256 (its identity for sessions) changes";

const lut4: FuzzTarget = {
  name: "lut4",
  async make(dir) {
    const file = join(dir, "m.lut4");
    await makeLut4(file);
    return { file, target: file };
  },
  map(f) {
    const h = Number(view(f).getBigUint64(8, true)), start = 16 + h;
    const head = JSON.parse(dec.decode(f.subarray(16, start))) as Lut4Json;
    const end = start + lut4Parts(f).data.length;
    const section = end < f.length ? tokenizerSectionMap(f, end) : { regions: [], fields: [] };
    const spans: Region[] = [];
    const at = (name: string, s: { offset: number; bytes?: number }, bytes: number) =>
      spans.push({ name, start: start + s.offset, end: start + s.offset + bytes });
    for (const m of head.matrices) {
      at(`${m.name}.nibbles`, m.nibbles, (m.rows * m.cols) / 2),
        at(`${m.name}.scales`, m.scales, (m.rows * m.cols) / 32);
    }
    for (const t of head.tables) at(t.name, t.span, t.span.bytes);
    return {
      regions: [
        { name: "magic", start: 0, end: 8 },
        { name: "header_length", start: 8, end: 16 },
        { name: "header", start: 16, end: start },
        { name: "data", start, end },
        ...spans,
        ...section.regions,
      ],
      fields: [{ name: "header_length", offset: 8, width: 8 }, ...section.fields],
    };
  },
  text: {
    get: (f) => dec.decode(lut4Parts(f).header),
    set: (f, t) => {
      const p = lut4Parts(f);
      return lut4Join(t.trimEnd(), p.data, p.section);
    },
  },
  edits: {
    // Spans must rise through the data section: two same-shape matrices cannot trade places in the header.
    "swap spans": (f, rng) =>
      lut4Edit(f, (h) => {
        const [a, b] = rng.pick([["layers.0.k", "layers.0.v"], ["layers.0.gate", "layers.0.up"]]);
        const x = h.matrices.find((m) => m.name === a)!, y = h.matrices.find((m) => m.name === b)!;
        [x.nibbles, y.nibbles, x.scales, y.scales] = [y.nibbles, x.nibbles, y.scales, x.scales];
        return true;
      }),
    "swap names": (f, rng) =>
      lut4Edit(f, (h) => {
        const x = rng.pick(h.matrices), y = rng.pick(h.matrices);
        [x.name, y.name] = [y.name, x.name];
        return x !== y;
      }),
    "exp_base": (f, rng) =>
      lut4Edit(f, (h) => {
        rng.pick(h.matrices).exp_base = rng.pick([-101, -100, -20, 0, 60, 61, 2 ** 31, 0.5]);
        return true;
      }),
    "table exp": (f, rng) =>
      lut4Edit(f, (h) => {
        rng.pick(h.tables).exp = rng.pick([-101, -100, -30, -14, 0, 60, 61, 1e308]);
        return true;
      }),
    "table length": (f, rng) =>
      lut4Edit(f, (h) => {
        const t = rng.pick(h.tables);
        t.length = rng.pick([0, 1, t.length + 1, 2 ** 31, 2 ** 53]);
        if (rng.next() < 0.5) t.span.bytes = t.length * 4;
        return true;
      }),
    "shape": (f, rng) =>
      lut4Edit(f, (h) => {
        const shape = h.shape as Record<string, number>;
        const k = rng.pick(Object.keys(shape));
        shape[k] = rng.pick([0, 1, 2, 32, 64, 1 << 14, 2 ** 31, 2 ** 53, shape[k] * 2, shape[k] - 1]);
        return true;
      }),
    "calibration": (f, rng) =>
      lut4Edit(f, (h) => {
        const c = h.calibration as Record<string, unknown>;
        const k = rng.pick(["source", "windows", "window_tokens", "tokens", "window_bytes", "seed", "whole"]);
        const v = rng.pick<unknown>([null, -1, 0, 0.5, 2 ** 32, 2 ** 53, "64", [], {}]);
        if (k === "whole") h.calibration = v;
        else c[k] = v;
        return true;
      }),
    // Data edits with data_crc32 recomputed: the table checks are all that stands in their way.
    "forged table entry": (f, rng) =>
      lut4Forge(f, (h, data) => {
        const t = rng.pick(h.tables);
        const d = new DataView(data.buffer, data.byteOffset, data.byteLength);
        const i16 = t.kind === "i16";
        const at = t.span.offset + rng.int(t.span.bytes / (i16 ? 2 : 4)) * (i16 ? 2 : 4);
        const v = rng.pick([-32768, -16385, 16385, 32767, 0, -1]);
        if (i16) d.setInt16(at, v, true);
        else d.setInt32(at, rng.pick([v, 2 ** 30 + 1, -(2 ** 31), 2 ** 31 - 1, (1 << 22) + 1]), true);
        return true;
      }),
    "forged padding": (f, rng) =>
      lut4Forge(f, (h, data) => {
        const s = rng.pick(h.tables).span;
        const end = s.offset + s.bytes;
        if (end % 64 === 0) return false;
        data[end + rng.int(64 - (end % 64))] = 1 + rng.int(255);
        return true;
      }),
  },
  readers: {
    readLut4: (p) => readLut4(p),
    "lut4Format.read": (p) => lut4Format.read(p),
  },
  refusal: (e) => e instanceof Lut4Error,
  reseal: (f) => {
    try {
      const p = lut4Parts(f);
      const h = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(p.header));
      if (typeof h !== "object" || h === null || Array.isArray(h)) return f;
      h.data_crc32 = crc32(p.data) >>> 0;
      return lut4Join(JSON.stringify(h), p.data, resealTokenizerSection(p.section));
    } catch {
      return f;
    }
  },
  minimal: "readers/lut4.ts",
  explain: (m) =>
    m.kind.endsWith("+resealed") || m.kind.startsWith("edit forged")
      ? FORGED
      : lut4DataIntact(m.bytes)
      ? LUT4_HEADER_OPEN
      : undefined,
};

// Tokenizer files a forger might put in a well-framed section: each must still be refused by its content.
const BAD_TOKENIZERS: TokenizerFiles[] = [
  { "tokenizer.json": '{"model": {"type": "BPE", "vocab": {"a": 300}, "merges": []}}' }, // beyond the vocab
  { "tokenizer.json": '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "z"]]}}' }, // bad merge
  { ...FUZZ_TOKENIZER, "chat_template.jinja": "{% if x %}" },
];

const lut4Tokenizer: FuzzTarget = {
  ...lut4,
  name: "lut4-tokenizer",
  async make(dir) {
    const file = join(dir, "t.lut4");
    await makeLut4(file, FUZZ_TOKENIZER);
    return { file, target: file };
  },
  edits: {
    ...lut4.edits,
    // A section whose framing and CRC-32 are right, its length in the header, but whose files are not.
    "forged tokenizer": (f, rng) => {
      const p = lut4Parts(f);
      const section = encodeTokenizerSection(rng.pick(BAD_TOKENIZERS));
      const h = JSON.parse(dec.decode(p.header)) as Lut4Json;
      h.tokenizer = { bytes: section.length };
      return lut4Join(JSON.stringify(h), p.data, section);
    },
  },
  readers: { readLut4: (p) => readLut4(p), "lut4Format.readTokenizer": (p) => lut4Format.readTokenizer!(p) },
};

/** What scripts/tools/fuzz.ts attacks: a lut4 file of schema /1, and one of schema /2 with a tokenizer. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [lut4, lut4Tokenizer];

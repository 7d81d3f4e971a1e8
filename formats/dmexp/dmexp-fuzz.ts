/**
 * The fuzz hook of dmexp (formats/dmexp/dmexp.md) for scripts/tools/fuzz.ts: a small valid file, its byte map
 * (prefix fields, header, payload, each `[[tensors]]` table), its TOML header as text with the lengths
 * and the payload CRC kept consistent, edits a forger would make (swapped tables, another dtype,
 * non-finite values), and the reseal of ferry's `header_crc32`. A second target is the same file in
 * version 2, ending with a tokenizer section (mapped file by file, its CRC-32 resealed with the header's).
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * import { dmexpFormat } from "./dmexp.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(dmexpFormat.fuzzHook); // [the dmexp target]
 * ```
 * @module
 */
import { join } from "node:path";
import { crc32 } from "node:zlib";
import {
  type ByteMap,
  concat,
  FORGED,
  framedMap,
  FUZZ_CONFIG,
  FUZZ_TOKENIZER,
  type FuzzTarget,
  fuzzTensors,
  type Region,
  resealTokenizerSection,
  type Rng,
  tokenizerSectionMap,
  view,
} from "../fuzz-kit.ts";
import { DmexpError, readDmexp, readDmexpTokenizer, sealHeader, writeDmexp } from "./dmexp.ts";
import { encodeTokenizerSection } from "../tokenizer-section.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

// The prefix, the header, the payload and (version 2, when the payload length fits) the tokenizer section.
function dmexpParts(f: Uint8Array) {
  const h = view(f).getUint32(8, true), start = 24 + h;
  const p = f.length >= 20 ? Number(view(f).getBigUint64(12, true)) : 0;
  const end = f[7] === 2 && start + p <= f.length ? start + p : f.length;
  return {
    prefix: f.subarray(0, 24),
    header: f.subarray(24, start),
    payload: f.subarray(start, end),
    section: f.subarray(end),
  };
}

function dmexpJoin(
  prefix: Uint8Array,
  header: Uint8Array,
  payload: Uint8Array,
  section: Uint8Array = new Uint8Array(0),
): Uint8Array {
  const out = concat(prefix, header, payload, section);
  view(out).setUint32(8, header.length, true);
  view(out).setBigUint64(12, BigInt(payload.length), true);
  view(out).setUint32(20, crc32(payload) >>> 0, true);
  return out;
}

// Swaps two `[[tensors]]` tables of the TOML header: the payload is then sliced in the other order.
function swapTables(text: string, rng: Rng): string | undefined {
  const parts = text.split(/(?=^\[\[tensors\]\]$)/m);
  if (parts.length < 3) return undefined;
  const i = 1 + rng.int(parts.length - 1), j = 1 + rng.int(parts.length - 1);
  if (i === j) return undefined;
  const a = parts[i].endsWith("\n") ? parts[i] : parts[i] + "\n",
    b = parts[j].endsWith("\n") ? parts[j] : parts[j] + "\n";
  [parts[i], parts[j]] = [b, a];
  return parts.join("");
}

const dmexp: FuzzTarget = {
  name: "dmexp",
  async make(dir) {
    const file = join(dir, "m.dmexp");
    await writeDmexp(file, fuzzTensors(), FUZZ_CONFIG, { dtype: "bf16", source: "fuzz@step1", step: 1 });
    return { file, target: file };
  },
  map: (f) => framedMap(f, tableRegions),
  text: {
    get: (f) => dec.decode(dmexpParts(f).header),
    set: (f, t) => {
      const p = dmexpParts(f);
      return dmexpJoin(p.prefix, enc.encode(t), p.payload, p.section);
    },
  },
  edits: {
    "swap tables": (f, rng) => {
      const p = dmexpParts(f);
      const t = swapTables(dec.decode(p.header), rng);
      return t === undefined ? undefined : dmexpJoin(p.prefix, enc.encode(t), p.payload, p.section);
    },
    "dtype": (f, rng) => {
      const p = dmexpParts(f);
      const t = dec.decode(p.header).replace(
        /^dtype = "\w+"/m,
        `dtype = "${rng.pick(["f16", "f32", "bf16"])}"`,
      );
      return dmexpJoin(p.prefix, enc.encode(t), p.payload, p.section);
    },
    "non-finite": (f, rng) => {
      const p = dmexpParts(f);
      const payload = p.payload.slice();
      const at = 2 * rng.int(payload.length / 2);
      view(payload).setUint16(at, rng.pick([0x7f80, 0xff80, 0x7fc0, 0x7c00]), true); // bf16 ±inf, NaN; f16 inf
      return dmexpJoin(p.prefix, p.header, payload, p.section);
    },
  },
  readers: { readDmexp: (p) => readDmexp(p) },
  refusal: (e) => e instanceof DmexpError,
  reseal: (f) => {
    if (f.length < 24) return f;
    const p = dmexpParts(f);
    return concat(p.prefix, sealHeader(p.prefix, p.header), p.payload, resealTokenizerSection(p.section));
  },
  minimal: "readers/dmexp.ts",
  explain: (m) =>
    m.kind.endsWith("+resealed") ? FORGED : m.bytes.length >= 24 &&
        !/^header_crc32 = "[0-9a-f]{8}"$/m.test(dec.decode(dmexpParts(m.bytes).header))
      ? "header_crc32 removed: the file reads as a reference-style file, whose header no checksum covers"
      : undefined,
};

// Where each `[[tensors]]` table starts and ends in the header (section boundaries for truncation).
function tableRegions(text: string, base: number): Region[] {
  const out: Region[] = [];
  const starts = [...text.matchAll(/^\[\[tensors\]\]$/gm)].map((m) =>
    enc.encode(text.slice(0, m.index)).length
  );
  starts.forEach((s, i) =>
    out.push({
      name: `tensors[${i}]`,
      start: base + s,
      end: base + (starts[i + 1] ?? enc.encode(text).length),
    })
  );
  return out;
}

// Tokenizer files a forger might put in a well-framed section: each must still be refused by its content.
const BAD_TOKENIZERS: Record<string, string>[] = [
  { "tokenizer.json": '{"model": {"type": "BPE", "vocab": {"a": 300}, "merges": []}}' }, // beyond the vocab
  { "tokenizer.json": '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a", "z"]]}}' }, // bad merge
  { "tokenizer.json": '{"model": {"type": "WordPiece", "vocab": {}}}' },
  { ...FUZZ_TOKENIZER, "chat_template.jinja": "{% for m in messages %}" },
  { ...FUZZ_TOKENIZER, "generation_config.json": "[1, 2]" },
];

// The version-2 file's map: the framing's, the payload ending where the section starts, then the section's.
function sectionMap(f: Uint8Array): ByteMap {
  const framed = framedMap(f, tableRegions);
  const p = dmexpParts(f), at = 24 + p.header.length + p.payload.length;
  const section = tokenizerSectionMap(f, at);
  return {
    regions: [...framed.regions.map((r) => r.name === "payload" ? { ...r, end: at } : r), ...section.regions],
    fields: [...framed.fields, ...section.fields],
  };
}

const dmexpTokenizer: FuzzTarget = {
  ...dmexp,
  name: "dmexp-tokenizer",
  async make(dir) {
    const file = join(dir, "t.dmexp");
    const opts = { dtype: "bf16" as const, source: "fuzz@step1", step: 1, tokenizer: FUZZ_TOKENIZER };
    await writeDmexp(file, fuzzTensors(), FUZZ_CONFIG, opts);
    return { file, target: file };
  },
  map: sectionMap,
  edits: {
    ...dmexp.edits,
    // A section whose framing and CRC-32 are right (and header_crc32 resealed) but whose files are not.
    "forged tokenizer": (f, rng) => {
      const p = dmexpParts(f);
      const section = encodeTokenizerSection(rng.pick(BAD_TOKENIZERS) as typeof FUZZ_TOKENIZER);
      const text = dec.decode(p.header).replace(
        /^tokenizer_bytes = \d+$/m,
        `tokenizer_bytes = ${section.length}`,
      );
      const header = enc.encode(text);
      const joined = dmexpJoin(p.prefix, header, p.payload, section);
      const prefix = joined.subarray(0, 24);
      return concat(prefix, sealHeader(prefix, header), p.payload, section);
    },
  },
  readers: { readDmexp: (p) => readDmexp(p), readDmexpTokenizer: (p) => readDmexpTokenizer(p) },
  explain: (m) => m.kind.startsWith("edit forged tokenizer") ? FORGED : dmexp.explain!(m),
};

/** What scripts/tools/fuzz.ts attacks: a dmexp file of version 1, and one of version 2 with a tokenizer. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [dmexp, dmexpTokenizer];

/**
 * What a format's fuzz hook is made of: the types and helpers that `formats/NAME/NAME-fuzz.ts` modules use to
 * tell the mutation campaign (scripts/tools/fuzz.ts) how to make a small valid file, where things are
 * in it, how its text header and checksums are rewritten, which full readers to feed it, and which
 * error a refusal must be. The mutators themselves live with the campaign (scripts/tools/fuzz-mutate.ts);
 * formats/ holds only the vocabulary, since formats/ may not import scripts/.
 *
 * A format's descriptor names its hook by path (`fuzzHook: "formats/NAME/NAME-fuzz.ts"`), loaded with
 * `loadFuzzHook`, so the readers never load fuzzing code. A hook module exports `FUZZ_TARGETS`: usually one target named after
 * the format, sometimes more (the Hugging Face folder is attacked in its config.json and in its
 * model.safetensors).
 *
 * @example
 * ```ts
 * import type { FuzzTarget } from "./fuzz-kit.ts";
 * import { F64LinesError, readF64Lines } from "./f64lines/f64lines.ts";
 * const target: FuzzTarget = {
 *   name: "f64lines",
 *   make: async (dir) => ({ file: `${dir}/m.f64lines`, target: `${dir}/m.f64lines` }),
 *   map: (f) => ({ regions: [{ name: "file", start: 0, end: f.length }], fields: [] }),
 *   readers: { read: (p) => readF64Lines(p) },
 *   refusal: (e) => e instanceof F64LinesError,
 * };
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Tensor } from "../model/tensor.ts";
import { initParams } from "../model/init.ts";
import { digestOffset } from "./digest.ts";
import { crc32 } from "node:zlib";
import type { TokenizerFiles } from "../model/tokenizer-types.ts";

/** A named byte range of a valid file (a prefix field, the header, one metadata entry, the payload). */
export interface Region {
  name: string;
  start: number;
  end: number;
}

/** An unsigned little-endian integer field that holds a length, a count, a dim or an offset. */
export interface NumField {
  name: string;
  offset: number;
  width: 4 | 8;
}

/** What a format says about its valid file: where things are, for aimed mutations. */
export interface ByteMap {
  regions: Region[];
  fields: NumField[];
}

/** A small deterministic generator (mulberry32): the same seed gives the same cases on every runtime. */
export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  pick<T>(xs: readonly T[]): T;
}

/** A format's header as text, with the lengths and the format's own checksum recomputed on change. */
export interface TextHeader {
  get(file: Uint8Array): string;
  /** The file with this header text in place; every length and the format's checksum made consistent. */
  set(file: Uint8Array, text: string): Uint8Array;
}

/** One mutation: what it did (for the report) and the new bytes. */
export interface Mutation {
  kind: string;
  bytes: Uint8Array;
}

/** What the mutation engine needs to know about a format. */
export interface MutationSpec {
  map: ByteMap;
  text?: TextHeader;
  /** Format-specific edits with the format's checksum recomputed (swaps, dtype changes, non-finite values). */
  edits?: Record<string, (file: Uint8Array, rng: Rng) => Uint8Array | undefined>;
}

/** A valid file made for a campaign: `file` is the one mutated, `target` what the readers are given. */
export interface FuzzSeed {
  file: string;
  target: string;
}

/** One kind of file under attack (a format, or part of one: the Hugging Face folder's config.json). */
export interface FuzzTarget extends Omit<MutationSpec, "map"> {
  /** The campaign's `--format` name. */
  name: string;
  /** Writes the valid file (and anything beside it that the readers need) into `dir`. */
  make(dir: string): Promise<FuzzSeed>;
  /** The byte map of the valid file. */
  map(file: Uint8Array): ByteMap;
  /** The full readers, by name: each returns what it read (compared with what it read from the valid file). */
  readers: Record<string, (target: string) => Promise<unknown>>;
  /** Whether an exception is a refusal with this format's typed error. */
  refusal(e: unknown): boolean;
  /** Recomputes the checksums ferry adds of its own, as a forger would (applied to half the cases). */
  reseal?: (file: Uint8Array) => Uint8Array;
  /** The minimal reader (path from the repository root), given the file and every tensor name. */
  minimal?: string;
  /**
   * Why a mutation that a reader accepted with a different result could pass: what no checksum of the
   * format covers (or that the mutation forged the checksums). Undefined means it should not have passed.
   */
  explain?: (m: Mutation) => string | undefined;
}

/** What a hook module (`formats/NAME/NAME-fuzz.ts`) exports. */
export interface FuzzHook {
  readonly FUZZ_TARGETS: readonly FuzzTarget[];
}

/**
 * Loads a fuzz hook by its repository path (a descriptor's `fuzzHook`). A module that does not exist or
 * exports no `FUZZ_TARGETS` array is refused with an error naming the path.
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "./fuzz-kit.ts";
 * import { dmexpFormat } from "./dmexp/dmexp.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(dmexpFormat.fuzzHook); // [the dmexp target]
 * ```
 */
export async function loadFuzzHook(path: string): Promise<FuzzHook> {
  const hook = await import(new URL(`../${path}`, import.meta.url).href) as Partial<FuzzHook>;
  if (!Array.isArray(hook.FUZZ_TARGETS)) throw new Error(`${path}: exports no FUZZ_TARGETS array`);
  return hook as FuzzHook;
}

/** The model every fuzzed file holds: the smallest shape every float format accepts (byte vocab, one layer). */
export const FUZZ_CONFIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 8,
  intermediate_size: 8,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 4,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
};

/**
 * The byte map of a file framed as dmexp and the training checkpoint are: magic (8), header length
 * (u32), payload length (u64), CRC-32, then the text header and the payload; `more` adds regions
 * inside the header.
 */
export function framedMap(f: Uint8Array, more: (header: string, at: number) => Region[] = () => []): ByteMap {
  const h = view(f).getUint32(8, true);
  return {
    regions: [
      { name: "magic", start: 0, end: 8 },
      { name: "header_length", start: 8, end: 12 },
      { name: "payload_length", start: 12, end: 20 },
      { name: "crc32", start: 20, end: 24 },
      { name: "header", start: 24, end: 24 + h },
      { name: "payload", start: 24 + h, end: f.length },
      ...more(new TextDecoder().decode(f.subarray(24, 24 + h)), 24),
    ],
    fields: [{ name: "header_length", offset: 8, width: 4 }, {
      name: "payload_length",
      offset: 12,
      width: 8,
    }],
  };
}

/** The model of every fuzzed lut4 file and session: the smallest shape the integer engine takes. */
export const FUZZ_LUT4_CONFIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 32,
  intermediate_size: 32,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 16,
  tie_word_embeddings: true,
};

/**
 * The tokenizer the campaign's tokenizer-carrying files hold (dmexp version 2, lut4 schema /2): a byte-level
 * BPE small enough to fuzz, which fits `FUZZ_CONFIG`'s vocab, with one merge, one added token and a template.
 */
export const FUZZ_TOKENIZER: TokenizerFiles = {
  "tokenizer.json": JSON.stringify({
    version: "1.0",
    added_tokens: [{ id: 3, content: "<|end|>", special: true }],
    model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: [["a", "b"]] },
  }),
  "generation_config.json": '{"eos_token_id": 3}',
  "chat_template.jinja": "{% for m in messages %}{{ m.content }}<|end|>{% endfor %}",
};

/**
 * The byte map of a tokenizer section (formats/tokenizer-section.ts) that starts at `at`: its magic, CRC-32,
 * file count and each file's name and text, for aimed mutations.
 */
export function tokenizerSectionMap(f: Uint8Array, at: number): ByteMap {
  const regions: Region[] = [
    { name: "tokenizer", start: at, end: f.length },
    { name: "tokenizer.magic", start: at, end: at + 8 },
    { name: "tokenizer.crc32", start: at + 8, end: at + 12 },
  ];
  const fields: NumField[] = [{ name: "tokenizer.files", offset: at + 12, width: 4 }];
  let p = at + 16;
  for (let k = 0; p + 4 <= f.length && k < 8; k++) {
    for (const part of ["name", "text"]) {
      if (p + 4 > f.length) break;
      const n = view(f).getUint32(p, true);
      fields.push({ name: `tokenizer.files[${k}].${part}_length`, offset: p, width: 4 });
      regions.push({
        name: `tokenizer.files[${k}].${part}`,
        start: p + 4,
        end: Math.min(f.length, p + 4 + n),
      });
      p += 4 + n;
    }
  }
  return { regions, fields };
}

/** The section with its CRC-32 recomputed, as a forger would (anything too short is left as it is). */
export function resealTokenizerSection(section: Uint8Array): Uint8Array {
  if (section.length < 16) return section;
  const out = section.slice();
  view(out).setUint32(8, crc32(out.subarray(12)) >>> 0, true);
  return out;
}

/** The tensors of `FUZZ_CONFIG` every fuzzed float file holds (seeded: the same on every run). */
export function fuzzTensors(): Tensor[] {
  return initParams(FUZZ_CONFIG, 7);
}

/** The explanation of a case whose every checksum was recomputed after the edit. */
export const FORGED = "forged: every checksum the file carries was recomputed after the edit";

/** The explanation of a case in which ferry's own whole-file digest was removed or damaged. */
export const DIGEST_GONE =
  "ferry.sha256 removed or damaged: the file reads as one not written by ferry, which no checksum covers";

/** Whether a (mutated) file still carries ferry's whole-file digest, found exactly once where its needle says. */
export function sealedBy(bytes: Uint8Array, needle: Uint8Array): boolean {
  const found = digestOffset(bytes, needle);
  return found !== undefined && "at" in found;
}

/** The byte concatenation of the parts. */
export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), at += p.length;
  return out;
}

/** A DataView over exactly these bytes. */
export function view(b: Uint8Array): DataView {
  return new DataView(b.buffer, b.byteOffset, b.byteLength);
}

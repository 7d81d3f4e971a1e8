/**
 * The fuzz hook of the Hugging Face folder (formats/huggingface/huggingface.md) for scripts/tools/fuzz.ts: two
 * targets, one per file ferry reads strictly. `hf` mutates config.json (plain JSON, no checksum) and reads
 * the whole folder; `safetensors` mutates model.safetensors (formats/safetensors/safetensors.md) with ferry's digest
 * resealed in half the cases, and is also fed to the minimal reader `readers/safetensors.ts`.
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * import { hfFormat } from "./huggingface.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(hfFormat.fuzzHook); // [hf, safetensors]
 * ```
 * @module
 */
import { join } from "node:path";
import {
  concat,
  DIGEST_GONE,
  FORGED,
  FUZZ_CONFIG,
  FUZZ_TOKENIZER,
  type FuzzTarget,
  fuzzTensors,
  sealedBy,
  view,
} from "../fuzz-kit.ts";
import { sealDigest } from "../digest.ts";
import {
  readSafetensors,
  SAFETENSORS_DIGEST_NEEDLE,
  SafetensorsError,
  writeSafetensors,
} from "../safetensors/safetensors.ts";
import { exportHuggingFace, hfFormat, HuggingFaceError, importHuggingFace } from "./huggingface.ts";
import { FormatError } from "../../model/error.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

function stParts(f: Uint8Array) {
  const n = Number(view(f).getBigUint64(0, true));
  return { header: f.subarray(8, 8 + n), data: f.subarray(8 + n) };
}

function stJoin(header: Uint8Array, data: Uint8Array): Uint8Array {
  const out = concat(new Uint8Array(8), header, data);
  view(out).setBigUint64(0, BigInt(header.length), true);
  return out;
}

const safetensors: FuzzTarget = {
  name: "safetensors",
  async make(dir) {
    const file = join(dir, "model.safetensors");
    await writeSafetensors(file, fuzzTensors(), { dtype: "F16" });
    return { file, target: file };
  },
  map(f) {
    const n = Number(view(f).getBigUint64(0, true));
    return {
      regions: [
        { name: "header_length", start: 0, end: 8 },
        { name: "header", start: 8, end: 8 + n },
        { name: "data", start: 8 + n, end: f.length },
      ],
      fields: [{ name: "header_length", offset: 0, width: 8 }],
    };
  },
  text: {
    get: (f) => dec.decode(stParts(f).header),
    set: (f, t) => stJoin(enc.encode(t), stParts(f).data),
  },
  edits: {
    "dtype": (f, rng) => {
      const p = stParts(f);
      const t = dec.decode(p.header);
      const at = [...t.matchAll(/"dtype":"(\w+)"/g)];
      if (!at.length) return undefined;
      const m = rng.pick(at);
      const repl = `"dtype":"${rng.pick(["F16", "BF16", "F32", "I16", "U8", "F64", "I64"])}"`;
      return stJoin(enc.encode(t.slice(0, m.index) + repl + t.slice(m.index! + m[0].length)), p.data);
    },
  },
  readers: { readSafetensors: (p) => readSafetensors(p) },
  refusal: (e) => e instanceof SafetensorsError,
  reseal: (f) => sealDigest(f, SAFETENSORS_DIGEST_NEEDLE),
  explain: (m) =>
    m.kind.endsWith("+resealed")
      ? FORGED
      : !sealedBy(m.bytes, SAFETENSORS_DIGEST_NEEDLE)
      ? DIGEST_GONE
      : undefined,
  minimal: "readers/safetensors.ts",
};

const hf: FuzzTarget = {
  name: "hf",
  async make(dir) {
    const folder = join(dir, "m.hf");
    await exportHuggingFace(folder, fuzzTensors(), FUZZ_CONFIG, { dtype: "bf16" });
    return { file: join(folder, "config.json"), target: folder };
  },
  map: (f) => ({ regions: [{ name: "config.json", start: 0, end: f.length }], fields: [] }),
  text: { get: (f) => dec.decode(f), set: (_f, t) => enc.encode(t) },
  readers: { importHuggingFace: (p) => importHuggingFace(p) },
  refusal: (e) => e instanceof HuggingFaceError || e instanceof SafetensorsError,
  explain: () => "config.json is Hugging Face's plain JSON: no checksum covers it",
};

// A folder with a tokenizer of its own: its tokenizer.json is attacked, the importer's checks stand in its way.
const hfTokenizer: FuzzTarget = {
  name: "hf-tokenizer",
  async make(dir) {
    const folder = join(dir, "t.hf");
    await exportHuggingFace(folder, fuzzTensors(), FUZZ_CONFIG, {
      dtype: "bf16",
      tokenizerFiles: FUZZ_TOKENIZER,
    });
    return { file: join(folder, "tokenizer.json"), target: folder };
  },
  map: (f) => ({ regions: [{ name: "tokenizer.json", start: 0, end: f.length }], fields: [] }),
  text: { get: (f) => dec.decode(f), set: (_f, t) => enc.encode(t) },
  readers: {
    importHuggingFace: (p) => importHuggingFace(p),
    "hfFormat.readTokenizer": (p) => hfFormat.readTokenizer!(p),
  },
  // The tokenizer checks are shared by every format and throw the shared error, naming the file.
  refusal: (e) =>
    e instanceof HuggingFaceError || (e instanceof FormatError && e.path.endsWith("tokenizer.json")),
  explain: () =>
    "tokenizer.json is the model's own text: no checksum covers it, and its structure passed the checks",
};

/** What scripts/tools/fuzz.ts attacks: the folder's config.json, its tokenizer.json, and its model.safetensors. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [hf, hfTokenizer, safetensors];

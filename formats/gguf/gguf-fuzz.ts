/**
 * The fuzz hook of GGUF (formats/gguf/gguf.md) for scripts/tools/fuzz.ts: a small valid file walked into its
 * byte map (every key, value, count and tensor info), edits that re-encode it from its parts (names and
 * types swapped, hyperparameters, duplicated or dropped keys, non-finite values), the reseal of ferry's
 * `ferry.sha256`, and the minimal reader `readers/gguf.ts`; for an f16 file and for block-quantized
 * q4_k_m and iq4_nl files.
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * import { ggufFormat } from "./gguf.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(ggufFormat.fuzzHook); // [the gguf target]
 * ```
 * @module
 */
import { join } from "node:path";
import {
  concat,
  DIGEST_GONE,
  FORGED,
  FUZZ_CONFIG,
  type FuzzTarget,
  fuzzTensors,
  type NumField,
  type Region,
  sealedBy,
  view,
} from "../fuzz-kit.ts";
import { sealDigest } from "../digest.ts";
import {
  GGUF_DIGEST_NEEDLE,
  type GgufDtype,
  GgufError,
  QWEN2_SPLIT_REGEX,
  readGguf,
  readGgufTokenizer,
  writeGguf,
} from "./gguf.ts";
import { BYTE_CHARS } from "../../model/tokenizer.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import type { ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import type { Tensor } from "../../model/tensor.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

interface GgufKv {
  key: string;
  type: number;
  raw: Uint8Array;
}
interface GgufInfo {
  name: string;
  ne: bigint[];
  type: number;
  offset: bigint;
}

const SCALAR = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];

// Walks a valid (ferry-written) GGUF file: the byte map, and its parts for edits that re-encode it.
function walkGguf(f: Uint8Array) {
  const d = view(f);
  const regions: Region[] = [{ name: "magic", start: 0, end: 4 }, { name: "version", start: 4, end: 8 }];
  const fields: NumField[] = [
    { name: "version", offset: 4, width: 4 },
    { name: "tensor_count", offset: 8, width: 8 },
    { name: "kv_count", offset: 16, width: 8 },
  ];
  let p = 24;
  const str = (what: string) => {
    fields.push({ name: `${what}.length`, offset: p, width: 8 });
    const n = Number(d.getBigUint64(p, true));
    const s = dec.decode(f.subarray(p + 8, p + 8 + n));
    p += 8 + n;
    return s;
  };
  const value = (t: number, what: string): void => {
    if (t === 8) str(what);
    else if (t === 9) {
      const e = d.getUint32(p, true);
      fields.push({ name: `${what}.count`, offset: p + 4, width: 8 });
      const n = Number(d.getBigUint64(p + 4, true));
      p += 12;
      for (let i = 0; i < n; i++) value(e, `${what}[]`);
    } else {
      if (t === 4) fields.push({ name: what, offset: p, width: 4 });
      p += SCALAR[t];
    }
  };
  const kvs: GgufKv[] = [];
  const nT = Number(d.getBigUint64(8, true)), nKv = Number(d.getBigUint64(16, true));
  for (let i = 0; i < nKv; i++) {
    const start = p;
    const key = str(`kv[${i}].key`);
    const type = d.getUint32(p, true);
    fields.push({ name: `${key}.type`, offset: p, width: 4 });
    p += 4;
    const vstart = p;
    value(type, key);
    kvs.push({ key, type, raw: f.slice(vstart, p) });
    regions.push({ name: key, start, end: p });
  }
  const infos: GgufInfo[] = [];
  for (let i = 0; i < nT; i++) {
    const start = p;
    const name = str(`tensor[${i}].name`);
    fields.push({ name: `${name}.n_dims`, offset: p, width: 4 });
    const nd = d.getUint32(p, true);
    p += 4;
    const ne: bigint[] = [];
    for (let j = 0; j < nd; j++) {
      fields.push({ name: `${name}.ne[${j}]`, offset: p, width: 8 }),
        ne.push(d.getBigUint64(p, true)),
        p += 8;
    }
    fields.push({ name: `${name}.type`, offset: p, width: 4 });
    const type = d.getUint32(p, true);
    fields.push({ name: `${name}.offset`, offset: p + 4, width: 8 });
    const offset = d.getBigUint64(p + 4, true);
    p += 12;
    infos.push({ name, ne, type, offset });
    regions.push({ name: `tensor info ${name}`, start, end: p });
  }
  const dataStart = Math.ceil(p / 32) * 32;
  regions.push({ name: "padding", start: p, end: dataStart }, {
    name: "data",
    start: dataStart,
    end: f.length,
  });
  return { map: { regions, fields }, kvs, infos, dataStart };
}

// Re-encodes a GGUF file from parts (the data section is kept as it is).
function ggufJoin(kvs: GgufKv[], infos: GgufInfo[], data: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  const u32 = (x: number) => {
    const b = new Uint8Array(4);
    view(b).setUint32(0, x, true);
    parts.push(b);
  };
  const u64 = (x: bigint) => {
    const b = new Uint8Array(8);
    view(b).setBigUint64(0, x, true);
    parts.push(b);
  };
  const str = (s: string) => {
    const b = enc.encode(s);
    u64(BigInt(b.length));
    parts.push(b);
  };
  parts.push(enc.encode("GGUF"));
  u32(3);
  u64(BigInt(infos.length));
  u64(BigInt(kvs.length));
  for (const kv of kvs) str(kv.key), u32(kv.type), parts.push(kv.raw);
  for (const t of infos) {
    str(t.name), u32(t.ne.length);
    for (const n of t.ne) u64(n);
    u32(t.type), u64(t.offset);
  }
  const head = concat(...parts);
  return concat(head, new Uint8Array(Math.ceil(head.length / 32) * 32 - head.length), data);
}

function ggufEdit(f: Uint8Array, edit: (kvs: GgufKv[], infos: GgufInfo[]) => boolean) {
  const w = walkGguf(f);
  return edit(w.kvs, w.infos) ? ggufJoin(w.kvs, w.infos, f.subarray(w.dataStart)) : undefined;
}

/**
 * The model of the block-quantized targets: every row a whole number of 32-value blocks, ffn_down's
 * rows (256) whole K-quant super-blocks, and 2 layers, so a q4_k_m file holds Q4_K (layer 0's
 * ffn_down), Q6_K (layer 1's), Q5_0 (the narrow Q4_K rows) and Q8_0 (the tied embeddings).
 */
const K_CONFIG: ModelConfig = {
  ...FUZZ_CONFIG,
  hidden_size: 32,
  intermediate_size: 256,
  num_hidden_layers: 2,
  head_dim: 16,
};

// One target: a valid file of `dtype`, the byte map and edits below, the full readers, and (for the
// types whose values it prints) the minimal reader.
function ggufTarget(
  name: string,
  dtype: GgufDtype,
  config: ModelConfig,
  tensors: () => Tensor[],
  tokenizer?: TokenizerFiles,
): FuzzTarget {
  return {
    ...GGUF_TARGET,
    name,
    async make(dir) {
      const file = join(dir, "m.gguf");
      await writeGguf(file, tensors(), config, { type: dtype, tokenizer });
      return { file, target: file };
    },
    readers: tokenizer
      ? { ...GGUF_TARGET.readers, readGgufTokenizer: (p) => readGgufTokenizer(p) }
      : GGUF_TARGET.readers,
    // readers/gguf.ts lists Q5_0, IQ4_NL, Q4_K and Q6_K tensors but refuses their values, and the campaign
    // reads every value of the valid file first; the f16 target's "type" edit feeds it those type ids.
    minimal: dtype === "f16" ? GGUF_TARGET.minimal : undefined,
  };
}

const GGUF_TARGET: Omit<FuzzTarget, "name" | "make"> = {
  map: (f) => walkGguf(f).map,
  edits: {
    "swap names": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        const a = rng.pick(infos), b = rng.pick(infos);
        [a.name, b.name] = [b.name, a.name];
        return a !== b;
      }),
    "type": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        // F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, IQ4_NL, Q5_K (not read), unknown
        rng.pick(infos).type = rng.pick([0, 1, 30, 8, 2, 6, 12, 14, 20, 13, 99]);
        return true;
      }),
    "hparam": (f, rng) =>
      ggufEdit(f, (kvs) => {
        const u32s = kvs.filter((k) => k.type === 4 || k.type === 6);
        const kv = rng.pick(u32s);
        const b = new Uint8Array(4);
        const v = rng.pick([0, 1, 2 ** 31, 2 ** 32 - 1, 99999, 3]);
        if (kv.type === 6) view(b).setFloat32(0, rng.pick([NaN, Infinity, 0, -1, 1e-30, 1e30]), true);
        else view(b).setUint32(0, v, true);
        kv.raw = b;
        return true;
      }),
    "duplicate kv": (f, rng) =>
      ggufEdit(f, (kvs) => {
        kvs.splice(rng.int(kvs.length), 0, rng.pick(kvs));
        return true;
      }),
    "drop kv": (f, rng) => ggufEdit(f, (kvs) => (kvs.splice(rng.int(kvs.length), 1), true)),
    "swap kvs": (f, rng) =>
      ggufEdit(f, (kvs) => {
        const i = rng.int(kvs.length), j = rng.int(kvs.length);
        [kvs[i], kvs[j]] = [kvs[j], kvs[i]];
        return i !== j;
      }),
    "swap infos": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        const i = rng.int(infos.length), j = rng.int(infos.length);
        [infos[i], infos[j]] = [infos[j], infos[i]];
        return i !== j;
      }),
    "non-finite": (f, rng) => {
      const w = walkGguf(f);
      const out = f.slice();
      const at = w.dataStart + 2 * rng.int((f.length - w.dataStart) / 2);
      view(out).setUint16(at, rng.pick([0x7c00, 0xfc00, 0x7e00]), true);
      return out;
    },
  },
  readers: { readGguf: (p) => readGguf(p) },
  refusal: (e) => e instanceof GgufError,
  reseal: (f) => sealDigest(f, GGUF_DIGEST_NEEDLE),
  explain: (m) =>
    m.kind.endsWith("+resealed") ? FORGED : !sealedBy(m.bytes, GGUF_DIGEST_NEEDLE) ? DIGEST_GONE : undefined,
  minimal: "readers/gguf.ts",
};

/**
 * A tiny byte-level BPE in Qwen2's pipeline (the 256 byte characters, two merges, two special tokens):
 * the `tokenizer.*` keys of a model's own tokenizer, and the reader's rebuild of them, under attack.
 */
function tinyBpe(): TokenizerFiles {
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
  const special = (id: number, content: string) => ({ id, content, normalized: false, special: true });
  const json = {
    added_tokens: [special(258, "<|endoftext|>"), special(259, "<|im_end|>")],
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: QWEN2_SPLIT_REGEX }, behavior: "Isolated" },
        byteLevel,
      ],
    },
    decoder: byteLevel,
    model: {
      type: "BPE",
      vocab: Object.fromEntries([...BYTE_CHARS.map((c, i) => [c, i]), ["ĠĠ", 256], ["Ġt", 257]]),
      merges: [["Ġ", "Ġ"], ["Ġ", "t"]],
    },
  };
  return {
    "tokenizer.json": JSON.stringify(json),
    "tokenizer_config.json": JSON.stringify({
      eos_token: "<|im_end|>",
      pad_token: "<|endoftext|>",
      chat_template: "{{ x }}",
    }),
  };
}

const BPE_CONFIG: ModelConfig = { ...FUZZ_CONFIG, vocab_size: 264 };

/**
 * What scripts/tools/fuzz.ts attacks: an f16 GGUF file (`gguf`, the minimal reader too), a q4_k_m one
 * (Q4_K, Q6_K, Q5_0 and Q8_0 blocks), an iq4_nl one, and an f32 one carrying its own BPE tokenizer
 * (`gguf-bpe`, also through `readGgufTokenizer`).
 */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [
  ggufTarget("gguf", "f16", FUZZ_CONFIG, fuzzTensors),
  ggufTarget("gguf-q4_k_m", "q4_k_m", K_CONFIG, () => initParams(K_CONFIG, 7)),
  ggufTarget("gguf-iq4_nl", "iq4_nl", K_CONFIG, () => initParams(K_CONFIG, 7)),
  ggufTarget("gguf-bpe", "f32", BPE_CONFIG, () => initParams(BPE_CONFIG, 7), tinyBpe()),
];

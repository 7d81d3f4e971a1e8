/**
 * The mapping between a ferry Qwen3 model and llama.cpp's `qwen3` architecture, like gguf-py's
 * `tensor_mapping.py` and `constants.py`: metadata keys and their strict types, tensor names in both
 * spellings, and the two directions (a model to metadata and encoded tensors; a parsed file back to a
 * config and f32 tensors).
 *
 * @example
 * ```ts
 * import { qwen3FromGguf, qwen3Metadata, qwen3Tensors } from "./gguf-qwen3.ts";
 * import { encodeGguf, parseGguf } from "./gguf-container.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const cfg: ModelConfig, tensors: Tensor[], bytes: Uint8Array; // bytes: the chunks, joined
 * const chunks = encodeGguf(qwen3Metadata(cfg, "Q8_0"), qwen3Tensors(tensors, cfg, "Q8_0", "m.gguf"));
 * const { config, tensors: back } = qwen3FromGguf(parseGguf(bytes, "m.gguf"), "m.gguf");
 * ```
 * @module
 */
import { checkTensors, configLimit, type ModelConfig, paramShapes } from "../../model/config.ts";
import type { Tensor } from "../../model/tensor.ts";
import { BOS, BYTE_VOCAB_SIZE, EOS } from "../../model/tokenizer.ts";
import {
  GGUF_DEFAULT_ALIGNMENT,
  GgufError,
  type GgufFile,
  type GgufHeader,
  type GgufTensorData,
  type GgufValue,
  tensorToF32,
} from "./gguf-container.ts";
import {
  decodeTensor,
  encodeTensor,
  GGML_QNT_VERSION,
  GGML_TYPES,
  type GgmlType,
} from "../../quantize/quants.ts";
import { byteVocabulary, checkTokenizer } from "./gguf-vocab.ts";
import { archKey, GGUF_KEYS } from "./gguf-keys.ts";
import { checkBpeVocabulary, hasBpeVocabulary } from "./gguf-tokenizer.ts";
import type { ExportOrigin } from "../format.ts";

/** The architecture string and metadata key prefix. */
export const QWEN3_ARCH = "qwen3";

const { General, LLM, Attention, Rope, Tokenizer } = GGUF_KEYS;

/** Hugging Face name ↔ llama.cpp name, for tensors outside the layers. */
export const QWEN3_GLOBAL_TENSORS: ReadonlyArray<readonly [string, string]> = [
  ["model.embed_tokens.weight", "token_embd.weight"],
  ["model.norm.weight", "output_norm.weight"],
  ["lm_head.weight", "output.weight"],
];

/** Hugging Face `model.layers.N.` suffix ↔ llama.cpp `blk.N.` suffix. */
export const QWEN3_LAYER_TENSORS: ReadonlyArray<readonly [string, string]> = [
  ["input_layernorm.weight", "attn_norm.weight"],
  ["self_attn.q_proj.weight", "attn_q.weight"],
  ["self_attn.k_proj.weight", "attn_k.weight"],
  ["self_attn.v_proj.weight", "attn_v.weight"],
  ["self_attn.q_norm.weight", "attn_q_norm.weight"],
  ["self_attn.k_norm.weight", "attn_k_norm.weight"],
  ["self_attn.o_proj.weight", "attn_output.weight"],
  ["post_attention_layernorm.weight", "ffn_norm.weight"],
  ["mlp.gate_proj.weight", "ffn_gate.weight"],
  ["mlp.up_proj.weight", "ffn_up.weight"],
  ["mlp.down_proj.weight", "ffn_down.weight"],
];

/**
 * `qwen3.*` hyperparameter keys: the suffix, its stored type (llama.cpp refuses any other type), the
 * config field it carries, and the default llama.cpp assumes when a file leaves it out
 * (`undefined` = required).
 */
export const QWEN3_HPARAMS: ReadonlyArray<
  readonly [
    string,
    "u32" | "f32",
    keyof ModelConfig,
    ((c: Partial<ModelConfig>) => number | undefined) | undefined,
  ]
> = [
  [LLM.CONTEXT_LENGTH, "u32", "max_position_embeddings", undefined],
  [LLM.EMBEDDING_LENGTH, "u32", "hidden_size", undefined],
  [LLM.BLOCK_COUNT, "u32", "num_hidden_layers", undefined],
  [LLM.FEED_FORWARD_LENGTH, "u32", "intermediate_size", undefined],
  [Attention.HEAD_COUNT, "u32", "num_attention_heads", undefined],
  [Attention.HEAD_COUNT_KV, "u32", "num_key_value_heads", (c) => c.num_attention_heads],
  [Attention.KEY_LENGTH, "u32", "head_dim", (c) => c.hidden_size! / c.num_attention_heads!],
  [Attention.VALUE_LENGTH, "u32", "head_dim", (c) => c.hidden_size! / c.num_attention_heads!],
  [Rope.DIMENSION_COUNT, "u32", "head_dim", (c) => c.head_dim],
  [Attention.LAYERNORM_RMS_EPS, "f32", "rms_norm_eps", undefined],
  [Rope.FREQ_BASE, "f32", "rope_theta", () => 10000],
];

// ─── Writing ─────────────────────────────────────────────────────────────────────────────────────

/**
 * llama.cpp's name for a ferry (Hugging Face) tensor name, or undefined when it has none.
 *
 * @example
 * ```ts
 * import { ggufTensorName } from "./gguf-qwen3.ts";
 * ggufTensorName("model.layers.3.mlp.down_proj.weight"); // "blk.3.ffn_down.weight"
 * ```
 */
export function ggufTensorName(hf: string): string | undefined {
  const g = QWEN3_GLOBAL_TENSORS.find(([h]) => h === hf);
  if (g) return g[1];
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const l = m && QWEN3_LAYER_TENSORS.find(([h]) => h === m[2]);
  return l ? `blk.${m![1]}.${l[1]}` : undefined;
}

/**
 * The ferry (Hugging Face) name of a llama.cpp tensor name, or undefined when it has none.
 *
 * @example
 * ```ts
 * import { hfTensorName } from "./gguf-qwen3.ts";
 * hfTensorName("output_norm.weight"); // "model.norm.weight"
 * ```
 */
export function hfTensorName(gguf: string): string | undefined {
  const g = QWEN3_GLOBAL_TENSORS.find(([, n]) => n === gguf);
  if (g) return g[0];
  const m = /^blk\.(\d+)\.(.+)$/.exec(gguf);
  const l = m && QWEN3_LAYER_TENSORS.find(([, n]) => n === m[2]);
  return l ? `model.layers.${m![1]}.${l[0]}` : undefined;
}

/**
 * The metadata ferry writes for a model: general.*, the qwen3.* hyperparameters with the types
 * llama.cpp checks, and the byte tokenizer as a "gpt2" vocabulary with no merges.
 *
 * @example
 * ```ts
 * import { qwen3Metadata } from "./gguf-qwen3.ts";
 * import { PRESETS } from "../../model/config.ts";
 * const kv = qwen3Metadata(PRESETS.default, "Q4_0", "ferry");
 * ```
 */
export function qwen3Metadata(
  config: ModelConfig,
  type: GgmlType,
  name = "ferry",
  ftype: number = GGML_TYPES[type].ftype,
  vocabulary: ReadonlyArray<[string, GgufValue]> = byteVocabularyMetadata(config.vocab_size),
): Array<[string, GgufValue]> {
  const kv: Array<[string, GgufValue]> = [
    [General.ARCHITECTURE, { type: "string", value: QWEN3_ARCH }],
    [General.NAME, { type: "string", value: name }],
    [General.FILE_TYPE, { type: "u32", value: ftype }],
    [General.QUANTIZATION_VERSION, { type: "u32", value: GGML_QNT_VERSION }],
    [General.ALIGNMENT, { type: "u32", value: GGUF_DEFAULT_ALIGNMENT }],
  ];
  for (const [suffix, t, field] of QWEN3_HPARAMS) {
    kv.push([archKey(QWEN3_ARCH, suffix), { type: t, value: config[field] as number }]);
  }
  kv.push(...vocabulary);
  return kv;
}

/** ferry's byte tokenizer as `tokenizer.*` keys: a "gpt2" vocabulary of bytes, BOS and EOS, no merges. */
function byteVocabularyMetadata(vocab: number): Array<[string, GgufValue]> {
  const { tokens, types } = byteVocabulary(vocab);
  return [
    [Tokenizer.MODEL, { type: "string", value: "gpt2" }],
    [Tokenizer.PRE, { type: "string", value: "default" }],
    [Tokenizer.LIST, { type: "array", elem: "string", value: tokens }],
    [Tokenizer.TOKEN_TYPE, { type: "array", elem: "i32", value: types }],
    [Tokenizer.MERGES, { type: "array", elem: "string", value: [] }],
    [Tokenizer.BOS_ID, { type: "u32", value: BOS }],
    [Tokenizer.EOS_ID, { type: "u32", value: EOS }],
    [Tokenizer.ADD_BOS, { type: "bool", value: true }],
    [Tokenizer.ADD_EOS, { type: "bool", value: false }],
  ];
}

/** Picks a matrix's type from its GGUF name and `ne` (innermost first): gguf-mix.ts's rules. */
export type TensorTypeRule = (ggufName: string, ne: number[]) => GgmlType;

/** One tensor as the writer will lay it out, before any of its values are read. */
export interface GgufTensorPlan {
  /** The ferry (Hugging Face) name. */
  hf: string;
  /** The llama.cpp name. */
  name: string;
  ne: number[];
  type: GgmlType;
}

/** Options of `qwen3TensorPlans` and `qwen3Tensors`. */
export interface Qwen3TensorOptions {
  /** Per matrix (ferry name), one importance weight per input column. */
  importance?: Readonly<Record<string, Float32Array>>;
  /** The model carries its own tokenizer, so ferry's byte tokenizer's 258 ids need not fit. */
  ownTokenizer?: boolean;
}

/**
 * The GGUF layout of a model's tensors from their names and dims alone: llama.cpp names, `ne`
 * reversed from ferry's dims, matrices as `type` (one type, or a rule per tensor such as
 * gguf-mix.ts's) and 1-D tensors as F32. Checks names and dims against the config, blocks and
 * importance lengths; `where` names the destination in errors.
 *
 * @example
 * ```ts
 * import { qwen3TensorPlans } from "./gguf-qwen3.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { TensorSource } from "../../model/tensor.ts";
 * declare const sources: TensorSource[], cfg: ModelConfig;
 * const plans = qwen3TensorPlans(sources, cfg, "Q8_0", "m.gguf"); // plans[0].name === "token_embd.weight"
 * ```
 */
export function qwen3TensorPlans(
  tensors: ReadonlyArray<{ name: string; dims: readonly number[] }>,
  config: ModelConfig,
  type: GgmlType | TensorTypeRule,
  where = "gguf",
  opts: Qwen3TensorOptions = {},
): GgufTensorPlan[] {
  if (!opts.ownTokenizer && config.vocab_size < BYTE_VOCAB_SIZE) {
    throw new GgufError(
      where,
      "VocabMismatch",
      "vocab_size",
      `${config.vocab_size}; ferry's byte tokenizer needs at least ${BYTE_VOCAB_SIZE}`,
    );
  }
  const bad = checkTensors(config, tensors);
  if (bad) throw new GgufError(where, bad.code, `tensor ${bad.tensor}`, bad.problem, bad);
  return paramShapes(config).map(({ name, dims }) => {
    const ne = [...dims].reverse();
    const ty = dims.length === 1
      ? "F32"
      : typeof type === "function"
      ? type(ggufTensorName(name)!, ne)
      : type;
    if (ne[0] % GGML_TYPES[ty].blockSize !== 0) {
      throw new GgufError(
        where,
        "InvalidShape",
        `tensor ${name}`,
        `${ty} needs the input dim (${ne[0]}) to be a multiple of ${
          GGML_TYPES[ty].blockSize
        }; choose f32, f16 or bf16`,
      );
    }
    const imp = opts.importance?.[name];
    if (imp && imp.length !== ne[0]) {
      throw new GgufError(
        where,
        "SizeMismatch",
        `importance of ${name}`,
        `${imp.length} weights; expected one per column (${ne[0]})`,
      );
    }
    return { hf: name, name: ggufTensorName(name)!, ne, type: ty };
  });
}

/** About 4 Mi values (16 MiB of f32) per encoded piece: whole rows, so every block stays whole. */
const PIECE_VALUES = 1 << 22;

/**
 * One tensor's GGUF bytes, encoded a few rows at a time so no more than a piece of it is ever held
 * (its values come from `read`, which may fill `scratch` or return a view). Refuses a non-finite
 * value or a value that overflows the type's f16 (an F16 element, a block's scale).
 *
 * @example
 * ```ts
 * import { encodeTensorPieces, type GgufTensorPlan } from "./gguf-qwen3.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const plan: GgufTensorPlan, t: Tensor, sink: (piece: Uint8Array) => void; // t: the plan's tensor
 * for await (const piece of encodeTensorPieces(plan, (s, n) => t.data.subarray(s, s + n), "m.gguf")) sink(piece);
 * ```
 */
export async function* encodeTensorPieces(
  plan: GgufTensorPlan,
  read: (start: number, count: number, scratch: Float32Array) => Float32Array | Promise<Float32Array>,
  where: string,
  importance?: Float32Array,
): AsyncGenerator<Uint8Array> {
  const row = plan.ne[0], total = plan.ne.reduce((a, b) => a * b, 1);
  const step = Math.max(1, Math.floor(PIECE_VALUES / row)) * row;
  const scratch = new Float32Array(Math.min(step, total));
  for (let start = 0; start < total; start += step) {
    const count = Math.min(step, total - start);
    const data = await read(start, count, scratch.subarray(0, count));
    yield encodePiece(plan, data.length === count ? data : data.subarray(0, count), start, where, importance);
  }
}

function encodePiece(
  plan: GgufTensorPlan,
  data: Float32Array,
  start: number,
  where: string,
  importance?: Float32Array,
): Uint8Array {
  const field = `tensor ${plan.hf}`;
  const bad = data.findIndex((x) => !Number.isFinite(x));
  if (bad >= 0) {
    throw new GgufError(
      where,
      "NotFinite",
      field,
      `element ${start + bad} is ${data[bad]}; expected a finite number`,
    );
  }
  const ty = plan.type;
  const bytes = encodeTensor(ty, data, importance);
  if (ty !== "F32" && ty !== "BF16") {
    // An F16 value, or a block's f16 scale (d, or Q4_K's dmin), past 65504 decodes to a non-finite value.
    const back = decodeTensor(ty, bytes, data.length);
    const over = back.findIndex((x) => !Number.isFinite(x));
    if (over >= 0) {
      throw new GgufError(
        where,
        "NotFinite",
        field,
        ty === "F16"
          ? `element ${start + over} = ${data[over]} overflows f16 (max 65504)`
          : `block ${Math.floor((start + over) / GGML_TYPES[ty].blockSize)}'s scale overflows f16`,
      );
    }
  }
  return bytes;
}

/**
 * The GGUF tensors of a model in memory, encoded whole (`qwen3TensorPlans`, then each tensor's
 * bytes): the writer streams instead, tensor by tensor. Checks the tensors against the config first
 * (names, dims, finite values, blocks, f16 range); `where` names the destination in errors.
 *
 * @example
 * ```ts
 * import { qwen3Metadata, qwen3Tensors } from "./gguf-qwen3.ts";
 * import { encodeGguf } from "./gguf-container.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const cfg: ModelConfig, tensors: Tensor[];
 * const chunks = encodeGguf(qwen3Metadata(cfg, "Q8_0"), qwen3Tensors(tensors, cfg, "Q8_0", "m.gguf"));
 * ```
 */
export function qwen3Tensors(
  tensors: readonly Tensor[],
  config: ModelConfig,
  type: GgmlType | TensorTypeRule,
  where = "gguf",
  importance?: Readonly<Record<string, Float32Array>>,
): GgufTensorData[] {
  const plans = qwen3TensorPlans(tensors, config, type, where, { importance });
  const byName = new Map(tensors.map((t) => [t.name, t]));
  return plans.map((plan) => {
    const bytes = encodePiece(plan, byName.get(plan.hf)!.data, 0, where, importance?.[plan.hf]);
    return { name: plan.name, ne: plan.ne, type: plan.type, bytes };
  });
}

// ─── Reading ─────────────────────────────────────────────────────────────────────────────────────

/** What `readGguf` gives back. */
export interface LoadedGguf {
  config: ModelConfig;
  /** f32 tensors under ferry's names, in `paramShapes` order, dequantized where stored quantized. */
  tensors: Tensor[];
  /** The type each tensor was stored as, by ferry name. */
  types: Record<string, GgmlType>;
  /** The parsed header (metadata, tensor infos), for what lies beyond the config. */
  file: Omit<GgufHeader, "end">;
  /** The verdict on ferry's `ferry.sha256` (see formats/digest.ts); absent when the file has none. */
  digest?: { stored: string; computed: string; ok: boolean };
  /** What the file records of where the weights came from (`readGguf` fills it in; see `ggufOrigin`). */
  origin?: ExportOrigin;
}

/**
 * The ferry model in a parsed GGUF file (see `readGguf`); `where` names the source in errors.
 *
 * @example
 * ```ts
 * import { qwen3FromGguf } from "./gguf-qwen3.ts";
 * import { parseGguf } from "./gguf-container.ts";
 * declare const bytes: Uint8Array; // the file
 * const { config, tensors } = qwen3FromGguf(parseGguf(bytes, "m.gguf"), "m.gguf");
 * ```
 */
export function qwen3FromGguf(file: GgufFile, where = "gguf"): LoadedGguf {
  const config = qwen3ConfigFromGguf(file, where);
  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const tensors: Tensor[] = [];
  const types: Record<string, GgmlType> = {};
  for (const { name, dims } of paramShapes(config)) {
    const t = byName.get(ggufTensorName(name)!)!;
    tensors.push({ name, dims: [...dims], data: checkedValues(t, tensorToF32(t), where) });
    types[name] = t.type;
  }
  return { config, tensors, types, file };
}

/**
 * A stored tensor's decoded values, refused (naming the tensor) when one is not finite; `first` is the
 * index of `data[0]` in the tensor, for a chunk.
 *
 * @example
 * ```ts
 * import { checkedValues } from "./gguf-qwen3.ts";
 * import type { GgufTensorInfo } from "./gguf-container.ts";
 * import { decodeTensor } from "../../quantize/quants.ts";
 * declare const info: GgufTensorInfo, bytes: Uint8Array, n: number; // n: the tensor's element count
 * const data = checkedValues(info, decodeTensor(info.type, bytes, n), "m.gguf");
 * ```
 */
export function checkedValues(
  t: { name: string },
  data: Float32Array,
  where: string,
  first = 0,
): Float32Array {
  const bad = data.findIndex((x) => !Number.isFinite(x));
  if (bad >= 0) {
    throw new GgufError(
      where,
      "NotFinite",
      `tensor ${t.name}`,
      `element ${first + bad} is ${data[bad]}; expected a finite number`,
    );
  }
  return data;
}

/**
 * The ferry config a GGUF's header describes, from its metadata and tensor infos alone (no tensor
 * data): the architecture, the hyperparameters with llama.cpp's strict types, the vocabulary (ferry's
 * bytes, or a BPE whose keys `tokenizerFromMetadata` checks), and that the tensors are exactly the
 * model's with the shapes the config implies.
 *
 * @example
 * ```ts
 * import { qwen3ConfigFromGguf } from "./gguf-qwen3.ts";
 * import { type GgufHeader, parseGgufHeader } from "./gguf-container.ts";
 * declare const prefix: Uint8Array, size: number; // the file's first bytes, and its size
 * const config = qwen3ConfigFromGguf(parseGgufHeader(prefix, size, "m.gguf") as GgufHeader, "m.gguf");
 * ```
 */
export function qwen3ConfigFromGguf(
  file: Pick<GgufHeader, "metadata" | "tensors">,
  where = "gguf",
): ModelConfig {
  const md = file.metadata;
  const arch = md.get(General.ARCHITECTURE);
  if (!arch) throw new GgufError(where, "MissingField", General.ARCHITECTURE, "missing");
  if (arch.type !== "string" || arch.value !== QWEN3_ARCH) {
    throw new GgufError(
      where,
      "Unsupported",
      General.ARCHITECTURE,
      `${JSON.stringify(arch.value)}; expected "${QWEN3_ARCH}"`,
    );
  }
  const cfg: Partial<ModelConfig> = {};
  for (const [suffix, type, field, fallback] of QWEN3_HPARAMS) {
    const key = archKey(QWEN3_ARCH, suffix);
    const v = md.get(key);
    let x: number | undefined;
    if (v === undefined) {
      x = fallback?.(cfg);
      if (x === undefined) throw new GgufError(where, "MissingField", key, `missing (expected ${type})`);
    } else if (v.type !== type) {
      throw new GgufError(
        where,
        "WrongType",
        key,
        `has type ${v.type === "array" ? `array of ${v.elem}` : v.type}; expected ${type}`,
      );
    } else x = type === "f32" ? shortestF32Decimal(v.value as number) : v.value as number;
    if (!(x > 0) || !Number.isFinite(x) || (type === "u32" && !Number.isInteger(x))) {
      throw new GgufError(
        where,
        "InvalidValue",
        key,
        `${x}; expected a positive ${type === "u32" ? "integer" : "number"}`,
      );
    }
    const prev = cfg[field];
    if (prev !== undefined && prev !== x) {
      throw new GgufError(
        where,
        "InvalidValue",
        key,
        `${x} differs from ${prev} set by another key; ferry needs one head size for q, k, v and RoPE`,
      );
    }
    (cfg as Record<string, number>)[field] = x;
  }
  const scaling = md.get(archKey(QWEN3_ARCH, Rope.SCALING_TYPE));
  if (scaling && !(scaling.type === "string" && scaling.value === "none")) {
    throw new GgufError(
      where,
      "Unsupported",
      archKey(QWEN3_ARCH, Rope.SCALING_TYPE),
      `${JSON.stringify(scaling.value)}; ferry supports no RoPE scaling`,
    );
  }
  if (cfg.num_attention_heads! % cfg.num_key_value_heads! !== 0) {
    throw new GgufError(
      where,
      "InvalidValue",
      archKey(QWEN3_ARCH, Attention.HEAD_COUNT_KV),
      `${cfg.num_key_value_heads} does not divide head_count ${cfg.num_attention_heads}`,
    );
  }
  if (cfg.head_dim! % 2 !== 0) {
    throw new GgufError(
      where,
      "InvalidValue",
      archKey(QWEN3_ARCH, Attention.KEY_LENGTH),
      `${cfg.head_dim} is odd; RoPE needs it even`,
    );
  }

  const byName = new Map(file.tensors.map((t) => [t.name, t]));
  const embd = byName.get("token_embd.weight");
  if (!embd) throw new GgufError(where, "MissingTensor", "tensor token_embd.weight", "missing");
  if (embd.ne.length !== 2) {
    throw new GgufError(
      where,
      "InvalidShape",
      "tensor token_embd.weight",
      `has ne [${embd.ne}]; expected 2 dims`,
    );
  }
  cfg.vocab_size = embd.ne[1];
  cfg.tie_word_embeddings = !byName.has("output.weight");
  const config = cfg as ModelConfig;
  const limit = configLimit(config);
  if (limit) {
    const key = QWEN3_HPARAMS.find(([, , field]) => field === limit.field)?.[0];
    throw new GgufError(where, "InvalidValue", key ? archKey(QWEN3_ARCH, key) : limit.field, limit.message);
  }
  if (hasBpeVocabulary(md)) checkBpeVocabulary(md, config.vocab_size, where);
  else checkTokenizer(md, config.vocab_size, where);

  // The shared shape check on the tensors under ferry's names; the refusal speaks GGUF (names, `ne`).
  const stored = file.tensors.map((t) => {
    const hf = hfTensorName(t.name);
    if (!hf) {
      throw new GgufError(where, "UnknownTensor", `tensor ${t.name}`, "is not a tensor of this qwen3 model");
    }
    return { name: hf, dims: [...t.ne].reverse() };
  });
  const bad = checkTensors(config, stored);
  if (bad) {
    const gname = ggufTensorName(bad.tensor)!, field = `tensor ${gname}`;
    const want = [...bad.expectedDims ?? []].reverse();
    const problem = bad.kind === "unknown"
      ? "is not a tensor of this qwen3 model"
      : bad.kind === "missing"
      ? `missing (expected ne [${want}])`
      : bad.kind === "dims"
      ? `has ne [${byName.get(gname)!.ne}]; the metadata implies [${want}]`
      : bad.problem;
    throw new GgufError(where, bad.code, field, problem, bad);
  }
  return config;
}

/**
 * The shortest decimal that narrows to the same f32: a config value such as 1e-6 is stored as the
 * f32 nearest it, and this gives 1e-6 back rather than 9.999999974752427e-7.
 *
 * @example
 * ```ts
 * import { shortestF32Decimal } from "./gguf-qwen3.ts";
 * shortestF32Decimal(Math.fround(1e-6)); // 1e-6
 * ```
 */
export function shortestF32Decimal(x: number): number {
  for (let p = 1; p <= 9; p++) {
    const y = Number(x.toPrecision(p));
    if (Math.fround(y) === x) return y;
  }
  return x;
}

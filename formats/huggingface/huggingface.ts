/**
 * The Hugging Face directory: export a ferry model as a `Qwen3ForCausalLM` checkpoint that
 * transformers loads (config.json, generation_config.json, model.safetensors, tokenizer.json,
 * tokenizer_config.json), and import such a directory, single-file or sharded, back into ferry.
 * The spec of what ferry writes and accepts is formats/huggingface/huggingface.md.
 *
 * Import refuses, by name, every config field that would change the maths (rope scaling, sliding
 * window, biases, mixture of experts, another activation) and every field it does not know: a
 * checkpoint is run exactly as its config says, or not at all.
 *
 * @example
 * ```ts
 * import { exportHuggingFace, importHuggingFace } from "./huggingface.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import { buildModel } from "../../model/qwen3.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[], config: ModelConfig;
 * await exportHuggingFace("out/hf", tensors, config, { dtype: "bf16" });
 * const { config: cfg, tensors: back } = await importHuggingFace("out/hf");
 * const model = buildModel(cfg, back);
 * ```
 * @module
 */
import { mkdir, readFile, rm, stat } from "node:fs/promises";
import { statSync } from "node:fs";
import { join } from "node:path";
import {
  type Dtype,
  INDEX_FILE,
  openSafetensors,
  openSafetensorsIndex,
  type WriteDtype,
  writeSafetensors,
} from "../safetensors/safetensors.ts";
import {
  isJsonObject,
  JSON_REFUSALS,
  JsonNumber,
  type JsonObject,
  type JsonValue,
  parseStrictJson,
  StrictJsonError,
} from "../json.ts";
import { writeAtomic } from "../io.ts";
import {
  checkTensors,
  ConfigError,
  type ModelConfig,
  paramShapes,
  validateConfig,
} from "../../model/config.ts";
import { BOS, BOS_TOKEN, BYTE_VOCAB_SIZE, EOS, EOS_TOKEN } from "../../model/tokenizer.ts";
import { materialize, numel, type Tensor, type TensorSource, tensorSource } from "../../model/tensor.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../../model/tokenizer-types.ts";
import {
  addedToken,
  byteTokenizerJson,
  readTokenizerFolder,
  tokenizerInfo,
} from "./huggingface-tokenizer.ts";
import { formatErrorClass, messageWithoutCode, TENSOR_REFUSALS } from "../../model/error.ts";
import type { ExportOrigin, FormatDescriptor } from "../format.ts";

/** The weight dtypes of an export, by ferry's name; with their safetensors and torch names. */
export const HF_DTYPES = {
  f32: { safetensors: "F32", torch: "float32" },
  f16: { safetensors: "F16", torch: "float16" },
  bf16: { safetensors: "BF16", torch: "bfloat16" },
} as const satisfies Record<string, { safetensors: WriteDtype; torch: string }>;
/** A dtype `exportHuggingFace` writes. */
export type HfDtype = keyof typeof HF_DTYPES;

/** The files of the directory. */
export const HF_FILES = {
  config: "config.json",
  generation: "generation_config.json",
  weights: "model.safetensors",
  index: INDEX_FILE,
  tokenizer: "tokenizer.json",
  tokenizerConfig: "tokenizer_config.json",
} as const;

/** The text of ferry's special tokens in tokenizer.json (ids 256 and 257). */

/**
 * Why a directory (or an export request) was refused; `field` is a config field or a tensor name.
 * formats/huggingface/huggingface.md ("Refusals") says what each code means.
 */
export const HUGGINGFACE_REFUSALS = [
  ["MissingFile", "AmbiguousWeights", "MissingField", "UnknownField", "UnsupportedField", "InvalidValue"],
  ["UnsupportedDtype", "TiedMismatch"],
  JSON_REFUSALS,
  TENSOR_REFUSALS,
] as const;
/** A code of `HUGGINGFACE_REFUSALS`. */
export type HuggingFaceErrorCode = typeof HUGGINGFACE_REFUSALS[number][number];

/** A Hugging Face directory that ferry refuses: names the file, the field and what was expected. */
export class HuggingFaceError extends formatErrorClass(HUGGINGFACE_REFUSALS) {}

// ---------------------------------------------------------------------------------------------
// Export

/** Options for `exportHuggingFace`. */
export interface HfExportOptions {
  /** Weight dtype; default f32, the lossless one. */
  dtype?: HfDtype;
  /**
   * Write ferry's byte tokenizer (tokenizer.json, tokenizer_config.json, BOS/EOS ids). Default: when
   * the vocab is exactly the byte tokenizer's 258; a model with another vocab has some other tokenizer.
   */
  tokenizer?: boolean;
  /** Where the weights came from, kept in model.safetensors' metadata as `ferry.name`, `ferry.step`, `ferry.source`. */
  origin?: ExportOrigin;
  /**
   * The model's own tokenizer files, copied into the folder byte for byte in place of ferry's byte
   * tokenizer (config.json then takes its BOS and EOS ids from generation_config.json).
   */
  tokenizerFiles?: TokenizerFiles;
}

/** The model.safetensors metadata keys of an export's origin (a string-to-string map, so the step in digits). */
export const ORIGIN_KEYS = { name: "ferry.name", step: "ferry.step", source: "ferry.source" } as const;

/**
 * An origin as model.safetensors metadata: each field present under its `ORIGIN_KEYS` key, the step
 * in decimal digits.
 *
 * @example
 * ```ts
 * import { originMetadata } from "./huggingface.ts";
 * originMetadata({ name: "ferry", step: 12 }); // { "ferry.name": "ferry", "ferry.step": "12" }
 * ```
 */
export function originMetadata(origin: ExportOrigin = {}): Record<string, string> {
  const out: Record<string, string> = {};
  if (origin.name !== undefined) out[ORIGIN_KEYS.name] = origin.name;
  if (origin.step !== undefined) out[ORIGIN_KEYS.step] = String(origin.step);
  if (origin.source !== undefined) out[ORIGIN_KEYS.source] = origin.source;
  return out;
}

/**
 * The origin model.safetensors' metadata records (see `originMetadata`); a `ferry.step` that is not a
 * non-negative integer in canonical digits below 2^53 is refused.
 *
 * @example
 * ```ts
 * import { metadataOrigin } from "./huggingface.ts";
 * metadataOrigin({ "ferry.step": "12" }, "m.hf/model.safetensors"); // { step: 12 }
 * ```
 */
export function metadataOrigin(metadata: Record<string, string>, where: string): ExportOrigin {
  const origin: ExportOrigin = {};
  const { [ORIGIN_KEYS.name]: name, [ORIGIN_KEYS.step]: step, [ORIGIN_KEYS.source]: source } = metadata;
  if (name !== undefined) origin.name = name;
  if (step !== undefined) {
    if (!/^(?:0|[1-9][0-9]*)$/.test(step) || !Number.isSafeInteger(Number(step))) {
      throw new HuggingFaceError(
        where,
        "InvalidValue",
        `__metadata__.${ORIGIN_KEYS.step}`,
        `expected a non-negative integer in digits, got ${JSON.stringify(step)}`,
        { expected: "a non-negative integer in digits", found: JSON.stringify(step) },
      );
    }
    origin.step = Number(step);
  }
  if (source !== undefined) origin.source = source;
  return origin;
}

/**
 * Writes a Hugging Face Qwen3 directory for a ferry model and returns the paths written.
 * Each file is written atomically, config.json last, so a directory with a config.json is complete.
 * A tied model stores `model.embed_tokens.weight` only, as transformers saves tied Qwen3 models.
 *
 * @example
 * ```ts
 * import { exportHuggingFace } from "./huggingface.ts";
 * import { PRESETS } from "../../model/config.ts";
 * import { initParams } from "../../model/init.ts";
 * const files = await exportHuggingFace("out/hf", initParams(PRESETS.tiny, 1), PRESETS.tiny, { dtype: "bf16" });
 * ```
 */
export async function exportHuggingFace(
  dir: string,
  tensors: readonly (Tensor | TensorSource)[],
  config: ModelConfig,
  opts: HfExportOptions = {},
): Promise<string[]> {
  const dtype = opts.dtype ?? "f32";
  if (!Object.hasOwn(HF_DTYPES, dtype)) {
    throw new HuggingFaceError(
      dir,
      "UnsupportedDtype",
      "dtype",
      `expected one of ${Object.keys(HF_DTYPES).join(", ")}, got ${dtype}`,
    );
  }
  const cfg = checkedConfig({ ...config }, "config");
  const own = opts.tokenizerFiles;
  const withTokenizer = own === undefined && (opts.tokenizer ?? cfg.vocab_size === BYTE_VOCAB_SIZE);
  if (withTokenizer && cfg.vocab_size < BYTE_VOCAB_SIZE) {
    throw new HuggingFaceError(
      dir,
      "InvalidValue",
      "vocab_size",
      `${cfg.vocab_size} is too small for the byte tokenizer's ${BYTE_VOCAB_SIZE} ids`,
    );
  }
  const weights = await modelSources(tensors.map((t) => ("data" in t ? tensorSource(t) : t)), cfg, "tensors");
  await mkdir(dir, { recursive: true });
  if (await exists(join(dir, HF_FILES.index))) {
    // Import would find both a single file and an index and refuse the directory.
    throw new HuggingFaceError(
      join(dir, HF_FILES.index),
      "AmbiguousWeights",
      HF_FILES.index,
      "a sharded index is already here; export into an empty directory",
    );
  }
  const written: string[] = [];
  const put = async (name: string, text: string) => {
    await writeAtomic(join(dir, name), [new TextEncoder().encode(text)]);
    written.push(join(dir, name));
  };
  await writeSafetensors(join(dir, HF_FILES.weights), weights, {
    dtype: HF_DTYPES[dtype].safetensors,
    metadata: originMetadata(opts.origin),
  });
  written.push(join(dir, HF_FILES.weights));
  if (own) {
    // The model's own files, verbatim: what transformers and every other tool will read.
    for (const [name, text] of Object.entries(own)) await put(name, text);
  } else {
    await put(HF_FILES.generation, jsonText(generationConfigJson(withTokenizer)));
  }
  if (withTokenizer) {
    await put(HF_FILES.tokenizer, jsonText(byteTokenizerJson()));
    await put(HF_FILES.tokenizerConfig, jsonText(tokenizerConfigJson(cfg)));
  }
  // A tokenizer file an earlier export left here would be read as this model's: remove it.
  for (const name of TOKENIZER_FILE_NAMES) {
    if (!written.includes(join(dir, name))) await rm(join(dir, name), { force: true });
  }
  const json = hfConfigJson(cfg, dtype, withTokenizer);
  if (own) Object.assign(json, specialIds(own));
  const sorted = own ? Object.fromEntries(Object.entries(json).sort(([a], [b]) => a < b ? -1 : 1)) : json;
  await put(HF_FILES.config, jsonText(sorted));
  return written;
}

// config.json's BOS and EOS ids for a model's own tokenizer: generation_config.json's, when it has them.
function specialIds(files: TokenizerFiles): Record<string, unknown> {
  const text = files["generation_config.json"];
  if (text === undefined) return {};
  const g = JSON.parse(text);
  const out: Record<string, unknown> = {};
  for (const key of ["bos_token_id", "eos_token_id"]) if (g[key] !== undefined) out[key] = g[key];
  return out;
}

/**
 * config.json for a ferry config: every field transformers' Qwen3Config reads, keys sorted as
 * transformers writes them, with the values that select exactly ferry's maths.
 *
 * @example
 * ```ts
 * import { hfConfigJson } from "./huggingface.ts";
 * import { PRESETS } from "../../model/config.ts";
 * hfConfigJson(PRESETS.tiny, "bf16", true).torch_dtype; // "bfloat16"
 * ```
 */
export function hfConfigJson(
  cfg: ModelConfig,
  dtype: HfDtype,
  withTokenizer = true,
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    architectures: ["Qwen3ForCausalLM"],
    attention_bias: false,
    attention_dropout: 0,
    ...(withTokenizer ? { bos_token_id: BOS, eos_token_id: EOS } : {}),
    head_dim: cfg.head_dim,
    hidden_act: "silu",
    hidden_size: cfg.hidden_size,
    initializer_range: 0.02,
    intermediate_size: cfg.intermediate_size,
    max_position_embeddings: cfg.max_position_embeddings,
    max_window_layers: cfg.num_hidden_layers,
    model_type: "qwen3",
    num_attention_heads: cfg.num_attention_heads,
    num_hidden_layers: cfg.num_hidden_layers,
    num_key_value_heads: cfg.num_key_value_heads,
    rms_norm_eps: cfg.rms_norm_eps,
    rope_scaling: null,
    rope_theta: cfg.rope_theta,
    sliding_window: null,
    tie_word_embeddings: cfg.tie_word_embeddings,
    torch_dtype: HF_DTYPES[dtype].torch,
    use_cache: true,
    use_sliding_window: false,
    vocab_size: cfg.vocab_size,
  };
  return out;
}

/** generation_config.json: the special ids generation starts and stops with, when ferry's tokenizer is shipped. */
export function generationConfigJson(withTokenizer = true): Record<string, unknown> {
  return withTokenizer ? { bos_token_id: BOS, eos_token_id: EOS } : {};
}

// tokenizer.json for ferry's byte tokenizer is written by huggingface-tokenizer.ts, which also recognises it
// on import (by its content); exported from here as before.
export { byteTokenizerJson };

/**
 * tokenizer_config.json. `clean_up_tokenization_spaces` must be false: its default (true) makes
 * decoding delete spaces before punctuation, and then text would not round-trip.
 */
export function tokenizerConfigJson(cfg: ModelConfig): Record<string, unknown> {
  const decoder = (content: string) => {
    const { id: _, ...rest } = addedToken(0, content);
    return rest;
  };
  return {
    added_tokens_decoder: { [BOS]: decoder(BOS_TOKEN), [EOS]: decoder(EOS_TOKEN) },
    bos_token: BOS_TOKEN,
    clean_up_tokenization_spaces: false,
    eos_token: EOS_TOKEN,
    model_max_length: cfg.max_position_embeddings,
    tokenizer_class: "PreTrainedTokenizerFast",
  };
}

/**
 * JSON text with two-space indentation and a final newline; a `Map` is written as an object in its
 * own order.
 */
export function jsonText(value: unknown): string {
  const write = (v: unknown, pad: string): string => {
    const inner = pad + "  ";
    if (Array.isArray(v)) {
      return v.length === 0 ? "[]" : `[\n${v.map((x) => inner + write(x, inner)).join(",\n")}\n${pad}]`;
    }
    if (v instanceof Map || (typeof v === "object" && v !== null)) {
      const entries = v instanceof Map ? [...v] : Object.entries(v);
      if (entries.length === 0) return "{}";
      return `{\n${
        entries.map(([k, x]) => `${inner}${JSON.stringify(String(k))}: ${write(x, inner)}`).join(",\n")
      }\n${pad}}`;
    }
    return JSON.stringify(v);
  };
  return write(value, "") + "\n";
}

// ---------------------------------------------------------------------------------------------
// Import

/** A directory read back: ferry's config and tensors (in canonical order), and what it was stored as. */
export interface HfImport {
  config: ModelConfig;
  tensors: Tensor[];
  /** The stored weight dtype, or "mixed" when tensors differ. */
  dtype: "F32" | "F16" | "BF16" | "mixed";
  /** The special ids config.json declares (metadata; ferry's byte tokenizer uses 256 and 257). */
  bosTokenId: number | null;
  eosTokenId: number | number[] | null;
  /** The verdict on model.safetensors' `ferry.sha256`, when it has one (single-file folders). */
  digest?: { stored: string; computed: string; ok: boolean };
  /** What model.safetensors' metadata records of the weights' origin (empty for a sharded folder). */
  origin: ExportOrigin;
  /** The folder's own tokenizer files, checked; absent for a byte model. */
  tokenizer?: TokenizerFiles;
}

/** A directory opened for streaming: `HfImport` with sources in place of tensors, and `close`. */
export interface HfOpened extends Omit<HfImport, "tensors"> {
  /** The tensors in canonical order, each read a chunk at a time from its safetensors file. */
  sources: TensorSource[];
  /** Releases the safetensors files. */
  close(): Promise<void>;
}

/**
 * Reads a Hugging Face Qwen3 directory whole: `openHuggingFace`, every tensor read into memory.
 *
 * @example
 * ```ts
 * import { importHuggingFace } from "./huggingface.ts";
 * const { config, tensors, tokenizer } = await importHuggingFace("Qwen3-0.6B");
 * ```
 */
export async function importHuggingFace(dir: string): Promise<HfImport> {
  const { sources, close, ...rest } = await openHuggingFace(dir);
  try {
    const tensors: Tensor[] = [];
    for (const s of sources) tensors.push(await materialize(s));
    return { ...rest, tensors };
  } finally {
    await close();
  }
}

/**
 * Opens a Hugging Face Qwen3 directory for streaming, checking everything before any weight is read:
 * config.json field by field, the tokenizer files (`readTokenizerFolder`), then model.safetensors or
 * model.safetensors.index.json with every shard's header (f32, f16 or bf16, widened exactly to f32 a
 * chunk at a time). Any vocab size is accepted. Memory: the headers, plus what a caller reads.
 *
 * @example
 * ```ts
 * import { openHuggingFace } from "./huggingface.ts";
 * import { writeDmexp } from "../dmexp/dmexp.ts";
 * const hf = await openHuggingFace("Qwen3-0.6B");
 * await writeDmexp("q.dmexp", hf.sources, hf.config, { source: "Qwen3-0.6B@step0", step: 0 });
 * await hf.close();
 * ```
 */
export async function openHuggingFace(dir: string): Promise<HfOpened> {
  const configPath = join(dir, HF_FILES.config);
  let text: string;
  try {
    // ignoreBOM keeps a leading byte-order mark, which configFromHfJson refuses (as readTokenizer's read does).
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(await readFile(configPath));
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") {
      throw new HuggingFaceError(configPath, "MissingFile", HF_FILES.config, "missing");
    }
    if (e instanceof TypeError) {
      throw new HuggingFaceError(configPath, "InvalidJson", HF_FILES.config, "not valid UTF-8");
    }
    throw e;
  }
  const { config, bosTokenId, eosTokenId } = configFromHfJson(text, configPath);
  const tokenizer = await readTokenizerFolder(dir, config.vocab_size, configPath);
  const single = join(dir, HF_FILES.weights), index = join(dir, HF_FILES.index);
  const [hasSingle, hasIndex] = [await exists(single), await exists(index)];
  if (hasSingle && hasIndex) {
    throw new HuggingFaceError(
      dir,
      "AmbiguousWeights",
      HF_FILES.weights,
      `both ${HF_FILES.weights} and ${HF_FILES.index} are present`,
    );
  }
  if (!hasSingle && !hasIndex) {
    throw new HuggingFaceError(
      dir,
      "MissingFile",
      HF_FILES.weights,
      `expected ${HF_FILES.weights} or ${HF_FILES.index}`,
    );
  }
  const file = hasSingle ? await openSingle(single) : await openSafetensorsIndex(index);
  try {
    const sources = await modelSources(file.sources, config, file.path);
    const dtypes = new Set(file.sources.map((t) => t.dtype));
    const dtype = dtypes.size === 1 ? [...dtypes][0] as HfImport["dtype"] : "mixed";
    const origin = metadataOrigin(file.metadata, file.path);
    return {
      config,
      sources,
      dtype,
      bosTokenId,
      eosTokenId,
      origin,
      ...(file.digest ? { digest: file.digest } : {}),
      ...(tokenizer ? { tokenizer } : {}),
      close: file.close,
    };
  } catch (e) {
    await file.close();
    throw e;
  }
}

// model.safetensors as sources, with its metadata and digest verdict.
async function openSingle(path: string) {
  const st = await openSafetensors(path);
  return { ...st, sources: st.entries.map((e) => st.source(e)) };
}

/**
 * The Hugging Face folder format in the registry (formats/mod.ts). A path is this format when it
 * names a folder holding config.json, or ends in `.hf` (the name ferry gives the folders it writes).
 *
 * @example
 * ```ts
 * import { hfFormat } from "./huggingface.ts";
 * const { config, tensors } = await hfFormat.read("out/ferry.f32.hf");
 * ```
 */
export const hfFormat: FormatDescriptor<HfDtype> = {
  name: "hf",
  summary: "a Hugging Face Qwen3 folder: config.json, model.safetensors, the model's tokenizer files",
  extension: ".hf",
  recognises(path) {
    if (path.replace(/\/+$/, "").endsWith(".hf")) return true;
    try {
      return statSync(path).isDirectory() && statSync(join(path, HF_FILES.config)).isFile();
    } catch {
      return false;
    }
  },
  dtypes: Object.keys(HF_DTYPES) as HfDtype[],
  defaultDtype: "f32",
  weights: "float",
  lossy: () => Promise.resolve(undefined), // every dtype widens back exactly
  async write(path, input, { dtype }) {
    const origin = { name: input.name, step: input.step, source: input.source };
    const files = await exportHuggingFace(path, input.tensors, input.config, {
      dtype,
      origin,
      ...(input.tokenizer ? { tokenizerFiles: input.tokenizer } : {}),
    });
    let bytes = 0;
    for (const f of files) bytes += (await stat(f)).size;
    const params = input.tensors.reduce((n, t) => n + numel(t.dims), 0);
    return { file: path, bytes, params, tensors: input.tensors.length, files: files.length };
  },
  async read(path) {
    const { config, tensors, origin, tokenizer } = await importHuggingFace(path);
    return { config, tensors, origin, ...(tokenizer ? { tokenizer } : {}) };
  },
  open: (path) => openHuggingFace(path),
  async readTokenizer(path) {
    const configPath = join(path, HF_FILES.config);
    const text = await readFile(configPath, "utf8").catch((e) => {
      throw (e as { code?: string }).code === "ENOENT"
        ? new HuggingFaceError(configPath, "MissingFile", HF_FILES.config, "missing")
        : e;
    });
    const { config } = configFromHfJson(text, configPath);
    return await readTokenizerFolder(path, config.vocab_size, configPath);
  },
  async inspect(path) {
    const r = await openHuggingFace(path);
    await r.close();
    return {
      folder: path,
      dtype: r.dtype,
      bos_token_id: r.bosTokenId,
      eos_token_id: r.eosTokenId,
      "ferry.sha256": r.digest
        ? `${r.digest.stored}: ok, model.safetensors is as written`
        : "none (not written by ferry)",
      config: r.config,
      tokenizer: tokenizerInfo(r.tokenizer, r.config.vocab_size, path),
      tensors: r.sources.map((t) => ({ name: t.name, dims: t.dims })),
    };
  },
  spec: "formats/huggingface/huggingface.md",
  // A folder has no one-file reader; its weights are model.safetensors, which this reads.
  minimalReader: "readers/safetensors.ts",
  fuzzHook: "formats/huggingface/huggingface-fuzz.ts",
};

/** What one config.json field must be: `ok` decides, `expect` says it in words. */
export interface HfFieldRule {
  expect: string;
  ok: (v: JsonValue, all: JsonObject) => boolean;
  /** Set when another value would change the computation. */
  maths?: true;
}
type Rule = HfFieldRule;

const isInt = (v: JsonValue) =>
  v instanceof JsonNumber && /^(?:0|[1-9][0-9]*)$/.test(v.text) && v.value <= Number.MAX_SAFE_INTEGER;
const isNum = (v: JsonValue) => v instanceof JsonNumber && Number.isFinite(v.value);
const isIntOrNull = (v: JsonValue) => v === null || isInt(v);
const SHAPE_INT: Rule = { expect: "a positive integer", ok: (v) => isInt(v) && (v as JsonNumber).value > 0 };
const POSITIVE: Rule = {
  expect: "a positive finite number",
  ok: (v) => isNum(v) && (v as JsonNumber).value > 0,
};
const TORCH_DTYPE: Rule = {
  expect: '"float32", "float16" or "bfloat16"',
  ok: (v) => ["float32", "float16", "bfloat16"].includes(v as string),
};
const STRING: Rule = { expect: "a string", ok: (v) => typeof v === "string" };

/**
 * Every config.json field ferry accepts, with what it must be. `maths` marks a field whose other values
 * would change the computation: refusing those is `UnsupportedField`, the rest `InvalidValue`.
 */
export const HF_CONFIG_FIELDS: Readonly<Record<string, Rule>> = {
  vocab_size: SHAPE_INT,
  hidden_size: SHAPE_INT,
  intermediate_size: SHAPE_INT,
  num_hidden_layers: SHAPE_INT,
  num_attention_heads: SHAPE_INT,
  num_key_value_heads: SHAPE_INT,
  head_dim: SHAPE_INT,
  max_position_embeddings: SHAPE_INT,
  rms_norm_eps: POSITIVE,
  rope_theta: POSITIVE,
  tie_word_embeddings: { expect: "true or false", ok: (v) => typeof v === "boolean" },
  model_type: { expect: '"qwen3"', ok: (v) => v === "qwen3", maths: true },
  architectures: {
    expect: '["Qwen3ForCausalLM"]',
    ok: (v) => Array.isArray(v) && v.length === 1 && v[0] === "Qwen3ForCausalLM",
    maths: true,
  },
  hidden_act: { expect: '"silu"', ok: (v) => v === "silu", maths: true },
  attention_bias: { expect: "false (ferry's attention has no biases)", ok: (v) => v === false, maths: true },
  mlp_bias: { expect: "false (ferry's MLP has no biases)", ok: (v) => v === false, maths: true },
  rope_scaling: { expect: "null (plain RoPE)", ok: (v) => v === null, maths: true },
  rope_parameters: {
    expect: '{"rope_type": "default", "rope_theta": <number>} (plain RoPE)',
    ok: (v) =>
      isJsonObject(v) && v.rope_type === "default" && isNum(v.rope_theta) && Object.keys(v).length === 2,
    maths: true,
  },
  use_sliding_window: {
    expect: "false (ferry attends to every earlier position)",
    ok: (v) => v === false,
    maths: true,
  },
  layer_types: {
    expect: '"full_attention" for every layer',
    ok: (v, all) =>
      Array.isArray(v) && v.every((x) => x === "full_attention") &&
      all.num_hidden_layers instanceof JsonNumber && v.length === all.num_hidden_layers.value,
    maths: true,
  },
  // Read only when use_sliding_window is true, which is refused above.
  sliding_window: { expect: "an integer or null", ok: isIntOrNull },
  max_window_layers: { expect: "an integer", ok: isInt },
  // Dropout is off at inference, so any training-time rate runs the same maths.
  attention_dropout: {
    expect: "a number in [0, 1)",
    ok: (v) => isNum(v) && (v as JsonNumber).value >= 0 && (v as JsonNumber).value < 1,
  },
  initializer_range: { expect: "a non-negative number", ok: (v) => isNum(v) && (v as JsonNumber).value >= 0 },
  use_cache: { expect: "true or false", ok: (v) => typeof v === "boolean" },
  torch_dtype: TORCH_DTYPE,
  dtype: TORCH_DTYPE,
  bos_token_id: { expect: "an integer or null", ok: isIntOrNull },
  pad_token_id: { expect: "an integer or null", ok: isIntOrNull },
  eos_token_id: {
    expect: "an integer, a list of integers or null",
    ok: (v) => isIntOrNull(v) || (Array.isArray(v) && v.every(isInt)),
  },
  transformers_version: STRING,
  _name_or_path: STRING,
};

/** Config fields of models ferry does not implement, refused whatever their value. */
export const HF_REFUSED_FIELDS: Readonly<Record<string, string>> = {
  num_experts: "mixture of experts (Qwen3-MoE)",
  num_experts_per_tok: "mixture of experts (Qwen3-MoE)",
  moe_intermediate_size: "mixture of experts (Qwen3-MoE)",
  decoder_sparse_step: "mixture of experts (Qwen3-MoE)",
  mlp_only_layers: "mixture of experts (Qwen3-MoE)",
  norm_topk_prob: "mixture of experts (Qwen3-MoE)",
  output_router_logits: "mixture of experts (Qwen3-MoE)",
  router_aux_loss_coef: "mixture of experts (Qwen3-MoE)",
  quantization_config: "a quantized checkpoint",
  partial_rotary_factor: "partial RoPE",
};

const REQUIRED = [
  "model_type",
  "vocab_size",
  "hidden_size",
  "intermediate_size",
  "num_hidden_layers",
  "num_attention_heads",
  "num_key_value_heads",
  "head_dim",
  "max_position_embeddings",
  "rms_norm_eps",
  "tie_word_embeddings",
];

/**
 * Turns config.json text into ferry's config, refusing by name anything ferry would have to ignore or
 * guess: a field that changes the maths, an unknown field, a missing shape field (transformers would
 * fill in a default, e.g. head_dim 128, that may not be the trained one), an integer written `16.0`.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises";
 * import { configFromHfJson } from "./huggingface.ts";
 * const { config } = configFromHfJson(await readFile("config.json", "utf8"), "config.json");
 * ```
 */
export function configFromHfJson(
  text: string,
  path: string,
): { config: ModelConfig; bosTokenId: number | null; eosTokenId: number | number[] | null } {
  const err = (code: HuggingFaceErrorCode, field: string, detail: string) =>
    new HuggingFaceError(path, code, field, detail);
  if (text.startsWith("\uFEFF")) {
    throw new HuggingFaceError(
      path,
      "InvalidJson",
      "config",
      "starts with a UTF-8 byte-order mark; config.json is read as strict JSON",
      { expected: 'a JSON object, its first byte "{"', found: "a byte-order mark (EF BB BF)" },
    );
  }
  let root: JsonValue;
  try {
    root = parseStrictJson(text);
  } catch (e) {
    if (!(e instanceof StrictJsonError)) throw e;
    throw new HuggingFaceError(path, e.code, e.at || "config", messageWithoutCode(e), e);
  }
  if (!isJsonObject(root)) throw err("InvalidJson", "config", "expected a JSON object");
  for (const [key, v] of Object.entries(root)) {
    if (Object.hasOwn(HF_REFUSED_FIELDS, key)) {
      throw err("UnsupportedField", key, `${HF_REFUSED_FIELDS[key]} is not supported`);
    }
    const rule = HF_CONFIG_FIELDS[key];
    if (!rule) {
      throw err("UnknownField", key, "ferry does not know this field, and refuses what it cannot check");
    }
    if (!rule.ok(v, root)) {
      throw rule.maths
        ? err(
          "UnsupportedField",
          key,
          `${show(v)} changes the model's maths; ferry implements only ${rule.expect}`,
        )
        : err("InvalidValue", key, `expected ${rule.expect}, got ${show(v)}`);
    }
  }
  for (const key of REQUIRED) {
    if (!(key in root)) throw err("MissingField", key, "missing (ferry does not guess a default)");
  }
  const fromParams = isJsonObject(root.rope_parameters)
    ? root.rope_parameters.rope_theta as JsonNumber
    : undefined;
  const top = root.rope_theta as JsonNumber | undefined;
  if (!top && !fromParams) {
    throw err("MissingField", "rope_theta", "missing (neither rope_theta nor rope_parameters.rope_theta)");
  }
  if (top && fromParams && top.value !== fromParams.value) {
    throw err(
      "InvalidValue",
      "rope_theta",
      `${top.text} disagrees with rope_parameters.rope_theta ${fromParams.text}`,
    );
  }
  const raw: Record<string, unknown> = { rope_theta: (top ?? fromParams)!.value };
  for (const key of REQUIRED.slice(1)) {
    raw[key] = root[key] instanceof JsonNumber ? (root[key] as JsonNumber).value : root[key];
  }
  const config = checkedConfig(raw, path);
  const num = (v: JsonValue | undefined) => v instanceof JsonNumber ? v.value : null;
  const eos = root.eos_token_id;
  return {
    config,
    bosTokenId: num(root.bos_token_id),
    eosTokenId: Array.isArray(eos) ? eos.map((x) => (x as JsonNumber).value) : num(eos),
  };
}

function checkedConfig(raw: Record<string, unknown>, where: string): ModelConfig {
  try {
    return validateConfig(raw, where);
  } catch (e) {
    if (e instanceof ConfigError) {
      throw new HuggingFaceError(
        where,
        "InvalidValue",
        e.field,
        messageWithoutCode(e).replace(/^.*?: config field '[^']*': /, ""),
      );
    }
    throw e;
  }
}

/**
 * Matches stored tensors to the config: each expected tensor present with its shape, nothing extra,
 * f32/f16/bf16 only. A tied model's lm_head is accepted only as an exact copy of the embedding (some
 * writers store both; compared a chunk at a time) and dropped. Returns the sources in canonical order.
 */
async function modelSources(
  stored: readonly (TensorSource & { dtype?: Dtype })[],
  cfg: ModelConfig,
  where: string,
): Promise<TensorSource[]> {
  const byName = new Map(stored.map((t) => [t.name, t]));
  for (const t of stored) {
    if (t.dtype !== undefined && t.dtype !== "F32" && t.dtype !== "F16" && t.dtype !== "BF16") {
      throw new HuggingFaceError(
        where,
        "UnsupportedDtype",
        t.name,
        `stored as ${t.dtype}; expected F32, F16 or BF16`,
      );
    }
  }
  const lm = byName.get("lm_head.weight"), embed = byName.get("model.embed_tokens.weight");
  if (cfg.tie_word_embeddings && lm) {
    if (!embed || !(await sameBits(lm, embed))) {
      throw new HuggingFaceError(
        where,
        "TiedMismatch",
        "lm_head.weight",
        "tie_word_embeddings is true but lm_head.weight differs from model.embed_tokens.weight",
      );
    }
    byName.delete("lm_head.weight");
  }
  const bad = checkTensors(cfg, [...byName.values()]);
  if (bad) {
    const why = bad.kind === "unknown" && /\.bias$/.test(bad.tensor)
      ? "biases are not part of ferry's Qwen3"
      : bad.problem.replace("the config", "config.json");
    throw new HuggingFaceError(where, bad.code, bad.tensor, why, bad);
  }
  return paramShapes(cfg).map(({ name, dims }) => ({ ...byName.get(name)!, name, dims: [...dims] }));
}

// Whether two sources hold the same f32 bit patterns, compared 1 Mi values at a time.
async function sameBits(a: TensorSource, b: TensorSource): Promise<boolean> {
  if (a.dims.join() !== b.dims.join()) return false;
  const count = numel(a.dims), step = 1 << 20;
  const sa = new Float32Array(Math.min(step, count)), sb = new Float32Array(Math.min(step, count));
  for (let at = 0; at < count; at += step) {
    const n = Math.min(step, count - at);
    const x = await a.read(at, n, sa), y = await b.read(at, n, sb);
    const u = new Uint32Array(x.buffer, x.byteOffset, n), v = new Uint32Array(y.buffer, y.byteOffset, n);
    for (let i = 0; i < n; i++) if (u[i] !== v[i]) return false;
  }
  return true;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") return false;
    throw e;
  }
}

function show(v: JsonValue | undefined): string {
  const text = (x: JsonValue): string =>
    x instanceof JsonNumber
      ? x.text
      : Array.isArray(x)
      ? `[${x.map(text).join(", ")}]`
      : isJsonObject(x)
      ? `{${Object.entries(x).map(([k, y]) => `${JSON.stringify(k)}: ${text(y)}`).join(", ")}}`
      : JSON.stringify(x);
  const s = v === undefined ? "nothing" : text(v);
  return s.length > 80 ? s.slice(0, 77) + "..." : s;
}

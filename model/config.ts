/**
 * The model config: the shape of a Qwen3-style decoder, its TOML form, and the tensor shapes it implies.
 *
 * @example
 * ```ts
 * import { paramShapes, parseConfig } from "./config.ts";
 * const cfg = parseConfig(`vocab_size = 258\nhidden_size = 64\n...`, "run.config.toml");
 * for (const { name, dims } of paramShapes(cfg)) console.log(name, dims);
 * ```
 * @module
 */
import { parse as parseToml } from "smol-toml";
import { formatErrorClass, TENSOR_REFUSALS } from "./error.ts";

/** Every field of a ferry model config; the names are Hugging Face's Qwen3 config names. */
export interface ModelConfig {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  rms_norm_eps: number;
  rope_theta: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
}

/** Every rule a config can break; docs/hostile-input.md ("Refusal codes") says what each means. */
export const CONFIG_REFUSALS = [
  ["InvalidToml", "UnknownField", "MissingField", "WrongType", "InvalidValue", "AboveLimit"],
] as const;

/** A config that is malformed: `path` names the file (or other source), `field` the offending key. */
export class ConfigError extends formatErrorClass(
  CONFIG_REFUSALS,
  (where, field, why) => `${where}: config field '${field}': ${why}`,
) {}

type FieldKind = "int" | "float" | "bool";

/** The fields in their canonical order, with their type. */
export const CONFIG_FIELDS: ReadonlyArray<[keyof ModelConfig, FieldKind]> = [
  ["vocab_size", "int"],
  ["hidden_size", "int"],
  ["intermediate_size", "int"],
  ["num_hidden_layers", "int"],
  ["num_attention_heads", "int"],
  ["num_key_value_heads", "int"],
  ["head_dim", "int"],
  ["rms_norm_eps", "float"],
  ["rope_theta", "float"],
  ["max_position_embeddings", "int"],
  ["tie_word_embeddings", "bool"],
];

/**
 * Named shapes ferry knows: `tiny` is for tests, `small` the shipped model's shape until 2026-12-04
 * (468,256 parameters, rows 96 wide: quick to train, too narrow for K-quant blocks), `default` the
 * shipped model's shape (every row a multiple of 256).
 */
export const PRESETS: Record<string, ModelConfig> = {
  tiny: {
    vocab_size: 258,
    hidden_size: 16,
    intermediate_size: 40,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 6,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 64,
    tie_word_embeddings: false,
  },
  small: {
    vocab_size: 258,
    hidden_size: 96,
    intermediate_size: 256,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 32,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 512,
    tie_word_embeddings: true,
  },
  default: {
    vocab_size: 258,
    hidden_size: 256,
    intermediate_size: 768,
    num_hidden_layers: 6,
    num_attention_heads: 8,
    num_key_value_heads: 2,
    head_dim: 64,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 512,
    tie_word_embeddings: true,
  },
};

/**
 * The largest value any integer config field may have: every field is a count or a size that some
 * format stores as a u32 or i32 (GGUF), and no real model comes near it. A config claiming more is
 * refused before anything is sized from it.
 */
export const MAX_CONFIG_INT = 2 ** 31 - 1;
/** The most positions a config may claim: RoPE tables and KV caches are sized from it (2^20 = 1,048,576). */
export const MAX_POSITIONS = 2 ** 20;

/**
 * The limits of `MAX_CONFIG_INT` and `MAX_POSITIONS` on a config that is otherwise valid; the message
 * of the first one broken, with its field, or undefined.
 */
export function configLimit(cfg: ModelConfig): { field: string; message: string } | undefined {
  for (const [key, kind] of CONFIG_FIELDS) {
    if (kind === "int" && (cfg[key] as number) > MAX_CONFIG_INT) {
      return { field: key, message: `${cfg[key]} is above ferry's limit of ${MAX_CONFIG_INT}` };
    }
  }
  if (cfg.max_position_embeddings > MAX_POSITIONS) {
    return {
      field: "max_position_embeddings",
      message:
        `${cfg.max_position_embeddings} is above ferry's limit of ${MAX_POSITIONS} (RoPE tables are sized from it)`,
    };
  }
  return undefined;
}

/**
 * Checks a plain object as a config: every field present with the right type, nothing unknown,
 * and the shape consistent. Returns a fresh, typed config.
 */
export function validateConfig(raw: Record<string, unknown>, where: string): ModelConfig {
  const known = new Set(CONFIG_FIELDS.map(([k]) => k as string));
  for (const key of Object.keys(raw)) {
    if (!known.has(key)) {
      throw new ConfigError(where, "UnknownField", key, "unknown field (ferry does not support it)");
    }
  }
  const out: Record<string, number | boolean> = {};
  for (const [key, kind] of CONFIG_FIELDS) {
    const v = raw[key];
    if (v === undefined) throw new ConfigError(where, "MissingField", key, "missing");
    if (kind === "bool") {
      if (typeof v !== "boolean") {
        throw new ConfigError(where, "WrongType", key, `expected true or false, got ${show(v)}`);
      }
    } else if (typeof v !== "number" && typeof v !== "bigint") {
      throw new ConfigError(where, "WrongType", key, `expected a number, got ${show(v)}`);
    } else if (kind === "int" && (!Number.isSafeInteger(Number(v)) || Number(v) <= 0)) {
      throw new ConfigError(where, "InvalidValue", key, `expected a positive integer, got ${show(v)}`);
    } else if (kind === "float" && !(Number.isFinite(Number(v)) && Number(v) > 0)) {
      throw new ConfigError(where, "InvalidValue", key, `expected a positive finite number, got ${show(v)}`);
    }
    out[key] = typeof v === "bigint" ? Number(v) : v as number | boolean;
  }
  const cfg = out as unknown as ModelConfig;
  const limit = configLimit(cfg);
  if (limit) throw new ConfigError(where, "AboveLimit", limit.field, limit.message);
  if (cfg.num_attention_heads % cfg.num_key_value_heads !== 0) {
    throw new ConfigError(
      where,
      "InvalidValue",
      "num_key_value_heads",
      `${cfg.num_key_value_heads} does not divide num_attention_heads = ${cfg.num_attention_heads}`,
    );
  }
  if (cfg.head_dim % 2 !== 0) {
    throw new ConfigError(where, "InvalidValue", "head_dim", `must be even for RoPE, got ${cfg.head_dim}`);
  }
  return cfg;
}

/** The words of a refusal of text that is not TOML: the parser's first line. */
export function notToml(e: unknown): string {
  return `not valid TOML: ${(e as Error).message.split("\n")[0]}`;
}

/** Parses a config from TOML text; `where` (usually the file path) is named in every error. */
export function parseConfig(text: string, where: string): ModelConfig {
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(text) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(where, "InvalidToml", "(toml)", notToml(e));
  }
  return validateConfig(raw, where);
}

/** Serializes a config to TOML in canonical field order; floats keep a decimal point. */
export function configToToml(cfg: ModelConfig): string {
  const lines = CONFIG_FIELDS.map(([key, kind]) => {
    const v = cfg[key];
    if (kind === "float") return `${key} = ${formatFloat(v as number)}`;
    return `${key} = ${v}`;
  });
  return lines.join("\n") + "\n";
}

/** Reads a config file from disk (a `.config.toml`). */
export async function readConfigFile(path: string): Promise<ModelConfig> {
  const { readFile } = await import("node:fs/promises");
  return parseConfig(await readFile(path, "utf8"), path);
}

/** One entry of the parameter list a config implies. */
export interface ParamShape {
  name: string;
  dims: number[];
}

/**
 * The parameters of a model with this config, in canonical (module) order,
 * under the Hugging Face Qwen3 names, with [out, in] layout for linear weights.
 */
export function paramShapes(cfg: ModelConfig): ParamShape[] {
  return [...shapesOf(cfg)];
}

// The parameter list one entry at a time, so a caller can stop early (see `checkTensors`).
function* shapesOf(cfg: ModelConfig): Generator<ParamShape> {
  const h = cfg.hidden_size, hd = cfg.head_dim;
  const q = cfg.num_attention_heads * hd, kv = cfg.num_key_value_heads * hd;
  yield { name: "model.embed_tokens.weight", dims: [cfg.vocab_size, h] };
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    yield { name: p + "input_layernorm.weight", dims: [h] };
    yield { name: p + "self_attn.q_proj.weight", dims: [q, h] };
    yield { name: p + "self_attn.k_proj.weight", dims: [kv, h] };
    yield { name: p + "self_attn.v_proj.weight", dims: [kv, h] };
    yield { name: p + "self_attn.q_norm.weight", dims: [hd] };
    yield { name: p + "self_attn.k_norm.weight", dims: [hd] };
    yield { name: p + "self_attn.o_proj.weight", dims: [h, q] };
    yield { name: p + "post_attention_layernorm.weight", dims: [h] };
    yield { name: p + "mlp.gate_proj.weight", dims: [cfg.intermediate_size, h] };
    yield { name: p + "mlp.up_proj.weight", dims: [cfg.intermediate_size, h] };
    yield { name: p + "mlp.down_proj.weight", dims: [h, cfg.intermediate_size] };
  }
  yield { name: "model.norm.weight", dims: [h] };
  if (!cfg.tie_word_embeddings) yield { name: "lm_head.weight", dims: [cfg.vocab_size, h] };
}

/**
 * How many tensors and values a config implies, computed without building the list: a config read
 * from an untrusted file is bounded with this (against the tensors the file holds) before
 * `paramShapes` is called, so a claimed 10^11 layers costs nothing. Values above 2^53 are approximate.
 *
 * @example
 * ```ts
 * import { configSize, PRESETS } from "./config.ts";
 * configSize(PRESETS.tiny); // { tensors: 25, params: ... }
 * ```
 */
export function configSize(cfg: ModelConfig): { tensors: number; params: number } {
  const h = cfg.hidden_size, hd = cfg.head_dim, f = cfg.intermediate_size;
  const q = cfg.num_attention_heads * hd, kv = cfg.num_key_value_heads * hd;
  const perLayer = 2 * h + 2 * hd + 2 * q * h + 2 * kv * h + 3 * f * h;
  const head = cfg.tie_word_embeddings ? 0 : 1;
  return {
    tensors: 2 + head + 11 * cfg.num_hidden_layers,
    params: (1 + head) * cfg.vocab_size * h + h + cfg.num_hidden_layers * perLayer,
  };
}

/** The refusal code of each kind of tensor mismatch (`TENSOR_REFUSALS`), alike in every format. */
export const TENSOR_MISMATCH_CODES = {
  missing: "MissingTensor",
  unknown: "UnknownTensor",
  duplicate: "DuplicateTensor",
  dims: "ShapeMismatch",
  length: "ShapeMismatch",
} as const satisfies Record<string, typeof TENSOR_REFUSALS[number]>;

/** How a set of tensors departs from the shapes a config implies (see `checkTensors`). */
export interface TensorMismatch {
  kind: keyof typeof TENSOR_MISMATCH_CODES;
  /** The rule broken, as a refusal's code (`TENSOR_MISMATCH_CODES[kind]`). */
  code: typeof TENSOR_MISMATCH_CODES[keyof typeof TENSOR_MISMATCH_CODES];
  /** The tensor's name (ferry's Hugging Face spelling). */
  tensor: string;
  /** The problem without the tensor's name, for errors whose field already names it. */
  problem: string;
  /** The whole sentence, naming the tensor. */
  message: string;
  expected: string;
  found: string;
  /** The dims the config implies for this tensor (for `missing` and `dims`). */
  expectedDims?: number[];
}

/**
 * The one check that tensors are exactly the ones a config implies: every expected name present once,
 * no other name, each with the implied dims and (when `data` is given) that many values. Order does not
 * matter. Returns the first mismatch, or undefined; each caller wraps it in its own error (a format's
 * error naming the file, the model's naming its source), so this never throws.
 *
 * @example
 * ```ts
 * import { checkTensors, type ModelConfig } from "./config.ts";
 * import { DmexpError } from "../formats/dmexp/dmexp-header.ts";
 * import type { Tensor } from "./tensor.ts";
 * declare const config: ModelConfig, tensors: Tensor[], path: string;
 * const bad = checkTensors(config, tensors);
 * if (bad) throw new DmexpError(path, bad.code, `tensors.${bad.tensor}`, bad.problem, bad);
 * ```
 */
export function checkTensors(
  config: ModelConfig | readonly ParamShape[],
  tensors: ReadonlyArray<{ name: string; dims: readonly number[]; data?: { length: number } }>,
): TensorMismatch | undefined {
  const seen = new Set<string>();
  const fail = (
    kind: TensorMismatch["kind"],
    tensor: string,
    problem: string,
    message: string,
    expected: string,
    found: string,
    expectedDims?: number[],
  ): TensorMismatch => ({
    kind,
    code: TENSOR_MISMATCH_CODES[kind],
    tensor,
    problem,
    message,
    expected,
    found,
    ...(expectedDims ? { expectedDims } : {}),
  });
  // A config from an untrusted file may imply more tensors than memory holds (10^11 layers): when it
  // implies more than are given, name the first missing one, walking the implied list only that far.
  if (!Array.isArray(config) && configSize(config as ModelConfig).tensors > tensors.length) {
    const given = new Set(tensors.map((t) => t.name));
    const byName = new Map(tensors.map((t) => [t.name, t.dims]));
    for (const { name, dims } of shapesOf(config as ModelConfig)) {
      const d = byName.get(name);
      if (!given.delete(name) || !d) {
        const problem = `missing (the config implies dims [${dims}])`;
        return fail(
          "missing",
          name,
          problem,
          `missing tensor ${name} ${problem.slice(8)}`,
          `dims [${dims}]`,
          "nothing",
          dims,
        );
      }
      if (d.length !== dims.length || d.some((x, i) => x !== dims[i])) {
        const problem = `has dims [${d}]; the config implies [${dims}]`;
        return fail(
          "dims",
          name,
          problem,
          `tensor ${name} ${problem}`,
          `dims [${dims}]`,
          `dims [${d}]`,
          dims,
        );
      }
    }
  }
  const shapes = Array.isArray(config) ? config as readonly ParamShape[] : paramShapes(config as ModelConfig);
  const expected = new Map(shapes.map((p) => [p.name, p.dims]));
  for (const t of tensors) {
    const dims = expected.get(t.name);
    if (!dims) {
      const problem = "is not part of this config's model";
      return fail(
        "unknown",
        t.name,
        problem,
        `unknown tensor ${t.name}: ${problem}`,
        "no tensor of this name",
        t.name,
      );
    }
    if (seen.has(t.name)) {
      return fail(
        "duplicate",
        t.name,
        "appears twice",
        `tensor ${t.name} appears twice`,
        "one tensor",
        "two",
      );
    }
    seen.add(t.name);
    if (t.dims.length !== dims.length || t.dims.some((d, i) => d !== dims[i])) {
      const problem = `has dims [${t.dims}]; the config implies [${dims}]`;
      return fail(
        "dims",
        t.name,
        problem,
        `tensor ${t.name} ${problem}`,
        `dims [${dims}]`,
        `dims [${t.dims}]`,
        dims,
      );
    }
    const count = dims.reduce((a, b) => a * b, 1);
    if (t.data && t.data.length !== count) {
      const problem = `holds ${t.data.length} values for dims [${dims}]`;
      return fail(
        "length",
        t.name,
        problem,
        `tensor ${t.name} ${problem}`,
        `${count} values`,
        `${t.data.length} values`,
      );
    }
  }
  for (const { name, dims } of shapes) {
    if (!seen.has(name)) {
      const problem = `missing (the config implies dims [${dims}])`;
      return fail(
        "missing",
        name,
        problem,
        `missing tensor ${name} ${problem.slice(8)}`,
        `dims [${dims}]`,
        "nothing",
        dims,
      );
    }
  }
  return undefined;
}

/** Total parameter count a config implies. */
export function configParamCount(cfg: ModelConfig): number {
  return paramShapes(cfg).reduce((n, p) => n + p.dims.reduce((a, b) => a * b, 1), 0);
}

// TOML needs a float to look like one: `10000.0`, not `10000`.
function formatFloat(x: number): string {
  const s = String(x);
  return /[.eE]/.test(s) ? s : s + ".0";
}

function show(v: unknown): string {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

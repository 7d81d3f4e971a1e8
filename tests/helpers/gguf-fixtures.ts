/**
 * Models and files the GGUF tests share: a small config whose matrices all split into 32-value
 * blocks (so every GGUF type applies), the model under test (the trained default model, which must
 * exist: the bounds that use it were measured on it), and a temporary directory of GGUF files.
 *
 * @example
 * ```ts
 * const { model, source } = await subjectModel();
 * const files = await writeAllTypes(dir, model.tensors, model.config);
 * ```
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type GgufDtype, writeGguf } from "../../formats/gguf/gguf.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import type { ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, type Model } from "../../model/qwen3.ts";
import type { Tensor } from "../../model/tensor.ts";
import {
  TOKENIZER_FILE_NAMES,
  type TokenizerFileName,
  type TokenizerFiles,
} from "../../model/tokenizer-types.ts";

/** Every type ferry writes. */
export const ALL_DTYPES: readonly GgufDtype[] = [
  "f32",
  "f16",
  "bf16",
  "q8_0",
  "q4_0",
  "q4_k",
  "q6_k",
  "iq4_nl",
  "q4_k_m",
];

/** The types whose values the minimal reader prints (the others it lists, dims and type only). */
export const MINIMAL_VALUE_DTYPES: readonly GgufDtype[] = ["f32", "f16", "bf16", "q8_0", "q4_0"];

/**
 * Small, quantizable, and with head_dim * heads (96) ≠ hidden (64), so the key_length /
 * value_length keys matter, as they do for real Qwen3.
 */
export const GGUF_TEST_CONFIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 64,
  intermediate_size: 96,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 24,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  max_position_embeddings: 128,
  tie_word_embeddings: false,
};

/**
 * A random model of the test config (`over` changes fields: an intermediate_size of 256 gives
 * ffn_down rows the K-quants take whole); init std 0.5 so its distributions are peaked, not uniform.
 */
export function testTensors(
  seed = 7,
  tied = false,
  over: Partial<ModelConfig> = {},
): { config: ModelConfig; tensors: Tensor[] } {
  const config = { ...GGUF_TEST_CONFIG, tie_word_embeddings: tied, ...over };
  return { config, tensors: initParams(config, seed, 0.5) };
}

/** The trained default model. */
export const DEFAULT_CHECKPOINT = "model/default/ferry.ckpt";

/**
 * The shipped default model. Throws when the checkpoint is missing rather than substituting another
 * model: the tests that use it compare against figures measured on this model, and a random model would
 * pass or fail them for reasons that have nothing to do with the file.
 */
export async function subjectModel(path = DEFAULT_CHECKPOINT): Promise<{ model: Model; source: string }> {
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: the GGUF/llama.cpp tests measure the shipped model (git checkout ${path})`,
    );
  }
  const ck = await readCheckpoint(path, { sections: ["model"] });
  return { model: buildModel(ck.config, ck.model, path), source: `${path} step ${ck.step}` };
}

/** A fresh temporary directory. */
export function tempDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), "ferry-gguf-test-"));
}

/** Writes the tensors as GGUF in every type; returns the paths by type. */
export async function writeAllTypes(
  dir: string,
  tensors: Tensor[],
  config: ModelConfig,
  prefix = "model",
): Promise<Record<GgufDtype, string>> {
  const out = {} as Record<GgufDtype, string>;
  for (const type of ALL_DTYPES) {
    out[type] = join(dir, `${prefix}.${type}.gguf`);
    await writeGguf(out[type], tensors, config, { type });
  }
  return out;
}

/** The real Qwen3 tokenizer's files, pinned in the repository (tests/fixtures/qwen3-tokenizer/README.md). */
export const QWEN3_TOKENIZER_FILES_DIR = "tests/fixtures/qwen3-tokenizer";

/**
 * A tokenizer folder's files as `TokenizerFiles` (those present of tokenizer.json,
 * tokenizer_config.json, generation_config.json, chat_template.jinja); default: the real Qwen3 one.
 */
export function tokenizerFilesOf(dir = QWEN3_TOKENIZER_FILES_DIR): TokenizerFiles {
  const files: Partial<Record<TokenizerFileName, string>> = {};
  for (const name of TOKENIZER_FILE_NAMES) {
    if (existsSync(join(dir, name))) files[name] = readFileSync(join(dir, name), "utf8");
  }
  if (files["tokenizer.json"] === undefined) throw new Error(`${dir}: no tokenizer.json`);
  return files as TokenizerFiles;
}

/**
 * A small random model with the real Qwen3 vocabulary's 151,936 rows (tied, 64 wide, 2 layers): enough
 * for llama.cpp to load a GGUF that carries the real tokenizer.
 */
export function qwen3VocabModel(seed = 5): { config: ModelConfig; tensors: Tensor[] } {
  return testTensors(seed, true, { vocab_size: 151_936 });
}

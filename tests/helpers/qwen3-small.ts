/**
 * The smallest real-vocabulary Qwen3 folder every format stores, for the format tests: the real 151936-id
 * vocabulary and tokenizer, Qwen3's config keys, over a one-layer body 32 wide (lut4 needs widths of 32) whose
 * heads · head_dim (64) is not the width, as in Qwen3-0.6B. `smallQwen3Folder` copies the cached folder and
 * adds the chat template as its own file, as newer folders keep it (chat_template.jinja).
 *
 * @example
 * ```ts
 * const src = await smallQwen3Folder(join(tmp, "qwen3")); // config.json, model.safetensors, 4 tokenizer files
 * ```
 * @module
 */
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { qwen3Folder } from "./qwen3-folder.ts";

/** The shape: Qwen3's vocabulary, positions and RoPE base over a tiny body. */
export const SMALL_QWEN3 = {
  vocab_size: 151936,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 32,
  tie_word_embeddings: true,
  max_position_embeddings: 40960,
  rope_theta: 1_000_000,
};

/** A copy at `dir` of the cached small folder (seed 3), with chat_template.jinja beside tokenizer_config.json. */
export async function smallQwen3Folder(dir: string): Promise<string> {
  cpSync(await qwen3Folder({ shape: SMALL_QWEN3, seed: 3 }), dir, { recursive: true });
  const template = JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")).chat_template;
  writeFileSync(join(dir, "chat_template.jinja"), template);
  return dir;
}

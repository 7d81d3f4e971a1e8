/**
 * The GGUF metadata keys ferry reads and writes, spelled once, as gguf-py's `constants.py` spells them
 * (`Keys.General`, `Keys.LLM`, `Keys.Attention`, `Keys.Rope`, `Keys.Tokenizer`, under the same names).
 * The per-architecture keys are kept without their `{arch}.` prefix (gguf-py writes `"{arch}.block_count"`);
 * `archKey` puts it on. Spec: formats/gguf/gguf.md.
 *
 * @example
 * ```ts
 * import { archKey, GGUF_KEYS } from "./gguf-keys.ts";
 * import type { GgufValue } from "./gguf-container.ts";
 * declare const md: ReadonlyMap<string, GgufValue>; // a file's metadata
 * md.get(GGUF_KEYS.Tokenizer.LIST);                          // "tokenizer.ggml.tokens"
 * md.get(archKey("qwen3", GGUF_KEYS.LLM.BLOCK_COUNT));       // "qwen3.block_count"
 * ```
 * @module
 */

/** The metadata keys, grouped and named as gguf-py's `Keys`. */
export const GGUF_KEYS = {
  General: {
    ARCHITECTURE: "general.architecture",
    QUANTIZATION_VERSION: "general.quantization_version",
    ALIGNMENT: "general.alignment",
    NAME: "general.name",
    FILE_TYPE: "general.file_type",
  },
  /** After `{arch}.` (`archKey`). */
  LLM: {
    CONTEXT_LENGTH: "context_length",
    EMBEDDING_LENGTH: "embedding_length",
    BLOCK_COUNT: "block_count",
    FEED_FORWARD_LENGTH: "feed_forward_length",
  },
  /** After `{arch}.` (`archKey`). */
  Attention: {
    HEAD_COUNT: "attention.head_count",
    HEAD_COUNT_KV: "attention.head_count_kv",
    KEY_LENGTH: "attention.key_length",
    VALUE_LENGTH: "attention.value_length",
    LAYERNORM_RMS_EPS: "attention.layer_norm_rms_epsilon",
  },
  /** After `{arch}.` (`archKey`). */
  Rope: {
    DIMENSION_COUNT: "rope.dimension_count",
    FREQ_BASE: "rope.freq_base",
    SCALING_TYPE: "rope.scaling.type",
  },
  Tokenizer: {
    MODEL: "tokenizer.ggml.model",
    PRE: "tokenizer.ggml.pre",
    LIST: "tokenizer.ggml.tokens",
    TOKEN_TYPE: "tokenizer.ggml.token_type",
    MERGES: "tokenizer.ggml.merges",
    BOS_ID: "tokenizer.ggml.bos_token_id",
    EOS_ID: "tokenizer.ggml.eos_token_id",
    UNK_ID: "tokenizer.ggml.unknown_token_id",
    SEP_ID: "tokenizer.ggml.seperator_token_id", // gguf-py's spelling of the key
    PAD_ID: "tokenizer.ggml.padding_token_id",
    CLS_ID: "tokenizer.ggml.cls_token_id",
    MASK_ID: "tokenizer.ggml.mask_token_id",
    ADD_BOS: "tokenizer.ggml.add_bos_token",
    ADD_EOS: "tokenizer.ggml.add_eos_token",
    CHAT_TEMPLATE: "tokenizer.chat_template",
  },
} as const;

/**
 * A per-architecture key: `arch`, a dot, and one of the `LLM`, `Attention` or `Rope` keys of
 * `GGUF_KEYS` (gguf-py's `key.format(arch=arch)`).
 *
 * @example
 * ```ts
 * import { archKey, GGUF_KEYS } from "./gguf-keys.ts";
 * archKey("qwen3", GGUF_KEYS.Rope.FREQ_BASE); // "qwen3.rope.freq_base"
 * ```
 */
export function archKey(arch: string, key: string): string {
  return `${arch}.${key}`;
}

/**
 * The GGUF vocabulary of ferry's byte tokenizer: its 256 bytes spelled through GPT-2's byte table (as
 * llama.cpp's "gpt2" tokenizer looks text up), BOS and EOS as control tokens, padding rows beyond; and
 * the check that a file's vocabulary is exactly that, since any other would give tokens other meanings.
 *
 * @example
 * ```ts
 * import { byteVocabulary } from "./gguf-vocab.ts";
 * const { tokens, types } = byteVocabulary(258); // tokens[32] === "Ġ", types[256] === TOKEN_TYPE.CONTROL
 * ```
 * @module
 */
import { BOS, BOS_TOKEN, BYTE_CHARS, BYTE_VOCAB_SIZE, EOS, EOS_TOKEN } from "../../model/tokenizer.ts";
import { GgufError, type GgufValue } from "./gguf-container.ts";
import { GGUF_KEYS } from "./gguf-keys.ts";

const { Tokenizer } = GGUF_KEYS;

/** tokenizer.ggml.token_type values (gguf-py's TokenType, llama.cpp's LLAMA_TOKEN_TYPE_*). */
export const TOKEN_TYPE = { NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6 } as const;

/**
 * The GGUF vocabulary of ferry's byte tokenizer for a model with `vocab` rows: the 256 byte
 * characters, BOS and EOS, then `[PAD<i>]` placeholders for any rows beyond 258 (as llama.cpp's
 * converter pads).
 *
 * @example
 * ```ts
 * import { byteVocabulary } from "./gguf-vocab.ts";
 * const { tokens, types } = byteVocabulary(258); // tokens[256] === "<|startoftext|>", types[256] === 3
 * ```
 */
export function byteVocabulary(vocab: number): { tokens: string[]; types: number[] } {
  const tokens = [...BYTE_CHARS, BOS_TOKEN, EOS_TOKEN];
  const types = [...new Array(256).fill(TOKEN_TYPE.NORMAL), TOKEN_TYPE.CONTROL, TOKEN_TYPE.CONTROL];
  for (let i = BYTE_VOCAB_SIZE; i < vocab; i++) tokens.push(`[PAD${i}]`), types.push(TOKEN_TYPE.UNUSED);
  return { tokens, types };
}

// Ferry's tokenizer is fixed (bytes, BOS, EOS), so a file with any other vocabulary would be read
// with the wrong token meanings; refuse it rather than guess.
export function checkTokenizer(md: Map<string, GgufValue>, vocab: number, where: string): void {
  const model = md.get(Tokenizer.MODEL);
  if (!model || model.type !== "string" || model.value !== "gpt2") {
    throw new GgufError(
      where,
      "Unsupported",
      Tokenizer.MODEL,
      `${model ? JSON.stringify(model.value) : "missing"}; expected "gpt2"`,
    );
  }
  const tokens = md.get(Tokenizer.LIST);
  if (!tokens || tokens.type !== "array" || tokens.elem !== "string") {
    throw new GgufError(where, "WrongType", Tokenizer.LIST, "missing or not an array of strings");
  }
  if (tokens.value.length !== vocab) {
    throw new GgufError(
      where,
      "VocabMismatch",
      Tokenizer.LIST,
      `has ${tokens.value.length} tokens; token_embd.weight has ${vocab} rows`,
    );
  }
  const want = BYTE_CHARS;
  const off = want.findIndex((s, i) => tokens.value[i] !== s);
  if (off >= 0) {
    throw new GgufError(
      where,
      "InvalidTokenizer",
      Tokenizer.LIST,
      `token ${off} is ${JSON.stringify(tokens.value[off])}; ferry's byte tokenizer needs ${
        JSON.stringify(want[off])
      }`,
    );
  }
  for (
    const [key, id] of [[Tokenizer.BOS_ID, BOS], [Tokenizer.EOS_ID, EOS]] as const
  ) {
    const v = md.get(key);
    if (!v || v.type !== "u32" || v.value !== id) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        key,
        `${v ? `${v.type} ${String(v.value)}` : "missing"}; expected u32 ${id}`,
      );
    }
  }
}

/**
 * GPT-2's byte-to-character table, on its own so that both tokenizers (model/tokenizer.ts and
 * model/hf-tokenizer.ts) and the vocabulary writers use one copy without importing each other.
 *
 * @example
 * ```ts
 * import { BYTE_CHARS } from "./byte-chars.ts";
 * BYTE_CHARS[0x20]; // "Ġ"
 * ```
 * @module
 */

/**
 * GPT-2's byte-to-character table (`bytes_to_unicode`): byte `b` is spelled `BYTE_CHARS[b]` in a
 * byte-level vocabulary. Printable Latin-1 bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves;
 * the other 68, in byte order, become U+0100 onward. llama.cpp's "gpt2" tokenizer and Hugging Face's
 * ByteLevel both look text up through it.
 *
 * @example
 * ```ts
 * import { BYTE_CHARS } from "./byte-chars.ts";
 * BYTE_CHARS[0x20]; // "Ġ"
 * ```
 */
export const BYTE_CHARS: readonly string[] = (() => {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  let next = 0x100;
  return Array.from({ length: 256 }, (_, b) => String.fromCharCode(printable(b) ? b : next++));
})();

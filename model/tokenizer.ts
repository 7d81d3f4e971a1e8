/**
 * The byte tokenizer: ids 0-255 are the bytes of UTF-8 text, then BOS = 256 and EOS = 257.
 * Any text round-trips.
 *
 * @example
 * ```ts
 * encode("hé", { bos: true }); // [256, 104, 195, 169]
 * decode([256, 104, 195, 169]); // "hé"
 * ```
 * @module
 */

/** Beginning-of-sequence id. */
export const BOS = 256;
/** End-of-sequence id. */
export const EOS = 257;
/** Ids the tokenizer uses: 256 bytes and two specials. */
export const BYTE_VOCAB_SIZE = 258;

/**
 * How every vocabulary file ferry writes (GGUF, Hugging Face tokenizer.json) spells the two special
 * tokens. `<|endoftext|>` is the name llama.cpp recognises as end of generation, and the one Qwen's own
 * tokenizer uses.
 */
export const BOS_TOKEN = "<|startoftext|>";
/** EOS's name in vocabulary files (see `BOS_TOKEN`). */
export const EOS_TOKEN = "<|endoftext|>";

/**
 * GPT-2's byte-to-character table (`bytes_to_unicode`): byte `b` is spelled `BYTE_CHARS[b]` in a
 * byte-level vocabulary. Printable Latin-1 bytes (0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF) stand for themselves;
 * the other 68, in byte order, become U+0100 onward. llama.cpp's "gpt2" tokenizer and Hugging Face's
 * ByteLevel both look text up through it.
 *
 * @example
 * ```ts
 * BYTE_CHARS[0x20]; // "Ġ"
 * ```
 */
export const BYTE_CHARS: readonly string[] = (() => {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  let next = 0x100;
  return Array.from({ length: 256 }, (_, b) => String.fromCharCode(printable(b) ? b : next++));
})();

const encoder = new TextEncoder();

/** Text to ids: its UTF-8 bytes, after BOS when `bos` is set. */
export function encode(text: string, opts: { bos?: boolean } = {}): number[] {
  const bytes = encoder.encode(text);
  const ids = opts.bos ? [BOS] : [];
  for (const b of bytes) ids.push(b);
  return ids;
}

/** Ids to the bytes they stand for; special ids are dropped. */
export function idsToBytes(ids: ArrayLike<number>): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < ids.length; i++) if (ids[i] < 256) out.push(ids[i]);
  return new Uint8Array(out);
}

/** Ids to text; special ids are dropped and invalid UTF-8 becomes U+FFFD. */
export function decode(ids: ArrayLike<number>): string {
  return new TextDecoder("utf-8", { ignoreBOM: true }).decode(idsToBytes(ids));
}

/**
 * A streaming decoder: feed ids one at a time and get back the text that is complete so far,
 * holding back bytes of a UTF-8 sequence that has not finished yet.
 */
export function createStreamDecoder(): (id: number) => string {
  const dec = new TextDecoder("utf-8", { ignoreBOM: true });
  return (id) => (id < 256 ? dec.decode(new Uint8Array([id]), { stream: true }) : "");
}

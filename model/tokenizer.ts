/**
 * The byte tokenizer: ids 0-255 are the bytes of UTF-8 text, then BOS = 256 and EOS = 257.
 * Any text round-trips. `byteTokenizer` is the same behind the one `Tokenizer` interface
 * (model/tokenizer-types.ts); a model's own files are loaded by model/hf-tokenizer.ts `loadTokenizer`.
 * This module imports no package, so the browser tab's worker can load it as it is.
 *
 * @example
 * ```ts
 * import { decode, encode } from "./tokenizer.ts";
 * encode("hé", { bos: true }); // [256, 104, 195, 169]
 * decode([256, 104, 195, 169]); // "hé"
 * ```
 * @module
 */

import type { EncodeOptions, Tokenizer } from "./tokenizer-types.ts";

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

export { BYTE_CHARS } from "./byte-chars.ts";

const encoder = new TextEncoder();

/** Text to ids: its UTF-8 bytes, after BOS when `bos` is set. */
export function encode(text: string, opts: { bos?: boolean } = {}): number[] {
  const bytes = encoder.encode(text);
  const ids = opts.bos ? [BOS] : [];
  // An index loop: for-of over a typed array is several times slower on Bun.
  for (let i = 0; i < bytes.length; i++) ids.push(bytes[i]);
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

/** A byte id's text as logprobs and /tokenize list it: a special's name, ASCII as itself, else `bytes:\xNN`. */
function byteTokenText(id: number): string {
  if (id === BOS) return BOS_TOKEN;
  if (id === EOS) return EOS_TOKEN;
  if (id < 0x80) return String.fromCharCode(id);
  if (id < 256) return `bytes:\\x${id.toString(16).padStart(2, "0")}`;
  throw new RangeError(`token id ${id} is not one of the byte tokenizer's ${BYTE_VOCAB_SIZE}`);
}

/**
 * ferry's byte tokenizer behind the one `Tokenizer` interface (model/tokenizer-types.ts): what every
 * model without tokenizer files uses. `encode`'s `specials` changes nothing (no text spells BOS or EOS).
 *
 * @example
 * ```ts
 * import { byteTokenizer } from "./tokenizer.ts";
 * byteTokenizer.encode("Hi", { bos: true }); // [256, 72, 105]
 * byteTokenizer.eos;                         // [257]
 * ```
 */
export const byteTokenizer: Tokenizer = Object.freeze(
  {
    kind: "byte",
    size: BYTE_VOCAB_SIZE,
    bos: BOS,
    eos: Object.freeze([EOS]),
    pad: undefined,
    specials: Object.freeze([BOS, EOS]),
    encode: (text: string, options: EncodeOptions = {}) => encode(text, { bos: options.bos }),
    decode: (ids: ArrayLike<number>) => decode(ids),
    streamDecoder: createStreamDecoder,
    tokenBytes(id: number): Uint8Array {
      if (id === BOS) return encoder.encode(BOS_TOKEN);
      if (id === EOS) return encoder.encode(EOS_TOKEN);
      byteTokenText(id); // refuses an id out of range
      return new Uint8Array([id]);
    },
    tokenText: byteTokenText,
  } as const,
);

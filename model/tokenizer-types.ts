/**
 * The contract between tokenizers, formats and engines: the tokenizer files a model carries, and the one
 * `Tokenizer` interface that ferry's byte tokenizer and a Hugging Face BPE tokenizer both implement.
 *
 * Formats store `TokenizerFiles` verbatim (Hugging Face copies the files through, dmexp and lut4 keep
 * them in a checksummed section, GGUF converts them to llama.cpp's keys and back); `model/tokenizer.ts`
 * turns them into a `Tokenizer`. A model without them is a byte model.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises";
 * import type { TokenizerFiles } from "./tokenizer-types.ts";
 * const files: TokenizerFiles = { "tokenizer.json": await readFile("m/tokenizer.json", "utf8") };
 * ```
 * @module
 */

/** The file names a tokenizer is made of, in the order formats store them. */
export const TOKENIZER_FILE_NAMES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "generation_config.json",
  "chat_template.jinja",
] as const;

/** One of `TOKENIZER_FILE_NAMES`. */
export type TokenizerFileName = typeof TOKENIZER_FILE_NAMES[number];

/**
 * A model's tokenizer as the text of its Hugging Face files, unchanged. `tokenizer.json` is required;
 * the others are present when the source folder has them.
 */
export type TokenizerFiles = { "tokenizer.json": string } & Partial<Record<TokenizerFileName, string>>;

/** What encoding may do besides the text itself. */
export interface EncodeOptions {
  /** Put the tokenizer's BOS first, when it has one (default false). */
  bos?: boolean;
  /**
   * Turn special-token strings in the text (`<|im_start|>`) into their ids (default false: they are
   * encoded as plain text). Chat templates are encoded with this set.
   */
  specials?: boolean;
}

/** A tokenizer: ferry's byte tokenizer or a model's own BPE. */
export interface Tokenizer {
  /** `byte` for ferry's 258-id byte tokenizer, `bpe` for a Hugging Face byte-level BPE. */
  readonly kind: "byte" | "bpe";
  /** How many ids the tokenizer has (added tokens included); ids from here to the vocab are padding. */
  readonly size: number;
  /** The beginning-of-sequence id, when the tokenizer adds one. */
  readonly bos: number | undefined;
  /** Every id that ends generation (the tokenizer's EOS and generation_config.json's list). */
  readonly eos: readonly number[];
  /** The padding id, when there is one. */
  readonly pad: number | undefined;
  /** Every special id (control and added special tokens), the EOS ones included. */
  readonly specials: readonly number[];
  encode(text: string, options?: EncodeOptions): number[];
  /** Ids to text; special ids are dropped unless `specials` is set. */
  decode(ids: ArrayLike<number>, options?: { specials?: boolean }): string;
  /**
   * A streaming decoder: feed ids one at a time, get back the text complete so far, holding back the
   * bytes of a UTF-8 sequence that has not finished. Special ids give "".
   */
  streamDecoder(): (id: number) => string;
  /** The bytes one id stands for (a special token: its text's UTF-8), for logprobs' `bytes`. */
  tokenBytes(id: number): Uint8Array;
  /** One id's text as a vocabulary lists it (a special token's name), for logprobs and /tokenize. */
  tokenText(id: number): string;
  /** The files a BPE tokenizer was made from (its chat template is in them); absent for the byte one. */
  readonly files?: TokenizerFiles;
}

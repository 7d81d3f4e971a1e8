/**
 * The token windows calibration runs the float model over, cut with the model's own tokenizer: by
 * default seeded windows of the Brown corpus's training split (never the held-out documents), or a
 * user's file, as `llama-imatrix -f` takes one. Every window is fed whole from position 0 and holds at
 * most `size` positions (the model's, when it has fewer than 256).
 *
 * A file is UTF-8 text, or, named `*.tokens`, token ids: decimal integers below the model's vocabulary
 * size separated by whitespace (spaces, tabs, newlines), nothing else. Its tokens are cut into
 * consecutive windows from its start, as llama-imatrix cuts its chunks (the tokenizer's BOS first when
 * it has one; a last partial window dropped unless it is the only one), and the first `windows` of
 * them are taken, as `llama-imatrix --chunks N` takes its first N: the same text and budget give
 * llama-imatrix's statistics (the seed is not used).
 *
 * @example
 * ```ts
 * import { calibrationText } from "./calibration-text.ts";
 * import { byteTokenizer } from "../model/tokenizer.ts";
 * const text = await calibrationText(byteTokenizer, { windows: 64, seed: 1, size: 256, vocab: 258 });
 * text.inputs.length; // 64, each [BOS, 255 bytes of the training split]
 * text.source;        // "brown train split"
 * ```
 * @module
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { Tokenizer } from "../model/tokenizer-types.ts";
import { loadBrown } from "../model/corpus.ts";
import { FormatError } from "../model/error.ts";
import { wholeCharacters } from "./metrics.ts";

/** What to cut: how many windows, of how many positions, from where. */
export interface CalibrationTextOptions {
  windows: number;
  seed: number;
  /** Positions per window. */
  size: number;
  /** The model's vocabulary size: a token file's ids must be below it. */
  vocab: number;
  /** A user's UTF-8 text, or a `*.tokens` file; absent: the Brown training split. */
  file?: string;
}

/** The windows, and the name of where they came from, as the calibration record keeps it. */
export interface CalibrationText {
  inputs: number[][];
  /** `"brown train split"`, `"text NAME sha256:HEX16"` or `"tokens NAME sha256:HEX16"`. */
  source: string;
}

/** The Brown training split's name in a calibration record. */
export const BROWN_SOURCE = "brown train split";

/**
 * A BPE window is cut from this many bytes of text a position: English runs about 4 bytes a Qwen3
 * token, so the window fills and its last tokens are whole ones of the slice.
 */
const BYTES_PER_POSITION = 8;

/** The windows calibration feeds, with their source's name (see the module's doc). */
export async function calibrationText(tok: Tokenizer, o: CalibrationTextOptions): Promise<CalibrationText> {
  if (o.file !== undefined) return fileWindows(tok, o);
  const { train } = await loadBrown();
  const lead = tok.bos !== undefined ? [tok.bos] : [];
  if (tok.kind === "byte") {
    // BOS and the window's first size−1 bytes, as calibration fed ferry's byte model before any
    // tokenizer was taken: the same windows, the same files.
    const picked = calibrationWindows(train, o.windows, o.seed, o.size);
    return {
      inputs: picked.map((w) => [...lead, ...w.subarray(0, o.size - lead.length)]),
      source: BROWN_SOURCE,
    };
  }
  const picked = calibrationWindows(train, o.windows, o.seed, o.size * BYTES_PER_POSITION);
  const dec = new TextDecoder();
  return {
    inputs: picked.map((w) => [...lead, ...tok.encode(dec.decode(wholeCharacters(w)))].slice(0, o.size)),
    source: BROWN_SOURCE,
  };
}

/**
 * `count` windows of `size` bytes at seeded pseudo-random offsets of `text` (a 32-bit xorshift: the
 * same seed gives the same windows on every runtime).
 *
 * @example
 * ```ts
 * import { calibrationWindows } from "./calibration-text.ts";
 * import { loadBrown } from "../model/corpus.ts";
 * calibrationWindows((await loadBrown()).train, 64, 1); // 64 subarrays of 256 bytes
 * ```
 */
export function calibrationWindows(text: Uint8Array, count: number, seed: number, size = 256): Uint8Array[] {
  if (text.length < size) throw new RangeError(`${text.length} bytes hold no ${size}-byte window`);
  const next = xorshift32(seed), span = text.length - size + 1;
  return Array.from({ length: count }, () => {
    const start = Math.floor((next() / 2 ** 32) * span);
    return text.subarray(start, start + size);
  });
}

/** A 32-bit xorshift stream from `seed` (0 is replaced: xorshift's zero state stays zero). */
function xorshift32(seed: number): () => number {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0;
    return s;
  };
}

/** A user's file: read, tokenized (or parsed as ids), cut into consecutive windows, the first ones kept. */
async function fileWindows(tok: Tokenizer, o: CalibrationTextOptions): Promise<CalibrationText> {
  const path = o.file!;
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (e) {
    throw new FormatError(
      path,
      "Unreadable",
      "file",
      `${path}: cannot read the calibration file (${(e as Error).message})`,
    );
  }
  const isTokens = path.endsWith(".tokens");
  const ids = isTokens ? parseTokenFile(bytes, path, o.vocab) : tok.encode(decodeText(bytes, path));
  const lead = tok.bos !== undefined ? [tok.bos] : [];
  const step = o.size - lead.length;
  if (ids.length === 0 || step < 1) {
    throw new FormatError(path, "NoTokens", "file", `${path}: no calibration tokens in it`, {
      expected: "at least one token",
      found: "none",
    });
  }
  const all: number[][] = [];
  for (let at = 0; at < ids.length; at += step) {
    // The last partial window is dropped, as llama-imatrix drops its last partial chunk, unless the
    // whole file is shorter than one.
    if (at + step > ids.length && all.length > 0) break;
    all.push([...lead, ...ids.slice(at, at + step)]);
  }
  const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
  const source = `${isTokens ? "tokens" : "text"} ${basename(path)} sha256:${digest}`;
  return { inputs: all.slice(0, o.windows), source };
}

/** The file as UTF-8 text; invalid UTF-8 is refused at its byte offset. */
function decodeText(bytes: Uint8Array, path: string): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
  } catch {
    const at = firstInvalidUtf8(bytes);
    throw new FormatError(path, "InvalidUtf8", "text", `${path}: text: invalid UTF-8 at byte ${at}`, {
      expected: "UTF-8 text (or a *.tokens file of token ids)",
      found: `invalid UTF-8 at byte ${at}`,
    });
  }
}

// Where a strict decoder first fails: the longest prefix it takes (an unfinished last sequence
// allowed, as streaming allows it), found by halving.
function firstInvalidUtf8(bytes: Uint8Array): number {
  const ok = (n: number) => {
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(0, n), { stream: true });
      return true;
    } catch {
      return false;
    }
  };
  let lo = 0, hi = bytes.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ok(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A `*.tokens` file: decimal ids below `vocab`, separated by whitespace; anything else refused by position. */
function parseTokenFile(bytes: Uint8Array, path: string, vocab: number): number[] {
  const text = new TextDecoder().decode(bytes), ids: number[] = [];
  const re = /\S+/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const word = m[0], id = Number(word);
    if (!/^\d+$/.test(word) || id >= vocab) {
      throw new FormatError(
        path,
        "VocabMismatch",
        `token ${ids.length}`,
        `${path}: token ${ids.length}: expected a token id in [0, ${vocab}), found ${
          JSON.stringify(word.slice(0, 20))
        }`,
        {
          expected: `a decimal token id in [0, ${vocab})`,
          found: word.slice(0, 20),
        },
      );
    }
    ids.push(id);
  }
  return ids;
}

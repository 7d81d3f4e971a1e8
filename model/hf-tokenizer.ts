/**
 * A Hugging Face byte-level BPE tokenizer (Qwen3's and GPT-2's kind) behind ferry's `Tokenizer`
 * interface. Encoding is `@huggingface/tokenizers` (Hugging Face's own JavaScript port: NFC, the
 * pre-tokenizer's split regex, the merges, added tokens); decoding is done here, from each id's bytes
 * through the GPT-2 byte table, so that a streaming decoder can hold back a UTF-8 character a token
 * boundary splits. The special ids come from the files: every added token marked special,
 * tokenizer_config.json's `eos_token`, `pad_token` and `bos_token`, and generation_config.json's
 * `eos_token_id` list (Qwen3 stops at `<|im_end|>` and `<|endoftext|>`). `loadTokenizer` is the one
 * way from a model's files (or none: the byte tokenizer) to its `Tokenizer`.
 *
 * @example
 * ```ts
 * import { hfTokenizer } from "./hf-tokenizer.ts";
 * declare const text: string, config: string; // tokenizer.json and tokenizer_config.json of Qwen3
 * const tok = hfTokenizer({ "tokenizer.json": text, "tokenizer_config.json": config }, "qwen3/");
 * tok.encode("<|im_start|>user", { specials: true }); // [151644, 872]
 * tok.decode([9707, 1879]);                           // "Hello world"
 * ```
 * @module
 */
import { parseJsonOnce, rememberLast } from "./remember.ts";
import { Tokenizer as HfLibTokenizer } from "@huggingface/tokenizers";
import { BYTE_CHARS } from "./byte-chars.ts";
import { FormatError } from "./error.ts";
import { byteTokenizer } from "./tokenizer.ts";
import type { EncodeOptions, Tokenizer, TokenizerFiles } from "./tokenizer-types.ts";

/** One added token as tokenizer.json lists it (only the fields ferry reads). */
interface AddedToken {
  id: number;
  content: string;
  special: boolean;
}

/** The pieces of the library's tokenizer that encoding text without special tokens goes through. */
interface LibraryPipeline {
  normalizer: ((text: string) => string) | null;
  pre_tokenizer: ((text: string, options: { section_index: number }) => string[]) | null;
  model: (tokens: string[]) => string[];
}

type Json = Record<string, unknown>;

const utf8 = new TextEncoder();

/** The character-to-byte half of the GPT-2 table. */
const CHAR_BYTES = new Map(BYTE_CHARS.map((c, b) => [c, b]));

function parseJson(text: string, file: string, where: string, field = "(whole file)"): Json {
  let parsed: unknown;
  try {
    parsed = parseJsonOnce(text);
  } catch (e) {
    throw new FormatError(
      `${where}${file}`,
      "InvalidJson",
      field,
      `${where}${file}: not JSON (${(e as Error).message})`,
      {
        expected: "a JSON object",
      },
    );
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new FormatError(
      `${where}${file}`,
      "InvalidJson",
      field,
      `${where}${file}: expected a JSON object`,
      {
        expected: "a JSON object",
        found: Array.isArray(parsed) ? "an array" : typeof parsed,
      },
    );
  }
  return parsed as Json;
}

function refuse(where: string, file: string, field: string, expected: string, found: unknown): never {
  const shown = JSON.stringify(found)?.slice(0, 80) ?? String(found);
  throw new FormatError(
    `${where}${file}`,
    "InvalidTokenizer",
    field,
    `${where}${file}: ${field}: expected ${expected}, found ${shown}`,
    {
      expected,
      found: shown,
    },
  );
}

/** A token name from tokenizer_config.json: a string, or an AddedToken object's `content`. */
function tokenName(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "object" && v !== null && typeof (v as Json).content === "string") {
    return (v as Json).content as string;
  }
  return undefined;
}

/** generation_config.json's id field as a list (a number or a list of numbers; absent: none). */
function idList(gen: Json, field: string, where: string): number[] {
  const v = gen[field];
  if (v === undefined || v === null) return [];
  const list = Array.isArray(v) ? v : [v];
  if (!list.every((x) => Number.isInteger(x) && x >= 0)) {
    refuse(where, "generation_config.json", field, "a token id or a list of token ids", v);
  }
  return list as number[];
}

/** The checked parts of tokenizer.json ferry relies on: a byte-level BPE and its added tokens. */
function checkTokenizerJson(tj: Json, where: string): { vocab: Record<string, number>; added: AddedToken[] } {
  const file = "tokenizer.json";
  const model = tj.model as Json | undefined;
  if (typeof model !== "object" || model === null || model.type !== "BPE") {
    refuse(where, file, "model.type", `"BPE"`, (model as Json | undefined)?.type);
  }
  const decoder = tj.decoder as Json | undefined;
  if (decoder?.type !== "ByteLevel") refuse(where, file, "decoder.type", `"ByteLevel"`, decoder?.type);
  const vocab = model.vocab;
  if (typeof vocab !== "object" || vocab === null || Array.isArray(vocab)) {
    refuse(where, file, "model.vocab", "an object of token to id", vocab);
  }
  const added = tj.added_tokens ?? [];
  if (
    !Array.isArray(added) ||
    !added.every((a) => Number.isInteger(a?.id) && a.id >= 0 && typeof a.content === "string")
  ) {
    refuse(where, file, "added_tokens", "a list of {id, content, special}", added);
  }
  return {
    vocab: vocab as Record<string, number>,
    added: added.map((a) => ({ id: a.id, content: a.content, special: a.special === true })),
  };
}

/** Splits `text` at every occurrence of one of `tokens` (longest first where two start together). */
function splitAt(text: string, tokens: readonly string[]): Array<{ text: string; token: boolean }> {
  const out: Array<{ text: string; token: boolean }> = [];
  let start = 0, i = 0;
  while (i < text.length) {
    let hit = "";
    for (const t of tokens) if (t.length > hit.length && text.startsWith(t, i)) hit = t;
    if (hit === "") {
      i++;
      continue;
    }
    if (i > start) out.push({ text: text.slice(start, i), token: false });
    out.push({ text: hit, token: true });
    i += hit.length;
    start = i;
  }
  if (start < text.length) out.push({ text: text.slice(start), token: false });
  return out;
}

/**
 * The `Tokenizer` of a Hugging Face byte-level BPE tokenizer's files. Anything that is not one (another
 * model type, a decoder other than ByteLevel), bad JSON, or a bad id list is refused with a
 * `FormatError` naming the file (`where` is the folder or export it came from, ending in `/` or `:`)
 * and the field.
 *
 * @example
 * ```ts
 * import { hfTokenizer } from "./hf-tokenizer.ts";
 * import type { TokenizerFiles } from "./tokenizer-types.ts";
 * declare const files: TokenizerFiles; // the tokenizer files of a Qwen3 folder
 * const tok = hfTokenizer(files, "models/qwen3/");
 * tok.eos; // [151645, 151643]
 * ```
 */
export function hfTokenizer(files: TokenizerFiles, where: string): Tokenizer {
  // Built once per texts and place (its errors name `where`): a process that loads one model again, or
  // several exports of it, parses 11 MB of JSON and builds the library's tables once.
  const key = [
    where,
    files["tokenizer.json"],
    files["tokenizer_config.json"],
    files["generation_config.json"],
  ];
  return builtTokenizers(key, () => buildTokenizer(files, where));
}

const builtTokenizers = rememberLast<Tokenizer>(2);

function buildTokenizer(files: TokenizerFiles, where: string): Tokenizer {
  const tj = parseJson(files["tokenizer.json"], "tokenizer.json", where);
  const config = files["tokenizer_config.json"] === undefined
    ? {}
    : parseJson(files["tokenizer_config.json"], "tokenizer_config.json", where);
  const gen = files["generation_config.json"] === undefined
    ? {}
    : parseJson(files["generation_config.json"], "generation_config.json", where);
  const { vocab, added } = checkTokenizerJson(tj, where);
  // Every id's text as the vocabulary lists it, added tokens over the model's own.
  const names: string[] = [];
  // The keys, not Object.entries: at 151,669 entries no pair arrays are made (a third of the time under Deno).
  for (const token of Object.keys(vocab)) {
    const id = vocab[token];
    if (!Number.isInteger(id) || id < 0) {
      refuse(where, "tokenizer.json", `model.vocab[${JSON.stringify(token)}]`, "a token id", id);
    }
    names[id] = token;
  }
  const addedById = new Map(added.map((a) => [a.id, a]));
  const addedByName = new Map(added.map((a) => [a.content, a.id]));
  for (const a of added) names[a.id] = a.content;
  const size = names.length;
  const idOf = (name: string | undefined): number | undefined => {
    if (name === undefined) return undefined;
    return addedByName.get(name) ?? (Object.hasOwn(vocab, name) ? vocab[name] : undefined);
  };
  const namedId = (field: string): number | undefined => {
    const name = tokenName(config[field]);
    const id = idOf(name);
    if (name !== undefined && id === undefined) {
      refuse(where, "tokenizer_config.json", field, "a token of tokenizer.json", name);
    }
    return id;
  };

  const eos = [...new Set([namedId("eos_token"), ...idList(gen, "eos_token_id", where)])]
    .filter((id): id is number => id !== undefined);
  const pad = namedId("pad_token") ?? idList(gen, "pad_token_id", where)[0];
  const bos = namedId("bos_token");
  const specialSet = new Set([...added.filter((a) => a.special).map((a) => a.id), ...eos]);
  if (bos !== undefined) specialSet.add(bos);
  if (pad !== undefined) specialSet.add(pad);
  const specials = [...specialSet].sort((a, b) => a - b);

  // The library last: building it takes about a second, and the checks above refuse bad files first.
  let lib: HfLibTokenizer;
  try {
    lib = new HfLibTokenizer(tj, config);
  } catch (e) {
    throw new FormatError(
      `${where}tokenizer.json`,
      "InvalidTokenizer",
      "(whole file)",
      `${where}tokenizer.json: ${(e as Error).message}`,
    );
  }

  const bytesCache = new Map<number, Uint8Array>();
  const tokenBytes = (id: number): Uint8Array => {
    let b = bytesCache.get(id);
    if (b) return b;
    const name = names[id];
    if (name === undefined) throw new RangeError(`token id ${id} is not in ${where}tokenizer.json`);
    if (addedById.has(id)) b = utf8.encode(name);
    else {
      const out: number[] = [];
      // A character outside the byte table (none in a well-formed vocab) stands for its own UTF-8.
      for (const ch of name) {
        const byte = CHAR_BYTES.get(ch);
        if (byte === undefined) out.push(...utf8.encode(ch));
        else out.push(byte);
      }
      b = new Uint8Array(out);
    }
    bytesCache.set(id, b);
    return b;
  };

  const pipeline = lib as unknown as LibraryPipeline;
  const plainAdded = added.filter((a) => !a.special).map((a) => a.content);
  const toIds = (tokens: string[], text: string): number[] =>
    tokens.map((t) => {
      const id = idOf(t);
      if (id === undefined) {
        throw new Error(
          `${where}tokenizer.json: no id for piece ${JSON.stringify(t)} of ${
            JSON.stringify(text.slice(0, 40))
          }`,
        );
      }
      return id;
    });
  /** Special-token strings as plain text: split only at the non-special added tokens (`<think>`). */
  const encodePlain = (text: string): number[] =>
    splitAt(text, plainAdded).flatMap((part, section_index) => {
      if (part.token) return [idOf(part.text)!];
      const normal = pipeline.normalizer ? pipeline.normalizer(part.text) : part.text;
      if (normal === "") return [];
      const pieces = pipeline.pre_tokenizer ? pipeline.pre_tokenizer(normal, { section_index }) : [normal];
      return toIds(pipeline.model(pieces), text);
    });

  const isDropped = (id: number, keep: boolean | undefined) => !keep && specialSet.has(id);
  return {
    kind: "bpe",
    files,
    size,
    bos,
    eos,
    pad,
    specials,
    encode(text: string, options: EncodeOptions = {}): number[] {
      const ids = options.specials ? lib.encode(text, { add_special_tokens: false }).ids : encodePlain(text);
      return options.bos && bos !== undefined ? [bos, ...ids] : ids;
    },
    decode(ids: ArrayLike<number>, options: { specials?: boolean } = {}): string {
      const parts: Uint8Array[] = [];
      let total = 0;
      for (let i = 0; i < ids.length; i++) {
        if (isDropped(ids[i], options.specials)) continue;
        const b = tokenBytes(ids[i]);
        parts.push(b);
        total += b.length;
      }
      const all = new Uint8Array(total);
      let at = 0;
      for (const b of parts) all.set(b, at), (at += b.length);
      return new TextDecoder("utf-8", { ignoreBOM: true }).decode(all);
    },
    streamDecoder(): (id: number) => string {
      const dec = new TextDecoder("utf-8", { ignoreBOM: true });
      return (id) => (specialSet.has(id) ? "" : dec.decode(tokenBytes(id), { stream: true }));
    },
    tokenBytes,
    tokenText(id: number): string {
      const name = names[id];
      if (name === undefined) throw new RangeError(`token id ${id} is not in ${where}tokenizer.json`);
      return name;
    },
  };
}

/**
 * The tokenizer of a model's files: none (a model without them) is the byte tokenizer, files are a
 * Hugging Face byte-level BPE (model/hf-tokenizer.ts). Bad files are refused with a `FormatError`
 * naming `where` (the folder or export they came from), the file and the field.
 *
 * @example
 * ```ts
 * import { loadTokenizer } from "./hf-tokenizer.ts";
 * import type { TokenizerFiles } from "./tokenizer-types.ts";
 * declare const files: TokenizerFiles; // the tokenizer files of a Qwen3 folder
 * loadTokenizer(undefined, "out/ferry.bf16.dmexp").kind;     // "byte"
 * loadTokenizer(files, "models/qwen3/").eos;                 // [151645, 151643]
 * ```
 */
export function loadTokenizer(files: TokenizerFiles | undefined, where: string): Tokenizer {
  if (files === undefined) return byteTokenizer;
  const sep = where === "" || where.endsWith("/") || where.endsWith(":") ? "" : "/";
  return hfTokenizer(files, where + sep);
}

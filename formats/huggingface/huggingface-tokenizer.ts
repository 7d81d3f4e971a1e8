/**
 * A Hugging Face folder's tokenizer files (`TokenizerFiles`): read verbatim, and checked before any
 * format stores them. tokenizer.json must be a byte-level BPE whose ids fit the model's vocab and whose
 * merges name tokens of its vocab; tokenizer_config.json and generation_config.json must be JSON
 * objects; the chat template (chat_template.jinja, else tokenizer_config.json's `chat_template`) must
 * compile. Every container that carries a tokenizer runs `checkTokenizerFiles` on what it reads back.
 * ferry's own byte tokenizer.json (`byteTokenizerJson`) is written here too, and recognised on import
 * by its content alone (`byteTokenizerDifference`).
 *
 * @example
 * ```ts
 * import { readTokenizerFolder } from "./huggingface-tokenizer.ts";
 * const tokenizer = await readTokenizerFolder("Qwen3-0.6B", 151936); // undefined for a byte model
 * ```
 * @module
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { FormatError, type FormatRefusal, messageWithoutCode } from "../../model/error.ts";
import { parseJsonOnce, rememberLast } from "../../model/remember.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../../model/tokenizer-types.ts";
import { BOS, BOS_TOKEN, BYTE_CHARS, BYTE_VOCAB_SIZE, EOS, EOS_TOKEN } from "../../model/tokenizer.ts";
import { isJsonObject, JsonNumber, type JsonValue, parseStrictJson, StrictJsonError } from "../json.ts";

/** What `checkTokenizerFiles` learned: how many ids the tokenizer uses, and whether it has a template. */
export interface TokenizerSummary {
  /** Vocab entries plus added tokens: one more than the largest id. */
  tokens: number;
  merges: number;
  /** Where the chat template is: `chat_template.jinja`, `tokenizer_config.json`, or none. */
  template: "chat_template.jinja" | "tokenizer_config.json" | null;
  /** Total UTF-8 bytes of the files. */
  bytes: number;
}

const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * Reads the tokenizer files of a folder: undefined when there is no tokenizer.json, or when the vocab is
 * the byte tokenizer's 258 ids and tokenizer.json is ferry's byte tokenizer (a byte model reads as it
 * always has). A 258-id folder whose tokenizer.json has the byte tokenizer's form (a BPE of 256 vocab
 * entries, no merges, two added tokens) but not its content is refused, naming the first entry that
 * differs (`byteTokenizerDifference`), rather than read as a byte model without its tokenizer. Otherwise
 * every file present is read as UTF-8 text, unchanged, and checked against `vocabSize` (config.json's)
 * before it is returned.
 *
 * @example
 * ```ts
 * import { readTokenizerFolder } from "./huggingface-tokenizer.ts";
 * const files = await readTokenizerFolder("m.hf", 151936, "m.hf/config.json");
 * ```
 */
export async function readTokenizerFolder(
  dir: string,
  vocabSize: number,
  configPath = join(dir, "config.json"),
): Promise<TokenizerFiles | undefined> {
  const files: Partial<Record<string, string>> = {};
  for (const name of TOKENIZER_FILE_NAMES) {
    const path = join(dir, name);
    let bytes: Uint8Array;
    try {
      bytes = await readFile(path);
    } catch (e) {
      if ((e as { code?: string }).code === "ENOENT") continue;
      throw e;
    }
    try {
      files[name] = UTF8.decode(bytes);
    } catch {
      throw new FormatError(path, "InvalidUtf8", name, `${path}: not valid UTF-8`, {
        expected: "UTF-8 text",
      });
    }
  }
  const json = files["tokenizer.json"];
  if (json === undefined) return undefined;
  if (vocabSize === BYTE_VOCAB_SIZE && hasByteTokenizerForm(json)) {
    const differs = byteTokenizerDifference(json);
    if (differs === undefined) return undefined;
    const path = join(dir, "tokenizer.json");
    throw new FormatError(
      path,
      "InvalidTokenizer",
      differs.field,
      `${path}: ${differs.field}: expected ${differs.expected}, found ${differs.found}: a tokenizer.json ` +
        `shaped like ferry's byte tokenizer (256 vocab entries, no merges, two added tokens) for ` +
        `${configPath}'s vocab_size ${BYTE_VOCAB_SIZE} must be ferry's byte tokenizer exactly`,
      { expected: differs.expected, found: differs.found },
    );
  }
  const tokenizer = files as TokenizerFiles;
  checkTokenizerFiles(tokenizer, vocabSize, { dir, config: configPath });
  return tokenizer;
}

/**
 * One of ferry's special tokens as tokenizer.json lists it in `added_tokens` (tokenizer_config.json's
 * `added_tokens_decoder` holds the same, without the id).
 *
 * @example
 * ```ts
 * import { addedToken } from "./huggingface-tokenizer.ts";
 * addedToken(256, "<|startoftext|>").special; // true
 * ```
 */
export const addedToken = (id: number, content: string) => ({
  id,
  content,
  single_word: false,
  lstrip: false,
  rstrip: false,
  normalized: false,
  special: true,
});

/**
 * tokenizer.json for ferry's byte tokenizer: a byte-level BPE whose vocab is the 256 byte characters
 * in byte order and whose merges are empty, so every byte is one token with id = byte; BOS and EOS
 * are added tokens 256 and 257. The post-processor puts BOS first, as ferry's models are trained.
 * The vocab is a Map because a plain object would move the keys "0".."9" to the front.
 *
 * @example
 * ```ts
 * import { writeFile } from "node:fs/promises";
 * import { byteTokenizerJson } from "./huggingface-tokenizer.ts";
 * import { jsonText } from "./huggingface.ts";
 * await writeFile("tokenizer.json", jsonText(byteTokenizerJson()));
 * ```
 */
export function byteTokenizerJson(): Record<string, unknown> {
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const bos = { SpecialToken: { id: BOS_TOKEN, type_id: 0 } };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [addedToken(BOS, BOS_TOKEN), addedToken(EOS, EOS_TOKEN)],
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: {
      type: "TemplateProcessing",
      single: [bos, { Sequence: { id: "A", type_id: 0 } }],
      pair: [bos, { Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
      special_tokens: { [BOS_TOKEN]: { id: BOS_TOKEN, ids: [BOS], tokens: [BOS_TOKEN] } },
    },
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: new Map(BYTE_CHARS.map((c, b) => [c, b])),
      merges: [],
    },
  };
}

/** Where a tokenizer.json departs from ferry's byte tokenizer: the entry, and what each side holds. */
export interface TokenizerDifference {
  /** The path of the entry in tokenizer.json (`model.vocab.m`, `added_tokens[1].content`). */
  field: string;
  /** What ferry's byte tokenizer holds there, in words. */
  expected: string;
  /** What the file holds there, in words. */
  found: string;
}

/**
 * The first entry in which tokenizer.json differs from ferry's byte tokenizer (`byteTokenizerJson`), or
 * undefined when it is that tokenizer: the same keys with the same values everywhere (every byte's token
 * and id, the two added tokens, the pre-tokenizer, decoder and post-processor), key order and
 * whitespace aside. The text is read with the strict JSON scanner, so a duplicate key, or an id written
 * `109.0`, differs too.
 *
 * @example
 * ```ts
 * import { byteTokenizerDifference, byteTokenizerJson } from "./huggingface-tokenizer.ts";
 * import { jsonText } from "./huggingface.ts";
 * byteTokenizerDifference(jsonText(byteTokenizerJson())); // undefined
 * ```
 */
export function byteTokenizerDifference(text: string): TokenizerDifference | undefined {
  let root: JsonValue;
  try {
    root = parseStrictJson(text);
  } catch (e) {
    if (!(e instanceof StrictJsonError)) throw e;
    const why = messageWithoutCode(e).slice(e.field.length + 2); // the message less its "<field>: " and code
    if (e.code === "DuplicateKey") return { field: e.field, expected: "each key once", found: why };
    return { field: e.field, expected: e.expected || "strict JSON", found: e.found || why };
  }
  return difference(byteTokenizerJson(), root, "");
}

/**
 * Whether tokenizer.json is ferry's byte tokenizer (what ferry writes for a byte model), by its content:
 * `byteTokenizerDifference` finds nothing.
 *
 * @example
 * ```ts
 * import { byteTokenizerJson, isByteTokenizer } from "./huggingface-tokenizer.ts";
 * import { jsonText } from "./huggingface.ts";
 * isByteTokenizer(jsonText(byteTokenizerJson())); // true
 * ```
 */
export function isByteTokenizer(text: string): boolean {
  return byteTokenizerDifference(text) === undefined;
}

// The byte tokenizer's form, which only ferry's byte tokenizer is expected to have: a BPE of 256 vocab
// entries with no merges and two added tokens (what an earlier check took for the tokenizer itself).
function hasByteTokenizerForm(text: string): boolean {
  try {
    const root = JSON.parse(text);
    const model = root?.model;
    return model?.type === "BPE" && Array.isArray(model.merges) && model.merges.length === 0 &&
      typeof model.vocab === "object" && model.vocab !== null &&
      Object.keys(model.vocab).length === 256 && Array.isArray(root.added_tokens) &&
      root.added_tokens.length === 2;
  } catch {
    return false;
  }
}

// `want` (ferry's value, a Map for the vocab) against `got` (the file's, strictly parsed) at `at`: the
// first entry that differs, in ferry's order (the vocab in byte order), then any entry ferry has not.
function difference(want: unknown, got: JsonValue | undefined, at: string): TokenizerDifference | undefined {
  const differs = (expected: string) => ({ field: at || "(top level)", expected, found: describe(got) });
  if (want instanceof Map || (typeof want === "object" && want !== null && !Array.isArray(want))) {
    if (!isJsonObject(got)) return differs("an object");
    const entries: [string, unknown][] = want instanceof Map ? [...want] : Object.entries(want);
    for (const [key, value] of entries) {
      const d = difference(value, Object.hasOwn(got, key) ? got[key] : undefined, child(at, key));
      if (d) return d;
    }
    const known = new Set(entries.map(([key]) => key));
    const extra = Object.keys(got).find((key) => !known.has(key));
    if (extra !== undefined) {
      return { field: child(at, extra), expected: "no such entry", found: describe(got[extra]) };
    }
    return undefined;
  }
  if (Array.isArray(want)) {
    if (!Array.isArray(got) || got.length !== want.length) return differs(`a list of ${want.length}`);
    for (let i = 0; i < want.length; i++) {
      const d = difference(want[i], got[i], `${at}[${i}]`);
      if (d) return d;
    }
    return undefined;
  }
  const same = typeof want === "number"
    ? got instanceof JsonNumber && got.text === String(want)
    : got === want;
  return same ? undefined : differs(describe(want as JsonValue));
}

// `a.b` for a plain name, `a["Ġ"]` for any other key.
function child(at: string, key: string): string {
  if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) return at ? `${at}.${key}` : key;
  return `${at}[${JSON.stringify(key)}]`;
}

// A value in words, short whatever its size: a number as written, a string quoted (cut at 40 characters).
function describe(v: JsonValue | undefined): string {
  if (v === undefined) return "no entry";
  if (v instanceof JsonNumber) return v.text;
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (Array.isArray(v)) return `a list of ${v.length}`;
  if (isJsonObject(v)) return "an object";
  return String(v);
}

/**
 * Checks tokenizer files as formats store them, refusing with a `FormatError` that names the file and
 * the field: tokenizer.json a BPE model (`model.type`), its vocab and added tokens within `vocabSize`
 * (naming config.json's `vocab_size` too), every merge made of vocab tokens (the first bad one named),
 * the two config files JSON objects, the chat template compiling. `where.dir` is the folder or file
 * the files came from; `where.config` what stated the vocab size.
 *
 * @example
 * ```ts
 * import { checkTokenizerFiles } from "./huggingface-tokenizer.ts";
 * import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
 * declare const files: TokenizerFiles; // a Qwen3 tokenizer's
 * const { tokens, template } = checkTokenizerFiles(files, 151936, { dir: "m.dmexp", config: "m.dmexp" });
 * ```
 */
export function checkTokenizerFiles(
  files: TokenizerFiles,
  vocabSize: number,
  where: { dir: string; config: string },
): TokenizerSummary {
  // A lut4 load checks its tokenizer section when it reads the tokenizer and again when it reads the
  // weights: the same texts, checked once. The summary depends on the texts and the vocab size only.
  const names = Object.keys(files).sort();
  const key = [vocabSize, names.join("\n"), ...names.map((n) => files[n as keyof TokenizerFiles])];
  return checkedFiles(key, () => Object.freeze(checkFiles(files, vocabSize, where)));
}

const checkedFiles = rememberLast<TokenizerSummary>(2);

function checkFiles(
  files: TokenizerFiles,
  vocabSize: number,
  where: { dir: string; config: string },
): TokenizerSummary {
  const at = (name: string) => where.dir.endsWith("/") ? where.dir + name : `${where.dir}/${name}`;
  const refuse: Refuse = (code, name, field, why, expected, found) =>
    new FormatError(at(name), code, field, `${at(name)}: ${field}: ${why}`, { expected, found });
  for (const name of Object.keys(files)) {
    if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(name)) {
      throw refuse(
        "InvalidTokenizer",
        name,
        "file",
        "not a tokenizer file",
        TOKENIZER_FILE_NAMES.join(", "),
        name,
      );
    }
    if (typeof files[name as keyof TokenizerFiles] !== "string") {
      throw refuse(
        "InvalidTokenizer",
        name,
        "file",
        "expected the file's text",
        "text",
        typeof files[name as keyof TokenizerFiles],
      );
    }
  }
  const root = jsonObject(files["tokenizer.json"], "tokenizer.json", refuse);
  const model = root.model as Record<string, unknown> | undefined;
  if (typeof model !== "object" || model === null || model.type !== "BPE") {
    throw refuse(
      "InvalidTokenizer",
      "tokenizer.json",
      "model.type",
      "ferry reads byte-level BPE tokenizers only",
      '"BPE"',
      String(model?.type),
    );
  }
  const vocab = model.vocab as Record<string, unknown>;
  if (typeof vocab !== "object" || vocab === null || Array.isArray(vocab)) {
    throw refuse(
      "InvalidTokenizer",
      "tokenizer.json",
      "model.vocab",
      "expected an object of token to id",
      "an object",
      typeof vocab,
    );
  }
  let tokens = 0;
  // The keys, not Object.entries: at 151,669 entries no pair arrays are made (a third of the time under Deno).
  for (const token of Object.keys(vocab)) {
    const id = vocab[token];
    if (!Number.isSafeInteger(id) || (id as number) < 0) {
      throw refuse(
        "InvalidTokenizer",
        "tokenizer.json",
        `model.vocab.${token}`,
        "expected a non-negative integer id",
        "an id",
        String(id),
      );
    }
    tokens = Math.max(tokens, (id as number) + 1);
  }
  const added = root.added_tokens ?? [];
  if (!Array.isArray(added)) {
    throw refuse(
      "InvalidTokenizer",
      "tokenizer.json",
      "added_tokens",
      "expected a list",
      "a list",
      typeof added,
    );
  }
  added.forEach((t, i) => {
    if (!Number.isSafeInteger(t?.id) || t.id < 0 || typeof t.content !== "string") {
      throw refuse(
        "InvalidTokenizer",
        "tokenizer.json",
        `added_tokens[${i}]`,
        "expected {id, content}",
        "an id and a content",
        JSON.stringify(t),
      );
    }
    tokens = Math.max(tokens, t.id + 1);
  });
  if (tokens > vocabSize) {
    throw new FormatError(
      at("tokenizer.json"),
      "VocabMismatch",
      "vocab_size",
      `${at("tokenizer.json")} disagrees with ${where.config}'s vocab_size: the tokenizer uses ids up to ` +
        `${tokens - 1} (${tokens} tokens), the model has ${vocabSize} rows`,
      { expected: `at most ${vocabSize} tokens`, found: `${tokens} tokens` },
    );
  }
  const merges = checkMerges(model.merges, vocab, refuse);
  for (const name of ["tokenizer_config.json", "generation_config.json"] as const) {
    if (files[name] !== undefined) jsonObject(files[name], name, refuse);
  }
  const template = checkTemplate(files, refuse);
  let bytes = 0;
  for (const text of Object.values(files)) bytes += new TextEncoder().encode(text).length;
  return { tokens, merges, template, bytes };
}

type Refuse = (
  code: FormatRefusal,
  name: string,
  field: string,
  why: string,
  expected: string,
  found: string,
) => FormatError;

function jsonObject(text: string, name: string, refuse: Refuse): Record<string, unknown> {
  let root: unknown;
  try {
    root = parseJsonOnce(text);
  } catch (e) {
    throw refuse(
      "InvalidJson",
      name,
      "json",
      `not valid JSON: ${(e as Error).message}`,
      "JSON",
      "invalid JSON",
    );
  }
  if (typeof root !== "object" || root === null || Array.isArray(root)) {
    throw refuse(
      "InvalidJson",
      name,
      "json",
      "expected a JSON object",
      "an object",
      Array.isArray(root) ? "a list" : typeof root,
    );
  }
  return root as Record<string, unknown>;
}

// Each merge is "a b" (older files) or ["a", "b"] (newer ones); both parts must be vocab tokens.
function checkMerges(merges: unknown, vocab: Record<string, unknown>, refuse: Refuse): number {
  if (!Array.isArray(merges)) {
    throw refuse(
      "InvalidTokenizer",
      "tokenizer.json",
      "model.merges",
      "expected a list",
      "a list of merges",
      typeof merges,
    );
  }
  for (let i = 0; i < merges.length; i++) {
    const m = merges[i];
    const pair = typeof m === "string" ? m.split(" ") : m;
    const ok = Array.isArray(pair) && pair.length === 2 &&
      pair.every((p) => typeof p === "string" && Object.hasOwn(vocab, p));
    if (!ok) {
      throw refuse(
        "InvalidTokenizer",
        "tokenizer.json",
        `model.merges[${i}]`,
        `${JSON.stringify(m)} does not name two tokens of model.vocab`,
        "two vocab tokens",
        JSON.stringify(m),
      );
    }
  }
  return merges.length;
}

// The template as transformers finds it: chat_template.jinja first, else tokenizer_config.json's key
// (a string, or a list of named templates); each one must compile.
function checkTemplate(files: TokenizerFiles, refuse: Refuse): TokenizerSummary["template"] {
  const compile = (text: string, name: string, field: string) => {
    try {
      new Template(text);
    } catch (e) {
      throw refuse(
        "InvalidTemplate",
        name,
        field,
        `the chat template does not parse: ${(e as Error).message}`,
        "a Jinja template",
        "a parse error",
      );
    }
  };
  const jinja = files["chat_template.jinja"];
  if (jinja !== undefined) compile(jinja, "chat_template.jinja", "chat_template");
  const config = files["tokenizer_config.json"];
  const inConfig = config === undefined ? undefined : JSON.parse(config).chat_template;
  if (typeof inConfig === "string") compile(inConfig, "tokenizer_config.json", "chat_template");
  else if (Array.isArray(inConfig)) {
    inConfig.forEach((t, i) => {
      if (typeof t?.template !== "string") {
        throw refuse(
          "InvalidTemplate",
          "tokenizer_config.json",
          `chat_template[${i}]`,
          "expected {name, template}",
          "a template",
          JSON.stringify(t),
        );
      }
      compile(t.template, "tokenizer_config.json", `chat_template[${i}]`);
    });
  } else if (inConfig !== undefined && inConfig !== null) {
    throw refuse(
      "InvalidTemplate",
      "tokenizer_config.json",
      "chat_template",
      "expected a string",
      "a Jinja template",
      typeof inConfig,
    );
  }
  if (jinja !== undefined) return "chat_template.jinja";
  return inConfig === undefined || inConfig === null ? null : "tokenizer_config.json";
}

/**
 * `checkTokenizerFiles`'s summary as `info` shows it.
 *
 * @example
 * ```ts
 * import { tokenizerInfo } from "./huggingface-tokenizer.ts";
 * import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
 * declare const files: TokenizerFiles; // a Qwen3 tokenizer's
 * tokenizerInfo(files, 151936, "m.dmexp"); // { bytes: 11432329, tokens: 151669, merges: 151387, template: "tokenizer_config.json" }
 * ```
 */
export function tokenizerInfo(
  files: TokenizerFiles | undefined,
  vocabSize: number,
  where: string,
): Record<string, unknown> {
  if (!files) return { kind: "bytes (ferry's 258-id byte tokenizer)" };
  const s = checkTokenizerFiles(files, vocabSize, { dir: where, config: where });
  return {
    kind: "bpe",
    files: Object.keys(files),
    bytes: s.bytes,
    tokens: s.tokens,
    merges: s.merges,
    chat_template: s.template ?? "none",
  };
}

/**
 * A Hugging Face folder's tokenizer files (`TokenizerFiles`): read verbatim, and checked before any
 * format stores them. tokenizer.json must be a byte-level BPE whose ids fit the model's vocab and whose
 * merges name tokens of its vocab; tokenizer_config.json and generation_config.json must be JSON
 * objects; the chat template (chat_template.jinja, else tokenizer_config.json's `chat_template`) must
 * compile. Every container that carries a tokenizer runs `checkTokenizerFiles` on what it reads back.
 *
 * @example
 * ```ts
 * const tokenizer = await readTokenizerFolder("Qwen3-0.6B", 151936); // undefined for a byte model
 * ```
 * @module
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { FormatError } from "../model/error.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../model/tokenizer-types.ts";
import { BYTE_VOCAB_SIZE } from "../model/tokenizer.ts";

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
 * Reads the tokenizer files of a folder: undefined when there is no tokenizer.json, or when it is
 * ferry's own byte tokenizer (`isByteTokenizer`) and the vocab is the byte tokenizer's, so a byte model
 * reads as it always has. Otherwise every file present is read as UTF-8 text, unchanged, and checked
 * against `vocabSize` (config.json's) before it is returned.
 *
 * @example
 * ```ts
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
      throw new FormatError(path, name, `${path}: not valid UTF-8`, { expected: "UTF-8 text" });
    }
  }
  const json = files["tokenizer.json"];
  if (json === undefined) return undefined;
  if (vocabSize === BYTE_VOCAB_SIZE && isByteTokenizer(json)) return undefined;
  const tokenizer = files as TokenizerFiles;
  checkTokenizerFiles(tokenizer, vocabSize, { dir, config: configPath });
  return tokenizer;
}

/**
 * Whether tokenizer.json is ferry's byte tokenizer (what ferry writes for a byte model): a BPE over the
 * 256 byte characters with no merges and ids 256 and 257 added.
 *
 * @example
 * ```ts
 * isByteTokenizer(jsonText(byteTokenizerJson())); // true
 * ```
 */
export function isByteTokenizer(text: string): boolean {
  try {
    const root = JSON.parse(text);
    const model = root?.model;
    return model?.type === "BPE" && Array.isArray(model.merges) && model.merges.length === 0 &&
      Object.keys(model.vocab ?? {}).length === 256 && Array.isArray(root.added_tokens) &&
      root.added_tokens.length === 2 && root.added_tokens[0]?.id === 256 && root.added_tokens[1]?.id === 257;
  } catch {
    return false;
  }
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
 * const { tokens, template } = checkTokenizerFiles(files, 151936, { dir: "m.dmexp", config: "m.dmexp" });
 * ```
 */
export function checkTokenizerFiles(
  files: TokenizerFiles,
  vocabSize: number,
  where: { dir: string; config: string },
): TokenizerSummary {
  const at = (name: string) => where.dir.endsWith("/") ? where.dir + name : `${where.dir}/${name}`;
  const refuse = (name: string, field: string, why: string, expected: string, found: string) =>
    new FormatError(at(name), field, `${at(name)}: ${field}: ${why}`, { expected, found });
  for (const name of Object.keys(files)) {
    if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(name)) {
      throw refuse(name, "file", "not a tokenizer file", TOKENIZER_FILE_NAMES.join(", "), name);
    }
    if (typeof files[name as keyof TokenizerFiles] !== "string") {
      throw refuse(
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
      "tokenizer.json",
      "model.vocab",
      "expected an object of token to id",
      "an object",
      typeof vocab,
    );
  }
  let tokens = 0;
  for (const [token, id] of Object.entries(vocab)) {
    if (!Number.isSafeInteger(id) || (id as number) < 0) {
      throw refuse(
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
    throw refuse("tokenizer.json", "added_tokens", "expected a list", "a list", typeof added);
  }
  added.forEach((t, i) => {
    if (!Number.isSafeInteger(t?.id) || t.id < 0 || typeof t.content !== "string") {
      throw refuse(
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

type Refuse = (name: string, field: string, why: string, expected: string, found: string) => FormatError;

function jsonObject(text: string, name: string, refuse: Refuse): Record<string, unknown> {
  let root: unknown;
  try {
    root = JSON.parse(text);
  } catch (e) {
    throw refuse(name, "json", `not valid JSON: ${(e as Error).message}`, "JSON", "invalid JSON");
  }
  if (typeof root !== "object" || root === null || Array.isArray(root)) {
    throw refuse(
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
    throw refuse("tokenizer.json", "model.merges", "expected a list", "a list of merges", typeof merges);
  }
  for (let i = 0; i < merges.length; i++) {
    const m = merges[i];
    const pair = typeof m === "string" ? m.split(" ") : m;
    const ok = Array.isArray(pair) && pair.length === 2 &&
      pair.every((p) => typeof p === "string" && Object.hasOwn(vocab, p));
    if (!ok) {
      throw refuse(
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

/**
 * A Hugging Face byte-level BPE tokenizer (Qwen2/Qwen3's) as llama.cpp's GGUF keys, and back.
 *
 * Writing follows llama.cpp's converter (`convert_hf_to_gguf.py`'s `get_vocab_base` and gguf-py's
 * `SpecialVocab`): `tokenizer.ggml.model` "gpt2", `pre` "qwen2", one token string per embedding row
 * (ids no text maps to become `[PAD{id}]`, type UNUSED), added tokens typed CONTROL when special or
 * when they look special (`<|...|>`) and USER_DEFINED otherwise, merges as "left right", the special
 * ids from tokenizer_config.json (generation_config.json's ids where it names none, as the converter
 * falls back to config.json), add_bos_token, and the chat template (chat_template.jinja first).
 * generation_config.json rides along verbatim under `ferry.tokenizer.generation_config`.
 *
 * Reading rebuilds `TokenizerFiles` from those keys: a tokenizer.json with qwen2's normalizer and
 * pre-tokenizer, the vocabulary, merges and added tokens; a tokenizer_config.json with the specials
 * and the template. Every input is checked before anything is written or handed out.
 *
 * @example
 * ```ts
 * import { tokenizerFromMetadata, tokenizerMetadata } from "./gguf-tokenizer.ts";
 * import { parseGguf } from "./gguf-container.ts";
 * import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
 * declare const files: TokenizerFiles, bytes: Uint8Array; // a Qwen3 tokenizer; a file written with kv
 * const kv = tokenizerMetadata(files, 151936, "out/m.gguf"); // [["tokenizer.ggml.model", ...], ...]
 * const back = tokenizerFromMetadata(parseGguf(bytes, "m.gguf").metadata, 151936, "m.gguf");
 * ```
 * @module
 */
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { GgufError, type GgufRefusal, type GgufValue } from "./gguf-container.ts";
import { TOKEN_TYPE } from "./gguf-vocab.ts";
import { isByteTokenizer as isByteTokenizerJson } from "../huggingface/huggingface-tokenizer.ts";
import { GGUF_KEYS } from "./gguf-keys.ts";

const { Tokenizer } = GGUF_KEYS;

/** Qwen2's (and Qwen3's) pre-tokenizer split, as its tokenizer.json spells it; llama.cpp's "qwen2". */
export const QWEN2_SPLIT_REGEX =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** Where ferry keeps generation_config.json's text, which llama.cpp's keys have no place for. */
export const GENERATION_CONFIG_KEY = "ferry.tokenizer.generation_config";

/** The special-token roles gguf-py reads from tokenizer_config.json, with their GGUF keys. */
const SPECIAL_ROLES = [
  ["bos", Tokenizer.BOS_ID],
  ["eos", Tokenizer.EOS_ID],
  ["unk", Tokenizer.UNK_ID],
  ["sep", Tokenizer.SEP_ID],
  ["pad", Tokenizer.PAD_ID],
  ["cls", Tokenizer.CLS_ID],
  ["mask", Tokenizer.MASK_ID],
] as const;

interface AddedToken {
  id: number;
  content: string;
  special?: boolean;
  normalized?: boolean;
}

/**
 * The `tokenizer.*` metadata of a Hugging Face byte-level BPE tokenizer for a model with `vocab`
 * embedding rows, as llama.cpp's converter writes it for Qwen3. Refuses (a `GgufError` naming `where`,
 * the input file and its field) a tokenizer that is not byte-level BPE with qwen2's pre-tokenizer, has
 * more ids than `vocab`, repeats a token string, or has a merge naming a token it does not have.
 *
 * @example
 * ```ts
 * import { tokenizerMetadata } from "./gguf-tokenizer.ts";
 * declare const text: string; // a Qwen3 tokenizer.json
 * const kv = tokenizerMetadata({ "tokenizer.json": text }, 151936, "out/m.gguf");
 * ```
 */
export function tokenizerMetadata(
  files: TokenizerFiles,
  vocab: number,
  where: string,
): Array<[string, GgufValue]> {
  const json = parseJson(files["tokenizer.json"], "tokenizer.json", where);
  const config = files["tokenizer_config.json"] === undefined
    ? {}
    : parseJson(files["tokenizer_config.json"], "tokenizer_config.json", where);
  const generation = files["generation_config.json"] === undefined
    ? undefined
    : parseJson(files["generation_config.json"], "generation_config.json", where);
  checkByteLevelBpe(json, where);
  const model = json.model as Record<string, unknown>;
  const { tokens, types, added } = vocabulary(model, json.added_tokens, vocab, where);
  const merges = mergeStrings(model.merges, new Set(Object.keys(model.vocab as object)), where);
  const kv: Array<[string, GgufValue]> = [
    [Tokenizer.MODEL, { type: "string", value: "gpt2" }],
    [Tokenizer.PRE, { type: "string", value: "qwen2" }],
    [Tokenizer.LIST, { type: "array", elem: "string", value: tokens }],
    [Tokenizer.TOKEN_TYPE, { type: "array", elem: "i32", value: types }],
    [Tokenizer.MERGES, { type: "array", elem: "string", value: merges }],
  ];
  for (const [role, key] of SPECIAL_ROLES) {
    const id = specialId(role, config, generation, added, vocab);
    if (id !== undefined) kv.push([key, { type: "u32", value: id }]);
  }
  // HF's byte-level post-processor adds no BOS or EOS; tokenizer_config.json may say otherwise.
  for (const [role, key] of [["bos", Tokenizer.ADD_BOS], ["eos", Tokenizer.ADD_EOS]]) {
    const add = config[`add_${role}_token`];
    kv.push([key, { type: "bool", value: add === true }]);
  }
  const template = chatTemplate(files, config, where);
  if (template !== undefined) kv.push([Tokenizer.CHAT_TEMPLATE, { type: "string", value: template }]);
  if (files["generation_config.json"] !== undefined) {
    kv.push([GENERATION_CONFIG_KEY, { type: "string", value: files["generation_config.json"] }]);
  }
  return kv;
}

/**
 * Whether tokenizer files are ferry's own byte tokenizer (what formats/huggingface/huggingface.ts writes for a byte
 * model), which GGUF keeps as its byte vocabulary rather than as a BPE (a byte model's file stays what
 * it always was). Judged by tokenizer.json's whole content, by the one rule the Hugging Face reader
 * uses (formats/huggingface/huggingface-tokenizer.ts).
 *
 * @example
 * ```ts
 * import { isByteTokenizer } from "./gguf-tokenizer.ts";
 * import { byteTokenizerJson } from "../huggingface/huggingface-tokenizer.ts";
 * import { jsonText } from "../huggingface/huggingface.ts";
 * isByteTokenizer({ "tokenizer.json": jsonText(byteTokenizerJson()) }); // true
 * ```
 */
export function isByteTokenizer(files: TokenizerFiles): boolean {
  return isByteTokenizerJson(files["tokenizer.json"]);
}

function parseJson(text: string, file: string, where: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new GgufError(where, "InvalidJson", file, `is not JSON: ${(e as Error).message}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new GgufError(where, "InvalidJson", file, "expected a JSON object", {
      expected: "an object",
      found: typeof v,
    });
  }
  return v as Record<string, unknown>;
}

function checkByteLevelBpe(json: Record<string, unknown>, where: string): void {
  const model = json.model as Record<string, unknown> | undefined;
  const refuse = (code: GgufRefusal, field: string, message: string) =>
    new GgufError(where, code, `tokenizer.json: ${field}`, message);
  if (!model || model.type !== "BPE") {
    throw refuse("Unsupported", "model.type", 'expected "BPE" (llama.cpp\'s gpt2 model)');
  }
  if (model.byte_fallback === true) {
    throw refuse("Unsupported", "model.byte_fallback", "expected false (a byte-level BPE)");
  }
  if (typeof model.vocab !== "object" || model.vocab === null) {
    throw refuse("InvalidTokenizer", "model.vocab", "expected an object");
  }
  if (!Array.isArray(model.merges)) throw refuse("InvalidTokenizer", "model.merges", "expected an array");
  const decoder = json.decoder as Record<string, unknown> | undefined;
  if (decoder?.type !== "ByteLevel") throw refuse("Unsupported", "decoder.type", 'expected "ByteLevel"');
  if (splitRegex(json.pre_tokenizer) !== QWEN2_SPLIT_REGEX) {
    throw refuse(
      "Unsupported",
      "pre_tokenizer",
      "expected Qwen2's Split regex and ByteLevel (llama.cpp's \"qwen2\"); ferry converts no other",
    );
  }
}

/** The pattern of the pre-tokenizer's Split step, when it is a Sequence of Split and ByteLevel. */
function splitRegex(pre: unknown): string | undefined {
  const p = pre as { type?: string; pretokenizers?: Array<Record<string, unknown>> } | undefined;
  if (p?.type !== "Sequence" || p.pretokenizers?.length !== 2) return undefined;
  const [split, bytes] = p.pretokenizers;
  if (split.type !== "Split" || bytes.type !== "ByteLevel" || bytes.use_regex !== false) return undefined;
  return (split.pattern as { Regex?: string } | undefined)?.Regex;
}

function vocabulary(
  model: Record<string, unknown>,
  addedTokens: unknown,
  vocab: number,
  where: string,
): { tokens: string[]; types: number[]; added: AddedToken[] } {
  const tokens: Array<string | undefined> = new Array(vocab);
  const types: number[] = new Array(vocab).fill(TOKEN_TYPE.UNUSED);
  const byText = new Map<string, number>();
  const place = (text: string, id: unknown, type: number, field: string) => {
    if (!Number.isInteger(id) || (id as number) < 0) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        `tokenizer.json: ${field}`,
        `id ${String(id)} is not a non-negative integer`,
      );
    }
    const i = id as number;
    if (i >= vocab) {
      throw new GgufError(
        where,
        "VocabMismatch",
        `tokenizer.json: ${field}`,
        `id ${i} is past the model's ${vocab} embedding rows (vocab_size)`,
        { expected: `ids below ${vocab}`, found: String(i) },
      );
    }
    const other = byText.get(text);
    if (other !== undefined && other !== i) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        `tokenizer.json: ${field}`,
        `token ${JSON.stringify(text)} has ids ${other} and ${i}; llama.cpp needs each token once`,
      );
    }
    byText.set(text, i);
    tokens[i] = text, types[i] = type;
  };
  for (const [text, id] of Object.entries(model.vocab as Record<string, unknown>)) {
    place(text, id, TOKEN_TYPE.NORMAL, `model.vocab[${JSON.stringify(text)}]`);
  }
  if (addedTokens !== undefined && !Array.isArray(addedTokens)) {
    throw new GgufError(where, "InvalidTokenizer", "tokenizer.json: added_tokens", "expected an array");
  }
  const added = (addedTokens ?? []) as AddedToken[];
  added.forEach((t, k) => {
    if (typeof t?.content !== "string") {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        `tokenizer.json: added_tokens[${k}].content`,
        "expected a string",
      );
    }
    const control = t.special === true || looksSpecial(t.content);
    place(t.content, t.id, control ? TOKEN_TYPE.CONTROL : TOKEN_TYPE.USER_DEFINED, `added_tokens[${k}]`);
  });
  const out = Array.from(tokens, (t, i) => t ?? `[PAD${i}]`);
  return { tokens: out, types, added };
}

/** gguf-py's `does_token_look_special`, for the Qwen-relevant cases: `<|...|>` and a few names. */
function looksSpecial(text: string): boolean {
  return (text.startsWith("<|") && text.endsWith("|>")) ||
    (text.startsWith("<\uff5c") && text.endsWith("\uff5c>")) ||
    ["<pad>", "<mask>", "<2mass>", "[@BOS@]"].includes(text) ||
    (text.startsWith("<unused") && text.endsWith(">"));
}

/** Merges as llama.cpp stores them ("left right"; a space inside a part spelled U+0120), each checked. */
function mergeStrings(merges: unknown, known: ReadonlySet<string>, where: string): string[] {
  return (merges as unknown[]).map((m, i) => {
    const field = `tokenizer.json: model.merges[${i}]`;
    const pair = typeof m === "string" ? m.split(" ") : m;
    if (!Array.isArray(pair) || pair.length !== 2 || pair.some((p) => typeof p !== "string")) {
      throw new GgufError(where, "InvalidTokenizer", field, `${JSON.stringify(m)} is not a pair of tokens`);
    }
    const [a, b] = pair as string[];
    for (const part of [a, b, a + b]) {
      if (!known.has(part)) {
        throw new GgufError(
          where,
          "InvalidTokenizer",
          field,
          `${JSON.stringify(m)} names ${JSON.stringify(part)}, which model.vocab does not have`,
          { expected: "tokens of model.vocab", found: JSON.stringify(part) },
        );
      }
    }
    return `${a.replaceAll(" ", "\u0120")} ${b.replaceAll(" ", "\u0120")}`;
  });
}

function specialId(
  role: string,
  config: Record<string, unknown>,
  generation: Record<string, unknown> | undefined,
  added: AddedToken[],
  vocab: number,
): number | undefined {
  const entry = config[`${role}_token`];
  const content = typeof entry === "string" ? entry : (entry as { content?: unknown } | null)?.content;
  const hit = typeof content === "string" ? added.find((t) => t.content === content) : undefined;
  if (hit) return hit.id;
  // The converter's fallback is config.json's `<role>_token_id`; a folder's generation_config.json
  // carries the same ids (its eos may be a list: the first is the tokenizer's own).
  const raw = generation?.[`${role}_token_id`];
  const id = Array.isArray(raw) ? raw[0] : raw;
  return Number.isInteger(id) && id >= 0 && id < vocab ? id : undefined;
}

function chatTemplate(
  files: TokenizerFiles,
  config: Record<string, unknown>,
  where: string,
): string | undefined {
  if (files["chat_template.jinja"] !== undefined) return files["chat_template.jinja"];
  const t = config.chat_template;
  if (t === undefined || t === null) return undefined;
  if (typeof t === "string") return t;
  const named = Array.isArray(t) ? t.find((x) => x?.name === "default")?.template : undefined;
  if (typeof named === "string") return named;
  throw new GgufError(
    where,
    "InvalidTokenizer",
    "tokenizer_config.json: chat_template",
    'expected a string or a list holding a template named "default"',
  );
}

// ─── Reading ─────────────────────────────────────────────────────────────────────────────────────

/**
 * Whether a file's vocabulary is a BPE (it has merges) rather than ferry's byte vocabulary.
 *
 * @example
 * ```ts
 * import { hasBpeVocabulary } from "./gguf-tokenizer.ts";
 * import type { GgufFile } from "./gguf-container.ts";
 * declare const file: GgufFile;
 * hasBpeVocabulary(file.metadata); // true for a Qwen3 tokenizer
 * ```
 */
export function hasBpeVocabulary(md: ReadonlyMap<string, GgufValue>): boolean {
  const merges = md.get(Tokenizer.MERGES);
  return merges?.type === "array" && merges.value.length > 0;
}

/** A BPE vocabulary as its GGUF keys hold it, checked (`checkBpeVocabulary`). */
export interface BpeVocabulary {
  tokens: string[];
  /** tokenizer.json's `model.vocab`: the NORMAL tokens. */
  vocab: Record<string, number>;
  /** tokenizer.json's `added_tokens`: the CONTROL (special) and USER_DEFINED tokens. */
  added: Array<Record<string, unknown>>;
  merges: string[][];
  bos?: number;
  eos?: number;
  pad?: number;
  addBos: boolean;
  addEos: boolean;
  template?: string;
}

/**
 * Checks a BPE vocabulary's keys as llama.cpp loads them (model "gpt2", pre "qwen2", types, lengths,
 * unique tokens, merges of known tokens, ids in range) and gives them back as tokenizer.json's parts.
 *
 * @example
 * ```ts
 * import { checkBpeVocabulary } from "./gguf-tokenizer.ts";
 * import type { GgufFile } from "./gguf-container.ts";
 * declare const file: GgufFile;
 * const { tokens, merges } = checkBpeVocabulary(file.metadata, 151936, "m.gguf");
 * ```
 */
export function checkBpeVocabulary(
  md: ReadonlyMap<string, GgufValue>,
  vocab: number,
  where: string,
): BpeVocabulary {
  // Once per header (gguf.ts shares one header object between a load's two opens of a file): the check
  // of 151,936 tokens and as many merges took a third of a second.
  const known = checkedVocabularies.get(md);
  if (known?.vocab === vocab) return known.checked;
  const checked = checkVocabulary(md, vocab, where);
  checkedVocabularies.set(md, { vocab, checked });
  return checked;
}

const checkedVocabularies = new WeakMap<object, { vocab: number; checked: BpeVocabulary }>();

function checkVocabulary(
  md: ReadonlyMap<string, GgufValue>,
  vocab: number,
  where: string,
): BpeVocabulary {
  const str = (key: string) => {
    const v = md.get(key);
    if (v !== undefined && v.type !== "string") {
      throw new GgufError(where, "WrongType", key, `has type ${v.type}; expected string`);
    }
    return v?.value as string | undefined;
  };
  const array = (key: string, elem: string[]) => {
    const v = md.get(key);
    if (!v || v.type !== "array" || !elem.includes(v.elem)) {
      throw new GgufError(where, "WrongType", key, `missing or not an array of ${elem.join(" or ")}`);
    }
    return v.value;
  };
  if (str(Tokenizer.MODEL) !== "gpt2") {
    throw new GgufError(
      where,
      "Unsupported",
      Tokenizer.MODEL,
      `${JSON.stringify(str(Tokenizer.MODEL))}; expected "gpt2"`,
    );
  }
  const pre = str(Tokenizer.PRE);
  if (pre !== "qwen2") {
    throw new GgufError(
      where,
      "Unsupported",
      Tokenizer.PRE,
      `${JSON.stringify(pre)}; ferry rebuilds only "qwen2"`,
    );
  }
  const tokens = array(Tokenizer.LIST, ["string"]) as string[];
  if (tokens.length !== vocab) {
    throw new GgufError(
      where,
      "VocabMismatch",
      Tokenizer.LIST,
      `has ${tokens.length} tokens; token_embd.weight has ${vocab} rows`,
    );
  }
  const types = array(Tokenizer.TOKEN_TYPE, ["i32"]) as number[];
  if (types.length !== vocab) {
    throw new GgufError(
      where,
      "InvalidTokenizer",
      Tokenizer.TOKEN_TYPE,
      `has ${types.length} entries; expected ${vocab}`,
    );
  }
  // No prototype: a token spelled "__proto__" or "constructor" is a key like any other.
  const vocabMap: Record<string, number> = Object.create(null);
  const added: Array<Record<string, unknown>> = [];
  const seen = new Set<string>();
  tokens.forEach((t, i) => {
    if (seen.has(t)) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        Tokenizer.LIST,
        `token ${i} ${JSON.stringify(t)} appears twice`,
      );
    }
    seen.add(t);
    const type = types[i];
    if (type === TOKEN_TYPE.NORMAL) vocabMap[t] = i;
    else if (type === TOKEN_TYPE.CONTROL || type === TOKEN_TYPE.USER_DEFINED) {
      const special = type === TOKEN_TYPE.CONTROL;
      added.push({
        id: i,
        content: t,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special,
      });
    } else if (type !== TOKEN_TYPE.UNUSED) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        Tokenizer.TOKEN_TYPE,
        `token ${i} has type ${type}; a byte-level BPE has 1, 3, 4 or 5`,
      );
    }
  });
  const merges = (array(Tokenizer.MERGES, ["string"]) as string[]).map((m, i) => {
    const pair = m.split(" ");
    if (
      pair.length !== 2 || !Object.hasOwn(vocabMap, pair[0]) || !Object.hasOwn(vocabMap, pair[1]) ||
      !Object.hasOwn(vocabMap, pair[0] + pair[1])
    ) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        `${Tokenizer.MERGES}[${i}]`,
        `${JSON.stringify(m)} is not two tokens that merge into one`,
      );
    }
    return pair;
  });
  const id = (key: string) => {
    const v = md.get(key);
    if (v === undefined) return undefined;
    if (v.type !== "u32" || v.value >= vocab) {
      throw new GgufError(
        where,
        "InvalidTokenizer",
        key,
        `${v.type} ${String(v.value)}; expected a u32 below ${vocab}`,
      );
    }
    return v.value;
  };
  const flag = (key: string) => {
    const v = md.get(key);
    if (v !== undefined && v.type !== "bool") {
      throw new GgufError(where, "WrongType", key, `has type ${v.type}; expected bool`);
    }
    return v?.value === true;
  };
  return {
    tokens,
    vocab: vocabMap,
    added,
    merges,
    bos: id(Tokenizer.BOS_ID),
    eos: id(Tokenizer.EOS_ID),
    pad: id(Tokenizer.PAD_ID),
    addBos: flag(Tokenizer.ADD_BOS),
    addEos: flag(Tokenizer.ADD_EOS),
    template: str(Tokenizer.CHAT_TEMPLATE),
  };
}

/**
 * Rebuilds a BPE tokenizer's Hugging Face files from a file's keys (see the module doc), after
 * `checkBpeVocabulary`; generation_config.json is ferry's verbatim copy when the file has one.
 *
 * @example
 * ```ts
 * import { tokenizerFromMetadata } from "./gguf-tokenizer.ts";
 * import type { GgufFile } from "./gguf-container.ts";
 * declare const file: GgufFile;
 * const files = tokenizerFromMetadata(file.metadata, 151936, "m.gguf");
 * ```
 */
export function tokenizerFromMetadata(
  md: ReadonlyMap<string, GgufValue>,
  vocab: number,
  where: string,
): TokenizerFiles {
  const { tokens, vocab: vocabMap, added, merges, bos, eos, pad, addBos, addEos, template } =
    checkBpeVocabulary(md, vocab, where);
  const generationText = md.get(GENERATION_CONFIG_KEY);
  if (generationText !== undefined && generationText.type !== "string") {
    throw new GgufError(
      where,
      "WrongType",
      GENERATION_CONFIG_KEY,
      `has type ${generationText.type}; expected string`,
    );
  }
  const text = (i: number | undefined) => (i === undefined ? null : tokens[i]);
  const tokenizerJson = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: QWEN2_SPLIT_REGEX }, behavior: "Isolated", invert: false },
        BYTE_LEVEL,
      ],
    },
    post_processor: BYTE_LEVEL,
    decoder: BYTE_LEVEL,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: "",
      end_of_word_suffix: "",
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: vocabMap,
      merges,
    },
  };
  const config: Record<string, unknown> = {
    add_bos_token: addBos,
    add_eos_token: addEos,
    // With add_bos_token false a BOS id is only what config.json said; HF's Qwen3 config has none.
    bos_token: addBos ? text(bos) : null,
    eos_token: text(eos),
    pad_token: text(pad),
    unk_token: null,
    clean_up_tokenization_spaces: false,
    split_special_tokens: false,
    added_tokens_decoder: Object.fromEntries(added.map(({ id, ...rest }) => [String(id), rest])),
    ...(template === undefined ? {} : { chat_template: template }),
  };
  const generation = (generationText?.value as string | undefined) ?? JSON.stringify(
    { bos_token_id: bos, eos_token_id: eos, pad_token_id: pad },
    null,
    2,
  );
  return {
    "tokenizer.json": JSON.stringify(tokenizerJson),
    "tokenizer_config.json": JSON.stringify(config, null, 2),
    "generation_config.json": generation,
  };
}

const BYTE_LEVEL = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };

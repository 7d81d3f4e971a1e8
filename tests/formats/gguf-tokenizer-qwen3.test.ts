// The real Qwen3 tokenizer in GGUF, without llama.cpp: the keys ferry writes are the ones llama.cpp's
// converter writes for Qwen3, the tokenizer rebuilt from them tokenizes exactly as the original
// (@huggingface/tokenizers on both), a byte model's file is unchanged, and bad tokenizers are refused
// before anything is written. tests/llama/gguf-tokenizer-llama.test.ts runs llama.cpp on such files.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { existsSync, readFileSync } from "node:fs";
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import {
  encodeGguf,
  GENERATION_CONFIG_KEY,
  GGUF_DIGEST_NEEDLE,
  GgufError,
  ggufFormat,
  type GgufValue,
  isByteTokenizer,
  parseGguf,
  qwen3FromGguf,
  qwen3Metadata,
  qwen3Tensors,
  readGguf,
  readGgufTokenizer,
  TOKEN_TYPE,
  tokenizerFromMetadata,
  tokenizerMetadata,
  writeGguf,
} from "../../formats/gguf/gguf.ts";
import { BYTE_CHARS } from "../../model/tokenizer.ts";
import { sealDigest } from "../../formats/digest.ts";
import { byteTokenizerJson, jsonText } from "../../formats/huggingface/huggingface.ts";
import { tensorSource } from "../../model/tensor.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { qwen3VocabModel, tempDir, testTensors, tokenizerFilesOf } from "../helpers/gguf-fixtures.ts";

const files = tokenizerFilesOf();
const original = JSON.parse(files["tokenizer.json"]);
const originalConfig = JSON.parse(files["tokenizer_config.json"]!);
const GENERATION = JSON.stringify({ bos_token_id: 151643, eos_token_id: [151645, 151643], top_k: 20 });
const { config, tensors } = qwen3VocabModel();

const TEXTS = [
  "The jury further said in term-end presentments that the City Executive Committee deserves praise.",
  "def add(a, b):\n    return a + b  # sum\n\n\n",
  "   leading spaces,\ttabs\t\tand   runs  \n\n\n of newlines\r\n",
  "3.14159 and 1234567890, 1e-6",
  "日本語のテキスト、中文文本、한국어",
  "emoji 👍🏽 🇫🇷 👨‍👩‍👧",
  "café naïve e\u0301 x\u0301 a\u0308", // precomposed and combining marks
  "<|im_start|>user\nhi<|im_end|>\n<think>\nhmm\n</think>\n<|fim_prefix|>x<tool_call>",
];

let dir = "";
let path = "";
beforeAll(async () => {
  dir = await tempDir();
  path = join(dir, "qwen3.f16.gguf");
  // Through the registry, as an export does: streamed tensor sources and ExportInput's tokenizer.
  await ggufFormat.write(path, {
    config,
    tensors: tensors.map(tensorSource),
    source: "test",
    step: 0,
    name: "qwen3",
    tokenizer: { ...files, "generation_config.json": GENERATION },
  }, { dtype: "f16" });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const metadata = () => parseGguf(new Uint8Array(readFileSync(path)), path).metadata;
const value = (md: Map<string, GgufValue>, key: string) => md.get(key)?.value;

describe("the keys llama.cpp's converter writes for Qwen3", () => {
  test("gpt2 / qwen2, one token per embedding row, padding as [PAD{id}] UNUSED", () => {
    const md = metadata();
    expect(value(md, "tokenizer.ggml.model")).toBe("gpt2");
    expect(value(md, "tokenizer.ggml.pre")).toBe("qwen2");
    const tokens = value(md, "tokenizer.ggml.tokens") as string[];
    const types = value(md, "tokenizer.ggml.token_type") as number[];
    expect(tokens.length).toBe(151_936);
    expect(types.length).toBe(151_936);
    expect(tokens[0]).toBe("!");
    expect(tokens[original.model.vocab["Ġthe"]]).toBe("Ġthe");
    expect(tokens[151_669]).toBe("[PAD151669]");
    expect(tokens[151_935]).toBe("[PAD151935]");
    expect(types.slice(151_669).every((t) => t === TOKEN_TYPE.UNUSED)).toBe(true);
    expect(types.slice(0, 151_643).every((t) => t === TOKEN_TYPE.NORMAL)).toBe(true);
  });

  test("added tokens: special or <|...|> are CONTROL, the others USER_DEFINED", () => {
    const md = metadata();
    const tokens = value(md, "tokenizer.ggml.tokens") as string[];
    const types = value(md, "tokenizer.ggml.token_type") as number[];
    const typeOf = (text: string) => types[tokens.indexOf(text)];
    expect(typeOf("<|endoftext|>")).toBe(TOKEN_TYPE.CONTROL);
    expect(typeOf("<|im_start|>")).toBe(TOKEN_TYPE.CONTROL);
    expect(typeOf("<|fim_prefix|>")).toBe(TOKEN_TYPE.CONTROL); // not special in HF, but looks it
    expect(typeOf("<tool_call>")).toBe(TOKEN_TYPE.USER_DEFINED);
    expect(typeOf("<think>")).toBe(TOKEN_TYPE.USER_DEFINED);
    expect(typeOf("</think>")).toBe(TOKEN_TYPE.USER_DEFINED);
    for (const t of original.added_tokens) expect(tokens[t.id]).toBe(t.content);
  });

  test("merges as 'left right', the special ids, add_bos_token false, the template", () => {
    const md = metadata();
    const merges = value(md, "tokenizer.ggml.merges") as string[];
    expect(merges.length).toBe(original.model.merges.length);
    expect(merges[0]).toBe(original.model.merges[0].join(" "));
    expect(value(md, "tokenizer.ggml.eos_token_id")).toBe(151_645); // tokenizer_config's <|im_end|>
    expect(value(md, "tokenizer.ggml.padding_token_id")).toBe(151_643);
    expect(value(md, "tokenizer.ggml.bos_token_id")).toBe(151_643); // generation_config's (config.json's)
    expect(md.get("tokenizer.ggml.eos_token_id")?.type).toBe("u32");
    expect(value(md, "tokenizer.ggml.add_bos_token")).toBe(false);
    expect(value(md, "tokenizer.chat_template")).toBe(originalConfig.chat_template);
    expect(value(md, GENERATION_CONFIG_KEY)).toBe(GENERATION);
  });

  test("chat_template.jinja wins over tokenizer_config.json's; without generation_config no BOS id", async () => {
    const p = join(dir, "jinja.gguf");
    const template = "{% for m in messages %}{{ m.content }}{% endfor %}";
    await writeGguf(p, tensors, config, {
      type: "f32",
      tokenizer: { ...files, "chat_template.jinja": template },
    });
    const md = parseGguf(new Uint8Array(readFileSync(p)), p).metadata;
    expect(value(md, "tokenizer.chat_template")).toBe(template);
    expect(md.has("tokenizer.ggml.bos_token_id")).toBe(false);
    expect(md.has(GENERATION_CONFIG_KEY)).toBe(false);
    const back = await readGgufTokenizer(p);
    expect(JSON.parse(back!["tokenizer_config.json"]!).chat_template).toBe(template);
    expect(JSON.parse(back!["generation_config.json"]!)).toEqual({
      eos_token_id: 151645,
      pad_token_id: 151643,
    });
  });
});

describe("the tokenizer rebuilt from the keys", () => {
  let back: TokenizerFiles;
  beforeAll(async () => {
    back = (await readGgufTokenizer(path))!;
  });

  test("vocabulary, merges and pipeline equal the original tokenizer.json's", () => {
    const json = JSON.parse(back["tokenizer.json"]);
    expect(json.model.vocab).toEqual(original.model.vocab);
    expect(json.model.merges).toEqual(original.model.merges);
    for (const key of ["normalizer", "pre_tokenizer", "decoder", "post_processor"]) {
      expect(json[key]).toEqual(original[key]);
    }
    // The added tokens too, but for `special`: GGUF keeps llama.cpp's CONTROL, which `<|fim_prefix|>` and
    // the other `<|...|>` tokens HF marks non-special also get (gguf-py's "looks special").
    const unspecial = (ts: Array<Record<string, unknown>>) => ts.map(({ special: _, ...t }) => t);
    expect(unspecial(json.added_tokens)).toEqual(unspecial(original.added_tokens));
    const flipped = json.added_tokens.filter((t: { special: boolean }, i: number) =>
      t.special !== original.added_tokens[i].special
    );
    expect(flipped.map((t: { content: string }) => t.content)).toEqual([
      "<|fim_prefix|>",
      "<|fim_middle|>",
      "<|fim_suffix|>",
      "<|fim_pad|>",
      "<|repo_name|>",
      "<|file_sep|>",
    ]);
  });

  test("@huggingface/tokenizers gives the same ids and text with the rebuilt files as with the originals", () => {
    const a = new Tokenizer(original, originalConfig);
    const b = new Tokenizer(JSON.parse(back["tokenizer.json"]), JSON.parse(back["tokenizer_config.json"]!));
    for (const text of TEXTS) {
      const ids = a.encode(text).ids;
      expect(b.encode(text).ids).toEqual(ids);
      expect(b.decode(ids)).toBe(a.decode(ids));
    }
  });

  test("tokenizer_config.json has the specials and template; generation_config.json is verbatim", () => {
    const cfg = JSON.parse(back["tokenizer_config.json"]!);
    expect(cfg.eos_token).toBe("<|im_end|>");
    expect(cfg.pad_token).toBe("<|endoftext|>");
    expect(cfg.bos_token).toBe(null); // add_bos_token false: HF's Qwen3 config names none
    expect(cfg.add_bos_token).toBe(false);
    expect(cfg.chat_template).toBe(originalConfig.chat_template);
    expect(cfg.added_tokens_decoder["151644"]).toMatchObject({ content: "<|im_start|>", special: true });
    expect(back["generation_config.json"]).toBe(GENERATION);
  });

  test("read() hands the tokenizer out with the weights; a byte model's file has none", async () => {
    const r = await ggufFormat.read(path);
    expect(r.tokenizer?.["tokenizer.json"]).toBe(back["tokenizer.json"]);
    expect(r.config.vocab_size).toBe(151_936);
    const byte = join(dir, "byte.gguf");
    const small = testTensors(3, true);
    await writeGguf(byte, small.tensors, small.config, { type: "f32" });
    expect(await readGgufTokenizer(byte)).toBeUndefined();
    expect((await ggufFormat.read(byte)).tokenizer).toBeUndefined();
  });
});

test("a byte model's GGUF is bit for bit what the in-memory encoder lays out (vocabulary included)", async () => {
  const p = join(dir, "byte-same.gguf");
  const { config: c, tensors: ts } = testTensors(9, false);
  await writeGguf(p, ts, c, { type: "q8_0" });
  const md = qwen3Metadata(c, "Q8_0");
  md.push(["ferry.sha256", { type: "string", value: "0".repeat(64) }]);
  const want = sealDigest(
    new Uint8Array(Buffer.concat(encodeGguf(md, qwen3Tensors(ts, c, "Q8_0")))),
    GGUF_DIGEST_NEEDLE,
  );
  expect(Buffer.compare(readFileSync(p), want)).toBe(0);
  expect((await readGguf(p)).config).toEqual(c);
});

test("ferry's own byte tokenizer, handed in as files (a byte model's Hugging Face folder), is the byte vocabulary", async () => {
  const { config: c, tensors: ts } = testTensors(9, false);
  const plain = join(dir, "byte-plain.gguf"), given = join(dir, "byte-given.gguf");
  await writeGguf(plain, ts, c, { type: "f16" });
  const byteFiles = { "tokenizer.json": jsonText(byteTokenizerJson()), "tokenizer_config.json": "{}" };
  expect(isByteTokenizer(byteFiles)).toBe(true);
  expect(isByteTokenizer(files)).toBe(false);
  // Its vocabulary and added tokens are not enough: any other difference makes it a tokenizer of its own.
  const otherDecoder = { ...byteTokenizerJson(), decoder: { type: "ByteLevel", add_prefix_space: true } };
  expect(isByteTokenizer({ "tokenizer.json": jsonText(otherDecoder) })).toBe(false);
  await writeGguf(given, ts, c, { type: "f16", tokenizer: byteFiles });
  expect(Buffer.compare(readFileSync(given), readFileSync(plain))).toBe(0);
});

describe("bad tokenizers are refused before anything is written", () => {
  const refused = async (
    tokenizer: TokenizerFiles,
    field: RegExp,
    message: RegExp,
    model = { config, tensors },
  ) => {
    const out = await tempDir();
    try {
      const p = join(out, "bad.gguf");
      const err = await writeGguf(p, model.tensors, model.config, { type: "f32", tokenizer }).catch((e) => e);
      expect(err).toBeInstanceOf(GgufError);
      expect((err as GgufError).path).toBe(p);
      expect((err as GgufError).field).toMatch(field);
      expect((err as GgufError).message).toMatch(message);
      expect(existsSync(p)).toBe(false);
      expect(await readdir(out)).toEqual([]); // no temporary either
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  };
  // Edits of the original text (a JSON round trip of 11 MB per case would cost seconds).
  const edited = (from: string, to: string): TokenizerFiles => {
    expect(files["tokenizer.json"].includes(from)).toBe(true);
    return { ...files, "tokenizer.json": files["tokenizer.json"].replace(from, to) };
  };
  const FIRST_MERGE = '"merges": [\n      [\n        "Ġ",\n        "Ġ"\n      ]';

  test("a merge naming a token the vocabulary lacks", async () => {
    await refused(
      edited(FIRST_MERGE, FIRST_MERGE.replace('"Ġ",', '"☃",')),
      /^tokenizer\.json: model\.merges\[0\]$/,
      /names "☃", which model\.vocab does not have/,
    );
  });

  test("a merge whose result the vocabulary lacks", async () => {
    await refused(
      edited(FIRST_MERGE, FIRST_MERGE.replaceAll('"Ġ"', '"Ġthe"')),
      /model\.merges\[0\]/,
      /names "ĠtheĠthe", which model\.vocab/,
    );
  });

  test("a tokenizer with more ids than the embedding has rows", async () => {
    const small = testTensors(4, true, { vocab_size: 151_600 });
    await refused(
      files,
      /^tokenizer\.json: (model\.vocab|added_tokens)/,
      /past the model's 151600 embedding rows/,
      small,
    );
    await refused(
      edited('"id": 151668', '"id": 151936'),
      /^tokenizer\.json: added_tokens\[25\]$/,
      /id 151936 is past the model's 151936/,
    );
  });

  test("a token string twice", async () => {
    await refused(
      edited('"content": "<|im_start|>"', '"content": "<|endoftext|>"'),
      /added_tokens\[1\]/,
      /has ids 151643 and 151644/,
    );
  });

  test("a tokenizer that is not Qwen2's byte-level BPE, and files that are not JSON", async () => {
    await refused(edited('"type": "BPE"', '"type": "Unigram"'), /model\.type/, /expected "BPE"/);
    await refused(
      edited("(?i:'s|", "(?i:'S|"),
      /pre_tokenizer/,
      /Qwen2's Split regex/,
    );
    await refused({ ...files, "tokenizer.json": "{" }, /^tokenizer\.json$/, /is not JSON/);
    await refused({ ...files, "tokenizer_config.json": "[]" }, /^tokenizer_config\.json$/, /JSON object/);
  });
});

describe("a BPE vocabulary the reader refuses (a tiny byte-level BPE, 264 rows)", () => {
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false };
  const special = (id: number, content: string) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const tiny = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: [special(258, "<|endoftext|>"), special(259, "<|im_end|>")],
    normalizer: { type: "NFC" },
    pre_tokenizer: original.pre_tokenizer,
    post_processor: byteLevel,
    decoder: byteLevel,
    model: {
      ...original.model,
      vocab: Object.fromEntries([...BYTE_CHARS.map((c, i) => [c, i]), ["ĠĠ", 256], ["Ġt", 257]]),
      merges: [["Ġ", "Ġ"], ["Ġ", "t"]],
    },
  };
  const tinyFiles: TokenizerFiles = {
    "tokenizer.json": JSON.stringify(tiny),
    "tokenizer_config.json": JSON.stringify({ eos_token: "<|im_end|>", pad_token: "<|endoftext|>" }),
  };
  const small = testTensors(21, true, { vocab_size: 264 });
  const kv = tokenizerMetadata(tinyFiles, 264, "tiny.gguf");
  const read = (edit: (kv: Array<[string, GgufValue]>) => void) => {
    const vocab = structuredClone(kv);
    edit(vocab);
    const md = qwen3Metadata(small.config, "F32", "ferry", undefined, vocab);
    const bytes = new Uint8Array(
      Buffer.concat(encodeGguf(md, qwen3Tensors(small.tensors, small.config, "F32"))),
    );
    return () => qwen3FromGguf(parseGguf(bytes, "tiny.gguf"), "tiny.gguf");
  };
  const set = (key: string, v: GgufValue) => (kv: Array<[string, GgufValue]>) => {
    const at = kv.findIndex(([k]) => k === key);
    if (at >= 0) kv[at] = [key, v];
    else kv.push([key, v]);
  };
  const tokens = kv.find(([k]) => k === "tokenizer.ggml.tokens")![1].value as string[];
  const types = kv.find(([k]) => k === "tokenizer.ggml.token_type")![1].value as number[];
  const refused = (fn: () => unknown, field: string, message: RegExp) => {
    const err = (() => {
      try {
        fn();
      } catch (e) {
        return e as GgufError;
      }
    })();
    expect(err).toBeInstanceOf(GgufError);
    expect(err!.field).toBe(field);
    expect(err!.message).toMatch(message);
  };

  test("as written, it reads, and its rebuilt files tokenize as the originals", () => {
    expect(read(() => {})().config.vocab_size).toBe(264);
    expect(tokens.slice(256)).toEqual([
      "ĠĠ",
      "Ġt",
      "<|endoftext|>",
      "<|im_end|>",
      ...[260, 261, 262, 263].map((i) => `[PAD${i}]`),
    ]);
    const md = new Map(qwen3Metadata(small.config, "F32", "ferry", undefined, kv));
    const back = tokenizerFromMetadata(md, 264, "tiny.gguf");
    const a = new Tokenizer(tiny, {}), b = new Tokenizer(JSON.parse(back["tokenizer.json"]), {});
    for (const text of ["  the  test<|im_end|>", "tt t\n", "é 日本"]) {
      expect(b.encode(text).ids).toEqual(a.encode(text).ids);
    }
    const proto = structuredClone(kv);
    const named = tokens.map((t, i) => (i === 260 ? "__proto__" : t));
    set("tokenizer.ggml.tokens", { type: "array", elem: "string", value: named })(proto);
    set("tokenizer.ggml.token_type", {
      type: "array",
      elem: "i32",
      value: types.map((t, i) => (i === 260 ? 1 : t)),
    })(
      proto,
    );
    const withProto = tokenizerFromMetadata(new Map(proto), 264, "tiny.gguf");
    expect(Object.hasOwn(JSON.parse(withProto["tokenizer.json"]).model.vocab, "__proto__")).toBe(true);
  });

  test("a token twice, a count other than the rows, types of another length or kind", () => {
    const dup = [...tokens];
    dup[257] = "ĠĠ";
    refused(
      read(set("tokenizer.ggml.tokens", { type: "array", elem: "string", value: dup })),
      "tokenizer.ggml.tokens",
      /token 257 "ĠĠ" appears twice/,
    );
    refused(
      read(set("tokenizer.ggml.tokens", { type: "array", elem: "string", value: tokens.slice(0, 263) })),
      "tokenizer.ggml.tokens",
      /has 263 tokens; token_embd\.weight has 264 rows/,
    );
    refused(
      read(set("tokenizer.ggml.token_type", { type: "array", elem: "i32", value: types.slice(1) })),
      "tokenizer.ggml.token_type",
      /263 entries; expected 264/,
    );
    refused(
      read(
        set("tokenizer.ggml.token_type", {
          type: "array",
          elem: "i32",
          value: types.map((t, i) => (i === 5 ? 6 : t)),
        }),
      ),
      "tokenizer.ggml.token_type",
      /token 5 has type 6/,
    );
  });

  test("a merge of unknown tokens, another pre-tokenizer, an id out of range or of another type", () => {
    refused(
      read(set("tokenizer.ggml.merges", { type: "array", elem: "string", value: ["Ġ Ġ", "Ġ q"] })),
      "tokenizer.ggml.merges[1]",
      /"Ġ q" is not two tokens that merge into one/,
    );
    refused(
      read(set("tokenizer.ggml.pre", { type: "string", value: "llama-bpe" })),
      "tokenizer.ggml.pre",
      /rebuilds only "qwen2"/,
    );
    refused(
      read(set("tokenizer.ggml.eos_token_id", { type: "u32", value: 264 })),
      "tokenizer.ggml.eos_token_id",
      /below 264/,
    );
    refused(
      read(set("tokenizer.ggml.eos_token_id", { type: "i32", value: 259 })),
      "tokenizer.ggml.eos_token_id",
      /i32 259/,
    );
    refused(
      read(set("tokenizer.ggml.add_bos_token", { type: "u8", value: 0 })),
      "tokenizer.ggml.add_bos_token",
      /expected bool/,
    );
    // Token strings are keys, never properties of Object.prototype.
    refused(
      read(set("tokenizer.ggml.merges", { type: "array", elem: "string", value: ["constructor toString"] })),
      "tokenizer.ggml.merges[0]",
      /not two tokens/,
    );
  });
});

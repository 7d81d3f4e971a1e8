// The Hugging Face directory: what export writes, the bit-exact round trip, sharded and narrowed
// import, every refused config field and tensor, and tokenizer.json against @huggingface/tokenizers.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import {
  configFromHfJson,
  exportHuggingFace,
  type HfDtype,
  hfFormat,
  HuggingFaceError,
  type HuggingFaceErrorCode,
  importHuggingFace,
} from "../../formats/huggingface/huggingface.ts";
import { FormatError } from "../../model/error.ts";
import { readSafetensors, writeSafetensors } from "../../formats/safetensors/safetensors.ts";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "../../quantize/float16.ts";
import { type ModelConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { BYTE_CHARS, decode, encode } from "../../model/tokenizer.ts";
import { loadBrown } from "../../model/corpus.ts";
import type { Tensor } from "../../model/tensor.ts";

const root = await mkdtemp(join(tmpdir(), "ferry-hf-"));
afterAll(() => rm(root, { recursive: true, force: true }));
let n = 0;
const fresh = () => join(root, `d${n++}`);
const bits = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);
const readJson = async (path: string) => JSON.parse(await readFile(path, "utf8"));

const untied = PRESETS.tiny;
const tied: ModelConfig = { ...PRESETS.tiny, tie_word_embeddings: true };

function logits(cfg: ModelConfig, tensors: Tensor[]): Float32Array {
  const model = buildModel(cfg, tensors);
  return forward(model, createCache(model), encode("The jury said", { bos: true }));
}

describe("export", () => {
  test("writes the five files; config.json has every Qwen3 field with ferry's values", async () => {
    const dir = fresh();
    const files = await exportHuggingFace(dir, initParams(untied, 1), untied, { dtype: "bf16" });
    expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual([
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    const cfg = await readJson(join(dir, "config.json"));
    expect(cfg).toEqual({
      architectures: ["Qwen3ForCausalLM"],
      attention_bias: false,
      attention_dropout: 0,
      bos_token_id: 256,
      eos_token_id: 257,
      head_dim: 6,
      hidden_act: "silu",
      hidden_size: 16,
      initializer_range: 0.02,
      intermediate_size: 40,
      max_position_embeddings: 64,
      max_window_layers: 2,
      model_type: "qwen3",
      num_attention_heads: 4,
      num_hidden_layers: 2,
      num_key_value_heads: 2,
      rms_norm_eps: 1e-6,
      rope_scaling: null,
      rope_theta: 10000,
      sliding_window: null,
      tie_word_embeddings: false,
      torch_dtype: "bfloat16",
      use_cache: true,
      use_sliding_window: false,
      vocab_size: 258,
    });
    expect(Object.keys(cfg)).toEqual(Object.keys(cfg).sort());
    expect(await readJson(join(dir, "generation_config.json"))).toEqual({
      bos_token_id: 256,
      eos_token_id: 257,
    });
    const tc = await readJson(join(dir, "tokenizer_config.json"));
    expect(tc).toMatchObject({
      bos_token: "<|startoftext|>",
      eos_token: "<|endoftext|>",
      clean_up_tokenization_spaces: false,
    });
    const { metadata, tensors } = await readSafetensors(join(dir, "model.safetensors"));
    expect(metadata).toEqual({ format: "pt", "ferry.sha256": expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(new Set(tensors.map((t) => t.dtype))).toEqual(new Set(["BF16"] as const));
  });

  test("a tied model stores model.embed_tokens.weight only, no lm_head", async () => {
    const dir = fresh();
    await exportHuggingFace(dir, initParams(tied, 2), tied);
    const names = (await readSafetensors(join(dir, "model.safetensors"))).tensors.map((t) => t.name);
    expect(names).toContain("model.embed_tokens.weight");
    expect(names).not.toContain("lm_head.weight");
    expect((await readJson(join(dir, "config.json"))).tie_word_embeddings).toBe(true);
  });

  test("tokenizer.json: the 256 byte characters as the vocab in byte order, empty merges, BOS/EOS added as 256/257", async () => {
    const dir = fresh();
    await exportHuggingFace(dir, initParams(untied, 1), untied);
    const text = await readFile(join(dir, "tokenizer.json"), "utf8");
    const tj = JSON.parse(text);
    const vocabText = text.slice(text.indexOf('"vocab"'), text.indexOf('"merges"'));
    const keysInFileOrder = [...vocabText.matchAll(/^\s+("(?:[^"\\]|\\.)*"): (\d+)/gm)].map((
      m,
    ) => [JSON.parse(m[1]), +m[2]]);
    expect(keysInFileOrder).toEqual(BYTE_CHARS.map((c, b) => [c, b]));
    expect(BYTE_CHARS[0x20]).toBe("Ġ");
    expect(BYTE_CHARS[0x0a]).toBe("Ċ");
    expect(BYTE_CHARS[0x41]).toBe("A");
    expect(new Set(BYTE_CHARS).size).toBe(256);
    expect(tj.model.merges).toEqual([]);
    expect(tj.added_tokens.map((t: { id: number; content: string }) => [t.id, t.content])).toEqual([[
      256,
      "<|startoftext|>",
    ], [257, "<|endoftext|>"]]);
  });

  test("no tokenizer files for a vocab that is not the byte tokenizer's", async () => {
    const dir = fresh();
    const cfg = { ...tied, vocab_size: 300 };
    const files = await exportHuggingFace(dir, initParams(cfg, 1), cfg);
    expect(files.some((f) => f.endsWith("tokenizer.json"))).toBe(false);
    expect((await readJson(join(dir, "config.json"))).bos_token_id).toBeUndefined();
  });

  test("refuses tensors that do not match the config, by name", async () => {
    const t = initParams(untied, 1);
    await expect(exportHuggingFace(fresh(), t.slice(1), untied)).rejects.toMatchObject({
      code: "MissingTensor",
      field: "model.embed_tokens.weight",
    });
    await expect(exportHuggingFace(fresh(), t, tied)).rejects.toMatchObject({
      code: "TiedMismatch",
      field: "lm_head.weight",
    });
    const extra = [...t, { name: "model.extra.weight", dims: [1], data: new Float32Array(1) }];
    await expect(exportHuggingFace(fresh(), extra, untied)).rejects.toMatchObject({
      code: "UnknownTensor",
      field: "model.extra.weight",
    });
    await expect(exportHuggingFace(fresh(), t, untied, { dtype: "f64" as HfDtype })).rejects.toMatchObject({
      code: "UnsupportedDtype",
    });
  });
});

describe("round trip ferry → HF directory → ferry", () => {
  for (const [label, cfg] of [["untied", untied], ["tied", tied]] as const) {
    test(`f32 is bit-exact and the logits identical (${label})`, async () => {
      const dir = fresh();
      const src = initParams(cfg, 11);
      await exportHuggingFace(dir, src, cfg, { dtype: "f32" });
      const back = await importHuggingFace(dir);
      expect(back.config).toEqual(cfg);
      expect(back.dtype).toBe("F32");
      expect(back.bosTokenId).toBe(256);
      expect(back.tensors.map((t) => t.name)).toEqual(src.map((t) => t.name));
      back.tensors.forEach((t, i) => {
        expect(t.dims).toEqual(src[i].dims);
        expect(bits(t.data)).toEqual(bits(src[i].data));
      });
      expect(bits(logits(back.config, back.tensors))).toEqual(bits(logits(cfg, src)));
    });
  }

  test("f16 and bf16 import as exactly the narrowed weights", async () => {
    const src = initParams(untied, 12);
    for (
      const [dtype, narrow] of [["f16", (x: Float32Array) => f16ToF32(f32ToF16(x))], [
        "bf16",
        (x: Float32Array) => bf16ToF32(f32ToBf16(x)),
      ]] as const
    ) {
      const dir = fresh();
      await exportHuggingFace(dir, src, untied, { dtype });
      const back = await importHuggingFace(dir);
      expect(back.dtype).toBe(dtype.toUpperCase() as "F16");
      expect(back.tensors.length).toBe(src.length);
      back.tensors.forEach((t, i) => expect(bits(t.data)).toEqual(bits(narrow(src[i].data))));
    }
  });

  test("sharded input (index + several shards) imports the same tensors", async () => {
    const dir = fresh();
    const src = initParams(tied, 13);
    await exportHuggingFace(dir, src, tied, { dtype: "bf16" });
    const whole = (await readSafetensors(join(dir, "model.safetensors"))).tensors;
    await rm(join(dir, "model.safetensors"));
    const weightMap: Record<string, string> = {};
    for (let s = 0; s < 3; s++) {
      const name = `model-0000${s + 1}-of-00003.safetensors`;
      const part = whole.filter((_, i) => i % 3 === s);
      await writeSafetensors(join(dir, name), part, { dtype: "BF16" });
      for (const t of part) weightMap[t.name] = name;
    }
    await writeFile(
      join(dir, "model.safetensors.index.json"),
      JSON.stringify({ metadata: { total_size: 1 }, weight_map: weightMap }),
    );
    const back = await importHuggingFace(dir);
    expect(back.tensors.map((t) => t.name)).toEqual(src.map((t) => t.name));
    expect(back.tensors.length).toBe(src.length);
    back.tensors.forEach((t, i) => expect(bits(t.data)).toEqual(bits(bf16ToF32(f32ToBf16(src[i].data)))));
  });

  test("any vocab imports (a real Qwen3 ties embeddings over 151936 ids; here 1000)", async () => {
    const dir = fresh();
    const cfg = { ...tied, vocab_size: 1000 };
    const src = initParams(cfg, 14);
    await exportHuggingFace(dir, src, cfg);
    const back = await importHuggingFace(dir);
    expect(back.config.vocab_size).toBe(1000);
    expect(back.bosTokenId).toBeNull();
    expect(bits(back.tensors[0].data)).toEqual(bits(src[0].data));
  });
});

describe("import refuses", () => {
  /** A valid Qwen3 config.json as transformers writes it (Qwen3-0.6B's fields, tiny shape). */
  const base = (): Record<string, unknown> => ({
    architectures: ["Qwen3ForCausalLM"],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: 151643,
    eos_token_id: 151645,
    head_dim: 6,
    hidden_act: "silu",
    hidden_size: 16,
    initializer_range: 0.02,
    intermediate_size: 40,
    max_position_embeddings: 64,
    max_window_layers: 28,
    model_type: "qwen3",
    num_attention_heads: 4,
    num_hidden_layers: 2,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-06,
    rope_scaling: null,
    rope_theta: 1000000,
    sliding_window: null,
    tie_word_embeddings: true,
    torch_dtype: "bfloat16",
    transformers_version: "4.51.0",
    use_cache: true,
    use_sliding_window: false,
    vocab_size: 151936,
  });
  const check = (cfg: Record<string, unknown> | string) =>
    configFromHfJson(typeof cfg === "string" ? cfg : JSON.stringify(cfg), "m/config.json");

  test("accepts the real Qwen3-0.6B field set, v5's rope_parameters and dtype, and eos lists", () => {
    expect(check(base()).config).toMatchObject({
      vocab_size: 151936,
      rope_theta: 1000000,
      tie_word_embeddings: true,
    });
    const v5 = {
      ...base(),
      rope_parameters: { rope_type: "default", rope_theta: 5000 },
      dtype: "bfloat16",
      eos_token_id: [1, 2],
    };
    delete (v5 as Record<string, unknown>).rope_theta;
    delete (v5 as Record<string, unknown>).torch_dtype;
    const r = check(v5);
    expect(r.config.rope_theta).toBe(5000);
    expect(r.eosTokenId).toEqual([1, 2]);
  });

  const cases: Array<[string, Record<string, unknown>, HuggingFaceErrorCode, string]> = [
    ["rope scaling", { rope_scaling: { rope_type: "yarn", factor: 4 } }, "UnsupportedField", "rope_scaling"],
    [
      "non-default rope_parameters",
      { rope_parameters: { rope_type: "linear", rope_theta: 1e6, factor: 2 } },
      "UnsupportedField",
      "rope_parameters",
    ],
    [
      "sliding window on",
      { use_sliding_window: true, sliding_window: 4096 },
      "UnsupportedField",
      "use_sliding_window",
    ],
    [
      "sliding layer types",
      { layer_types: ["full_attention", "sliding_attention"] },
      "UnsupportedField",
      "layer_types",
    ],
    ["attention biases", { attention_bias: true }, "UnsupportedField", "attention_bias"],
    ["MLP biases", { mlp_bias: true }, "UnsupportedField", "mlp_bias"],
    ["another activation", { hidden_act: "gelu" }, "UnsupportedField", "hidden_act"],
    ["mixture of experts", { num_experts: 128 }, "UnsupportedField", "num_experts"],
    [
      "a quantized checkpoint",
      { quantization_config: { quant_method: "gptq" } },
      "UnsupportedField",
      "quantization_config",
    ],
    ["another model type", { model_type: "llama" }, "UnsupportedField", "model_type"],
    [
      "another architecture",
      { architectures: ["Qwen3ForSequenceClassification"] },
      "UnsupportedField",
      "architectures",
    ],
    ["an unknown field", { logits_soft_cap: 30 }, "UnknownField", "logits_soft_cap"],
    ["a missing head_dim", { head_dim: undefined }, "MissingField", "head_dim"],
    ["a missing rope_theta", { rope_theta: undefined }, "MissingField", "rope_theta"],
    ["an integer written 16.0", { hidden_size: "16.0" }, "InvalidValue", "hidden_size"],
    ["a string where a number belongs", { rms_norm_eps: "1e-6" }, "InvalidValue", "rms_norm_eps"],
    ["an unknown torch_dtype", { torch_dtype: "float8" }, "InvalidValue", "torch_dtype"],
    ["kv heads that do not divide heads", { num_key_value_heads: 3 }, "InvalidValue", "num_key_value_heads"],
  ];
  for (const [what, change, code, field] of cases) {
    test(`${what}: ${code} naming ${field}`, () => {
      const cfg = { ...base(), ...change };
      let text = JSON.stringify(cfg);
      if (change.hidden_size === "16.0") text = text.replace('"hidden_size":"16.0"', '"hidden_size":16.0');
      let caught: unknown;
      try {
        check(text);
      } catch (e) {
        caught = e;
      }
      expect(caught).toBeInstanceOf(HuggingFaceError);
      expect(caught).toMatchObject({ code, field });
      expect((caught as Error).message).toStartWith(`m/config.json: ${field}: `);
    });
  }

  test("a duplicate key in config.json (JSON.parse would keep the last)", () => {
    expect(() =>
      check(JSON.stringify(base()).replace('"hidden_act":"silu"', '"hidden_act":"silu","hidden_act":"gelu"'))
    )
      .toThrow(expect.objectContaining({ code: "DuplicateKey" }));
  });

  async function dirWith(cfg: ModelConfig, edit: (t: Tensor[]) => Tensor[]) {
    const dir = fresh();
    await exportHuggingFace(dir, initParams(cfg, 3), cfg);
    const { tensors } = await readSafetensors(join(dir, "model.safetensors"));
    await writeSafetensors(
      join(dir, "model.safetensors"),
      edit(tensors.map(({ name, dims, data }) => ({ name, dims, data }))),
    );
    return dir;
  }

  test("a bias tensor: UnknownTensor naming it", async () => {
    const dir = await dirWith(
      untied,
      (t) => [...t, { name: "model.layers.0.self_attn.q_proj.bias", dims: [24], data: new Float32Array(24) }],
    );
    await expect(importHuggingFace(dir)).rejects.toMatchObject({
      code: "UnknownTensor",
      field: "model.layers.0.self_attn.q_proj.bias",
    });
  });

  test("a missing tensor and a wrong shape", async () => {
    const missing = await dirWith(untied, (t) => t.filter((x) => x.name !== "model.norm.weight"));
    await expect(importHuggingFace(missing)).rejects.toMatchObject({
      code: "MissingTensor",
      field: "model.norm.weight",
    });
    const wrong = await dirWith(
      untied,
      (t) => t.map((x) => x.name === "model.norm.weight" ? { ...x, dims: [2, 8] } : x),
    );
    await expect(importHuggingFace(wrong)).rejects.toMatchObject({
      code: "ShapeMismatch",
      field: "model.norm.weight",
    });
  });

  test("a tied model's lm_head: dropped when an exact copy, refused when it differs", async () => {
    const copy = await dirWith(
      tied,
      (t) => [...t, { ...t.find((x) => x.name === "model.embed_tokens.weight")!, name: "lm_head.weight" }],
    );
    expect((await importHuggingFace(copy)).tensors.some((t) => t.name === "lm_head.weight")).toBe(false);
    const other = await dirWith(tied, (t) => {
      const e = t.find((x) => x.name === "model.embed_tokens.weight")!;
      const data = e.data.slice();
      data[5] += 1;
      return [...t, { name: "lm_head.weight", dims: e.dims, data }];
    });
    await expect(importHuggingFace(other)).rejects.toMatchObject({
      code: "TiedMismatch",
      field: "lm_head.weight",
    });
  });

  test("a stored dtype other than f32/f16/bf16", async () => {
    const dir = fresh();
    await exportHuggingFace(dir, initParams(untied, 3), untied);
    const path = join(dir, "model.safetensors");
    const { tensors } = await readSafetensors(path);
    // Rewrite one tensor as F64 by hand: ferry writes only float types a model is stored in.
    const header: Record<string, unknown> = {};
    const chunks: Uint8Array[] = [];
    let off = 0;
    for (const t of tensors) {
      const bytes = t.name === "model.norm.weight"
        ? new Uint8Array(Float64Array.from(t.data).buffer)
        : new Uint8Array(t.data.buffer);
      header[t.name] = {
        dtype: t.name === "model.norm.weight" ? "F64" : "F32",
        shape: t.dims,
        data_offsets: [off, off += bytes.length],
      };
      chunks.push(bytes);
    }
    const h = new TextEncoder().encode(JSON.stringify(header));
    const len = new Uint8Array(8);
    new DataView(len.buffer).setBigUint64(0, BigInt(h.length), true);
    await writeFile(path, Buffer.concat([len, h, ...chunks]));
    await expect(importHuggingFace(dir)).rejects.toMatchObject({
      code: "UnsupportedDtype",
      field: "model.norm.weight",
    });
  });

  test("a config.json that starts with a byte-order mark, by import and readTokenizer alike", async () => {
    const dir = fresh();
    await exportHuggingFace(dir, initParams(untied, 3), untied);
    const path = join(dir, "config.json");
    await writeFile(path, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), await readFile(path)]));
    const refusal = { path, code: "InvalidJson", field: "config", found: "a byte-order mark (EF BB BF)" };
    await expect(importHuggingFace(dir)).rejects.toMatchObject(refusal);
    await expect(hfFormat.readTokenizer!(dir)).rejects.toMatchObject(refusal);
  });

  test("no config.json, no weights, or both a single file and an index", async () => {
    const empty = fresh();
    await mkdir(empty);
    await expect(importHuggingFace(empty)).rejects.toMatchObject({
      code: "MissingFile",
      field: "config.json",
    });
    const dir = fresh();
    await exportHuggingFace(dir, initParams(untied, 3), untied);
    await writeFile(join(dir, "model.safetensors.index.json"), '{"weight_map":{}}');
    await expect(importHuggingFace(dir)).rejects.toMatchObject({ code: "AmbiguousWeights" });
    await rm(join(dir, "model.safetensors.index.json"));
    await rm(join(dir, "model.safetensors"));
    await expect(importHuggingFace(dir)).rejects.toMatchObject({
      code: "MissingFile",
      field: "model.safetensors",
    });
  });
});

describe("ferry's byte tokenizer is recognised by its content, not its shape", () => {
  const readers = (dir: string): Record<string, () => Promise<unknown>> => ({
    importHuggingFace: () => importHuggingFace(dir),
    "hfFormat.readTokenizer": () => hfFormat.readTokenizer!(dir),
  });

  test("round trip: ferry's own byte tokenizer.json reads as a byte model, and exports as the same file", async () => {
    const first = fresh(), second = fresh();
    await exportHuggingFace(first, initParams(untied, 1), untied);
    const back = await importHuggingFace(first);
    expect(back.tokenizer).toBeUndefined();
    expect(await hfFormat.readTokenizer!(first)).toBeUndefined();
    await exportHuggingFace(second, back.tensors, back.config);
    const [a, b] = [
      await readFile(join(first, "tokenizer.json")),
      await readFile(join(second, "tokenizer.json")),
    ];
    expect(b.equals(a)).toBe(true);
    // Key order and whitespace aside: the same tokenizer written compactly is still ferry's.
    await writeFile(join(second, "tokenizer.json"), JSON.stringify(JSON.parse(a.toString("utf8"))));
    expect((await importHuggingFace(second)).tokenizer).toBeUndefined();
  });

  // Each keeps the byte tokenizer's form (256 vocab entries, no merges, ids 256 and 257 added) and
  // changes one vocab entry's id as written in the file ferry exported.
  const forged: [string, (vocab: string) => string, string, string, string][] = [
    ["m maps to 258", (t) => t.replace('"m": 109,', '"m": 258,'), "model.vocab.m", "109", "258"],
    ["an id of 1.5", (t) => t.replace('"a": 97,', '"a": 1.5,'), "model.vocab.a", "97", "1.5"],
    [
      "a and b swapped",
      (t) => t.replace('"a": 97,', '"a": 98,').replace('"b": 98,', '"b": 97,'),
      "model.vocab.a",
      "97",
      "98",
    ],
  ];
  for (const [what, edit, field, expected, found] of forged) {
    test(`${what}: refused naming tokenizer.json and ${field}, not dropped`, async () => {
      const dir = fresh();
      await exportHuggingFace(dir, initParams(untied, 1), untied);
      const path = join(dir, "tokenizer.json");
      const text = await readFile(path, "utf8");
      const bad = edit(text);
      expect(bad).not.toBe(text);
      await writeFile(path, bad);
      for (const [name, read] of Object.entries(readers(dir))) {
        const e = await read().then(() => `${name} accepted it`, (e) => e);
        expect(e).toBeInstanceOf(FormatError);
        expect([name, e]).toEqual([name, expect.objectContaining({ path, field, expected, found })]);
        expect(e.message).toStartWith(`${path}: ${field}: expected ${expected}, found ${found}: `);
      }
    });
  }
});

// Set up at module level: bun registers the tests of a describe block synchronously.
const dir = fresh();
await exportHuggingFace(dir, initParams(untied, 1), untied);
const hf = new Tokenizer(
  await readJson(join(dir, "tokenizer.json")),
  await readJson(join(dir, "tokenizer_config.json")),
);
const heldOut = new TextDecoder().decode((await loadBrown()).heldOut);
describe("tokenizer.json under @huggingface/tokenizers", () => {
  const multilingual = [
    "日本語のテキスト、中文文本，한국어 텍스트。",
    "مرحبا بالعالم — النص العربي من اليمين إلى اليسار",
    "עברית, Ελληνικά, Русский текст, हिन्दी पाठ, ไทย",
    "emoji 😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈 and flags 🇫🇷🇯🇵",
    "zero-width no-break space mid-text a\ufeffb, combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 vs precomposed é ä ñ",
    "controls\t\r\n\u0000\u007f\u00a0\u00ad\u2028 and spaces   at   ends ",
    "punctuation before spaces: a , b . c ! don't 're 's",
    "math 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑∫√ and 𝟘𝟙𝟚 digits ٠١٢ ०१२",
  ].join("\n");

  // One encode and one decode of the whole text: tokenizers.js takes about a second per pass over
  // the 300 KB held-out set, so the BOS-prefixed form is checked on a slice.
  for (const [label, text] of [["held-out Brown", heldOut], ["multilingual UTF-8", multilingual]]) {
    test(`${label}: same ids (with BOS, and without) and the same decoded text as ferry`, () => {
      expect(text.length).toBeGreaterThan(label === "held-out Brown" ? 100_000 : 200);
      const ids = hf.encode(text, { add_special_tokens: false }).ids;
      const ferryIds = encode(text);
      expect(ids.length).toBe(ferryIds.length);
      expect(ids).toEqual(ferryIds);
      const head = text.slice(0, 2000);
      expect(hf.encode(head).ids).toEqual(encode(head, { bos: true }));
      const back = hf.decode([256, ...ids, 257], { skip_special_tokens: true });
      expect(back).toBe(decode([256, ...ferryIds, 257]));
      expect(back).toBe(text);
    }, 30_000);
  }

  test("BOS/EOS decode to their token text unless skipped; ids 256/257 map to them", () => {
    expect(hf.token_to_id("<|startoftext|>")).toBe(256);
    expect(hf.token_to_id("<|endoftext|>")).toBe(257);
    expect(hf.decode([256, 104, 105, 257])).toBe("<|startoftext|>hi<|endoftext|>");
    expect(hf.decode([256, 104, 105, 257], { skip_special_tokens: true })).toBe("hi");
  });

  test("invalid UTF-8 decodes to the same replacement characters", () => {
    const ids = [0x68, 0xc3, 0x28, 0xe2, 0x82, 0xf0, 0x9f, 0x98, 0x80, 0xff];
    expect(hf.decode(ids)).toBe(decode(ids));
    expect(decode(ids)).toContain("\ufffd");
  });
});

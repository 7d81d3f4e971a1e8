// A real Qwen3 Hugging Face folder (the real tokenizer over a small body, made by scripts/tools/make-qwen3.ts)
// through the formats that carry a tokenizer: hf, dmexp and f64lines give back the folder's tokenizer files
// byte for byte and its tensors bit for bit (lut4, lossy and slower to quantize: tests/qwen3-lut4.test.ts);
// every bad folder is refused, naming the file and the field, before anything is written.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../formats/export.ts";
import { formatNamed } from "../formats/mod.ts";
import { importHuggingFace } from "../formats/huggingface.ts";
import { readDmexp } from "../formats/dmexp.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../model/tokenizer-types.ts";
import type { Tensor } from "../model/tensor.ts";
import { qwen3Folder } from "./helpers/qwen3-folder.ts";

setDefaultTimeout(60_000);

/** The real vocabulary and config keys over the smallest body every format stores (lut4: widths of 32). */
export const SMALL_QWEN3 = {
  vocab_size: 151936,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 32, // so heads · head_dim (64) is not the width, as in Qwen3-0.6B (2048 against 1024)
  tie_word_embeddings: true,
  max_position_embeddings: 40960,
  rope_theta: 1_000_000,
};

const dir = mkdtempSync(join(tmpdir(), "ferry-qwen3-formats-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let src = "";
let source: Tensor[] = [];

beforeAll(async () => {
  // The made folder, plus the template as its own file (newer folders keep it in chat_template.jinja).
  src = join(dir, "qwen3");
  cpSync(await qwen3Folder({ shape: SMALL_QWEN3, seed: 3 }), src, { recursive: true });
  const template = JSON.parse(readFileSync(join(src, "tokenizer_config.json"), "utf8")).chat_template;
  writeFileSync(join(src, "chat_template.jinja"), template);
  source = (await importHuggingFace(src)).tensors;
});

const present = () => TOKENIZER_FILE_NAMES.filter((n) => existsSync(join(src, n)));

function expectSameTokenizer(files: TokenizerFiles | undefined) {
  expect(Object.keys(files ?? {})).toEqual(present());
  for (const name of present()) {
    const bytes = Buffer.from(files![name]!, "utf8");
    expect(`${name}: ${Buffer.compare(bytes, readFileSync(join(src, name)))}`).toBe(`${name}: 0`);
  }
}

function expectSameTensors(back: Tensor[]) {
  expect(back.map((t) => t.name)).toEqual(source.map((t) => t.name));
  for (const [i, t] of back.entries()) {
    const a = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
    const b = new Uint32Array(source[i].data.buffer, source[i].data.byteOffset, source[i].data.length);
    expect(`${t.name} [${t.dims}]: ${a.length === b.length && a.every((x, k) => x === b[k])}`).toBe(
      `${t.name} [${source[i].dims}]: true`,
    );
  }
}

describe("a real Qwen3 folder", () => {
  test("is read with its tokenizer: the four files verbatim, the config's real keys accepted", async () => {
    const r = await importHuggingFace(src);
    expect(present()).toEqual([...TOKENIZER_FILE_NAMES]);
    expectSameTokenizer(r.tokenizer);
    expect(r.config).toMatchObject({
      vocab_size: 151936,
      head_dim: 32,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      tie_word_embeddings: true,
    });
    expect(r.dtype).toBe("BF16");
  });

  for (
    const [format, file] of [["hf", "q.f32.hf"], ["dmexp", "q.bf16.dmexp"], ["f64lines", "q.f64.f64lines"]]
  ) {
    test(`${format}: exported and read back, the same tokenizer files byte for byte and the same tensors`, async () => {
      const out = join(dir, "out", file);
      await exportCheckpoint({ input: src, output: out, format });
      const f = formatNamed(format)!;
      const back = await f.read(out);
      expectSameTokenizer(back.tokenizer);
      expectSameTensors(back.tensors);
      expectSameTokenizer(await f.readTokenizer!(out));
      const info = await f.inspect(out);
      expect(info.tokenizer).toMatchObject({
        kind: "bpe",
        tokens: 151669,
        chat_template: "chat_template.jinja",
      });
      if (format === "hf") {
        for (const name of present()) {
          expect(Buffer.compare(readFileSync(join(out, name)), readFileSync(join(src, name)))).toBe(0);
        }
      }
    });
  }

  test("dmexp: version 2, its tokenizer section checked by its CRC-32 before it is handed out", async () => {
    const out = join(dir, "out", "q.bf16.dmexp");
    if (!existsSync(out)) await exportCheckpoint({ input: src, output: out, format: "dmexp" });
    const bytes = readFileSync(out);
    expect(bytes[7]).toBe(2);
    const bad = join(dir, "flipped.dmexp");
    const copy = Uint8Array.from(bytes);
    copy[copy.length - 1000] ^= 0x20; // inside tokenizer.json's text
    writeFileSync(bad, copy);
    await expect(readDmexp(bad)).rejects.toMatchObject({ field: "tokenizer.crc32" });
    await expect(formatNamed("dmexp")!.readTokenizer!(bad)).rejects.toMatchObject({
      field: "tokenizer.crc32",
    });
  });

  test("a chain of exports keeps the tokenizer: folder -> dmexp -> hf gives the folder's files", async () => {
    const [dm, hf] = ["chain.bf16.dmexp", "chain.f32.hf"].map((f) => join(dir, "out", f));
    await exportCheckpoint({ input: src, output: dm, format: "dmexp" });
    await exportCheckpoint({ input: dm, output: hf, format: "hf" });
    for (const name of present()) {
      expect(`${name}: ${Buffer.compare(readFileSync(join(hf, name)), readFileSync(join(src, name)))}`).toBe(
        `${name}: 0`,
      );
    }
    expectSameTensors((await importHuggingFace(hf)).tensors);
  });

  test("a sharded folder streams its shards and gives the same tensors", async () => {
    const sharded = await qwen3Folder({ shape: SMALL_QWEN3, seed: 3, shardBytes: 4e6 });
    expect(readdirSync(sharded)).toContain("model.safetensors.index.json");
    const out = join(dir, "out", "sharded.bf16.dmexp");
    await exportCheckpoint({ input: sharded, output: out, format: "dmexp" });
    expectSameTensors((await readDmexp(out)).tensors);
  });
});

describe("a bad folder is refused, naming the file and the field, before anything is written", () => {
  let n = 0;
  // A folder of links to the good one's files, with `changes` written in place of those files.
  const variant = (base: string, changes: Record<string, string | null>) => {
    const d = join(dir, `bad-${n++}`);
    mkdirSync(d);
    for (const f of readdirSync(base)) {
      if (!(f in changes)) symlinkSync(join(base, f), join(d, f));
    }
    for (const [f, text] of Object.entries(changes)) if (text !== null) writeFileSync(join(d, f), text);
    return d;
  };
  const refused = async (folder: string, file: string, field: string, words?: RegExp) => {
    const outDir = join(dir, `never-${n}`);
    const e = await exportCheckpoint({ input: folder, output: join(outDir, "m.bf16.dmexp"), format: "dmexp" })
      .then(() => undefined, (x) => x);
    expect(e).toBeDefined();
    expect({ where: e.where ?? e.path, field: e.field }).toMatchObject({ field });
    expect(e.message).toContain(join(folder, file));
    if (words) expect(e.message).toMatch(words);
    expect(existsSync(outDir)).toBe(false);
  };
  const config = () => JSON.parse(readFileSync(join(src, "config.json"), "utf8"));
  const tokenizer = () => JSON.parse(readFileSync(join(src, "tokenizer.json"), "utf8"));

  test("config.json: attention_bias true, a rope_scaling, a sliding window in use", async () => {
    const json = (patch: Record<string, unknown>) => JSON.stringify({ ...config(), ...patch });
    await refused(
      variant(src, { "config.json": json({ attention_bias: true }) }),
      "config.json",
      "attention_bias",
    );
    const yarn = { rope_type: "yarn", factor: 4, original_max_position_embeddings: 32768 };
    await refused(
      variant(src, { "config.json": json({ rope_scaling: yarn }) }),
      "config.json",
      "rope_scaling",
    );
    const sliding = json({ use_sliding_window: true, sliding_window: 4096 });
    await refused(variant(src, { "config.json": sliding }), "config.json", "use_sliding_window");
  });

  test("tokenizer.json: ids beyond config.json's vocab_size, a merge of tokens not in the vocab", async () => {
    const big = tokenizer();
    big.added_tokens.push({ ...big.added_tokens[0], id: 151936, content: "<|beyond|>" });
    await refused(
      variant(src, { "tokenizer.json": JSON.stringify(big) }),
      "tokenizer.json",
      "vocab_size",
      /disagrees with .*config\.json's vocab_size/,
    );
    const merges = tokenizer();
    merges.model.merges[7] = ["Ġ", "no-such-token"];
    await refused(
      variant(src, { "tokenizer.json": JSON.stringify(merges) }),
      "tokenizer.json",
      "model.merges[7]",
    );
  });

  test("a chat template that does not parse, in chat_template.jinja or tokenizer_config.json", async () => {
    await refused(
      variant(src, { "chat_template.jinja": "{% if messages %}never closed" }),
      "chat_template.jinja",
      "chat_template",
    );
    const tc = JSON.parse(readFileSync(join(src, "tokenizer_config.json"), "utf8"));
    tc.chat_template = "{{ messages | }}";
    await refused(
      variant(src, { "tokenizer_config.json": JSON.stringify(tc), "chat_template.jinja": null }),
      "tokenizer_config.json",
      "chat_template",
    );
  });

  test("model.safetensors.index.json: a shard outside the folder, or missing", async () => {
    const sharded = await qwen3Folder({ shape: SMALL_QWEN3, seed: 3, shardBytes: 4e6 });
    const index = JSON.parse(readFileSync(join(sharded, "model.safetensors.index.json"), "utf8"));
    const name = Object.keys(index.weight_map)[0];
    for (const shard of ["../x.safetensors", "/tmp/x.safetensors", "model-00099-of-00099.safetensors"]) {
      const moved = { ...index, weight_map: { ...index.weight_map, [name]: shard } };
      const bad = variant(sharded, { "model.safetensors.index.json": JSON.stringify(moved) });
      await refused(bad, "model.safetensors.index.json", `weight_map.${name}`);
    }
  });
});

// A real Qwen3 Hugging Face folder (the real tokenizer over a small body, made by scripts/tools/make-qwen3.ts)
// through the formats that carry a tokenizer: hf, dmexp and f64lines give back the folder's tokenizer files
// byte for byte and its tensors bit for bit (lut4, lossy and slower to quantize: tests/formats/qwen3-lut4.test.ts;
// bad folders: tests/formats/qwen3-refusals.test.ts).
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { crossProcessTest, FAST } from "../helpers/fast.ts";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import { formatNamed } from "../../formats/mod.ts";
import { importHuggingFace } from "../../formats/huggingface/huggingface.ts";
import { readDmexp } from "../../formats/dmexp/dmexp.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../../model/tokenizer-types.ts";
import type { Tensor } from "../../model/tensor.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { SMALL_QWEN3, smallQwen3Folder } from "../helpers/qwen3-small.ts";

const dir = mkdtempSync(join(tmpdir(), "ferry-qwen3-formats-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let src = "";
let source: Tensor[] = [];

beforeAll(async () => {
  if (FAST) return;
  src = await smallQwen3Folder(join(dir, "qwen3"));
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
  crossProcessTest(
    "is read with its tokenizer: the four files verbatim, the config's real keys accepted",
    async () => {
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
    },
  );

  for (
    const [format, file] of [["hf", "q.f32.hf"], ["dmexp", "q.bf16.dmexp"], ["f64lines", "q.f64.f64lines"]]
  ) {
    crossProcessTest(
      `${format}: exported and read back, the same tokenizer files byte for byte and the same tensors`,
      async () => {
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
      },
    );
  }

  crossProcessTest(
    "dmexp: version 2, its tokenizer section checked by its CRC-32 before it is handed out",
    async () => {
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
    },
  );

  crossProcessTest(
    "a chain of exports keeps the tokenizer: folder -> dmexp -> hf gives the folder's files",
    async () => {
      const [dm, hf] = ["chain.bf16.dmexp", "chain.f32.hf"].map((f) => join(dir, "out", f));
      await exportCheckpoint({ input: src, output: dm, format: "dmexp" });
      await exportCheckpoint({ input: dm, output: hf, format: "hf" });
      for (const name of present()) {
        expect(`${name}: ${Buffer.compare(readFileSync(join(hf, name)), readFileSync(join(src, name)))}`)
          .toBe(
            `${name}: 0`,
          );
      }
      expectSameTensors((await importHuggingFace(hf)).tensors);
    },
  );

  crossProcessTest(
    "a byte model exported over a Qwen3 export leaves none of its tokenizer files behind",
    async () => {
      const out = join(dir, "out", "over.f32.hf");
      await exportCheckpoint({ input: src, output: out, format: "hf" });
      expect(existsSync(join(out, "chat_template.jinja"))).toBe(true);
      await exportCheckpoint({ input: "model/default/ferry.ckpt", output: out, format: "hf" });
      expect(existsSync(join(out, "chat_template.jinja"))).toBe(false);
      const back = await formatNamed("hf")!.read(out);
      expect(back.tokenizer).toBeUndefined();
      expect(back.config.vocab_size).toBe(258);
    },
  );

  crossProcessTest("a sharded folder streams its shards and gives the same tensors", async () => {
    const sharded = await qwen3Folder({ shape: SMALL_QWEN3, seed: 3, shardBytes: 4e6 });
    expect(readdirSync(sharded)).toContain("model.safetensors.index.json");
    const out = join(dir, "out", "sharded.bf16.dmexp");
    await exportCheckpoint({ input: sharded, output: out, format: "dmexp" });
    expectSameTensors((await readDmexp(out)).tensors);
  });
});

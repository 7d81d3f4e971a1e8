// A real Qwen3 folder exported to lut4 (schema ferry.lut-qwen3/2): the tokenizer files come back byte for byte,
// and the section leaves the weights alone: the same weights written without a tokenizer (schema /1, as every
// earlier file) read back to the same tensors, and the data sections are the same bytes.
import { afterAll, expect, setDefaultTimeout } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import {
  dequantizeLut4,
  LUT4_SCHEMA,
  LUT4_SCHEMA_TOKENIZER,
  lut4Format,
  readLut4,
  writeLut4,
} from "../../formats/lut4/lut4.ts";
import { MAX_LUT4_POSITIONS } from "../../quantize/lut4-types.ts";
import { TOKENIZER_FILE_NAMES } from "../../model/tokenizer-types.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";

setDefaultTimeout(120_000);

const dir = mkdtempSync(join(tmpdir(), "ferry-qwen3-lut4-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// lut4 stores at most 2^14 positions, so this folder has fewer than Qwen3's 40960.
const SHAPE = {
  vocab_size: 151936,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  tie_word_embeddings: true,
  max_position_embeddings: 4096,
  rope_theta: 1_000_000,
};

crossProcessTest(
  "lut4: the tokenizer byte for byte in schema /2; the same weights as the /1 file of those codes",
  async () => {
    const src = await qwen3Folder({ shape: SHAPE, seed: 5 });
    const out = join(dir, "q.q4.lut4");
    await exportCheckpoint({ input: src, output: out, format: "lut4" });
    const file = await readLut4(out);
    expect(file.header.schema).toBe(LUT4_SCHEMA_TOKENIZER);
    const names = TOKENIZER_FILE_NAMES.filter((n) => existsSync(join(src, n)));
    expect(Object.keys(file.tokenizer ?? {})).toEqual(names);
    for (const name of names) {
      const same = Buffer.compare(Buffer.from(file.tokenizer![name]!, "utf8"), readFileSync(join(src, name)));
      expect(`${name}: ${same}`).toBe(`${name}: 0`);
    }
    expect(await lut4Format.readTokenizer!(out)).toEqual(file.tokenizer);
    const info = await lut4Format.inspect(out);
    expect(info.tokenizer).toMatchObject({
      kind: "bpe",
      tokens: 151669,
      section_bytes: file.header.tokenizer!.bytes,
    });

    // The same codes without the tokenizer: schema /1, and the data section and tensors are unchanged.
    const plain = join(dir, "plain.q4.lut4");
    const { header } = file;
    await writeLut4(plain, file.weights, {
      source: header.source,
      ropeTheta: header.rope_theta,
      rmsNormEps: header.rms_norm_eps,
      quantizer: header.quantizer,
    });
    const old = await readLut4(plain);
    expect(old.header.schema).toBe(LUT4_SCHEMA);
    expect(old.tokenizer).toBeUndefined();
    expect(old.header.data_crc32).toBe(header.data_crc32);
    const [a, b] = [dequantizeLut4(file), dequantizeLut4(old)];
    expect(a.map((t) => t.name)).toEqual(b.map((t) => t.name));
    for (const [i, t] of a.entries()) {
      expect(`${t.name}: ${t.data.every((x, k) => x === b[i].data[k])}`).toBe(`${t.name}: true`);
    }
    expect(readFileSync(plain).length).toBe(readFileSync(out).length - header.tokenizer!.bytes);
  },
);

crossProcessTest("lut4 caps a model's positions at its limit (Qwen3's 40960), and says so", async () => {
  const src = await qwen3Folder({ shape: { ...SHAPE, max_position_embeddings: 40960 }, seed: 5 });
  const out = join(dir, "capped.q4.lut4");
  const s = await exportCheckpoint({ input: src, output: out, format: "lut4" });
  expect(String(s.positions)).toContain("40960 capped");
  const { config } = await lut4Format.read(out);
  expect(config.max_position_embeddings).toBe(MAX_LUT4_POSITIONS);
});

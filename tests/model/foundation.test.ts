// The byte tokenizer, the config's TOML form and refusals, and the training checkpoint round trip.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BOS, createStreamDecoder, decode, encode, EOS } from "../../model/tokenizer.ts";
import { ConfigError, configToToml, parseConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import {
  CheckpointError,
  configPathFor,
  isCheckpoint,
  openCheckpointModel,
  readCheckpoint,
  writeCheckpoint,
} from "../../formats/checkpoint/checkpoint.ts";
import { materialize } from "../../model/tensor.ts";
import { expectSameBits, expectSameTensors } from "../helpers/bits.ts";

const SAMPLES = [
  "",
  "The jury said",
  "naïve café",
  "日本語のテキスト",
  "مرحبا بالعالم",
  "emoji 🚀👩‍👩‍👧",
  "e\u0301 combining",
  "tab\tnew\nline",
  "\uFEFFstarts with a byte-order mark",
];

test("the byte tokenizer round-trips any UTF-8 text", () => {
  for (const s of SAMPLES) {
    const ids = encode(s, { bos: true });
    expect(ids[0]).toBe(BOS);
    expect(ids.length).toBe(new TextEncoder().encode(s).length + 1);
    expect(decode([...ids, EOS])).toBe(s);
  }
  expect(encode("A")).toEqual([65]);
});

test("the streaming decoder holds back an unfinished UTF-8 sequence", () => {
  const step = createStreamDecoder();
  const bytes = encode("é🚀");
  const pieces = bytes.map((b) => step(b));
  expect(pieces).toEqual(["", "é", "", "", "", "🚀"]);
  expect(step(EOS)).toBe("");
});

test("config TOML round-trips and refuses unknown, missing and inconsistent fields by name", () => {
  const cfg = PRESETS.default;
  expect(parseConfig(configToToml(cfg), "a.toml")).toEqual(cfg);
  const text = configToToml(cfg);
  expect(() => parseConfig(text + "rope_scaling = 2.0\n", "a.toml")).toThrow(
    /a\.toml: config field 'rope_scaling': unknown/,
  );
  expect(() => parseConfig(text.replace(/^head_dim.*$/m, ""), "a.toml")).toThrow(/'head_dim': missing/);
  expect(() => parseConfig(text.replace(/^num_key_value_heads = \d+/m, "num_key_value_heads = 3"), "a.toml"))
    .toThrow(/'num_key_value_heads': 3 does not divide/);
  expect(() => parseConfig(text.replace(/^hidden_size = \d+/m, 'hidden_size = "96"'), "a.toml")).toThrow(
    ConfigError,
  );
  expect(() => parseConfig("not toml [", "a.toml")).toThrow(/not valid TOML/);
});

test("a training checkpoint round-trips every section bit-exactly, with its config snapshot beside it", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-ckpt-"));
  try {
    const cfg = PRESETS.tiny, path = join(dir, "run.ckpt");
    const model = initParams(cfg, 1),
      ema = initParams(cfg, 2),
      m = initParams(cfg, 3),
      v = initParams(cfg, 4);
    await writeCheckpoint(path, cfg, { step: 42, model, ema, adam: { m, v }, trainer: { tokens_seen: 99 } });
    expect(isCheckpoint(readFileSync(path))).toBe(true);
    expect(readFileSync(configPathFor(path), "utf8")).toBe(configToToml(cfg));
    const back = await readCheckpoint(path);
    expect(back.step).toBe(42);
    expect(back.config).toEqual(cfg);
    expect(back.trainer.tokens_seen).toBe(99);
    for (const [a, b] of [[model, back.model], [ema, back.ema!], [m, back.adam!.m], [v, back.adam!.v]]) {
      expectSameTensors(b, a);
    }
    // Only the model section, when that is all the caller wants (what exporters ask for).
    const modelOnly = await readCheckpoint(path, { sections: ["model"] });
    expect(modelOnly.adam).toBeUndefined();
    expect(modelOnly.ema).toBeUndefined();

    // Streaming the model section gives the same tensors as reading the whole file.
    const streamed = await openCheckpointModel(path);
    try {
      expect(streamed.step).toBe(42);
      expect(streamed.tensors.length).toBe(model.length);
      for (const [i, src] of streamed.tensors.entries()) {
        const t = await materialize(src);
        expect(t.name).toBe(model[i].name);
        expectSameBits(t.data, model[i].data, t.name);
      }
    } finally {
      await streamed.close();
    }
    await expect(openCheckpointModel(path, { config: { ...cfg, hidden_size: 8 } })).rejects.toThrow(
      /model\.embed_tokens\.weight: dims/,
    );

    const bytes = readFileSync(path);
    bytes[bytes.length - 5] ^= 1;
    writeFileSync(path, bytes);
    await expect(readCheckpoint(path)).rejects.toThrow(/crc32: checksum mismatch/);
    await expect(openCheckpointModel(path)).rejects.toThrow(/crc32: checksum mismatch/);
    writeFileSync(path, bytes.subarray(0, bytes.length - 3));
    await expect(readCheckpoint(path)).rejects.toThrow(/truncated or padded/);
    rmSync(configPathFor(path));
    bytes[bytes.length - 5] ^= 1;
    writeFileSync(path, bytes);
    await expect(readCheckpoint(path)).rejects.toThrow(CheckpointError);
    await expect(readCheckpoint(path)).rejects.toThrow(/config snapshot .* is missing/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the tests' exact comparison tells -0 from +0 and a short read-back from a whole one", () => {
  // bun's toEqual on typed arrays does neither; tests/helpers/bits.ts is what the round-trip tests use.
  expect(new Float32Array([-0])).toEqual(new Float32Array([0])); // the weakness, documented
  expectSameBits(new Float32Array([1, -0, NaN]), new Float32Array([1, -0, NaN]));
  expect(() => expectSameBits(new Float32Array([1, 0]), new Float32Array([1, -0]))).toThrow(
    /first difference at 1 \(0 vs -0\)/,
  );
  expect(() => expectSameBits(new Float32Array([1]), new Float32Array([1, 2]))).toThrow(/length 1/);
  const t = { name: "a", dims: [2], data: new Float32Array([1, 2]) };
  expect(() => expectSameTensors([t], [t, { ...t, name: "b" }])).toThrow();
  expect(() => expectSameTensors([{ ...t, dims: [1, 2] }], [t])).toThrow();
});

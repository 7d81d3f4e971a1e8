// llama.cpp's importance matrix files (formats/imatrix/imatrix.ts, spec formats/imatrix/imatrix.md): both encodings
// round-trip, the GGUF one is laid out as llama-imatrix lays it out, a file of another model or shape
// is refused naming the tensor, and an export reads one (`--imatrix`) and writes one (`--imatrix-out`).
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import {
  encodeImatrix,
  type Imatrix,
  imatrixImportance,
  parseImatrix,
} from "../../formats/imatrix/imatrix.ts";
import { encodeGguf, parseGguf } from "../../formats/gguf/gguf.ts";
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import { initParams } from "../../model/init.ts";
import {
  calibrateOnce,
  imatrixCalibrator,
  inputCovariance,
  lut4Calibrator,
  writingImatrix,
} from "../../measure/calibrate.ts";

const config = { ...FUZZ_LUT4_CONFIG, max_position_embeddings: 256 };
const H = config.hidden_size, F = config.intermediate_size;

/** An imatrix for `config` with seeded values. */
function sample(encoding: "gguf" | "dat"): Imatrix {
  let s = 7;
  const rnd = () => (s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32;
  const entries = new Map([
    ["blk.0.ffn_down.weight", { values: Float32Array.from({ length: F }, rnd), count: 512 }],
    ["blk.0.attn_q.weight", { values: Float32Array.from({ length: H }, rnd), count: 512 }],
  ]);
  return { entries, datasets: ["notes.txt"], chunkCount: 2, chunkSize: 256, encoding };
}

test("both encodings round-trip: values, counts, datasets and chunks", () => {
  for (const encoding of ["gguf", "dat"] as const) {
    const m = sample(encoding);
    const back = parseImatrix(encodeImatrix(m), `x.${encoding}`);
    expect(back.encoding).toBe(encoding);
    expect(back.datasets).toEqual(["notes.txt"]);
    expect(back.chunkCount).toBe(2);
    expect(back.chunkSize).toBe(encoding === "gguf" ? 256 : 0); // the legacy file does not say
    expect([...back.entries.keys()].sort()).toEqual([...m.entries.keys()].sort());
    for (const [name, e] of m.entries) {
      const got = back.entries.get(name)!;
      expect(got.count).toBe(encoding === "gguf" ? 512 : 2); // legacy: ncall, the chunks
      for (let i = 0; i < e.values.length; i++) expect(got.values[i]).toBeCloseTo(e.values[i], 6);
    }
  }
});

test("the GGUF encoding is llama-imatrix's: its keys, then NAME.in_sum2 (sums) and NAME.counts per name, sorted", () => {
  const bytes = encodeImatrix(sample("gguf"));
  const f = parseGguf(bytes, "x.gguf");
  expect([...f.metadata.keys()]).toEqual([
    "general.type",
    "imatrix.datasets",
    "imatrix.chunk_count",
    "imatrix.chunk_size",
  ]);
  expect(f.metadata.get("general.type")).toEqual({ type: "string", value: "imatrix" });
  expect(f.tensors.map((t) => `${t.name} ${t.type} [${t.ne}]`)).toEqual([
    `blk.0.attn_q.weight.in_sum2 F32 [${H}]`,
    "blk.0.attn_q.weight.counts F32 [1]",
    `blk.0.ffn_down.weight.in_sum2 F32 [${F}]`,
    "blk.0.ffn_down.weight.counts F32 [1]",
  ]);
  const sums = new Float32Array(f.tensors[0].bytes.slice().buffer);
  expect(sums[0]).toBe(Math.fround(sample("gguf").entries.get("blk.0.attn_q.weight")!.values[0] * 512));
  // The legacy layout: entry count, then per entry name, ncall, nval, values (mean · ncall).
  const dat = encodeImatrix(sample("dat"));
  const dv = new DataView(dat.buffer);
  expect(dv.getInt32(0, true)).toBe(2);
  expect(new TextDecoder().decode(dat.subarray(8, 8 + dv.getInt32(4, true)))).toBe("blk.0.attn_q.weight");
});

test("a file of another model or shape is refused, naming the tensor; malformed files by their part", () => {
  const ok = imatrixImportance(sample("gguf"), config, "x.gguf");
  expect([...ok.keys()].sort()).toEqual([
    "model.layers.0.mlp.down_proj.weight",
    "model.layers.0.self_attn.q_proj.weight",
  ]);
  const refused = (edit: (m: Imatrix) => void, message: string) => {
    const m = sample("gguf");
    edit(m);
    expect(() => imatrixImportance(m, config, "x.gguf")).toThrow(message);
  };
  refused(
    (m) => m.entries.set("blk.9.attn_k.weight", { values: new Float32Array(H), count: 1 }),
    "x.gguf: tensor blk.9.attn_k.weight: this model has no such matrix",
  );
  refused(
    (m) => m.entries.set("blk.0.ffn_gate.weight", { values: new Float32Array(H + 32), count: 1 }),
    `x.gguf: tensor blk.0.ffn_gate.weight: holds ${
      H + 32
    } values; this model's matrix has ${H} input columns`,
  );
  refused(
    (m) => m.entries.set("output.weight", { values: new Float32Array(H), count: 1 }),
    "x.gguf: tensor output.weight: this model has no such matrix", // tied: no separate output
  );
  // A mixture-of-experts entry (several counts), a missing half, a model GGUF, a truncated .dat.
  const moe = encodeGguf([
    ["imatrix.datasets", { type: "array", elem: "string", value: [] }],
    ["imatrix.chunk_count", { type: "u32", value: 1 }],
    ["imatrix.chunk_size", { type: "u32", value: 512 }],
  ], [
    { name: "blk.0.ffn_up_exps.weight.in_sum2", ne: [64, 2], type: "F32", bytes: new Uint8Array(512) },
    { name: "blk.0.ffn_up_exps.weight.counts", ne: [1, 2], type: "F32", bytes: new Uint8Array(8) },
    { name: "blk.0.attn_q.weight.in_sum2", ne: [64], type: "F32", bytes: new Uint8Array(256) },
  ], "x");
  const moeBytes = new Uint8Array(moe.reduce((n, c) => n + c.length, 0));
  moe.reduce((at, c) => (moeBytes.set(c, at), at + c.length), 0);
  expect(() => parseImatrix(moeBytes, "moe.gguf")).toThrow(
    /moe\.gguf: tensor blk\.0\.(ffn_up_exps\.weight\.counts: holds 2 counts|attn_q\.weight\.counts: missing)/,
  );
  const model = encodeGguf([["general.architecture", { type: "string", value: "qwen3" }]], [], "x");
  expect(() => parseImatrix(model[0], "model.gguf")).toThrow(
    "model.gguf: imatrix.datasets: expected an array",
  );
  const dat = encodeImatrix(sample("dat"));
  expect(() => parseImatrix(dat.subarray(0, 40), "cut.dat")).toThrow("cut.dat: tensor blk.0.attn_q.weight:");
  expect(() => parseImatrix(new Uint8Array([0, 0, 0, 0]), "empty.dat")).toThrow("empty.dat: entries:");
});

test("an export writes the importance it measured (--imatrix-out) and reads it back (--imatrix)", async () => {
  const dir = scratchDir(), ckpt = join(dir, "tiny.ckpt"), tensors = initParams(config, 3);
  await writeCheckpoint(ckpt, config, { step: 1, model: tensors });
  const out = join(dir, "ferry.imatrix.gguf");
  const calibrate = calibrateOnce(
    writingImatrix(calibrateOnce(lut4Calibrator({ windows: 2, seed: 4 })), out),
  );
  const cal = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "cal.gguf"),
    format: "gguf",
    dtype: "q4_k",
    calibrate,
  });
  const m = parseImatrix(readFileSync(out), out);
  expect(m.datasets).toEqual(["brown train split"]);
  expect([m.chunkCount, m.chunkSize]).toEqual([2, 256]);
  // Every layer matrix, not the tied embedding (as llama-imatrix, which collects blk.* and output only).
  expect(m.entries.size).toBe(7 * config.num_hidden_layers);
  expect(m.entries.has("token_embd.weight")).toBe(false);
  for (const e of m.entries.values()) expect(e.count).toBe(512);
  const cov = inputCovariance(config, tensors, [[256, 1, 2]]); // the matrices' widths, by name
  for (const [hf, values] of imatrixImportance(m, config, out)) {
    expect(values.length ** 2).toBe(cov.get(hf)!.length);
  }
  // Read back: GGUF and lut4 weigh their scales by it, and record where it came from.
  const viaFile = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "file.gguf"),
    format: "gguf",
    dtype: "q4_k",
    calibrate: imatrixCalibrator(out),
  });
  const data = (f: string) => {
    const b = readFileSync(f);
    return b.subarray(parseGguf(b, f).dataOffset).toString("base64");
  };
  const plain = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "plain.gguf"),
    format: "gguf",
    dtype: "q4_k",
  });
  expect(data(viaFile.file)).not.toBe(data(plain.file));
  expect(viaFile.calibration).toMatch(
    /^2 windows of 256 tokens \(512 tokens\) of the imatrix ferry\.imatrix\.gguf sha256:[0-9a-f]{16} \(brown train split\), seed 0$/,
  );
  expect(cal.calibration).toMatch(/^2 windows of 256 tokens/);
  const lut4 = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "file.lut4"),
    format: "lut4",
    calibrate: imatrixCalibrator(out),
  });
  const h = (await readLut4(lut4.file)).header;
  expect(h.quantizer.scale_search).toBe("weighted-mse");
  expect(h.calibration?.source).toMatch(/^imatrix ferry\.imatrix\.gguf/);
  // The legacy layout, by the name.
  const dat = join(dir, "ferry.imatrix.dat");
  await writingImatrix(imatrixCalibrator(out), dat)(config, tensors);
  expect(parseImatrix(readFileSync(dat), dat).encoding).toBe("dat");
  // Another model's file is refused at export, naming the tensor.
  const other = join(dir, "other.gguf");
  const wide = sample("gguf");
  wide.entries.set("blk.0.attn_v.weight", { values: new Float32Array(H * 2), count: 1 });
  writeFileSync(other, encodeImatrix(wide));
  await expect(
    exportCheckpoint({
      input: ckpt,
      output: join(dir, "x.gguf"),
      format: "gguf",
      dtype: "q4_k",
      calibrate: imatrixCalibrator(other),
    }),
  )
    .rejects.toThrow(`${other}: tensor blk.0.attn_v.weight: holds ${H * 2} values`);
});

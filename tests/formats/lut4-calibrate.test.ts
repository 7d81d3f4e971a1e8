// Calibrated lut4: the calibration statistics (windows of the training split, per-column mean squares,
// covariances), GPTQ's error feedback against plain rounding, the header's `calibration` record
// (written, read, refused by field when malformed), and measure's KL percentile.
import { expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { parseLut4, readLut4 } from "../../formats/lut4/lut4.ts";
import { dequantizeMatrix, quantizeMatrix, quantizeMatrixGptq } from "../../quantize/lut4-quantize.ts";
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { initParams } from "../../model/init.ts";
import { rmsnorm } from "../../kernels/kernels.ts";
import { loadBrown } from "../../model/corpus.ts";
import {
  calibratedExportSeconds,
  calibrateOnce,
  calibrationSeconds,
  columnImportance,
  DEFAULT_BUDGET_S,
  DEFAULT_LIMIT_S,
  defaultWindows,
  inputCovariance,
  lut4Calibrator,
} from "../../measure/calibrate.ts";
import { calibrationWindows } from "../../measure/calibration-text.ts";
import { percentile, windowInputs } from "../../measure/metrics.ts";

setDefaultTimeout(120_000);

const config = { ...FUZZ_LUT4_CONFIG, max_position_embeddings: 256 }, H = config.hidden_size;
const tensors = initParams(config, 3);

test("calibration windows: seeded, inside the training split, the same on every call", async () => {
  const { train, heldOut } = await loadBrown();
  const a = calibrationWindows(train, 8, 1), b = calibrationWindows(train, 8, 1);
  expect(a.map((w) => w.byteOffset)).toEqual(b.map((w) => w.byteOffset));
  expect(calibrationWindows(train, 8, 2).map((w) => w.byteOffset)).not.toEqual(a.map((w) => w.byteOffset));
  for (const w of a) {
    expect(w.buffer).toBe(train.buffer);
    expect(w.buffer).not.toBe(heldOut.buffer);
    expect(w.length).toBe(256);
  }
});

test("columnImportance: layer 0's q/k/v input is the gained norm of the embeddings, and the diagonal of inputCovariance", () => {
  const windows = [new Uint8Array(40).map((_, i) => 65 + (i * 7) % 26), new Uint8Array(24).fill(101)];
  const imp = columnImportance(config, tensors, windows.map(windowInputs));
  const cov = inputCovariance(config, tensors, windows.map(windowInputs));
  const get = (n: string) => tensors.find((t) => t.name === n)!.data;
  // By hand: rows of the embedding for BOS + all but the last byte, RMS-normed with input_layernorm's gain.
  const sum = new Float64Array(H);
  let n = 0;
  for (const w of windows) {
    const ids = [256, ...w.subarray(0, w.length - 1)];
    const x = new Float32Array(ids.length * H), out = new Float32Array(x.length);
    ids.forEach((id, t) => x.set(get("model.embed_tokens.weight").subarray(id * H, id * H + H), t * H));
    rmsnorm(out, x, get("model.layers.0.input_layernorm.weight"), ids.length, H, config.rms_norm_eps);
    for (let k = 0; k < out.length; k++) sum[k % H] += out[k] * out[k];
    n += ids.length;
  }
  const q = imp.get("model.layers.0.self_attn.q_proj.weight")!;
  for (let c = 0; c < H; c++) expect(q[c]).toBeCloseTo(sum[c] / n, 5);
  expect(imp.get("model.layers.0.self_attn.v_proj.weight")).toEqual(q);
  expect(imp.get("model.layers.0.mlp.down_proj.weight")!.length).toBe(config.intermediate_size);
  expect(imp.has("model.embed_tokens.weight")).toBe(true); // the tied head's input
  for (const [name, v] of imp) {
    const c = cov.get(name)!, K = v.length;
    expect(c.length).toBe(K * K);
    for (let i = 0; i < K; i++) expect(c[i * K + i]).toBeCloseTo(v[i], 6);
    expect(c[1]).toBe(c[K]); // symmetric
  }
});

test("GPTQ lowers the output error on correlated inputs below plain (and importance-weighted) rounding", () => {
  const rows = 16, cols = 64, T = 400;
  let s = 12345;
  const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
  const w = Float32Array.from({ length: rows * cols }, rnd);
  // Inputs with a shared component: strongly correlated columns, where error feedback pays.
  const xs = Array.from({ length: T }, () => {
    const common = rnd();
    return Float64Array.from({ length: cols }, (_, c) => common * (1 + c / cols) + 0.2 * rnd());
  });
  const h = new Float64Array(cols * cols);
  for (const x of xs) {
    for (let i = 0; i < cols; i++) for (let j = 0; j < cols; j++) h[i * cols + j] += x[i] * x[j] / T;
  }
  const outErr = (q: Float32Array) => {
    let e = 0;
    for (const x of xs) {
      for (let r = 0; r < rows; r++) {
        let d = 0;
        for (let c = 0; c < cols; c++) d += (w[r * cols + c] - q[r * cols + c]) * x[c];
        e += d * d;
      }
    }
    return e;
  };
  const diag = Float64Array.from({ length: cols }, (_, c) => h[c * cols + c]);
  const plain = outErr(dequantizeMatrix(quantizeMatrix("w", w, rows, cols).matrix));
  const weighted = outErr(dequantizeMatrix(quantizeMatrix("w", w, rows, cols, diag).matrix));
  const gptq = outErr(dequantizeMatrix(quantizeMatrixGptq("w", w, rows, cols, h).matrix));
  expect(gptq).toBeLessThan(0.5 * plain);
  expect(gptq).toBeLessThan(0.5 * weighted);
  // An all-zero matrix stays zero.
  const zero = quantizeMatrixGptq("z", new Float32Array(rows * cols), rows, cols, h);
  expect(dequantizeMatrix(zero.matrix).every((v) => v === 0)).toBe(true);
});

test("a calibrated export records its calibration in the header; a malformed record is refused by field", async () => {
  const dir = scratchDir();
  const ckpt = join(dir, "tiny.ckpt");
  await writeCheckpoint(ckpt, config, { step: 1, model: tensors });
  const plain = await exportCheckpoint({ input: ckpt, output: join(dir, "plain.lut4"), format: "lut4" });
  const cal = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "cal.lut4"),
    format: "lut4",
    calibrate: lut4Calibrator({ windows: 4, seed: 9 }),
  });
  expect((await readLut4(plain.file)).header.calibration).toBeUndefined();
  const h = (await readLut4(cal.file)).header;
  expect(h.calibration).toEqual({
    source: "brown train split",
    windows: 4,
    window_tokens: 256,
    tokens: 1024,
    seed: 9,
  });
  expect(cal.calibration).toBe("4 windows of 256 tokens (1,024 tokens) of the brown train split, seed 9");
  // A model with fewer positions than a window is calibrated on windows it can hold.
  const short = await lut4Calibrator({ windows: 2 })(FUZZ_LUT4_CONFIG, initParams(FUZZ_LUT4_CONFIG, 3));
  expect(short.record.window_tokens).toBe(FUZZ_LUT4_CONFIG.max_position_embeddings);
  expect(h.quantizer.scale_search).toBe("gptq");
  expect(readFileSync(cal.file).equals(readFileSync(plain.file))).toBe(false); // the codes moved
  const bytes = readFileSync(cal.file);
  // Same-length edits of the header text (the data section and its CRC-32 untouched).
  const bad: Array<[string, string, string]> = [
    ['"windows":4', '"windows":0', "calibration.windows"],
    ['"window_tokens":256', '"window_tokens":2.5', "calibration.window_tokens"],
    ['"window_tokens":256', '"window_bits__":256', "calibration.window_tokens"],
    ['"tokens":1024', '"tokenz":1024', "calibration.tokens"],
    ['"source":"brown train split"', '"source":["brown train spl"]', "calibration.source"],
  ];
  for (const [text, edit, field] of bad) {
    expect(edit.length).toBe(text.length);
    const at = bytes.indexOf(text);
    expect(at).toBeGreaterThan(0);
    const forged = Buffer.from(bytes);
    forged.write(edit, at, "latin1");
    const path = join(dir, `bad-${field}.lut4`);
    writeFileSync(path, forged);
    expect(() => parseLut4(new Uint8Array(forged), path)).toThrow(`${path}: ${field}: expected`);
  }
  // A file written before calibration took any tokenizer records `window_bytes`: it still reads.
  const sized = '"window_tokens":256,"tokens":1024';
  const earlier = Buffer.from(bytes);
  earlier.write('"window_bytes":256'.padEnd(sized.length), bytes.indexOf(sized), "latin1");
  expect(parseLut4(new Uint8Array(earlier), "earlier.lut4").header.calibration).toEqual({
    source: "brown train split",
    windows: 4,
    window_bytes: 256,
    seed: 9,
  });
});

test("a calibrated export reads its input's tensors one at a time: from a dmexp file, the checkpoint's bits", async () => {
  // dmexp's sources share one read buffer, so reads that overlap would mix their tensors.
  const dir = scratchDir(), ckpt = join(dir, "tiny.ckpt");
  await writeCheckpoint(ckpt, config, { step: 1, model: tensors });
  const dmexp = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "tiny.f32.dmexp"),
    format: "dmexp",
    dtype: "f32",
  });
  const crcs = [];
  for (const input of [ckpt, dmexp.file, dmexp.file]) {
    const out = await exportCheckpoint({
      input,
      output: join(dir, `cal-${crcs.length}.lut4`),
      format: "lut4",
      calibrate: lut4Calibrator({ windows: 4, seed: 9 }),
    });
    crcs.push(out.data_crc32);
  }
  expect(new Set(crcs).size).toBe(1);
});

test("percentile interpolates between the sorted values, as llama.cpp's 99.0% KLD", () => {
  expect(percentile([4, 0, 3, 1, 2], 0.99)).toBeCloseTo(3.96, 12);
  expect(percentile([5], 0.99)).toBe(5);
  expect(percentile([1, 2], 0.5)).toBe(1.5);
  expect(Number.isNaN(percentile([], 0.99))).toBe(true);
});

test("a default calibration runs as many windows as finish in time, or is skipped, the summary saying so; asked for, it runs", async () => {
  const qwen3 = {
    ...config,
    vocab_size: 151_936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    max_position_embeddings: 40_960,
    tie_word_embeddings: true,
  };
  // Qwen3-0.6B (docs/benchmarks.md): its lut4 export (the covariances and GPTQ) at 64 windows is
  // estimated at about 11 minutes on two cores, its q4_k_m export (the importance alone) at about 7.6.
  expect(calibratedExportSeconds(qwen3, 64)).toBeGreaterThan(DEFAULT_LIMIT_S);
  expect(calibratedExportSeconds(qwen3, 64, "importance")).toBeLessThan(DEFAULT_BUDGET_S);
  expect(calibrationSeconds(qwen3, 64)).toBeLessThan(calibratedExportSeconds(qwen3, 64));
  expect(calibratedExportSeconds(config, 64)).toBeLessThan(1);
  // By default lut4 takes the most windows estimated within the budget; the GGUF types and the shipped
  // model take all 64.
  const lut4Windows = defaultWindows(qwen3, 64, "covariance");
  expect(lut4Windows).toBe(40);
  expect(calibratedExportSeconds(qwen3, lut4Windows)).toBeLessThanOrEqual(DEFAULT_BUDGET_S);
  expect(calibratedExportSeconds(qwen3, lut4Windows + 1)).toBeGreaterThan(DEFAULT_BUDGET_S);
  expect(defaultWindows(qwen3, 64, "importance")).toBe(64);
  expect(defaultWindows(config, 64, "covariance")).toBe(64);
  const byDefault = lut4Calibrator({ byDefault: true });
  expect(byDefault.skip!(qwen3)).toBeUndefined();
  expect(byDefault.skip!(qwen3, "importance")).toBeUndefined();
  expect(byDefault.skip!(config)).toBeUndefined();
  // The summary says what was cut, from the record the export keeps; nothing when nothing was.
  const record = { source: "brown train split", windows: 40, window_tokens: 256, tokens: 10240, seed: 1 };
  expect(byDefault.note!(qwen3, record, "covariance")).toBe(
    "by default 40 of 64 windows, to finish within 10 minutes on two cores (--calibrate 64: about 12.4 minutes)",
  );
  expect(byDefault.note!(qwen3, { ...record, windows: 64 }, "importance")).toBeUndefined();
  expect(lut4Calibrator({ windows: 64 }).note!(qwen3, record, "covariance")).toBeUndefined(); // asked for
  // The GGUF types need only the importance: no covariance sums, no GPTQ.
  expect(calibrationSeconds(qwen3, 64, "importance")).toBeLessThan(0.6 * calibrationSeconds(qwen3, 64));
  // Twice the layers: lut4's is skipped (fewer than 16 windows fit); the importance takes 23.
  const twice = { ...qwen3, num_hidden_layers: 56 };
  expect(byDefault.skip!(twice)).toMatch(
    /^skipped by default \(plain rounding\): the calibrated export would take about \d+\.\d minutes on two cores, and fewer than 16 windows fit in 9 minutes \(--calibrate N runs it\)$/,
  );
  expect(defaultWindows(twice, 64, "importance")).toBe(23);
  expect(byDefault.skip!(twice, "importance")).toBeUndefined();
  expect(lut4Calibrator({ windows: 64 }).skip!(twice)).toBeUndefined(); // asked for
  // The export pipeline asks before reading a tensor, and a format that takes no calibration says nothing.
  const dir = scratchDir(), ckpt = join(dir, "tiny.ckpt");
  await writeCheckpoint(ckpt, config, { step: 1, model: tensors });
  const never = Object.assign(() => Promise.reject(new Error("ran")), { skip: () => "skipped: too long" });
  const calibrate = calibrateOnce(never);
  const lut4 = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "s.lut4"),
    format: "lut4",
    calibrate,
  });
  expect(lut4.calibration).toBe("skipped: too long");
  expect((await readLut4(lut4.file)).header.calibration).toBeUndefined();
  const dmexp = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "s.dmexp"),
    format: "dmexp",
    calibrate,
  });
  expect(dmexp.calibration).toBeUndefined();
  // A calibration cut short by default: the summary adds what was cut to the record's words.
  const two = lut4Calibrator({ windows: 2 });
  const cut = calibrateOnce(Object.assign(two, { note: () => "by default 2 of 64 windows" }));
  const short = await exportCheckpoint({
    input: ckpt,
    output: join(dir, "c.lut4"),
    format: "lut4",
    calibrate: cut,
  });
  expect(short.calibration).toMatch(/^2 windows of .*; by default 2 of 64 windows$/);
});

test("a calibration that needs only the importance sums no covariance; one shared calibration measures again only for more", async () => {
  const calls: string[] = [];
  const inner = lut4Calibrator({ windows: 2 });
  const counting = Object.assign(
    (...a: Parameters<typeof inner>) => (calls.push(a[3] ?? "covariance"), inner(...a)),
    { skip: inner.skip },
  );
  const imp = await inner(config, tensors, undefined, "importance");
  expect(imp.covariance).toBeUndefined();
  const full = await inner(config, tensors);
  // The same sums of squares either way: a GGUF is the same whether lut4 was exported first or not.
  for (const [name, v] of full.importance!) expect(imp.importance!.get(name)).toEqual(v);
  const shared = calibrateOnce(counting);
  await shared(config, tensors, undefined, "importance");
  await shared(config, tensors, undefined, "importance");
  await shared(config, tensors);
  await shared(config, tensors, undefined, "importance");
  expect(calls).toEqual(["importance", "covariance"]);
});

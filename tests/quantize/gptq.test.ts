// GPTQ on WebAssembly (quantize/gptq.ts) against the scalar JavaScript it replaces
// (quantize/lut4-quantize.ts `quantizeMatrixGptq`): the same codes, scales, exp_base and error sums on
// 1, 2 and 3 threads, by blocks of rows or whole, with a fold; one factor shared by matrices of one key;
// the pruned first pass against the full one; a model's streamed quantization with and without the
// engine; and Deno's bits against Bun's.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { crossProcessTest } from "../helpers/fast.ts";
import { gptqEngine } from "../../quantize/gptq.ts";
import {
  gptqFirstPass,
  quantizeMatrixGptq,
  quantizeModelStreamed,
  surveyBlock,
} from "../../quantize/lut4-quantize.ts";
import type { LutMatrix } from "../../kernels/int/gemv.ts";
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import { initParams } from "../../model/init.ts";
import { tensorSource } from "../../model/tensor.ts";
import { inputCovariance } from "../../measure/calibrate.ts";
import { createCovarianceFile } from "../../measure/covariance-file.ts";
import { kernelSet } from "../../kernels/kernels.ts";

/** A seeded generator in [-0.5, 0.5) (an LCG: the Deno child below repeats it). */
function lcg(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
}

/** A hessian with correlated columns: the mean of x xᵀ over 3·cols inputs sharing a component. */
function hessian(cols: number, rnd: () => number): Float64Array {
  const h = new Float64Array(cols * cols), T = 3 * cols;
  for (let t = 0; t < T; t++) {
    const common = rnd();
    const x = Float64Array.from({ length: cols }, (_, c) => common * (1 + c / cols) + 0.3 * rnd());
    for (let i = 0; i < cols; i++) for (let j = 0; j < cols; j++) h[i * cols + j] += (x[i] * x[j]) / T;
  }
  return h;
}

/**
 * A reader of `w`'s values, as a tensor source gives them: copied into the scratch, after an await; the
 * largest read so far in `reads.most`.
 */
const rowsOf =
  (w: Float32Array, reads = { most: 0 }) => async (start: number, count: number, scratch: Float32Array) => {
    await Promise.resolve();
    reads.most = Math.max(reads.most, count);
    scratch.set(w.subarray(start, start + count));
    return scratch;
  };

const sameMatrix = (a: LutMatrix, b: LutMatrix) =>
  a.expBase === b.expBase && Buffer.from(a.nibbles).equals(Buffer.from(b.nibbles)) &&
  Buffer.from(a.scales).equals(Buffer.from(b.scales));

test("the engine gives quantizeMatrixGptq's bits on 1, 2 and 3 threads, whole or read by blocks of rows", async () => {
  const rnd = lcg(7);
  const cases = [[16, 64], [37, 96], [70, 160], [8, 320]].map(([rows, cols]) => {
    const w = Float32Array.from({ length: rows * cols }, rnd);
    // A zero group and a large weight: the first pass's edge cases.
    w.fill(0, 32, 64), w[5] = 40;
    const fold = Float64Array.from({ length: cols }, () => 0.5 + rnd());
    const h = hessian(cols, rnd);
    const want = quantizeMatrixGptq("m", Float64Array.from(w, (v, k) => v * fold[k % cols]), rows, cols, h);
    return { rows, cols, w, fold, h, want };
  });
  for (const [threads, rowsValues] of [[1, undefined], [2, undefined], [3, undefined], [2, 1000]] as const) {
    const engine = gptqEngine(threads, rowsValues);
    try {
      await engine.ready;
      for (const { rows, cols, w, fold, h, want } of cases) {
        const reads = { most: 0 };
        const got = await engine.quantize("m", rowsOf(w, reads), fold, rows, cols, () => h, undefined);
        expect(sameMatrix(got.matrix, want.matrix)).toBe(true);
        expect(got.error).toEqual(want.error);
        // By blocks, no read is more than a block's whole rows: the matrix is never held whole.
        const most = rowsValues ? Math.max(1, Math.floor(rowsValues / cols)) * cols : rows * cols;
        expect(reads.most).toBe(Math.min(most, rows * cols));
      }
    } finally {
      engine.close();
    }
  }
});

test("matrices of one key share a factor: the hessian is asked for once, the bits are a fresh factor's", async () => {
  const rnd = lcg(11), cols = 96, h = hessian(cols, rnd);
  const engine = gptqEngine(2);
  try {
    await engine.ready;
    let asked = 0;
    const key = {};
    for (const rows of [40, 24, 24]) {
      const w = Float32Array.from({ length: rows * cols }, rnd);
      const got = await engine.quantize("m", rowsOf(w), undefined, rows, cols, () => (asked++, h), key);
      expect(sameMatrix(got.matrix, quantizeMatrixGptq("m", w, rows, cols, h).matrix)).toBe(true);
    }
    expect(asked).toBe(1);
  } finally {
    engine.close();
  }
});

test("the pruned first pass finds the full first pass's largest exponent", () => {
  const rnd = lcg(3);
  for (const [groups, cols, spread] of [[64, 256, 1], [300, 96, 8], [5, 32, 100], [40, 64, 0]]) {
    const imp = Float64Array.from({ length: cols }, () => 0.1 + rnd() + 0.5);
    const w = Float64Array.from(
      { length: groups * 32 },
      () => rnd() * 2 ** Math.floor((rnd() + 0.5) * spread),
    );
    if (spread === 0) w.fill(0);
    const g0 = 3 * (cols / 32);
    const full = surveyBlock(w, { g0, below: 2, imp, impCols: cols, cols }).eMax;
    expect(gptqFirstPass(w, g0, groups, imp, cols)).toBe(full);
  }
});

test("a model quantized with the engine is the model quantized without it, read by blocks of rows and with its covariances from a file", async () => {
  const config = { ...FUZZ_LUT4_CONFIG, max_position_embeddings: 64 };
  const tensors = initParams(config, 5);
  const windows = [Array.from({ length: 48 }, (_, i) => (i * 13 + 1) % config.vocab_size)];
  const covariance = inputCovariance(config, tensors, windows, kernelSet("wasm"));
  // The same covariances read back from a file, as a calibration past SPILL_BYTES hands them over.
  const file = createCovarianceFile();
  for (const data of new Set(covariance.values())) {
    file.put([...covariance].filter(([, c]) => c === data).map(([name]) => name), data);
  }
  const run = async (
    gptq?: ReturnType<typeof gptqEngine>,
    cov = covariance as ReadonlyMap<string, Float64Array>,
  ) => {
    const mats: LutMatrix[] = [];
    const { errors } = await quantizeModelStreamed(config, tensors.map(tensorSource), {
      head: "separate",
      covariance: cov,
      gptq,
    }, (m) => Promise.resolve(void mats.push(m)));
    return { mats, errors };
  };
  await file.written(); // so the quantizer reads them back from the file
  // The second engine reads each matrix from its source 500 values' worth of rows at a time.
  const engine = gptqEngine(2), byBlocks = gptqEngine(2, 500);
  try {
    await Promise.all([engine.ready, byBlocks.ready]);
    const [a, b, c] = [await run(), await run(engine), await run(byBlocks, file.covariances)];
    expect(a.mats.length).toBe(b.mats.length);
    a.mats.forEach((m, i) => expect(sameMatrix(m, b.mats[i])).toBe(true));
    expect(b.errors).toEqual(a.errors);
    expect(c.mats.length).toBe(a.mats.length);
    a.mats.forEach((m, i) => expect(sameMatrix(m, c.mats[i])).toBe(true));
    expect(c.errors).toEqual(a.errors);
  } finally {
    engine.close(), byBlocks.close();
    file.close();
  }
});

/** The engine's answer on a seeded matrix, hashed: what the Deno child prints. */
const SCRIPT = (gptq: string) => `
  import { gptqEngine } from ${JSON.stringify(gptq)};
  import { createHash } from "node:crypto";
    let s = 5;
  const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 2 ** 32) - 0.5;
  const rows = 48, cols = 192, T = 3 * cols, h = new Float64Array(cols * cols);
  for (let t = 0; t < T; t++) {
    const c = rnd(), x = Float64Array.from({ length: cols }, (_, i) => c * (1 + i / cols) + 0.3 * rnd());
    for (let i = 0; i < cols; i++) for (let j = 0; j < cols; j++) h[i * cols + j] += (x[i] * x[j]) / T;
  }
  const w = Float32Array.from({ length: rows * cols }, rnd);
  const engine = gptqEngine(2);
  await engine.ready;
  const read = (start: number, count: number) => w.subarray(start, start + count);
  const { matrix, error } = await engine.quantize("m", read, undefined, rows, cols, () => h, undefined);
  engine.close();
  console.log(createHash("sha256").update(matrix.nibbles).update(matrix.scales)
    .update(String(matrix.expBase) + JSON.stringify(error)).digest("hex"));
`;

crossProcessTest("Deno's GPTQ engine gives Bun's bits", () => {
  const path = fileURLToPath(new URL("../../quantize/gptq.ts", import.meta.url));
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { encoding: "utf8" });
    expect(r.stderr.replace(/^Download .*\n/gm, "")).toBe("");
    expect(r.status).toBe(0);
    return r.stdout.trim();
  };
  const deno = run("deno", ["eval", "--ext=ts", SCRIPT(path)]);
  const bun = run("bun", ["--eval", SCRIPT(path)]);
  expect(deno).toMatch(/^[0-9a-f]{64}$/);
  expect(deno).toBe(bun);
});

// The calibration pass's products and covariance sums (kernels/wasm/covariance.ts) against the
// WebAssembly kernel set's own: `matmul` gives kernels/wasm/kernels.ts `matmul`'s bits, and `addOuter`
// gives the f64 sums of `matmulTN(p, x, x, K, M, K)`'s f32 products over their upper triangle, on 1, 2
// and 3 threads (each output written by one share, so the same bits on any number), with the splitting
// threshold crossed both ways.
import { expect, test } from "bun:test";
import { createCovarianceKernels, SPLIT_MACS } from "../../kernels/wasm/covariance.ts";
import { wasmKernels } from "../../kernels/wasm/kernels.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(31);
const rand = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
const W = wasmKernels!;

test("matmul and addOuter: the WebAssembly set's bits, on any number of threads", async () => {
  const shapes: Array<[number, number, number]> = [[3, 10, 7], [40, 72, 64], [256, 290, 136]];
  expect(Math.min(256 * 290 * 136, (256 * 290 * 290) / 2)).toBeGreaterThan(SPLIT_MACS); // the last is split
  for (const threads of [1, 2, 3]) {
    const cov = createCovarianceKernels(threads);
    try {
      await cov.ready;
      for (const [M, K, N] of shapes) {
        cov.clearSums();
        const s = cov.sum(K), w = rand(N * K), x = rand(M * K), x2 = rand(M * K);
        const packed = await cov.pack((start, count) => w.subarray(start, start + count), N, K);
        const got = new Float32Array(M * N), want = new Float32Array(M * N);
        cov.matmul(got, x, packed, M);
        W.matmul(want, x, w, M, K, N);
        expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer))).toBe(true);
        // Two calls: the f32 products of each, widened and added into f64 sums in call order.
        cov.addOuter(s, x, M);
        cov.addOuter(s, x2, M);
        const sum = new Float64Array(K * K), p = new Float32Array(K * K);
        for (const a of [x, x2]) {
          W.matmulTN(p, a, a, K, M, K);
          for (let i = 0; i < p.length; i++) sum[i] += p[i];
        }
        for (let i = 0; i < K; i++) for (let j = 0; j < i; j++) sum[i * K + j] = sum[j * K + i];
        for (let i = 0; i < sum.length; i++) sum[i] /= 7;
        const mean = cov.takeSum(s, 7);
        expect(mean.every((v, i) => Object.is(v, sum[i]))).toBe(true);
      }
    } finally {
      cov.close();
    }
  }
});

test("pack reads a matrix a chunk of rows at a time, from any reader", async () => {
  const cov = createCovarianceKernels(1);
  try {
    const N = 1100, K = 256, w = rand(N * K), x = rand(5 * K);
    let reads = 0;
    const packed = await cov.pack(
      async (start, count, scratch) => {
        reads++;
        scratch.set(w.subarray(start, start + count));
        return await Promise.resolve(scratch);
      },
      N,
      K,
    );
    expect(reads).toBeGreaterThan(1);
    const got = new Float32Array(5 * N), want = new Float32Array(5 * N);
    cov.matmul(got, x, packed, 5);
    W.matmul(want, x, w, 5, K, N);
    expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer))).toBe(true);
  } finally {
    cov.close();
  }
});

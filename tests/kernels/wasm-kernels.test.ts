// The WebAssembly SIMD kernels against the JavaScript reference (kernels/cpu.ts, kernels/cpu-grad.ts)
// on random shapes with ragged edges, and the assembler and the fallback underneath them.
//
// Bounds. A matrix product's output is the f32 sum s = sum_k a_k b_k taken in k order, each product
// and sum rounded to f32; the reference sums in f64 and rounds once. So it must equal, bit for bit,
// that sum simulated with Math.fround, and differ from the reference by at most
// (K + 1) * 2^-24 * sum_k |a_k b_k| (+ 2^-24 |c| when accumulating). Attention (a product, a
// softmax with a polynomial exp of relative error about 2e-7, a product) must stay within
// 2e-5 * max(1, max |reference|) on inputs in [-1, 1].
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { assemble, fn, I32, op, simdSupported, sleb, uleb } from "../../kernels/wasm/asm.ts";
import { createWasmKernels, FROZEN_SLOTS, wasmKernels } from "../../kernels/wasm/kernels.ts";
import * as cpu from "../../kernels/cpu.ts";
import * as grad from "../../kernels/cpu-grad.ts";
import { defaultKernels, kernelSet, referenceKernels } from "../../kernels/kernels.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(13);
const rand = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);
const W = wasmKernels!;
const U = 2 ** -24;

test("the assembler: LEB128 encodings and a module that runs", () => {
  expect(uleb(0)).toEqual([0]);
  expect(uleb(624485)).toEqual([0xe5, 0x8e, 0x26]);
  expect(sleb(-123456)).toEqual([0xc0, 0xbb, 0x78]);
  expect(sleb(64)).toEqual([0xc0, 0x00]);
  expect(sleb(-1)).toEqual([0x7f]);
  const add = fn([I32, I32], [I32], [], [op.get(0), op.get(1), op.i32_add]);
  const bytes = assemble({ pages: 1, functions: { add } });
  expect(WebAssembly.validate(bytes)).toBe(true);
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  expect((exports.add as (a: number, b: number) => number)(40, 2)).toBe(42);
  expect(simdSupported()).toBe(true);
  expect(W).toBeDefined();
});

/** The three product forms as (A(m, k), B(k, n)) accessors over the operands' layouts. */
const FORMS = {
  matmul: {
    f: W.matmul,
    ref: cpu.matmul,
    A: (a: Float32Array, _M: number, K: number) => (m: number, k: number) => a[m * K + k],
    B: (b: Float32Array, K: number, _N: number) => (k: number, n: number) => b[n * K + k],
  },
  matmulNN: {
    f: W.matmulNN,
    ref: refNN,
    A: (a: Float32Array, _M: number, K: number) => (m: number, k: number) => a[m * K + k],
    B: (b: Float32Array, _K: number, N: number) => (k: number, n: number) => b[k * N + n],
  },
  matmulTN: {
    f: W.matmulTN,
    ref: refTN,
    A: (a: Float32Array, M: number, _K: number) => (m: number, k: number) => a[k * M + m],
    B: (b: Float32Array, _K: number, N: number) => (k: number, n: number) => b[k * N + n],
  },
};

function refNN(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  acc = false,
) {
  referenceKernels.matmulNN(out, a, b, M, K, N, acc);
}
function refTN(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  acc = false,
) {
  referenceKernels.matmulTN(out, a, b, M, K, N, acc);
}

for (const [name, form] of Object.entries(FORMS)) {
  test(`${name}: the fixed-order f32 sum exactly, and the reference within (K+1) 2^-24 sum|ab|, on ragged shapes`, () => {
    const shapes = [
      [1, 1, 1],
      [1, 96, 256],
      [3, 5, 7],
      [4, 8, 8],
      [5, 9, 17],
      [13, 31, 9],
      [37, 64, 33],
      [
        64,
        100,
        3,
      ],
      [67, 45, 130],
      [9, 4500, 6],
    ]; // the last: A packed in chunks of 4 rows (long K)
    for (let i = 0; i < 6; i++) shapes.push([1 + rng.int(40), 1 + rng.int(70), 1 + rng.int(40)]);
    for (const [M, K, N] of shapes) {
      for (const accumulate of [false, true]) {
        const a = rand(M * K), b = rand(K * N), c0 = rand(M * N);
        const got = c0.slice(), want = c0.slice();
        form.f(got, a, b, M, K, N, accumulate);
        form.ref(want, a, b, M, K, N, accumulate);
        const A = form.A(a, M, K), B = form.B(b, K, N);
        let exact = 0, within = 0;
        for (let m = 0; m < M; m++) {
          for (let n = 0; n < N; n++) {
            let s = 0, mag = 0;
            for (let k = 0; k < K; k++) {
              s = Math.fround(s + Math.fround(A(m, k) * B(k, n))), mag += Math.abs(A(m, k) * B(k, n));
            }
            const o = m * N + n, sim = accumulate ? Math.fround(c0[o] + s) : s;
            if (Object.is(got[o], sim)) exact++;
            const bound = (K + 1) * U * mag + (accumulate ? U * Math.abs(c0[o]) * 2 : 0);
            if (Math.abs(got[o] - want[o]) <= bound) within++;
          }
        }
        expect(`${M}x${K}x${N} ${accumulate}: ${exact}`).toBe(`${M}x${K}x${N} ${accumulate}: ${M * N}`);
        expect(within).toBe(M * N);
      }
    }
  });
}

test("a product's row does not depend on how many rows came with it (decode = prefill), and repeats", () => {
  const M = 29, K = 96, N = 258, a = rand(M * K), b = rand(N * K);
  const all = new Float32Array(M * N), again = new Float32Array(M * N), row = new Float32Array(N);
  W.matmul(all, a, b, M, K, N);
  W.matmul(again, a, b, M, K, N);
  expect(again).toEqual(all);
  for (const m of [0, 5, 28]) {
    W.matmul(row, a.subarray(m * K, (m + 1) * K), b, 1, K, N);
    expect(row).toEqual(all.subarray(m * N, (m + 1) * N));
  }
});

test("a frozen weight gives the unfrozen product's bits: one row or many, accumulating, kept or packed again", () => {
  const bits = (x: Float32Array) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  // 4,000 slots hold two of the small weights' packed copies (1,600 each), so a third drops them all,
  // and never the large one (25,344), which then takes the unfrozen path.
  for (const budget of [FROZEN_SLOTS, 4000]) {
    const F = createWasmKernels(budget);
    const weights: [Float32Array, number, number][] = [
      [rand(33 * 40), 40, 33],
      [rand(33 * 40), 40, 33],
      [rand(33 * 40 + 7), 40, 33], // a longer array than the product reads
      [rand(258 * 96), 96, 258],
    ];
    for (const [w] of weights) F.freeze(w);
    for (let round = 0; round < 3; round++) {
      for (const i of [0, 1, 2, 3, 2, 0]) {
        const [w, K, N] = weights[i];
        for (const M of [1, 7]) {
          for (const accumulate of [false, true]) {
            const a = rand(M * K), start = rand(M * N);
            const got = start.slice(), want = start.slice();
            F.matmul(got, a, w, M, K, N, accumulate);
            W.matmul(want, a, w, M, K, N, accumulate);
            expect(bits(got)).toEqual(bits(want));
          }
        }
      }
    }
  }
});

const close = (got: Float32Array, want: Float32Array, what: string) => {
  let peak = 1, worst = 0;
  for (let i = 0; i < want.length; i++) peak = Math.max(peak, Math.abs(want[i]));
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  expect(`${what}: ${worst <= 2e-5 * peak}`).toBe(`${what}: true`);
};

test("attention forward and backward match kernels/cpu-grad.ts within 2e-5 (ragged T, GQA, odd head sizes)", () => {
  for (
    const [T, heads, kvHeads, hd] of [[1, 2, 1, 4], [7, 4, 2, 6], [33, 4, 2, 32], [70, 4, 4, 5], [
      130,
      6,
      2,
      16,
    ]]
  ) {
    const s = { T, heads, kvHeads, headDim: hd }, qDim = heads * hd, kvDim = kvHeads * hd;
    const q = rand(T * qDim), k = rand(T * kvDim), v = rand(T * kvDim), dOut = rand(T * qDim);
    const o1 = new Float32Array(T * qDim),
      o2 = o1.slice(),
      p1 = new Float32Array(heads * T * T),
      p2 = p1.slice();
    grad.attentionForward(o1, p1, q, k, v, s);
    W.attentionForward(o2, p2, q, k, v, s);
    close(o2, o1, `out T=${T}`);
    close(p2, p1, `probs T=${T}`);
    let masked = 0; // probabilities past the causal mask must be exactly 0
    for (let h = 0; h < heads; h++) {
      for (let t = 0; t < T; t++) {
        for (let p = t + 1; p < T; p++) {
          masked += p2[(h * T + t) * T + p] === 0 ? 0 : 1;
        }
      }
    }
    expect(masked).toBe(0);
    const seed = [rand(T * qDim), rand(T * kvDim), rand(T * kvDim)]; // backward accumulates into these
    const g1 = seed.map((x) => x.slice()), g2 = seed.map((x) => x.slice());
    grad.attentionBackward(g1[0], g1[1], g1[2], dOut, p1, q, k, v, s);
    W.attentionBackward(g2[0], g2[1], g2[2], dOut, p1, q, k, v, s);
    ["dq", "dk", "dv"].forEach((n, i) => close(g2[i], g1[i], `${n} T=${T}`));
  }
});

test("attention over a KV cache matches kernels/cpu.ts attendCached within 2e-5, from any start position", () => {
  for (
    const [T, pos0, heads, kvHeads, hd] of [[1, 0, 4, 2, 32], [1, 77, 4, 2, 32], [5, 3, 2, 1, 6], [
      40,
      0,
      4,
      2,
      32,
    ], [35, 33, 4, 2, 32]]
  ) {
    const n = pos0 + T, qDim = heads * hd, kvDim = kvHeads * hd;
    const q = rand(T * qDim), keys = rand(n * kvDim + 5), values = rand(n * kvDim + 5);
    const want = new Float32Array(T * qDim), got = want.slice();
    cpu.attendCached(want, q, keys, values, T, pos0, heads, kvHeads, hd);
    W.attendCached(got, q, keys, values, T, pos0, heads, kvHeads, hd);
    close(got, want, `T=${T} pos0=${pos0}`);
  }
});

test("kernel selection: ref and wasm by name, wasm the default, an unknown name refused", () => {
  expect(kernelSet("ref")).toBe(referenceKernels);
  expect(kernelSet("ref").name).toBe("ref");
  expect(kernelSet("wasm")).toBe(W);
  expect(kernelSet("wasm").name).toBe("wasm");
  expect(defaultKernels).toBe(W);
  expect(() => kernelSet("gpu" as "ref")).toThrow(/wasm or ref/);
});

crossProcessTest(
  "without WebAssembly SIMD the kernels fall back to JavaScript and say so in one line",
  () => {
    const script = `
    WebAssembly.validate = () => false;
    const k = await import(${JSON.stringify(new URL("../../kernels/kernels.ts", import.meta.url).pathname)});
    console.log(k.defaultKernels.name, k.kernelSet("wasm").name);`;
    const r = spawnSync("bun", ["--eval", script], { encoding: "utf8" });
    expect(r.status).toBe(0);
    expect(r.stdout.trim()).toBe("ref ref");
    expect(r.stderr.trim().split("\n")).toEqual([
      "ferry: this runtime lacks WebAssembly SIMD; using the JavaScript kernels",
    ]);
  },
);

test("SwiGLU forward and backward match the reference within 4e-6 max(1, |value|) (exp by polynomial)", () => {
  for (const n of [1, 3, 4, 37, 1000]) {
    const g = Float32Array.from(rand(n), (x, i) => x * (i % 7 === 0 ? 120 : 8)), u = rand(n), dh = rand(n);
    g[0] = n > 3 ? -100 : g[0];
    const h1 = new Float32Array(n), h2 = new Float32Array(n);
    for (let i = 0; i < n; i++) h1[i] = cpu.silu(g[i]) * u[i];
    W.swiglu(h2, g, u, n);
    const dg1 = new Float32Array(n),
      du1 = new Float32Array(n),
      dg2 = new Float32Array(n),
      du2 = new Float32Array(n);
    grad.swigluBackward(dg1, du1, dh, g, u);
    W.swigluBackward(dg2, du2, dh, g, u);
    for (const [got, want] of [[h2, h1], [dg2, dg1], [du2, du1]]) {
      let bad = 0;
      for (let i = 0; i < n; i++) {
        if (!(Math.abs(got[i] - want[i]) <= 4e-6 * Math.max(1, Math.abs(want[i])))) bad++;
      }
      expect(bad).toBe(0);
    }
  }
});

test("the packed store's one-row product (several panels at once, then single panels) gives matmul's bits", async () => {
  const { createPackedStore, GEMV_PANELS } = await import("../../kernels/wasm/packed.ts");
  const bits = (x: Float32Array) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  // N covers: fewer columns than one group of panels, whole groups, groups plus single panels, a ragged
  // last panel; K covers the unrolled k loop, its remainder and both together.
  const Ns = [5, 8 * GEMV_PANELS, 8 * GEMV_PANELS + 8, 8 * GEMV_PANELS * 3 + 13, 258];
  for (const threads of [1, 2]) {
    const store = createPackedStore({ threads, splitBytes: 0 });
    await store.ready;
    for (const N of Ns) {
      for (const K of [1, 3, 4, 9, 64]) {
        for (const narrow of [false, true]) {
          const w = rand(N * K);
          if (narrow) new Uint32Array(w.buffer).forEach((u, i, a) => (a[i] = u & 0xffff0000));
          const packed = store.pack(w, N, K);
          expect(packed.dtype).toBe(narrow ? "bf16" : "f32");
          const x = rand(K), got = new Float32Array(N), want = new Float32Array(N);
          store.matmul(got, x, packed, 1);
          W.matmul(want, x, w, 1, K, N);
          expect(`${threads} threads, N ${N}, K ${K}, ${packed.dtype}: ${bits(got).join()}`)
            .toBe(`${threads} threads, N ${N}, K ${K}, ${packed.dtype}: ${bits(want).join()}`);
        }
      }
    }
    store.close();
  }
});

test("packFrom reads a matrix a chunk at a time and keeps pack's bytes: bf16 or f32, however the reader answers", async () => {
  const { createPackedStore } = await import("../../kernels/wasm/packed.ts");
  const store = createPackedStore({ threads: 1 });
  const mem = (w: Parameters<typeof store.unpack>[0]) => new Uint8Array(store.unpack(w).buffer);
  const reads: number[] = [];
  for (const [N, K] of [[5, 3], [37, 64], [16, 40_000], [300, 1024]] as const) {
    for (const narrow of [true, false]) {
      const w = rand(N * K);
      if (narrow) new Uint32Array(w.buffer).forEach((u, i, a) => (a[i] = u & 0xffff0000));
      const want = store.pack(w, N, K);
      for (const into of [true, false]) {
        reads.length = 0;
        const got = await store.packFrom(
          async (start, count, scratch) => {
            await Promise.resolve(); // a reader that answers later, as a file's does
            reads.push(count);
            if (!into) return w.subarray(start, start + count); // the reader's own memory
            scratch.set(w.subarray(start, start + count));
            return scratch;
          },
          N,
          K,
        );
        expect(`${N}x${K} ${got.dtype} ${got.bytes}`).toBe(`${N}x${K} ${want.dtype} ${want.bytes}`);
        expect(mem(got)).toEqual(mem(want));
        expect(Math.max(...reads)).toBeLessThanOrEqual(Math.max(8 * K, 1 << 18)); // never the whole matrix at once
      }
    }
  }
  store.close();
});

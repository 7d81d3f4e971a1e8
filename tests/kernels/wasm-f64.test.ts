// The f64 WebAssembly kernels (kernels/wasm/f64.ts) against the scalar JavaScript loops they stand for,
// bit for bit (Object.is on every value): the product update in both signs over packed operands with
// ragged edges and offset k ranges, the forward substitution, and the widening sum. Lanes are different
// outputs, so nothing may differ, not even a zero's sign.
import { expect, test } from "bun:test";
import { assemble } from "../../kernels/wasm/asm.ts";
import { type F64Exports, f64Functions, MR64, NR64 } from "../../kernels/wasm/f64.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(29);
const rand = (n: number, shift = 0) => Float64Array.from({ length: n }, () => rng.next() * 2 - 1 + shift);
const ex = new WebAssembly.Instance(new WebAssembly.Module(assemble({ pages: 1, functions: f64Functions() })))
  .exports as unknown as F64Exports & { memory: WebAssembly.Memory };

/** A bump allocator over the instance's memory: f64 arrays in, byte addresses out. */
function arena() {
  let at = 0;
  const grow = (bytes: number) => {
    const need = at + bytes - ex.memory.buffer.byteLength;
    if (need > 0) ex.memory.grow(Math.ceil(need / 65536));
  };
  return {
    put(x: Float64Array) {
      grow(x.byteLength + 16);
      const o = at;
      new Float64Array(ex.memory.buffer).set(x, o / 8);
      at = Math.ceil((at + x.byteLength) / 16) * 16;
      return o;
    },
    take(bytes: number) {
      grow(bytes + 16);
      const o = at;
      at = Math.ceil((at + bytes) / 16) * 16;
      return o;
    },
    get: (o: number, n: number) => new Float64Array(ex.memory.buffer, o, n).slice(),
  };
}

const same = (a: Float64Array, b: Float64Array) =>
  a.length === b.length && a.every((v, i) => Object.is(v, b[i]));

test("update64_sub: C −= A B over packed panels, term by term in k order, the scalar loop's bits", () => {
  for (
    const [M, N, K] of [[1, 1, 1], [5, 7, 3], [8, 8, 16], [13, 9, 1], [4, 4, 0], [33, 17, 29], [6, 22, 70]]
  ) {
    const mem = arena(), ldc = N + 3;
    const A = rand(M * K), B = rand(K * N), C = rand(M * ldc);
    const want = C.slice();
    for (let m = 0; m < M; m++) {
      for (let n = 0; n < N; n++) {
        let s = want[m * ldc + n];
        for (let k = 0; k < K; k++) {
          s = s - A[m * K + k] * B[k * N + n];
        }
        want[m * ldc + n] = s;
      }
    }
    const a = mem.put(A), b = mem.put(B), c = mem.put(C);
    const pa = mem.take(Math.ceil(M / MR64) * MR64 * K * 16),
      pb = mem.take(Math.ceil(N / NR64) * NR64 * K * 8);
    const tmp = mem.take(MR64 * NR64 * 8);
    ex.pack_a64(a, K, 1, M, K, pa);
    ex.pack_b64(b, 1, N, N, K, pb);
    ex.update64_sub(pa, K * 16 * MR64, pb, K * 8 * NR64, M, N, K, c, ldc, tmp);
    expect(same(mem.get(c, M * ldc), want)).toBe(true);
  }
});

test("update64_sub: a k range inside a wider packing, as GPTQ's blocks use it", () => {
  const mem = arena(), M = 9, N = 11, K = 40, k0 = 12, k1 = 31;
  const A = rand(M * K), B = rand(K * N), C = rand(M * N);
  const want = C.slice();
  for (let m = 0; m < M; m++) {
    for (let n = 0; n < N; n++) {
      let s = want[m * N + n];
      for (let k = k0; k < k1; k++) s -= A[m * K + k] * B[k * N + n];
      want[m * N + n] = s;
    }
  }
  const a = mem.put(A), b = mem.put(B), c = mem.put(C);
  const pa = mem.take(Math.ceil(M / MR64) * MR64 * K * 16), pb = mem.take(Math.ceil(N / NR64) * NR64 * K * 8);
  ex.pack_a64(a, K, 1, M, K, pa);
  ex.pack_b64(b, 1, N, N, K, pb);
  const lda = K * 16 * MR64, ldb = K * 8 * NR64;
  ex.update64_sub(pa + k0 * 16 * MR64, lda, pb + k0 * 8 * NR64, ldb, M, N, k1 - k0, c, N, mem.take(256));
  expect(same(mem.get(c, M * N), want)).toBe(true);
});

test("fsub64: forward substitution by rows, vectorised across columns, the scalar loop's bits", () => {
  for (const [m, b] of [[9, 5], [16, 8], [1, 3], [24, 1], [37, 12], [2, 64]]) {
    const mem = arena(), ldx = m + 1, ldd = b + 2;
    const X = rand(b * ldx), D = rand(b * ldd, 2);
    const want = X.slice();
    for (let j = 0; j < b; j++) {
      for (let i = 0; i < m; i++) {
        let s = want[j * ldx + i];
        for (let k = 0; k < j; k++) s -= D[j * ldd + k] * want[k * ldx + i];
        want[j * ldx + i] = s / D[j * ldd + j];
      }
    }
    const x = mem.put(X), d = mem.put(D);
    ex.fsub64(x, ldx, m, b, d, ldd);
    expect(same(mem.get(x, X.length), want)).toBe(true);
  }
});

test("add_f32_to_f64: each f32 widened exactly and added", () => {
  for (const n of [0, 1, 2, 7, 64]) {
    const mem = arena(), s = rand(n), p = Float32Array.from(rand(n));
    const so = mem.put(s), po = mem.take(n * 4 + 16);
    new Float32Array(ex.memory.buffer, po, n).set(p);
    ex.add_f32_to_f64(so, po, n);
    expect(same(mem.get(so, n), Float64Array.from(s, (v, i) => v + p[i]))).toBe(true);
  }
});

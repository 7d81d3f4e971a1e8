// kernels/wasm/packed.ts, one copy of the matrices for several stores (`share`, `attach`, as the float
// engine's slots use it): the store that packed them packs no more once shared, an attached store computes
// the bits an unshared store does over them, and each store's products work in pages no other store writes.
import { expect, test } from "bun:test";
import { createPackedStore } from "../../kernels/wasm/packed.ts";
import { createRng } from "../../model/random.ts";
import { expectSameBits } from "../helpers/bits.ts";

test("stores on one memory never write in each other's work areas, and compute what an unshared store does", () => {
  const rng = createRng(9), random = (n: number) => Float32Array.from({ length: n }, () => rng.next() - 0.5);
  const N = 40, K = 24, w = random(N * K);
  const first = createPackedStore({ threads: 1 }), alone = createPackedStore({ threads: 1 });
  const mat = first.pack(w, N, K), same = alone.pack(w, N, K);
  const offered = first.share()!;
  expect(() => first.pack(w, N, K)).toThrow(/shared/);
  const second = createPackedStore({ threads: 1, attach: offered });
  expect(second.weightBytes).toBe(first.weightBytes);
  // The second store's work area begins where the memory ended: its input is the first thing there.
  const secondAt = offered.memory.buffer.byteLength;
  const x = random(2 * K), y = new Float32Array(2 * N), want = new Float32Array(2 * N);
  second.matmul(y, x, mat, 2);
  alone.matmul(want, x, same, 2);
  expectSameBits(y, want, "second");
  // A product larger than the first store's area so far takes pages past the second's, not over them.
  const big = random(600 * K), out = new Float32Array(600 * N), outWant = new Float32Array(600 * N);
  first.matmul(out, big, mat, 600);
  alone.matmul(outWant, big, same, 600);
  expectSameBits(out, outWant, "first");
  expectSameBits(new Float32Array(offered.memory.buffer, secondAt, 2 * K), x, "the second's area");
  [first, second, alone].forEach((s) => s.close());
});

test("an attached store splits its products between threads of its own, with the same bits", async () => {
  const rng = createRng(10), random = (n: number) => Float32Array.from({ length: n }, () => rng.next() - 0.5);
  const N = 70, K = 48, M = 5, w = random(N * K), x = random(M * K);
  const first = createPackedStore({ threads: 1 });
  const mat = first.pack(w, N, K);
  const second = createPackedStore({ threads: 2, splitBytes: 0, attach: first.share()! });
  await second.ready;
  const want = new Float32Array(M * N), got = new Float32Array(M * N);
  first.matmul(want, x, mat, M);
  for (const rows of [M, 1]) {
    second.matmul(got.subarray(0, rows * N), x, mat, rows);
    expectSameBits(got.subarray(0, rows * N), want.subarray(0, rows * N), `${rows} rows`);
  }
  first.close(), second.close();
});

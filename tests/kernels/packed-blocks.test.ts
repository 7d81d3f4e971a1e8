// kernels/wasm/packed.ts keeping a matrix as GGUF's quantized blocks (kernels/wasm/blocks.ts): for every
// block type, the products over the blocks (one row: whole panels dequantized in registers, a ragged last
// panel in scratch; more rows: the tile over panels dequantized in scratch, past one chunk of rows too)
// give the bits of the same products over the f32 matrix quantize/quants.ts dequantizes the blocks to, on
// 1 and 2 threads, with ragged N, several blocks along K and f16 scales small enough to be subnormal;
// `row` and `unpack` give that f32 matrix; the store holds the file's bytes (padded to whole panels); an
// infinite scale is refused.
import { expect, test } from "bun:test";
import { BLOCK_TYPES, type BlockDtype, GEMV_BLOCK_PANELS } from "../../kernels/wasm/blocks.ts";
import { createPackedStore, type PackedStore } from "../../kernels/wasm/packed.ts";
import { createRng } from "../../model/random.ts";
import { decodeTensor, encodeTensor, type GgmlType } from "../../quantize/quants.ts";
import { expectSameBits } from "../helpers/bits.ts";

const TYPES: [BlockDtype, GgmlType][] = [
  ["q8_0", "Q8_0"],
  ["q4_0", "Q4_0"],
  ["iq4_nl", "IQ4_NL"],
  ["q4_k", "Q4_K"],
  ["q6_k", "Q6_K"],
];

const rng = createRng(21);
const random = (n: number, scale: number) =>
  Float32Array.from({ length: n }, () => (rng.next() - 0.5) * scale);

/** The matrix's blocks packed from a reader that answers a few rows at a time, into scratch or not. */
function packBlocks(
  store: PackedStore,
  bytes: Uint8Array,
  N: number,
  K: number,
  dtype: BlockDtype,
  into: boolean,
) {
  const rowBytes = bytes.length / N;
  return store.packBlocks(
    async (row, rows, scratch) => {
      await Promise.resolve(); // a reader that answers later, as a file's does
      const own = bytes.subarray(row * rowBytes, (row + rows) * rowBytes);
      if (!into) return own;
      scratch.set(own);
      return scratch;
    },
    N,
    K,
    dtype,
  );
}

test("every block type: products over the blocks give the bits of the products over their f32 values", async () => {
  for (const threads of [1, 2]) {
    const store = createPackedStore({ threads, splitBytes: 0 });
    await store.ready;
    for (const [dtype, type] of TYPES) {
      const { values } = BLOCK_TYPES[dtype], panels = GEMV_BLOCK_PANELS;
      // N: fewer rows than one group of panels, whole groups, groups and a ragged last panel.
      for (const N of [5, 8 * panels, 8 * panels * 3 + 13, 258]) {
        for (const K of [values, 3 * values]) {
          // Weights of about 1e-3 give Q8_0 and Q4_K f16 scales below 2^-14: subnormal.
          for (const scale of [1, 2e-3]) {
            const label = `${threads} threads, ${dtype}, N ${N}, K ${K}, scale ${scale}`;
            const bytes = encodeTensor(type, random(N * K, scale)), f32 = decodeTensor(type, bytes, N * K);
            const kept = await packBlocks(store, bytes, N, K, dtype, N % 2 === 0);
            const plain = store.pack(f32, N, K, "f32");
            expect(`${label}: ${kept.dtype} ${kept.bytes}`)
              .toBe(`${label}: ${dtype} ${(Math.ceil(N / 8) * 8 * bytes.length) / N}`);
            expectSameBits(store.unpack(kept), f32, `${label} unpack`);
            for (const M of [1, 2, 9]) {
              const x = random(M * K, 1), got = new Float32Array(M * N), want = new Float32Array(M * N);
              store.matmul(got, x, kept, M);
              store.matmul(want, x, plain, M);
              expectSameBits(got, want, `${label}, M ${M}`);
            }
          }
        }
      }
    }
    store.close();
  }
});

test("a prefill longer than one chunk of A's rows (4 MiB splatted) gives the f32 product's bits", async () => {
  const store = createPackedStore({ threads: 2, splitBytes: 0 });
  await store.ready;
  const N = 21, K = 768, M = 400; // 400 rows of 768 inputs, 16 bytes each: 4.9 MB
  for (const [dtype, type] of TYPES) {
    const bytes = encodeTensor(type, random(N * K, 1)), f32 = decodeTensor(type, bytes, N * K);
    const kept = await packBlocks(store, bytes, N, K, dtype, true), plain = store.pack(f32, N, K, "f32");
    const x = random(M * K, 1), got = new Float32Array(M * N), want = new Float32Array(M * N);
    store.matmul(got, x, kept, M);
    store.matmul(want, x, plain, M);
    expectSameBits(got, want, `${dtype}, M ${M}`);
  }
  store.close();
});

test("a block whose scale is infinite is refused: its values are not finite", async () => {
  const store = createPackedStore({ threads: 1 });
  const bytes = encodeTensor("Q4_0", random(16 * 64, 1));
  bytes[3 * 18 + 1] = 0x7c, bytes[3 * 18] = 0; // row 1's second block: d = +infinity
  await expect(packBlocks(store, bytes, 16, 64, "q4_0", true)).rejects.toThrow(
    /row 1, block 1: a scale is not finite/,
  );
  store.close();
});

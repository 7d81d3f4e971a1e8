/**
 * The products of a calibration pass and its covariance sums, on one shared WebAssembly memory and a
 * kernels/pool.ts pool of threads: weight matrices packed once per use (a layer's), `matmul` over them
 * with the bits of kernels/wasm/kernels.ts `matmul` (the same `pack_a`, `pack_b` and `gemm`, each
 * output the same f32 sum in the same order, the panels split between threads), and f64 sums of
 * x xᵀ over positions: each call's f32 product xᵀx (the bits of `matmulTN(p, x, x, K, M, K)`), only
 * its upper triangle computed (the lower is the same sums), added into the f64 sums in the memory.
 * Every output is written by one share, so nothing depends on the number of threads.
 *
 * Memory: the sums, then the packed weights, then the work of one call, each region reset by its
 * `clear…`; the memory grows to the largest layer seen and stays until `close`.
 *
 * @example
 * ```ts
 * import { createCovarianceKernels } from "./covariance.ts";
 * declare const weights: Float32Array, x: Float32Array, y: Float32Array, N: number, K: number, M: number, n: number;
 * const cov = createCovarianceKernels(2);
 * await cov.ready;
 * const w = await cov.pack((start, count) => weights.subarray(start, start + count), N, K); // [N, K] f32
 * const s = cov.sum(K);
 * cov.matmul(y, x, w, M);             // y [M, N] = x [M, K] @ W^T
 * cov.addOuter(s, x, M);              // s += x^T x (upper triangle)
 * const mean = cov.takeSum(s, n);     // symmetric, divided by n
 * cov.close();
 * ```
 * @module
 */
import { assemble } from "./asm.ts";
import { gemm, MR, NR, packA, packB } from "./gen.ts";
import { addF32ToF64 } from "./f64.ts";
import type { ReadRows } from "./packed.ts";
import { createPool, type Pool, type PoolHandler, poolMemory } from "../pool.ts";

interface Exports {
  pack_a(src: number, is: number, ks: number, rows: number, K: number, dst: number): void;
  pack_b(src: number, cs: number, ks: number, N: number, K: number, dst: number): void;
  gemm(
    pa: number,
    pb: number,
    M: number,
    N: number,
    K: number,
    c: number,
    ldc: number,
    acc: number,
    tmp: number,
  ): void;
  add_f32_to_f64(s: number, p: number, n: number): void;
}

const PAGE = 65536, MAX_PAGES = 65536;
const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;
/** f32 slots of one share's splatted A chunk (as kernels/wasm/kernels.ts): about 256 KiB. */
const A_CHUNK = 65536;
/** Multiply-adds from which a job is split between the threads (about a millisecond of one thread's work). */
export const SPLIT_MACS = 1 << 23;
/** Rows of xᵀx a share computes at a time (a multiple of MR and NR). */
const OUTER_ROWS = 32;

/** The jobs (args[0]); the rest are byte offsets and counts. */
const OP = {
  /** [M, N, K, a, pb, c, scratch, stride]: C = A Bᵀ over packed B, by panels of B. */
  PRODUCT: 1,
  /** [src, cs, ks, N, K, dst]: pack_b of N columns, by panels. */
  PACK_B: 2,
  /** [M, K, x, pbx, s, scratch, stride]: s += the upper triangle of xᵀx, blocks of rows in turn. */
  OUTER: 3,
} as const;

/** The module every thread instantiates on the shared memory. */
export function covarianceModuleBytes(shared: boolean): Uint8Array<ArrayBuffer> {
  return assemble({
    pages: 1,
    importedMemory: { maximum: MAX_PAGES, shared },
    functions: { pack_a: packA(), pack_b: packB(), gemm: gemm(), add_f32_to_f64: addF32ToF64() },
  });
}

function instantiate(memory: WebAssembly.Memory): Exports {
  const shared = typeof SharedArrayBuffer === "function" && memory.buffer instanceof SharedArrayBuffer;
  const module = new WebAssembly.Module(covarianceModuleBytes(shared));
  return new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as Exports;
}

/** Rows of A one pack_a chunk holds for inputs of length K (kernels/wasm/kernels.ts's rule). */
const chunkRows = (M: number, K: number) =>
  Math.min(roundUp(M, MR), Math.max(MR, Math.floor(A_CHUNK / (4 * K) / MR) * MR));

/** [from, to) of `count` items for share `share` of `shares`. */
function span(count: number, share: number, shares: number): [number, number] {
  return [Math.floor((share * count) / shares), Math.floor(((share + 1) * count) / shares)];
}

/** One thread's share of every job, on its instance (kernels/wasm/covariance-task.ts on a worker). */
export function covarianceShare(memory: WebAssembly.Memory): PoolHandler {
  const ex = instantiate(memory);
  return (args, share, shares) => {
    const op = args[0];
    if (op === OP.PRODUCT) {
      const [M, N, K, a, pb, c] = [args[1], args[2], args[3], args[4] >>> 0, args[5] >>> 0, args[6] >>> 0];
      const scratch = (args[7] >>> 0) + share * (args[8] >>> 0);
      const [p0, p1] = span(Math.ceil(N / NR), share, shares);
      if (p0 === p1) return;
      const n0 = p0 * NR,
        n = Math.min(N, p1 * NR) - n0,
        rows = chunkRows(M, K),
        tmp = scratch + rows * 16 * K;
      for (let m0 = 0; m0 < M; m0 += rows) {
        const m = Math.min(rows, M - m0);
        ex.pack_a(a + m0 * K * 4, K, 1, m, K, scratch);
        ex.gemm(scratch, pb + p0 * NR * K * 4, m, n, K, c + (m0 * N + n0) * 4, N, 0, tmp);
      }
      return;
    }
    if (op === OP.PACK_B) {
      const [src, cs, ks, N, K, dst] = [args[1] >>> 0, args[2], args[3], args[4], args[5], args[6] >>> 0];
      const [p0, p1] = span(Math.ceil(N / NR), share, shares);
      const n0 = p0 * NR, n1 = Math.min(N, p1 * NR);
      if (n1 > n0) ex.pack_b(src + n0 * cs * 4, cs, ks, n1 - n0, K, dst + n0 * K * 4);
      return;
    }
    if (op === OP.OUTER) {
      const [M, K, x, pbx, s] = [args[1], args[2], args[3] >>> 0, args[4] >>> 0, args[5] >>> 0];
      const scratch = (args[6] >>> 0) + share * (args[7] >>> 0);
      const pa = scratch, tmp = pa + OUTER_ROWS * M * 16, p = roundUp(tmp + MR * NR * 4, 16);
      for (let b = share, i0 = b * OUTER_ROWS; i0 < K; b += shares, i0 = b * OUTER_ROWS) {
        const i1 = Math.min(K, i0 + OUTER_ROWS), cols = K - i0;
        // Rows i0 … i1 of xᵀx from column i0 on: A(i, m) = x[m][i0 + i], B(m, j) = x[m][j].
        ex.pack_a(x + i0 * 4, 1, K, i1 - i0, M, pa);
        ex.gemm(pa, pbx + i0 * M * 4, i1 - i0, cols, M, p, cols, 0, tmp);
        for (let i = i0; i < i1; i++) ex.add_f32_to_f64(s + (i * K + i0) * 8, p + (i - i0) * cols * 4, cols);
      }
      return;
    }
    throw new Error(`covariance: unknown job ${op}`);
  };
}

/** A packed weight matrix: where, and its shape [rows N, cols K]. */
export interface PackedWeight {
  readonly at: number;
  readonly rows: number;
  readonly cols: number;
}

/** A K × K f64 sum in the memory. */
export interface OuterSum {
  readonly at: number;
  readonly K: number;
}

/** The engine (see the module doc). */
export interface CovarianceKernels {
  readonly threads: number;
  readonly ready: Promise<void>;
  /** Bytes of the shared memory. */
  readonly memoryBytes: number;
  /** Packs the [N, K] matrix `read` gives, a chunk of rows at a time. */
  pack(read: ReadRows, N: number, K: number): Promise<PackedWeight>;
  /** Drops every packed weight (their handles must not be used again). */
  clearWeights(): void;
  /** out [M, N] = x [M, K] @ Wᵀ: the bits of kernels/wasm/kernels.ts `matmul`. */
  matmul(out: Float32Array, x: Float32Array, w: PackedWeight, M: number): void;
  /** A fresh K × K sum of zeros (after every sum already made; before any weight is packed). */
  sum(K: number): OuterSum;
  /** s += xᵀx (x [M, K] row-major f32) over its upper triangle: the f32 products widened and added. */
  addOuter(s: OuterSum, x: Float32Array, M: number): void;
  /**
   * The sum as a full symmetric matrix (the lower triangle copied from the upper), divided by n: into
   * `into` when given (K × K values), else a new array.
   */
  takeSum(s: OuterSum, n: number, into?: Float64Array): Float64Array;
  /** Drops every sum and every packed weight. */
  clearSums(): void;
  close(): void;
}

/** Rows read at a time while packing (about 1 MiB of f32). */
const PACK_VALUES = 1 << 18;

/**
 * The engine on `threads` threads (the caller's included); where shared memory is not allowed, a plain
 * memory and one thread.
 */
export function createCovarianceKernels(threads: number): CovarianceKernels {
  const { memory, threads: poolThreads } = poolMemory(threads);
  const local = covarianceShare(memory);
  const pool: Pool = createPool(
    poolThreads,
    new URL("./covariance-task.ts", import.meta.url),
    { memory },
    local,
  );
  const ex = instantiate(memory);
  const T = pool.threads;
  let f32 = new Float32Array(memory.buffer), f64 = new Float64Array(memory.buffer);
  const ensure = (bytes: number) => {
    const have = memory.buffer.byteLength;
    if (bytes > MAX_PAGES * PAGE) throw new RangeError(`calibration: ${bytes} bytes exceed wasm32's 4 GiB`);
    if (bytes > have) memory.grow(Math.ceil((bytes - have) / PAGE));
    if (f32.buffer.byteLength !== memory.buffer.byteLength) {
      f32 = new Float32Array(memory.buffer), f64 = new Float64Array(memory.buffer);
    }
  };
  // Regions: sums [0, sumsEnd), weights [sumsEnd, weightsEnd), a call's work above.
  let sumsEnd = 0, weightsEnd = 0;
  const args = new Int32Array(9);
  // A job of under SPLIT_MACS multiply-adds runs on this thread alone (waking the others would cost
  // more than they save); the bits are the same either way.
  const run = (values: number[], macs: number) => {
    args.set(values);
    if (T > 1 && macs >= SPLIT_MACS) pool.run(args.subarray(0, values.length));
    else local(args, 0, 1);
  };
  return {
    threads: T,
    ready: pool.ready,
    get memoryBytes() {
      return memory.buffer.byteLength;
    },
    async pack(read, N, K) {
      const at = weightsEnd, bytes = roundUp(N, NR) * K * 4;
      const rows = Math.max(NR, Math.floor(PACK_VALUES / K / NR) * NR);
      const scratch = roundUp(at + bytes, 16);
      ensure(scratch + rows * K * 4);
      // Chunks of whole panels; pack_b pads the last one with zeros.
      for (let n0 = 0; n0 < N; n0 += rows) {
        const n = Math.min(rows, N - n0);
        const view = new Float32Array(memory.buffer, scratch, n * K);
        const got = await read(n0 * K, n * K, view);
        if (got !== view) {
          ensure(scratch + rows * K * 4);
          new Float32Array(memory.buffer, scratch, n * K).set(got.subarray(0, n * K));
        }
        ex.pack_b(scratch, K, 1, n, K, at + n0 * K * 4);
      }
      weightsEnd = roundUp(at + bytes, 16);
      return { at, rows: N, cols: K };
    },
    clearWeights() {
      weightsEnd = sumsEnd;
    },
    matmul(out, x, w, M) {
      const N = w.rows, K = w.cols;
      if (M === 0 || N === 0) return;
      const a = weightsEnd, c = roundUp(a + M * K * 4, 16), scratch = roundUp(c + M * N * 4, 16);
      const stride = roundUp((chunkRows(M, K) * 4 * K + MR * NR) * 4, 16);
      ensure(scratch + stride * T);
      f32.set(x.length === M * K ? x : x.subarray(0, M * K), a / 4);
      run([OP.PRODUCT, M, N, K, a, w.at, c, scratch, stride], M * N * K);
      out.set(f32.subarray(c / 4, c / 4 + M * N));
    },
    sum(K) {
      if (weightsEnd !== sumsEnd) throw new Error("calibration: a sum after packed weights");
      const at = sumsEnd;
      sumsEnd = weightsEnd = roundUp(at + K * K * 8, 16);
      ensure(sumsEnd);
      f64.fill(0, at / 8, at / 8 + K * K);
      return { at, K };
    },
    addOuter(s, x, M) {
      const K = s.K;
      if (M === 0) return;
      const a = weightsEnd,
        pbx = roundUp(a + M * K * 4, 16),
        scratch = roundUp(pbx + roundUp(K, NR) * M * 4, 16);
      const stride = roundUp(OUTER_ROWS * M * 16 + MR * NR * 4 + 16 + OUTER_ROWS * K * 4, 16);
      ensure(scratch + stride * T);
      f32.set(x.length === M * K ? x : x.subarray(0, M * K), a / 4);
      run([OP.PACK_B, a, 1, K, K, M, pbx], 0);
      run([OP.OUTER, M, K, a, pbx, s.at, scratch, stride], (M * K * K) / 2);
    },
    takeSum(s, n, into) {
      const K = s.K, sum = f64.subarray(s.at / 8, s.at / 8 + K * K);
      if (into && into.length !== K * K) {
        throw new RangeError(`takeSum: ${into.length} values for ${K} × ${K}`);
      }
      const out = into ? (into.set(sum), into) : sum.slice();
      for (let i = 0; i < K; i++) for (let j = 0; j < i; j++) out[i * K + j] = out[j * K + i];
      for (let i = 0; i < out.length; i++) out[i] /= n;
      return out;
    },
    clearSums() {
      sumsEnd = weightsEnd = 0;
    },
    close: () => pool.close(),
  };
}

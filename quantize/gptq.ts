/**
 * GPTQ (quantize/lut4-quantize.ts `quantizeMatrixGptq`) on WebAssembly SIMD and a pool of threads,
 * with the same bits as that scalar JavaScript: the upper Cholesky factor U of (H + damp·I)⁻¹ and the
 * column-by-column error feedback, every value computed by the same sequence of f64 operations as the
 * scalar code, only blocked for the cache and split between threads (kernels/wasm/f64.ts says why that
 * changes no bit). What it adds is speed: at Qwen3-0.6B's widths a layer took 203 s of scalar
 * JavaScript; docs/benchmarks.md has what it takes here.
 *
 * - The factor: Cholesky of H + damp·I with rows and columns reversed, the inverse of that factor,
 *   reversed back: the scalar code's steps, each blocked by `BLOCK` columns, the big updates on the f64
 *   product kernel (`update64_sub`), the triangular solves on `fsub64`, each step's rows or columns shared
 *   between the threads. A factor is kept for the next matrix with the same key: q, k and v
 *   read one input, as gate and up do, so a layer factors four matrices, not seven.
 * - The feedback: rows are independent (U is shared), so each thread takes a range of rows and runs
 *   the whole sweep over them: per group of 32 columns its scale (the scalar `groupScale`), each
 *   column's codes and error, the error fed into the group's later columns at once and into the rest
 *   of the row through one product per group (`update64_sub`, K = 32) — GPTQ's "lazy batch", in the
 *   scalar code's order.
 *
 * Memory: one shared WebAssembly memory holding U and its packed copy and one n × n work matrix (n the
 * matrix's columns: 226 MB at 3,072), the rows in flight (at most `ROWS_VALUES` weights as f64, 32 MB,
 * read from the source a block at a time, so the matrix itself is never held: a separate head at
 * Qwen3's vocabulary is 622 MB of f32) and per thread a few MB of scratch. It grows to the largest
 * matrix seen and stays until `close`.
 *
 * @example
 * ```ts
 * import { type GptqEngine, gptqEngine } from "./gptq.ts";
 * type Args = Parameters<GptqEngine["quantize"]>;
 * declare const read: Args[1], fold: Args[2], hessian: ReturnType<Args[5]>, hessianKey: Args[6];
 * const gptq = gptqEngine(2);
 * await gptq.ready;
 * const { matrix } = await gptq.quantize("layers.0.q", read, fold, 2048, 1024, () => hessian, hessianKey);
 * gptq.close();
 * ```
 * @module
 */
import { assemble } from "../kernels/wasm/asm.ts";
import { type F64Exports, f64Functions, MR64, NR64 } from "../kernels/wasm/f64.ts";
import { createPool, type Pool, type PoolHandler, poolMemory } from "../kernels/pool.ts";
import type { LutMatrix } from "../kernels/int/gemv.ts";
import {
  errorOf,
  GPTQ_DAMP,
  gptqFirstPass,
  type GptqRunner,
  groupScale,
  notWholeGroups,
  roundHalfUp,
} from "./lut4-quantize.ts";

/** Columns per block of the factorisations (a multiple of MR64 and NR64). */
export const BLOCK = 64;
/** Rows a thread takes at a time in the factorisations' products. */
const CHUNK = 32;
/** Columns a thread takes at a time in the inverse's product. */
const COLUMNS = 64;
/** The most weights of one matrix in the memory at once (as f64: 32 MB); a taller matrix goes by blocks of rows. */
export const ROWS_VALUES = 1 << 22;

const PAGE = 65536, MAX_PAGES = 65536;
const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

/** The jobs a thread's share runs (args[0]); the arguments after it are byte offsets and counts. */
const OP = {
  /** [w, rows, cols, diag, out]: each share's largest first-pass exponent, as f64 at out + 8·share. */
  SURVEY: 1,
  /** [a, n, K0, K1, scratch, stride]: the panel below the diagonal block, by rows. */
  CHOL_PANEL: 2,
  /** [a, n, K0, K1, pb, scratch, stride]: the trailing update, row chunks in turn. */
  CHOL_UPDATE: 3,
  /** [src, cs, ks, N, K, dst]: pack_b64 of N columns, by panels. */
  PACK_B: 4,
  /** [li, n, I0, I1, pa, scratch, stride]: the inverse's product part for rows I0 … I1, column chunks in turn. */
  TRI_GEMM: 5,
  /** [x, ldx, m, b, d, ldd]: fsub64 by columns. */
  FSUB: 6,
  /** [w, rows, cols, u, up, diag, nib, sc, expBase, scratch, stride]: the error-feedback sweep, by rows. */
  SWEEP: 7,
} as const;

/** The f64 module on an imported memory (shared, so that every thread's instance runs on the same bytes). */
export function gptqModuleBytes(shared: boolean): Uint8Array<ArrayBuffer> {
  return assemble({ pages: 1, importedMemory: { maximum: MAX_PAGES, shared }, functions: f64Functions() });
}

/** An instance of the f64 module on `memory`. */
function instantiate(memory: WebAssembly.Memory): F64Exports {
  const shared = typeof SharedArrayBuffer === "function" && memory.buffer instanceof SharedArrayBuffer;
  const module = new WebAssembly.Module(gptqModuleBytes(shared));
  return new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as F64Exports;
}

/** [from, to) of `count` items for share `share` of `shares`, in multiples of `align`. */
function span(count: number, share: number, shares: number, align = 1): [number, number] {
  const units = Math.ceil(count / align);
  const from = Math.floor((share * units) / shares) * align,
    to = Math.floor(((share + 1) * units) / shares) * align;
  return [Math.min(from, count), Math.min(to, count)];
}

/** Columns and terms of one call of the product kernel: B's block (KC × NC f64, 512 KB) stays in L2, A's panel in L1. */
const NC = 256, KC = 256;

/**
 * C −= A B over packed panels (kernels/wasm/f64.ts `update64_sub`), by blocks of NC columns and KC terms:
 * each output still takes its terms in k order (the blocks of k go in order, C holding the sum between
 * them), only the memory traffic changes.
 */
function blocked(
  update: F64Exports["update64_sub"],
  pa: number,
  lda: number,
  pb: number,
  ldb: number,
  M: number,
  N: number,
  K: number,
  c: number,
  ldc: number,
  tmp: number,
): void {
  for (let n0 = 0; n0 < N; n0 += NC) {
    const nb = Math.min(NC, N - n0);
    for (let k0 = 0; k0 < K; k0 += KC) {
      const kb = Math.min(KC, K - k0);
      update(
        pa + k0 * 16 * MR64,
        lda,
        pb + (n0 / NR64) * ldb + k0 * 8 * NR64,
        ldb,
        M,
        nb,
        kb,
        c + n0 * 8,
        ldc,
        tmp,
      );
    }
  }
}

/**
 * The handler of one thread's share of every job (kernels/pool.ts): on a worker through
 * quantize/gptq-task.ts, on the caller's thread as share 0. Which share does what depends only on the
 * job and the share's index, and every output is written by one share, so the bits never depend on the
 * number of threads.
 */
export function gptqShare(memory: WebAssembly.Memory): PoolHandler {
  const ex = instantiate(memory);
  let f64 = new Float64Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
  const views = () => {
    if (f64.buffer.byteLength !== memory.buffer.byteLength) {
      f64 = new Float64Array(memory.buffer), u8 = new Uint8Array(memory.buffer);
    }
  };
  const tmpOf = (scratch: number) => scratch; // MR64 · NR64 f64 for an edge tile, first in a share's scratch
  const TMP = roundUp(MR64 * NR64 * 8, 16);
  return (args, share, shares) => {
    views();
    const op = args[0];
    if (op === OP.SURVEY) {
      const [w, rows, cols, diag, out] = [args[1] >>> 0, args[2], args[3], args[4] >>> 0, args[5] >>> 0];
      const [r0, r1] = span(rows, share, shares);
      const groups = ((r1 - r0) * cols) / 32;
      const imp = f64.subarray(diag / 8, diag / 8 + cols);
      f64[out / 8 + share] = groups > 0
        ? gptqFirstPass(
          f64.subarray(w / 8 + r0 * cols, w / 8 + r1 * cols),
          (r0 * cols) / 32,
          groups,
          imp,
          cols,
        )
        : -Infinity;
      return;
    }
    if (op === OP.CHOL_PANEL) {
      const [a, n, K0, K1, scratch] = [
        args[1] >>> 0,
        args[2],
        args[3],
        args[4],
        (args[5] >>> 0) + share * (args[6] >>> 0),
      ];
      const [i0, i1] = span(n - K1, share, shares);
      const m = i1 - i0, b = K1 - K0;
      if (m === 0) return;
      // The rows' panel transposed: PT[j][i] = A[K1 + i0 + i][K0 + j], rows of it contiguous.
      const pt = scratch / 8, A = a / 8;
      for (let i = 0; i < m; i++) {
        const row = A + (K1 + i0 + i) * n + K0;
        for (let j = 0; j < b; j++) f64[pt + j * m + i] = f64[row + j];
      }
      ex.fsub64(scratch, m, m, b, a + (K0 * n + K0) * 8, n);
      for (let i = 0; i < m; i++) {
        const row = A + (K1 + i0 + i) * n + K0;
        for (let j = 0; j < b; j++) f64[row + j] = f64[pt + j * m + i];
      }
      return;
    }
    if (op === OP.CHOL_UPDATE) {
      const [a, n, K0, K1, pb] = [args[1] >>> 0, args[2], args[3], args[4], args[5] >>> 0];
      const scratch = (args[6] >>> 0) + share * (args[7] >>> 0), tmp = tmpOf(scratch), pa = scratch + TMP;
      const b = K1 - K0;
      for (let c = share, r0 = K1 + c * CHUNK; r0 < n; c += shares, r0 = K1 + c * CHUNK) {
        const r1 = Math.min(n, r0 + CHUNK);
        ex.pack_a64(a + (r0 * n + K0) * 8, n, 1, r1 - r0, b, pa);
        blocked(
          ex.update64_sub,
          pa,
          b * 16 * MR64,
          pb,
          b * 8 * NR64,
          r1 - r0,
          r1 - K1,
          b,
          a + (r0 * n + K1) * 8,
          n,
          tmp,
        );
      }
      return;
    }
    if (op === OP.PACK_B) {
      const [src, cs, ks, N, K, dst] = [args[1] >>> 0, args[2], args[3], args[4], args[5], args[6] >>> 0];
      const [n0, n1] = span(N, share, shares, NR64);
      if (n1 > n0) ex.pack_b64(src + n0 * cs * 8, cs, ks, n1 - n0, K, dst + n0 * K * 8);
      return;
    }
    if (op === OP.TRI_GEMM) {
      const [li, n, I0, I1, pa] = [args[1] >>> 0, args[2], args[3], args[4], args[5] >>> 0];
      const scratch = (args[6] >>> 0) + share * (args[7] >>> 0), tmp = tmpOf(scratch), pb = scratch + TMP;
      for (let c = share, C0 = c * COLUMNS; C0 < I0; c += shares, C0 = c * COLUMNS) {
        const C1 = Math.min(I0, C0 + COLUMNS), K = I0 - C0;
        // Rows k < C0 of L⁻¹ are zero in these columns: the terms skipped are exact zeros.
        ex.pack_b64(li + (C0 * n + C0) * 8, 1, n, C1 - C0, K, pb);
        blocked(
          ex.update64_sub,
          pa + C0 * 16 * MR64,
          I0 * 16 * MR64,
          pb,
          K * 8 * NR64,
          I1 - I0,
          C1 - C0,
          K,
          li + (I0 * n + C0) * 8,
          n,
          tmp,
        );
      }
      return;
    }
    if (op === OP.FSUB) {
      const [x, ldx, m, b, d, ldd] = [args[1] >>> 0, args[2], args[3], args[4], args[5] >>> 0, args[6]];
      const [c0, c1] = span(m, share, shares, 2);
      if (c1 > c0) ex.fsub64(x + c0 * 8, ldx, c1 - c0, b, d, ldd);
      return;
    }
    if (op === OP.SWEEP) {
      const [w, rows, cols, u, up, diag, nib, sc, expBase] = [
        args[1] >>> 0,
        args[2],
        args[3],
        args[4] >>> 0,
        args[5] >>> 0,
        args[6] >>> 0,
        args[7] >>> 0,
        args[8] >>> 0,
        args[9],
      ];
      const scratch = (args[10] >>> 0) + share * (args[11] >>> 0), tmp = tmpOf(scratch);
      const [r0, r1] = span(rows, share, shares);
      const m = r1 - r0;
      if (m === 0) return;
      const E = scratch + TMP, pa = roundUp(E + m * 32 * 8, 16);
      sweep(ex, f64, u8, { w, cols, u, up, diag, nib, sc, expBase, r0, r1, E, pa, tmp });
      return;
    }
    throw new Error(`gptq: unknown job ${op}`);
  };
}

/** Scratch bytes a share needs for a sweep over `rows` rows: the edge tile, the errors, their packing. */
const sweepScratch = (rows: number) =>
  roundUp(MR64 * NR64 * 8, 16) + roundUp(rows * 32 * 8, 16) + roundUp(rows, MR64) * 32 * 16;

/**
 * The error-feedback sweep over rows r0 … r1 of the block at `w` (see the module doc): the scalar
 * `quantizeMatrixGptq`'s loop, one row's group at a time, the rest of each row updated per group by
 * the product kernel.
 */
function sweep(
  ex: F64Exports,
  f64: Float64Array,
  u8: Uint8Array,
  j: {
    w: number;
    cols: number;
    u: number;
    up: number;
    diag: number;
    nib: number;
    sc: number;
    expBase: number;
    r0: number;
    r1: number;
    E: number;
    pa: number;
    tmp: number;
  },
): void {
  const { cols, expBase, r0, r1 } = j, m = r1 - r0;
  const W = j.w / 8, U = j.u / 8, E = j.E / 8;
  const w = f64.subarray(W, W + (r1 * cols)), imp = f64.subarray(j.diag / 8, j.diag / 8 + cols);
  const nibbles = u8.subarray(j.nib, j.nib + (r1 * cols) / 2),
    scales = u8.subarray(j.sc, j.sc + (r1 * cols) / 32);
  for (let j0 = 0; j0 < cols; j0 += 32) {
    for (let r = r0; r < r1; r++) {
      const g = (r * cols + j0) >> 5;
      const s8 = groupScale(w, g, expBase, imp, j0);
      scales[g] = s8;
      const s = (16 + (s8 & 15)) * 2 ** (expBase + (s8 >> 4) - 4);
      const e = E + (r - r0) * 32;
      for (let jj = j0; jj < j0 + 32; jj++) {
        const k = r * cols + jj, q = Math.max(-8, Math.min(7, roundHalfUp(w[k] / s)));
        nibbles[k >> 1] |= (q + 8) << ((k & 1) * 4);
        const step = (w[k] - q * s) / f64[U + jj * cols + jj];
        f64[e + jj - j0] = step;
        const ur = U + jj * cols, wr = r * cols;
        for (let c = jj + 1; c < j0 + 32; c++) w[wr + c] -= step * f64[ur + c];
      }
    }
    const rest = cols - j0 - 32;
    if (rest === 0) continue;
    // W[rows, j0 + 32 …] −= E · U[j0 … j0 + 31, j0 + 32 …], term by term in j's order.
    ex.pack_a64(j.E, 32, 1, m, 32, j.pa);
    blocked(
      ex.update64_sub,
      j.pa,
      32 * 16 * MR64,
      j.up + (j0 + 32) * cols * 8 + j0 * 8 * NR64,
      cols * 8 * NR64,
      m,
      rest,
      32,
      j.w + (r0 * cols + j0 + 32) * 8,
      cols,
      j.tmp,
    );
  }
}

/** Threads GPTQ runs on by default: one per core, at most 4. */
export function gptqThreads(): number {
  const cores = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)?.hardwareConcurrency ??
    1;
  return Math.max(1, Math.min(4, cores));
}

/**
 * Whether a model's GPTQ is worth the engine: its MLP matrices hold 65,536 weights or more. Below
 * that (the `small` preset's 24,576) the scalar code's fraction of a second beats starting the workers;
 * the shipped model's 196,608 took about 3 s less on the engine. The bits are the same either way.
 */
export function gptqPays(config: { hidden_size: number; intermediate_size: number }): boolean {
  return config.hidden_size * config.intermediate_size >= 1 << 16;
}

/** The GPTQ engine: quantize/lut4-quantize.ts `GptqRunner` on a pool, plus its readiness. */
export interface GptqEngine extends GptqRunner {
  readonly threads: number;
  /** Resolves when the pool's workers are up; `quantize` needs it settled. */
  readonly ready: Promise<void>;
  /** Bytes of the shared memory (it grows to the largest matrix seen). */
  readonly memoryBytes: number;
  /** Milliseconds spent so far in each phase (for benchmarks). */
  readonly phases: Record<"factor" | "survey" | "sweep" | "error", number>;
}

/**
 * A GPTQ engine on `threads` threads (the caller's included). Its `quantize` gives the bits of
 * `quantizeMatrixGptq` on the folded matrix, on any number of threads; a matrix of more than
 * `rowsValues` weights goes through the memory by blocks of rows (tests pass a small one).
 */
export function gptqEngine(threads: number, rowsValues = ROWS_VALUES): GptqEngine {
  const { memory, threads: poolThreads } = poolMemory(threads);
  const local = gptqShare(memory);
  const pool: Pool = createPool(poolThreads, new URL("./gptq-task.ts", import.meta.url), { memory }, local);
  const ex = instantiate(memory);
  const T = pool.threads;
  let f64 = new Float64Array(memory.buffer);
  const ensure = (bytes: number) => {
    const have = memory.buffer.byteLength;
    if (bytes > MAX_PAGES * PAGE) throw new RangeError(`gptq: ${bytes} bytes exceed wasm32's 4 GiB`);
    if (bytes > have) memory.grow(Math.ceil((bytes - have) / PAGE));
    if (f64.buffer.byteLength !== memory.buffer.byteLength) f64 = new Float64Array(memory.buffer);
  };
  const job = (args: number[]) => pool.run(args);
  // Where a block of rows is read (kept: it is up to 16 MB a matrix).
  let rowsRead = new Float32Array(0);
  // The factor kept: its key, its width, the hessian's diagonal.
  let held: { key: unknown; n: number; diag: Float64Array } | undefined;
  // Layout for width n (bytes): U, its packing, the work matrix, the shared packing, the shares' scratch.
  const layout = (n: number, blockRows: number) => {
    const nn = n * n * 8, packed = roundUp(n, NR64) * n * 8;
    const u = 0, up = roundUp(u + nn, 16), a = roundUp(up + packed, 16), shared = roundUp(a + nn, 16);
    const scratch = roundUp(shared + 2 * BLOCK * n * 16, 16);
    const rowsShare = Math.ceil(blockRows / T);
    const stride = roundUp(
      Math.max(
        BLOCK * n * 8, // a panel's transpose
        256 + CHUNK * n * 16, // a block's packing (the Cholesky update)
        256 + COLUMNS * n * 8, // a column chunk's packing (inverse)
        sweepScratch(rowsShare),
      ),
      16,
    );
    const w = roundUp(scratch + T * stride, 16), diag = roundUp(w + blockRows * n * 8, 16);
    const nib = roundUp(diag + n * 8, 16), sc = roundUp(nib + (blockRows * n) / 2, 16);
    const slots = roundUp(sc + (blockRows * n) / 32, 16), end = slots + 8 * T;
    return { u, up, a, shared, scratch, stride, w, diag, nib, sc, slots, end };
  };

  // Lower Cholesky factor of the n × n matrix at `a`, in place (the lower triangle; the upper is scratch).
  const cholesky = (a: number, n: number, L: ReturnType<typeof layout>) => {
    const A = a / 8;
    for (let K0 = 0; K0 < n; K0 += BLOCK) {
      const K1 = Math.min(n, K0 + BLOCK);
      // The diagonal block, column by column (each entry the scalar loop's value).
      for (let j = K0; j < K1; j++) {
        for (let i = j; i < K1; i++) {
          let s = f64[A + i * n + j];
          for (let k = K0; k < j; k++) s -= f64[A + i * n + k] * f64[A + j * n + k];
          f64[A + i * n + j] = i === j ? Math.sqrt(Math.max(s, 1e-300)) : s / f64[A + j * n + j];
        }
      }
      if (K1 === n) break;
      job([OP.CHOL_PANEL, a, n, K0, K1, L.scratch, L.stride]);
      ex.pack_b64(a + (K1 * n + K0) * 8, n, 1, n - K1, K1 - K0, L.shared);
      job([OP.CHOL_UPDATE, a, n, K0, K1, L.shared, L.scratch, L.stride]);
    }
  };

  // U of (H + damp·I)⁻¹ = Uᵀ U into L.u, packed into L.up (the scalar `gptqFactor`'s steps and bits):
  // the damped hessian reversed, its Cholesky factor, that factor's inverse, reversed.
  const factor = (h: Float64Array, n: number, diag: Float64Array, L: ReturnType<typeof layout>) => {
    const mean = diag.reduce((x, y) => x + y, 0) / n || 1;
    const A = L.a / 8, Li = L.u / 8;
    f64.set(h, A);
    f64.subarray(A, A + n * n).reverse();
    for (let i = 0; i < n; i++) {
      const d = diag[n - 1 - i];
      f64[A + i * n + i] = (d > 0 ? d : 1) + GPTQ_DAMP * mean;
    }
    cholesky(L.a, n, L);
    // L⁻¹ by rows: identity, then each block of rows against the rows above it and its own.
    f64.fill(0, Li, Li + n * n);
    for (let i = 0; i < n; i++) f64[Li + i * n + i] = 1;
    for (let I0 = 0; I0 < n; I0 += BLOCK) {
      const I1 = Math.min(n, I0 + BLOCK);
      if (I0 > 0) {
        ex.pack_a64(L.a + I0 * n * 8, n, 1, I1 - I0, I0, L.shared);
        job([OP.TRI_GEMM, L.u, n, I0, I1, L.shared, L.scratch, L.stride]);
      }
      job([OP.FSUB, L.u + I0 * n * 8, n, I1, I1 - I0, L.a + (I0 * n + I0) * 8, n]);
    }
    f64.subarray(Li, Li + n * n).reverse();
    job([OP.PACK_B, L.u, 1, n, n, n, L.up]);
  };

  const phases = { factor: 0, survey: 0, sweep: 0, error: 0 };
  const timed = <R>(phase: keyof typeof phases, f: () => R): R => {
    const t = performance.now();
    try {
      return f();
    } finally {
      phases[phase] += performance.now() - t;
    }
  };
  const engine: GptqEngine = {
    threads: T,
    phases,
    ready: pool.ready,
    get memoryBytes() {
      return memory.buffer.byteLength;
    },
    async quantize(name, read, fold, rows, cols, hessian, key) {
      const notWhole = notWholeGroups(cols, `${name}: ${cols} columns`);
      if (notWhole) throw new RangeError(notWhole);
      const blockRows = Math.max(1, Math.min(rows, Math.floor(rowsValues / cols)));
      const L = layout(cols, blockRows);
      ensure(L.end);
      if (!held || key === undefined || held.key !== key || held.n !== cols) {
        held = undefined;
        const h = hessian();
        if (h.length !== cols * cols) throw new RangeError(`${name}: hessian is not ${cols} × ${cols}`);
        const diag = Float64Array.from({ length: cols }, (_, c) => h[c * cols + c]);
        timed("factor", () => factor(h, cols, diag, L));
        held = { key, n: cols, diag };
      }
      f64.set(held.diag, L.diag / 8);
      const W = L.w / 8;
      if (rowsRead.length < blockRows * cols) rowsRead = new Float32Array(blockRows * cols);
      // Rows r0 … r0 + n − 1 folded into the memory (the scalar code's Float64Array of the folded
      // matrix); their values as read are returned, for the error sums.
      const put = async (r0: number, n: number) => {
        const values = await read(r0 * cols, n * cols, rowsRead.subarray(0, n * cols));
        if (values.length < n * cols) throw new RangeError(`${name}: ${values.length} values for ${n} rows`);
        for (let k = 0; k < n * cols; k++) f64[W + k] = fold ? values[k] * fold[k % cols] : values[k];
        return values;
      };
      let eMax = -Infinity, values: Float32Array = new Float32Array(0);
      for (let r0 = 0; r0 < rows; r0 += blockRows) {
        const n = Math.min(blockRows, rows - r0);
        values = await put(r0, n);
        timed("survey", () => job([OP.SURVEY, L.w, n, cols, L.diag, L.slots]));
        for (let s = 0; s < T; s++) eMax = Math.max(eMax, f64[L.slots / 8 + s]);
      }
      const expBase = Number.isFinite(eMax) ? eMax - 15 : 0;
      const nibbles = new Uint8Array((rows * cols) / 2), scales = new Uint8Array((rows * cols) / 32);
      const matrix: LutMatrix = { name, rows, cols, expBase, nibbles, scales };
      const sums = { sse: 0, ss: 0, maxErr: 0 };
      const u8 = new Uint8Array(memory.buffer);
      for (let r0 = 0; r0 < rows; r0 += blockRows) {
        const n = Math.min(blockRows, rows - r0);
        if (blockRows < rows) values = await put(r0, n);
        u8.fill(0, L.nib, L.nib + (n * cols) / 2);
        timed(
          "sweep",
          () => job([OP.SWEEP, L.w, n, cols, L.u, L.up, L.diag, L.nib, L.sc, expBase, L.scratch, L.stride]),
        );
        nibbles.set(u8.subarray(L.nib, L.nib + (n * cols) / 2), (r0 * cols) / 2);
        scales.set(u8.subarray(L.sc, L.sc + (n * cols) / 32), (r0 * cols) / 32);
        timed("error", () => addError(sums, matrix, r0, n, values, fold));
      }
      return { matrix, error: errorOf(name, "matrix", rows * cols, sums.sse, sums.ss, sums.maxErr) };
    },
    close: () => pool.close(),
  };
  return engine;
}

/**
 * The scalar code's error sums, over rows r0 … r0 + n − 1 (`values` as read, unfolded): the folded
 * values against the dequantized f32 ones. Blocks added in row order give the whole matrix's sums.
 */
function addError(
  sums: { sse: number; ss: number; maxErr: number },
  m: LutMatrix,
  r0: number,
  n: number,
  values: Float32Array,
  fold: Float64Array | undefined,
): void {
  const { cols, expBase } = m, g0 = (r0 * cols) / 32;
  let { sse, ss, maxErr } = sums;
  for (let g = 0; g < (n * cols) / 32; g++) {
    // (u − 8) · (16 + m) · 2^e: every product exact, so the group's scale may be formed first.
    const sc = m.scales[g0 + g], s = (16 + (sc & 15)) * 2 ** (expBase + (sc >> 4) - 4);
    for (let k = 32 * g; k < 32 * g + 32; k++) {
      const x = fold ? values[k] * fold[k % cols] : values[k];
      const at = r0 * cols + k, u = (m.nibbles[at >> 1] >> ((at & 1) * 4)) & 15;
      const d = x - Math.fround((u - 8) * s);
      sse += d * d, ss += x * x, maxErr = Math.max(maxErr, Math.abs(d));
    }
  }
  sums.sse = sse, sums.ss = ss, sums.maxErr = maxErr;
}

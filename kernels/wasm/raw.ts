/**
 * The raw surface of one instance of the WebAssembly kernels: its memory as f32, a per-call arena, and
 * the strided product on f32 offsets. kernels/wasm/kernels.ts makes it (`bind`); kernels built on the
 * product (kernels/wasm/attention.ts) use it. Types only, so neither module imports the other's types.
 *
 * @example
 * ```ts
 * import type { WasmRaw } from "./raw.ts";
 * declare const raw: WasmRaw, M: number, N: number, K: number;
 * const [a, b, c, scratch] = raw.reserve([M * K, K * N, M * N, raw.gemmScratch(M, N, K)]);
 * raw.gemm(M, N, K, [a, K, 1], [b, N, 1], [c, N], false, scratch); // C = A B, all in the heap
 * ```
 * @module
 */

/** A strided matrix in the heap: [f32 offset, stride of the first index, stride of the second]. */
export type View = [number, number, number];

/** Direct access to the instance: its memory as f32, an arena, and the product on f32 offsets. */
export interface WasmRaw {
  /**
   * Reserves `sizes` f32 slots (each 16-byte aligned) for this call, from the start of the per-call
   * arena (above the frozen weights' packed copies); returns their f32 offsets.
   */
  reserve(sizes: number[]): number[];
  /** The memory as f32 (a fresh view after any growth: call after `reserve`). */
  heap(): Float32Array;
  /**
   * C (+)= A B at f32 offsets, with A(m, k) = heap[a0 + m*a1 + k*a2], B(k, n) = heap[b0 + k*b1 + n*b2]
   * and C[m, n] = heap[c0 + m*c1 + n], using scratch from f32 offset `scratch` on (past every operand).
   */
  gemm(
    M: number,
    N: number,
    K: number,
    A: View,
    B: View,
    C: [number, number],
    accumulate: boolean,
    scratch: number,
  ): void;
  /** f32 slots `gemm`'s scratch needs for a product of this shape. */
  gemmScratch(M: number, N: number, K: number): number;
  /** In place at f32 offset s: kernels/wasm/gen.ts `softmaxRows` (causal: valid0 + i entries in row i). */
  softmaxRows(s: number, rows: number, ld: number, valid0: number, scale: number): void;
  /** In place at f32 offset d: kernels/wasm/gen.ts `softmaxBackRows`. */
  softmaxBackRows(p: number, d: number, rows: number, ld: number, valid0: number, scale: number): void;
}

/**
 * The one kernel-set type: the float compute kernels the model, the trainer and the float engine are
 * made of, declared once. The JavaScript reference (`referenceKernels` in kernels/kernels.ts, over
 * kernels/cpu.ts and kernels/cpu-grad.ts) and the WebAssembly SIMD set (kernels/wasm/kernels.ts) are
 * values of this type; kernels/kernels.ts picks one by name (`kernelSet`). A kernel set is handed to
 * whatever runs (`buildModel(..., kernels)`, `createScratch(..., kernels)`), never switched globally.
 *
 * @example
 * ```ts
 * import type { Kernels } from "./types.ts";
 * import { kernelSet } from "./kernels.ts";
 * const x = new Float32Array(6), w = new Float32Array(12), y = new Float32Array(8);
 * const k: Kernels = kernelSet("ref");
 * k.matmul(y, x, w, 2, 3, 4); // y = x @ w^T
 * ```
 * @module
 */

/** The kernel sets by name: `wasm` (WebAssembly SIMD) and `ref` (the JavaScript reference). */
export type KernelsName = "wasm" | "ref";

/** A matrix product: `out` (+)= A B for A: M x K, B: K x N (each form says how a and b store them). */
export type Product = (
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  accumulate?: boolean,
) => void;

/** Shapes of a causal grouped-query attention over one sequence. */
export interface AttentionShape {
  T: number;
  heads: number;
  kvHeads: number;
  headDim: number;
}

/**
 * One kernel set. The sets agree within the bounds tests/kernels/wasm-kernels.test.ts states, not bit for bit
 * (the reference sums in f64, the SIMD kernels in f32); each set on its own gives the same bits on Deno
 * and Bun, run after run.
 */
export interface Kernels {
  /** Which set this is (`ref` also where `wasm` was asked for and the runtime lacks SIMD). */
  readonly name: KernelsName;
  /** `out[m, n] (+)= sum_k a[m, k] * b[n, k]`: x @ W^T for a weight W in [out, in] layout. */
  matmul: Product;
  /** `out[m, n] (+)= sum_k a[m, k] * b[k, n]`: a: [M, K] @ b: [K, N]. */
  matmulNN: Product;
  /** `out[m, n] (+)= sum_k a[k, m] * b[k, n]`: a^T @ b for a: [K, M], b: [K, N]. */
  matmulTN: Product;
  /**
   * Causal GQA attention forward over one sequence, saving the probabilities for the backward.
   * q: [T, heads*hd], k, v: [T, kvHeads*hd] (already normed and rotated); out: [T, heads*hd];
   * probs: [heads, T, T] (row t holds positions 0..t).
   */
  attentionForward(
    out: Float32Array,
    probs: Float32Array,
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    s: AttentionShape,
  ): void;
  /**
   * Causal GQA attention backward: from dOut and the saved probabilities, accumulates dq, dk, dv.
   * dS = P * (dP - sum_p P dP), with dP[t, p] = dOut[t] . v[p]; scores were q . k / sqrt(hd).
   */
  attentionBackward(
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    dOut: Float32Array,
    probs: Float32Array,
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    s: AttentionShape,
  ): void;
  /**
   * Causal grouped-query attention of T new positions over a KV cache: query rows q: [T, heads*hd] at
   * positions pos0.., cached keys and values [positions, kvHeads*hd] filled up to pos0 + T; writes
   * out: [T, heads*hd]. Scores are q . k / sqrt(hd), softmaxed over positions 0..pos0+t.
   */
  attendCached(
    out: Float32Array,
    q: Float32Array,
    keys: Float32Array,
    values: Float32Array,
    T: number,
    pos0: number,
    heads: number,
    kvHeads: number,
    headDim: number,
  ): void;
  /** The SwiGLU gate: `h[i] = silu(g[i]) * u[i]` for i < n (h may be g). */
  swiglu(h: Float32Array, g: Float32Array, u: Float32Array, n: number): void;
  /**
   * SwiGLU gate backward: h = silu(g) * u. Writes dg and du (overwriting) from dh.
   * silu'(g) = s * (1 + g * (1 - s)) with s = sigmoid(g).
   */
  swigluBackward(
    dg: Float32Array,
    du: Float32Array,
    dh: Float32Array,
    g: Float32Array,
    u: Float32Array,
  ): void;
  /**
   * Promises that `w` will never be written again, so `matmul` may keep a prepared (packed) copy of it
   * and skip preparing it on every call; the same bits either way. Only for weights nothing else will
   * write: a model read from a file for inference, never the trainer's live weights. The reference set
   * keeps nothing, so for it this does nothing.
   */
  freeze(w: Float32Array): void;
}

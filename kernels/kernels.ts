/**
 * The one place that picks the compute kernels: the WebAssembly SIMD kernels (kernels/wasm/, the
 * default where the runtime supports them) or the JavaScript reference (kernels/cpu.ts,
 * kernels/cpu-grad.ts). The model, the trainer and the measurements import their kernels from here;
 * `--kernels ref` on the scripts selects the reference.
 *
 * The two sets agree within the bounds tests/wasm-kernels.test.ts states, not bit for bit (the
 * reference sums in f64, the SIMD kernels in f32); each set on its own gives the same bits on Deno
 * and Bun, run after run.
 *
 * @example
 * ```ts
 * import { matmul, useKernels } from "../kernels/kernels.ts";
 * useKernels("ref");           // the JavaScript reference from here on
 * matmul(y, x, w, 2, 3, 4);    // y = x @ w^T
 * ```
 * @module
 */
import * as cpu from "./cpu.ts";
import * as grad from "./cpu-grad.ts";
import { type WasmKernels, wasmKernels } from "./wasm/kernels.ts";

export { argmax, rmsnorm, ropeHead, type RopeTables, ropeTables, silu, softmax, transpose } from "./cpu.ts";
export { type AttentionShape, crossEntropyBackward, rmsnormBackward, ropeBackward } from "./cpu-grad.ts";

/** The kernel sets: `wasm` (WebAssembly SIMD) and `ref` (the JavaScript reference). */
export type KernelsName = "wasm" | "ref";
/** The names `useKernels` accepts, for CLI help and checks. */
export const KERNELS: readonly KernelsName[] = ["wasm", "ref"];

type KernelSet = Pick<
  WasmKernels,
  | "matmul"
  | "matmulNN"
  | "matmulTN"
  | "attentionForward"
  | "attentionBackward"
  | "attendCached"
  | "swiglu"
  | "swigluBackward"
>;

// The reference forms of the transposed products: transpose, then cpu.ts's matmul (exactly the
// trainer's arithmetic before the SIMD kernels existed, so its logged runs still reproduce).
let tA: Float32Array = new Float32Array(0), tB: Float32Array = new Float32Array(0);
const grow = (t: Float32Array, n: number) => (t.length >= n ? t : new Float32Array(n));

const reference: KernelSet = {
  matmul: cpu.matmul,
  matmulNN(out, a, b, M, K, N, accumulate = false) {
    tB = grow(tB, K * N);
    cpu.transpose(tB, b, K, N);
    cpu.matmul(out, a, tB, M, K, N, accumulate);
  },
  matmulTN(out, a, b, M, K, N, accumulate = false) {
    tA = grow(tA, K * M), tB = grow(tB, K * N);
    cpu.transpose(tA, a, K, M);
    cpu.transpose(tB, b, K, N);
    cpu.matmul(out, tA, tB, M, K, N, accumulate);
  },
  attentionForward: grad.attentionForward,
  attentionBackward: grad.attentionBackward,
  attendCached: cpu.attendCached,
  swiglu(h, g, u, n) {
    for (let i = 0; i < n; i++) h[i] = cpu.silu(g[i]) * u[i];
  },
  swigluBackward: grad.swigluBackward,
};

let current: KernelSet = wasmKernels ?? reference;
let currentName: KernelsName = wasmKernels ? "wasm" : "ref";
if (!wasmKernels) console.error("ferry: this runtime lacks WebAssembly SIMD; using the JavaScript kernels");

/** Selects the kernel set from here on (in this thread); returns the one in use (`ref` if `wasm` is missing). */
export function useKernels(name: KernelsName): KernelsName {
  if (name !== "wasm" && name !== "ref") throw new RangeError(`kernels must be wasm or ref, got ${name}`);
  current = name === "wasm" && wasmKernels ? wasmKernels : reference;
  currentName = current === reference ? "ref" : "wasm";
  return currentName;
}

/**
 * Promises that these weights will never be written again, so the WebAssembly product may keep each one
 * packed in its memory and skip copying and packing it on every call (the same bits). Only for weights
 * nothing else will write: a model read from a file for inference, never the trainer's live weights.
 * The reference kernels need no promise.
 *
 * @example
 * ```ts
 * freezeWeights(tensors.map((t) => t.data)); // tensors from a format's reader, owned by one engine
 * ```
 */
export function freezeWeights(weights: Iterable<Float32Array>): void {
  if (!wasmKernels) return;
  for (const w of weights) wasmKernels.freeze(w);
}

/** The kernel set in use. */
export function kernelsInUse(): KernelsName {
  return currentName;
}

/** `out[m, n] (+)= sum_k a[m, k] * b[n, k]` (x @ W^T for W in [out, in] layout); see cpu.ts. */
export function matmul(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  accumulate = false,
): void {
  current.matmul(out, a, b, M, K, N, accumulate);
}

/** `out[m, n] (+)= sum_k a[m, k] * b[k, n]`: a: [M, K] @ b: [K, N]. */
export function matmulNN(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  accumulate = false,
): void {
  current.matmulNN(out, a, b, M, K, N, accumulate);
}

/** `out[m, n] (+)= sum_k a[k, m] * b[k, n]`: a^T @ b for a: [K, M], b: [K, N]. */
export function matmulTN(
  out: Float32Array,
  a: Float32Array,
  b: Float32Array,
  M: number,
  K: number,
  N: number,
  accumulate = false,
): void {
  current.matmulTN(out, a, b, M, K, N, accumulate);
}

/** Causal GQA attention forward saving probabilities; see cpu-grad.ts `attentionForward`. */
export function attentionForward(
  out: Float32Array,
  probs: Float32Array,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  s: grad.AttentionShape,
): void {
  current.attentionForward(out, probs, q, k, v, s);
}

/** Causal GQA attention backward (accumulates); see cpu-grad.ts `attentionBackward`. */
export function attentionBackward(
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  dOut: Float32Array,
  probs: Float32Array,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  s: grad.AttentionShape,
): void {
  current.attentionBackward(dq, dk, dv, dOut, probs, q, k, v, s);
}

/** Attention of T new positions over a KV cache; see cpu.ts `attendCached`. */
export function attendCached(
  out: Float32Array,
  q: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  T: number,
  pos0: number,
  heads: number,
  kvHeads: number,
  headDim: number,
): void {
  current.attendCached(out, q, keys, values, T, pos0, heads, kvHeads, headDim);
}

/** The SwiGLU gate: `h[i] = silu(g[i]) * u[i]` for i < n (h may be g). */
export function swiglu(h: Float32Array, g: Float32Array, u: Float32Array, n: number): void {
  current.swiglu(h, g, u, n);
}

/** SwiGLU backward: writes dg and du from dh; see cpu-grad.ts `swigluBackward`. */
export function swigluBackward(
  dg: Float32Array,
  du: Float32Array,
  dh: Float32Array,
  g: Float32Array,
  u: Float32Array,
): void {
  current.swigluBackward(dg, du, dh, g, u);
}

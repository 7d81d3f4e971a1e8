/**
 * The kernel sets and how to pick one: the WebAssembly SIMD kernels (kernels/wasm/, the default where
 * the runtime supports them) or the JavaScript reference (kernels/cpu.ts, kernels/cpu-grad.ts), both
 * values of the one type kernels/types.ts `Kernels`. Nothing here is switched process-wide: whatever
 * runs is handed its set — a model (`buildModel(config, tensors, where, kernels)`), a float engine
 * (`createFloatEngine(..., { kernels })`), the trainer (`createScratch(config, T, kernels)`) — so two
 * of them in one process may run on different sets. `--kernels ref` on the scripts names the set that
 * script hands out.
 *
 * The kernels both sets share (norms, RoPE, softmax, argmax) are the reference's, re-exported here so
 * the model and the trainer import their kernels from one module.
 *
 * @example
 * ```ts
 * import { kernelSet } from "./kernels.ts";
 * const x = new Float32Array(6), w = new Float32Array(12), y = new Float32Array(8);
 * const ref = kernelSet("ref");      // the JavaScript reference, for this model only
 * ref.matmul(y, x, w, 2, 3, 4);      // y = x @ w^T
 * ```
 * @module
 */
import * as cpu from "./cpu.ts";
import * as grad from "./cpu-grad.ts";
import type { Kernels, KernelsName } from "./types.ts";
import { wasmKernels } from "./wasm/kernels.ts";

export type { AttentionShape, Kernels, KernelsName, Product } from "./types.ts";
export { argmax, rmsnorm, ropeHead, type RopeTables, ropeTables, silu, softmax, transpose } from "./cpu.ts";
export { crossEntropyBackward, rmsnormBackward, ropeBackward } from "./cpu-grad.ts";

/** The names `kernelSet` accepts, for CLI help and checks. */
export const KERNELS: readonly KernelsName[] = ["wasm", "ref"];

// The reference forms of the transposed products: transpose, then cpu.ts's matmul (exactly the
// trainer's arithmetic before the SIMD kernels existed, so its logged runs still reproduce). The two
// transposition buffers are scratch, rewritten whole by every call before they are read; calls run to
// completion one at a time, so every user of the reference set in this thread may share them.
let tA: Float32Array = new Float32Array(0), tB: Float32Array = new Float32Array(0);
const grow = (t: Float32Array, n: number) => (t.length >= n ? t : new Float32Array(n));

/** The JavaScript reference kernels (f64 sums), on every runtime. */
export const referenceKernels: Kernels = {
  name: "ref",
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
  freeze() {}, // the reference prepares nothing, so it has nothing to keep
};

/**
 * The kernel set of this name: `wasm` (this thread's WebAssembly instance; see kernels/wasm/kernels.ts
 * for what its users share) or `ref`. Where the runtime lacks WebAssembly SIMD, `wasm` gives the
 * reference (its `name` says `ref`). An unknown name is a `RangeError`.
 */
export function kernelSet(name: KernelsName): Kernels {
  if (name !== "wasm" && name !== "ref") throw new RangeError(`kernels must be wasm or ref, got ${name}`);
  return name === "wasm" && wasmKernels ? wasmKernels : referenceKernels;
}

/** The set used when none is given: `wasm` where the runtime has SIMD, else the reference. */
export const defaultKernels: Kernels = kernelSet("wasm");
if (!wasmKernels) console.error("ferry: this runtime lacks WebAssembly SIMD; using the JavaScript kernels");

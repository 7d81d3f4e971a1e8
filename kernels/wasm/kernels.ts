/**
 * The WebAssembly SIMD kernels behind the same calls as kernels/cpu.ts: the module is assembled and
 * instantiated when this file loads, operands are copied into its memory, and results copied out.
 * The copies cost O(inputs + outputs) against O(M*N*K) arithmetic, a few percent on the model's shapes.
 *
 * Every sum is an f32 sum in a fixed order (see kernels/wasm/gen.ts), so results are the same bits on
 * every runtime and run; they differ from kernels/cpu.ts (which sums in f64) within the bounds that
 * tests/kernels/wasm-kernels.test.ts states.
 *
 * @example
 * ```ts
 * import { wasmKernels } from "./kernels.ts";
 * const x = new Float32Array(6), w = new Float32Array(12), y = new Float32Array(8);
 * if (wasmKernels) wasmKernels.matmul(y, x, w, 2, 3, 4); // y = x @ w^T, as cpu.ts's matmul
 * ```
 * @module
 */
import { assemble, simdSupported } from "./asm.ts";
import { gemm, MR, NR, packA, packB, softmaxBackRows, softmaxRows, swiglu, swigluBack } from "./gen.ts";
import { attentionKernels } from "./attention.ts";
import type { Kernels } from "../types.ts";
import type { View, WasmRaw } from "./raw.ts";

/** pack_a / pack_b: (src, row or column stride, k stride, rows, K, dst); see kernels/wasm/gen.ts. */
type Pack = (src: number, is: number, ks: number, rows: number, K: number, dst: number) => void;
/** gemm: (pa, pb, M, N, K, c, ldc, accumulate, tmp); see kernels/wasm/gen.ts. */
type Gemm = (
  pa: number,
  pb: number,
  M: number,
  N: number,
  K: number,
  c: number,
  ldc: number,
  acc: number,
  tmp: number,
) => void;

interface Exports {
  memory: WebAssembly.Memory;
  pack_a: Pack;
  pack_b: Pack;
  gemm: Gemm;
  /** pack_a and gemm for one row, a 1 x NR tile: a decode step's products without MR - 1 idle rows. */
  pack_a1: Pack;
  gemm1: Gemm;
  softmax_rows(s: number, rows: number, ld: number, valid0: number, scale: number): void;
  softmax_back_rows(p: number, d: number, rows: number, ld: number, valid0: number, scale: number): void;
  swiglu(h: number, g: number, u: number, n: number): void;
  swiglu_back(dg: number, du: number, dh: number, g: number, u: number, n: number): void;
}

/** The module's bytes, assembled from kernels/wasm/gen.ts. */
export function wasmModuleBytes(): Uint8Array<ArrayBuffer> {
  return assemble({
    pages: 16,
    functions: {
      pack_a: packA(),
      pack_b: packB(),
      gemm: gemm(),
      pack_a1: packA(1),
      gemm1: gemm(1),
      softmax_rows: softmaxRows(),
      softmax_back_rows: softmaxBackRows(),
      swiglu: swiglu(),
      swiglu_back: swigluBack(),
    },
  });
}

/** The kernels, bound to one instance and its memory. */
export interface WasmKernels extends Kernels {
  readonly name: "wasm";
  /** The instance's exports, for kernels built on the product (attention). */
  raw: WasmRaw;
}

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;
/** f32 slots of a chunk of packed A (splatted: four per element). */
const A_CHUNK = 65536;
/**
 * f32 slots kept for frozen weights' packed copies (256 MiB). When a weight does not fit, every kept
 * copy is dropped and packing starts again, so a model larger than this costs what unfrozen weights
 * cost (a copy and a pack per product), never more memory.
 */
export const FROZEN_SLOTS = 64 << 20;

function bind(ex: Exports, frozenSlots: number): WasmKernels {
  let heap = new Float32Array(ex.memory.buffer);
  // The memory: frozen weights' packed copies in [0, arena), then the per-call arena.
  let arena = 0;
  const reserve = (sizes: number[]): number[] => {
    const offsets: number[] = [];
    let end = arena;
    for (const s of sizes) offsets.push(end), end += roundUp(s, 4);
    const need = end * 4 - ex.memory.buffer.byteLength;
    if (need > 0) ex.memory.grow(Math.ceil(need / 65536));
    if (heap.buffer !== ex.memory.buffer) heap = new Float32Array(ex.memory.buffer);
    return offsets;
  };
  // A is packed splatted (16 bytes an element) a chunk of rows at a time, so its packed copy stays
  // about 256 KiB (in L2) whatever M is: each chunk is packed, then multiplied by all of packed B.
  const chunkRows = (M: number, K: number) =>
    Math.min(roundUp(M, MR), Math.max(MR, Math.floor(A_CHUNK / (4 * K) / MR) * MR));
  const gemmScratch = (M: number, N: number, K: number) =>
    chunkRows(M, K) * 4 * K + MR * NR + roundUp(N, NR) * K;
  // C (+)= A B with B already packed at f32 offset pb; scratch holds packed A's chunk, then gemm's tile.
  const gemmPacked = (
    M: number,
    N: number,
    K: number,
    [a, aRs, aKs]: View,
    pb: number,
    [c, ldc]: [number, number],
    accumulate: boolean,
    scratch: number,
  ) => {
    const rows = chunkRows(M, K), pa = scratch, tmp = pa + rows * 4 * K;
    if (M === 1) {
      // Each output is the same f32 sum in the same k order as in an MR-row tile: the same bits.
      ex.pack_a1(a * 4, aRs, aKs, 1, K, pa * 4);
      ex.gemm1(pa * 4, pb * 4, 1, N, K, c * 4, ldc, accumulate ? 1 : 0, tmp * 4);
      return;
    }
    for (let m0 = 0; m0 < M; m0 += rows) {
      const m = Math.min(rows, M - m0);
      ex.pack_a((a + m0 * aRs) * 4, aRs, aKs, m, K, pa * 4);
      ex.gemm(pa * 4, pb * 4, m, N, K, (c + m0 * ldc) * 4, ldc, accumulate ? 1 : 0, tmp * 4);
    }
  };
  const raw: WasmRaw = {
    reserve,
    heap: () => heap,
    gemmScratch,
    gemm(M, N, K, A, [b, bKs, bCs], C, accumulate, scratch) {
      if (M === 0 || N === 0) return;
      const pb = scratch + chunkRows(M, K) * 4 * K + MR * NR; // past gemmPacked's scratch
      ex.pack_b(b * 4, bCs, bKs, N, K, pb * 4);
      gemmPacked(M, N, K, A, pb, C, accumulate, scratch);
    },
    softmaxRows: (s, rows, ld, valid0, scale) => ex.softmax_rows(s * 4, rows, ld, valid0, scale),
    softmaxBackRows: (p, d, rows, ld, valid0, scale) =>
      ex.softmax_back_rows(p * 4, d * 4, rows, ld, valid0, scale),
  };
  // Frozen weights (see `freeze`): each one's packed copy, as the B of x @ w^T, sits in [0, arena).
  const frozen = new WeakSet<Float32Array>();
  let packedAt = new WeakMap<Float32Array, { at: number; K: number; N: number }>();
  // The f32 offset of w's packed copy, packing it now if need be; undefined if it cannot be kept.
  const packedWeight = (w: Float32Array, K: number, N: number): number | undefined => {
    const kept = packedAt.get(w);
    if (kept) return kept.K === K && kept.N === N ? kept.at : undefined;
    const size = roundUp(N, NR) * K;
    if (size > frozenSlots || w.length < K * N) return undefined;
    if (arena + size > frozenSlots) packedAt = new WeakMap(), arena = 0; // drop them all, start again
    const at = arena;
    arena += roundUp(size, 4);
    const [wo] = reserve([K * N]); // w's plain copy, in the arena just above
    heap.set(w.length === K * N ? w : w.subarray(0, K * N), wo);
    ex.pack_b(wo * 4, K, 1, N, K, at * 4);
    packedAt.set(w, { at, K, N });
    return at;
  };
  // One product over copies of the operands: A(m, k) = a[m*aRs + k*aKs], B(k, n) = b[k*bKs + n*bCs];
  // or, given `packedB` (a frozen weight's packed copy, found before anything is reserved), over a's.
  const product = (
    out: Float32Array,
    a: Float32Array,
    b: Float32Array,
    M: number,
    K: number,
    N: number,
    accumulate: boolean,
    aRs: number,
    aKs: number,
    bKs: number,
    bCs: number,
    packedB?: number,
  ) => {
    const bSlots = packedB === undefined ? K * N : 0;
    const [ao, bo, co, s] = reserve([M * K, bSlots, M * N, gemmScratch(M, N, K)]);
    heap.set(a.length === M * K ? a : a.subarray(0, M * K), ao);
    if (bSlots) heap.set(b.length === K * N ? b : b.subarray(0, K * N), bo);
    if (accumulate) heap.set(out.subarray(0, M * N), co);
    if (packedB === undefined) raw.gemm(M, N, K, [ao, aRs, aKs], [bo, bKs, bCs], [co, N], accumulate, s);
    else gemmPacked(M, N, K, [ao, aRs, aKs], packedB, [co, N], accumulate, s);
    out.set(heap.subarray(co, co + M * N));
  };
  return {
    name: "wasm",
    raw,
    ...attentionKernels(raw),
    swiglu(h, g, u, n) {
      const [go, uo] = reserve([n, n]);
      heap.set(g.subarray(0, n), go), heap.set(u.subarray(0, n), uo);
      ex.swiglu(go * 4, go * 4, uo * 4, n);
      h.set(heap.subarray(go, go + n));
    },
    swigluBackward(dg, du, dh, g, u) {
      // dg overwrites dh in place (each lane reads dh before it writes dg); du gets its own slot.
      const n = dh.length, [dho, go, uo, duo] = reserve([n, n, n, n]);
      heap.set(dh, dho), heap.set(g.subarray(0, n), go), heap.set(u.subarray(0, n), uo);
      ex.swiglu_back(dho * 4, duo * 4, dho * 4, go * 4, uo * 4, n);
      dg.set(heap.subarray(dho, dho + n)), du.set(heap.subarray(duo, duo + n));
    },
    matmul(out, a, b, M, K, N, accumulate = false) {
      // A frozen weight is packed once (the same bits as packing it on every call).
      const packedB = frozen.has(b) && M > 0 && N > 0 ? packedWeight(b, K, N) : undefined;
      product(out, a, b, M, K, N, accumulate, K, 1, 1, K, packedB);
    },
    freeze: (w) => void frozen.add(w),
    matmulNN: (out, a, b, M, K, N, accumulate = false) => product(out, a, b, M, K, N, accumulate, K, 1, N, 1),
    matmulTN: (out, a, b, M, K, N, accumulate = false) => product(out, a, b, M, K, N, accumulate, 1, M, N, 1),
  };
}

/**
 * A fresh instance of the kernels with its own memory; `frozenSlots` bounds the frozen weights' packed
 * copies (tests pass a small one to see them dropped and packed again). Throws where the runtime lacks
 * WebAssembly SIMD.
 */
export function createWasmKernels(frozenSlots = FROZEN_SLOTS): WasmKernels {
  const instance = new WebAssembly.Instance(new WebAssembly.Module(wasmModuleBytes()));
  return bind(instance.exports as unknown as Exports, frozenSlots);
}

function load(): WasmKernels | undefined {
  return simdSupported() ? createWasmKernels() : undefined;
}

/**
 * The kernels, or undefined where this runtime lacks WebAssembly SIMD: one instance per thread (a
 * worker gets its own), shared by every model and engine of that thread that runs on `wasm`. What they
 * share is the instance's memory: the per-call arena and the frozen weights' packed copies. Neither can
 * mix one caller's data into another's: a call reserves its arena afresh and runs to completion
 * (nothing in it awaits), and a packed copy is found by the weight array itself, only for arrays their
 * owner froze. The one cross-engine effect is room: when the frozen copies fill `FROZEN_SLOTS`, all are
 * dropped and repacked on use, which costs time and never changes a bit.
 */
export const wasmKernels: WasmKernels | undefined = load();

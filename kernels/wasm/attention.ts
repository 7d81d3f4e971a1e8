/**
 * Causal grouped-query attention on the WebAssembly kernels: per head, scores are one matrix product
 * (Q K^T), the softmax runs row by row in WebAssembly, and the output is a second product (P V); the
 * backward is three more products and a row-wise softmax backward. Rows go in blocks of `BLOCK`
 * positions, each block multiplying only the columns its causal mask can reach.
 *
 * Same calls and layouts as kernels/cpu-grad.ts (training, probabilities saved) and kernels/cpu.ts
 * `attendCached` (inference over a KV cache).
 * @module
 */
import type { Kernels } from "../types.ts";
import type { View, WasmRaw } from "./raw.ts";

/** Rows of the score matrix per block (a multiple of the product's MR). */
const BLOCK = 32;

/** The attention kernels of a kernel set, as kernels/types.ts declares them. */
export type AttentionKernels = Pick<Kernels, "attentionForward" | "attentionBackward" | "attendCached">;

/** Binds the attention kernels to an instance. */
export function attentionKernels(w: WasmRaw): AttentionKernels {
  const put = (at: number, a: Float32Array, n: number) =>
    w.heap().set(a.length === n ? a : a.subarray(0, n), at);
  const take = (to: Float32Array, at: number, n: number) => to.set(w.heap().subarray(at, at + n));
  // The product with its scratch bound: mm(M, N, K, A, B, C, accumulate).
  const product =
    (scratch: number) =>
    (M: number, N: number, K: number, A: View, B: View, C: [number, number], acc = false) =>
      w.gemm(M, N, K, A, B, C, acc, scratch);
  return {
    attentionForward(out, probs, q, k, v, s) {
      const { T, heads, kvHeads, headDim: hd } = s;
      const qDim = heads * hd, kvDim = kvHeads * hd, group = heads / kvHeads, scale = 1 / Math.sqrt(hd);
      const big = Math.max(T, hd);
      const [qo, ko, vo, oo, po, scratch] = w.reserve([
        T * qDim,
        T * kvDim,
        T * kvDim,
        T * qDim,
        heads * T * T,
        w.gemmScratch(big, big, big),
      ]);
      const mm = product(scratch);
      put(qo, q, T * qDim), put(ko, k, T * kvDim), put(vo, v, T * kvDim);
      for (let h = 0; h < heads; h++) {
        const g = Math.floor(h / group) * hd;
        for (let t0 = 0; t0 < T; t0 += BLOCK) {
          const t1 = Math.min(T, t0 + BLOCK), rows = t1 - t0, p = po + (h * T + t0) * T;
          mm(rows, t1, hd, [qo + t0 * qDim + h * hd, qDim, 1], [ko + g, 1, kvDim], [p, T]);
          w.softmaxRows(p, rows, T, t0 + 1, scale);
          mm(rows, hd, t1, [p, T, 1], [vo + g, kvDim, 1], [oo + t0 * qDim + h * hd, qDim]);
        }
      }
      take(out, oo, T * qDim), take(probs, po, heads * T * T);
    },

    attentionBackward(dq, dk, dv, dOut, probs, q, k, v, s) {
      const { T, heads, kvHeads, headDim: hd } = s;
      const qDim = heads * hd, kvDim = kvHeads * hd, group = heads / kvHeads, scale = 1 / Math.sqrt(hd);
      const big = Math.max(T, hd);
      const [qo, ko, vo, dOo, po, dqo, dko, dvo, d, scratch] = w.reserve([
        T * qDim,
        T * kvDim,
        T * kvDim,
        T * qDim,
        heads * T * T,
        T * qDim,
        T * kvDim,
        T * kvDim,
        T * T,
        w.gemmScratch(big, big, big),
      ]);
      const mm = product(scratch);
      put(qo, q, T * qDim), put(ko, k, T * kvDim), put(vo, v, T * kvDim), put(dOo, dOut, T * qDim);
      put(po, probs, heads * T * T), put(dqo, dq, T * qDim), put(dko, dk, T * kvDim), put(dvo, dv, T * kvDim);
      for (let h = 0; h < heads; h++) {
        const g = Math.floor(h / group) * hd, p = po + h * T * T;
        // dS = softmax backward of dP = dOut V^T; dq += dS K
        for (let t0 = 0; t0 < T; t0 += BLOCK) {
          const t1 = Math.min(T, t0 + BLOCK), rows = t1 - t0;
          mm(rows, t1, hd, [dOo + t0 * qDim + h * hd, qDim, 1], [vo + g, 1, kvDim], [d + t0 * T, T]);
          w.softmaxBackRows(p + t0 * T, d + t0 * T, rows, T, t0 + 1, scale);
          mm(rows, hd, t1, [d + t0 * T, T, 1], [ko + g, kvDim, 1], [dqo + t0 * qDim + h * hd, qDim], true);
        }
        // dk += dS^T q and dv += P^T dOut, for key positions p0..p1 over the queries t >= p0 that see them
        for (let p0 = 0; p0 < T; p0 += BLOCK) {
          const rows = Math.min(T, p0 + BLOCK) - p0, K = T - p0;
          const diag = p0 * T + p0, qt = p0 * qDim + h * hd, kt = p0 * kvDim + g;
          mm(rows, hd, K, [d + diag, 1, T], [qo + qt, qDim, 1], [dko + kt, kvDim], true);
          mm(rows, hd, K, [p + diag, 1, T], [dOo + qt, qDim, 1], [dvo + kt, kvDim], true);
        }
      }
      take(dq, dqo, T * qDim), take(dk, dko, T * kvDim), take(dv, dvo, T * kvDim);
    },

    attendCached(out, q, keys, values, T, pos0, heads, kvHeads, hd) {
      const qDim = heads * hd,
        kvDim = kvHeads * hd,
        group = heads / kvHeads,
        scale = 1 / Math.sqrt(hd),
        n = pos0 + T;
      const big = Math.max(n, hd);
      const [qo, ko, vo, oo, so, scratch] = w.reserve([
        T * qDim,
        n * kvDim,
        n * kvDim,
        T * qDim,
        BLOCK * n,
        w.gemmScratch(BLOCK, big, big),
      ]);
      const mm = product(scratch);
      put(qo, q, T * qDim), put(ko, keys, n * kvDim), put(vo, values, n * kvDim);
      for (let h = 0; h < heads; h++) {
        const g = Math.floor(h / group) * hd;
        for (let t0 = 0; t0 < T; t0 += BLOCK) {
          const t1 = Math.min(T, t0 + BLOCK), rows = t1 - t0, cols = pos0 + t1;
          mm(rows, cols, hd, [qo + t0 * qDim + h * hd, qDim, 1], [ko + g, 1, kvDim], [so, cols]);
          w.softmaxRows(so, rows, cols, pos0 + t0 + 1, scale);
          mm(rows, hd, cols, [so, cols, 1], [vo + g, kvDim, 1], [oo + t0 * qDim + h * hd, qDim]);
        }
      }
      take(out, oo, T * qDim);
    },
  };
}

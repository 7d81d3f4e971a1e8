/**
 * Backward passes of the CPU kernels, written by hand for the trainer. Each function takes the
 * forward's inputs (and what the forward saved) plus the gradient of its output, and adds the
 * gradients of its inputs and weights. tests/kernels/grad.test.ts checks every one against finite differences.
 *
 * @example
 * ```ts
 * import { rmsnormBackward } from "./cpu-grad.ts";
 * declare const dx: Float32Array, dw: Float32Array, dy: Float32Array, x: Float32Array, w: Float32Array;
 * declare const rstd: Float32Array, rows: number, dim: number; // rstd: the forward pass's, one per row
 * // y = rmsnorm(x, w): given dy, accumulate dx and dw
 * rmsnormBackward(dx, dw, dy, x, w, rstd, rows, dim);
 * ```
 * @module
 */
import { ropeHead, type RopeTables } from "./cpu.ts";
import type { Kernels } from "./types.ts";

/**
 * RMSNorm backward. With r = rstd[row] and y = x * r * w:
 * dw += dy * x * r;  dx += r * (dy * w) - x * r^3 / dim * sum(dy * w * x).
 * `dx` may alias nothing else; `dx` is accumulated into.
 */
export function rmsnormBackward(
  dx: Float32Array,
  dw: Float32Array,
  dy: Float32Array,
  x: Float32Array,
  w: Float32Array,
  rstd: Float32Array,
  rows: number,
  dim: number,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * dim, inv = rstd[r];
    let dot = 0;
    for (let i = 0; i < dim; i++) {
      const g = dy[o + i] * w[i];
      dot += g * x[o + i];
      dw[i] += dy[o + i] * x[o + i] * inv;
    }
    const c = (dot * inv * inv * inv) / dim;
    for (let i = 0; i < dim; i++) dx[o + i] += inv * dy[o + i] * w[i] - c * x[o + i];
  }
}

/** RoPE backward: the rotation is orthogonal, so the gradient turns back by the same angle. */
export function ropeBackward(d: Float32Array, off: number, pos: number, t: RopeTables): void {
  ropeHead(d, off, pos, t, true);
}

/** SwiGLU gate backward (see kernels/types.ts): silu'(g) = s * (1 + g * (1 - s)), s = sigmoid(g). */
export const swigluBackward: Kernels["swigluBackward"] = function swigluBackward(dg, du, dh, g, u) {
  for (let i = 0; i < dh.length; i++) {
    const s = 1 / (1 + Math.exp(-g[i]));
    const silu = g[i] * s;
    du[i] = dh[i] * silu;
    dg[i] = dh[i] * u[i] * s * (1 + g[i] * (1 - s));
  }
};

/** Causal GQA attention forward over one sequence, saving the probabilities; see kernels/types.ts. */
export const attentionForward: Kernels["attentionForward"] = function attentionForward(
  out,
  probs,
  q,
  k,
  v,
  s,
) {
  const { T, heads, kvHeads, headDim: hd } = s;
  const qDim = heads * hd, kvDim = kvHeads * hd, group = heads / kvHeads, scale = 1 / Math.sqrt(hd);
  for (let h = 0; h < heads; h++) {
    const ko = Math.floor(h / group) * hd;
    for (let t = 0; t < T; t++) {
      const qo = t * qDim + h * hd, po = (h * T + t) * T;
      let max = -Infinity;
      for (let p = 0; p <= t; p++) {
        let d = 0;
        const kp = p * kvDim + ko;
        for (let i = 0; i < hd; i++) d += q[qo + i] * k[kp + i];
        d *= scale;
        probs[po + p] = d;
        if (d > max) max = d;
      }
      let sum = 0;
      for (let p = 0; p <= t; p++) sum += probs[po + p] = Math.exp(probs[po + p] - max);
      const inv = 1 / sum;
      for (let i = 0; i < hd; i++) out[qo + i] = 0;
      for (let p = 0; p <= t; p++) {
        const w = probs[po + p] *= inv;
        const vp = p * kvDim + ko;
        for (let i = 0; i < hd; i++) out[qo + i] += w * v[vp + i];
      }
    }
  }
};

/** Causal GQA attention backward (accumulates dq, dk, dv); see kernels/types.ts. */
export const attentionBackward: Kernels["attentionBackward"] = function attentionBackward(
  dq,
  dk,
  dv,
  dOut,
  probs,
  q,
  k,
  v,
  s,
) {
  const { T, heads, kvHeads, headDim: hd } = s;
  const qDim = heads * hd, kvDim = kvHeads * hd, group = heads / kvHeads, scale = 1 / Math.sqrt(hd);
  const dP = new Float64Array(T);
  for (let h = 0; h < heads; h++) {
    const ko = Math.floor(h / group) * hd;
    for (let t = 0; t < T; t++) {
      const qo = t * qDim + h * hd, po = (h * T + t) * T;
      let dot = 0;
      for (let p = 0; p <= t; p++) {
        const vp = p * kvDim + ko, w = probs[po + p];
        let d = 0;
        for (let i = 0; i < hd; i++) {
          d += dOut[qo + i] * v[vp + i];
          dv[vp + i] += w * dOut[qo + i];
        }
        dP[p] = d;
        dot += w * d;
      }
      for (let p = 0; p <= t; p++) {
        const dS = probs[po + p] * (dP[p] - dot) * scale;
        if (dS === 0) continue;
        const kp = p * kvDim + ko;
        for (let i = 0; i < hd; i++) {
          dq[qo + i] += dS * k[kp + i];
          dk[kp + i] += dS * q[qo + i];
        }
      }
    }
  }
};

/**
 * Softmax cross-entropy over rows of logits [T, V] against targets; returns the summed loss in
 * nats and overwrites `logits` with d(loss * lossScale)/d(logits).
 */
export function crossEntropyBackward(
  logits: Float32Array,
  targets: ArrayLike<number>,
  V: number,
  lossScale: number,
): number {
  let loss = 0;
  for (let t = 0; t < targets.length; t++) {
    const o = t * V;
    let max = -Infinity;
    for (let i = 0; i < V; i++) if (logits[o + i] > max) max = logits[o + i];
    let sum = 0;
    for (let i = 0; i < V; i++) sum += Math.exp(logits[o + i] - max);
    const lse = max + Math.log(sum);
    loss += lse - logits[o + targets[t]];
    for (let i = 0; i < V; i++) logits[o + i] = Math.exp(logits[o + i] - lse) * lossScale;
    logits[o + targets[t]] -= lossScale;
  }
  return loss;
}

/**
 * CPU compute kernels over f32 typed arrays: the float reference every export is measured against,
 * and the trainer's engine.
 *
 * Sums are carried in JavaScript numbers (f64) and stored as f32, so results are deterministic on
 * every runtime: the same inputs give the same bits on Deno and Bun.
 *
 * @example
 * ```ts
 * import { matmul } from "./cpu.ts";
 * // y[t, o] = sum_i x[t, i] * w[o, i]   (x: [2, 3], w: [4, 3] in [out, in] layout)
 * const x = new Float32Array(6), w = new Float32Array(12), y = new Float32Array(8);
 * matmul(y, x, w, 2, 3, 4);
 * ```
 * @module
 */
import type { Kernels } from "./types.ts";

/**
 * `out[m, n] = sum_k a[m, k] * b[n, k]` (or `+=` when `accumulate`), for row-major a: [M, K], b: [N, K].
 * This is `x @ W^T` for a linear weight W in [out, in] layout. Tiled 4 rows of `a` by 2 rows of `b`
 * so each loaded value feeds several products.
 */
export const matmul: Kernels["matmul"] = function matmul(out, a, b, M, K, N, accumulate = false) {
  let m = 0;
  for (; m + 4 <= M; m += 4) {
    const a0 = m * K, a1 = a0 + K, a2 = a1 + K, a3 = a2 + K;
    let n = 0;
    for (; n + 2 <= N; n += 2) {
      const b0 = n * K, b1 = b0 + K;
      let s00 = 0, s01 = 0, s10 = 0, s11 = 0, s20 = 0, s21 = 0, s30 = 0, s31 = 0;
      for (let k = 0; k < K; k++) {
        const w0 = b[b0 + k], w1 = b[b1 + k];
        const x0 = a[a0 + k], x1 = a[a1 + k], x2 = a[a2 + k], x3 = a[a3 + k];
        s00 += x0 * w0;
        s01 += x0 * w1;
        s10 += x1 * w0;
        s11 += x1 * w1;
        s20 += x2 * w0;
        s21 += x2 * w1;
        s30 += x3 * w0;
        s31 += x3 * w1;
      }
      const o = m * N + n;
      if (accumulate) {
        out[o] += s00, out[o + 1] += s01;
        out[o + N] += s10, out[o + N + 1] += s11;
        out[o + 2 * N] += s20, out[o + 2 * N + 1] += s21;
        out[o + 3 * N] += s30, out[o + 3 * N + 1] += s31;
      } else {
        out[o] = s00, out[o + 1] = s01;
        out[o + N] = s10, out[o + N + 1] = s11;
        out[o + 2 * N] = s20, out[o + 2 * N + 1] = s21;
        out[o + 3 * N] = s30, out[o + 3 * N + 1] = s31;
      }
    }
    for (; n < N; n++) {
      for (let r = 0; r < 4; r++) dotInto(out, (m + r) * N + n, a, (m + r) * K, b, n * K, K, accumulate);
    }
  }
  for (; m < M; m++) {
    for (let n = 0; n < N; n++) dotInto(out, m * N + n, a, m * K, b, n * K, K, accumulate);
  }
};

function dotInto(
  out: Float32Array,
  o: number,
  a: Float32Array,
  ai: number,
  b: Float32Array,
  bi: number,
  K: number,
  accumulate: boolean,
): void {
  let s = 0;
  for (let k = 0; k < K; k++) s += a[ai + k] * b[bi + k];
  out[o] = accumulate ? out[o] + s : s;
}

/** `out[c, r] = a[r, c]` for a: [R, C]. */
export function transpose(out: Float32Array, a: Float32Array, R: number, C: number): void {
  for (let r = 0; r < R; r++) {
    const row = r * C;
    for (let c = 0; c < C; c++) out[c * R + r] = a[row + c];
  }
}

/**
 * RMSNorm of each row of x: [rows, dim]: `x * w / sqrt(mean(x^2) + eps)`, no mean subtraction.
 * Writes the per-row reciprocal RMS into `rstd` when given (the backward pass needs it).
 */
export function rmsnorm(
  out: Float32Array,
  x: Float32Array,
  w: Float32Array,
  rows: number,
  dim: number,
  eps: number,
  rstd?: Float32Array,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i] * x[o + i];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    if (rstd) rstd[r] = inv;
    for (let i = 0; i < dim; i++) out[o + i] = x[o + i] * inv * w[i];
  }
}

/** Cosine and sine tables for rotate-half RoPE: `[positions, headDim / 2]` each. */
export interface RopeTables {
  cos: Float32Array;
  sin: Float32Array;
  half: number;
}

/** Builds RoPE tables: angle(p, i) = p * theta^(-2i / headDim), i < headDim / 2. */
export function ropeTables(positions: number, headDim: number, theta: number): RopeTables {
  const half = headDim / 2;
  const cos = new Float32Array(positions * half), sin = new Float32Array(positions * half);
  for (let i = 0; i < half; i++) {
    const invFreq = Math.pow(theta, (-2 * i) / headDim);
    for (let p = 0; p < positions; p++) {
      cos[p * half + i] = Math.cos(p * invFreq);
      sin[p * half + i] = Math.sin(p * invFreq);
    }
  }
  return { cos, sin, half };
}

/**
 * Rotates one head vector in place at position `pos`: pairs (i, i + half) turn by the angle.
 * With `inverse`, turns the other way (the backward pass of the rotation).
 */
export function ropeHead(v: Float32Array, off: number, pos: number, t: RopeTables, inverse = false): void {
  const { half } = t, base = pos * half;
  for (let i = 0; i < half; i++) {
    const c = t.cos[base + i], s = inverse ? -t.sin[base + i] : t.sin[base + i];
    const x1 = v[off + i], x2 = v[off + i + half];
    v[off + i] = x1 * c - x2 * s;
    v[off + i + half] = x2 * c + x1 * s;
  }
}

/** SiLU: x * sigmoid(x). */
export function silu(x: number): number {
  return x / (1 + Math.exp(-x));
}

/** In-place softmax over `x[off, off + n)`. */
export function softmax(x: Float32Array, off: number, n: number): void {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[off + i] > max) max = x[off + i];
  let sum = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(x[off + i] - max);
    x[off + i] = e;
    sum += e;
  }
  const inv = 1 / sum;
  for (let i = 0; i < n; i++) x[off + i] *= inv;
}

/** Index of the largest value of `x[off, off + n)`; the lowest index wins a tie. */
export function argmax(x: Float32Array, off = 0, n = x.length - off): number {
  let best = 0, bestV = -Infinity;
  for (let i = 0; i < n; i++) {
    if (x[off + i] > bestV) bestV = x[off + i], best = i;
  }
  return best;
}

/** Causal grouped-query attention of T new positions over a KV cache; see kernels/types.ts. */
export const attendCached: Kernels["attendCached"] = function attendCached(
  out,
  q,
  keys,
  values,
  T,
  pos0,
  heads,
  kvHeads,
  hd,
) {
  const qDim = heads * hd, kvDim = kvHeads * hd, group = heads / kvHeads, scale = 1 / Math.sqrt(hd);
  const scores = new Float32Array(pos0 + T);
  for (let t = 0; t < T; t++) {
    const n = pos0 + t + 1;
    for (let h = 0; h < heads; h++) {
      const qo = t * qDim + h * hd, ko = Math.floor(h / group) * hd;
      for (let p = 0; p < n; p++) {
        let s = 0;
        const kp = p * kvDim + ko;
        for (let i = 0; i < hd; i++) s += q[qo + i] * keys[kp + i];
        scores[p] = s * scale;
      }
      softmax(scores, 0, n);
      for (let i = 0; i < hd; i++) {
        let s = 0;
        for (let p = 0; p < n; p++) s += scores[p] * values[p * kvDim + ko + i];
        out[qo + i] = s;
      }
    }
  }
};

/**
 * ggml's K-quants Q4_K and Q6_K: super-blocks of QK_K = 256 values with quantized sub-block scales.
 *
 * - Q4_K (144 bytes): f16 d, f16 dmin, 12 bytes packing eight 6-bit scales and eight 6-bit mins (one
 *   pair per 32 values), 128 bytes of 4-bit codes; value = d·scale·q − dmin·min, q in 0..15. Each
 *   64-value chunk takes 32 bytes: low nibbles hold its first 32 values, high nibbles the next 32.
 * - Q6_K (210 bytes): 128 bytes of low nibbles (ql), 64 bytes of high bit pairs (qh), 16 int8
 *   scales (one per 16 values), f16 d; value = d·scale·(q − 32), q in 0..63. In each 128-value half,
 *   ql[l] holds values l (low nibble) and l + 64 (high), ql[l + 32] values l + 32 and l + 96, and
 *   qh[l] bits 0-1, 2-3, 4-5, 6-7 the top bits of values l, l + 32, l + 64, l + 96.
 *
 * The quantizers follow ggml's reference ones in spirit (make_qkx2_quants for Q4_K's scale and min,
 * make_qx_quants for Q6_K's scales: a small search over candidate scales, each refitted by weighted
 * least squares), with an optional per-column importance weighting the squared error.
 *
 * @example
 * ```ts
 * import { dequantizeQ4K, quantizeQ4K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const bytes = quantizeQ4K(row);              // row.length % 256 === 0; 144 bytes per 256 values
 * const back = dequantizeQ4K(bytes, row.length);
 * ```
 * @module
 */
import { clamp, elementWeights, f32, getF16, putF16, roundAway, symmetricScale } from "./quants-block.ts";

/** Values per K-quant super-block. */
export const QK_K = 256;

function checkSuperBlocks(n: number, type: string): void {
  if (n % QK_K !== 0) {
    throw new RangeError(`${n} values are not a whole number of ${QK_K}-value ${type} super-blocks`);
  }
}

/**
 * Scale s ≥ 0 and min m ≥ 0 of 32 values from `o` for codes 0..15 (x ≈ s·q − m), minimising Σ w (s·q −
 * m − x)²: 21 candidate inverse scales spread around 15 / (max − min), each assignment refitted.
 */
function scaleMin(x: Float32Array, w: Float32Array, o: number): { s: number; m: number } {
  let lo = 0, hi = -Infinity;
  for (let j = 0; j < 32; j++) lo = Math.min(lo, x[o + j]), hi = Math.max(hi, x[o + j]);
  if (hi <= lo) return { s: 0, m: -lo };
  let best = { s: (hi - lo) / 15, m: -lo, err: Infinity };
  best.err = affineError(x, w, o, best.s, best.m);
  const q = new Int32Array(32);
  for (let t = 0; t <= 20; t++) {
    const id = (14 + 0.1 * t) / (hi - lo);
    let sw = 0, sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (let j = 0; j < 32; j++) {
      const qj = q[j] = clamp(roundAway(id * (x[o + j] - lo)), 0, 15), wj = w[o + j], xj = x[o + j];
      sw += wj, sq += wj * qj, sqq += wj * qj * qj, sx += wj * xj, sqx += wj * qj * xj;
    }
    const det = sw * sqq - sq * sq;
    if (!(det > 0)) continue;
    let s = (sw * sqx - sq * sx) / det, b = (sqq * sx - sq * sqx) / det;
    if (b > 0) b = 0, s = sqq > 0 ? sqx / sqq : 0; // the offset must be a min (≤ 0): refit the scale alone
    if (s <= 0) continue;
    const err = affineError(x, w, o, s, -b);
    if (err < best.err) best = { s, m: -b, err };
  }
  return best;
}

// Σ w (x − x̂)² with each value's best code 0..15 under scale s and min m.
function affineError(x: Float32Array, w: Float32Array, o: number, s: number, m: number): number {
  let e = 0;
  for (let j = 0; j < 32; j++) {
    const q = s > 0 ? clamp(roundAway((x[o + j] + m) / s), 0, 15) : 0;
    e += w[o + j] * (s * q - m - x[o + j]) ** 2;
  }
  return e;
}

/**
 * Q4_K super-blocks of `x`; `importance` (one weight per column of rows of its length) weights the
 * squared error of the scale and min search, uniform by default.
 *
 * @example
 * ```ts
 * import { quantizeQ4K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * quantizeQ4K(row); // 144 bytes per 256 values
 * ```
 */
export function quantizeQ4K(x: Float32Array, importance?: Float32Array): Uint8Array {
  checkSuperBlocks(x.length, "Q4_K");
  const w = elementWeights(x.length, importance);
  const out = new Uint8Array((x.length / QK_K) * 144);
  const sc = new Uint8Array(8), mn = new Uint8Array(8);
  for (let b = 0; b < x.length / QK_K; b++) {
    const o = b * QK_K, at = b * 144;
    const fits = Array.from({ length: 8 }, (_, i) => scaleMin(x, w, o + 32 * i));
    const d = putF16(out, at, Math.max(...fits.map((f) => f.s)) / 63);
    const dmin = putF16(out, at + 2, Math.max(...fits.map((f) => f.m)) / 63);
    for (let i = 0; i < 8; i++) {
      sc[i] = d ? clamp(roundAway(fits[i].s / d), 0, 63) : 0;
      mn[i] = dmin ? clamp(roundAway(fits[i].m / dmin), 0, 63) : 0;
    }
    packScalesMins(out, at + 4, sc, mn);
    for (let i = 0; i < 8; i++) {
      // The codes use the scale and min as stored, so rounding them costs no more than it must.
      const dl = f32(d * sc[i]), ml = f32(dmin * mn[i]);
      const chunk = at + 16 + 32 * (i >> 1), shift = 4 * (i & 1);
      for (let j = 0; j < 32; j++) {
        const q = dl ? clamp(roundAway((x[o + 32 * i + j] + ml) / dl), 0, 15) : 0;
        out[chunk + j] |= q << shift;
      }
    }
  }
  return out;
}

/**
 * Packs eight 6-bit scales and mins into Q4_K's 12 bytes at `at`: pairs 0-3 take the low 6 bits of
 * bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 put their low nibbles in bytes 8-11 (scale low, min
 * high) and their top 2 bits in the spare top bits of bytes 0-3 (scales) and 4-7 (mins).
 *
 * @example
 * ```ts
 * import { packScalesMins } from "./quants-k.ts";
 * const block = new Uint8Array(144), scales = new Uint8Array(8).fill(33), mins = new Uint8Array(8).fill(17);
 * packScalesMins(block, 4, scales, mins); // q4kScaleMin(block, 4, j) gives [scales[j], mins[j]] back
 * ```
 */
export function packScalesMins(out: Uint8Array, at: number, sc: Uint8Array, mn: Uint8Array): void {
  for (let j = 0; j < 4; j++) {
    out[at + j] = sc[j] | ((sc[j + 4] >> 4) << 6);
    out[at + j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
    out[at + j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
  }
}

/**
 * Sub-block `j`'s 6-bit scale and min from Q4_K's 12 packed bytes at `at` (ggml's get_scale_min_k4).
 *
 * @example
 * ```ts
 * import { q4kScaleMin, quantizeQ4K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * const block = quantizeQ4K(row); // one block: d and dmin (4 bytes), then the 12 bytes of scales and mins
 * q4kScaleMin(block, 4, 5); // [scale, min] of values 160..191
 * ```
 */
export function q4kScaleMin(bytes: Uint8Array, at: number, j: number): [number, number] {
  if (j < 4) return [bytes[at + j] & 63, bytes[at + j + 4] & 63];
  const lo = bytes[at + j + 4];
  return [(lo & 15) | ((bytes[at + j - 4] >> 6) << 4), (lo >> 4) | ((bytes[at + j] >> 6) << 4)];
}

/**
 * Q4_K super-blocks back to f32: d·scale·q − dmin·min.
 *
 * @example
 * ```ts
 * import { dequantizeQ4K, quantizeQ4K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeQ4K(quantizeQ4K(row), row.length); // ≈ row
 * ```
 */
export function dequantizeQ4K(bytes: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let b = 0; b < n / QK_K; b++) {
    const at = b * 144, d = getF16(bytes, at), dmin = getF16(bytes, at + 2);
    for (let i = 0; i < 8; i++) {
      const [s, m] = q4kScaleMin(bytes, at + 4, i);
      const dl = f32(d * s), ml = f32(dmin * m);
      const chunk = at + 16 + 32 * (i >> 1), shift = 4 * (i & 1);
      for (let j = 0; j < 32; j++) {
        out[b * QK_K + 32 * i + j] = f32(dl * ((bytes[chunk + j] >> shift) & 15)) - ml;
      }
    }
  }
  return out;
}

/**
 * Q6_K super-blocks of `x`; `importance` weights the squared error of each 16-value scale's search.
 *
 * @example
 * ```ts
 * import { quantizeQ6K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * quantizeQ6K(row); // 210 bytes per 256 values
 * ```
 */
export function quantizeQ6K(x: Float32Array, importance?: Float32Array): Uint8Array {
  checkSuperBlocks(x.length, "Q6_K");
  const w = elementWeights(x.length, importance);
  const out = new Uint8Array((x.length / QK_K) * 210),
    scales = new Float64Array(16),
    q = new Uint8Array(QK_K);
  for (let b = 0; b < x.length / QK_K; b++) {
    const o = b * QK_K, at = b * 210;
    let maxScale = 0;
    for (let i = 0; i < 16; i++) {
      let amax = 0, max = 0;
      for (let j = o + 16 * i; j < o + 16 * i + 16; j++) {
        if (amax < Math.abs(x[j])) amax = Math.abs(x[j]), max = x[j];
      }
      scales[i] = symmetricScale(x, w, o + 16 * i, 16, 32, max);
      if (Math.abs(scales[i]) > Math.abs(maxScale)) maxScale = scales[i];
    }
    // As ggml: the largest scale maps to −128, so d carries the opposite sign and every int8 fits.
    const d = putF16(out, at + 208, maxScale / -128);
    for (let i = 0; i < 16; i++) {
      const sc = d ? clamp(roundAway(scales[i] / d), -128, 127) : 0;
      out[at + 192 + i] = sc & 0xff;
      const dl = f32(d * sc);
      for (let j = 0; j < 16; j++) {
        q[16 * i + j] = dl ? clamp(roundAway(x[o + 16 * i + j] / dl), -32, 31) + 32 : 32;
      }
    }
    for (let half = 0; half < 2; half++) {
      const v = 128 * half, ql = at + 64 * half, qh = at + 128 + 32 * half;
      for (let l = 0; l < 32; l++) {
        out[ql + l] = (q[v + l] & 15) | ((q[v + l + 64] & 15) << 4);
        out[ql + l + 32] = (q[v + l + 32] & 15) | ((q[v + l + 96] & 15) << 4);
        out[qh + l] = (q[v + l] >> 4) | ((q[v + l + 32] >> 4) << 2) | ((q[v + l + 64] >> 4) << 4) |
          ((q[v + l + 96] >> 4) << 6);
      }
    }
  }
  return out;
}

/**
 * Q6_K super-blocks back to f32: d·scale·(q − 32).
 *
 * @example
 * ```ts
 * import { dequantizeQ6K, quantizeQ6K } from "./quants-k.ts";
 * const row = Float32Array.from({ length: 256 }, (_, i) => Math.sin(i));
 * dequantizeQ6K(quantizeQ6K(row), row.length);
 * ```
 */
export function dequantizeQ6K(bytes: Uint8Array, n: number): Float32Array {
  const out = new Float32Array(n);
  for (let b = 0; b < n / QK_K; b++) {
    const at = b * 210, d = getF16(bytes, at + 208);
    for (let half = 0; half < 2; half++) {
      const v = b * QK_K + 128 * half, ql = at + 64 * half, qh = at + 128 + 32 * half;
      const sc = (k: number) => f32(d * ((bytes[at + 192 + 8 * half + (k >> 4)] << 24) >> 24));
      for (let l = 0; l < 32; l++) {
        const h = bytes[qh + l];
        // Exact integer times f32 is exact in f64; the store rounds once, as C's f32 product does.
        out[v + l] = sc(l) * (((bytes[ql + l] & 15) | ((h & 3) << 4)) - 32);
        out[v + l + 32] = sc(l + 32) * (((bytes[ql + l + 32] & 15) | (((h >> 2) & 3) << 4)) - 32);
        out[v + l + 64] = sc(l + 64) * (((bytes[ql + l] >> 4) | (((h >> 4) & 3) << 4)) - 32);
        out[v + l + 96] = sc(l + 96) * (((bytes[ql + l + 32] >> 4) | (((h >> 6) & 3) << 4)) - 32);
      }
    }
  }
  return out;
}

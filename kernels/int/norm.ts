/**
 * Integer RMSNorm, and the per-channel gain product that follows it where a gain cannot be folded.
 *
 * ferry's norm returns `z = x / sqrt(Σ x² + n · eps)`, so |z_i| ≤ 1 and z fits 16 bits at exponent −15
 * exactly; the missing factor sqrt(n) (and the norm's gain, where the maths allows) is folded into the
 * weights that read z (formats/lut4/lut4.md). One digit-by-digit square root and one shift-subtract division
 * per vector; a multiply-free product per element.
 *
 * @example
 * ```ts
 * import { normPlan, rmsnorm } from "./norm.ts";
 * const x = new Int32Array(96), z = new Int32Array(96);
 * const plan = normPlan(96, 34360, -35);        // n and eps = 34360 · 2^-35
 * rmsnorm(x, 0, -16, plan, z, 0);               // z at exponent NORM_EXP
 * ```
 * @module
 */
import { assertBound, checked, holds } from "./check.ts";
import { isqrtScaled, recip16 } from "./isqrt.ts";
import { MUL_TABLE, mulS16, multiples } from "./mul.ts";
import { A16_MAX, bitlen, I32_MAX, maxAbs, shift } from "./round.ts";

/** Exponent of a normalised vector: |z_i| ≤ 1 is stored as ≤ 32767 · 2^-15. */
export const NORM_EXP = -15;
/** Fraction bits of the square root: root ≈ sqrt(S) · 2^ROOT_BITS. */
const ROOT_BITS = 13;

/** What a norm over vectors of length n needs, computed once at load. */
export interface NormPlan {
  n: number;
  /** Bits of the coarse copy whose squares are summed: n · 4^bits < 2^31. */
  bits: number;
  /** sq[i] = i², for i ≤ 2^bits, built by (i + 1)² = i² + 2i + 1. */
  sq: Int32Array;
  /** n · eps mantissa (int32), and eps's exponent. */
  epsN: number;
  epsExp: number;
  /** Scratch: the 15-bit copy of x, and the multiples table of the reciprocal. */
  y: Int32Array;
  rt: Int32Array;
}

/** Plans a norm over `n` values (n < 2^15) with eps = epsMantissa · 2^epsExp (mantissa < 2^16). */
export function normPlan(n: number, epsMantissa: number, epsExp: number): NormPlan {
  const bits = (31 - bitlen(n)) >> 1;
  const top = 1 << bits;
  const sq = new Int32Array(top + 1);
  for (let i = 0; i < top; i++) sq[i + 1] = sq[i] + i + i + 1;
  let epsN = 0;
  for (let i = 0; i < n; i++) epsN = epsN + epsMantissa;
  return { n, bits, sq, epsN, epsExp, y: new Int32Array(n), rt: new Int32Array(MUL_TABLE) };
}

/**
 * z = x / sqrt(Σ x² + n · eps) for x = `x[off, off + n)` (int32 at exponent `xExp`), written to
 * `out[oOff, ...)` as integers with |z| ≤ 32767 at exponent NORM_EXP.
 *
 * 1. y = x normalised to 15 bits (|y| ≤ 32767, exponent ey).
 * 2. S = Σ sq[|round(y / 2^(15 − bits))|] < n · 4^bits < 2^31: the sum of squares of a coarse copy.
 * 3. eps in S's units; while S + eps would leave int32 (only when eps dominates), both drop two bits.
 * 4. root = floor(sqrt((S + eps) · 4^13)) < 2^29; r = floor(2^(L + 15) / root), L = bitlen(root),
 *    so 2^15 < r < 2^16.
 * 5. z_i = shift(y_i · r, L + (15 − bits) + extra − 13), with |y_i · r| < 2^31 from the multiples of r.
 */
export function rmsnorm(
  x: Int32Array,
  off: number,
  xExp: number,
  plan: NormPlan,
  out: Int32Array,
  oOff: number,
): void {
  const n = plan.n;
  const y = plan.y;
  const mx = maxAbs(x, off, n);
  if (mx === 0) {
    for (let i = 0; i < n; i++) out[oOff + i] = 0;
    return;
  }
  const s1 = bitlen(mx) - 15;
  const ey = xExp + s1;
  const s2 = 15 - plan.bits;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    let v = shift(x[off + i], s1);
    if (v > A16_MAX) v = A16_MAX;
    if (v < -A16_MAX) v = -A16_MAX;
    y[i] = v;
    const c = shift(v < 0 ? -v : v, s2);
    sum = sum + plan.sq[c];
  }
  if (checked.on && !holds(sum <= I32_MAX)) {
    assertBound(false, `rmsnorm: sum of squares ${sum} exceeds int32`);
  }
  // eps · n in units of 2^(2 · (ey + s2)); shift by e2 (right when positive).
  let e2 = ey + ey + s2 + s2 - plan.epsExp;
  let extra = 0;
  let eps = 0;
  for (;;) {
    if (e2 >= 0) eps = shift(plan.epsN, e2);
    else if (e2 > -31 && plan.epsN <= I32_MAX >> -e2) eps = plan.epsN << -e2;
    else eps = -1;
    if (eps >= 0 && sum + eps <= I32_MAX) break;
    extra = extra + 1;
    sum = sum >> 2;
    e2 = e2 + 2;
  }
  const root = isqrtScaled(sum + eps, ROOT_BITS);
  const r = recip16(root);
  multiples(r, plan.rt, 0);
  const sh = bitlen(root) + s2 + extra - ROOT_BITS;
  for (let i = 0; i < n; i++) {
    let z = shift(mulS16(plan.rt, 0, y[i]), sh);
    if (z > A16_MAX) z = A16_MAX;
    if (z < -A16_MAX) z = -A16_MAX;
    out[oOff + i] = z;
  }
}

/**
 * A stored per-channel gain (int16 values g_i at an exponent) as the multiples tables of each g_i,
 * built once at load: `mul[32i + k]` as in mul.ts.
 */
export function gainTables(gains: Int16Array): Int32Array {
  const mul = new Int32Array(gains.length << 5);
  let t = 0;
  for (let i = 0; i < gains.length; i++) {
    multiples(gains[i], mul, t);
    t = t + 32;
  }
  return mul;
}

/** out_i = g_i · z_i for |z_i| ≤ 32767 and |g_i| ≤ 32767, so |out_i| < 2^30, from the gain tables. */
export function applyGain(
  z: Int32Array,
  off: number,
  n: number,
  mul: Int32Array,
  out: Int32Array,
  oOff: number,
): void {
  let t = 0;
  for (let i = 0; i < n; i++) {
    out[oOff + i] = mulS16(mul, t, z[off + i]);
    t = t + 32;
  }
}

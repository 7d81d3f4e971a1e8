/**
 * Square root digit by digit, and division by shift-and-subtract: the two scalar operations RMSNorm and
 * the softmax need once per vector.
 *
 * @example
 * ```ts
 * import { isqrtScaled, recip16 } from "./isqrt.ts";
 * isqrtScaled(2, 13);   // floor(sqrt(2 · 4^13)) = 11585
 * recip16(11585);       // floor(2^(14 + 15) / 11585) = 46341
 * ```
 * @module
 */
import { bitlen } from "./round.ts";

/**
 * floor(sqrt(s · 4^p)) for an int32 `s` ≥ 0 and 0 ≤ p, computed two bits of the radicand at a time
 * (the bits of s from the top, then p pairs of zeros). Invariant: rem ≤ 2 · root, so with a result
 * below 2^29 (s < 2^31 and p ≤ 13) `rem` stays below 2^32 and every value is an exact integer in a double;
 * only additions, subtractions and comparisons touch it.
 */
export function isqrtScaled(s: number, p: number): number {
  let rem = 0;
  let root = 0;
  for (let i = 30; i >= 0; i = i - 2) {
    const pair = (s >> i) & 3;
    rem = rem + rem + rem + rem + pair;
    root = root + root;
    const cand = root + root + 1;
    if (rem >= cand) {
      rem = rem - cand;
      root = root + 1;
    }
  }
  for (let i = 0; i < p; i++) {
    rem = rem + rem + rem + rem;
    root = root + root;
    const cand = root + root + 1;
    if (rem >= cand) {
      rem = rem - cand;
      root = root + 1;
    }
  }
  return root;
}

/**
 * floor(2^(bitlen(d) + 15) / d) for 1 ≤ d < 2^30, clamped to 2^16 − 1: a reciprocal of `d` with its
 * 16 significant bits, whose exponent the caller knows from bitlen(d). Restoring long division:
 * rem < 2d < 2^31 throughout.
 */
export function recip16(d: number): number {
  const l = bitlen(d);
  let rem = 1 << (l - 1);
  if (rem >= d) return 65535; // d is a power of two: the quotient would be exactly 2^16
  let q = 0;
  for (let i = 0; i < 16; i++) {
    rem = rem + rem;
    q = q + q;
    if (rem >= d) {
      rem = rem - d;
      q = q + 1;
    }
  }
  return q;
}

/**
 * floor(n · 2^k / d) for int32 n ≥ 0, 0 ≤ k ≤ 31 and 1 ≤ d < 2^30, or `cap` when the quotient reaches
 * `cap` (≤ 2^31). Restoring long division over the bits of n from the top, then k zero bits.
 */
export function divShifted(n: number, k: number, d: number, cap: number): number {
  let rem = 0;
  let q = 0;
  for (let i = 30; i >= 0; i = i - 1) {
    rem = rem + rem + ((n >> i) & 1);
    q = q + q;
    if (rem >= d) {
      rem = rem - d;
      q = q + 1;
    }
    if (q >= cap) return cap;
  }
  for (let i = 0; i < k; i++) {
    rem = rem + rem;
    q = q + q;
    if (rem >= d) {
      rem = rem - d;
      q = q + 1;
    }
    if (q >= cap) return cap;
  }
  return q;
}

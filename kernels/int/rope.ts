/**
 * Rotate-half RoPE on integers: dimension i pairs with i + half, and both turn by the angle of
 * (position, i) read from Q14 cosine and sine tables (`[position][pair]`, int16).
 *
 * @example
 * ```ts
 * import { ropeHead } from "./rope.ts";
 * declare const q: Int32Array, cos: Int16Array, sin: Int16Array, pos16: number, scratch: Int32Array;
 * ropeHead(q, 0, 16, cos, sin, pos16, scratch);   // pos16 = position · 16, built by addition
 * ```
 * @module
 */
import { mulS16, multiples } from "./mul.ts";
import { shift } from "./round.ts";

/** Fraction bits of the cosine and sine tables. */
export const ROPE_Q = 14;

/**
 * Rotates `v[off, off + 2 · half)` in place: a' = round((a·c − b·s) / 2^14), b' = round((b·c + a·s) / 2^14).
 * Inputs |a|, |b| ≤ 32767 and |c|, |s| ≤ 2^14 keep each product below 2^29 and each sum below 2^30;
 * outputs are below 32767 · sqrt(2) < 2^16. `at` is the table offset of this position (position · half).
 * `tab` is 64 entries of scratch for the two multiples tables.
 */
export function ropeHead(
  v: Int32Array,
  off: number,
  half: number,
  cos: Int16Array,
  sin: Int16Array,
  at: number,
  tab: Int32Array,
): void {
  for (let i = 0; i < half; i++) {
    const c = cos[at + i];
    const s = sin[at + i];
    multiples(v[off + i], tab, 0);
    multiples(v[off + half + i], tab, 32);
    const ac = mulS16(tab, 0, c);
    const as = mulS16(tab, 0, s);
    const bc = mulS16(tab, 32, c);
    const bs = mulS16(tab, 32, s);
    v[off + i] = shift(ac - bs, ROPE_Q);
    v[off + half + i] = shift(bc + as, ROPE_Q);
  }
}

// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer engine's element-wise work as WebAssembly (built at load by kernels/wasm/int-lut.ts), each
 * on int32 vectors in the module's memory, n a multiple of 4 where they run four lanes at a time:
 *
 * - `quantize(src, n, dst, bits) → s`: kernels/int/round.ts `quantizeBits`: the largest magnitude, the
 *   shift s that brings it to `bits` bits, and every value shifted by s (round half up) and clamped to
 *   ±(2^bits − 1).
 * - `swiglu(a, b, n, out)`: out_i = a_i · b_i for |a_i|, |b_i| ≤ 32767 by shift-and-add over the sixteen
 *   binary digits of b_i: each bit selects a shifted copy of a_i (the base-2 form of mul.ts's table of
 *   multiples; the sign bit's copy is subtracted). The same exact integer as `mulS16`.
 * - `rmsnorm(x, n, xExp, bits, epsN, epsExp, y, out)`: kernels/int/norm.ts `rmsnorm`: the 15-bit copy y,
 *   the sum of squares of its coarse copy (each square by shift-and-add), eps in the sum's units, the
 *   digit-by-digit square root and the reciprocal (isqrt.ts), then each r · y_i (shift-and-add over
 *   y_i's bits) shifted and clamped to ±32767.
 * - `add_sat(x, y, n)`: x_i = sat32(x_i + y_i) (round.ts `satAdd`).
 * - `rope(v, half, cos, sin)`: kernels/int/rope.ts `ropeHead` in place, the four products a · cos,
 *   b · sin, b · cos, a · sin by shift-and-add over the bits of cos and sin.
 * - `silu(x, n, t, mul, len1, half)`: kernels/int/tables.ts `silu` in place, reading the table `t` and
 *   its differences' multiples `mul` (one value at a time: a table read per value).
 * - `norm_rope(v, heads, hd, …) `: the q or k heads of one position normed, gained, requantised,
 *   rotated and requantised again, each head's exponent written out (`normRopeFn`), by calls of
 *   `rmsnorm`, `quantize` and `rope`: one call where the engine made five per head.
 * - `quantize_heads(v, heads, hd, bits, shifts)`: `quantize` of each of `heads` heads of `hd` int32 at
 *   `v` in place, head h's shift at `shifts + 4h` (one call for a position's values, which a thread of
 *   the pool can take).
 * - `gated_product(gate, up, n, t, mul, len1, half, a16, up16, prod, shifts)`: engines/int/forward.ts
 *   `gatedProduct`, SiLU(gate) · up requantised to 15 bits in `a16`, by calls of `silu`, `quantize`
 *   and `swiglu`; the sum of its three shifts at `shifts`.
 *
 * Each computes exactly the integers of its TypeScript definition (tests/kernels/int-lut.test.ts), with only the
 * opcodes `LUT_OPCODES` classifies (kernels/wasm/lut.ts): no multiply, no divide, no float.
 * @module
 */
import { type Code, fn, type Func, I32, op } from "./asm.ts";
import {
  get,
  I32_MAX,
  inc,
  localsAfter,
  productBits,
  set,
  shiftRight4,
  maxAbs,
  recip16,
  restoringStep,
  shiftRound,
  splat4,
} from "./int-ops.ts";

/**
 * `quantize(src, n, dst, bits) → s`: see the module comment. |v| is taken unsigned, so −2^31 counts as
 * 2^31 as in `maxAbs`; s ≤ 32 − bits, and a left shift (s < 0) cannot leave `bits` bits.
 */
export function quantizeFn(): Func {
  const src = 0, n = 1, dst = 2, bits = 3;
  const l = localsAfter(4);
  const i = l.i32(), mx = l.i32(), lane = l.i32(), sh = l.i32(), top = l.i32();
  const mxv = l.v128(), v = l.v128(), topv = l.v128(), negv = l.v128();
  const each = (body: Code[]): Code => [
    op.i32(0), set(i),
    op.block([op.loop([
      get(i), get(n), op.i32_ge_s, op.br_if(1),
      body,
      inc(i, 4),
      op.br(0),
    ])]),
  ];
  const at = (base: number): Code => [get(base), get(i), op.i32(2), op.i32_shl, op.i32_add];
  const store = (value: Code): Code => [at(dst), value, get(topv), op.i32x4_min_s, get(negv), op.i32x4_max_s, op.v128_store()];
  return fn([I32, I32, I32, I32], [I32], l.types, [
    maxAbs(each, at(src), mxv, mx, lane),
    get(mx), op.i32_eqz,
    op.if_([op.i32(0), set(sh)], [op.i32(32), get(mx), op.i32_clz, op.i32_sub, get(bits), op.i32_sub, set(sh)]),
    op.i32(1), get(bits), op.i32_shl, op.i32(1), op.i32_sub, set(top),
    get(top), op.i32x4_splat, set(topv),
    op.i32(0), get(top), op.i32_sub, op.i32x4_splat, set(negv),
    get(sh), op.i32(0), op.i32_gt_s,
    op.if_([
      each([
        at(src), op.v128_load(), set(v),
        store([
          get(v), get(sh), op.i32x4_shr_s,
          get(v), get(sh), op.i32(1), op.i32_sub, op.i32x4_shr_s, splat4(1), op.v128_and, op.i32x4_add,
        ]),
      ]),
    ], [
      each([store([at(src), op.v128_load(), op.i32(0), get(sh), op.i32_sub, op.i32x4_shl])]),
    ]),
    get(sh),
  ]);
}

/** `swiglu(a, b, n, out)`: see the module comment. */
export function swigluFn(): Func {
  const a = 0, b = 1, n = 2, out = 3;
  const l = localsAfter(4);
  const i = l.i32(), av = l.v128(), bv = l.v128(), acc = l.v128();
  const at = (base: number): Code => [get(base), get(i), op.i32(2), op.i32_shl, op.i32_add];
  // (a << k) in the lanes where bit k of b is set: bit k moved to the sign, then spread.
  const term = (k: number): Code => [
    get(av), op.i32(k), op.i32x4_shl, get(bv), op.i32(31 - k), op.i32x4_shl, op.i32(31), op.i32x4_shr_s, op.v128_and,
  ];
  return fn([I32, I32, I32, I32], [], l.types, [
    op.i32(0), set(i),
    op.block([op.loop([
      get(i), get(n), op.i32_ge_s, op.br_if(1),
      at(a), op.v128_load(), set(av),
      at(b), op.v128_load(), set(bv),
      term(0), set(acc),
      Array.from({ length: 14 }, (_, k) => [get(acc), term(k + 1), op.i32x4_add, set(acc)]),
      at(out), get(acc), term(15), op.i32x4_sub, op.v128_store(),
      inc(i, 4),
      op.br(0),
    ])]),
  ]);
}

/** `rmsnorm(x, n, xExp, bits, epsN, epsExp, y, out)`: see the module comment and kernels/int/norm.ts. */
export function rmsnormFn(): Func {
  const x = 0, n = 1, xExp = 2, bits = 3, epsN = 4, epsExp = 5, y = 6, out = 7;
  const l = localsAfter(8);
  const i = l.i32(), mx = l.i32(), lane = l.i32(), s1 = l.i32(), s2 = l.i32(), sum = l.i32(), e2 = l.i32();
  const extra = l.i32(), eps = l.i32(), rem = l.i32(), root = l.i32(), cand = l.i32(), r = l.i32(), sh = l.i32();
  const term = l.i32(), sat = l.i32(), kk = l.i32(), lim = l.i32(), k = l.i32(), v32 = l.i32(), fits = l.i32();
  const mxv = l.v128(), v = l.v128(), c = l.v128(), sumv = l.v128(), acc = l.v128(), rv = l.v128();
  const zero = op.v128_const(new Uint8Array(16));
  const each = (body: Code[]): Code => [
    op.i32(0), set(i),
    op.block([op.loop([get(i), get(n), op.i32_ge_s, op.br_if(1), body, inc(i, 4), op.br(0)])]),
  ];
  const at = (base: number): Code => [get(base), get(i), op.i32(2), op.i32_shl, op.i32_add];
  const clamp16 = (value: Code): Code => [value, splat4(32767), op.i32x4_min_s, splat4(-32767), op.i32x4_max_s];
  // One digit of the square root: rem = 4 · rem + pair; root doubles and keeps the digit if it fits.
  const rootStep = (pair: Code): Code => [
    get(rem), op.i32(2), op.i32_shl, pair, op.i32_add, set(rem),
    get(root), get(root), op.i32_add, set(root),
    get(root), get(root), op.i32_add, op.i32(1), op.i32_add, set(cand),
    restoringStep(rem, cand, root, fits),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    op.i32(0), set(sat),
    // 1. The largest magnitude (unsigned, as maxAbs); an all-zero x normalises to zeros.
    maxAbs(each, at(x), mxv, mx, lane),
    get(mx), op.i32_eqz,
    op.if_([each([at(out), zero, op.v128_store()])], [
      // y = shift(x, s1) clamped to 15 bits (s1 ≤ 0 shifts left and cannot leave 15 bits);
      // c = shift(|y|, s2), summed as c · c.
      op.i32(32), get(mx), op.i32_clz, op.i32_sub, op.i32(15), op.i32_sub, set(s1),
      op.i32(15), get(bits), op.i32_sub, set(s2),
      zero, set(sumv),
      each([
        at(x), op.v128_load(), set(v),
        at(y),
        clamp16([
          get(s1), op.i32(0), op.i32_gt_s,
          op.if_v128([shiftRight4(v, s1)], [get(v), op.i32(0), get(s1), op.i32_sub, op.i32x4_shl]),
        ]),
        op.v128_store(), // y
        at(y), op.v128_load(), op.i32x4_abs, set(c),
        get(s2), op.i32(0), op.i32_gt_s, op.if_([shiftRight4(c, s2), set(c)]),
        get(sumv), productBits(c, c, acc), op.i32x4_add, set(sumv),
      ]),
      op.i32(0), set(sum),
      [0, 1, 2, 3].map((q) => [get(sum), get(sumv), op.i32x4_extract_lane(q), op.i32_add, set(sum)]),
      // eps · n in units of 2^(2 · (ey + s2)), ey = xExp + s1; while the sum would leave int32, drop 2 bits.
      get(xExp), get(s1), op.i32_add, set(e2),
      get(e2), get(e2), op.i32_add, get(s2), op.i32_add, get(s2), op.i32_add, get(epsExp), op.i32_sub, set(e2),
      op.i32(0), set(extra),
      op.block([op.loop([
        get(e2), op.i32(0), op.i32_ge_s,
        op.if_([shiftRound(epsN, e2, eps, sat, kk, lim)], [
          op.i32(-1), set(eps),
          get(e2), op.i32(-31), op.i32_gt_s,
          op.if_([
            op.i32(I32_MAX), op.i32(0), get(e2), op.i32_sub, op.i32_shr_s, set(lim),
            get(epsN), get(lim), op.i32_le_s,
            op.if_([get(epsN), op.i32(0), get(e2), op.i32_sub, op.i32_shl, set(eps)]),
          ]),
        ]),
        // Done when eps ≥ 0 and sum + eps stays within int32 (both ≥ 0: a wrap shows as negative).
        get(eps), op.i32(0), op.i32_ge_s, get(sum), get(eps), op.i32_add, op.i32(0), op.i32_ge_s, op.i32_and,
        op.br_if(1),
        inc(extra, 1),
        get(sum), op.i32(2), op.i32_shr_s, set(sum),
        inc(e2, 2),
        op.br(0),
      ])]),
      // root = floor(sqrt((sum + eps) · 4^13)), two bits at a time; rem stays below 2^32 (unsigned).
      get(sum), get(eps), op.i32_add, set(v32),
      op.i32(0), set(rem),
      op.i32(0), set(root),
      op.i32(30), set(k),
      op.block([op.loop([
        get(k), op.i32(0), op.i32_lt_s, op.br_if(1),
        rootStep([get(v32), get(k), op.i32_shr_s, op.i32(3), op.i32_and]),
        get(k), op.i32(2), op.i32_sub, set(k),
        op.br(0),
      ])]),
      Array.from({ length: 13 }, () => rootStep([op.i32(0)])),
      // r = floor(2^(bitlen(root) + 15) / root) (k = bitlen(root)), and the final shift.
      recip16(root, r, k, rem, fits),
      get(k), get(s2), op.i32_add, get(extra), op.i32_add, op.i32(13), op.i32_sub, set(sh),
      get(r), op.i32x4_splat, set(rv),
      // z = shift(r · y, sh) clamped to ±32767: four lanes for sh in [1, 31] (always, as norm.ts shows),
      // else one value at a time through shift's every case.
      get(sh), op.i32(1), op.i32_ge_s, get(sh), op.i32(31), op.i32_le_s, op.i32_and,
      op.if_([
        each([
          at(y), op.v128_load(), set(v),
          productBits(rv, v, acc), set(acc),
          at(out), clamp16(shiftRight4(acc, sh)), op.v128_store(),
        ]),
      ], [
        each([
          at(y), op.v128_load(), set(v),
          productBits(rv, v, acc), set(acc),
          [0, 1, 2, 3].map((q) => [
            get(acc), op.i32x4_extract_lane(q), set(v32),
            shiftRound(v32, sh, term, sat, kk, lim),
            get(term), op.i32(32767), op.i32_gt_s, op.if_([op.i32(32767), set(term)]),
            get(term), op.i32(-32767), op.i32_lt_s, op.if_([op.i32(-32767), set(term)]),
            at(out), get(term), op.i32_store(4 * q),
          ]),
        ]),
      ]),
    ]),
  ]);
}

/** `add_sat(x, y, n)`: x_i = sat32(x_i + y_i), four at a time (the overflow test of `accumulate`). */
export function addSatFn(): Func {
  const x = 0, y = 1, n = 2;
  const l = localsAfter(3);
  const i = l.i32(), a = l.v128(), b = l.v128(), sumv = l.v128(), ovf = l.v128();
  const at = (base: number): Code => [get(base), get(i), op.i32(2), op.i32_shl, op.i32_add];
  return fn([I32, I32, I32], [], l.types, [
    op.i32(0), set(i),
    op.block([op.loop([
      get(i), get(n), op.i32_ge_s, op.br_if(1),
      at(x), op.v128_load(), set(a),
      at(y), op.v128_load(), set(b),
      get(a), get(b), op.i32x4_add, set(sumv),
      get(a), get(sumv), op.v128_xor, get(b), get(sumv), op.v128_xor, op.v128_and, op.i32(31), op.i32x4_shr_s, set(ovf),
      at(x),
      get(a), op.i32(31), op.i32x4_shr_s, splat4(I32_MAX), op.v128_xor, get(sumv), get(ovf), op.v128_bitselect,
      op.v128_store(),
      inc(i, 4),
      op.br(0),
    ])]),
  ]);
}

/** `rope(v, half, cos, sin)`: see the module comment; cos and sin are int32 (Q14, |c| ≤ 2^14). */
export function ropeFn(): Func {
  const v = 0, half = 1, cos = 2, sin = 3;
  const l = localsAfter(4);
  const i = l.i32(), hi = l.i32();
  const a = l.v128(), b = l.v128(), c = l.v128(), sn = l.v128(), mc = l.v128(), ms = l.v128();
  const ac = l.v128(), as = l.v128(), bc = l.v128(), bs = l.v128();
  const zero = op.v128_const(new Uint8Array(16));
  const at = (base: number, offset: Code = []): Code => [get(base), get(i), op.i32(2), op.i32_shl, op.i32_add, offset];
  // Bit k of cos and sin selects a << k and b << k; bit 15 (the sign) subtracts them.
  const bit = (k: number): Code => {
    const add = k === 15 ? op.i32x4_sub : op.i32x4_add;
    return [
      get(c), op.i32(31 - k), op.i32x4_shl, op.i32(31), op.i32x4_shr_s, set(mc),
      get(sn), op.i32(31 - k), op.i32x4_shl, op.i32(31), op.i32x4_shr_s, set(ms),
      get(ac), get(a), get(mc), op.v128_and, add, set(ac),
      get(bc), get(b), get(mc), op.v128_and, add, set(bc),
      get(as), get(a), get(ms), op.v128_and, add, set(as),
      get(bs), get(b), get(ms), op.v128_and, add, set(bs),
      k === 15 ? [] : [get(a), op.i32(1), op.i32x4_shl, set(a), get(b), op.i32(1), op.i32x4_shl, set(b)],
    ];
  };
  const round14 = (x: Code): Code => [
    x, set(mc),
    get(mc), op.i32(14), op.i32x4_shr_s, get(mc), op.i32(13), op.i32x4_shr_s, splat4(1), op.v128_and, op.i32x4_add,
  ];
  return fn([I32, I32, I32, I32], [], l.types, [
    get(half), op.i32(2), op.i32_shl, set(hi),
    op.i32(0), set(i),
    op.block([op.loop([
      get(i), get(half), op.i32_ge_s, op.br_if(1),
      at(v), op.v128_load(), set(a),
      at(v, [get(hi), op.i32_add]), op.v128_load(), set(b),
      at(cos), op.v128_load(), set(c),
      at(sin), op.v128_load(), set(sn),
      [ac, as, bc, bs].map((x) => [zero, set(x)]),
      Array.from({ length: 16 }, (_, k) => bit(k)),
      at(v), round14([get(ac), get(bs), op.i32x4_sub]), op.v128_store(),
      at(v, [get(hi), op.i32_add]), round14([get(bc), get(as), op.i32x4_add]), op.v128_store(),
      inc(i, 4),
      op.br(0),
    ])]),
  ]);
}

/** `silu(x, n, t, mul, len1, half)`: see the module comment and kernels/int/tables.ts `silu`. */
export function siluFn(): Func {
  const x = 0, n = 1, t = 2, mul = 3, len1 = 4, half = 5;
  const l = localsAfter(6);
  const end = l.i32(), v = l.i32(), i = l.i32(), f = l.i32(), row = l.i32(), y = l.i32();
  return fn([I32, I32, I32, I32, I32, I32], [], l.types, [
    get(x), get(n), op.i32(2), op.i32_shl, op.i32_add, set(end),
    op.block([op.loop([
      get(x), get(end), op.i32_ge_s, op.br_if(1),
      get(x), op.i32_load(), set(v),
      get(v), op.i32(8), op.i32_shr_s, get(half), op.i32_add, set(i),
      get(i), op.i32(0), op.i32_lt_s,
      op.if_([op.i32(0), set(y)], [
        get(i), get(len1), op.i32_ge_s,
        op.if_([get(v), set(y)], [
          get(v), op.i32(255), op.i32_and, set(f),
          get(mul), get(i), op.i32(6), op.i32_shl, op.i32_add, set(row), // 16 int32 per entry
          get(t), get(i), op.i32(2), op.i32_shl, op.i32_add, op.i32_load(),
          get(row), get(f), op.i32(4), op.i32_shr_s, op.i32(2), op.i32_shl, op.i32_add, op.i32_load(), op.i32(4), op.i32_shl,
          get(row), get(f), op.i32(15), op.i32_and, op.i32(2), op.i32_shl, op.i32_add, op.i32_load(),
          op.i32_add, op.i32(8), op.i32_shr_s,
          op.i32_add, set(y),
        ]),
      ]),
      get(x), get(y), op.i32_store(),
      inc(x, 4),
      op.br(0),
    ])]),
  ]);
}

/**
 * `norm_rope(v, heads, hd, xExp, normBits, epsN, epsExp, y, head, gains, gainExp, cos, sin, bits,
 * exps)`: engines/int/forward.ts `normRope` for each of `heads` heads of `hd` int32 at `v` (head after
 * head, at exponent `xExp`), in place: `rmsnorm` into `head` (its plan `normBits`, `epsN`, `epsExp`,
 * scratch `y`), the gain g_i · z_i (kernels/int/norm.ts `applyGain`: mul.ts `mulS16` from the gain's
 * multiples tables at `gains`, 32 int32 per dimension), `quantize` to 15 bits, `rope` (its cos and sin
 * rows at `cos` and `sin`), `quantize` to `bits` bits; head h's exponent, `gainExp` (the norm's
 * exponent plus the gain's) plus the two shifts, at `exps + 4h`. `hd` a multiple of 8.
 *
 * `calls` names the module's functions by index (kernels/wasm/int-lut.ts assembles them in order).
 */
export function normRopeFn(calls: { rmsnorm: number; quantize: number; rope: number }): Func {
  const v = 0, heads = 1, hd = 2, xExp = 3, normBits = 4, epsN = 5, epsExp = 6, y = 7, head = 8, gains = 9;
  const gainExp = 10, cos = 11, sin = 12, bits = 13, exps = 14;
  const l = localsAfter(15);
  const h = l.i32(), i = l.i32(), z = l.i32(), t = l.i32(), src = l.i32(), dst = l.i32(), e = l.i32();
  const headBytes = l.i32();
  // The table entry of one base-16 digit of z: the low three unsigned, the top one signed (+16 entries).
  const entry = (shift: number, top: boolean): Code => [
    get(t), get(z), op.i32(shift), op.i32_shr_s, op.i32(15), op.i32_and, op.i32(2), op.i32_shl, op.i32_add,
    op.i32_load(top ? 64 : 0),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    get(hd), op.i32(2), op.i32_shl, set(headBytes),
    op.i32(0), set(h),
    op.block([op.loop([
      get(h), get(heads), op.i32_ge_s, op.br_if(1),
      get(v), get(hd), get(xExp), get(normBits), get(epsN), get(epsExp), get(y), get(head), op.call(calls.rmsnorm),
      get(head), set(src),
      get(v), set(dst),
      get(gains), set(t),
      op.i32(0), set(i),
      op.block([op.loop([
        get(i), get(hd), op.i32_ge_s, op.br_if(1),
        get(src), op.i32_load(), set(z),
        get(dst),
        entry(12, true), op.i32(12), op.i32_shl,
        entry(8, false), op.i32(8), op.i32_shl, op.i32_add,
        entry(4, false), op.i32(4), op.i32_shl, op.i32_add,
        entry(0, false), op.i32_add,
        op.i32_store(),
        inc(src, 4), inc(dst, 4), inc(t, 128), inc(i, 1),
        op.br(0),
      ])]),
      get(v), get(hd), get(v), op.i32(15), op.call(calls.quantize), get(gainExp), op.i32_add, set(e),
      get(v), get(hd), op.i32(1), op.i32_shr_s, get(cos), get(sin), op.call(calls.rope),
      get(v), get(hd), get(v), get(bits), op.call(calls.quantize), get(e), op.i32_add, set(e),
      get(exps), get(e), op.i32_store(),
      inc(exps, 4),
      get(v), get(headBytes), op.i32_add, set(v),
      inc(h, 1),
      op.br(0),
    ])]),
  ]);
}

/**
 * `quantize_heads(v, heads, hd, bits, shifts)`: `quantize(v + 4 · hd · h, hd, same, bits)` for each head
 * h < `heads`, its shift at `shifts + 4h`. `hd` a multiple of 4.
 *
 * `calls` names the module's functions by index (kernels/wasm/int-lut.ts assembles them in order).
 */
export function quantizeHeadsFn(calls: { quantize: number }): Func {
  const v = 0, heads = 1, hd = 2, bits = 3, shifts = 4;
  const l = localsAfter(5);
  const h = l.i32(), headBytes = l.i32();
  return fn([I32, I32, I32, I32, I32], [], l.types, [
    get(hd), op.i32(2), op.i32_shl, set(headBytes),
    op.i32(0), set(h),
    op.block([op.loop([
      get(h), get(heads), op.i32_ge_s, op.br_if(1),
      get(shifts),
      get(v), get(hd), get(v), get(bits), op.call(calls.quantize),
      op.i32_store(),
      inc(shifts, 4),
      get(v), get(headBytes), op.i32_add, set(v),
      inc(h, 1),
      op.br(0),
    ])]),
  ]);
}

/**
 * `gated_product(gate, up, n, t, mul, len1, half, a16, up16, prod, shifts)`: `silu(gate, n, t, mul,
 * len1, half)` in place, then `quantize` of gate into `a16` and of up into `up16` (15 bits), `swiglu`
 * of the two into `prod`, and `quantize` of prod into `a16` (15 bits); the three shifts' sum at `shifts`.
 * `n` a multiple of 4.
 *
 * `calls` names the module's functions by index (kernels/wasm/int-lut.ts assembles them in order).
 */
export function gatedProductFn(calls: { silu: number; quantize: number; swiglu: number }): Func {
  const gate = 0, up = 1, n = 2, t = 3, mul = 4, len1 = 5, half = 6, a16 = 7, up16 = 8, prod = 9, shifts = 10;
  const l = localsAfter(11);
  const sum = l.i32();
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    get(gate), get(n), get(t), get(mul), get(len1), get(half), op.call(calls.silu),
    get(gate), get(n), get(a16), op.i32(15), op.call(calls.quantize), set(sum),
    get(up), get(n), get(up16), op.i32(15), op.call(calls.quantize), get(sum), op.i32_add, set(sum),
    get(a16), get(up16), get(n), get(prod), op.call(calls.swiglu),
    get(prod), get(n), get(a16), op.i32(15), op.call(calls.quantize), get(sum), op.i32_add, set(sum),
    get(shifts), get(sum), op.i32_store(),
  ]);
}

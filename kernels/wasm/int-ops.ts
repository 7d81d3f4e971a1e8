// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The pieces the integer engine's WebAssembly functions are assembled from (kernels/wasm/int-gemv.ts,
 * int-attention.ts, int-vector.ts): numbering locals, the look-up column over three byte planes and its
 * runs, the shifts of kernels/int/round.ts `shift` (scalar, every case; and four lanes at a time), and
 * the multiply-free products (shift-add over a scale's or an operand's bits). Each returns instructions
 * for kernels/wasm/asm.ts; none is a function of the module by itself.
 * @module
 */
import { type Code, I32, op, V128, type ValType } from "./asm.ts";
import { type LutLocals, lutZero } from "./lut.ts";

export const { get, set } = op;
export const I32_MAX = 0x7fffffff;
export const I32_MIN = -0x80000000;

/** The locals of a function being built (`localsAfter`). */
export type Locals = ReturnType<typeof localsAfter>;

/** Numbers locals after the parameters as they are asked for, remembering their types for `fn`. */
export function localsAfter(params: number) {
  const types: ValType[] = [];
  const take = (t: ValType) => {
    types.push(t);
    return params + types.length - 1;
  };
  return { types, i32: () => take(I32), v128: () => take(V128) };
}

/** Locals for one look-up run. */
export function lutLocals(l: Locals): LutLocals {
  return {
    t: l.i32(), k: l.i32(), idx: l.v128(), v: l.v128(),
    lo0: l.v128(), lo1: l.v128(), mid0: l.v128(), mid1: l.v128(), hi0: l.v128(), hi1: l.v128(),
  };
}

/** local += by. */
export const inc = (local: number, by: number): Code => [get(local), op.i32(by), op.i32_add, set(local)];

/** All ones in the lanes of i32x4 `v` where its bit b is set: that bit moved to the sign, then spread. */
export const maskBit = (v: number, b: number): Code => [get(v), op.i32(31 - b), op.i32x4_shl, op.i32(31), op.i32x4_shr_s];

/** A conditional shift of the i32x4 `x` by 2^b (`shiftOp`) in the lanes where bit b of `by` is set. */
export const stepBy = (x: number, by: number, b: number, shiftOp: Code): Code => [
  get(x), op.i32(1 << b), shiftOp, get(x), maskBit(by, b), op.v128_bitselect, set(x),
];

/** A v128 constant of four equal int32 lanes, and of sixteen equal bytes. */
export const splat4 = (v: number): Code => op.v128_const(new Uint8Array(Int32Array.from([v, v, v, v]).buffer));

export const bytes16 = (v: number): Code => op.v128_const(new Uint8Array(16).fill(v));

/**
 * `dst = shift(src, amount)` of kernels/int/round.ts (round half up to the right, saturating to the
 * left), adding 1 to `sat` where it saturates. `kk` and `lim` are scratch locals.
 */
export function shiftRound(src: number, amount: number, dst: number, sat: number, kk: number, lim: number): Code {
  const saturated = inc(sat, 1);
  return [
    get(amount), op.i32(0), op.i32_gt_s,
    op.if_([
      get(amount), op.i32(32), op.i32_ge_s,
      op.if_([op.i32(0), set(dst)], [
        get(src), get(amount), op.i32_shr_s,
        get(src), get(amount), op.i32(1), op.i32_sub, op.i32_shr_s, op.i32(1), op.i32_and,
        op.i32_add, set(dst),
      ]),
    ], [
      get(amount), op.i32_eqz,
      op.if_([get(src), set(dst)], [
        op.i32(0), get(amount), op.i32_sub, set(kk),
        get(kk), op.i32(31), op.i32_ge_s,
        op.if_([
          get(src), op.i32_eqz,
          op.if_([op.i32(0), set(dst)], [
            get(src), op.i32(31), op.i32_shr_s, op.i32(I32_MAX), op.i32_xor, set(dst), saturated,
          ]),
        ], [
          op.i32(I32_MAX), get(kk), op.i32_shr_s, set(lim),
          get(src), get(lim), op.i32_gt_s,
          op.if_([op.i32(I32_MAX), set(dst), saturated], [
            get(src), get(lim), op.i32(-1), op.i32_xor, op.i32_lt_s,
            op.if_([op.i32(I32_MIN), set(dst), saturated], [get(src), get(kk), op.i32_shl, set(dst)]),
          ]),
        ]),
      ]),
    ]),
  ];
}

/**
 * `dst = shift(src, amount)` for an amount known to be ≥ 0, without branches: src for 0, 0 from 32 on,
 * else `(src >> amount) + ((src >> (amount − 1)) & 1)` (the other cases' shifts are computed and
 * discarded by `select`).
 */
export function shiftRightRound(src: number, amount: number, dst: number): Code {
  // `select` leaves its first operand when the condition is non-zero, else its second.
  return [
    get(src),
    get(src), get(amount), op.i32_shr_s,
    get(src), get(amount), op.i32(1), op.i32_sub, op.i32_shr_s, op.i32(1), op.i32_and, op.i32_add,
    get(amount), op.i32_eqz, op.select,
    op.i32(0),
    get(amount), op.i32(32), op.i32_lt_s, op.select,
    set(dst),
  ];
}

/** Leaves (16 + m) · a on the stack, by shifts, masks and adds (kernels/int/mul.ts `mulScale`). */
export function mulScale(a: number, m: number): Code {
  const bit = (b: number): Code => [
    get(a), op.i32(b), op.i32_shl,
    op.i32(0), get(m), op.i32(b), op.i32_shr_s, op.i32(1), op.i32_and, op.i32_sub,
    op.i32_and, op.i32_add,
  ];
  return [get(a), op.i32(4), op.i32_shl, bit(0), bit(1), bit(2), bit(3)];
}

/** Leaves a · b on the stack for i32x4 a and b with |a · b| < 2^31 and b in [−2^15, 2^15): see `swiglu`. */
export function productBits(av: number, bv: number, acc: number): Code {
  const term = (k: number): Code => [
    get(av), op.i32(k), op.i32x4_shl, get(bv), op.i32(31 - k), op.i32x4_shl, op.i32(31), op.i32x4_shr_s, op.v128_and,
  ];
  return [
    term(0), set(acc),
    Array.from({ length: 14 }, (_, k) => [get(acc), term(k + 1), op.i32x4_add, set(acc)]),
    get(acc), term(15), op.i32x4_sub,
  ];
}

/** Leaves the i32x4 `v` shifted right by the scalar `sh` in [1, 31], rounding half up (round.ts `shift`). */
export function shiftRight4(v: number, sh: number): Code {
  return [
    get(v), get(sh), op.i32x4_shr_s,
    get(v), get(sh), op.i32(1), op.i32_sub, op.i32x4_shr_s, splat4(1), op.v128_and, op.i32x4_add,
  ];
}

/**
 * One column of `gemv_lut`'s look-up: as `lutColumn`, but the top plane's bytes are added as bytes into
 * `hi8`: an entry (u − 8) · x_c with |x_c| ≤ 32767 has a top byte in [−4, 3], so 32 columns sum to
 * [−128, 96] and no byte sum overflows within a group.
 */
export function gemvColumn(l: LutLocals, hi8: number, relaxed: boolean, j = -1): Code {
  // i8x16.relaxed_swizzle is i8x16.swizzle wherever every index is below 16, as every code and digit is;
  // runtimes that have it skip the swizzle's out-of-range fix-up (faster under V8).
  const swizzle = relaxed ? op.i8x16_relaxed_swizzle : op.i8x16_swizzle;
  // Column j of an unrolled run reads at constant offsets from `t` and `k`; j < 0 reads at them and
  // moves them on by one column.
  const at = j < 0 ? 0 : j;
  const plane = (offset: number, a: number, b: number): Code => [
    get(l.t), op.v128_load(48 * at + offset), get(l.idx), swizzle, set(l.v),
    get(a), get(l.v), op.i16x8_extend_low_i8x16_u, op.i16x8_add, set(a),
    get(b), get(l.v), op.i16x8_extend_high_i8x16_u, op.i16x8_add, set(b),
  ];
  return [
    get(l.k), op.v128_load(16 * at), set(l.idx),
    plane(0, l.lo0, l.lo1),
    plane(16, l.mid0, l.mid1),
    get(hi8), get(l.t), op.v128_load(48 * at + 32), get(l.idx), swizzle, op.i8x16_add, set(hi8),
    j < 0 ? [get(l.t), op.i32(48), op.i32_add, set(l.t), get(l.k), op.i32(16), op.i32_add, set(l.k)] : [],
  ];
}

/**
 * `pairs` pairs of columns of `gemv_lut`'s look-up over packed codes, unrolled: each 16 bytes at `k`
 * hold 16 rows' codes of two columns, as the lut4 file stores them (column 2j in the low nibble, 2j + 1
 * in the high one), unpacked by a mask and a shift into two index vectors. The planes hold 7-bit
 * digits (`planes_offset`: bits 0–6 and 7–13 unsigned, the rest signed, in [−16, 15] for entries in
 * (−2^18, 2^18)), so the two columns' low digits add as bytes (at most 254) before widening once, and
 * the top digits add as bytes over four pairs (eight columns, within [−128, 120]) before widening into
 * `hi0`/`hi1`. `t` moves past the 2 · `pairs` columns' planes and `k` past the codes; `packed` is a
 * scratch v128 local, `hi8` the top digits' byte sums, `low4` a local holding 15 in every byte (V8
 * rebuilds a v128 constant at every use: kept in a local, the look-ups ran 6–10% faster under Deno).
 */
export function gemvPairs(l: LutLocals, hi8: number, pairs: number, relaxed: boolean, packed: number, low4: number): Code {
  const swizzle = relaxed ? op.i8x16_relaxed_swizzle : op.i8x16_swizzle;
  const lo = l.idx, hi = l.v; // the even and the odd column's codes
  const read = (at: number, idx: number): Code => [get(l.t), op.v128_load(at), get(idx), swizzle];
  const digit = (at: number, offset: number, a: number, b: number): Code => [
    read(at + offset, lo), read(at + 48 + offset, hi), op.i8x16_add, set(packed),
    get(a), get(packed), op.i16x8_extend_low_i8x16_u, op.i16x8_add, set(a),
    get(b), get(packed), op.i16x8_extend_high_i8x16_u, op.i16x8_add, set(b),
  ];
  const widenTop: Code = [
    get(l.hi0), get(hi8), op.i16x8_extend_low_i8x16_s, op.i16x8_add, set(l.hi0),
    get(l.hi1), get(hi8), op.i16x8_extend_high_i8x16_s, op.i16x8_add, set(l.hi1),
  ];
  return [
    Array.from({ length: pairs }, (_, j) => [
      (j & 3) === 0 ? [op.v128_const(new Uint8Array(16)), set(hi8)] : [],
      get(l.k), op.v128_load(16 * j), set(packed),
      get(packed), get(low4), op.v128_and, set(lo),
      get(packed), op.i32(4), op.i32x4_shr_u, get(low4), op.v128_and, set(hi),
      digit(96 * j, 0, l.lo0, l.lo1),
      digit(96 * j, 16, l.mid0, l.mid1),
      get(hi8), read(96 * j + 32, lo), op.i8x16_add, read(96 * j + 80, hi), op.i8x16_add, set(hi8),
      (j & 3) === 3 || j === pairs - 1 ? widenTop : [],
    ]),
    get(l.t), op.i32(96 * pairs), op.i32_add, set(l.t),
    get(l.k), op.i32(16 * pairs), op.i32_add, set(l.k),
  ];
}

/**
 * Leaves on the stack the i32x4 totals of four of `gemvPairs`' 16 rows, lo + (mid << 7) + (hi << 14):
 * `quarter` 0..3 picks rows 0–3, 4–7, 8–11, 12–15.
 */
export function gemvTotals(l: LutLocals, quarter: number): Code {
  const lo = quarter < 2 ? l.lo0 : l.lo1, mid = quarter < 2 ? l.mid0 : l.mid1, hi = quarter < 2 ? l.hi0 : l.hi1;
  const high = (quarter & 1) === 1;
  return [
    get(lo), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u,
    get(mid), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u, op.i32(7), op.i32x4_shl, op.i32x4_add,
    get(hi), high ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s, op.i32(14), op.i32x4_shl, op.i32x4_add,
  ];
}

/** `count` columns of `gemvColumn`, unrolled, then `t` and `k` moved past them. */
export function gemvColumns(l: LutLocals, hi8: number, count: number, relaxed: boolean): Code {
  return [
    Array.from({ length: count }, (_, j) => gemvColumn(l, hi8, relaxed, j)),
    get(l.t), op.i32(48 * count), op.i32_add, set(l.t),
    get(l.k), op.i32(16 * count), op.i32_add, set(l.k),
  ];
}

/**
 * The look-up over `cols` columns (a local) from the current `t` and `k`, into freshly zeroed sums:
 * `gemvColumn` in runs of 16 columns, each run's top-plane bytes then widened into the 16-bit sums. For
 * tables whose entries lie in (−2^19, 2^19) (top bytes in [−8, 7]), so a run's byte sums stay in
 * [−128, 112]. `c` and `end` are scratch locals; with `jump` (a local), `k` moves on by that many
 * bytes more after each whole run of 16 (codes laid out in blocks of 16 columns).
 */
export function lutRun(
  l: LutLocals,
  hi8: number,
  cols: number,
  c: number,
  end: number,
  relaxed: boolean,
  jump = -1,
): Code {
  return [
    lutZero(l),
    op.i32(0), set(c),
    op.block([op.loop([
      get(c), get(cols), op.i32_ge_s, op.br_if(1),
      op.v128_const(new Uint8Array(16)), set(hi8),
      get(c), op.i32(16), op.i32_add, set(end),
      get(end), get(cols), op.i32_le_s,
      op.if_([
        gemvColumns(l, hi8, 16, relaxed), get(end), set(c),
        jump < 0 ? [] : [get(l.k), get(jump), op.i32_add, set(l.k)],
      ], [
        op.block([op.loop([
          get(c), get(cols), op.i32_ge_s, op.br_if(1),
          gemvColumn(l, hi8, relaxed),
          inc(c, 1),
          op.br(0),
        ])]),
      ]),
      get(l.hi0), get(hi8), op.i16x8_extend_low_i8x16_s, op.i16x8_add, set(l.hi0),
      get(l.hi1), get(hi8), op.i16x8_extend_high_i8x16_s, op.i16x8_add, set(l.hi1),
      op.br(0),
    ])]),
  ];
}

/**
 * One step of a restoring division or square root, without a branch (whether d fits is data, and a
 * mispredicted branch costs more than the select): fits = rem ≥ d (unsigned); rem −= d and q += 1
 * where it does. `fits` is a scratch local.
 */
export function restoringStep(rem: number, d: number, q: number, fits: number): Code {
  return [
    get(rem), get(d), op.i32_ge_u, set(fits),
    get(rem), get(d), op.i32_sub, get(rem), get(fits), op.select, set(rem),
    get(q), get(fits), op.i32_add, set(q),
  ];
}

/**
 * `mx` = the largest |v| (unsigned, so −2^31 counts as 2^31, as round.ts `maxAbs`) of the i32x4
 * vectors `each` visits: `each` is given the code that folds one vector, found at the address `at`
 * leaves on the stack, into `mxv`. `lane` is a scratch local.
 */
export function maxAbs(each: (body: Code[]) => Code, at: Code, mxv: number, mx: number, lane: number): Code {
  return [
    op.v128_const(new Uint8Array(16)), set(mxv),
    each([get(mxv), at, op.v128_load(), op.i32x4_abs, op.i32x4_max_u, set(mxv)]),
    op.i32(0), set(mx),
    [0, 1, 2, 3].map((q) => [
      get(mxv), op.i32x4_extract_lane(q), set(lane),
      get(lane), get(mx), op.i32_gt_u, op.if_([get(lane), set(mx)]),
    ]),
  ];
}

/**
 * `r` = isqrt.ts `recip16(d)` = floor(2^(bitlen(d) + 15) / d), clamped to 2^16 − 1, for 1 ≤ d < 2^31:
 * `bits` gets bitlen(d); `rem` and `fits` are scratch. Sixteen restoring steps, unsigned (rem < d, so
 * 2 · rem < 2^32).
 */
export function recip16(d: number, r: number, bits: number, rem: number, fits: number): Code {
  return [
    op.i32(32), get(d), op.i32_clz, op.i32_sub, set(bits),
    op.i32(1), get(bits), op.i32(1), op.i32_sub, op.i32_shl, set(rem),
    get(rem), get(d), op.i32_ge_s,
    op.if_([op.i32(65535), set(r)], [
      op.i32(0), set(r),
      Array.from({ length: 16 }, () => [
        get(rem), get(rem), op.i32_add, set(rem),
        get(r), get(r), op.i32_add, set(r),
        restoringStep(rem, d, r, fits),
      ]),
    ]),
  ];
}

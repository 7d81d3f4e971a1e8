// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer engine's hot loops as WebAssembly, generated at load with kernels/wasm/asm.ts: each
 * function computes exactly the integers of its TypeScript definition in kernels/int/ (the tests
 * compare them bit for bit), with only the opcodes `INT_OPCODES` classifies (kernels/wasm/lut.ts): no
 * multiply, no divide, no float.
 *
 * - `planes_offset(x, n, out)`: the byte planes of the tables (u − 8) · x_i (kernels/int/gemv-lut.ts
 *   `inputPlanes`), 48 bytes per input.
 * - `planes_digits(x, n, outU, outS)`: the byte planes of u · x_i and of the signed top digit's table
 *   (u < 8 ? u : u − 16) · x_i (kernels/int/attention.ts `queryPlanes`), 48 bytes per input each.
 * - `planes_unsigned(x, n, out)`: the byte planes of u · x_i alone.
 * - `gemv_lut(planes, codes, scales, rows, groups, base, fin, out, scratch)`: the whole 4-bit projection
 *   of kernels/int/gemv.ts, 16 rows at a time: each group's sums by table look-up (`gemvColumn`), then
 *   per row its scale (16 + m) by shifts and adds, the round-half-up shift by `base − de`, the saturating
 *   accumulate, and the final shift by `fin`. Returns how many shifts or sums saturated (checked mode
 *   turns a non-zero count into an error).
 * - `scores(qU, qS, keys, n, hd, keyExp, scoreShift, out, sums)`: one query head's attention scores
 *   over n cached positions (kernels/int/attention.ts `scoresLut`): the dot products from the query's
 *   tables read at the keys' three digit planes, 16 positions at a time, each shifted by
 *   `scoreShift − keyExp[u]` to the score exponent.
 * - `softmax(scores, n, expT, expMul, tlen1, valueExp, out, rt, stat) → emax`: attention.ts
 *   `probabilities` — exp-table weights, their total (written to `stat` with the count of saturated
 *   differences, for checked mode), one reciprocal by shift-and-subtract, and Q15 probabilities
 *   aligned to the largest value exponent, which it returns.
 * - `quantize(src, n, dst, bits) → s`: kernels/int/round.ts `quantizeBits` for n a multiple of 4: the
 *   largest magnitude, the shift s that brings it to `bits` bits, and every value shifted by s (round
 *   half up) and clamped to ±(2^bits − 1).
 * - `swiglu(a, b, n, out)`: out_i = a_i · b_i for |a_i|, |b_i| ≤ 32767 (n a multiple of 4), by
 *   shift-and-add over the sixteen binary digits of b_i: each bit selects a shifted copy of a_i (the
 *   base-2 form of mul.ts's table of multiples; the sign bit's copy is subtracted). The same exact
 *   integer as `mulS16`.
 * - `rmsnorm(x, n, xExp, bits, epsN, epsExp, y, out)`: kernels/int/norm.ts `rmsnorm` for n a multiple
 *   of 4: the 15-bit copy y, the sum of squares of its coarse copy (each square by shift-and-add), eps
 *   in the sum's units, the digit-by-digit square root and the reciprocal (isqrt.ts), then each
 *   r · y_i (shift-and-add over y_i's bits) shifted and clamped to ±32767.
 * - `add_sat(x, y, n)`: x_i = sat32(x_i + y_i) for n a multiple of 4 (round.ts `satAdd`).
 * - `silu(x, n, t, mul, len1, half)`: kernels/int/tables.ts `silu` in place on n int32, reading the
 *   table `t` and its differences' multiples `mul` (one value at a time: a table read per value).
 * - `rope(v, half, cos, sin)`: kernels/int/rope.ts `ropeHead` in place for `half` a multiple of 4, the
 *   four products a · cos, b · sin, b · cos, a · sin by shift-and-add over the bits of cos and sin.
 * - `mix(tabs, codes, n, blocks, plane, digitStride, out)`: one head's attention value mix,
 *   Σ_j p_j · (v_j + 2048) per dimension, from the tables of each position's probability
 *   (`planes_unsigned`) read at the three base-16 digits of the cached values in offset binary, 16
 *   dimensions at a time, in runs of at most 128 positions (so no 16-bit sum overflows) added in 32
 *   bits; the caller subtracts 2048 · Σ p_j.
 *
 * @module
 */
import { type Code, fn, type Func, I32, op, V128, type ValType } from "./asm.ts";
import { type LutLocals, lutTotals, lutZero } from "./lut.ts";

const { get, set } = op;
const I32_MAX = 0x7fffffff;
const I32_MIN = -0x80000000;

/** Numbers locals after the parameters as they are asked for, remembering their types for `fn`. */
function localsAfter(params: number) {
  const types: ValType[] = [];
  const take = (t: ValType) => {
    types.push(t);
    return params + types.length - 1;
  };
  return { types, i32: () => take(I32), v128: () => take(V128) };
}

/** Locals for one look-up run. */
function lutLocals(l: ReturnType<typeof localsAfter>): LutLocals {
  return {
    t: l.i32(), k: l.i32(), idx: l.v128(), v: l.v128(),
    lo0: l.v128(), lo1: l.v128(), mid0: l.v128(), mid1: l.v128(), hi0: l.v128(), hi1: l.v128(),
  };
}

const inc = (local: number, by: number): Code => [get(local), op.i32(by), op.i32_add, set(local)];

/** All ones in the lanes of i32x4 `v` where its bit b is set: that bit moved to the sign, then spread. */
const maskBit = (v: number, b: number): Code => [get(v), op.i32(31 - b), op.i32x4_shl, op.i32(31), op.i32x4_shr_s];

/** A conditional shift of the i32x4 `x` by 2^b (`shiftOp`) in the lanes where bit b of `by` is set. */
const stepBy = (x: number, by: number, b: number, shiftOp: Code): Code => [
  get(x), op.i32(1 << b), shiftOp, get(x), maskBit(by, b), op.v128_bitselect, set(x),
];

/** A v128 constant of four equal int32 lanes, and of sixteen equal bytes. */
const splat4 = (v: number): Code => op.v128_const(new Uint8Array(Int32Array.from([v, v, v, v]).buffer));
const bytes16 = (v: number): Code => op.v128_const(new Uint8Array(16).fill(v));

/**
 * `dst = shift(src, amount)` of kernels/int/round.ts (round half up to the right, saturating to the
 * left), adding 1 to `sat` where it saturates. `kk` and `lim` are scratch locals.
 */
function shiftRound(src: number, amount: number, dst: number, sat: number, kk: number, lim: number): Code {
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
function shiftRightRound(src: number, amount: number, dst: number): Code {
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
function mulScale(a: number, m: number): Code {
  const bit = (b: number): Code => [
    get(a), op.i32(b), op.i32_shl,
    op.i32(0), get(m), op.i32(b), op.i32_shr_s, op.i32(1), op.i32_and, op.i32_sub,
    op.i32_and, op.i32_add,
  ];
  return [get(a), op.i32(4), op.i32_shl, bit(0), bit(1), bit(2), bit(3)];
}

/**
 * Leaves the i32x4 [0, x, 2x, 3x] on the stack, x being the i32x4 splat in `vx`, by masks and adds.
 */
function firstFour(vx: number): Code {
  const mask = (from: number) =>
    op.v128_const(new Uint8Array(Int32Array.from([0, 1, 2, 3], (i) => (i >= from ? -1 : 0)).buffer));
  return [
    get(vx), mask(1), op.v128_and,
    get(vx), mask(2), op.v128_and, op.i32x4_add,
    get(vx), mask(3), op.v128_and, op.i32x4_add,
  ];
}

/** Stores the three byte planes (bits 0–7, 8–15, 16–23) of the 16 int32 entries in e0..e3 at `out`. */
function storePlanes(e: number[], out: number, a: number, b: number): Code {
  // A plane's byte of each entry: masked (bits 0–7, 8–15) or shifted down as signed (bits 16–23, in
  // [−128, 127] for entries in [−2^23, 2^23)), then narrowed 32 → 16 → 8 bits, which never saturates.
  const part = (x: number, byte: number): Code =>
    byte === 2
      ? [get(x), op.i32(16), op.i32x4_shr_s]
      : [get(x), byte === 1 ? [op.i32(8), op.i32x4_shr_s] : [], splat4(255), op.v128_and];
  return [0, 1, 2].map((byte) => {
    const to16 = byte === 2 ? op.i16x8_narrow_i32x4_s : op.i16x8_narrow_i32x4_u;
    const to8 = byte === 2 ? op.i8x16_narrow_i16x8_s : op.i8x16_narrow_i16x8_u;
    return [
      part(e[0], byte), part(e[1], byte), to16, set(a),
      part(e[2], byte), part(e[3], byte), to16, set(b),
      get(out), get(a), get(b), to8, op.v128_store(16 * byte),
    ];
  });
}

/**
 * `planes_offset(x, n, out)` or `planes_digits(x, n, outU, outS)`: per int32 x_i (|x_i| < 2^19), the 16
 * entries of its table made by additions from [0, x, 2x, 3x] and 4x, 8x (shifts), stored as byte planes.
 */
export function planesFn(kind: "offset" | "digits" | "unsigned"): Func {
  const digits = kind === "digits";
  const x = 0, n = 1, outA = 2, outB = 3;
  const l = localsAfter(digits ? 4 : 3);
  const i = l.i32(), vx = l.v128(), t0 = l.v128(), v4 = l.v128(), v8 = l.v128();
  const e = [l.v128(), l.v128(), l.v128(), l.v128()], a = l.v128(), b = l.v128();
  const quarter = (k: number, parts: Code[]): Code => [parts, set(e[k])];
  const plus = (w: number): Code => [get(t0), get(w), op.i32x4_add];
  const minus = (w: number): Code => [get(t0), get(w), op.i32x4_sub];
  const offset = [quarter(0, [minus(v8)]), quarter(1, [minus(v4)]), quarter(2, [get(t0)]), quarter(3, [plus(v4)])];
  const unsigned = [quarter(0, [get(t0)]), quarter(1, [plus(v4)]), quarter(2, [plus(v8)]),
    quarter(3, [plus(v8), get(v4), op.i32x4_add])];
  const signedTop = [quarter(2, [minus(v8)]), quarter(3, [minus(v8), get(v4), op.i32x4_add])];
  const params: ValType[] = digits ? [I32, I32, I32, I32] : [I32, I32, I32];
  return fn(params, [], l.types, [
    op.i32(0), set(i),
    op.block([op.loop([
      get(i), get(n), op.i32_ge_s, op.br_if(1),
      get(x), op.v128_load32_splat(), set(vx),
      firstFour(vx), set(t0),
      get(vx), op.i32(2), op.i32x4_shl, set(v4),
      get(vx), op.i32(3), op.i32x4_shl, set(v8),
      digits
        ? [unsigned, storePlanes(e, outA, a, b), signedTop, storePlanes(e, outB, a, b), inc(outB, 48)]
        : kind === "unsigned"
        ? [unsigned, storePlanes(e, outA, a, b)]
        : [offset, storePlanes(e, outA, a, b)],
      inc(outA, 48),
      inc(x, 4),
      inc(i, 1),
      op.br(0),
    ])]),
  ]);
}


/**
 * One column of `gemv_lut`'s look-up: as `lutColumn`, but the top plane's bytes are added as bytes into
 * `hi8`: an entry (u − 8) · x_c with |x_c| ≤ 32767 has a top byte in [−4, 3], so 32 columns sum to
 * [−128, 96] and no byte sum overflows within a group.
 */
function gemvColumn(l: LutLocals, hi8: number, relaxed: boolean, j = -1): Code {
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

/** `count` columns of `gemvColumn`, unrolled, then `t` and `k` moved past them. */
function gemvColumns(l: LutLocals, hi8: number, count: number, relaxed: boolean): Code {
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
 * [−128, 112]. `c` and `end` are scratch locals.
 */
function lutRun(l: LutLocals, hi8: number, cols: number, c: number, end: number, relaxed: boolean): Code {
  return [
    lutZero(l),
    op.i32(0), set(c),
    op.block([op.loop([
      get(c), get(cols), op.i32_ge_s, op.br_if(1),
      op.v128_const(new Uint8Array(16)), set(hi8),
      get(c), op.i32(16), op.i32_add, set(end),
      get(end), get(cols), op.i32_le_s,
      op.if_([gemvColumns(l, hi8, 16, relaxed), get(end), set(c)], [
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
 * `gemv_lut(planes, codes, scales, rows, groups, base, fin, out, scratch) → saturations`: see the
 * module comment. Codes are laid out per 16-row block, per column, 16 bytes; scales per block, per
 * group, 16 bytes; `scratch` holds 128 bytes; `out` receives whole blocks of 16 (rows rounded up).
 *
 * Each group's step runs on four lanes at a time when every row's shift k = base − de can lie only in
 * [−30, 31] (base in [−15, 31], the usual case). The per-lane shifts are conditional shifts by 16, 8, 4,
 * 2, 1 picked by the amount's bits. Which of `shift`'s cases a group needs is read from its 16 scale
 * bytes first:
 * - every k in [−3, 0]: p << −k, which cannot overflow (|p| < 2^28, so |p · 8| < 2^31);
 * - every k in [1, 8]: t = p >> (k − 1), then the rounding `(t >> 1) + (t & 1)`, which is `shift`'s
 *   `(p >> k) + ((p >> (k − 1)) & 1)`;
 * - otherwise both cases for every lane, each lane keeping its own, the left shift saturated where p
 *   lies outside ±(2^31 − 1) >> −k (that limit shifted the same way).
 * Other bases go row by row through `shift`'s every case.
 */
export function gemvFn(relaxed: boolean): Func {
  const planes = 0, codes = 1, scales = 2, rows = 3, groups = 4, base = 5, fin = 6, out = 7, scratch = 8;
  const l = localsAfter(9);
  const r = l.i32(), g = l.i32(), fast = l.i32();
  const a = l.i32(), sc = l.i32(), m = l.i32(), p = l.i32(), amount = l.i32(), term = l.i32();
  const acc = l.i32(), sum = l.i32(), sat = l.i32(), kk = l.i32(), lim = l.i32();
  const lut = lutLocals(l);
  const accs = [l.v128(), l.v128(), l.v128(), l.v128()];
  const scv = l.v128(), deb = l.v128(), base8 = l.v128(), baseLess8 = l.v128(), basev = l.v128(), satv = l.v128();
  const hi8 = l.v128(), av = l.v128(), mv = l.v128(), dev = l.v128(), pv = l.v128(), kv = l.v128(), sv = l.v128();
  const tv = l.v128(), leftv = l.v128(), limv = l.v128(), bad = l.v128(), sumv = l.v128(), ovf = l.v128();
  const zero = op.v128_const(new Uint8Array(16));
  // One row's group step (kernels/int/gemv.ts `addGroup`) on the sums and accumulators in scratch.
  const addGroup = (lane: number): Code => [
    get(scratch), op.i32_load(4 * lane), set(a),
    get(scales), op.i32_load8_u(lane), set(sc),
    get(sc), op.i32(15), op.i32_and, set(m),
    mulScale(a, m), set(p),
    get(base), get(sc), op.i32(4), op.i32_shr_s, op.i32_sub, set(amount),
    shiftRound(p, amount, term, sat, kk, lim),
    get(scratch), op.i32_load(64 + 4 * lane), set(acc),
    get(acc), get(term), op.i32_add, set(sum),
    // Signed overflow: both addends' signs differ from the sum's. Saturate toward the accumulator's sign.
    get(acc), get(sum), op.i32_xor, get(term), get(sum), op.i32_xor, op.i32_and, op.i32(0), op.i32_lt_s,
    op.if_([get(acc), op.i32(31), op.i32_shr_s, op.i32(I32_MAX), op.i32_xor, set(sum), inc(sat, 1)]),
    get(scratch), get(sum), op.i32_store(64 + 4 * lane),
  ];
  // Lanes 4q..4q+3 of the scale bytes, widened to int32.
  const widen = (q: number): Code => [
    get(scv), q < 2 ? op.i16x8_extend_low_i8x16_u : op.i16x8_extend_high_i8x16_u,
    (q & 1) === 0 ? op.i32x4_extend_low_i16x8_u : op.i32x4_extend_high_i16x8_u,
  ];
  // pv = (16 + m) · av and dev = de, for lanes 4q..4q+3.
  const scaled = (q: number): Code => [
    widen(q), set(dev),
    get(dev), splat4(15), op.v128_and, set(mv),
    get(dev), op.i32(4), op.i32x4_shr_u, set(dev),
    get(av), op.i32(4), op.i32x4_shl,
    [0, 1, 2, 3].map((b) => [get(av), op.i32(b), op.i32x4_shl, maskBit(mv, b), op.v128_and, op.i32x4_add]),
    set(pv),
  ];
  // accs[q] = saturating accs[q] + tv, counting the saturated lanes.
  const accumulate = (q: number): Code => [
    get(accs[q]), get(tv), op.i32x4_add, set(sumv),
    get(accs[q]), get(sumv), op.v128_xor, get(tv), get(sumv), op.v128_xor, op.v128_and, op.i32(31), op.i32x4_shr_s,
    set(ovf),
    get(accs[q]), op.i32(31), op.i32x4_shr_s, splat4(I32_MAX), op.v128_xor, get(sumv), get(ovf), op.v128_bitselect,
    set(accs[q]),
    get(satv), get(ovf), op.i32x4_sub, set(satv),
  ];
  // tv = p >> (k − 1) rounded, for k − 1 in sv, by `steps` conditional shifts.
  const rightShift = (steps: number): Code => [
    get(pv), set(tv),
    Array.from({ length: steps }, (_, i) => stepBy(tv, sv, steps - 1 - i, op.i32x4_shr_s)),
    get(tv), op.i32(1), op.i32x4_shr_s, get(tv), splat4(1), op.v128_and, op.i32x4_add, set(tv),
  ];
  // The three kinds of group (see the function's comment), for lanes 4q..4q+3.
  const leftSmall = (q: number): Code => [
    lutTotals(lut, q), set(av), scaled(q),
    get(dev), get(basev), op.i32x4_sub, set(sv), // −k in [0, 3]
    get(pv), set(tv),
    stepBy(tv, sv, 1, op.i32x4_shl),
    stepBy(tv, sv, 0, op.i32x4_shl),
    accumulate(q),
  ];
  const rightSmall = (q: number): Code => [
    lutTotals(lut, q), set(av), scaled(q),
    get(basev), get(dev), op.i32x4_sub, splat4(1), op.i32x4_sub, set(sv), // k − 1 in [0, 7]
    rightShift(3),
    accumulate(q),
  ];
  const general = (q: number): Code => [
    lutTotals(lut, q), set(av), scaled(q),
    get(basev), get(dev), op.i32x4_sub, set(kv),
    // k > 0: t = p >> (k − 1), then round.
    get(kv), splat4(1), op.i32x4_sub, set(sv),
    rightShift(5),
    // k ≤ 0: p << −k and the limit (2^31 − 1) >> −k, both by the bits of −k.
    zero, get(kv), op.i32x4_sub, set(sv),
    get(pv), set(leftv),
    splat4(I32_MAX), set(limv),
    [4, 3, 2, 1, 0].map((b) => [stepBy(leftv, sv, b, op.i32x4_shl), stepBy(limv, sv, b, op.i32x4_shr_s)]),
    // Saturate: above the limit to I32_MAX, below −limit − 1 to I32_MIN; counted for k ≤ 0 lanes only.
    get(pv), get(limv), op.i32x4_gt_s, set(ovf),
    get(pv), get(limv), bytes16(255), op.v128_xor, op.i32x4_lt_s, set(bad),
    splat4(I32_MAX), splat4(I32_MIN), get(leftv), get(bad), op.v128_bitselect, get(ovf), op.v128_bitselect, set(leftv),
    get(kv), zero, op.i32x4_gt_s, set(sv), // lanes with k > 0
    get(satv), get(ovf), get(bad), op.v128_or, get(sv), op.v128_xor, get(ovf), get(bad), op.v128_or, op.v128_and,
    op.i32x4_sub, set(satv),
    get(tv), get(leftv), get(sv), op.v128_bitselect, set(tv),
    accumulate(q),
  ];
  // Lane `lane`'s output through `shift`'s every case (the final shift outside [0, 31]).
  const emit = (lane: number): Code => [
    get(scratch), op.i32_load(64 + 4 * lane), set(acc),
    shiftRound(acc, fin, term, sat, kk, lim),
    get(out), get(term), op.i32_store(4 * lane),
  ];
  const lanes = Array.from({ length: 16 }, (_, lane) => lane);
  const quarters = [0, 1, 2, 3];
  const spill = quarters.map((q) => [get(scratch), get(accs[q]), op.v128_store(64 + 16 * q)]);
  const reload = quarters.map((q) => [get(scratch), op.v128_load(64 + 16 * q), set(accs[q])]);
  // Whether every lane of the group's bytes `x` lies in [0, 2^bits) (no bit above them set).
  const allBelow = (x: Code, bits: number): Code => [x, bytes16(256 - (1 << bits)), op.v128_and, op.v128_any_true, op.i32_eqz];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32], [I32], l.types, [
    op.i32(0), set(sat),
    zero, set(satv),
    op.i32(0), set(r),
    get(codes), set(lut.k),
    // Four-lane steps need every k = base − de (de in 0..15) in [−30, 31]: base in [−15, 31].
    get(base), op.i32(-15), op.i32_ge_s, get(base), op.i32(31), op.i32_le_s, op.i32_and, set(fast),
    get(base), op.i32x4_splat, set(basev),
    get(base), op.i8x16_splat, set(base8),
    get(base), op.i32(1), op.i32_sub, op.i8x16_splat, set(baseLess8),
    op.block([op.loop([
      get(r), get(rows), op.i32_ge_s, op.br_if(1),
      accs.map((x) => [zero, set(x)]),
      get(planes), set(lut.t),
      op.i32(0), set(g),
      op.block([op.loop([
        get(g), get(groups), op.i32_ge_s, op.br_if(1),
        lutZero(lut),
        zero, set(hi8),
        gemvColumns(lut, hi8, 32, relaxed),
        get(hi8), op.i16x8_extend_low_i8x16_s, set(lut.hi0),
        get(hi8), op.i16x8_extend_high_i8x16_s, set(lut.hi1),
        get(scales), op.v128_load(), set(scv),
        get(scv), op.i32(4), op.i8x16_shr_u, set(deb),
        get(fast),
        op.if_([
          // de − base in [0, 3] everywhere, or base − 1 − de in [0, 7] everywhere (bytes, mod 256).
          allBelow([get(deb), get(base8), op.i8x16_sub], 2),
          op.if_(quarters.map(leftSmall), [
            allBelow([get(baseLess8), get(deb), op.i8x16_sub], 3),
            op.if_(quarters.map(rightSmall), quarters.map(general)),
          ]),
        ], [
          quarters.map((q) => [get(scratch), lutTotals(lut, q), op.v128_store(16 * q)]),
          spill,
          lanes.map(addGroup),
          reload,
        ]),
        inc(scales, 16),
        inc(g, 1),
        op.br(0),
      ])]),
      // The final shift by `fin`: four lanes at a time for fin in [0, 31], else row by row.
      get(fin), op.i32(0), op.i32_ge_s, get(fin), op.i32(31), op.i32_le_s, op.i32_and,
      op.if_(
        quarters.map((q) => [
          get(out),
          get(fin), op.i32_eqz,
          op.if_v128([get(accs[q])], [
            get(accs[q]), get(fin), op.i32(1), op.i32_sub, op.i32x4_shr_s, set(tv),
            get(tv), op.i32(1), op.i32x4_shr_s, get(tv), splat4(1), op.v128_and, op.i32x4_add,
          ]),
          op.v128_store(16 * q),
        ]),
        [spill, lanes.map(emit)],
      ),
      inc(out, 64),
      inc(r, 16),
      op.br(0),
    ])]),
    // Saturations: the row-by-row count plus the four-lane counts.
    get(sat),
    [0, 1, 2, 3].map((q) => [get(satv), op.i32x4_extract_lane(q), op.i32_add]),
  ]);
}

/**
 * `mix(tabs, codes, n, blocks, plane, digitStride, out)`: for each block b of 16 dimensions,
 * out[16b + lane] = Σ_{j<n} T_j[d0] + (T_j[d1] << 4) + (T_j[d2] << 8), the digits d0, d1, d2 of the
 * offset value (j, 16b + lane) + 2048 read from `codes + d · digitStride + b · plane + 16 j`; T_j is
 * position j's table u · p_j (`planes_unsigned`, 48 bytes per position). That is Σ p · (v + 2048),
 * exact in 32 bits while it stays below 2^31 ((2^15 + n) · 4095 does).
 */
export function mixFn(relaxed: boolean): Func {
  const tabs = 0, codes = 1, n = 2, blocks = 3, plane = 4, digitStride = 5, out = 6;
  const l = localsAfter(7);
  const b = l.i32(), j = l.i32(), count = l.i32(), base = l.i32(), c = l.i32(), end = l.i32();
  const res = [l.v128(), l.v128(), l.v128(), l.v128()];
  const s = [l.v128(), l.v128(), l.v128(), l.v128()];
  const hi8 = l.v128();
  const lut = lutLocals(l);
  const zero = op.v128_const(new Uint8Array(16));
  // One digit's sums over all n positions into s, in chunks of at most 128 columns (16-bit sums).
  const digit = (d: number): Code => [
    s.map((x) => [zero, set(x)]),
    get(tabs), set(lut.t),
    get(base), d === 0 ? [] : [get(digitStride), op.i32_add], d === 2 ? [get(digitStride), op.i32_add] : [], set(lut.k),
    op.i32(0), set(j),
    op.block([op.loop([
      get(j), get(n), op.i32_ge_s, op.br_if(1),
      get(n), get(j), op.i32_sub, set(count),
      get(count), op.i32(128), op.i32_gt_s, op.if_([op.i32(128), set(count)]),
      lutRun(lut, hi8, count, c, end, relaxed),
      [0, 1, 2, 3].map((q) => [get(s[q]), lutTotals(lut, q), op.i32x4_add, set(s[q])]),
      get(j), get(count), op.i32_add, set(j),
      op.br(0),
    ])]),
    [0, 1, 2, 3].map((q) => [get(res[q]), get(s[q]), op.i32(4 * d), op.i32x4_shl, op.i32x4_add, set(res[q])]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    op.i32(0), set(b),
    get(codes), set(base),
    op.block([op.loop([
      get(b), get(blocks), op.i32_ge_s, op.br_if(1),
      res.map((x) => [zero, set(x)]),
      digit(0), digit(1), digit(2),
      [0, 1, 2, 3].map((q) => [get(out), get(res[q]), op.v128_store(16 * q)]),
      inc(out, 64),
      get(base), get(plane), op.i32_add, set(base),
      inc(b, 1),
      op.br(0),
    ])]),
  ]);
}

/**
 * `scores(qU, qS, keys, n, hd, keyExp, scoreShift, out, sums)`: for positions u < n (rounded up to
 * 16; `out` and `keyExp` have that room), dot_u = s0 + (s1 << 4) + (s2 << 8) with s_d the query's
 * table (qU for the low and middle digit, qS for the signed top digit; 48 bytes per dimension) read at
 * digit d of the cached keys (per block of 16 positions: three planes of 16 · hd bytes), then
 * out[u] = shift(dot_u, scoreShift − keyExp[u]) (int32 exponents, 4 bytes per position): four lanes at
 * a time when every amount of the 16 positions lies in [1, 31] (as `gemv_lut` shifts), else one at a
 * time through `shift`'s every case.
 */
export function scoresFn(relaxed: boolean): Func {
  const qU = 0, qS = 1, keys = 2, n = 3, hd = 4, keyExp = 5, scoreShift = 6, out = 7, sums = 8;
  const l = localsAfter(9);
  const u = l.i32(), c = l.i32(), end = l.i32(), plane = l.i32(), dot = l.i32(), amount = l.i32(), term = l.i32();
  const sat = l.i32(), kk = l.i32(), lim = l.i32();
  const hi8 = l.v128(), shiftv = l.v128(), amountv = l.v128(), outside = l.v128(), tv = l.v128();
  const lut = lutLocals(l);
  // The three digits' sums of the block into sums[0, 192) (entries u · q_e: within (−2^19, 2^19)).
  const digitSums = (d: number): Code => [
    get(d < 2 ? qU : qS), set(lut.t),
    get(keys), d === 0 ? [] : [get(plane), op.i32_add], d === 2 ? [get(plane), op.i32_add] : [], set(lut.k),
    lutRun(lut, hi8, hd, c, end, relaxed),
    [0, 1, 2, 3].map((q) => [get(sums), lutTotals(lut, q), op.v128_store(64 * d + 16 * q)]),
  ];
  const lane = (i: number): Code => [
    get(sums), op.i32_load(4 * i),
    get(sums), op.i32_load(64 + 4 * i), op.i32(4), op.i32_shl, op.i32_add,
    get(sums), op.i32_load(128 + 4 * i), op.i32(8), op.i32_shl, op.i32_add, set(dot),
    get(scoreShift), get(keyExp), op.i32_load(4 * i), op.i32_sub, set(amount),
    shiftRound(dot, amount, term, sat, kk, lim),
    get(out), get(term), op.i32_store(4 * i),
  ];
  // Lanes 4q..4q+3: the shift amounts, and (once every amount of the block is known to lie in
  // [1, 31]) the dot products shifted right by them, rounding half up, four at a time.
  const amounts = (q: number): Code => [get(shiftv), get(keyExp), op.v128_load(16 * q), op.i32x4_sub];
  const four = (q: number): Code => [
    amounts(q), splat4(1), op.i32x4_sub, set(amountv), // k − 1
    get(sums), op.v128_load(16 * q),
    get(sums), op.v128_load(64 + 16 * q), op.i32(4), op.i32x4_shl, op.i32x4_add,
    get(sums), op.v128_load(128 + 16 * q), op.i32(8), op.i32x4_shl, op.i32x4_add, set(tv),
    [4, 3, 2, 1, 0].map((b) => stepBy(tv, amountv, b, op.i32x4_shr_s)),
    get(out), get(tv), op.i32(1), op.i32x4_shr_s, get(tv), splat4(1), op.v128_and, op.i32x4_add, op.v128_store(16 * q),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    get(hd), op.i32(4), op.i32_shl, set(plane),
    get(scoreShift), op.i32x4_splat, set(shiftv),
    op.i32(0), set(u),
    op.block([op.loop([
      get(u), get(n), op.i32_ge_s, op.br_if(1),
      digitSums(0), digitSums(1), digitSums(2),
      op.v128_const(new Uint8Array(16)), set(outside),
      [0, 1, 2, 3].map((q) => [
        get(outside),
        amounts(q), set(amountv),
        get(amountv), splat4(1), op.i32x4_lt_s, op.v128_or,
        get(amountv), splat4(31), op.i32x4_gt_s, op.v128_or,
        set(outside),
      ]),
      get(outside), op.v128_any_true,
      op.if_(Array.from({ length: 16 }, (_, i) => lane(i)), [0, 1, 2, 3].map(four)),
      get(keys), get(plane), op.i32_add, get(plane), op.i32_add, get(plane), op.i32_add, set(keys),
      inc(out, 64),
      inc(keyExp, 64),
      inc(u, 16),
      op.br(0),
    ])]),
  ]);
}

/**
 * `softmax(scores, n, expT, expMul, tlen1, valueExp, out, rt, stat) → emax`, exactly attention.ts
 * `probabilities`: best = max score; w_u = shift(expNeg(sat32(best − score_u)), 15) (the exp table
 * `expT` and its differences' multiples `expMul`, tables.ts `expNeg`; `tlen1` is its length − 1);
 * total T = Σ w_u and R = floor(2^(bitlen(T)+15) / T) by shift-and-subtract (isqrt.ts `recip16`);
 * out[u] = shift(shift(R · w_u, bitlen(T)), emax − valueExp[u]) with R · w_u from R's multiples at w_u's
 * four base-16 digits (mul.ts `mulU16`; the table is written at `rt`). Writes T, the number of
 * saturated differences and Σ out[u] to stat[0], stat[1] and stat[2]; returns emax, the largest value
 * exponent.
 */
export function softmaxFn(): Func {
  const scores = 0, n = 1, expT = 2, expMul = 3, tlen1 = 4, valueExp = 5, out = 6, rt = 7, stat = 8;
  const l = localsAfter(9);
  const u = l.i32(), best = l.i32(), total = l.i32(), emax = l.i32(), d = l.i32(), i = l.i32(), e = l.i32();
  const w = l.i32(), ve = l.i32(), sat = l.i32(), r = l.i32(), rem = l.i32(), bits = l.i32(), acc = l.i32();
  const amount = l.i32(), term = l.i32(), kk = l.i32(), lim = l.i32(), m = l.i32();
  const at = (base: number, index: Code, shiftBy: number): Code => [get(base), index, op.i32(shiftBy), op.i32_shl, op.i32_add];
  const loopN = (body: Code[]): Code => [
    op.i32(0), set(u),
    op.block([op.loop([get(u), get(n), op.i32_ge_s, op.br_if(1), body, inc(u, 1), op.br(0)])]),
  ];
  const digit = (shiftBy: number, mask: boolean): Code => [
    get(rt), get(w), op.i32(shiftBy), op.i32_shr_s, mask ? [op.i32(15), op.i32_and] : [], op.i32(2), op.i32_shl,
    op.i32_add, op.i32_load(),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32], [I32], l.types, [
    op.i32(0), set(sat),
    op.i32(I32_MIN), set(best),
    loopN([
      at(scores, get(u), 2), op.i32_load(), set(d),
      get(d), get(best), op.i32_gt_s, op.if_([get(d), set(best)]),
    ]),
    op.i32(0), set(total),
    op.i32(I32_MIN), set(emax),
    loopN([
      // d = sat32(best − score): the difference is ≥ 0, so a negative result means it wrapped.
      get(best), at(scores, get(u), 2), op.i32_load(), op.i32_sub, set(d),
      get(d), op.i32(0), op.i32_lt_s, op.if_([op.i32(I32_MAX), set(d), inc(sat, 1)]),
      get(d), op.i32(8), op.i32_shr_s, set(i),
      get(i), get(tlen1), op.i32_ge_s,
      op.if_([op.i32(0), set(e)], [
        at(expT, get(i), 2), op.i32_load(),
        at(expMul, get(i), 6), get(d), op.i32(255), op.i32_and, op.i32(4), op.i32_shr_s, op.i32(2), op.i32_shl,
        op.i32_add, op.i32_load(), op.i32(4), op.i32_shl,
        at(expMul, get(i), 6), get(d), op.i32(15), op.i32_and, op.i32(2), op.i32_shl, op.i32_add, op.i32_load(),
        op.i32_add, op.i32(8), op.i32_shr_s,
        op.i32_add, set(e),
      ]),
      get(e), op.i32(15), op.i32_shr_s, get(e), op.i32(14), op.i32_shr_s, op.i32(1), op.i32_and, op.i32_add, set(w),
      at(out, get(u), 2), get(w), op.i32_store(),
      get(total), get(w), op.i32_add, set(total),
      at(valueExp, get(u), 2), op.i32_load(), set(ve),
      get(ve), get(emax), op.i32_gt_s, op.if_([get(ve), set(emax)]),
    ]),
    get(stat), get(total), op.i32_store(),
    get(stat), get(sat), op.i32_store(4),
    // R = recip16(T): bits = bitlen(T); rem = 2^(bits − 1); 16 restoring division steps.
    op.i32(32), get(total), op.i32_clz, op.i32_sub, set(bits),
    op.i32(1), get(bits), op.i32(1), op.i32_sub, op.i32_shl, set(rem),
    get(rem), get(total), op.i32_ge_s,
    op.if_([op.i32(65535), set(r)], [
      op.i32(0), set(r),
      Array.from({ length: 16 }, () => [
        get(rem), get(rem), op.i32_add, set(rem),
        get(r), get(r), op.i32_add, set(r),
        // Unsigned: rem < T < 2^31 before the doubling, so 2 · rem < 2^32.
        get(rem), get(total), op.i32_ge_u,
        op.if_([get(rem), get(total), op.i32_sub, set(rem), inc(r, 1)]),
      ]),
    ]),
    // R's multiples: rt[k] = k · R.
    op.i32(0), set(acc),
    Array.from({ length: 16 }, (_, k) => [get(rt), get(acc), op.i32_store(4 * k), get(acc), get(r), op.i32_add, set(acc)]),
    op.i32(0), set(acc), // from here, the sum of the probabilities
    loopN([
      at(out, get(u), 2), op.i32_load(), set(w),
      digit(12, false), op.i32(12), op.i32_shl,
      digit(8, true), op.i32(8), op.i32_shl, op.i32_add,
      digit(4, true), op.i32(4), op.i32_shl, op.i32_add,
      digit(0, true), op.i32_add, set(m),
      shiftRightRound(m, bits, term),
      get(emax), at(valueExp, get(u), 2), op.i32_load(), op.i32_sub, set(amount),
      shiftRightRound(term, amount, m),
      at(out, get(u), 2), get(m), op.i32_store(),
      get(acc), get(m), op.i32_add, set(acc),
    ]),
    get(stat), get(acc), op.i32_store(8),
    get(emax),
  ]);
}

/**
 * `quantize(src, n, dst, bits) → s`: see the module comment. |v| is taken unsigned, so −2^31 counts as
 * 2^31 as in `maxAbs`; s ≤ 32 − bits, and a left shift (s < 0) cannot leave `bits` bits.
 */
export function quantizeFn(): Func {
  const src = 0, n = 1, dst = 2, bits = 3;
  const l = localsAfter(4);
  const i = l.i32(), mx = l.i32(), lane = l.i32(), sh = l.i32(), top = l.i32();
  const mxv = l.v128(), v = l.v128(), topv = l.v128(), negv = l.v128();
  const zero = op.v128_const(new Uint8Array(16));
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
    zero, set(mxv),
    each([get(mxv), at(src), op.v128_load(), op.i32x4_abs, op.i32x4_max_u, set(mxv)]),
    op.i32(0), set(mx),
    [0, 1, 2, 3].map((q) => [
      get(mxv), op.i32x4_extract_lane(q), set(lane),
      get(lane), get(mx), op.i32_gt_u, op.if_([get(lane), set(mx)]),
    ]),
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

/** Leaves a · b on the stack for i32x4 a and b with |a · b| < 2^31 and b in [−2^15, 2^15): see `swiglu`. */
function productBits(av: number, bv: number, acc: number): Code {
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
function shiftRight4(v: number, sh: number): Code {
  return [
    get(v), get(sh), op.i32x4_shr_s,
    get(v), get(sh), op.i32(1), op.i32_sub, op.i32x4_shr_s, splat4(1), op.v128_and, op.i32x4_add,
  ];
}

/** `rmsnorm(x, n, xExp, bits, epsN, epsExp, y, out)`: see the module comment and kernels/int/norm.ts. */
export function rmsnormFn(): Func {
  const x = 0, n = 1, xExp = 2, bits = 3, epsN = 4, epsExp = 5, y = 6, out = 7;
  const l = localsAfter(8);
  const i = l.i32(), mx = l.i32(), lane = l.i32(), s1 = l.i32(), s2 = l.i32(), sum = l.i32(), e2 = l.i32();
  const extra = l.i32(), eps = l.i32(), rem = l.i32(), root = l.i32(), cand = l.i32(), r = l.i32(), sh = l.i32();
  const term = l.i32(), sat = l.i32(), kk = l.i32(), lim = l.i32(), k = l.i32(), v32 = l.i32();
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
    get(rem), get(cand), op.i32_ge_u,
    op.if_([get(rem), get(cand), op.i32_sub, set(rem), inc(root, 1)]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    op.i32(0), set(sat),
    // 1. The largest magnitude (unsigned, as maxAbs); an all-zero x normalises to zeros.
    zero, set(mxv),
    each([get(mxv), at(x), op.v128_load(), op.i32x4_abs, op.i32x4_max_u, set(mxv)]),
    op.i32(0), set(mx),
    [0, 1, 2, 3].map((q) => [
      get(mxv), op.i32x4_extract_lane(q), set(lane),
      get(lane), get(mx), op.i32_gt_u, op.if_([get(lane), set(mx)]),
    ]),
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
      // r = floor(2^(bitlen(root) + 15) / root) (recip16), and the final shift.
      op.i32(32), get(root), op.i32_clz, op.i32_sub, set(k),
      op.i32(1), get(k), op.i32(1), op.i32_sub, op.i32_shl, set(rem),
      get(rem), get(root), op.i32_ge_s,
      op.if_([op.i32(65535), set(r)], [
        op.i32(0), set(r),
        Array.from({ length: 16 }, () => [
          get(rem), get(rem), op.i32_add, set(rem),
          get(r), get(r), op.i32_add, set(r),
          get(rem), get(root), op.i32_ge_u,
          op.if_([get(rem), get(root), op.i32_sub, set(rem), inc(r, 1)]),
        ]),
      ]),
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

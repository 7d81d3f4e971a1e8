// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer engine's attention as WebAssembly (built at load by kernels/wasm/int-lut.ts), one query
 * head at a time (the integers of kernels/int/attention.ts `attendGroup`):
 *
 * - `scores(qU, qS, keys, n, hd, keyExp, scoreShift, out, sums)`: the dot products of the query with the
 *   cached keys, from the query's tables read at the keys' three digit planes, 16 positions at a time,
 *   each shifted by `scoreShift − keyExp[u]` to the score exponent.
 * - `softmax(scores, n, expT, expMul, tlen1, valueExp, out, rt, stat) → emax`: attention.ts
 *   `probabilities` — exp-table weights, their total (written to `stat` with the count of saturated
 *   differences and the sum of the probabilities), one reciprocal by shift-and-subtract, and Q15
 *   probabilities aligned to the largest value exponent, which it returns.
 * - `mix(tabs, codes, n, blocks, plane, digitStride, out)`: the value mix Σ_j p_j · (v_j + 2048) per
 *   dimension, from each position's probability table (`planes_unsigned`) read at the three base-16
 *   digits of the cached values in offset binary, 16 dimensions at a time, in runs of at most 128
 *   positions (so no 16-bit sum overflows) added in 32 bits; the caller subtracts 2048 · Σ p_j.
 *
 * - `cache_digits(k, v, hd, heads, keyAt, keyHeadStride, valueAt, valueHeadStride, valueDimStride,
 *   valueDigitStride)`: one position's cached keys and values (int32, kv head after kv head) written
 *   into the digit planes `scores` and `mix` read (`cacheDigitsFn`).
 * - `attend_heads(tasks, end, stride, work, hd, positions, expT, expMul, tlen1, blocks, plane,
 *   digitStride) → faults`: whole query heads, one task each (kernels/int/attention.ts `TASK_BYTES`, the fields in
 *   `attendHeadsFn`'s comment), from `tasks` to `end` every `stride` bytes: the four functions above
 *   called in turn and the mix shifted to ACC_EXP, in a thread's own `work` area
 *   (`attendWorkBytes`); what a thread of the engine's pool runs as its share of a layer's attention.
 *
 * Each computes exactly the integers of its TypeScript definition (tests/kernels/int-lut.test.ts), with only the
 * opcodes `LUT_OPCODES` classifies (kernels/wasm/lut.ts): no multiply, no divide, no float.
 * @module
 */
import { type Code, fn, type Func, I32, op } from "./asm.ts";
import { lutTotals } from "./lut.ts";
import { ACC_EXP } from "../int/gemv.ts";
import {
  get,
  I32_MAX,
  I32_MIN,
  inc,
  localsAfter,
  lutLocals,
  lutRun,
  recip16,
  set,
  shiftRightRound,
  shiftRound,
  splat4,
  stepBy,
} from "./int-ops.ts";

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
  const amount = l.i32(), term = l.i32(), m = l.i32(), fits = l.i32();
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
    // R = recip16(T), and bits = bitlen(T).
    recip16(total, r, bits, rem, fits),
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
 * `mix(tabs, codes, n, blocks, plane, digitStride, out)`: for each block b of 16 dimensions,
 * out[16b + lane] = Σ_{j<n} T_j[d0] + (T_j[d1] << 4) + (T_j[d2] << 8), the digits d0, d1, d2 of the
 * offset value (j, 16b + lane) + 2048 read from `codes + b · plane + (j ≫ 4) · 3 · digitStride +
 * d · digitStride + 16 (j & 15)` (per block of dimensions, per block of 16 positions, per digit, 16
 * positions' rows: `digitStride` is 256); T_j is position j's table u · p_j (`planes_unsigned`, 48
 * bytes per position). That is Σ p · (v + 2048), exact in 32 bits while it stays below 2^31
 * ((2^15 + n) · 4095 does). `blocks` is the number of blocks of dimensions.
 */
export function mixFn(relaxed: boolean): Func {
  const tabs = 0, codes = 1, n = 2, blocks = 3, plane = 4, digitStride = 5, out = 6;
  const l = localsAfter(7);
  const b = l.i32(), j = l.i32(), count = l.i32(), base = l.i32(), c = l.i32(), end = l.i32(), jump = l.i32();
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
      lutRun(lut, hi8, count, c, end, relaxed, jump),
      [0, 1, 2, 3].map((q) => [get(s[q]), lutTotals(lut, q), op.i32x4_add, set(s[q])]),
      get(j), get(count), op.i32_add, set(j),
      op.br(0),
    ])]),
    [0, 1, 2, 3].map((q) => [get(res[q]), get(s[q]), op.i32(4 * d), op.i32x4_shl, op.i32x4_add, set(res[q])]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    // From one block of 16 positions' rows to the next: three digits' rows, less the 256 bytes read.
    get(digitStride), get(digitStride), op.i32_add, set(jump),
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
 * Bytes of one thread's work area for `attend_heads` with heads of `hd` dimensions over at most
 * `positions` cached positions: the query's two tables (96 · hd), the digit sums (192), the
 * reciprocal's multiples (64), the softmax's statistics (16), the mix (4 · hd), then per position
 * (rounded up to 16) the scores and the weights (4 bytes each) and the probabilities' tables (48).
 */
export function attendWorkBytes(hd: number, positions: number): number {
  return 100 * hd + 272 + 56 * (Math.ceil(positions / 16) * 16);
}

/**
 * `attend_heads(tasks, end, stride, work, hd, positions, expT, expMul, tlen1, blocks, plane,
 * digitStride) → faults`: for each task from `tasks` up to `end`, `stride` bytes apart, one query
 * head's attention as kernels/int/attention.ts `attendGroup` computes it: the query's digit tables
 * (`planes_digits`), `scores`, `softmax`, the probabilities' tables (`planes_unsigned`) and `mix`,
 * called in turn over the thread's `work` area (`attendWorkBytes(hd, positions)`, `positions` a
 * multiple of 16), then out[i] = shift(mix[i] − 2048 · Σ p, ACC_EXP − (emax − 15)). A task's int32
 * fields: the query's address (hd int32), the score shift (SCORE_EXP − its exponent), the kv head's
 * key digit planes, its value digit planes, its key and value exponent mirrors, the positions n, and
 * where the hd outputs go. `expT`, `expMul`, `tlen1` are `softmax`'s; `blocks`, `plane`, `digitStride`
 * are `mix`'s. Returns the faults checked mode refuses: a softmax total of 2^30 or more, a saturated
 * score difference, a saturated output.
 *
 * `calls` names the module's functions by index (kernels/wasm/int-lut.ts assembles them in order).
 */
export function attendHeadsFn(calls: {
  planesDigits: number;
  scores: number;
  softmax: number;
  planesUnsigned: number;
  mix: number;
}): Func {
  const tasks = 0, end = 1, stride = 2, work = 3, hd = 4, positions = 5, expT = 6, expMul = 7, tlen1 = 8;
  const blocks = 9, plane = 10, digitStride = 11;
  const l = localsAfter(12);
  const qS = l.i32(), sums = l.i32(), rt = l.i32(), stat = l.i32(), mixed = l.i32(), scores = l.i32();
  const weights = l.i32(), probs = l.i32(), n = l.i32(), emax = l.i32(), faults = l.i32(), offset = l.i32();
  const amount = l.i32(), src = l.i32(), out = l.i32(), stop = l.i32(), x = l.i32(), term = l.i32();
  const kk = l.i32(), lim = l.i32();
  const field = (k: number): Code => [get(tasks), op.i32_load(4 * k)];
  const times48 = (v: number): Code => [get(v), op.i32(5), op.i32_shl, get(v), op.i32(4), op.i32_shl, op.i32_add];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [I32], l.types, [
    op.i32(0), set(faults),
    // The work area: the query's tables at work and qS, then the rest in the order attendWorkBytes sums.
    get(work), times48(hd), op.i32_add, set(qS),
    get(qS), times48(hd), op.i32_add, set(sums),
    get(sums), op.i32(192), op.i32_add, set(rt),
    get(rt), op.i32(64), op.i32_add, set(stat),
    get(stat), op.i32(16), op.i32_add, set(mixed),
    get(mixed), get(hd), op.i32(2), op.i32_shl, op.i32_add, set(scores),
    get(scores), get(positions), op.i32(2), op.i32_shl, op.i32_add, set(weights),
    get(weights), get(positions), op.i32(2), op.i32_shl, op.i32_add, set(probs),
    op.block([op.loop([
      get(tasks), get(end), op.i32_ge_u, op.br_if(1),
      field(6), set(n),
      field(0), get(hd), get(work), get(qS), op.call(calls.planesDigits),
      get(work), get(qS), field(2), get(n), get(hd), field(4), field(1), get(scores), get(sums), op.call(calls.scores),
      get(scores), get(n), get(expT), get(expMul), get(tlen1), field(5), get(weights), get(rt), get(stat),
      op.call(calls.softmax), set(emax),
      get(faults),
      get(stat), op.i32_load(), op.i32(1 << 30), op.i32_ge_u, op.i32_add,
      get(stat), op.i32_load(4), op.i32_eqz, op.i32_eqz, op.i32_add, set(faults),
      get(weights), get(n), get(probs), op.call(calls.planesUnsigned),
      get(probs), field(3), get(n), get(blocks), get(plane), get(digitStride), get(mixed), op.call(calls.mix),
      // The mix read the values in offset binary: Σ p · (v + 2048) − 2048 · Σ p = Σ p · v.
      get(stat), op.i32_load(8), op.i32(11), op.i32_shl, set(offset),
      op.i32(ACC_EXP + 15), get(emax), op.i32_sub, set(amount),
      get(mixed), set(src),
      field(7), set(out),
      get(src), get(hd), op.i32(2), op.i32_shl, op.i32_add, set(stop),
      op.block([op.loop([
        get(src), get(stop), op.i32_ge_u, op.br_if(1),
        get(src), op.i32_load(), get(offset), op.i32_sub, set(x),
        shiftRound(x, amount, term, faults, kk, lim),
        get(out), get(term), op.i32_store(),
        inc(src, 4), inc(out, 4),
        op.br(0),
      ])]),
      get(tasks), get(stride), op.i32_add, set(tasks),
      op.br(0),
    ])]),
    get(faults),
  ]);
}

/**
 * `cache_digits(k, v, hd, heads, keyAt, keyHeadStride, valueAt, valueHeadStride, valueDimStride,
 * valueDigitStride)`: for each of `heads` kv heads (`hd` int32 keys at `k`, values at `v`, head after
 * head), the three base-16 digits of each key (|k| ≤ 2047, the top digit two's complement) at
 * `keyAt + 16 i` and one and two planes of 16 · hd bytes on (the position's lane of its block of 16),
 * and of each value in offset binary (v + 2048) at `valueAt + (i ≫ 4) · valueDimStride + (i & 15)` and
 * one and two `valueDigitStride` on; `keyAt` and `valueAt` step by their head strides. The engine's
 * layout of the cache's digit planes (engines/int/model.ts), as simd.ts `fillDigits` rewrites them.
 */
export function cacheDigitsFn(): Func {
  const k = 0, v = 1, hd = 2, heads = 3, keyAt = 4, keyHeadStride = 5, valueAt = 6, valueHeadStride = 7;
  const valueDimStride = 8, valueDigitStride = 9;
  const l = localsAfter(10);
  const h = l.i32(), i = l.i32(), x = l.i32(), at = l.i32(), plane = l.i32(), block = l.i32(), lane = l.i32();
  const three = (addr: Code, step: number, value: Code): Code => [
    addr, value, op.i32(15), op.i32_and, op.i32_store8(),
    addr, get(step), op.i32_add, value, op.i32(4), op.i32_shr_s, op.i32(15), op.i32_and, op.i32_store8(),
    addr, get(step), op.i32_add, get(step), op.i32_add, value, op.i32(8), op.i32_shr_s, op.i32(15), op.i32_and,
    op.i32_store8(),
  ];
  const loopUntil = (counter: number, limit: number, body: Code[]): Code => [
    op.i32(0), set(counter),
    op.block([op.loop([get(counter), get(limit), op.i32_ge_s, op.br_if(1), body, inc(counter, 1), op.br(0)])]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [], l.types, [
    get(hd), op.i32(4), op.i32_shl, set(plane),
    loopUntil(h, heads, [
      get(keyAt), set(at),
      loopUntil(i, hd, [
        get(k), op.i32_load(), set(x),
        three(get(at), plane, get(x)),
        inc(at, 16), inc(k, 4),
      ]),
      get(valueAt), set(block),
      op.i32(0), set(lane),
      loopUntil(i, hd, [
        get(v), op.i32_load(), op.i32(2048), op.i32_add, set(x),
        three([get(block), get(lane), op.i32_add], valueDigitStride, get(x)),
        inc(v, 4), inc(lane, 1),
        get(lane), op.i32(16), op.i32_sub, op.i32_eqz,
        op.if_([op.i32(0), set(lane), get(block), get(valueDimStride), op.i32_add, set(block)]),
      ]),
      get(keyAt), get(keyHeadStride), op.i32_add, set(keyAt),
      get(valueAt), get(valueHeadStride), op.i32_add, set(valueAt),
    ]),
  ]);
}

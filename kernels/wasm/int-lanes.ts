// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer engine's batched 4-bit projection with the positions in the vector lanes (built at load
 * by kernels/wasm/int-lut.ts): `gemv_lanesP` computes kernels/int/gemv.ts `gemv` for up to P input
 * vectors at once (P = 4, 8, 16 or 32), the same integers, saturations included, as P calls of
 * `gemv_lut`, each input at its own exponent.
 *
 * Why it is faster than `gemv_lut` over P inputs: there a weight costs three byte-table look-ups per
 * input (exact 16-bit × 4-bit products need three swizzles); here one code byte of a row (two columns)
 * is one scalar address into a 256-entry table of the column pair, PT[b] = (lo − 8) · x_even +
 * (hi − 8) · x_odd for every input in the lanes (P/4 i32x4 vectors an entry, each built by one
 * addition), so a code byte is P/4 loads and adds for P inputs. The group's scale (16 + m) is a scalar
 * per row and group, applied as (a ≪ e0) + (a ≪ e1) + (a ≪ e2) − (a ≪ e3) with the counts from a
 * 16-entry table; the rounding shift by k = base − de uses scalar counts too.
 *
 * Inputs at different exponents (the o and down projections of a prefill batch): lane p's base is
 * base_min + d_p with d_p ≥ 0, so k_p = s + d_p for the scalar s = base_min − de, and
 * - s in [1, 31]: `shift(p, s + d)` = ((p ≫ d) + 2^(s−1)) ≫ s (floor, then round: exact, no overflow
 *   as |p| < 2^28); the lane shift ≫ d by conditional steps with masks made once per call;
 * - s in [−3, 0]: q = p ≪ −s (|q| < 2^31, exact), then q rounded half up by 2^d per lane;
 * - s ≥ 32: every k ≥ 32, so the group adds 0;
 * - otherwise (s < −3, where a left shift may saturate, or bases more than 31 apart), lane by lane
 *   through `shift`'s every case (int-ops.ts `shiftRound`).
 * The saturating accumulate adds in vectors and checks every lane's overflow at once (one `any_true`
 * per row and group); a group that overflowed is added again lane by lane, saturating and counting.
 *
 * `gemv_lanesP(xs, xStride, n, codes, scales, rows, groups, base, bases, fin, out, outStride, work)
 * → saturations`: input p < n is `groups · 32` int32 at `xs + p · xStride`, its output `rows` int32 at
 * `out + p · outStride`; its base is `base`, or the int32 at `bases + 4p` when `bases` is not −1; `fin`
 * the final shift; codes and scales as `gemv_lut` reads them (per 16-row block; a thread's share is
 * its blocks); `work` `lanesWorkBytes(P, cols, rows)` bytes, 16-aligned, one area per thread.
 *
 * Memory of `work` (bytes): 256 the scale's shift counts per m, 320 the lanes' d, 448 a spill of one
 * row's products, 576 the lanes' masks (per vector: the bits of d, of max(d − 1, 0), and d = 0), 2048
 * the plan per scale byte (256 × kind, e0, e1, e2, e3, R, B, L: a left shift L is folded into the
 * counts e when no lane needs more), 10240 the pair tables of one group (16 pairs × 256 entries ×
 * P int32), then the inputs transposed (per column, P int32), then the accumulators (per row, P int32).
 *
 * Opcodes: only those `LUT_OPCODES` classifies (kernels/wasm/lut.ts); tests/kernels/audit.test.ts.
 * @module
 */
import { type Code, fn, type Func, I32, op } from "./asm.ts";
import { get, I32_MAX, inc, localsAfter, maskBit, set, shiftRound, splat4 } from "./int-ops.ts";

/** The lane counts the module offers: `gemv_lanes4` … `gemv_lanes32`. */
export const LANE_COUNTS = [4, 8, 16, 32] as const;
/** Offsets in a work area (see the module comment). */
const MUL_PLAN = 256, LANE_D = 320, SPILL = 448, MASKS = 576, PLAN = 2048, TABLES = 10240;
/** Bytes of one vector's masks: five bits of d, five of max(d − 1, 0), and d = 0. */
const MASK_BYTES = 176;

/** Bytes of one thread's work area for `gemv_lanesP` over matrices of at most `cols` columns and `rows` rows. */
export function lanesWorkBytes(lanes: number, cols: number, rows: number): number {
  const entry = 4 * lanes;
  return TABLES + 16 * 256 * entry + cols * entry + (Math.ceil(rows / 16) * 16) * entry;
}

/** For m in 0..15, counts e0..e3 in [0, 4] with 2^e0 + 2^e1 + 2^e2 − 2^e3 = 16 + m, packed a byte each. */
export function scaleShifts(): number[] {
  const out: number[] = [];
  for (let m = 0; m < 16; m++) {
    let found = -1;
    for (let c = 0; c < 625 && found < 0; c++) {
      const e = [c % 5, Math.floor(c / 5) % 5, Math.floor(c / 25) % 5, Math.floor(c / 125) % 5];
      if ((1 << e[0]) + (1 << e[1]) + (1 << e[2]) - (1 << e[3]) === 16 + m) found = e[0] | (e[1] << 8) | (e[2] << 16) | (e[3] << 24);
    }
    out.push(found);
  }
  return out;
}

/** `gemv_lanesP`, P = `lanes` (a multiple of 4, at most 32): see the module comment. */
export function lanesFn(lanes: number): Func {
  const V = lanes >> 2;
  const entry = 16 * V; // bytes of one table entry, one transposed column, one accumulator row
  const esh = Math.log2(entry);
  const pairBytes = 256 * entry;
  const xs = 0, xStride = 1, n = 2, codes = 3, scales = 4, rows = 5, groups = 6, base = 7, bases = 8;
  const fin = 9, out = 10, outStride = 11, work = 12;
  const l = localsAfter(13);
  const p = l.i32(), c = l.i32(), src = l.i32(), dst = l.i32(), val = l.i32(), baseMin = l.i32(), dmax = l.i32();
  const steps = l.i32(), exactAll = l.i32(), de = l.i32(), s = l.i32(), kind = l.i32();
  const tab = l.i32(), xt = l.i32(), acc = l.i32(), end = l.i32(), g = l.i32(), j = l.i32(), vv = l.i32();
  const cb = l.i32(), sb = l.i32(), r = l.i32(), lane = l.i32(), cp = l.i32(), ar = l.i32();
  const sc = l.i32(), e = l.i32(), e0 = l.i32(), e1 = l.i32(), e2 = l.i32(), e3 = l.i32(), plan = l.i32();
  const sh = l.i32(), term = l.i32(), sat = l.i32(), kk = l.i32(), lim = l.i32(), a32 = l.i32(), sum = l.i32();
  const blockBytes = l.i32(), blockScales = l.i32(), left = l.i32();
  const x0 = l.v128(), x1 = l.v128(), h = l.v128(), bv = l.v128(), any = l.v128(), satv = l.v128(), sv = l.v128();
  const av = l.v128(), ov = l.v128(), q = l.v128();
  const t0 = Array.from({ length: 16 }, () => l.v128());
  const A = Array.from({ length: V }, () => l.v128());
  const T = Array.from({ length: V }, () => l.v128());
  const vs = Array.from({ length: V }, (_, v) => v);
  const zero = op.v128_const(new Uint8Array(16));
  const ifEq = (x: number, k: number, then: Code[], otherwise?: Code[]): Code =>
    [get(x), op.i32(k), op.i32_sub, op.i32_eqz, op.if_(then, otherwise)];
  const loopWhile = (cond: Code, body: Code[]): Code => op.block([op.loop([cond, op.i32_eqz, op.br_if(1), body, op.br(0)])]);
  const mask = (v: number, kindOff: number, b: number): Code => [get(work), op.v128_load(MASKS + MASK_BYTES * v + kindOff + 16 * b)];
  // T[v] shifted right, lane by lane, by the d (kindOff 0) or max(d − 1, 0) (kindOff 80) of its lanes.
  const laneShift = (kindOff: number): Code =>
    [0, 1, 2, 3, 4].map((b) => [
      get(steps), op.i32(b), op.i32_gt_s,
      op.if_(vs.map((v) => [get(T[v]), op.i32(1 << b), op.i32x4_shr_s, get(T[v]), mask(v, kindOff, b), op.v128_bitselect, set(T[v])])),
    ]);

  // --- The call's plan: the lanes' bases, their spread, the masks, the shift plan per de. ---
  const prologue: Code = [
    // Lane bases at LANE_D (padding lanes get input 0's), their minimum and spread.
    op.i32(0), set(p),
    loopWhile([get(p), op.i32(lanes), op.i32_lt_s], [
      get(work), get(p), op.i32(2), op.i32_shl, op.i32_add,
      get(bases), op.i32(0), op.i32_ge_s, get(p), get(n), op.i32_lt_s, op.i32_and,
      op.if_([get(bases), get(p), op.i32(2), op.i32_shl, op.i32_add, op.i32_load(), set(val)], [
        get(bases), op.i32(0), op.i32_ge_s,
        op.if_([get(bases), op.i32_load(), set(val)], [get(base), set(val)]),
      ]),
      get(val), op.i32_store(LANE_D),
      inc(p, 1),
    ]),
    get(work), op.i32_load(LANE_D), set(baseMin),
    op.i32(0), set(p),
    loopWhile([get(p), get(n), op.i32_lt_s], [
      get(work), get(p), op.i32(2), op.i32_shl, op.i32_add, op.i32_load(LANE_D), set(val),
      get(val), get(baseMin), get(val), get(baseMin), op.i32_lt_s, op.select, set(baseMin),
      inc(p, 1),
    ]),
    op.i32(0), set(dmax),
    op.i32(0), set(p),
    loopWhile([get(p), op.i32(lanes), op.i32_lt_s], [
      get(work), get(p), op.i32(2), op.i32_shl, op.i32_add, set(dst),
      get(dst), op.i32_load(LANE_D), get(baseMin), op.i32_sub, set(val),
      get(p), get(n), op.i32_ge_s, op.if_([op.i32(0), set(val)]),
      get(dst), get(val), op.i32_store(LANE_D),
      get(val), get(dmax), get(val), get(dmax), op.i32_gt_s, op.select, set(dmax),
      inc(p, 1),
    ]),
    get(dmax), op.i32(31), op.i32_gt_s, set(exactAll),
    op.i32(32), get(dmax), op.i32_clz, op.i32_sub, set(steps), // bit length of the spread (0 when none)
    vs.map((v) => [
      get(work), op.v128_load(LANE_D + 16 * v), set(h),
      get(h), splat4(1), op.i32x4_sub, set(q),
      [0, 1, 2, 3, 4].map((b) => [get(work), maskBit(h, b), op.v128_store(MASKS + MASK_BYTES * v + 16 * b)]),
      get(q), zero, op.i32x4_max_s, set(h),
      [0, 1, 2, 3, 4].map((b) => [get(work), maskBit(h, b), op.v128_store(MASKS + MASK_BYTES * v + 80 + 16 * b)]),
      get(work), get(q), op.i32(31), op.i32x4_shr_s, op.v128_store(MASKS + MASK_BYTES * v + 160),
    ]),
    scaleShifts().map((w, m) => [get(work), op.i32(w), op.i32_store(MUL_PLAN + 4 * m)]),
    // The plan per scale byte: kind 0 adds nothing (every k ≥ 32); 1 the scale alone (its counts + L);
    // 2 then + B ≫ R; 3 the lanes' d first; 4 ≪ L then the lanes' rounding; 5 lane by lane.
    op.i32(0), set(de), // here: the scale byte
    loopWhile([get(de), op.i32(256), op.i32_lt_s], [
      get(work), get(de), op.i32(5), op.i32_shl, op.i32_add, set(dst),
      get(baseMin), get(de), op.i32(4), op.i32_shr_u, op.i32_sub, set(s),
      get(work), get(de), op.i32(15), op.i32_and, op.i32(2), op.i32_shl, op.i32_add, op.i32_load(MUL_PLAN), set(e),
      op.i32(5), set(kind), op.i32(0), set(e1), op.i32(0), set(e2), op.i32(0), set(e3), // L, R, B
      get(s), op.i32(32), op.i32_ge_s,
      op.if_([op.i32(0), set(kind)], [
        get(exactAll), op.i32_eqz,
        op.if_([
          get(s), op.i32(1), op.i32_ge_s,
          op.if_([
            op.i32(2), op.i32(3), get(dmax), op.i32_eqz, op.select, set(kind),
            get(s), set(e2),
            op.i32(1), get(s), op.i32(1), op.i32_sub, op.i32_shl, set(e3),
          ], [
            get(s), op.i32(-3), op.i32_ge_s,
            op.if_([
              op.i32(1), op.i32(4), get(dmax), op.i32_eqz, op.select, set(kind),
              op.i32(0), get(s), op.i32_sub, set(e1),
            ]),
          ]),
        ]),
      ]),
      // Kind 1 folds L into the counts (a wrapping sum whose result |p · 2^L| < 2^31 is exact).
      op.i32(0), set(e0),
      get(kind), op.i32(1), op.i32_sub, op.i32_eqz, op.if_([get(e1), set(e0)]),
      get(dst), get(kind), op.i32_store(PLAN),
      [0, 1, 2, 3].map((i) => [
        get(dst), get(e), op.i32(8 * i), op.i32_shr_u, op.i32(255), op.i32_and, get(e0), op.i32_add, op.i32_store(PLAN + 4 + 4 * i),
      ]),
      get(dst), get(e2), op.i32_store(PLAN + 20),
      get(dst), get(e3), op.i32_store(PLAN + 24),
      get(dst), get(e1), op.i32_store(PLAN + 28),
      inc(de, 1),
    ]),
    // The inputs transposed: column c's P values at xt + c · entry (padding lanes 0).
    get(work), op.i32(TABLES + 16 * pairBytes), op.i32_add, set(xt),
    get(xt), get(groups), op.i32(5 + esh), op.i32_shl, op.i32_add, set(acc),
    get(work), op.i32(TABLES), op.i32_add, set(tab),
    op.i32(0), set(p),
    get(xs), set(src),
    loopWhile([get(p), op.i32(lanes), op.i32_lt_s], [
      get(xt), get(p), op.i32(2), op.i32_shl, op.i32_add, set(dst),
      get(dst), get(groups), op.i32(5 + esh), op.i32_shl, op.i32_add, set(end),
      get(p), get(n), op.i32_lt_s,
      op.if_([
        get(src), set(c),
        loopWhile([get(dst), get(end), op.i32_lt_s], [
          get(dst), get(c), op.i32_load(), op.i32_store(),
          inc(c, 4), inc(dst, entry),
        ]),
      ], [
        loopWhile([get(dst), get(end), op.i32_lt_s], [get(dst), op.i32(0), op.i32_store(), inc(dst, entry)]),
      ]),
      get(src), get(xStride), op.i32_add, set(src),
      inc(p, 1),
    ]),
    // Accumulators to 0.
    get(acc), set(dst),
    get(acc), get(rows), op.i32(esh), op.i32_shl, op.i32_add, set(end),
    loopWhile([get(dst), get(end), op.i32_lt_s], [get(dst), zero, op.v128_store(), inc(dst, 16)]),
    get(groups), op.i32(8), op.i32_shl, set(blockBytes),
    get(groups), op.i32(4), op.i32_shl, set(blockScales),
  ];

  // --- One group's pair tables: PT_j[hi · 16 + lo] = (lo − 8) · x_{2j} + (hi − 8) · x_{2j+1}, by adds. ---
  const tables: Code = [
    get(xt), get(g), op.i32(5 + esh), op.i32_shl, op.i32_add, set(src),
    get(tab), set(dst),
    op.i32(0), set(j),
    loopWhile([get(j), op.i32(16), op.i32_lt_s], [
      op.i32(0), set(vv),
      loopWhile([get(vv), op.i32(V), op.i32_lt_s], [
        get(src), op.v128_load(), set(x0),
        get(src), op.v128_load(entry), set(x1),
        zero, get(x0), op.i32(3), op.i32x4_shl, op.i32x4_sub, set(t0[0]),
        t0.slice(1).map((t, u) => [get(t0[u]), get(x0), op.i32x4_add, set(t)]),
        zero, get(x1), op.i32(3), op.i32x4_shl, op.i32x4_sub, set(h),
        Array.from({ length: 16 }, (_, hi) => [
          t0.map((t, lo) => [get(dst), get(h), get(t), op.i32x4_add, op.v128_store(entry * (16 * hi + lo))]),
          hi < 15 ? [get(h), get(x1), op.i32x4_add, set(h)] : [],
        ]),
        inc(src, 16), inc(dst, 16), inc(vv, 1),
      ]),
      // src moved V vectors into the pair's first column: on to the next pair's; dst to the next table.
      inc(src, 2 * entry - 16 * V),
      inc(dst, pairBytes - 16 * V),
      inc(j, 1),
    ]),
  ];

  // --- One row's group: sums by look-up, the scale, the shift, the saturating accumulate. ---
  const lookUp: Code = Array.from({ length: 16 }, (_, jj) => [
    get(cp), op.i32_load8_u(16 * jj), op.i32(esh), op.i32_shl, get(tab), op.i32_add, set(val),
    vs.map((v) => jj === 0
      ? [get(val), op.v128_load(16 * v), set(A[v])]
      : [get(A[v]), get(val), op.v128_load(pairBytes * jj + 16 * v), op.i32x4_add, set(A[v])]),
  ]);
  const scaled: Code = [
    get(plan), op.i32_load(PLAN + 4), set(e0),
    get(plan), op.i32_load(PLAN + 8), set(e1),
    get(plan), op.i32_load(PLAN + 12), set(e2),
    get(plan), op.i32_load(PLAN + 16), set(e3),
    vs.map((v) => [
      get(A[v]), get(e0), op.i32x4_shl, get(A[v]), get(e1), op.i32x4_shl, op.i32x4_add,
      get(A[v]), get(e2), op.i32x4_shl, op.i32x4_add, get(A[v]), get(e3), op.i32x4_shl, op.i32x4_sub, set(T[v]),
    ]),
  ];
  // The shifted terms in T, by the plan at `plan` (kinds 2, 3 and 4; kind 1 is done).
  const shifted: Code = [
    ifEq(kind, 2, [
      get(plan), op.i32_load(PLAN + 24), op.i32x4_splat, set(bv),
      get(plan), op.i32_load(PLAN + 20), set(e1),
      vs.map((v) => [get(T[v]), get(bv), op.i32x4_add, get(e1), op.i32x4_shr_s, set(T[v])]),
    ], [
      ifEq(kind, 3, [
        get(plan), op.i32_load(PLAN + 24), op.i32x4_splat, set(bv),
        get(plan), op.i32_load(PLAN + 20), set(e1),
        laneShift(0),
        vs.map((v) => [get(T[v]), get(bv), op.i32x4_add, get(e1), op.i32x4_shr_s, set(T[v])]),
      ], [
        // kind 4: q = p ≪ L, then q rounded half up by 2^d in each lane (q itself where d = 0).
        get(plan), op.i32_load(PLAN + 28), set(e0),
        vs.map((v) => [get(T[v]), get(e0), op.i32x4_shl, set(T[v]), get(work), get(T[v]), op.v128_store(SPILL + 16 * v)]),
        laneShift(80),
        vs.map((v) => [
          get(work), op.v128_load(SPILL + 16 * v),
          get(T[v]), op.i32(1), op.i32x4_shr_s, get(T[v]), splat4(1), op.v128_and, op.i32x4_add,
          mask(v, 160, 0), op.v128_bitselect, set(T[v]),
        ]),
      ]),
    ]),
  ];
  // acc += T in every lane; on any lane's overflow, the sums again with saturation, counted.
  const accumulate: Code = [
    zero, set(any),
    vs.map((v) => [
      get(ar), op.v128_load(16 * v), set(av),
      get(av), get(T[v]), op.i32x4_add, set(sv),
      get(ar), get(sv), op.v128_store(16 * v),
      get(any), get(av), get(sv), op.v128_xor, get(T[v]), get(sv), op.v128_xor, op.v128_and, op.v128_or, set(any),
    ]),
    get(any), splat4(-0x80000000), op.v128_and, op.v128_any_true,
    op.if_(vs.map((v) => [
      get(ar), op.v128_load(16 * v), set(sv),
      get(sv), get(T[v]), op.i32x4_sub, set(av), // the accumulator before (wrapping arithmetic)
      get(av), get(sv), op.v128_xor, get(T[v]), get(sv), op.v128_xor, op.v128_and, op.i32(31), op.i32x4_shr_s, set(ov),
      get(ar),
      get(av), op.i32(31), op.i32x4_shr_s, splat4(I32_MAX), op.v128_xor, get(sv), get(ov), op.v128_bitselect,
      op.v128_store(16 * v),
      get(satv), get(ov), op.i32x4_sub, set(satv),
    ])),
  ];
  // Lane by lane through `shift`'s every case: k = s + d_p, then the saturating add (gemv.ts addGroup).
  const exact: Code = [
    vs.map((v) => [get(work), get(T[v]), op.v128_store(SPILL + 16 * v)]),
    get(baseMin), get(de), op.i32_sub, set(s),
    op.i32(0), set(p),
    loopWhile([get(p), op.i32(lanes), op.i32_lt_s], [
      get(work), get(p), op.i32(2), op.i32_shl, op.i32_add, set(dst),
      get(dst), op.i32_load(SPILL), set(a32),
      get(dst), op.i32_load(LANE_D), get(s), op.i32_add, set(sh),
      shiftRound(a32, sh, term, sat, kk, lim),
      get(ar), get(p), op.i32(2), op.i32_shl, op.i32_add, set(dst),
      get(dst), op.i32_load(), set(val),
      get(val), get(term), op.i32_add, set(sum),
      get(val), get(sum), op.i32_xor, get(term), get(sum), op.i32_xor, op.i32_and, op.i32(0), op.i32_lt_s,
      op.if_([get(val), op.i32(31), op.i32_shr_s, op.i32(I32_MAX), op.i32_xor, set(sum), inc(sat, 1)]),
      get(dst), get(sum), op.i32_store(),
      inc(p, 1),
    ]),
  ];
  const rowGroup: Code = [
    lookUp,
    get(sb), get(lane), op.i32_add, op.i32_load8_u(), set(sc),
    get(work), get(sc), op.i32(5), op.i32_shl, op.i32_add, set(plan),
    get(plan), op.i32_load(PLAN), set(kind),
    get(kind),
    op.if_([
      scaled,
      ifEq(kind, 5, [get(sc), op.i32(4), op.i32_shr_u, set(de), exact], [
        get(kind), op.i32(1), op.i32_gt_s, op.if_([shifted]),
        accumulate,
      ]),
    ]),
  ];
  const groupRows: Code = [
    // Row r: block r ≫ 4, lane r & 15; its codes of group g at codes + block · blockBytes + 256 g + lane.
    op.i32(0), set(r),
    get(codes), get(g), op.i32(8), op.i32_shl, op.i32_add, set(cb),
    get(scales), get(g), op.i32(4), op.i32_shl, op.i32_add, set(sb),
    get(acc), set(ar),
    loopWhile([get(r), get(rows), op.i32_lt_s], [
      get(rows), get(r), op.i32_sub, set(left),
      op.i32(0), set(lane),
      loopWhile([get(lane), op.i32(16), op.i32_lt_s, get(lane), get(left), op.i32_lt_s, op.i32_and], [
        get(cb), get(lane), op.i32_add, set(cp),
        rowGroup,
        inc(ar, entry),
        inc(lane, 1),
      ]),
      get(cb), get(blockBytes), op.i32_add, set(cb),
      get(sb), get(blockScales), op.i32_add, set(sb),
      inc(r, 16),
    ]),
  ];
  // The final shift by `fin` (four lanes at a time for fin in [1, 31]) and the outputs, input by input.
  const finish: Code = [
    get(fin), op.i32(1), op.i32_ge_s, get(fin), op.i32(31), op.i32_le_s, op.i32_and,
    op.if_([
      get(acc), set(dst),
      get(acc), get(rows), op.i32(esh), op.i32_shl, op.i32_add, set(end),
      get(fin), op.i32(1), op.i32_sub, set(sh),
      loopWhile([get(dst), get(end), op.i32_lt_s], [
        get(dst), op.v128_load(), get(sh), op.i32x4_shr_s, set(q),
        get(dst), get(q), op.i32(1), op.i32x4_shr_s, get(q), splat4(1), op.v128_and, op.i32x4_add, op.v128_store(),
        inc(dst, 16),
      ]),
    ]),
    get(fin), op.i32(0), op.i32_ge_s, get(fin), op.i32(31), op.i32_le_s, op.i32_and, set(kind), // done in place
    op.i32(0), set(p),
    get(out), set(cp),
    loopWhile([get(p), get(n), op.i32_lt_s], [
      get(acc), get(p), op.i32(2), op.i32_shl, op.i32_add, set(src),
      get(cp), set(dst),
      op.i32(0), set(r),
      loopWhile([get(r), get(rows), op.i32_lt_s], [
        get(src), op.i32_load(), set(val),
        get(kind), op.i32_eqz, op.if_([shiftRound(val, fin, term, sat, kk, lim), get(term), set(val)]),
        get(dst), get(val), op.i32_store(),
        inc(src, entry), inc(dst, 4), inc(r, 1),
      ]),
      get(cp), get(outStride), op.i32_add, set(cp),
      inc(p, 1),
    ]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [I32], l.types, [
    op.i32(0), set(sat), zero, set(satv),
    get(n), op.i32(1), op.i32_ge_s,
    op.if_([
      prologue,
      op.i32(0), set(g),
      loopWhile([get(g), get(groups), op.i32_lt_s], [tables, groupRows, inc(g, 1)]),
      finish,
    ]),
    get(sat),
    [0, 1, 2, 3].map((k) => [get(satv), op.i32x4_extract_lane(k), op.i32_add]),
  ]);
}

// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer engine's 4-bit projection as WebAssembly (built at load by kernels/wasm/int-lut.ts):
 *
 * - `planes_offset(x, n, out)`: the byte planes of the tables (u − 8) · x_i (kernels/int/gemv-lut.ts
 *   `inputPlanes`), 48 bytes per input, in 7-bit digits (bits 0–6, 7–13, the rest signed).
 * - `planes_digits(x, n, outU, outS)`: the byte planes of u · x_i and of the signed top digit's table
 *   (u < 8 ? u : u − 16) · x_i, 48 bytes per input each (a query's tables, kernels/int/attention.ts).
 * - `planes_unsigned(x, n, out)`: the byte planes of u · x_i alone (the probabilities' tables).
 * - `gemv_lut(planes, planeStride, count, codes, scales, rows, groups, base, bases, fin, out,
 *   outStride, scratch)`: the whole projection of kernels/int/gemv.ts for `count` inputs (their planes
 *   `planeStride` bytes apart, their outputs `outStride` apart), 16 rows at a time, every input in turn
 *   over one block of rows so that its codes are read from memory once: each group's sums by table
 *   look-up over the codes as the file packs them (two per byte, unpacked by a mask and a shift), then
 *   per row its scale
 *   (16 + m) by shifts and adds, the round-half-up shift by `base − de`, the saturating accumulate, and
 *   the final shift by `fin`. Returns how many shifts or sums saturated (checked mode turns a non-zero
 *   count into an error).
 *
 * Each computes exactly the integers of its TypeScript definition (tests/kernels/int-lut.test.ts), with only the
 * opcodes `LUT_OPCODES` classifies (kernels/wasm/lut.ts): no multiply, no divide, no float.
 * @module
 */
import { type Code, fn, type Func, I32, op, type ValType } from "./asm.ts";
import { lutZero } from "./lut.ts";
import { leanKinds, leanLocals, leanPlan, leanQuarter, leanSetup } from "./int-lean.ts";
import {
  bytes16,
  get,
  gemvPairs,
  gemvTotals,
  I32_MAX,
  I32_MIN,
  inc,
  localsAfter,
  lutLocals,
  maskBit,
  mulScale,
  set,
  shiftRound,
  splat4,
  stepBy,
} from "./int-ops.ts";

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

/**
 * Stores the three byte planes of the 16 int32 entries in e0..e3 at `out`: digits of `bits` bits (bits
 * 0 … bits − 1 and bits … 2 · bits − 1, unsigned) and the rest above them (signed).
 */
function storePlanes(e: number[], out: number, a: number, b: number, bits = 8): Code {
  // A plane's byte of each entry: masked (the two low digits) or shifted down as signed (the top, in
  // [−128, 127] for the entries' range), then narrowed 32 → 16 → 8 bits, which never saturates.
  const part = (x: number, byte: number): Code =>
    byte === 2
      ? [get(x), op.i32(2 * bits), op.i32x4_shr_s]
      : [get(x), byte === 1 ? [op.i32(bits), op.i32x4_shr_s] : [], splat4((1 << bits) - 1), op.v128_and];
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
        : [offset, storePlanes(e, outA, a, b, 7)],
      inc(outA, 48),
      inc(x, 4),
      inc(i, 1),
      op.br(0),
    ])]),
  ]);
}

/**
 * `gemv_lut(planes, planeStride, count, codes, scales, rows, groups, base, bases, fin, out, outStride,
 * scratch) → saturations`: see the module comment. Every input has the shift base `base`, or, when
 * `bases` is not −1, input i has the int32 at `bases + 4i` (inputs at different exponents). Codes are laid out per 16-row block, per pair of columns, 16
 * bytes (the 16 rows' bytes of the file: low nibble the even column); scales per block, per group, 16
 * bytes; `scratch` holds 128 bytes (one per thread); each output receives whole blocks of 16 (rows
 * rounded up). A thread's share of the rows is the same call on its blocks' codes, scales and outputs.
 *
 * Each group's step runs on four lanes at a time when every row's shift k = base − de can lie only in
 * [−30, 31] (base in [−15, 31], the usual case). The per-lane shifts are conditional shifts by 16, 8, 4,
 * 2, 1 picked by the amount's bits. Which of `shift`'s cases a group needs is read from its 16 scale
 * bytes first:
 * - every k in [−3, 0]: p << −k, which cannot overflow (|p| < 2^28, so |p · 8| < 2^31);
 * - every k in [1, 8]: t = p >> (k − 1), then the rounding `(t >> 1) + (t & 1)`, which is `shift`'s
 *   `(p >> k) + ((p >> (k − 1)) & 1)`;
 * - every k in [1, 32] (every de below base, the common case of a real matrix whose groups' exponents
 *   spread wider than 8): the same with five conditional shifts (k = 32 gives 0, as `shift` does);
 * - every k in [−3, 12], of both signs (the usual case of a real model's groups, whose de cluster near
 *   the base): both of the first two cases for every lane, each lane keeping its own;
 * - every k in [−15, 0]: the left shift by four conditional steps, saturated as below;
 * - otherwise both cases for every lane, each lane keeping its own, the left shift saturated where p
 *   lies outside ±(2^31 − 1) >> −k (that limit shifted the same way).
 * Other bases go row by row through `shift`'s every case.
 */
export function gemvFn(relaxed: boolean): Func {
  const planes = 0, planeStride = 1, count = 2, codes = 3, scales = 4, rows = 5, groups = 6, base = 7, bases = 8;
  const fin = 9, out = 10, outStride = 11, scratch = 12;
  const l = localsAfter(13);
  const r = l.i32(), g = l.i32(), fast = l.i32();
  // The 16-row block's codes, scales and output; the input under way, its planes, its output, its scales.
  const blk = l.i32(), sblk = l.i32(), oblk = l.i32(), bi = l.i32(), pl = l.i32(), ob = l.i32(), sp = l.i32();
  const packed = l.v128(), bp = l.i32();
  const a = l.i32(), sc = l.i32(), m = l.i32(), p = l.i32(), amount = l.i32(), term = l.i32();
  const acc = l.i32(), sum = l.i32(), sat = l.i32(), kk = l.i32(), lim = l.i32();
  const lut = lutLocals(l);
  const accs = [l.v128(), l.v128(), l.v128(), l.v128()];
  const scv = l.v128(), deb = l.v128(), base8 = l.v128(), baseLess8 = l.v128(), basev = l.v128(), satv = l.v128();
  const basePlus3 = l.v128();
  const hi8 = l.v128(), av = l.v128(), mv = l.v128(), dev = l.v128(), pv = l.v128(), kv = l.v128(), sv = l.v128();
  const tv = l.v128(), leftv = l.v128(), limv = l.v128(), bad = l.v128(), sumv = l.v128(), ovf = l.v128();
  const redo = l.i32(), satSave = l.v128();
  const lean = leanLocals(l, lut, relaxed), mx = l.v128();
  const zero = op.v128_const(new Uint8Array(16));
  // One row's group step (kernels/int/gemv.ts `addGroup`) on the sums and accumulators in scratch.
  const addGroup = (lane: number): Code => [
    get(scratch), op.i32_load(4 * lane), set(a),
    get(sp), op.i32_load8_u(lane), set(sc),
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
  // accs[q] += t, wrapping. `largest` then keeps the largest |acc| so far (unsigned) in `mx`, once per
  // group for all four quarters (once per quarter held `mx` through the look-ups: 15% slower under Bun).
  const wrapAdd = (q: number, t = tv): Code => [get(accs[q]), get(t), op.i32x4_add, set(accs[q])];
  const largest: Code = [
    get(mx),
    get(accs[0]), op.i32x4_abs, get(accs[1]), op.i32x4_abs, op.i32x4_max_u,
    get(accs[2]), op.i32x4_abs, get(accs[3]), op.i32x4_abs, op.i32x4_max_u,
    op.i32x4_max_u, op.i32x4_max_u, set(mx),
  ];
  // tv = p >> (k − 1) rounded, for k − 1 in sv, by `steps` conditional shifts.
  const rightShift = (steps: number): Code => [
    get(pv), set(tv),
    Array.from({ length: steps }, (_, i) => stepBy(tv, sv, steps - 1 - i, op.i32x4_shr_s)),
    get(tv), op.i32(1), op.i32x4_shr_s, get(tv), splat4(1), op.v128_and, op.i32x4_add, set(tv),
  ];
  // The three kinds of group (see the function's comment), for lanes 4q..4q+3.
  const leftSmall = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
    get(dev), get(basev), op.i32x4_sub, set(sv), // −k in [0, 3]
    get(pv), set(tv),
    stepBy(tv, sv, 1, op.i32x4_shl),
    stepBy(tv, sv, 0, op.i32x4_shl),
  ];
  const rightSmall = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
    get(basev), get(dev), op.i32x4_sub, splat4(1), op.i32x4_sub, set(sv), // k − 1 in [0, 7]
    rightShift(3),
  ];
  // k in [−3, 12], of either sign: the right shift by 4 steps and the left by 2, each lane keeping its own.
  const mixedSmall = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
    get(basev), get(dev), op.i32x4_sub, set(kv),
    get(kv), splat4(1), op.i32x4_sub, set(sv), // k − 1 in [0, 11] where k > 0
    rightShift(4),
    zero, get(kv), op.i32x4_sub, set(sv), // −k in [0, 3] where k ≤ 0
    get(pv), set(leftv),
    stepBy(leftv, sv, 1, op.i32x4_shl),
    stepBy(leftv, sv, 0, op.i32x4_shl),
    get(tv), get(leftv), get(kv), zero, op.i32x4_gt_s, op.v128_bitselect, set(tv),
  ];
  // Every k in [−15, 0]: the left shift and its limit by 4 steps, saturated as `general` does.
  const leftAny = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
    get(dev), get(basev), op.i32x4_sub, set(sv), // −k in [0, 15]
    get(pv), set(leftv),
    splat4(I32_MAX), set(limv),
    [3, 2, 1, 0].map((b) => [stepBy(leftv, sv, b, op.i32x4_shl), stepBy(limv, sv, b, op.i32x4_shr_s)]),
    get(pv), get(limv), op.i32x4_gt_s, set(ovf),
    get(pv), get(limv), bytes16(255), op.v128_xor, op.i32x4_lt_s, set(bad),
    splat4(I32_MAX), splat4(I32_MIN), get(leftv), get(bad), op.v128_bitselect, get(ovf), op.v128_bitselect, set(tv),
    get(satv), get(ovf), get(bad), op.v128_or, op.i32x4_sub, set(satv),
  ];
  const rightAny = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
    get(basev), get(dev), op.i32x4_sub, splat4(1), op.i32x4_sub, set(sv), // k − 1 in [0, 31]
    rightShift(5),
  ];
  const general = (q: number): Code => [
    gemvTotals(lut, q), set(av), scaled(q),
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
  ];
  // Lane `lane`'s output through `shift`'s every case (the final shift outside [0, 31]).
  const emit = (lane: number): Code => [
    get(scratch), op.i32_load(64 + 4 * lane), set(acc),
    shiftRound(acc, fin, term, sat, kk, lim),
    get(ob), get(term), op.i32_store(4 * lane),
  ];
  const lanes = Array.from({ length: 16 }, (_, lane) => lane);
  const quarters = [0, 1, 2, 3];
  const spill = quarters.map((q) => [get(scratch), get(accs[q]), op.v128_store(64 + 16 * q)]);
  const reload = quarters.map((q) => [get(scratch), op.v128_load(64 + 16 * q), set(accs[q])]);
  // Whether every lane of the group's bytes `x` lies in [0, 2^bits) (no bit above them set).
  const allBelow = (x: Code, bits: number): Code => [x, bytes16(256 - (1 << bits)), op.v128_and, op.v128_any_true, op.i32_eqz];
  // The four-lane kinds of group (see the function's comment), each quarter's term then added by `add`.
  const ladder = (add: (q: number) => Code): Code => {
    const each = (path: (q: number) => Code) => quarters.map((q) => [path(q), add(q)]);
    return [
      get(scv), op.i32(4), op.i8x16_shr_u, set(deb),
      // de − base in [0, 3] everywhere, or base − 1 − de in [0, 7] everywhere (bytes, mod 256).
      allBelow([get(deb), get(base8), op.i8x16_sub], 2),
      op.if_(each(leftSmall), [
        allBelow([get(baseLess8), get(deb), op.i8x16_sub], 3),
        op.if_(each(rightSmall), [
          allBelow([get(baseLess8), get(deb), op.i8x16_sub], 5),
          op.if_(each(rightAny), [
            allBelow([get(basePlus3), get(deb), op.i8x16_sub], 4),
            op.if_(each(mixedSmall), [
              allBelow([get(deb), get(base8), op.i8x16_sub], 4),
              op.if_(each(leftAny), each(general)),
            ]),
          ]),
        ]),
      ]),
    ];
  };
  // The exact group step: the four-lane kinds saturating as they add, or row by row for other bases.
  const exactStep: Code = [
    get(fast),
    op.if_([ladder(accumulate)], [
      quarters.map((q) => [get(scratch), gemvTotals(lut, q), op.v128_store(16 * q)]),
      spill,
      lanes.map(addGroup),
      reload,
    ]),
  ];
  // The lean group step (the function's comment); other groups take the ladder, adding as it does.
  const leanStep: Code = [
    leanPlan(lean, scv, base),
    get(lean.ok),
    op.if_([leanKinds(lean, (kind) => quarters.map((q) => [leanQuarter(lean, q, kind), wrapAdd(q, lean.pv)]))], [
      ladder(wrapAdd),
    ]),
    largest,
  ];
  // The groups of this block and input, each group's sums by look-up, then `step`.
  const groupLoop = (step: Code): Code => [
    accs.map((x) => [zero, set(x)]),
    get(pl), set(lut.t),
    get(blk), set(lut.k),
    get(sblk), set(sp),
    op.i32(0), set(g),
    op.block([op.loop([
      get(g), get(groups), op.i32_ge_s, op.br_if(1),
      lutZero(lut),
      gemvPairs(lut, hi8, 16, relaxed, packed, lean.low4),
      get(sp), op.v128_load(), set(scv),
      step,
      inc(sp, 16),
      inc(g, 1),
      op.br(0),
    ])]),
  ];
  const block = [
    // Lean first where the base allows; any |acc| that reached 2^30 may hide an overflow: redo exactly.
    get(fast), op.i32_eqz, set(redo),
    get(fast),
    op.if_([
      zero, set(mx),
      get(satv), set(satSave),
      groupLoop(leanStep),
      get(mx), op.i32(30), op.i32x4_shr_u, op.v128_any_true, set(redo),
      get(redo), op.if_([get(satSave), set(satv)]),
    ]),
    get(redo), op.if_([groupLoop(exactStep)]),
    // The final shift by `fin`: four lanes at a time for fin in [0, 31], else row by row.
    get(fin), op.i32(0), op.i32_ge_s, get(fin), op.i32(31), op.i32_le_s, op.i32_and,
    op.if_(
      quarters.map((q) => [
        get(ob),
        get(fin), op.i32_eqz,
        op.if_v128([get(accs[q])], [
          get(accs[q]), get(fin), op.i32(1), op.i32_sub, op.i32x4_shr_s, set(tv),
          get(tv), op.i32(1), op.i32x4_shr_s, get(tv), splat4(1), op.v128_and, op.i32x4_add,
        ]),
        op.v128_store(16 * q),
      ]),
      [spill, lanes.map(emit)],
    ),
  ];
  // This input's base (from `bases` when it is not −1) and what the four-lane steps derive from it.
  const inputBase = [
    get(bases), op.i32(0), op.i32_ge_s,
    op.if_([get(bp), op.i32_load(), set(base), inc(bp, 4)]),
    // Four-lane steps need every k = base − de (de in 0..15) in [−30, 31]: base in [−15, 31].
    get(base), op.i32(-15), op.i32_ge_s, get(base), op.i32(31), op.i32_le_s, op.i32_and, set(fast),
    get(base), op.i32x4_splat, set(basev),
    get(base), op.i8x16_splat, set(base8),
    get(base), op.i32(1), op.i32_sub, op.i8x16_splat, set(baseLess8),
    get(base), op.i32(3), op.i32_add, op.i8x16_splat, set(basePlus3),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [I32], l.types, [
    op.i32(0), set(sat),
    zero, set(satv),
    leanSetup(lean),
    op.i32(0), set(r),
    get(codes), set(blk),
    get(scales), set(sblk),
    get(out), set(oblk),
    op.block([op.loop([
      get(r), get(rows), op.i32_ge_s, op.br_if(1),
      // Each input in turn over this block: its codes and scales are in cache after the first.
      op.i32(0), set(bi),
      get(planes), set(pl),
      get(oblk), set(ob),
      get(bases), set(bp),
      op.block([op.loop([
        get(bi), get(count), op.i32_ge_s, op.br_if(1),
        inputBase,
        block,
        get(pl), get(planeStride), op.i32_add, set(pl),
        get(ob), get(outStride), op.i32_add, set(ob),
        inc(bi, 1),
        op.br(0),
      ])]),
      get(blk), get(groups), op.i32(8), op.i32_shl, op.i32_add, set(blk),
      get(sblk), get(groups), op.i32(4), op.i32_shl, op.i32_add, set(sblk),
      inc(oblk, 64),
      inc(r, 16),
      op.br(0),
    ])]),
    // Saturations: the row-by-row count plus the four-lane counts.
    get(sat),
    [0, 1, 2, 3].map((q) => [get(satv), op.i32x4_extract_lane(q), op.i32_add]),
  ]);
}

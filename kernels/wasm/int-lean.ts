// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The lean group step of `gemv_lut` (kernels/wasm/int-gemv.ts): a group's term per row,
 * `shift((16 + m) · a, k)` with k = base − de (kernels/int/gemv.ts, steps 2 and 3), four rows at a time,
 * with the shift's amount a scalar for the whole group instead of one per lane.
 *
 * Why: the 16 rows of a block rarely differ much in their groups' exponents de (at Qwen3-0.6B's shape
 * every block's 16 de lie within 1 of each other, bar a few within 2). So the group takes demax, the
 * largest de of its rows, and s = base − demax, the least k; each row's k is s + d with
 * d = demax − de ≥ 0 small. With d ≤ 1 every row's term is round(Q / 2^(s + 1)) for Q = p · 2^(1 − d)
 * (p = (16 + m) · a), and Q is p doubled where d = 0, by one mask and one add; then
 * - s ≥ 0 (the right shifts): (Q + 2^s) ≫ (s + 1), one shift by a scalar;
 * - s in [−3, −1] (every k ≤ 0): Q · 2^(−s − 1), exact: |Q| < 2^29, so nothing wraps.
 * The scale (16 + m) is four masked doublings of a (a, 2a, 4a, 8a where m has that bit, plus 16a), the
 * masks read by one table look-up each at the rows' m. A group whose d reach 2 or 3 (rare) shifts by
 * d lane by lane first: (((p ≪ c) ≫ d) + B) ≫ R, c, R, B scalars (`leanPlan`). Other groups (d above 3,
 * or s outside [−3, 30]) take `gemv_lut`'s other steps.
 *
 * Under JavaScriptCore a shift of a vector costs about four instructions even by a constant (the count
 * goes through a general register into a vector one), under V8 one; additions cost one under both, so
 * the step doubles where it can and shifts by a scalar at most once per four rows, besides the two
 * shifts that rebuild a from its digit sums.
 *
 * Opcodes: only those `LUT_OPCODES` classifies (kernels/wasm/lut.ts); tests/kernels/audit.test.ts.
 * @module
 */
import { type Code, op } from "./asm.ts";
import type { LutLocals } from "./lut.ts";
import { bytes16, gemvTotals, get, type Locals, set } from "./int-ops.ts";

/** Locals of the lean step, numbered by `leanLocals`. */
export interface LeanLocals {
  lut: LutLocals;
  relaxed: boolean;
  /** i32: whether the group is lean; its spread (0, 1, 2: every d is 0, at most 1, at most 3); s; c; R. */
  ok: number;
  spread: number;
  s: number;
  c: number;
  r: number;
  /** v128: the largest scale byte in every lane, the rows' m, d · 16, the rows where d = 0, B splat. */
  top: number;
  mb: number;
  d16: number;
  dz: number;
  bv: number;
  /** v128: a quarter's a (then its doublings), its term, its rows' bytes spread to int32 lanes. */
  av: number;
  pv: number;
  rq: number;
  /**
   * v128, set once per call (`leanSetup`; V8 rebuilds a v128 constant at every use): the tables
   * `BIT_TABLES`, the swizzles `SPREADS`, and bytes of 15, 0xf0, 0xe0 and 0xc0.
   */
  bits: number[];
  spreads: number[];
  low4: number;
  high4: number;
  above1: number;
  above3: number;
}

/** For b = 0..3: the 16-byte table of i → all ones where bit b of i is set, else 0 (a mask per lane). */
const BIT_TABLES = [0, 1, 2, 3].map((b) => Uint8Array.from({ length: 16 }, (_, i) => ((i >> b) & 1 ? 255 : 0)));

/** Rotations of 16 bytes by 8, 4, 2, 1: `i8x16.max_u` over each in turn leaves the maximum in every lane. */
const ROTATIONS = [8, 4, 2, 1].map((k) => Array.from({ length: 16 }, (_, i) => (i + k) & 15));

/** For quarter q, the swizzle that copies byte 4q + j into the four bytes of int32 lane j. */
const SPREADS = [0, 1, 2, 3].map((q) => Uint8Array.from({ length: 16 }, (_, i) => 4 * q + (i >> 2)));

/** The kinds of lean quarter: left or right shifts with every d = 0 or d ≤ 1, and d ≤ 3 (`leanPlan`). */
export type LeanKind = "left0" | "left1" | "right0" | "right1" | "spread3";

/** Numbers the lean step's locals after those `l` has given. */
export function leanLocals(l: Locals, lut: LutLocals, relaxed: boolean): LeanLocals {
  return {
    lut, relaxed,
    ok: l.i32(), spread: l.i32(), s: l.i32(), c: l.i32(), r: l.i32(),
    top: l.v128(), mb: l.v128(), d16: l.v128(), dz: l.v128(), bv: l.v128(),
    av: l.v128(), pv: l.v128(), rq: l.v128(),
    bits: [l.v128(), l.v128(), l.v128(), l.v128()],
    spreads: [l.v128(), l.v128(), l.v128(), l.v128()],
    low4: l.v128(), high4: l.v128(), above1: l.v128(), above3: l.v128(),
  };
}

/** The step's constants in locals, once per call (V8 rebuilds a v128 constant at every use). */
export function leanSetup(x: LeanLocals): Code {
  return [
    x.bits.map((b, i) => [op.v128_const(BIT_TABLES[i]), set(b)]),
    x.spreads.map((v, q) => [op.v128_const(SPREADS[q]), set(v)]),
    [[x.low4, 0x0f], [x.high4, 0xf0], [x.above1, 0xe0], [x.above3, 0xc0]].map(([v, byte]) => [bytes16(byte), set(v)]),
  ];
}

/**
 * The plan of the group whose 16 scale bytes are in `scv`, shift base `base`: s, the rows' m and d,
 * the spread and whether the group is lean, and the scalars of its kind (`leanKinds` picks it): for
 * the left kinds c = −s (d all 0) or −s − 1; for the right kinds R = s + 1, B = 2^s; for spread 2
 * (d ≤ 3), `(((p ≪ c) ≫ d) + B) ≫ R` with
 * - s ≥ 1: c = 0, R = s, B = 2^(s − 1): floored by 2^d, then rounded by 2^s, as one shift by s + d
 *   rounds (and 0 from s + d = 32 on, as |p| < 2^28);
 * - s in [−2, 0]: c = 1 − s, R = B = 1: rows with k ≤ 0 get p · 2^(1 − k), even, halved exactly; the
 *   others are floored by 2^(d − c) and rounded by 2 (|p ≪ 3| < 2^31);
 * - s = −3 (every k ≤ 0): c = 3, R = B = 0, p · 2^(3 − d) exactly.
 */
export function leanPlan(x: LeanLocals, scv: number, base: number): Code {
  const anyAbove = (mask: number): Code => [get(x.d16), get(mask), op.v128_and, op.v128_any_true];
  const tops = (v: number): Code => [get(v), get(x.high4), op.v128_and];
  const ifAtLeast = (k: number, then: Code, otherwise: Code): Code => [then, otherwise, get(x.s), op.i32(k), op.i32_ge_s, op.select];
  return [
    get(scv), set(x.top),
    ROTATIONS.map((lanes) => [get(x.top), get(x.top), get(x.top), op.i8x16_shuffle(lanes), op.i8x16_max_u, set(x.top)]),
    get(base), get(x.top), op.i8x16_extract_lane_u(0), op.i32(4), op.i32_shr_u, op.i32_sub, set(x.s),
    tops(x.top), tops(scv), op.i8x16_sub, set(x.d16), // (demax − de) · 16: no borrow, demax ≥ de
    get(scv), get(x.low4), op.v128_and, set(x.mb),
    get(x.d16), op.v128_any_true, anyAbove(x.above1), op.i32_add, anyAbove(x.above3), op.i32_add, set(x.spread),
    get(x.spread), op.i32(3), op.i32_lt_s,
    get(x.s), op.i32(3), op.i32_add, op.i32(33), op.i32_gt_u, op.i32_eqz, op.i32_and, set(x.ok), // s in [−3, 30]
    get(x.spread), op.i32(2), op.i32_lt_s,
    op.if_([
      op.i32(0), get(x.s), op.i32_sub, get(x.spread), op.i32_sub, set(x.c),
      get(x.s), op.i32(1), op.i32_add, set(x.r),
      op.i32(1), get(x.s), op.i32_shl, op.i32x4_splat, set(x.bv),
      get(x.d16), op.v128_const(new Uint8Array(16)), op.i8x16_eq, set(x.dz),
    ], [
      ifAtLeast(1, [get(x.s)], [get(x.s), op.i32(-2), op.i32_ge_s]), set(x.r),
      ifAtLeast(1, [op.i32(0)], ifAtLeast(-2, [op.i32(1), get(x.s), op.i32_sub], [op.i32(3)])), set(x.c),
      op.i32(1), get(x.r), op.i32_shl, op.i32(1), op.i32_shr_u, op.i32x4_splat, set(x.bv),
      get(x.d16), op.i32(4), op.i8x16_shr_u, set(x.dz), // d itself, the lane shift's table index
    ]),
  ];
}

/** The kind of a lean group (`leanPlan` has made `ok` true), as code that runs `body(kind)`. */
export function leanKinds(x: LeanLocals, body: (kind: LeanKind) => Code): Code {
  const bySign = (left: LeanKind, right: LeanKind): Code =>
    [get(x.s), op.i32(0), op.i32_lt_s, op.if_([body(left)], [body(right)])];
  return [
    get(x.spread), op.i32_eqz,
    op.if_([bySign("left0", "right0")], [
      get(x.spread), op.i32(1), op.i32_sub, op.i32_eqz,
      op.if_([bySign("left1", "right1")], [body("spread3")]),
    ]),
  ];
}

/**
 * `x.pv` = (16 + m) · a for quarter q's rows, a in `x.av` (left doubled three times): the doublings
 * a, 2a, 4a, 8a, each kept where its bit of the row's m is set (a table look-up at m), plus 16a.
 */
function timesScale(x: LeanLocals, q: number): Code {
  const swizzle = x.relaxed ? op.i8x16_relaxed_swizzle : op.i8x16_swizzle;
  const masked = (b: number): Code => [get(x.av), get(x.bits[b]), get(x.rq), swizzle, op.v128_and];
  const double = [get(x.av), get(x.av), op.i32x4_add, set(x.av)];
  return [
    get(x.mb), get(x.spreads[q]), swizzle, set(x.rq),
    masked(0), set(x.pv),
    [1, 2, 3].map((b) => [double, get(x.pv), masked(b), op.i32x4_add, set(x.pv)]),
    get(x.pv), get(x.av), get(x.av), op.i32x4_add, op.i32x4_add, set(x.pv),
  ];
}

/** `x.pv` doubled in the rows whose d is 0 (p · 2^(1 − d) for d ≤ 1). */
function doubleWhereLargest(x: LeanLocals, q: number): Code {
  const swizzle = x.relaxed ? op.i8x16_relaxed_swizzle : op.i8x16_swizzle;
  return [get(x.pv), get(x.pv), get(x.dz), get(x.spreads[q]), swizzle, op.v128_and, op.i32x4_add, set(x.pv)];
}

/** `x.pv` shifted right by d lane by lane, d ≤ 3 in `x.dz` (two conditional steps, masks at d's bits). */
function shiftByD(x: LeanLocals, q: number): Code {
  const swizzle = x.relaxed ? op.i8x16_relaxed_swizzle : op.i8x16_swizzle;
  const step = (b: number): Code => [
    get(x.pv), op.i32(1 << b), op.i32x4_shr_s, get(x.pv), get(x.bits[b]), get(x.rq), swizzle, op.v128_bitselect, set(x.pv),
  ];
  return [get(x.dz), get(x.spreads[q]), swizzle, set(x.rq), step(0), step(1)];
}

/** One quarter's term of a lean group of kind `kind`, left in `x.pv` (see the module comment). */
export function leanQuarter(x: LeanLocals, q: number, kind: LeanKind): Code {
  const sums = [gemvTotals(x.lut, q), set(x.av)];
  const shiftLeft = (by: number): Code => [get(x.av), get(by), op.i32x4_shl, set(x.av)];
  const roundRight: Code = [get(x.pv), get(x.bv), op.i32x4_add, get(x.r), op.i32x4_shr_s, set(x.pv)];
  switch (kind) {
    case "left0":
      return [sums, shiftLeft(x.c), timesScale(x, q)];
    case "left1":
      return [sums, shiftLeft(x.c), timesScale(x, q), doubleWhereLargest(x, q)];
    case "right0":
      return [sums, get(x.av), get(x.av), op.i32x4_add, set(x.av), timesScale(x, q), roundRight];
    case "right1":
      return [sums, timesScale(x, q), doubleWhereLargest(x, q), roundRight];
    case "spread3":
      return [sums, timesScale(x, q), get(x.pv), get(x.c), op.i32x4_shl, set(x.pv), shiftByD(x, q), roundRight];
  }
}

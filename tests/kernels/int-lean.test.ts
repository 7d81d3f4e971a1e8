// `gemv_lut`'s lean group step (kernels/wasm/int-lean.ts) gives exactly the integers of the TypeScript
// contract (kernels/int/gemv.ts `gemv`) and counts the same saturations as a plain count of the contract's
// steps: on 16-row blocks whose exponents de spread by 0, 1, 2–3 and more, at every least shift s from −6
// to 34 (each kind of lean group, its bounds, and the groups just outside them), with every m, codes all
// −8 or all 7 or random, inputs ±32767, alternating or random, in both swizzle sets; and on accumulators
// that pass 2^30 (the block is then done again the exact way) with and without saturating.
import { expect, test } from "bun:test";
import { ACC_EXP, activationTables, gemv, type LutMatrix, prepareMatrix } from "../../kernels/int/gemv.ts";
import { gemvLut, inputPlanes } from "../../kernels/int/gemv-lut.ts";
import { I32_MAX, I32_MIN, shift } from "../../kernels/int/round.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(47);

type Codes = "random" | "low" | "high";
type Inputs = "random" | "max" | "min" | "alternate";

/**
 * Scale bytes for `rows` × `groups` whose 16-row blocks share, per group, a largest de `top` (drawn in
 * [0, 15]) and spread below it by at most `spread` (one row of each block at exactly `top`); m random,
 * or all `m` when given.
 */
function scales(rows: number, groups: number, spread: number, m = -1): { bytes: Uint8Array; tops: number[] } {
  const bytes = new Uint8Array(rows * groups);
  const tops: number[] = [];
  for (let r0 = 0; r0 < rows; r0 += 16) {
    for (let g = 0; g < groups; g++) {
      const top = rng.int(16);
      tops.push(top);
      for (let r = r0; r < Math.min(r0 + 16, rows); r++) {
        const de = r === r0 ? top : Math.max(0, top - rng.int(spread + 1));
        bytes[r * groups + g] = (de << 4) | (m >= 0 ? m : rng.int(16));
      }
    }
  }
  return { bytes, tops };
}

function matrix(
  rows: number,
  cols: number,
  codes: Codes,
  scaleBytes: Uint8Array,
  expBase: number,
): LutMatrix {
  const fill = codes === "low" ? 0x00 : codes === "high" ? 0xff : -1;
  return {
    name: `lean ${rows}x${cols}`,
    rows,
    cols,
    expBase,
    nibbles: Uint8Array.from({ length: (rows * cols) / 2 }, () => (fill >= 0 ? fill : rng.int(256))),
    scales: scaleBytes,
  };
}

function input(cols: number, kind: Inputs): Int32Array {
  return Int32Array.from(
    { length: cols },
    (_, i) =>
      kind === "max"
        ? 32767
        : kind === "min"
        ? -32767
        : kind === "alternate"
        ? (i & 1 ? 32767 : -32767)
        : rng.int(65535) - 32767,
  );
}

/**
 * The saturations `gemv` makes on `mat` and `x`, counted step by step as its module comment defines
 * them (a group's shift that saturates to the left, an accumulate that saturates, the final shift that
 * saturates): plain arithmetic, independent of both kernels.
 */
function contractSaturations(mat: LutMatrix, x: Int32Array, xExp: number, outExp: number): number {
  const groups = mat.cols >> 5;
  const base = ACC_EXP + 4 - mat.expBase - xExp;
  const clamp = (v: number) => (v > I32_MAX ? I32_MAX : v < I32_MIN ? I32_MIN : v);
  let sat = 0;
  for (let r = 0; r < mat.rows; r++) {
    let acc = 0;
    for (let g = 0; g < groups; g++) {
      let a = 0;
      for (let c = 32 * g; c < 32 * g + 32; c++) {
        const byte = mat.nibbles[(r * mat.cols + c) >> 1];
        a += (((c & 1) === 0 ? byte & 15 : byte >> 4) - 8) * x[c];
      }
      const scale = mat.scales[r * groups + g];
      const p = (16 + (scale & 15)) * a;
      const k = base - (scale >> 4);
      let t = k > 0 ? shift(p, k) : p * 2 ** -k;
      if (t !== clamp(t)) sat++, t = clamp(t);
      const sum = acc + t;
      if (sum !== clamp(sum)) sat++;
      acc = clamp(sum);
    }
    const fin = outExp - ACC_EXP;
    if (fin < 0 && acc !== 0 && acc * 2 ** -fin !== clamp(acc * 2 ** -fin)) sat++;
  }
  return sat;
}

/**
 * A module holding `mat` (assembling one is most of a check's time, so each matrix gets one); `relaxed`
 * false assembles the plain-swizzle set.
 */
function moduleFor(mat: LutMatrix, relaxed = true) {
  const prepared = prepareMatrix(mat);
  return { mat, prepared, made: createLutSums([prepared], { relaxed })! };
}

/** `gemv_lut` on the module's matrix and `x` against `gemv`: the outputs, and its saturations against the count above. */
function check(mod: ReturnType<typeof moduleFor>, x: Int32Array, xExp: number, outExp: number): number {
  const { mat, prepared, made } = mod;
  const tab = new Int32Array(mat.cols << 4);
  activationTables(x, 0, mat.cols, tab);
  const want = new Int32Array(mat.rows);
  gemv(want, 0, prepared, tab, xExp, outExp);
  inputPlanes(x, -1, 0, mat.cols, made.lut);
  const got = new Int32Array(mat.rows);
  gemvLut(got, -1, 0, prepared, made.lut, made.at[0], made.scalesAt[0], xExp, outExp);
  expect(Array.from(got)).toEqual(Array.from(want));
  const lut = made.lut;
  const sat = lut.gemv_lut(
    lut.planesAt,
    0,
    1,
    made.at[0],
    made.scalesAt[0],
    mat.rows,
    mat.cols >> 5,
    ACC_EXP + 4 - mat.expBase - xExp,
    -1,
    outExp - ACC_EXP,
    lut.outAt,
    0,
    lut.scratchAt,
  );
  expect(sat).toBe(contractSaturations(mat, x, xExp, outExp));
  return sat;
}

test("the contract's saturation count is the reference it claims: zero and many", () => {
  const { bytes } = scales(16, 2, 0, 15);
  const quiet = matrix(16, 64, "random", bytes, -17);
  expect(contractSaturations(quiet, input(64, "random"), -15, -16)).toBe(0);
  const loud = matrix(16, 64, "high", new Uint8Array(32).fill(0xff), 12);
  // 31 · 32 · 7 · 32767 shifted left by de − base = 15 − (−20 − 12 + 17) = 30: each group's shift and,
  // from the second group on, each accumulate saturate.
  expect(contractSaturations(loud, input(64, "max"), -17, -24)).toBe(16 * 3);
});

test("lean groups of every kind and their bounds: s from −6 to 34, spreads 0, 1, 2, 3 and wider", () => {
  let compared = 0;
  for (const spread of [0, 1, 2, 3, 4, 15]) {
    for (const codes of ["random", "low", "high"] as Codes[]) {
      // 16 groups whose blocks' largest de lie anywhere in [0, 15]: each base puts their least k at
      // base − top, so the bases below run every group's s over [−6, 34] and past it.
      const rows = [16, 40, 7][rng.int(3)], cols = 512;
      const mod = moduleFor(matrix(rows, cols, codes, scales(rows, cols >> 5, spread).bytes, -17));
      for (let base = -6; base <= 34 + 15; base++) {
        const xExp = ACC_EXP + 4 - mod.mat.expBase - base;
        const kind = (["random", "max", "min", "alternate"] as Inputs[])[rng.int(4)];
        for (const outExp of [-16, -40]) check(mod, input(cols, kind), xExp, outExp);
        compared++;
      }
    }
  }
  expect(compared).toBe(6 * 3 * 56);
});

test("lean groups at one largest de: every m in every row, each kind exactly at its bounds, both swizzle sets", () => {
  // Row r of group g has m = (r + 5g) mod 16. The lean path runs for bases up to 31, so s = base − top
  // reaches 28 … 31 only at tops 3 … 0: those groups are one matrix, the tops of 15 another.
  for (
    const [spread, relaxed] of [[0, true], [1, true], [3, true], [0, false], [1, false], [3, false]] as const
  ) {
    for (const tops of [[15, 15], [3, 2, 1, 0]]) {
      const rows = 48, groups = tops.length, cols = 32 * groups;
      const bytes = new Uint8Array(rows * groups);
      for (let r = 0; r < rows; r++) {
        for (let g = 0; g < groups; g++) {
          const de = r % 16 === 0 ? tops[g] : Math.max(0, tops[g] - rng.int(spread + 1));
          bytes[r * groups + g] = (de << 4) | ((r + 5 * g) & 15);
        }
      }
      const mod = moduleFor(matrix(rows, cols, "random", bytes, -17), relaxed);
      const bases = tops[0] === 15 ? [11, 12, 13, 14, 15, 16, 17] : [29, 30, 31]; // s = −4 … 2, and 26 … 31
      for (const base of bases) {
        const xExp = ACC_EXP + 4 - mod.mat.expBase - base;
        for (const kind of ["random", "max", "min", "alternate"] as Inputs[]) {
          check(mod, input(cols, kind), xExp, -16);
        }
      }
    }
  }
});

test("accumulators past 2^30: the block is redone the exact way, saturating or not", () => {
  // Codes all 7, every de 15 and base 12 (k = −3), inputs ±32767: each group's term is
  // 7 · 32 · 32767 · (16 + m) · 8, 0.94 · 2^30 at m = 0 and 1.7 · 2^30 at m = 15. Two groups of m = 0
  // pass 2^30 without saturating; eight of m = 15 saturate.
  const quiet = moduleFor(matrix(20, 64, "high", new Uint8Array(40).fill(0xf0), -17));
  const loud = moduleFor(matrix(20, 256, "high", new Uint8Array(160).fill(0xff), -17));
  const xExp = ACC_EXP + 4 - -17 - 12;
  for (const kind of ["max", "min"] as Inputs[]) {
    expect(check(quiet, input(64, kind), xExp, -24)).toBe(0);
    expect(check(loud, input(256, kind), xExp, -24)).toBeGreaterThan(20);
  }
  // Random scales near the same shifts, on random and fixed codes: some blocks pass 2^30.
  for (let trial = 0; trial < 24; trial++) {
    const rows = 16 + rng.int(20), cols = 256;
    const mod = moduleFor(
      matrix(rows, cols, trial % 3 === 0 ? "random" : "high", scales(rows, 8, rng.int(2)).bytes, -17),
    );
    check(
      mod,
      input(cols, trial % 4 === 0 ? "alternate" : "max"),
      ACC_EXP + 4 - -17 - (12 + rng.int(4)),
      -24,
    );
  }
});

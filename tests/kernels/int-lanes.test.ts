// The lanes projection (kernels/wasm/int-lanes.ts, `gemv_lanesP`) gives exactly the integers of one
// `gemv_lut` call per input (kernels/int/gemv-lut.ts), saturation counts included, and of the
// TypeScript contract kernels/int/gemv.ts `gemv`: at P = 1, 4, 8, 16, 32 inputs, ragged counts and row
// tails, codes all −8 or all 7, random scale bytes, inputs ±32767, inputs at different exponents (each
// its own base), extreme bases and output shifts.
import { expect, test } from "bun:test";
import { ACC_EXP, activationTables, gemv, type LutMatrix, prepareMatrix } from "../../kernels/int/gemv.ts";
import { gemvLanes } from "../../kernels/int/gemv-lut.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import { LANE_COUNTS, scaleShifts } from "../../kernels/wasm/int-lanes.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(33);

type Codes = "random" | "low" | "high";
type Inputs = "random" | "max" | "min" | "alternate";

function randomMatrix(rows: number, cols: number, codes: Codes, expBase: number, scaleTop = 256): LutMatrix {
  const fill = codes === "low" ? 0x00 : codes === "high" ? 0xff : -1;
  return {
    name: `m${rows}x${cols}`,
    rows,
    cols,
    expBase,
    nibbles: Uint8Array.from({ length: (rows * cols) / 2 }, () => (fill >= 0 ? fill : rng.int(256))),
    scales: Uint8Array.from({ length: (rows * cols) / 32 }, () => rng.int(scaleTop)),
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

/** The module for `mat` with room for 32 inputs and outputs; where they lie. */
function moduleFor(mat: LutMatrix) {
  const prepared = prepareMatrix(mat);
  const cols = mat.cols, rowRoom = Math.ceil(mat.rows / 16) * 16;
  const made = createLutSums([prepared], {
    vectorInts: 32 * (cols + rowRoom),
    lanes: { lanes: 32, rows: mat.rows },
  })!;
  const xsAt = made.lut.vectorsAt, outAt = xsAt + 32 * cols * 4;
  return { prepared, made, xsAt, outAt, xStride: cols * 4, outStride: rowRoom * 4 };
}

interface Case {
  mat: LutMatrix;
  xs: Int32Array[];
  xExps: number[];
  outExp: number;
  lanes: number;
}

/** Runs one case both ways; returns [per-input gemv_lut rows, saturations], the lanes' and gemv's rows. */
function run(c: Case, mod: ReturnType<typeof moduleFor>) {
  const { mat, xs, xExps, outExp, lanes } = c;
  const { prepared, made, xsAt, outAt, xStride, outStride } = mod;
  const lut = made.lut;
  const groups = mat.cols >> 5;
  const baseOf = ACC_EXP + 4 - mat.expBase;
  const fin = outExp - ACC_EXP;
  // One input at a time through gemv_lut, and the TypeScript contract.
  const want: number[][] = [];
  const contract: number[][] = [];
  let wantSat = 0;
  for (let p = 0; p < xs.length; p++) {
    lut.mem32.set(xs[p], lut.inIndex);
    lut.planes_offset(lut.inAt, mat.cols, lut.planesAt);
    wantSat += lut.gemv_lut(
      lut.planesAt,
      0,
      1,
      made.at[0],
      made.scalesAt[0],
      mat.rows,
      groups,
      baseOf - xExps[p],
      -1,
      fin,
      lut.outAt,
      0,
      lut.scratchAt,
    );
    want.push(Array.from(lut.mem32.subarray(lut.outIndex, lut.outIndex + mat.rows)));
    const tab = new Int32Array(mat.cols << 4);
    activationTables(xs[p], 0, mat.cols, tab);
    const o = new Int32Array(mat.rows);
    gemv(o, 0, prepared, tab, xExps[p], outExp);
    contract.push(Array.from(o));
  }
  for (let p = 0; p < xs.length; p++) lut.mem32.set(xs[p], (xsAt + p * xStride) >> 2);
  const same = xExps.every((e) => e === xExps[0]);
  let bases = -1;
  if (!same) {
    for (let p = 0; p < xs.length; p++) lut.mem32[lut.basesIndex + p] = baseOf - xExps[p];
    bases = lut.basesAt;
  }
  lut.mem32.fill(0x5a5a5a5a, outAt >> 2, (outAt + 32 * outStride) >> 2);
  const sat = gemvLanes(
    lut,
    lanes,
    xsAt,
    xStride,
    xs.length,
    made.at[0],
    made.scalesAt[0],
    mat.rows,
    groups,
    baseOf - xExps[0],
    bases,
    fin,
    outAt,
    outStride,
    lut.lanesAt,
  );
  const got: number[][] = [];
  for (let p = 0; p < xs.length; p++) {
    const at = (outAt + p * outStride) >> 2;
    got.push(Array.from(lut.mem32.subarray(at, at + mat.rows)));
  }
  // Past the last input nothing is written.
  const after = (outAt + xs.length * outStride) >> 2;
  if (xs.length < 32) expect(lut.mem32[after]).toBe(0x5a5a5a5a);
  return { want, wantSat, got, sat, contract };
}

const lanesFor = (count: number) => LANE_COUNTS.find((p) => p >= count)!;

test("every scale 16 + m is three shifts up and one down", () => {
  scaleShifts().forEach((w, m) => {
    const e = [w & 255, (w >> 8) & 255, (w >> 16) & 255, w >>> 24];
    expect((1 << e[0]) + (1 << e[1]) + (1 << e[2]) - (1 << e[3])).toBe(16 + m);
  });
});

test("gemv_lanes equals gemv_lut per input at P = 1, 4, 8, 16, 32 and ragged counts", () => {
  const mat = randomMatrix(45, 96, "random", -8, 64);
  const mod = moduleFor(mat);
  let compared = 0;
  for (const count of [1, 3, 4, 5, 8, 13, 16, 20, 32]) {
    for (const lanes of LANE_COUNTS.filter((p) => p >= count)) {
      const xs = Array.from({ length: count }, () => input(mat.cols, "random"));
      const { want, wantSat, got, sat, contract } = run({
        mat,
        xs,
        xExps: xs.map(() => -15),
        outExp: -16,
        lanes,
      }, mod);
      expect(got).toEqual(want);
      expect(got).toEqual(contract);
      expect(sat).toBe(wantSat);
      compared += count;
    }
  }
  expect(compared).toBeGreaterThan(100);
});

test("gemv_lanes equals gemv_lut on adversarial codes, scales, inputs, bases and output shifts", () => {
  let saturated = 0;
  let cases = 0;
  for (const codes of ["random", "low", "high"] as Codes[]) {
    const mat = randomMatrix(37, 64, codes, rng.int(40) - 20);
    const mod = moduleFor(mat);
    for (const kinds of [["max"], ["min"], ["alternate"], ["random", "max", "min"]] as Inputs[][]) {
      for (const spread of [0, 2, 9, 40]) {
        for (const outExp of [-40, -24, -16, 10, 8]) {
          const count = [1, 4, 7, 16, 29][rng.int(5)];
          const xs = Array.from({ length: count }, (_, i) => input(mat.cols, kinds[i % kinds.length]));
          const start = rng.int(44) - 30;
          const xExps = xs.map(() => start + (spread === 0 ? 0 : rng.int(spread + 1)));
          const { want, wantSat, got, sat, contract } = run({
            mat,
            xs,
            xExps,
            outExp,
            lanes: lanesFor(count),
          }, mod);
          expect(got).toEqual(want);
          expect(got).toEqual(contract);
          expect(sat).toBe(wantSat);
          saturated += sat;
          cases++;
        }
      }
    }
  }
  expect(cases).toBe(3 * 4 * 4 * 5);
  expect(saturated).toBeGreaterThan(0);
});

// The WebAssembly SIMD projection (kernels/int/gemv-lut.ts on kernels/wasm/int-lut.ts) gives exactly
// the integers of the TypeScript contract (kernels/int/gemv.ts): on every lut4 matrix of the default
// model with random and extreme inputs, on random matrices whose rows saturate, and through the engine.
import { expect, test } from "bun:test";
import { smallLut4 } from "../helpers/lut4-fixture.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import { checked } from "../../kernels/int/check.ts";
import { activationTables, gemv, type LutMatrix, prepareMatrix } from "../../kernels/int/gemv.ts";
import { gemvLut, inputPlanes } from "../../kernels/int/gemv-lut.ts";
import { applyGain, gainTables, NORM_EXP, normPlan, rmsnorm } from "../../kernels/int/norm.ts";
import { quantizeBits, satAdd } from "../../kernels/int/round.ts";
import { ropeHead } from "../../kernels/int/rope.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import {
  attendGroup,
  type AttentionContext,
  attentionScratch,
  writeHeadTask,
} from "../../kernels/int/attention.ts";
import { prepareTable, silu } from "../../kernels/int/tables.ts";
import { makeTables } from "../../quantize/lut4-quantize.ts";
import { PRESETS } from "../../model/config.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { createRng } from "../../model/random.ts";
import { intEngineFromFile } from "../../engines/int/engine.ts";
import { buildIntModel } from "../../engines/int/model.ts";
import { lutMatrices } from "../../engines/int/simd.ts";

const rng = createRng(11);

// One prepared matrix and one module per matrix and swizzle set: building them per call (a module
// assembled and instantiated each time) was most of this file's time.
const preparedCache = new Map<LutMatrix, Map<boolean, { prepared: PreparedLut; made: LutSumsMade }>>();
function preparedFor(mat: LutMatrix, relaxed: boolean) {
  let byMode = preparedCache.get(mat);
  if (!byMode) preparedCache.set(mat, byMode = new Map());
  let entry = byMode.get(relaxed);
  if (!entry) {
    const prepared = prepareMatrix(mat);
    entry = { prepared, made: createLutSums([prepared], { relaxed })! };
    byMode.set(relaxed, entry);
  }
  return entry;
}
type PreparedLut = ReturnType<typeof prepareMatrix>;
type LutSumsMade = NonNullable<ReturnType<typeof createLutSums>>;

/** Both kernels on one input; returns [typescript, wasm] outputs. */
function both(
  mat: LutMatrix,
  x: Int32Array,
  xExp: number,
  outExp: number,
  relaxed = true,
): [number[], number[]] {
  const { prepared, made } = preparedFor(mat, relaxed);
  const tab = new Int32Array(mat.cols << 4);
  activationTables(x, 0, mat.cols, tab);
  const want = new Int32Array(mat.rows);
  gemv(want, 0, prepared, tab, xExp, outExp);
  inputPlanes(x, -1, 0, mat.cols, made.lut);
  const got = new Int32Array(mat.rows);
  gemvLut(got, -1, 0, prepared, made.lut, made.at[0], made.scalesAt[0], xExp, outExp);
  return [Array.from(want), Array.from(got)];
}

const inputs = (cols: number) => [
  Int32Array.from({ length: cols }, () => rng.int(65535) - 32767),
  new Int32Array(cols).fill(32767),
  new Int32Array(cols).fill(-32767),
  Int32Array.from({ length: cols }, (_, i) => (i & 1 ? 32767 : -32767)),
];

test("gemvLut equals gemv on every lut4 matrix of the small test model", async () => {
  const file = await readLut4(await smallLut4());
  const model = buildIntModel(file.weights);
  const mats = lutMatrices(model);
  expect(mats.length).toBe(file.weights.layers.length * 7 + 1);
  let compared = 0;
  for (const mat of mats) {
    for (const x of inputs(mat.cols)) {
      for (const [xExp, outExp] of [[-15, -16], [-10, -24], [0, -16]]) {
        const [want, got] = both(mat, x, xExp, outExp);
        expect(got).toEqual(want);
        compared += want.length;
      }
      // The plain-swizzle set, for runtimes without relaxed SIMD: the same integers.
      const [want, got] = both(mat, x, -15, -16, false);
      expect(got).toEqual(want);
    }
  }
  expect(compared).toBeGreaterThan(10000);
});

test("gemvLut equals gemv on random matrices, rows not a multiple of 16, saturating accumulators", () => {
  let saturated = 0;
  for (const [rows, cols, expBase] of [[1, 32, -8], [17, 64, -3], [40, 256, 4], [33, 128, 12]]) {
    const mat: LutMatrix = {
      name: `random ${rows}x${cols}`,
      rows,
      cols,
      expBase,
      nibbles: Uint8Array.from({ length: (rows * cols) / 2 }, () => rng.int(256)),
      scales: Uint8Array.from({ length: (rows * cols) / 32 }, () => rng.int(256)),
    };
    for (const x of inputs(cols)) {
      // Bases (ACC_EXP + 4 − expBase − xExp) inside and outside [−15, 31], where the four-lane step runs,
      // and final shifts of 0, inside [1, 31] and outside it.
      for (
        const [xExp, outExp] of [[-15, -16], [0, -24], [6, -30], [-20, 3], [-40, 20], [-15, -24], [-2, -16]]
      ) {
        const [want, got] = both(mat, x, xExp, outExp);
        expect(got).toEqual(want);
        saturated += want.filter((v) => v === 2147483647 || v === -2147483648).length;
      }
    }
  }
  expect(saturated).toBeGreaterThan(0); // the saturating path was exercised, and agreed
});

test("gemvLut equals gemv over random exponents: every shift case of every four-lane and row-by-row step", () => {
  const x = Int32Array.from({ length: 128 }, () => rng.int(65535) - 32767);
  for (let trial = 0; trial < 160; trial++) {
    // Half the trials draw every de from a window of four (so whole groups share the sign and size of
    // their shift, the cases with a shorter step), half from all sixteen.
    const narrow = trial % 2 === 0, d0 = rng.int(13);
    const mat: LutMatrix = {
      name: "random 40x128",
      rows: 40,
      cols: 128,
      expBase: -17,
      nibbles: Uint8Array.from({ length: 40 * 64 }, () => rng.int(256)),
      scales: Uint8Array.from(
        { length: 40 * 4 },
        () => ((narrow ? d0 + rng.int(4) : rng.int(16)) << 4) | rng.int(16),
      ),
    };
    const xExp = rng.int(80) - 50; // base −20 − expBase − xExp runs over [−43, 36]
    const outExp = rng.int(80) - 60; // final shift outExp + 24 over [−36, 43]
    const [want, got] = both(mat, x, xExp, outExp);
    expect(got).toEqual(want);
  }
});

test("gemvLut equals gemv when every group shifts right by 1 … 31: the five-step four-lane case", () => {
  const x = Int32Array.from({ length: 128 }, () => rng.int(65535) - 32767);
  for (let trial = 0; trial < 40; trial++) {
    const mat: LutMatrix = {
      name: "random 48x128, wide right shifts",
      rows: 48,
      cols: 128,
      expBase: -17,
      nibbles: Uint8Array.from({ length: 48 * 64 }, () => rng.int(256)),
      scales: Uint8Array.from({ length: 48 * 4 }, () => (rng.int(16) << 4) | rng.int(16)),
    };
    // base = −20 − expBase − xExp in [16, 31], so every k = base − de lies in [1, 31], spread over 16.
    const xExp = -19 - rng.int(16);
    const [want, got] = both(mat, x, xExp, rng.int(40) - 30);
    expect(got).toEqual(want);
  }
});

test("gemvLut equals gemv when groups shift both ways by −3 … 12: the mixed four-lane case", () => {
  const x = Int32Array.from({ length: 128 }, () => rng.int(65535) - 32767);
  for (let trial = 0; trial < 40; trial++) {
    // de in [d0, d0 + 6] and base within 3 of it: k = base − de of both signs, as a real model's are.
    const d0 = rng.int(9);
    const mat: LutMatrix = {
      name: "random 48x128, mixed shifts",
      rows: 48,
      cols: 128,
      expBase: -17,
      nibbles: Uint8Array.from({ length: 48 * 64 }, () => rng.int(256)),
      scales: Uint8Array.from({ length: 48 * 4 }, () => ((d0 + rng.int(7)) << 4) | rng.int(16)),
    };
    const base = d0 + rng.int(7); // k = base − de in [−6, 6]: mostly within the case, some beyond it
    const [want, got] = both(mat, x, -3 - base, rng.int(40) - 30);
    expect(got).toEqual(want);
  }
});

test("gemvLut equals gemv when every group shifts left by 0 … 15: saturating four-lane lefts", () => {
  const x = Int32Array.from({ length: 128 }, () => rng.int(65535) - 32767);
  for (let trial = 0; trial < 40; trial++) {
    const base = rng.int(6); // de in [base, 15]: k = base − de in [−15, 0], large ones saturating
    const mat: LutMatrix = {
      name: "random 48x128, left shifts",
      rows: 48,
      cols: 128,
      expBase: -17,
      nibbles: Uint8Array.from({ length: 48 * 64 }, () => rng.int(256)),
      scales: Uint8Array.from({ length: 48 * 4 }, () => ((base + rng.int(16 - base)) << 4) | rng.int(16)),
    };
    const [want, got] = both(mat, x, -3 - base, rng.int(40) - 30);
    expect(got).toEqual(want);
  }
});

test("checked mode turns a saturation inside the SIMD projection into the engine's bound error", () => {
  const mat: LutMatrix = {
    name: "saturating",
    rows: 3,
    cols: 64,
    expBase: 12,
    nibbles: new Uint8Array(96).fill(0xff),
    scales: new Uint8Array(6).fill(0xff),
  };
  const prepared = prepareMatrix(mat);
  const made = createLutSums([prepared])!;
  inputPlanes(new Int32Array(64).fill(32767), -1, 0, 64, made.lut);
  const out = new Int32Array(3);
  // Every group's (16 + m) · a = 31 · 32 · 7 · 32767 shifted left by −k = de − base: by 53 (base −38,
  // row by row) and by 30 (base −15, four lanes); both saturate, as in gemv.
  for (const xExp of [6, -17]) {
    gemvLut(out, -1, 0, prepared, made.lut, made.at[0], made.scalesAt[0], xExp, -24); // unchecked: saturates quietly
    expect(Array.from(out)).toEqual([2147483647, 2147483647, 2147483647]);
    checked.on = true;
    try {
      expect(() => gemvLut(out, -1, 0, prepared, made.lut, made.at[0], made.scalesAt[0], xExp, -24)).toThrow(
        /integer engine bound violated: saturating: \d+ saturations/,
      );
    } finally {
      checked.on = false;
    }
  }
});

test(
  "the engine on SIMD and on TypeScript kernels: identical logits on held-out windows, checked mode",
  async () => {
    const file = await readLut4(await smallLut4());
    const simd = intEngineFromFile(file), plain = intEngineFromFile(file, { simd: false });
    const { heldOut } = await loadBrown();
    checked.on = true;
    try {
      for (const w of evalWindows(heldOut, 2, 128)) {
        const a = await simd.start().feed([256, ...w], "all");
        const b = await plain.start().feed([256, ...w], "all");
        expect(Buffer.from(a.buffer).equals(Buffer.from(b.buffer))).toBe(true);
      }
    } finally {
      checked.on = false;
    }
  },
  120_000,
);

test(
  "SIMD scores keep the keys' digit planes per state: interleaved and restored sessions match the TypeScript engine",
  async () => {
    const file = await readLut4(await smallLut4());
    const simd = intEngineFromFile(file), plain = intEngineFromFile(file, { simd: false });
    const { heldOut } = await loadBrown();
    const [w1, w2] = evalWindows(heldOut, 2, 40);
    const a = simd.start(), b = simd.start(), ref1 = plain.start(), ref2 = plain.start();
    const same = (x: Float32Array, y: Float32Array) => Buffer.from(x.buffer).equals(Buffer.from(y.buffer));
    for (let i = 0; i < 40; i++) {
      // a and b take turns on one engine (one digit-plane area), so each step follows the other state's.
      expect(same(await a.feed([w1[i]], "last"), await ref1.feed([w1[i]], "last"))).toBe(true);
      expect(same(await b.feed([w2[i]], "last"), await ref2.feed([w2[i]], "last"))).toBe(true);
    }
    // A session restored mid-way continues exactly, on a fresh SIMD engine and on the same one.
    const saved = a.save!();
    for (const engine of [intEngineFromFile(file), simd]) {
      const r = engine.restore(saved);
      const ref = plain.restore(saved);
      for (const id of w2.slice(0, 20)) {
        expect(same(await r.feed([id], "last"), await ref.feed([id], "last"))).toBe(true);
      }
    }
  },
  120_000,
);

test("SIMD attention (attend_heads, on one thread or shared by two) equals the TypeScript loops at the extremes: |q| = 32767, keys ±2047, 1 to 200 positions", () => {
  const hd = 32, kvHeads = 2, kvDim = 64, cap = 208;
  const exp = prepareTable(makeTables(PRESETS.default).exp, 0);
  const headStride = 48 * hd * (cap / 16);
  const valueDimStride = 768 * (cap / 16),
    valueDigitStride = 256,
    valueHeadStride = valueDimStride * (hd / 16);
  const expHeadStride = 4 * cap;
  // With relaxed table reads and with the plain-swizzle set (runtimes without relaxed SIMD).
  for (const relaxed of [true, false]) {
    const made = createLutSums([], {
      relaxed,
      keyDigitBytes: kvHeads * headStride,
      valueDigitBytes: kvHeads * valueHeadStride,
      attendTasks: 6,
      vectorInts: 16 * hd,
      threads: 2,
      positions: cap,
      headDim: hd,
      expMirrorBytes: kvHeads * expHeadStride,
      exp,
    })!;
    for (
      const [n, fill] of [
        [1, "random"],
        [17, "max"],
        [200, "random"],
        [64, "min"],
        [33, "mixed"],
        [150, "flat"],
      ] as const
    ) {
      const val = () =>
        fill === "max"
          ? 2047
          : fill === "min"
          ? -2047
          : fill === "mixed"
          ? (rng.int(2) ? 2047 : -2047)
          : fill === "flat"
          ? rng.int(4095) - 2047
          : rng.int(4095) - 2047;
      const keys = Int16Array.from({ length: cap * kvDim }, val);
      const values = Int16Array.from({ length: cap * kvDim }, val);
      // Mostly close exponents (scores shifted right by 1 to 31, four at a time); in the mixed and flat
      // cases some shifts of 0 or to the left (one at a time, saturating).
      const keyExp = Int16Array.from(
        { length: cap * kvHeads },
        () => fill === "mixed" || fill === "flat" ? 5 - rng.int(36) : -10 - rng.int(4),
      );
      // Mostly close exponents; in the mixed case some 32 or more below the largest (their weights shift out).
      const valueExp = Int16Array.from(
        { length: cap * kvHeads },
        () => -10 - rng.int(fill === "mixed" || fill === "flat" ? 50 : 4),
      );
      // The digit planes in the documented layout: [kv head][block of 16][digit][dimension][16 positions];
      // the exponent mirrors as [kv head][position] int32.
      for (let p = 0; p < cap; p++) {
        for (let h = 0; h < kvHeads; h++) {
          made.lut.mem32[(made.lut.keyExpAt + h * expHeadStride) / 4 + p] = keyExp[p * kvHeads + h];
          made.lut.mem32[(made.lut.valueExpAt + h * expHeadStride) / 4 + p] = valueExp[p * kvHeads + h];
          for (let i = 0; i < hd; i++) {
            const k = keys[p * kvDim + h * hd + i];
            const at = made.lut.digitsAt + h * headStride + (p >> 4) * 48 * hd + i * 16 + (p & 15);
            made.lut.mem8[at] = k & 15;
            made.lut.mem8[at + 16 * hd] = (k >> 4) & 15;
            made.lut.mem8[at + 32 * hd] = (k >> 8) & 15;
            // Values, in offset binary: [kv head][block of 16 dimensions][block of 16 positions][digit]
            // [position in the block][16 dimensions].
            const v = values[p * kvDim + h * hd + i] + 2048;
            const vat = made.lut.valueDigitsAt + h * valueHeadStride + (i >> 4) * valueDimStride +
              (p >> 4) * 768 +
              (p & 15) * 16 + (i & 15);
            made.lut.mem8[vat] = v & 15;
            made.lut.mem8[vat + valueDigitStride] = (v >> 4) & 15;
            made.lut.mem8[vat + 2 * valueDigitStride] = (v >> 8) & 15;
          }
        }
      }
      const q = Int32Array.from(
        { length: 2 * hd },
        // "flat": a zero query, so every position gets the same weight and none drops out of the mix.
        () => (fill === "random"
          ? rng.int(65535) - 32767
          : fill === "min"
          ? -32767
          : fill === "flat"
          ? 0
          : 32767),
      );
      const outs: number[][] = [];
      const ctx: AttentionContext = {
        headDim: hd,
        kvHeads,
        kvDim,
        keys,
        keyExp,
        values,
        valueExp,
        exp,
        s: attentionScratch(cap, hd),
        digitsAt: made.lut.digitsAt,
        digitsHeadStride: headStride,
        valueDigitsAt: made.lut.valueDigitsAt,
        valueHeadStride,
        valueDimStride,
        valueDigitStride,
        dimBlocks: hd / 16,
        keyExpAt: made.lut.keyExpAt,
        valueExpAt: made.lut.valueExpAt,
        expHeadStride,
      };
      // The TypeScript loops: each kv head's two query heads as a GQA pair, then the second alone.
      const want: number[] = [];
      for (const kvHead of [0, 1]) {
        const out = new Int32Array(2 * hd);
        attendGroup(ctx, q, 0, -15, -14, true, kvHead, n, out, 0);
        const one = new Int32Array(hd);
        attendGroup(ctx, q, hd, -13, 0, false, kvHead, n, one, 0); // one head alone (no GQA pair)
        want.push(...out, ...one);
      }
      // The module: the same six heads as attend_heads tasks, the queries and outputs in its memory,
      // run as two threads would share them (every other task) and as one.
      const qAt = made.lut.vectorsAt, outAt = qAt + 8 * hd, tasks = made.lut.attendTasksAt;
      made.lut.mem32.set(q, qAt / 4);
      const heads = [[0, 0, -15], [0, 1, -14], [0, 1, -13], [1, 0, -15], [1, 1, -14], [1, 1, -13]];
      heads.forEach(([kvHead, j, eq], t) =>
        writeHeadTask(
          ctx,
          made.lut.mem32,
          tasks + 32 * t,
          qAt + 4 * hd * j,
          eq,
          kvHead,
          n,
          outAt + 4 * hd * t,
        )
      );
      const end = tasks + 32 * heads.length;
      // Faults (what checked mode refuses: saturated differences and shifts, which these extremes
      // reach) are counted the same however the heads are shared.
      const faults: number[] = [];
      for (const split of [1, 2]) {
        made.lut.mem32.fill(7, outAt / 4, outAt / 4 + 6 * hd);
        let counted = 0;
        for (let t = 0; t < split; t++) {
          const work = made.lut.attendAt + t * made.lut.attendBytes;
          const lut = made.lut;
          counted += lut.attend_heads(
            tasks + 32 * t,
            end,
            32 * split,
            work,
            hd,
            lut.attendPositions,
            lut.expTAt,
            lut.expMulAt,
            lut.expLen1,
            hd / 16,
            valueDimStride,
            valueDigitStride,
          );
        }
        faults.push(counted);
        const got = Array.from(made.lut.mem32.subarray(outAt / 4, outAt / 4 + 6 * hd));
        outs.push(got, want);
      }
      for (let i = 0; i < outs.length; i += 2) expect(outs[i]).toEqual(outs[i + 1]);
      expect(faults[1]).toBe(faults[0]);
      if (fill === "random") expect(faults[0]).toBe(0);
    }
  }
});

test("quantize and swiglu on WebAssembly equal quantizeBits and the exact product, at the extremes", () => {
  const made = createLutSums([], { vectorInts: 512 })!;
  const { mem32 } = made.lut;
  const src = made.lut.vectorsAt, dst = src + 1024;
  const extremes = [0, 1, -1, 2147483647, -2147483648, 32767, -32767, 65535, -65536];
  for (let trial = 0; trial < 200; trial++) {
    const n = 4 * (1 + rng.int(32));
    const kind = trial % 4;
    const x = Int32Array.from(
      { length: n },
      () =>
        kind === 0
          ? extremes[rng.int(extremes.length)]
          : kind === 1
          ? 0
          : kind === 2
          ? rng.int(2 ** 12) - 2 ** 11
          : (rng.int(2 ** 16) << 16) ^ rng.int(2 ** 16),
    );
    for (const bits of [11, 15]) {
      mem32.set(x, src / 4);
      const shift = made.lut.quantize(src, n, dst, bits);
      const want = new Int32Array(n);
      expect(quantizeBits(x, 0, n, 0, want, 0, bits)).toBe(shift);
      expect(Array.from(mem32.subarray(dst / 4, dst / 4 + n))).toEqual(Array.from(want));
    }
  }
  const values = [0, 1, -1, 32767, -32767, 12345, -23456];
  const a = Int32Array.from({ length: 256 }, (_, i) => (i < 49 ? values[i % 7] : rng.int(65535) - 32767));
  const b = Int32Array.from(
    { length: 256 },
    (_, i) => (i < 49 ? values[Math.floor(i / 7)] : rng.int(65535) - 32767),
  );
  mem32.set(a, src / 4), mem32.set(b, dst / 4);
  made.lut.swiglu(src, dst, 256, dst + 1024);
  expect(Array.from(mem32.subarray(dst / 4 + 256, dst / 4 + 512))).toEqual(
    Array.from(a, (v, i) => Math.imul(v, b[i])),
  );
});

test("rmsnorm and add_sat on WebAssembly equal the TypeScript kernels: zeros, tiny and huge vectors, eps dominating", () => {
  const made = createLutSums([], { vectorInts: 1024 })!;
  const { mem32 } = made.lut;
  const xAt = made.lut.vectorsAt, yAt = xAt + 1024, outAt = yAt + 1024;
  let compared = 0;
  for (let trial = 0; trial < 300; trial++) {
    const n = [4, 32, 96, 128, 252][trial % 5];
    const scale = [0, 1, 5, 12, 20, 31][rng.int(6)];
    const x = Int32Array.from(
      { length: n },
      () =>
        scale === 31
          ? (rng.int(2 ** 16) << 16) ^ rng.int(2 ** 16)
          : rng.int(2 ** scale + 1) - (2 ** scale >> 1),
    );
    if (trial % 37 === 0) x[rng.int(n)] = -2147483648;
    const xExp = rng.int(60) - 40;
    const [epsMantissa, epsExp] = trial % 3 === 0 ? [40000, -2] : [34360, -35 - rng.int(20)];
    const plan = normPlan(n, epsMantissa, epsExp);
    const want = new Int32Array(n);
    rmsnorm(x, 0, xExp, plan, want, 0);
    mem32.set(x, xAt / 4);
    made.lut.rmsnorm(xAt, n, xExp, plan.bits, plan.epsN, plan.epsExp, yAt, outAt);
    expect(Array.from(mem32.subarray(outAt / 4, outAt / 4 + n))).toEqual(Array.from(want));
    compared += n;
  }
  expect(compared).toBeGreaterThan(20000);
  const extremes = [0, 1, -1, 2147483647, -2147483648, 1073741824, -1073741825];
  const a = Int32Array.from({ length: 64 }, (_, i) => (i < 49 ? extremes[i % 7] : rng.int(2 ** 31)));
  const b = Int32Array.from(
    { length: 64 },
    (_, i) => (i < 49 ? extremes[Math.floor(i / 7)] : -rng.int(2 ** 31)),
  );
  mem32.set(a, xAt / 4), mem32.set(b, yAt / 4);
  made.lut.add_sat(xAt, yAt, 64);
  expect(Array.from(mem32.subarray(xAt / 4, xAt / 4 + 64))).toEqual(Array.from(a, (v, i) => satAdd(v, b[i])));
});

test("rope on WebAssembly equals ropeHead: 16-bit inputs at the extremes, every table position", () => {
  const half = 16, positions = 64;
  const cos = Int16Array.from(
    { length: positions * half },
    (_, i) => (i < 8 ? [16384, -16384, 0, 1][i & 3] : rng.int(32769) - 16384),
  );
  const sin = Int16Array.from(
    { length: positions * half },
    (_, i) => (i < 8 ? [-16384, 16384, 1, 0][i & 3] : rng.int(32769) - 16384),
  );
  const made = createLutSums([], { vectorInts: 64, rope: { cos, sin } })!;
  const { mem32 } = made.lut;
  for (let p = 0; p < positions; p++) {
    const v = Int32Array.from(
      { length: 2 * half },
      (_, i) => p % 3 === 0 ? (i & 1 ? 32767 : -32767) : rng.int(65535) - 32767,
    );
    const want = Int32Array.from(v);
    ropeHead(want, 0, half, cos, sin, p * half, new Int32Array(64));
    mem32.set(v, made.lut.vectorsAt / 4);
    made.lut.rope(
      made.lut.vectorsAt,
      half,
      made.lut.ropeCosAt + 4 * p * half,
      made.lut.ropeSinAt + 4 * p * half,
    );
    expect(Array.from(mem32.subarray(made.lut.vectorsAt / 4, made.lut.vectorsAt / 4 + 2 * half))).toEqual(
      Array.from(want),
    );
  }
});

test("norm_rope on WebAssembly equals the engine's per-head steps: norm, gain, quantize, rope, quantize", () => {
  const hd = 32, half = 16, heads = 3, positions = 8;
  const cos = Int16Array.from({ length: positions * half }, () => rng.int(32769) - 16384);
  const sin = Int16Array.from({ length: positions * half }, () => rng.int(32769) - 16384);
  // Gains at the extremes (±32767, 0) and random, per head dimension; one table for every head.
  const gains = Int16Array.from(
    { length: hd },
    (_, i) => (i < 3 ? [32767, -32767, 0][i] : rng.int(65535) - 32767),
  );
  const gain = gainTables(gains);
  const made = createLutSums([], {
    vectorInts: 512,
    rope: { cos, sin },
    tables: [gain],
    attendTasks: heads,
    headExps: heads,
  })!;
  const { lut } = made;
  const vAt = lut.vectorsAt, yAt = vAt + 4 * heads * hd, headAt = yAt + 4 * hd;
  const plan = normPlan(hd, 34360, -45);
  for (let trial = 0; trial < 60; trial++) {
    const scale = [0, 3, 12, 24, 30][trial % 5];
    const v = Int32Array.from({ length: heads * hd }, () => rng.int(2 ** scale + 1) - (2 ** scale >> 1));
    const p = trial % positions, bits = trial % 2 ? 15 : 11, xExp = -24, gainExp = -3 - (trial % 4);
    // The TypeScript steps, head by head (engines/int/forward.ts normRope).
    const want = Int32Array.from(v);
    const wantExps: number[] = [];
    for (let h = 0; h < heads; h++) {
      const z = new Int32Array(hd);
      rmsnorm(want, h * hd, xExp, plan, z, 0);
      applyGain(z, 0, hd, gain, want, h * hd);
      const eg = quantizeBits(want, h * hd, hd, NORM_EXP + gainExp, want, h * hd, 15);
      ropeHead(want, h * hd, half, cos, sin, p * half, new Int32Array(64));
      wantExps.push(quantizeBits(want, h * hd, hd, eg, want, h * hd, bits));
    }
    lut.mem32.set(v, vAt / 4);
    lut.norm_rope(
      vAt,
      heads,
      hd,
      xExp,
      plan.bits,
      plan.epsN,
      plan.epsExp,
      yAt,
      headAt,
      lut.tablesAt[0],
      NORM_EXP + gainExp,
      lut.ropeCosAt + 4 * p * half,
      lut.ropeSinAt + 4 * p * half,
      bits,
      lut.headExpsAt,
    );
    expect(Array.from(lut.mem32.subarray(vAt / 4, vAt / 4 + heads * hd))).toEqual(Array.from(want));
    expect(Array.from(lut.mem32.subarray(lut.headExpsIndex, lut.headExpsIndex + heads))).toEqual(wantExps);
  }
});

test("quantize_heads quantizes each head in place as quantizeBits does, its shift per head", () => {
  const hd = 32, heads = 4;
  const made = createLutSums([], { vectorInts: heads * hd, headExps: heads })!;
  const { lut } = made;
  const vAt = lut.vectorsAt;
  for (let trial = 0; trial < 40; trial++) {
    const bits = [12, 15, 11][trial % 3];
    // Each head at its own scale: all zero, small (a left shift), at the cache's width, past 2^30.
    const v = Int32Array.from({ length: heads * hd }, (_, i) => {
      const scale = [0, 3, 12, 31][(((i / hd) | 0) + trial) % 4];
      return scale === 31 ? (i % 2 ? -(2 ** 31) : 2 ** 31 - 1) : rng.int(2 ** scale + 1) - (2 ** scale >> 1);
    });
    const want = Int32Array.from(v);
    const wantShifts: number[] = [];
    for (let h = 0; h < heads; h++) wantShifts.push(quantizeBits(want, h * hd, hd, 0, want, h * hd, bits));
    lut.mem32.set(v, vAt / 4);
    lut.mem32.fill(-99, lut.headExpsIndex, lut.headExpsIndex + heads);
    lut.quantize_heads(vAt, heads, hd, bits, lut.headExpsAt);
    expect(Array.from(lut.mem32.subarray(vAt / 4, vAt / 4 + heads * hd))).toEqual(Array.from(want));
    expect(Array.from(lut.mem32.subarray(lut.headExpsIndex, lut.headExpsIndex + heads))).toEqual(wantShifts);
  }
});

test("cache_digits writes a position's keys and values into the digit planes attention reads", () => {
  const hd = 32, kvHeads = 2, cap = 32;
  const keyPlane = 16 * hd, keyHeadStride = 3 * keyPlane * (cap / 16);
  const valueDimStride = 16 * cap,
    valueDigitStride = valueDimStride * (hd / 16),
    valueHeadStride = 3 * valueDigitStride;
  const made = createLutSums([], {
    vectorInts: 4 * kvHeads * hd,
    keyDigitBytes: kvHeads * keyHeadStride,
    valueDigitBytes: kvHeads * valueHeadStride,
  })!;
  const { lut } = made;
  const kAt = lut.vectorsAt, vAt = kAt + 4 * kvHeads * hd;
  for (const p of [0, 5, 16, 31]) {
    // Keys and values at the cache's bounds (±2047) and random.
    const k = Int32Array.from(
      { length: kvHeads * hd },
      (_, i) => (i < 2 ? [2047, -2047][i] : rng.int(4095) - 2047),
    );
    const v = Int32Array.from(
      { length: kvHeads * hd },
      (_, i) => (i < 2 ? [-2047, 2047][i] : rng.int(4095) - 2047),
    );
    lut.mem32.set(k, kAt / 4), lut.mem32.set(v, vAt / 4);
    const keyAt = lut.digitsAt + (p >> 4) * 3 * keyPlane + (p & 15);
    const valueAt = lut.valueDigitsAt + 16 * p;
    lut.cache_digits(
      kAt,
      vAt,
      hd,
      kvHeads,
      keyAt,
      keyHeadStride,
      valueAt,
      valueHeadStride,
      valueDimStride,
      valueDigitStride,
    );
    for (let h = 0; h < kvHeads; h++) {
      for (let i = 0; i < hd; i++) {
        const key = k[h * hd + i], value = v[h * hd + i] + 2048;
        const ka = keyAt + h * keyHeadStride + 16 * i;
        expect([lut.mem8[ka], lut.mem8[ka + keyPlane], lut.mem8[ka + 2 * keyPlane]])
          .toEqual([key & 15, (key >> 4) & 15, (key >> 8) & 15]);
        const va = valueAt + h * valueHeadStride + (i >> 4) * valueDimStride + (i & 15);
        expect([lut.mem8[va], lut.mem8[va + valueDigitStride], lut.mem8[va + 2 * valueDigitStride]])
          .toEqual([value & 15, (value >> 4) & 15, value >> 8]);
      }
    }
  }
});

test("silu on WebAssembly equals the TypeScript table read: below, inside and beyond the table", () => {
  const tables = makeTables(PRESETS.default);
  const table = prepareTable(tables.silu, tables.siluHalf);
  const made = createLutSums([], { vectorInts: 1024, silu: table })!;
  const { mem32 } = made.lut;
  const at = made.lut.vectorsAt;
  const reach = table.half << 8; // the table covers x in about ±reach
  const x = Int32Array.from(
    { length: 1024 },
    (_, i) =>
      i < 8
        ? [0, -1, 1, reach, -reach, 2147483647, -2147483648, reach - 1][i]
        : rng.int(4 * reach) - 2 * reach,
  );
  mem32.set(x, at / 4);
  made.lut.silu(at, 1024, made.lut.siluTAt, made.lut.siluMulAt, table.t.length - 1, table.half);
  expect(Array.from(mem32.subarray(at / 4, at / 4 + 1024))).toEqual(Array.from(x, (v) => silu(table, v)));
});

test("gated_product equals silu, quantizeBits and the exact product in turn, its three shifts summed", () => {
  const tables = makeTables(PRESETS.default);
  const table = prepareTable(tables.silu, tables.siluHalf);
  const n = 256;
  const made = createLutSums([], { vectorInts: 5 * n, silu: table, headExps: 1 })!;
  const { lut } = made;
  const { mem32 } = lut;
  const gateAt = lut.vectorsAt, upAt = gateAt + 4 * n, a16At = upAt + 4 * n, up16At = a16At + 4 * n;
  const prodAt = up16At + 4 * n;
  const reach = table.half << 8;
  for (let trial = 0; trial < 30; trial++) {
    // Gates around the table's reach and beyond it, ups from zero to past 2^30.
    const upScale = [0, 4, 16, 30][trial % 4];
    const gate = Int32Array.from(
      { length: n },
      (_, i) => (i < 2 ? [2147483647, -2147483648][i] : rng.int(4 * reach) - 2 * reach),
    );
    const up = Int32Array.from({ length: n }, () => rng.int(2 ** upScale + 1) - (2 ** upScale >> 1));
    const g = Int32Array.from(gate, (v) => silu(table, v));
    const g16 = new Int32Array(n), u16 = new Int32Array(n), want = new Int32Array(n);
    const s1 = quantizeBits(g, 0, n, 0, g16, 0, 15);
    const s2 = quantizeBits(up, 0, n, 0, u16, 0, 15);
    const prod = Int32Array.from(g16, (v, i) => Math.imul(v, u16[i]));
    const s3 = quantizeBits(prod, 0, n, 0, want, 0, 15);
    mem32.set(gate, gateAt / 4), mem32.set(up, upAt / 4);
    mem32[lut.headExpsIndex] = -99;
    lut.gated_product(
      gateAt,
      upAt,
      n,
      lut.siluTAt,
      lut.siluMulAt,
      table.t.length - 1,
      table.half,
      a16At,
      up16At,
      prodAt,
      lut.headExpsAt,
    );
    expect(Array.from(mem32.subarray(a16At / 4, a16At / 4 + n))).toEqual(Array.from(want));
    expect(mem32[lut.headExpsIndex]).toBe(s1 + s2 + s3);
  }
});

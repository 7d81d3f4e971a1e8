// The integer kernels against exact references (BigInt or plain small-integer maths): the rounding
// primitive, the digit products, the square root, the divisions, the GEMV contract, the tables.
import { expect, test } from "bun:test";
import { I32_MAX, I32_MIN, quantizeBits, shift } from "../../kernels/int/round.ts";
import { mulS12, mulS16, mulScale, multiples, mulU16 } from "../../kernels/int/mul.ts";
import { divShifted, isqrtScaled, recip16 } from "../../kernels/int/isqrt.ts";
import { ACC_EXP, activationTables, gemv, prepareMatrix } from "../../kernels/int/gemv.ts";
import { expNeg, prepareTable, silu } from "../../kernels/int/tables.ts";
import { normPlan, rmsnorm } from "../../kernels/int/norm.ts";
import { makeTables } from "../../quantize/lut4-quantize.ts";
import { PRESETS } from "../../model/config.ts";
import { drawBelow, nextU32, seedRng } from "../../engines/int/sampler.ts";

let seed = 12345;
const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
const randInt = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

/** round_half_up(v / 2^s) saturated, in BigInt. */
function shiftRef(v: number, s: number): number {
  let r: bigint;
  if (s > 0) r = (BigInt(v) + (1n << BigInt(s - 1))) >> BigInt(s);
  else r = BigInt(v) << BigInt(-s);
  if (r > BigInt(I32_MAX)) return I32_MAX;
  if (r < BigInt(I32_MIN)) return I32_MIN;
  return Number(r);
}

test("shift rounds half up and saturates, for every exponent from -40 to 40", () => {
  const edge = [0, 1, -1, 2, -2, 3, -3, I32_MAX, I32_MIN, I32_MAX - 1, I32_MIN + 1, 1 << 30, -(1 << 30)];
  for (let s = -40; s <= 40; s++) {
    for (const v of edge) expect(shift(v, s)).toBe(shiftRef(v, s));
    for (let i = 0; i < 200; i++) {
      const v = randInt(I32_MIN, I32_MAX);
      expect(shift(v, s)).toBe(shiftRef(v, s));
    }
  }
  expect(shift(5, 1)).toBe(3);
  expect(shift(-5, 1)).toBe(-2);
});

test("multiples tables give exact products for signed 16- and 12-bit and unsigned 16-bit digits", () => {
  const t = new Int32Array(32);
  for (let i = 0; i < 3000; i++) {
    const a = randInt(-32767, 32767);
    multiples(a, t, 0);
    const b16 = randInt(-32768, 32767), b12 = randInt(-2048, 2047), u = randInt(0, 65535);
    expect(mulS16(t, 0, b16)).toBe(a * b16);
    expect(mulS12(t, 0, b12)).toBe(a * b12);
    const au = randInt(0, 32767);
    multiples(au, t, 0);
    expect(mulU16(t, 0, u)).toBe(au * u);
  }
  for (let m = 0; m < 16; m++) {
    for (const a of [0, 1, -1, 8388607, -8388607, 12345]) expect(mulScale(a, m)).toBe((16 + m) * a);
  }
});

test("isqrtScaled is floor(sqrt(s * 4^p)), recip16 and divShifted are floor divisions", () => {
  const isqrt = (n: bigint) => {
    if (n < 2n) return n;
    let x = BigInt(Math.floor(Math.sqrt(Number(n))));
    while (x * x > n) x--;
    while ((x + 1n) * (x + 1n) <= n) x++;
    return x;
  };
  for (let i = 0; i < 2000; i++) {
    const s = i < 10 ? i : randInt(0, I32_MAX), p = randInt(0, 13);
    expect(BigInt(isqrtScaled(s, p))).toBe(isqrt(BigInt(s) << BigInt(2 * p)));
    const d = randInt(1, (1 << 30) - 1);
    const l = d.toString(2).length;
    expect(recip16(d)).toBe(Math.min(65535, Number((1n << BigInt(l + 15)) / BigInt(d))));
    const n = randInt(0, I32_MAX), k = randInt(0, 20), q = randInt(1, 1 << 20);
    const exact = (BigInt(n) << BigInt(k)) / BigInt(q);
    expect(divShifted(n, k, q, 1 << 30)).toBe(exact >= 1n << 30n ? 1 << 30 : Number(exact));
  }
});

test("gemv follows its written contract: group sums, (16+m) scale, one rounding per group and per row", () => {
  const rows = 7, cols = 96;
  const nibbles = new Uint8Array((rows * cols) / 2), scales = new Uint8Array((rows * cols) / 32);
  for (let i = 0; i < nibbles.length; i++) nibbles[i] = randInt(0, 255);
  for (let i = 0; i < scales.length; i++) scales[i] = randInt(0, 255);
  const mat = { name: "t", rows, cols, expBase: -12, nibbles, scales };
  const x = new Int32Array(cols);
  for (let i = 0; i < cols; i++) x[i] = randInt(-32767, 32767);
  const tab = new Int32Array(cols << 4), out = new Int32Array(rows);
  activationTables(x, 0, cols, tab);
  for (const outExp of [-16, -24, -10]) {
    gemv(out, 0, prepareMatrix(mat), tab, -15, outExp);
    for (let r = 0; r < rows; r++) {
      let acc = 0;
      for (let g = 0; g < cols / 32; g++) {
        let a = 0;
        for (let c = g * 32; c < g * 32 + 32; c++) {
          const k = r * cols + c;
          a += (((nibbles[k >> 1] >> ((k & 1) * 4)) & 15) - 8) * x[c];
        }
        const sc = scales[(r * cols) / 32 + g];
        acc = Math.max(
          I32_MIN,
          Math.min(I32_MAX, acc + shiftRef((16 + (sc & 15)) * a, ACC_EXP - (-12 + (sc >> 4) - 4 - 15))),
        );
      }
      expect(out[r]).toBe(shiftRef(acc, outExp - ACC_EXP));
    }
  }
});

test("exp and SiLU tables interpolate to within 2^-18 and 2^-14 of the functions", () => {
  const t = makeTables(PRESETS.default);
  const e = prepareTable(t.exp, 0), s = prepareTable(t.silu, t.siluHalf);
  let worstE = 0, worstS = 0;
  for (let i = 0; i < 5000; i++) {
    const d = randInt(0, 40 * 65536);
    worstE = Math.max(worstE, Math.abs(expNeg(e, d) / 2 ** 30 - Math.exp(-d / 65536)));
    const x = randInt(-20 * 65536, 20 * 65536), xf = x / 65536;
    worstS = Math.max(worstS, Math.abs(silu(s, x) / 65536 - xf / (1 + Math.exp(-xf))));
  }
  expect(worstE).toBeLessThan(2 ** -18);
  expect(worstS).toBeLessThan(2 ** -14);
  expect(expNeg(e, 0)).toBe(2 ** 30);
});

test("rmsnorm gives x / sqrt(sum x^2 + n eps) to 16 bits, and quantizeBits bounds its output", () => {
  const n = 96, plan = normPlan(n, 34360, -35), x = new Int32Array(n), z = new Int32Array(n);
  for (let rep = 0; rep < 50; rep++) {
    const scale = 2 ** randInt(2, 28);
    for (let i = 0; i < n; i++) x[i] = Math.round((rand() * 2 - 1) * scale);
    rmsnorm(x, 0, -16, plan, z, 0);
    let ss = 0;
    for (let i = 0; i < n; i++) ss += (x[i] / 65536) ** 2;
    const denom = Math.sqrt(ss + n * 34360 * 2 ** -35);
    for (let i = 0; i < n; i++) expect(Math.abs(z[i] / 32768 - x[i] / 65536 / denom)).toBeLessThan(3e-4);
  }
  const q = new Int32Array(n);
  const e = quantizeBits(x, 0, n, -16, q, 0, 11);
  for (let i = 0; i < n; i++) expect(Math.abs(q[i])).toBeLessThanOrEqual(2047);
  expect(Math.max(...Array.from(q, Math.abs))).toBeGreaterThanOrEqual(1024);
  const mx = Math.max(...Array.from(x, Math.abs));
  expect(e).toBe(-16 + mx.toString(2).length - 11);
});

test("xorshift64 on two int32 halves equals the 64-bit recurrence, and draws are bounded", () => {
  const rng = new Int32Array(2);
  seedRng(rng, 0x1234, 0x5678abcd | 0);
  let x = (0x1234n << 32n) | 0x5678abcdn;
  const M = (1n << 64n) - 1n;
  for (let i = 0; i < 1000; i++) {
    x ^= (x << 13n) & M;
    x ^= x >> 7n;
    x ^= (x << 17n) & M;
    expect(nextU32(rng)).toBe(Number(x >> 32n));
  }
  const counts = new Array(6).fill(0);
  for (let i = 0; i < 6000; i++) {
    const r = drawBelow(rng, 6);
    expect(r >= 0 && r < 6).toBe(true);
    counts[r]++;
  }
  for (const c of counts) expect(Math.abs(c - 1000)).toBeLessThan(150);
});

// Narrowing and widening, checked on every 16-bit pattern of both formats, at and around every
// rounding midpoint, and on random f32 patterns. f16 has two independent oracles (the platform's
// Float16Array / Math.f16round, and @petamoriken/float16); bf16 has no platform type (and the package
// has no bf16 helpers), so its oracles are the definition computed in f64, an integer rounding of the
// pattern's halves written independently of ferry's, llama.cpp's own ggml (bun:ffi), and a table of
// cases derived by hand.
import { describe, expect, test } from "bun:test";
import { f16round as pkgF16round, getFloat16, setFloat16 } from "@petamoriken/float16";
import {
  bf16Bits,
  bf16ToF32,
  F16_MAX,
  F16_MIN_NORMAL,
  F16_MIN_SUBNORMAL,
  f16Bits,
  f16BitsToF32Bits,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  roundBf16,
  roundF16,
} from "../../quantize/float16.ts";
import { openGgml } from "../helpers/ggml.ts";

const ALL = Uint16Array.from({ length: 65536 }, (_, i) => i);
const isNaN16 = (h: number) => (h & 0x7c00) === 0x7c00 && (h & 0x3ff) !== 0;
const isNaNBf = (b: number) => (b & 0x7f80) === 0x7f80 && (b & 0x7f) !== 0;
const f32 = (bits: number[]) => new Float32Array(new Uint32Array(bits.map((b) => b >>> 0)).buffer);
const bitsOf = (x: Float32Array) => new Uint32Array(x.buffer, x.byteOffset, x.length);

// A deterministic xorshift so a failure reproduces.
function randomBits(n: number, seed = 0x9e3779b9): Uint32Array {
  const out = new Uint32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0;
    out[i] = s;
  }
  return out;
}

/** The value of a bf16 pattern by its definition, in f64; exponent 255 is read as 2^128 when `extended`. */
function bf16Value(b: number, extended = false): number {
  const sign = b & 0x8000 ? -1 : 1, e = (b >>> 7) & 0xff, m = b & 0x7f;
  if (e === 255 && !extended) return m ? NaN : sign * Infinity;
  if (e === 0) return sign * (m / 128) * 2 ** -126;
  return sign * (1 + m / 128) * 2 ** (e - 127);
}

/** bf16 rounding by its definition: the nearer of the two neighbours, the even one on a tie. */
function bf16Oracle(x: number, xBits: number): number {
  const sign = xBits & 0x80000000 ? 0x8000 : 0;
  const ax = Math.abs(x);
  const lo = (xBits >>> 16) & 0x7fff, hi = lo + 1;
  const dLo = ax - bf16Value(lo, true), dHi = bf16Value(hi, true) - ax;
  const pick = dLo < dHi ? lo : dHi < dLo ? hi : (lo & 1 ? hi : lo);
  return sign | pick;
}

describe("f16", () => {
  test("widening every pattern agrees with Float16Array and with @petamoriken/float16", () => {
    const mine = f16ToF32(ALL);
    const native = new Float16Array(ALL.buffer);
    const dv = new DataView(ALL.buffer);
    let checked = 0;
    for (let h = 0; h < 65536; h++) {
      const pkg = getFloat16(dv, h * 2, true);
      if (isNaN16(h)) {
        expect(Number.isNaN(mine[h]) && Number.isNaN(native[h]) && Number.isNaN(pkg)).toBe(true);
      } else {
        if (!Object.is(mine[h], native[h]) || !Object.is(mine[h], pkg)) {
          throw new Error(`0x${h.toString(16)}: mine ${mine[h]}, Float16Array ${native[h]}, package ${pkg}`);
        }
      }
      checked++;
    }
    expect(checked).toBe(65536);
  });

  test("every pattern survives widen-then-narrow bit for bit, NaN payloads and signs included", () => {
    const back = f32ToF16(f16ToF32(ALL));
    for (let h = 0; h < 65536; h++) {
      if (back[h] !== h) throw new Error(`0x${h.toString(16)} came back 0x${back[h].toString(16)}`);
    }
    expect(back).toEqual(ALL);
  });

  test("the scalar widening and the table agree on every pattern", () => {
    const table = bitsOf(f16ToF32(ALL));
    for (let h = 0; h < 65536; h++) expect(table[h]).toBe(f16BitsToF32Bits(h));
  });

  test("narrowing at, just below and just above every midpoint rounds to nearest even, as both oracles do", () => {
    // Probes around the midpoint between each finite f16 and the next one up (0x7bff's next is 65536,
    // where the overflow to inf starts), on both signs.
    const probes: number[] = [];
    const expected: number[] = [];
    const value = f16ToF32(ALL);
    for (let h = 0; h < 0x7c00; h++) {
      const lo = value[h], hi = h === 0x7bff ? 65536 : value[h + 1];
      const mid = new Float32Array([(lo + hi) / 2]);
      if (mid[0] !== (lo + hi) / 2) throw new Error(`midpoint of 0x${h.toString(16)} is not an f32`);
      const m = bitsOf(mid)[0];
      for (const [bits, want] of [[m, h & 1 ? h + 1 : h], [m - 1, h], [m + 1, h + 1]]) {
        probes.push(bits, (bits | 0x80000000) >>> 0);
        expected.push(want, want | 0x8000);
      }
    }
    const x = f32(probes);
    const mine = f32ToF16(x);
    const native = new Uint16Array(new Float16Array(x).buffer);
    const pkgView = new DataView(new ArrayBuffer(2));
    for (let i = 0; i < x.length; i++) {
      setFloat16(pkgView, 0, x[i], true);
      const pkg = pkgView.getUint16(0, true);
      if (mine[i] !== expected[i] || native[i] !== expected[i] || pkg !== expected[i]) {
        throw new Error(
          `${x[i]}: mine 0x${mine[i].toString(16)}, native 0x${native[i].toString(16)}, package 0x${
            pkg.toString(16)
          }, definition 0x${expected[i].toString(16)}`,
        );
      }
    }
    expect(x.length).toBe(6 * 0x7c00);
  });

  test("narrowing a million random f32 patterns agrees with Math.f16round and the package's f16round", () => {
    const bits = randomBits(1 << 20);
    const x = new Float32Array(bits.buffer);
    const mine = f32ToF16(x);
    const back = f16ToF32(mine);
    let nans = 0;
    for (let i = 0; i < x.length; i++) {
      if (Number.isNaN(x[i])) {
        nans++;
        expect(isNaN16(mine[i])).toBe(true);
        expect(mine[i] >>> 15).toBe(bits[i] >>> 31);
        continue;
      }
      const a = Math.f16round(x[i]), b = pkgF16round(x[i]);
      if (!Object.is(back[i], a) || !Object.is(back[i], b)) {
        throw new Error(
          `0x${bits[i].toString(16)} (${x[i]}): mine ${back[i]}, Math.f16round ${a}, package ${b}`,
        );
      }
    }
    expect(nans).toBeGreaterThan(0);
  });

  test("specials: ±0, ±inf, NaN, the largest finite, the overflow edge, subnormals", () => {
    const x = new Float32Array([
      0,
      -0,
      Infinity,
      -Infinity,
      NaN,
      F16_MAX,
      65519.99,
      65520,
      -65520,
      F16_MIN_NORMAL,
      F16_MIN_SUBNORMAL,
      F16_MIN_SUBNORMAL / 2,
      F16_MIN_SUBNORMAL * 0.5000001,
      1e-30,
    ]);
    expect(Array.from(f32ToF16(x))).toEqual([
      0,
      0x8000,
      0x7c00,
      0xfc00,
      0x7e00,
      0x7bff,
      0x7bff,
      0x7c00,
      0xfc00,
      0x0400,
      0x0001,
      0,
      0x0001,
      0,
    ]);
    expect(f16Bits(0xffc00000)).toBe(0xfe00); // a negative NaN stays negative
    expect(f16Bits(0x7f800001)).toBe(0x7e00); // a payload only in the low bits gets the quiet bit, so it stays NaN
    expect(roundF16(0.1)).toBe(Math.f16round(0.1));
    expect(() => f32ToF16(new Float32Array(3), new Uint16Array(2))).toThrow(RangeError);
  });
});

describe("bf16", () => {
  test("widening every pattern gives the value its definition says", () => {
    const mine = bf16ToF32(ALL);
    for (let b = 0; b < 65536; b++) {
      const want = bf16Value(b);
      if (Number.isNaN(want) ? !Number.isNaN(mine[b]) : !Object.is(mine[b], want)) {
        throw new Error(`0x${b.toString(16)}: ${mine[b]}, definition ${want}`);
      }
    }
    expect(bitsOf(mine)[0x3f80]).toBe(0x3f800000);
  });

  test("every pattern survives widen-then-narrow bit for bit, NaN payloads and signs included", () => {
    const back = f32ToBf16(bf16ToF32(ALL));
    for (let b = 0; b < 65536; b++) {
      if (back[b] !== b) throw new Error(`0x${b.toString(16)} came back 0x${back[b].toString(16)}`);
    }
    for (let b = 0; b < 65536; b++) expect(bf16Bits(b << 16)).toBe(b);
  });

  test("narrowing at, just below and just above every midpoint rounds to nearest even", () => {
    const probes: number[] = [], expected: number[] = [];
    for (let b = 0; b < 0x7f80; b++) {
      const mid = (b << 16) | 0x8000; // exactly halfway to the next pattern up (0x7f7f's next is inf)
      for (const [bits, want] of [[mid, b & 1 ? b + 1 : b], [mid - 1, b], [mid + 1, b + 1]]) {
        probes.push(bits, (bits | 0x80000000) >>> 0);
        expected.push(want, want | 0x8000);
      }
    }
    const x = f32(probes);
    const mine = f32ToBf16(x);
    for (let i = 0; i < x.length; i++) {
      const oracle = bf16Oracle(x[i], probes[i]);
      if (mine[i] !== expected[i] || oracle !== expected[i]) {
        throw new Error(
          `0x${probes[i].toString(16)}: mine 0x${mine[i].toString(16)}, definition 0x${
            oracle.toString(16)
          }, expected 0x${expected[i].toString(16)}`,
        );
      }
    }
    expect(x.length).toBe(6 * 0x7f80);
  });

  test("narrowing a million random f32 patterns agrees with the definition", () => {
    const bits = randomBits(1 << 20, 12345);
    const x = new Float32Array(bits.buffer);
    const mine = f32ToBf16(x);
    for (let i = 0; i < x.length; i++) {
      if (Number.isNaN(x[i])) {
        expect(isNaNBf(mine[i])).toBe(true);
        expect(mine[i] >>> 15).toBe(bits[i] >>> 31);
        continue;
      }
      const want = Number.isFinite(x[i]) ? bf16Oracle(x[i], bits[i]) : bits[i] >>> 16;
      if (mine[i] !== want) {
        throw new Error(
          `0x${bits[i].toString(16)}: mine 0x${mine[i].toString(16)}, definition 0x${want.toString(16)}`,
        );
      }
    }
    expect(mine.length).toBe(1 << 20);
  });

  test("specials: ±0, ±inf, NaN, subnormals, the overflow edge, a tie", () => {
    const x = f32([
      0,
      0x80000000,
      0x7f800000,
      0xff800000,
      0x7fc00000,
      0x00000001,
      0x00008000,
      0x00008001,
      0x7f7f7fff,
      0x7f7f8000,
      0x3f808000,
      0x3f818000,
    ]);
    expect(Array.from(f32ToBf16(x))).toEqual([
      0,
      0x8000,
      0x7f80,
      0xff80,
      0x7fc0,
      0,
      0,
      1,
      0x7f7f,
      0x7f80,
      0x3f80,
      0x3f82,
    ]);
    expect(bf16Bits(0x7f800001)).toBe(0x7fc0); // a payload only in the low bits gets the quiet bit
    expect(roundBf16(1.00390625)).toBe(1);
    expect(() => bf16ToF32(new Uint16Array(3), new Float32Array(4))).toThrow(RangeError);
  });
});

/**
 * bf16 rounding by integer arithmetic on the two halves of the f32 pattern, written independently of
 * ferry's add-and-shift: keep the top half, and step it up by one when the bottom half is over
 * 0x8000, or exactly 0x8000 with the top half odd (the carry walks into the exponent, and from the
 * largest finite into infinity, by itself). A NaN keeps its sign and top payload; when that payload
 * is empty the quiet bit is set, so it stays a NaN.
 */
function bf16ByHalves(bits: number): number {
  const u = bits >>> 0;
  const top = Math.floor(u / 65536), low = u % 65536;
  const exponent = (top >> 7) & 0xff, payload = top & 0x7f;
  if (exponent === 0xff && (payload !== 0 || low !== 0)) return payload !== 0 ? top : top + 0x40;
  if (low > 0x8000 || (low === 0x8000 && top % 2 === 1)) return top + 1;
  return top;
}

describe("bf16 against independent oracles", () => {
  // Every top half (every sign, exponent and kept mantissa) with bottom halves at and around the tie,
  // the extremes, and one random value: 65,536 × 8 patterns.
  const LOWS = [0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x4000, 0];
  const probes = new Uint32Array(65536 * LOWS.length);
  const rnd = randomBits(65536, 777);
  for (let top = 0; top < 65536; top++) {
    for (let j = 0; j < LOWS.length; j++) {
      const low = j === LOWS.length - 1 ? rnd[top] & 0xffff : LOWS[j];
      probes[top * LOWS.length + j] = ((top << 16) | low) >>> 0;
    }
  }
  const x = new Float32Array(probes.buffer);

  test("every top half × the bottom halves around the tie: ferry equals the integer oracle", () => {
    const mine = f32ToBf16(x);
    let bad = -1;
    for (let i = 0; i < probes.length && bad < 0; i++) if (mine[i] !== bf16ByHalves(probes[i])) bad = i;
    expect(
      bad < 0
        ? "none"
        : `0x${probes[bad].toString(16)}: mine 0x${mine[bad].toString(16)}, oracle 0x${
          bf16ByHalves(probes[bad]).toString(16)
        }`,
    ).toBe("none");
    expect(mine.length).toBe(65536 * 8);
    for (let i = 0; i < 4096; i++) expect(bf16Bits(probes[i * 128])).toBe(bf16ByHalves(probes[i * 128]));
  });

  test("the same patterns: ferry equals llama.cpp's ggml_fp32_to_bf16_row_ref on every non-NaN, and on NaN up to ggml's forced quiet bit", () => {
    const ggml = openGgml();
    try {
      const theirs = ggml.toBf16(x), mine = f32ToBf16(x);
      expect(theirs.length).toBe(mine.length);
      let bad = -1, nans = 0;
      for (let i = 0; i < probes.length && bad < 0; i++) {
        if (Number.isNaN(x[i])) {
          nans++;
          // ggml sets the quiet bit on every NaN; ferry keeps a signalling NaN's top payload as it is.
          if ((mine[i] | 0x40) !== theirs[i] || !isNaNBf(mine[i])) bad = i;
        } else if (mine[i] !== theirs[i]) bad = i;
      }
      expect(
        bad < 0
          ? "none"
          : `0x${probes[bad].toString(16)}: mine 0x${mine[bad].toString(16)}, ggml 0x${
            theirs[bad].toString(16)
          }`,
      ).toBe("none");
      expect(nans).toBeGreaterThan(1000);
    } finally {
      ggml.close();
    }
  });

  test("a table of cases derived by hand", () => {
    const cases: Array<[number, number, string]> = [
      [0x3f800000, 0x3f80, "1.0 is exact"],
      [0x3f808000, 0x3f80, "1 + 2^-8 is halfway between 1 and 1 + 2^-7: the tie goes to the even 0x3f80"],
      [0x3f818000, 0x3f82, "halfway above the odd 0x3f81: up to the even 0x3f82"],
      [0x3f808001, 0x3f81, "one f32 ulp past the tie: up"],
      [0x3f807fff, 0x3f80, "one f32 ulp before the tie: down"],
      [0x3fffffff, 0x4000, "1.99999988: the carry runs through the mantissa into the exponent (2.0)"],
      [0x7f7f7fff, 0x7f7f, "just under the midpoint above bf16's largest finite: stays finite"],
      [0x7f7f8000, 0x7f80, "the midpoint above the largest finite (odd 0x7f7f): rounds to +inf"],
      [0x7f7fffff, 0x7f80, "f32's largest finite overflows bf16 to +inf"],
      [0xff7fffff, 0xff80, "and its negative to -inf"],
      [0x00000001, 0x0000, "the smallest f32 subnormal rounds to +0"],
      [0x80000001, 0x8000, "and its negative to -0: the sign survives"],
      [0x00008000, 0x0000, "the tie between 0 and bf16's smallest subnormal goes to the even 0"],
      [0x00018000, 0x0002, "the tie above the odd subnormal 0x0001 goes to 0x0002"],
      [0x007fffff, 0x0080, "the largest f32 subnormal rounds up into bf16's smallest normal"],
      [0x80000000, 0x8000, "-0 stays -0"],
      [0x7f800000, 0x7f80, "+inf"],
      [0x7fc00000, 0x7fc0, "the quiet NaN"],
      [0x7f800001, 0x7fc0, "a NaN whose payload is only in the dropped half: made quiet so it stays NaN"],
      [0xffa00000, 0xffa0, "a negative signalling NaN with a top payload: sign and payload kept"],
      [0x7fffffff, 0x7fff, "the NaN with every payload bit set: never rounded up into the sign"],
    ];
    const got = f32ToBf16(f32(cases.map((c) => c[0])));
    expect(cases.map(([b, , why], i) => `0x${b.toString(16)} → 0x${got[i].toString(16)} (${why})`))
      .toEqual(cases.map(([b, want, why]) => `0x${b.toString(16)} → 0x${want.toString(16)} (${why})`));
    for (const [b, want] of cases) expect(bf16ByHalves(b)).toBe(want); // the oracle agrees with the hand
  });
});

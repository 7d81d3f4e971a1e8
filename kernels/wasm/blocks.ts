// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * GGUF's quantized blocks as kernels/wasm/packed.ts keeps them: a matrix's blocks, the same bytes, laid
 * out in panels of NR = 8 output rows as the products stream them, and the kernels that multiply by
 * them, dequantizing in registers. llama.cpp's block layouts (documented facts, read here, not code):
 *
 * - Q8_0 (34 bytes per 32 values): f16 d, 32 int8 q; value q·d.
 * - Q4_0 (18 bytes per 32): f16 d, 16 bytes; byte j holds value j (low nibble) and j + 16 (high);
 *   value (q − 8)·d.
 * - IQ4_NL (18 bytes per 32): Q4_0's bytes; value d·book[q] (`IQ4NL_BOOK`).
 * - Q4_K (144 bytes per 256): f16 d, f16 dmin, 12 bytes of eight 6-bit scales and mins (ggml's
 *   get_scale_min_k4), 128 bytes of nibbles (each 64 values: 32 bytes, low nibbles the first 32);
 *   value f32(f32(d·scale)·q) − f32(dmin·min).
 * - Q6_K (210 bytes per 256): 128 bytes of low nibbles, 64 of high bit pairs, 16 int8 scales (one per
 *   16 values), f16 d; value f32(d·scale)·(q − 32).
 *
 * Each value is one f32 rounding (or, for Q4_K, the same three) of exact inputs, as quantize/quants*.ts
 * computes it, so a product over the blocks gives the bits of the same product over the f32 values
 * dequantized at load: the kernels compute each value with the same f32 operations, then multiply and
 * add in the f32 kernels' order.
 *
 * A panel is the matrix's 8 rows' blocks, block by block: one "group" per block of 32 (or 256) values,
 * 8 × the block's bytes, laid out for 16-byte loads (rows r = 0..7 of the panel, k within the block):
 *
 * - scales: the 8 rows' f16 side by side (Q4_K: d, then dmin; Q6_K: d, then per 16-value sub-block
 *   the 8 rows' int8 scales; Q4_K: per 32-value sub-block 12 bytes, byte r = scale_r | (min_r >> 4) << 6,
 *   bytes 8..11 the mins' low nibbles, rows 0-3 low and 4-7 high);
 * - codes, 32 values ("a run") at a time: Q8_0, k-major, 8 bytes per k; 4-bit codes 16 bytes per
 *   4 k, byte 8h + r holding k = 4c + h (low nibble) and k = 4c + 2 + h (high); Q6_K's high bit pairs
 *   after its run's nibbles, 16 bytes per 8 k, byte 8p + r holding in bits 2t, 2t + 1 those of
 *   k = 8g + 2t + p.
 *
 * So one 16-byte load gives 2 (Q8_0) or 4 k of all 8 rows, and each k widens to two f32x4 (rows 0-3,
 * rows 4-7) by the same few operations whatever the type.
 *
 * @example
 * ```ts
 * import { BLOCK_TYPES, panelBytes } from "./blocks.ts";
 * BLOCK_TYPES.q4_0;        // { values: 32, bytes: 18 }
 * panelBytes("q4_0", 1024); // 8 rows × 32 blocks × 18 bytes = 4608
 * ```
 * @module
 */
import { type Code, fn, type Func, I32, op, V128 } from "./asm.ts";
import { bump, forLoop, locals, NR } from "./gen.ts";

const { get, set } = op;

/** The GGUF block types the packed store keeps as they are (ggml's names, lower case). */
export type BlockDtype = "q8_0" | "q4_0" | "iq4_nl" | "q4_k" | "q6_k";

/** ggml's `kvalues_iq4nl`: the 16 levels an IQ4_NL code indexes, in units of the block's scale. */
export const IQ4NL_BOOK: readonly number[] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/** Q4_0's levels, q − 8, as a table like IQ4_NL's (`blockRow` reads both alike). */
const Q4_0_BOOK = Array.from({ length: 16 }, (_, q) => q - 8);

/** Per block type: values per block (along K), and bytes per block (one row's, as in the file). */
export const BLOCK_TYPES: Readonly<Record<BlockDtype, { values: number; bytes: number }>> = {
  q8_0: { values: 32, bytes: 34 },
  q4_0: { values: 32, bytes: 18 },
  iq4_nl: { values: 32, bytes: 18 },
  q4_k: { values: 256, bytes: 144 },
  q6_k: { values: 256, bytes: 210 },
};

/** Whether a dtype name is one of `BLOCK_TYPES`. */
export const isBlockDtype = (dtype: string): dtype is BlockDtype => Object.hasOwn(BLOCK_TYPES, dtype);

/** Bytes of one panel (8 rows) of a matrix with K inputs: K / values groups of 8 blocks. */
export const panelBytes = (dtype: BlockDtype, K: number): number =>
  (K / BLOCK_TYPES[dtype].values) * NR * BLOCK_TYPES[dtype].bytes;

// Byte offsets inside one group (8 rows' block).
/** Q4_K: d, dmin, the sub-blocks' scale records (12 bytes each), the runs' nibbles (128 bytes each). */
const Q4K = { dmin: 16, scales: 32, codes: 128 };
/** Q6_K: d, the sub-blocks' int8 scales (8 bytes each), the runs' codes (192 bytes each). */
const Q6K = { scales: 16, codes: 144 };

// ─── Layout: the file's blocks into panels, and a row back out ─────────────────────────────────────────

/** Where value k (0..31) of row r of a run's 4-bit codes lies: byte offset and shift. */
const nibbleAt = (k: number, r: number): number => 16 * (k >> 2) + 8 * (k & 1) + r;
const nibbleShift = (k: number): number => (k & 2) << 1;

/** Q6_K's 6-bit code of value v (0..255) of the block at `s`. */
function q6Code(src: Uint8Array, s: number, v: number): number {
  const h = v >> 7, l = v & 31, quarter = (v >> 5) & 3;
  const ql = s + 64 * h + (quarter & 1) * 32 + l, qh = src[s + 128 + 32 * h + l];
  return ((quarter < 2 ? src[ql] & 15 : src[ql] >> 4) | (((qh >> (2 * quarter)) & 3) << 4));
}

/** Q4_K's sub-block j scale and min from the 12 bytes at `at` (ggml's get_scale_min_k4). */
function q4kScaleMin(src: Uint8Array, at: number, j: number): [number, number] {
  if (j < 4) return [src[at + j] & 63, src[at + j + 4] & 63];
  const lo = src[at + j + 4];
  return [(lo & 15) | ((src[at + j - 4] >> 6) << 4), (lo >> 4) | ((src[at + j] >> 6) << 4)];
}

/** Whether the f16 at `at` is infinite or NaN (exponent all ones). */
const f16NotFinite = (src: Uint8Array, at: number): boolean => (src[at + 1] & 0x7c) === 0x7c;

/**
 * Writes row r's block (the file's bytes at `s`) into its group at `g` of `dst`, which holds zeros
 * where codes are ORed in. Returns false when a scale is not finite (the kernels widen only finite f16).
 */
export function placeBlock(dtype: BlockDtype, src: Uint8Array, s: number, dst: Uint8Array, g: number, r: number): boolean {
  switch (dtype) {
    case "q8_0":
      dst[g + 2 * r] = src[s], dst[g + 2 * r + 1] = src[s + 1];
      for (let k = 0; k < 32; k++) dst[g + 16 + 8 * k + r] = src[s + 2 + k];
      return !f16NotFinite(src, s);
    case "q4_0":
    case "iq4_nl":
      dst[g + 2 * r] = src[s], dst[g + 2 * r + 1] = src[s + 1];
      for (let j = 0; j < 16; j++) {
        const b = src[s + 2 + j];
        dst[g + 16 + nibbleAt(j, r)] |= (b & 15) << nibbleShift(j);
        dst[g + 16 + nibbleAt(j + 16, r)] |= (b >> 4) << nibbleShift(j + 16);
      }
      return !f16NotFinite(src, s);
    case "q4_k":
      dst[g + 2 * r] = src[s], dst[g + 2 * r + 1] = src[s + 1]; // d
      dst[g + Q4K.dmin + 2 * r] = src[s + 2], dst[g + Q4K.dmin + 2 * r + 1] = src[s + 3];
      for (let j = 0; j < 8; j++) {
        const [sc, m] = q4kScaleMin(src, s + 4, j), rec = g + Q4K.scales + 12 * j;
        dst[rec + r] = sc | ((m >> 4) << 6);
        dst[rec + 8 + (r & 3)] |= (m & 15) << (r & 4);
        const chunk = s + 16 + 32 * (j >> 1), shift = 4 * (j & 1), run = g + Q4K.codes + 128 * j;
        for (let k = 0; k < 32; k++) dst[run + nibbleAt(k, r)] |= ((src[chunk + k] >> shift) & 15) << nibbleShift(k);
      }
      return !f16NotFinite(src, s) && !f16NotFinite(src, s + 2);
    case "q6_k":
      dst[g + 2 * r] = src[s + 208], dst[g + 2 * r + 1] = src[s + 209];
      for (let sb = 0; sb < 16; sb++) dst[g + Q6K.scales + 8 * sb + r] = src[s + 192 + sb];
      for (let v = 0; v < 256; v++) {
        const q = q6Code(src, s, v), k = v & 31, run = g + Q6K.codes + 192 * (v >> 5);
        dst[run + nibbleAt(k, r)] |= (q & 15) << nibbleShift(k);
        dst[run + 128 + 16 * (k >> 3) + 8 * (k & 1) + r] |= (q >> 4) << (2 * ((k & 7) >> 1));
      }
      return !f16NotFinite(src, s + 208);
  }
}

/** The f16 with these bits, exactly. */
function f16Value(bits: number): number {
  const e = (bits >> 10) & 31, m = bits & 1023, sign = bits & 0x8000 ? -1 : 1;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1024 + m) * 2 ** (e - 25);
}

const f32 = Math.fround;

/**
 * Row r of the panel at byte `at` of `mem` (K inputs) as f32 into out[o .. o + K): each value computed
 * as quantize/quants*.ts dequantizes it (the same roundings), so exactly what a load to f32 gives.
 */
export function blockRow(dtype: BlockDtype, mem: Uint8Array, at: number, K: number, r: number, out: Float32Array, o: number): void {
  const { values, bytes } = BLOCK_TYPES[dtype], f16 = (i: number) => f16Value(mem[i] | (mem[i + 1] << 8));
  const nibble = (run: number, k: number) => (mem[run + nibbleAt(k, r)] >> nibbleShift(k)) & 15;
  for (let b = 0; b < K / values; b++) {
    const g = at + b * NR * bytes, v0 = o + b * values;
    if (dtype === "q8_0") {
      const d = f16(g + 2 * r);
      for (let k = 0; k < 32; k++) out[v0 + k] = ((mem[g + 16 + 8 * k + r] << 24) >> 24) * d;
    } else if (dtype === "q4_0" || dtype === "iq4_nl") {
      const d = f16(g + 2 * r), book = dtype === "q4_0" ? Q4_0_BOOK : IQ4NL_BOOK;
      for (let k = 0; k < 32; k++) out[v0 + k] = book[nibble(g + 16, k)] * d;
    } else if (dtype === "q4_k") {
      const d = f16(g + 2 * r), dmin = f16(g + Q4K.dmin + 2 * r);
      for (let j = 0; j < 8; j++) {
        const rec = g + Q4K.scales + 12 * j, packed = mem[rec + r];
        const sc = packed & 63, m = ((packed >> 6) << 4) | ((mem[rec + 8 + (r & 3)] >> (r & 4)) & 15);
        const dl = f32(d * sc), ml = f32(dmin * m);
        for (let k = 0; k < 32; k++) out[v0 + 32 * j + k] = f32(dl * nibble(g + Q4K.codes + 128 * j, k)) - ml;
      }
    } else {
      const d = f16(g + 2 * r);
      for (let v = 0; v < 256; v++) {
        const k = v & 31, run = g + Q6K.codes + 192 * (v >> 5);
        const high = (mem[run + 128 + 16 * (k >> 3) + 8 * (k & 1) + r] >> (2 * ((k & 7) >> 1))) & 3;
        const sc = f32(d * ((mem[g + Q6K.scales + 8 * (v >> 4) + r] << 24) >> 24));
        out[v0 + v] = sc * ((nibble(run, k) | (high << 4)) - 32);
      }
    }
  }
}

// ─── Kernels ─────────────────────────────────────────────────────────────────────────────────────────

type Locals = ReturnType<typeof locals>;

/**
 * The v128 constants a kernel reads, each set once into a local at the kernel's start (`init`): V8
 * builds a `v128.const` again at every use, several instructions each, inside the unrolled loops.
 */
function constants(L: Locals) {
  const byBytes = new Map<string, number>(), init: Code[] = [];
  const of = (bytes: Uint8Array): Code => {
    const key = bytes.join();
    if (!byBytes.has(key)) {
      const local = L.local(V128);
      byBytes.set(key, local);
      init.push(op.v128_const(bytes), set(local));
    }
    return get(byBytes.get(key)!);
  };
  return {
    init,
    of,
    /** Every byte `n`. */
    bytes: (n: number) => of(new Uint8Array(16).fill(n)),
    /** Every 32-bit lane `n`. */
    words: (n: number) => of(new Uint8Array(Uint32Array.from([n, n, n, n]).buffer)),
    /** Every f32 lane `x`. */
    floats: (x: number) => of(new Uint8Array(Float32Array.from([x, x, x, x]).buffer)),
  };
}
type Constants = ReturnType<typeof constants>;

/**
 * Rows 0-3 (`high` false) or 4-7 of the 8 f16 in the v128 on the stack, as f32x4, exactly: the f16's
 * sign-extended bits shifted into f32's places (sign, then the 5-bit exponent at the bottom of f32's
 * 8, the mantissa's 10 at the top of its 23), the three bits the sign's copies left above the exponent
 * cleared, then times 2^112 (f32's exponent bias less f16's), exact for normal and subnormal f16 alike.
 * Infinities and NaN are not (`placeBlock` refuses them).
 */
const f16Lanes = (c: Constants, high: boolean): Code => [
  high ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s,
  op.i32(13), op.i32x4_shl,
  c.words(0x8fffffff), op.v128_and,
  c.floats(2 ** 112), op.f32x4_mul,
];

/** What a kernel keeps of one panel while it decodes a run: its codes' address and the run's scales. */
interface PanelState {
  codes: number;
  /** Scales (rows 0-3, 4-7) of the codes in `lo` (Q4_K: d·scale; Q6_K: the run's first 16 values'). */
  s0: number;
  s1: number;
  /**
   * Scales of the codes in `hi`: Q4_0's and Q4_K's high nibbles are read in place, 16 times their
   * code, so these are s / 16 (exact: a power of two); Q6_K: the scales of the run's last 16 values.
   */
  u0: number;
  u1: number;
  /** Q4_K: dmin·min. */
  m0: number;
  m1: number;
  /** Codes of the current 2 or 4 k (low nibbles' levels, high nibbles'), and Q6_K's high pairs. */
  lo: number;
  hi: number;
  pairs: number;
  /** The k's codes widened to i16, and its values: rows 0-3 and 4-7. */
  wide: number;
  v0: number;
  v1: number;
}

function panelState(L: Locals): PanelState {
  const codes = L.local(I32);
  const [s0, s1, u0, u1, m0, m1, lo, hi, pairs, wide, v0, v1] = Array.from({ length: 12 }, () => L.local(V128));
  return { codes, s0, s1, u0, u1, m0, m1, lo, hi, pairs, wide, v0, v1 };
}

/**
 * The start of run `r` (an i32 local: 0 for the 32-value types) of the group at `base` (an i32 local):
 * sets the panel's codes address and its run's scales.
 */
function runStart(dtype: BlockDtype, c: Constants, s: PanelState, base: number, r: number): Code {
  const d = (at: number, high: boolean): Code => [get(base), op.v128_load(at), f16Lanes(c, high)];
  const at = (offset: number, stride: number): Code => [get(base), op.i32(offset), op.i32_add, get(r), op.i32(stride), op.i32_mul, op.i32_add];
  const sixteenths: Code = [get(s.s0), c.floats(1 / 16), op.f32x4_mul, set(s.u0), get(s.s1), c.floats(1 / 16), op.f32x4_mul, set(s.u1)];
  switch (dtype) {
    case "q8_0":
    case "q4_0":
    case "iq4_nl":
      return [
        d(0, false), set(s.s0), d(0, true), set(s.s1), get(base), op.i32(16), op.i32_add, set(s.codes),
        dtype === "q4_0" ? sixteenths : [],
      ];
    case "q4_k": {
      // The record's bytes 0-7: scale_r | (min_r >> 4) << 6; bytes 8-11: min low nibbles, rows 0-3 low.
      const rec = s.pairs, sc = s.lo, mn = s.hi;
      const mins = [8, 9, 10, 11, 24, 25, 26, 27, 0, 0, 0, 0, 0, 0, 0, 0];
      const scaled = (x: number, dAt: number, h: boolean): Code => [
        get(x), op.i16x8_extend_low_i8x16_u, h ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s,
        op.f32x4_convert_i32x4_s, d(dAt, h), op.f32x4_mul,
      ];
      return [
        at(Q4K.scales, 12), op.v128_load(), set(rec),
        get(rec), c.bytes(63), op.v128_and, set(sc),
        get(rec), c.bytes(15), op.v128_and, get(rec), op.i32(4), op.i8x16_shr_u, op.i8x16_shuffle(mins),
        get(rec), op.i32(6), op.i8x16_shr_u, op.i32(4), op.i8x16_shl, op.v128_or, set(mn),
        // d·scale times the code, less dmin·min: the scales' products, once a run (exact inputs, one rounding).
        scaled(sc, 0, false), set(s.s0), scaled(sc, 0, true), set(s.s1), sixteenths,
        scaled(mn, Q4K.dmin, false), set(s.m0), scaled(mn, Q4K.dmin, true), set(s.m1),
        at(Q4K.codes, 128), set(s.codes),
      ];
    }
    case "q6_k": {
      const scales = s.pairs;
      const scaled = (lowHalf: boolean, h: boolean): Code => [
        get(scales), lowHalf ? op.i16x8_extend_low_i8x16_s : op.i16x8_extend_high_i8x16_s,
        h ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s, op.f32x4_convert_i32x4_s, d(0, h), op.f32x4_mul,
      ];
      return [
        at(Q6K.scales, 16), op.v128_load(), set(scales),
        scaled(true, false), set(s.s0), scaled(true, true), set(s.s1),
        scaled(false, false), set(s.u0), scaled(false, true), set(s.u1),
        at(Q6K.codes, 192), set(s.codes),
      ];
    }
  }
}

/**
 * The 16 bytes of codes of 4 k at `s.codes` + `at` into s.lo (the low nibbles: k, k + 1) and s.hi
 * (the high: k + 2, k + 3), as the signed levels (or Q4_K's unsigned codes) the widening reads.
 */
function nibbleLevels(dtype: BlockDtype, c: Constants, s: PanelState, at: number, k: number): Code {
  const v = s.hi, load = [get(s.codes), op.v128_load(at), set(v)];
  const low = [get(v), c.bytes(15), op.v128_and];
  switch (dtype) {
    case "q4_0":
      // q − 8; the high nibble in place, 16 (q − 8) = (16 q) xor 0x80 as a signed byte (scaled by u = d / 16).
      return [load, low, c.bytes(8), op.i8x16_sub, set(s.lo), get(v), c.bytes(0xf0), op.v128_and, c.bytes(0x80), op.v128_xor, set(s.hi)];
    case "q4_k":
      return [load, low, set(s.lo), get(v), c.bytes(0xf0), op.v128_and, set(s.hi)];
    case "iq4_nl": {
      const book = c.of(new Uint8Array(Int8Array.from(IQ4NL_BOOK).buffer));
      return [load, book, low, op.i8x16_swizzle, set(s.lo), book, get(v), op.i32(4), op.i8x16_shr_u, op.i8x16_swizzle, set(s.hi)];
    }
    default: {
      // Q6_K: high pair t of the 8 k's (bits 2t, 2t + 1) to bits 4, 5, then less 32; k and k + 1 take
      // pair t, k + 2 and k + 3 pair t + 1.
      const t = (k & 7) >> 1;
      const level = (nibbles: Code, t: number): Code => {
        const shift = 4 - 2 * t;
        const pairs = shift > 0 ? [get(s.pairs), op.i32(shift), op.i8x16_shl] : shift < 0 ? [get(s.pairs), op.i32(-shift), op.i8x16_shr_u] : [get(s.pairs)];
        return [nibbles, pairs, c.bytes(0x30), op.v128_and, op.v128_or, c.bytes(32), op.i8x16_sub];
      };
      return [load, level(low, t), set(s.lo), level([get(v), op.i32(4), op.i8x16_shr_u], t + 1), set(s.hi)];
    }
  }
}

/** Value k (0..31) of the run, rows 0-3 into s.v0 and 4-7 into s.v1; called for k in order. */
function runValue(dtype: BlockDtype, c: Constants, s: PanelState, k: number): Code {
  const out: Code[] = [];
  if (dtype === "q8_0") {
    if (k % 2 === 0) out.push(get(s.codes), op.v128_load(16 * (k >> 1)), set(s.lo));
  } else {
    if (dtype === "q6_k" && k % 8 === 0) out.push(get(s.codes), op.v128_load(128 + 16 * (k >> 3)), set(s.pairs));
    if (k % 4 === 0) out.push(nibbleLevels(dtype, c, s, 16 * (k >> 2), k));
  }
  const codes = dtype === "q8_0" || k % 4 < 2 ? s.lo : s.hi, high = k % 2 === 1, signed = dtype !== "q4_k";
  const widen = signed
    ? (high ? op.i16x8_extend_high_i8x16_s : op.i16x8_extend_low_i8x16_s)
    : (high ? op.i16x8_extend_high_i8x16_u : op.i16x8_extend_low_i8x16_u);
  const inHi = dtype === "q6_k" ? k >= 16 : (dtype === "q4_0" || dtype === "q4_k") && k % 4 >= 2;
  const [a, b] = inHi ? [s.u0, s.u1] : [s.s0, s.s1];
  // value = code·scale (Q4_K: then less dmin·min): f32 operations on exact inputs, one rounding each
  const finish = (scale: number, min: number): Code =>
    dtype === "q4_k" ? [get(scale), op.f32x4_mul, get(min), op.f32x4_sub] : [get(scale), op.f32x4_mul];
  out.push(
    get(codes), widen, set(s.wide),
    get(s.wide), op.i32x4_extend_low_i16x8_s, op.f32x4_convert_i32x4_s, finish(a, s.m0), set(s.v0),
    get(s.wide), op.i32x4_extend_high_i16x8_s, op.f32x4_convert_i32x4_s, finish(b, s.m1), set(s.v1),
  );
  return out;
}

/**
 * The loops every block kernel shares: for each block of the panels at `bases` (i32 locals, advanced
 * by a group each block), for each 32-value run: `perRun` once, then `perK(k)` for k = 0..31.
 */
function overBlocks(dtype: BlockDtype, L: Locals, K: number, bases: number[], perRun: (r: number) => Code, perK: (k: number) => Code): Code {
  const { values, bytes } = BLOCK_TYPES[dtype];
  const blk = L.local(I32), r = L.local(I32);
  return forLoop(blk, op.i32(0), [get(K), op.i32(values), op.i32_div_u], 1, [
    forLoop(r, op.i32(0), op.i32(values / 32), 1, [perRun(r), Array.from({ length: 32 }, (_, k) => perK(k))]),
    bases.map((b) => bump(b, op.i32(NR * bytes))),
  ]);
}

/**
 * Panels the one-row block product runs at once. One: a panel's decoding keeps a dozen vectors live, and
 * with two panels' (and their sums) JavaScriptCore spilled past x86's 16 registers and ran at half speed;
 * the decoding's own operations keep the adder busy without more chains of sums.
 */
export const GEMV_BLOCK_PANELS = 1;

/**
 * gemv_panels_DTYPE(pa, pb, groups, K, c): kernels/wasm/gen.ts `gemvPanels` over panels of `dtype`'s
 * blocks: the one-row product over `groups` × `panels` whole panels (A packed by `pack_a` with MR = 1),
 * C's row at `c` written. Each weight is dequantized in registers (`runValue`), then multiplied and added
 * as `gemvPanels` does: each output the same f32 sum in the same k order, so the same bits as over the
 * f32 panels the blocks dequantize to.
 */
export function gemvBlocks(dtype: BlockDtype, panels = GEMV_BLOCK_PANELS): Func {
  const [pa, pb, groups, K, c] = [0, 1, 2, 3, 4];
  const L = locals(5), consts = constants(L);
  const g = L.local(I32), a = L.local(I32), panel = L.local(I32), out = L.local(I32), av = L.local(V128);
  const b = Array.from({ length: panels }, () => L.local(I32));
  const st = b.map(() => panelState(L));
  const acc = Array.from({ length: 2 * panels }, () => L.local(V128));
  const mac = (j: number): Code => [
    get(acc[2 * j]), get(av), get(st[j].v0), op.f32x4_mul, op.f32x4_add, set(acc[2 * j]),
    get(acc[2 * j + 1]), get(av), get(st[j].v1), op.f32x4_mul, op.f32x4_add, set(acc[2 * j + 1]),
  ];
  const loops = overBlocks(
    dtype, L, K, b,
    (r) => st.map((s, j) => runStart(dtype, consts, s, b[j], r)),
    (k) => [
      get(a), op.v128_load(16 * k), set(av),
      st.map((s, j) => [runValue(dtype, consts, s, k), mac(j)]),
      k === 31 ? bump(a, op.i32(16 * 32)) : [],
    ],
  );
  return fn([I32, I32, I32, I32, I32], [], L.types, [
    consts.init,
    get(K), op.i32(BLOCK_TYPES[dtype].values), op.i32_div_u, op.i32(NR * BLOCK_TYPES[dtype].bytes), op.i32_mul, set(panel),
    get(c), set(out),
    forLoop(g, op.i32(0), get(groups), 1, [
      b.map((p, j) => [get(pb), get(panel), op.i32(j), op.i32_mul, op.i32_add, set(p)]),
      acc.map((x) => [op.v128_const(new Uint8Array(16)), set(x)]),
      get(pa), set(a),
      loops,
      acc.map((x, i) => [get(out), get(x), op.v128_store(16 * i)]),
      bump(out, op.i32(4 * NR * panels)),
      bump(pb, [get(panel), op.i32(panels), op.i32_mul]),
    ]),
  ]);
}

/**
 * unpack_DTYPE(src, K, panels, dst): `panels` panels of `dtype`'s blocks at `src` dequantized into
 * kernels/wasm/gen.ts `pack_b`'s f32 panels at `dst` (8 values per k), exactly the f32 values a load
 * would have packed: what prefill's tile and the one-row product's last panel run on.
 */
export function unpackBlocks(dtype: BlockDtype): Func {
  const [src, K, panels, dst] = [0, 1, 2, 3];
  const L = locals(4), consts = constants(L);
  const p = L.local(I32), s = panelState(L);
  const loops = overBlocks(dtype, L, K, [src], (r) => runStart(dtype, consts, s, src, r), (k) => [
    runValue(dtype, consts, s, k),
    get(dst), get(s.v0), op.v128_store(32 * k), get(dst), get(s.v1), op.v128_store(32 * k + 16),
    k === 31 ? bump(dst, op.i32(32 * 32)) : [],
  ]);
  return fn([I32, I32, I32, I32], [], L.types, [consts.init, forLoop(p, op.i32(0), get(panels), 1, [loops])]);
}

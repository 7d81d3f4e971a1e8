// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * SIMD table look-ups for the integer engine: `i8x16.swizzle` reads a 16-entry byte table at 16
 * indices at once, the operation at the heart of 4-bit LUT inference. This file offers the piece the
 * integer engine's 4-bit projection (kernels/int/gemv.ts on branch `int`, step 1) needs, as a
 * WebAssembly function built with kernels/wasm/asm.ts, and nothing else of the engine.
 *
 * `lut16_rows(tabs, codes, cols, out)`: for 16 rows r at once,
 *   out[r] = sum over c < cols of tab_c[code(r, c)]            (exact int32; cols <= 128)
 * where tab_c is a 16-entry table of integers in [-2^23, 2^23) (for gemv: tab_c[u] = (u - 8) * x_c).
 * Each table is stored as three 16-byte planes (`lutPlanes`): bits 0-7 and 8-15 as unsigned bytes,
 * bits 16-23 as a signed byte. Each plane is looked up with one swizzle, widened to 16 bits and summed
 * over the columns (at most 128 * 255 < 2^15, so no 16-bit sum overflows), and the row total is put
 * back together as lo + (mid << 8) + (hi << 16) in 32 bits. `codes` holds, per column, the 16 rows'
 * codes (0..15) in 16 bytes; `tabs` the column's three planes in 48 bytes.
 *
 * Opcodes used, and no others (`LUT_OPCODES`): integer locals, adds, compares and branches for the
 * loop; v128 load/store; i8x16.swizzle; i16x8 widening and add; i32x4 widening, add and shift left.
 * No multiply, no divide, no float: the classes the integer engine's audit forbids.
 *
 * @example
 * ```ts
 * const planes = new Uint8Array(48 * cols); lutPlanes(tab, cols, planes);
 * // copy planes and codes into the instance's memory, then: exports.lut16_rows(tabsAt, codesAt, cols, outAt)
 * ```
 * @module
 */
import { type Code, fn, type Func, I32, op, V128 } from "./asm.ts";

const { get, set } = op;

/** The opcodes `lut16_rows` is made of, by class, for an audit to check against. */
export const LUT_OPCODES = {
  control: ["block", "loop", "br_if", "br", "end"],
  locals: ["local.get", "local.set"],
  integer: ["i32.const", "i32.add", "i32.ge_s"],
  memory: ["v128.load", "v128.store"],
  simd: [
    "v128.const", "i8x16.swizzle", "i16x8.extend_low_i8x16_u", "i16x8.extend_high_i8x16_u", "i16x8.extend_low_i8x16_s",
    "i16x8.extend_high_i8x16_s", "i16x8.add", "i32x4.extend_low_i16x8_u", "i32x4.extend_high_i16x8_u",
    "i32x4.extend_low_i16x8_s", "i32x4.extend_high_i16x8_s", "i32x4.add", "i32x4.shl",
  ],
} as const;

/**
 * Splits `cols` 16-entry tables (`tab[16c + u]`, each in [-2^23, 2^23)) into the byte planes
 * `lut16_rows` reads: 48 bytes per column, lo, mid, hi.
 */
export function lutPlanes(tab: Int32Array, cols: number, planes: Uint8Array): void {
  for (let c = 0; c < cols; c++) {
    for (let u = 0; u < 16; u++) {
      const v = tab[16 * c + u];
      planes[48 * c + u] = v & 255;
      planes[48 * c + 16 + u] = (v >> 8) & 255;
      planes[48 * c + 32 + u] = (v >> 16) & 255; // read back as a signed byte
    }
  }
}

/** The function `lut16_rows(tabs, codes, cols, out)` (byte addresses; see the module comment). */
export function lut16Rows(): Func {
  const [tabs, codes, cols, out] = [0, 1, 2, 3];
  const c = 4, t = 5, k = 6;
  const [lo0, lo1, mid0, mid1, hi0, hi1, idx, v] = [7, 8, 9, 10, 11, 12, 13, 14];
  const zero = op.v128_const(new Uint8Array(16));
  // Look up one plane at the column's codes and add its two halves into a pair of 16-bit sums.
  const plane = (offset: number, a: number, b: number, signed: boolean): Code => [
    get(t), op.v128_load(offset), get(idx), op.i8x16_swizzle, set(v),
    get(a), get(v), signed ? op.i16x8_extend_low_i8x16_s : op.i16x8_extend_low_i8x16_u, op.i16x8_add, set(a),
    get(b), get(v), signed ? op.i16x8_extend_high_i8x16_s : op.i16x8_extend_high_i8x16_u, op.i16x8_add, set(b),
  ];
  // Four rows' totals from the 16-bit sums: lo + (mid << 8) + (hi << 16).
  const rows = (lo: number, mid: number, hi: number, high: boolean, at: number): Code => [
    get(out),
    get(lo), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u,
    get(mid), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u, op.i32(8), op.i32x4_shl, op.i32x4_add,
    get(hi), high ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s, op.i32(16), op.i32x4_shl, op.i32x4_add,
    op.v128_store(at),
  ];
  return fn([I32, I32, I32, I32], [], [I32, I32, I32, V128, V128, V128, V128, V128, V128, V128, V128], [
    [lo0, lo1, mid0, mid1, hi0, hi1].map((x) => [zero, set(x)]),
    get(tabs), set(t),
    get(codes), set(k),
    op.i32(0), set(c),
    op.block([op.loop([
      get(c), get(cols), op.i32_ge_s, op.br_if(1),
      get(k), op.v128_load(), set(idx),
      plane(0, lo0, lo1, false),
      plane(16, mid0, mid1, false),
      plane(32, hi0, hi1, true),
      get(t), op.i32(48), op.i32_add, set(t),
      get(k), op.i32(16), op.i32_add, set(k),
      get(c), op.i32(1), op.i32_add, set(c),
      op.br(0),
    ])]),
    rows(lo0, mid0, hi0, false, 0),
    rows(lo0, mid0, hi0, true, 16),
    rows(lo1, mid1, hi1, false, 32),
    rows(lo1, mid1, hi1, true, 48),
  ]);
}

// Names and immediates of the opcodes a census can meet: one byte, or 0xfd and a LEB128 sub-opcode.
const NAMES: Record<string, string> = {
  "02": "block", "03": "loop", "04": "if", "05": "else", "0b": "end", "0c": "br", "0d": "br_if",
  "20": "local.get", "21": "local.set", "22": "local.tee", "41": "i32.const",
  "4e": "i32.ge_s", "6a": "i32.add", "6b": "i32.sub", "6c": "i32.mul",
  "fd00": "v128.load", "fd0b": "v128.store", "fd0c": "v128.const", "fd0e": "i8x16.swizzle",
  "fd87": "i16x8.extend_low_i8x16_s", "fd88": "i16x8.extend_high_i8x16_s",
  "fd89": "i16x8.extend_low_i8x16_u", "fd8a": "i16x8.extend_high_i8x16_u", "fd8e": "i16x8.add",
  "fda7": "i32x4.extend_low_i16x8_s", "fda8": "i32x4.extend_high_i16x8_s",
  "fda9": "i32x4.extend_low_i16x8_u", "fdaa": "i32x4.extend_high_i16x8_u",
  "fdab": "i32x4.shl", "fdae": "i32x4.add", "fdb5": "i32x4.mul", "fde6": "f32x4.mul",
};

/**
 * Counts the opcodes of a function body (as `fn` built it), by name: the census an audit classifies.
 * An opcode outside the table above is counted as `unknown 0x..`, never skipped.
 */
export function opcodeCensus(f: Func): Map<string, number> {
  const b: number[] = [];
  const flat = (c: Code) => (typeof c === "number" ? b.push(c) : c.forEach(flat));
  f.body.forEach(flat);
  const leb = (i: number) => { // returns [value, next index] of an unsigned LEB128
    let v = 0, shift = 0;
    while (b[i] & 0x80) v += (b[i++] & 0x7f) * 2 ** shift, shift += 7;
    return [v + b[i] * 2 ** shift, i + 1];
  };
  const census = new Map<string, number>();
  for (let i = 0; i < b.length;) {
    let key = b[i].toString(16).padStart(2, "0");
    i++;
    if (key === "fd") {
      const [sub, next] = leb(i);
      key += sub.toString(16).padStart(2, "0"), i = next;
    }
    const name = NAMES[key] ?? `unknown 0x${key}`;
    census.set(name, (census.get(name) ?? 0) + 1);
    if (["02", "03", "04"].includes(key)) i += 1; // block type
    else if (["0c", "0d", "20", "21", "22", "41"].includes(key)) i = leb(i)[1];
    else if (key === "fd00" || key === "fd0b") i = leb(leb(i)[1])[1]; // alignment, offset
    else if (key === "fd0c") i += 16;
  }
  return census;
}

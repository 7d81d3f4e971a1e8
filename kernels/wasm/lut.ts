// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * SIMD table look-ups for the integer engine: `i8x16.swizzle` reads a 16-entry byte table at 16
 * indices at once, the operation at the heart of 4-bit LUT inference. This file holds the look-up's
 * building blocks (`LutLocals`, `lutZero`, `lutTotals`, used by kernels/wasm/int-ops.ts, from which
 * the engine's functions are built), the standalone primitive `lut16_rows` they grew from, and the opcode
 * classification (`LUT_OPCODES`) and census (`opcodeCensus`) the engine's audit uses.
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
 * Its opcodes (all inside `LUT_OPCODES`): integer locals, adds, compares and branches for the loop;
 * v128 load/store; i8x16.swizzle; i16x8 widening and add; i32x4 widening, add and shift left. No
 * multiply, no divide, no float: the classes the integer engine's audit forbids.
 *
 * @example
 * ```ts
 * import { lutPlanes } from "./lut.ts";
 * const cols = 128, tab = new Int32Array(16 * cols); // tab[16c + u]: column c's table
 * const planes = new Uint8Array(48 * cols); lutPlanes(tab, cols, planes);
 * // copy planes and codes into the instance's memory, then: exports.lut16_rows(tabsAt, codesAt, cols, outAt)
 * ```
 * @module
 */
import { type Code, fn, type Func, I32, op, V128 } from "./asm.ts";

const { get, set } = op;

/**
 * The opcodes the integer engine's WebAssembly may use (`lut16_rows` here and the functions of
 * kernels/wasm/int-gemv.ts, int-attention.ts and int-vector.ts), by class, for the audit to check against: control flow, locals, integer
 * adds, subtractions, bitwise operations, shifts and compares, loads and stores, and SIMD moves, table
 * reads (`i8x16.swizzle`, `i8x16.shuffle`), widening, adds, subtractions, shifts, compares and masks.
 * Nothing that multiplies, divides or touches a float.
 */
export const LUT_OPCODES = {
  // `call` reaches only the module's own functions (it imports none), each of them audited here too.
  control: ["block", "loop", "if", "else", "br_if", "br", "end", "select", "call"],
  locals: ["local.get", "local.set"],
  integer: [
    "i32.const", "i32.add", "i32.sub", "i32.and", "i32.xor", "i32.shl", "i32.shr_s", "i32.shr_u",
    "i32.eqz", "i32.ge_s", "i32.gt_s", "i32.lt_s", "i32.le_s", "i32.ge_u", "i32.gt_u", "i32.clz",
  ],
  memory: ["v128.load", "v128.store", "v128.load32_splat", "i32.load", "i32.load8_u", "i32.store", "i32.store8"],
  simd: [
    "v128.const", "i8x16.swizzle", "i8x16.relaxed_swizzle", "i8x16.shuffle", "i8x16.splat", "i32x4.splat", "i32x4.extract_lane",
    "i8x16.extract_lane_u", "i8x16.max_u", "i8x16.eq",
    "i16x8.extend_low_i8x16_u", "i16x8.extend_high_i8x16_u", "i16x8.extend_low_i8x16_s",
    "i16x8.extend_high_i8x16_s", "i16x8.add", "i32x4.extend_low_i16x8_u", "i32x4.extend_high_i16x8_u",
    "i32x4.extend_low_i16x8_s", "i32x4.extend_high_i16x8_s", "i32x4.add", "i32x4.sub", "i32x4.shl",
    "i32x4.abs", "i32x4.min_s", "i32x4.max_s", "i32x4.max_u", "i16x8.narrow_i32x4_s", "i16x8.narrow_i32x4_u",
    "i8x16.narrow_i16x8_s", "i8x16.narrow_i16x8_u",
    "i32x4.shr_s", "i32x4.shr_u", "i8x16.add", "i8x16.sub", "i8x16.shr_u", "i8x16.gt_u", "i32x4.lt_s", "i32x4.gt_s", "v128.and", "v128.or",
    "v128.xor", "v128.bitselect",
    "v128.any_true",
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

/** Local indices of the six 16-bit sums, the code vector and the looked-up plane of one `lutColumn` run. */
export interface LutLocals {
  t: number;
  k: number;
  idx: number;
  v: number;
  lo0: number;
  lo1: number;
  mid0: number;
  mid1: number;
  hi0: number;
  hi1: number;
}

/** Zeroes the six 16-bit sums. */
export function lutZero(l: LutLocals): Code {
  const zero = op.v128_const(new Uint8Array(16));
  return [l.lo0, l.lo1, l.mid0, l.mid1, l.hi0, l.hi1].map((x) => [zero, set(x)]);
}

/**
 * One column of a 16-row table look-up: the 16 codes at `k`, the column's three planes at `t`, each
 * looked up by one swizzle and added (widened to 16 bits) into the sums; then `t += 48`, `k += 16`.
 */
export function lutColumn(l: LutLocals): Code {
  // Look up one plane at the column's codes and add its two halves into a pair of 16-bit sums.
  const plane = (offset: number, a: number, b: number, signed: boolean): Code => [
    get(l.t), op.v128_load(offset), get(l.idx), op.i8x16_swizzle, set(l.v),
    get(a), get(l.v), signed ? op.i16x8_extend_low_i8x16_s : op.i16x8_extend_low_i8x16_u, op.i16x8_add, set(a),
    get(b), get(l.v), signed ? op.i16x8_extend_high_i8x16_s : op.i16x8_extend_high_i8x16_u, op.i16x8_add, set(b),
  ];
  return [
    get(l.k), op.v128_load(), set(l.idx),
    plane(0, l.lo0, l.lo1, false),
    plane(16, l.mid0, l.mid1, false),
    plane(32, l.hi0, l.hi1, true),
    get(l.t), op.i32(48), op.i32_add, set(l.t),
    get(l.k), op.i32(16), op.i32_add, set(l.k),
  ];
}

/**
 * Leaves on the stack the i32x4 totals of four of the 16 rows, lo + (mid << 8) + (hi << 16): `quarter`
 * 0..3 picks rows 0–3, 4–7, 8–11, 12–15.
 */
export function lutTotals(l: LutLocals, quarter: number): Code {
  const lo = quarter < 2 ? l.lo0 : l.lo1, mid = quarter < 2 ? l.mid0 : l.mid1, hi = quarter < 2 ? l.hi0 : l.hi1;
  const high = (quarter & 1) === 1;
  return [
    get(lo), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u,
    get(mid), high ? op.i32x4_extend_high_i16x8_u : op.i32x4_extend_low_i16x8_u, op.i32(8), op.i32x4_shl, op.i32x4_add,
    get(hi), high ? op.i32x4_extend_high_i16x8_s : op.i32x4_extend_low_i16x8_s, op.i32(16), op.i32x4_shl, op.i32x4_add,
  ];
}

/** The function `lut16_rows(tabs, codes, cols, out)` (byte addresses; see the module comment). */
export function lut16Rows(): Func {
  const [tabs, codes, cols, out] = [0, 1, 2, 3];
  const c = 4;
  const l: LutLocals = { t: 5, k: 6, lo0: 7, lo1: 8, mid0: 9, mid1: 10, hi0: 11, hi1: 12, idx: 13, v: 14 };
  return fn([I32, I32, I32, I32], [], [I32, I32, I32, V128, V128, V128, V128, V128, V128, V128, V128], [
    lutZero(l),
    get(tabs), set(l.t),
    get(codes), set(l.k),
    op.i32(0), set(c),
    op.block([op.loop([
      get(c), get(cols), op.i32_ge_s, op.br_if(1),
      lutColumn(l),
      get(c), op.i32(1), op.i32_add, set(c),
      op.br(0),
    ])]),
    [0, 1, 2, 3].map((q) => [get(out), lutTotals(l, q), op.v128_store(16 * q)]),
  ]);
}

// Names and immediates of the opcodes a census can meet: one byte, or 0xfd and a LEB128 sub-opcode.
// Immediates: "bt" a block type byte, "leb" one LEB128, "mem" alignment and offset, "b16" 16 bytes, "b1" a
// lane byte. Multiply, divide and float opcodes are named so that the audit can say what it refused.
const OPCODES: Record<string, [string, string?]> = {
  "02": ["block", "bt"], "03": ["loop", "bt"], "04": ["if", "bt"], "05": ["else"], "0b": ["end"],
  "0c": ["br", "leb"], "0d": ["br_if", "leb"], "0f": ["return"], "10": ["call", "leb"], "1a": ["drop"], "1b": ["select"],
  "20": ["local.get", "leb"], "21": ["local.set", "leb"], "22": ["local.tee", "leb"],
  "28": ["i32.load", "mem"], "2d": ["i32.load8_u", "mem"], "36": ["i32.store", "mem"], "3a": ["i32.store8", "mem"],
  "41": ["i32.const", "leb"],
  "45": ["i32.eqz"], "46": ["i32.eq"], "47": ["i32.ne"], "48": ["i32.lt_s"], "49": ["i32.lt_u"],
  "4a": ["i32.gt_s"], "4c": ["i32.le_s"], "4e": ["i32.ge_s"], "4f": ["i32.ge_u"], "4b": ["i32.gt_u"], "67": ["i32.clz"],
  "6a": ["i32.add"], "6b": ["i32.sub"], "6c": ["i32.mul"], "6d": ["i32.div_s"], "6e": ["i32.div_u"],
  "6f": ["i32.rem_s"], "70": ["i32.rem_u"], "71": ["i32.and"], "72": ["i32.or"], "73": ["i32.xor"],
  "74": ["i32.shl"], "75": ["i32.shr_s"], "76": ["i32.shr_u"],
  "fd00": ["v128.load", "mem"], "fd09": ["v128.load32_splat", "mem"], "fd0b": ["v128.store", "mem"],
  "fd0c": ["v128.const", "b16"], "fd0d": ["i8x16.shuffle", "b16"], "fd0e": ["i8x16.swizzle"],
  "fd0f": ["i8x16.splat"], "fd100": ["i8x16.relaxed_swizzle"], "fd11": ["i32x4.splat"], "fd1b": ["i32x4.extract_lane", "b1"],
  "fd16": ["i8x16.extract_lane_u", "b1"], "fd79": ["i8x16.max_u"], "fd23": ["i8x16.eq"],
  "fd28": ["i8x16.gt_u"], "fd39": ["i32x4.lt_s"], "fd3b": ["i32x4.gt_s"], "fd4e": ["v128.and"], "fd50": ["v128.or"], "fd51": ["v128.xor"],
  "fd52": ["v128.bitselect"], "fd53": ["v128.any_true"], "fd6d": ["i8x16.shr_u"], "fd6e": ["i8x16.add"], "fd71": ["i8x16.sub"],
  "fd65": ["i8x16.narrow_i16x8_s"], "fd66": ["i8x16.narrow_i16x8_u"],
  "fd85": ["i16x8.narrow_i32x4_s"], "fd86": ["i16x8.narrow_i32x4_u"],
  "fd87": ["i16x8.extend_low_i8x16_s"], "fd88": ["i16x8.extend_high_i8x16_s"],
  "fd89": ["i16x8.extend_low_i8x16_u"], "fd8a": ["i16x8.extend_high_i8x16_u"], "fd8e": ["i16x8.add"],
  "fd95": ["i16x8.mul"],
  "fda7": ["i32x4.extend_low_i16x8_s"], "fda8": ["i32x4.extend_high_i16x8_s"],
  "fda9": ["i32x4.extend_low_i16x8_u"], "fdaa": ["i32x4.extend_high_i16x8_u"],
  "fda0": ["i32x4.abs"], "fdb6": ["i32x4.min_s"], "fdb8": ["i32x4.max_s"], "fdb9": ["i32x4.max_u"],
  "fdab": ["i32x4.shl"], "fdac": ["i32x4.shr_s"], "fdad": ["i32x4.shr_u"], "fdae": ["i32x4.add"],
  "fdb1": ["i32x4.sub"], "fdb5": ["i32x4.mul"], "fdba": ["i32x4.dot_i16x8_s"], "fde6": ["f32x4.mul"],
};

/**
 * Counts the opcodes of a function body (as `fn` built it), by name: the census an audit classifies.
 * An opcode outside the table above is counted as `unknown 0x..`, never skipped (its immediates, if
 * any, are then read as opcodes: an audit refuses the function anyway).
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
    const known = OPCODES[key];
    const name = known ? known[0] : `unknown 0x${key}`;
    census.set(name, (census.get(name) ?? 0) + 1);
    if (!known) continue;
    const imm = known[1];
    if (imm === "bt" || imm === "b1") i += 1;
    else if (imm === "leb") i = leb(i)[1];
    else if (imm === "mem") i = leb(leb(i)[1])[1];
    else if (imm === "b16") i += 16;
  }
  return census;
}

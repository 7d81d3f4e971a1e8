/**
 * A small WebAssembly assembler: builds a module's binary bytes from TypeScript, so ferry's SIMD
 * kernels are generated when their module loads (no build step, nothing binary in the repository).
 * Written by hand because it is about 200 lines and the kernels need only a few dozen opcodes; the
 * alternative (npm `wabt`) is a 1.4 MB Emscripten build for the same job.
 *
 * Instructions are plain byte arrays; `op` holds the encoders. A function is its signature, its extra
 * locals and its body. Every module exports one memory named `memory`: its own, or one it imports as
 * `env.memory` (`ModuleSpec.importedMemory`), the only thing a module may import.
 *
 * Opcodes follow the WebAssembly 2.0 core spec (binary format, section 5.4) and its fixed-width SIMD
 * proposal (prefix 0xfd). Only deterministic instructions are offered; the one relaxed-SIMD opcode,
 * `i8x16_relaxed_swizzle`, is deterministic for the indices below 16 its one user gives it.
 *
 * @example
 * ```ts
 * import { assemble, fn, I32, op } from "./asm.ts";
 * const add = fn([I32, I32], [I32], [], [op.get(0), op.get(1), op.i32_add]);
 * const bytes = assemble({ pages: 1, functions: { add } });
 * const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
 * ```
 * @module
 */

/** Value types. */
export const I32 = 0x7f, I64 = 0x7e, F32 = 0x7d, F64 = 0x7c, V128 = 0x7b;
export type ValType = typeof I32 | typeof I64 | typeof F32 | typeof F64 | typeof V128;

/** An instruction sequence (nested arrays are flattened when the module is assembled). */
export type Code = number | Code[];

/** One function: parameter and result types, the types of its extra locals, and its body. */
export interface Func {
  params: ValType[];
  results: ValType[];
  locals: ValType[];
  body: Code[];
}

/** Makes a function record. Locals are numbered after the parameters, in order. */
export function fn(params: ValType[], results: ValType[], locals: ValType[], body: Code[]): Func {
  return { params, results, locals, body };
}

/** Unsigned LEB128. */
export function uleb(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}

/** Signed LEB128 of a 32-bit integer. */
export function sleb(n: number): number[] {
  const out: number[] = [];
  n |= 0;
  while (true) {
    const b = n & 0x7f;
    n >>= 7;
    if ((n === 0 && (b & 0x40) === 0) || (n === -1 && (b & 0x40) !== 0)) {
      out.push(b);
      return out;
    }
    out.push(b | 0x80);
  }
}

function flat(code: Code, out: number[] = []): number[] {
  if (typeof code === "number") out.push(code);
  else for (const c of code) flat(c, out);
  return out;
}

const vec = (items: number[][]): number[] => [...uleb(items.length), ...items.flat()];
const section = (id: number, body: number[]): number[] => [id, ...uleb(body.length), ...body];
const name = (s: string): number[] => vec([...new TextEncoder().encode(s)].map((b) => [b]));

/** Memory access immediate: alignment as log2 bytes, then a constant byte offset. */
const mem = (align: number, offset = 0): number[] => [...uleb(align), ...uleb(offset)];
const simd = (opcode: number): number[] => [0xfd, ...uleb(opcode)];

/** Instruction encoders. Loads and stores take an optional constant byte offset. */
export const op = {
  // control
  block: (body: Code[]): Code => [0x02, 0x40, body, 0x0b],
  loop: (body: Code[]): Code => [0x03, 0x40, body, 0x0b],
  if_: (then: Code[], otherwise?: Code[]): Code =>
    otherwise ? [0x04, 0x40, then, 0x05, otherwise, 0x0b] : [0x04, 0x40, then, 0x0b],
  /** An if/else whose arms each leave one v128. */
  if_v128: (then: Code[], otherwise: Code[]): Code => [0x04, 0x7b, then, 0x05, otherwise, 0x0b],
  /** An if/else whose arms each leave one f32. */
  if_f32: (then: Code[], otherwise: Code[]): Code => [0x04, 0x7d, then, 0x05, otherwise, 0x0b],
  /** An if/else whose arms each leave one f64. */
  if_f64: (then: Code[], otherwise: Code[]): Code => [0x04, 0x7c, then, 0x05, otherwise, 0x0b],
  br: (depth: number): Code => [0x0c, ...uleb(depth)],
  br_if: (depth: number): Code => [0x0d, ...uleb(depth)],
  return_: 0x0f,
  drop: 0x1a,
  select: 0x1b,
  call: (index: number): Code => [0x10, ...uleb(index)],
  // locals
  get: (i: number): Code => [0x20, ...uleb(i)],
  set: (i: number): Code => [0x21, ...uleb(i)],
  tee: (i: number): Code => [0x22, ...uleb(i)],
  // memory
  i32_load: (offset = 0): Code => [0x28, ...mem(2, offset)],
  f32_load: (offset = 0): Code => [0x2a, ...mem(2, offset)],
  i32_store: (offset = 0): Code => [0x36, ...mem(2, offset)],
  f32_store: (offset = 0): Code => [0x38, ...mem(2, offset)],
  f64_load: (offset = 0): Code => [0x2b, ...mem(3, offset)],
  f64_store: (offset = 0): Code => [0x39, ...mem(3, offset)],
  i32_load8_u: (offset = 0): Code => [0x2d, ...mem(0, offset)],
  i32_store8: (offset = 0): Code => [0x3a, ...mem(0, offset)],
  // constants
  i32: (n: number): Code => [0x41, ...sleb(n)],
  f32: (x: number): Code => [0x43, ...new Uint8Array(new Float32Array([x]).buffer)],
  f64: (x: number): Code => [0x44, ...new Uint8Array(new Float64Array([x]).buffer)],
  // i32 arithmetic and comparison
  i32_eqz: 0x45,
  i32_eq: 0x46,
  i32_ne: 0x47,
  i32_lt_s: 0x48,
  i32_lt_u: 0x49,
  i32_gt_u: 0x4b,
  i32_gt_s: 0x4a,
  i32_le_s: 0x4c,
  i32_ge_s: 0x4e,
  i32_ge_u: 0x4f,
  i32_clz: 0x67,
  i32_add: 0x6a,
  i32_sub: 0x6b,
  i32_mul: 0x6c,
  i32_div_u: 0x6e,
  i32_rem_u: 0x70,
  i32_and: 0x71,
  i32_or: 0x72,
  i32_xor: 0x73,
  i32_shl: 0x74,
  i32_shr_s: 0x75,
  i32_shr_u: 0x76,
  // f32 scalar
  f32_lt: 0x5d,
  f32_gt: 0x5e,
  f32_sqrt: 0x91,
  f32_add: 0x92,
  f32_sub: 0x93,
  f32_mul: 0x94,
  f32_div: 0x95,
  f32_min: 0x96,
  f32_max: 0x97,
  // f64 scalar
  f64_sqrt: 0x9f,
  f64_add: 0xa0,
  f64_sub: 0xa1,
  f64_mul: 0xa2,
  f64_div: 0xa3,
  f64_max: 0xa5,
  f64_gt: 0x64,
  f64_promote_f32: 0xbb,
  i32_trunc_f32_s: 0xa8,
  i32_trunc_f64_s: 0xaa,
  f64_convert_i32_s: 0xb7,
  f32_convert_i32_s: 0xb2,
  i32_reinterpret_f32: 0xbc,
  f32_reinterpret_i32: 0xbe,
  // 128-bit SIMD (prefix 0xfd)
  v128_load: (offset = 0): Code => [simd(0x00), ...mem(4, offset)],
  v128_load32_splat: (offset = 0): Code => [simd(0x09), ...mem(2, offset)],
  v128_load64_splat: (offset = 0): Code => [simd(0x0a), ...mem(3, offset)],
  /** Eight bytes into the low half, zeros above. */
  v128_load64_zero: (offset = 0): Code => [simd(0x5d), ...mem(3, offset)],
  v128_store: (offset = 0): Code => [simd(0x0b), ...mem(4, offset)],
  v128_const: (bytes: ArrayLike<number>): Code => [simd(0x0c), ...Array.from(bytes)],
  /** Picks 16 bytes from the 32 of two vectors by constant indices. */
  i8x16_shuffle: (lanes: number[]): Code => [simd(0x0d), ...lanes],
  /** A 16-entry byte table read: out[i] = table[idx[i]] (0 when idx[i] >= 16). Stack: table, idx. */
  i8x16_swizzle: simd(0x0e),
  /**
   * The relaxed-SIMD table read: as `i8x16_swizzle` for indices below 16 (what a lane holds beyond that
   * is up to the runtime), so deterministic wherever every index is below 16.
   */
  i8x16_relaxed_swizzle: simd(0x100),
  i8x16_splat: simd(0x0f),
  i32x4_splat: simd(0x11),
  f32x4_splat: simd(0x13),
  f64x2_splat: simd(0x14),
  f32x4_extract_lane: (lane: number): Code => [simd(0x1f), lane],
  i8x16_extract_lane_u: (lane: number): Code => [simd(0x16), lane],
  i8x16_eq: simd(0x23),
  i8x16_gt_u: simd(0x28),
  i8x16_max_u: simd(0x79),
  i32x4_extract_lane: (lane: number): Code => [simd(0x1b), lane],
  i32x4_lt_s: simd(0x39),
  i32x4_gt_s: simd(0x3b),
  v128_and: simd(0x4e),
  v128_or: simd(0x50),
  v128_xor: simd(0x51),
  v128_bitselect: simd(0x52),
  v128_any_true: simd(0x53),
  i8x16_shl: simd(0x6b),
  i8x16_shr_u: simd(0x6d),
  i8x16_add: simd(0x6e),
  i8x16_sub: simd(0x71),
  i16x8_add: simd(0x8e),
  i16x8_extend_low_i8x16_s: simd(0x87),
  i16x8_extend_high_i8x16_s: simd(0x88),
  i16x8_extend_low_i8x16_u: simd(0x89),
  i16x8_extend_high_i8x16_u: simd(0x8a),
  i32x4_extend_low_i16x8_s: simd(0xa7),
  i32x4_extend_high_i16x8_s: simd(0xa8),
  i32x4_extend_low_i16x8_u: simd(0xa9),
  i32x4_extend_high_i16x8_u: simd(0xaa),
  i32x4_extadd_pairwise_i16x8_s: simd(0x7e),
  i8x16_narrow_i16x8_s: simd(0x65),
  i8x16_narrow_i16x8_u: simd(0x66),
  i16x8_narrow_i32x4_s: simd(0x85),
  i16x8_narrow_i32x4_u: simd(0x86),
  i32x4_abs: simd(0xa0),
  i32x4_min_s: simd(0xb6),
  i32x4_max_s: simd(0xb8),
  i32x4_max_u: simd(0xb9),
  i32x4_shl: simd(0xab),
  i32x4_shr_s: simd(0xac),
  i32x4_shr_u: simd(0xad),
  i32x4_add: simd(0xae),
  i32x4_sub: simd(0xb1),
  f32x4_eq: simd(0x41),
  f32x4_lt: simd(0x43),
  f32x4_gt: simd(0x44),
  f32x4_add: simd(0xe4),
  f32x4_sub: simd(0xe5),
  f32x4_mul: simd(0xe6),
  f32x4_div: simd(0xe7),
  f32x4_min: simd(0xe8),
  f32x4_max: simd(0xe9),
  f32x4_nearest: simd(0x6a),
  i32x4_trunc_sat_f32x4_s: simd(0xf8),
  f32x4_convert_i32x4_s: simd(0xfa),
  f64x2_add: simd(0xf0),
  f64x2_sub: simd(0xf1),
  f64x2_mul: simd(0xf2),
  f64x2_div: simd(0xf3),
  f64x2_extract_lane: (lane: number): Code => [simd(0x21), lane],
  /** The low two f32 lanes widened to f64 (exact). */
  f64x2_promote_low_f32x4: simd(0x5f),
};

/** A module: initial memory pages (64 KiB each) and named, exported functions. */
export interface ModuleSpec {
  pages: number;
  functions: Record<string, Func>;
  /**
   * Import the memory (as `env.memory`) instead of defining it: `pages` to `maximum` pages, shared
   * (so several instances, one per worker thread, can run on the same bytes) or not.
   */
  importedMemory?: { maximum: number; shared: boolean };
}

/** Assembles a module's binary bytes: one type per function, one exported memory, every function exported. */
export function assemble(spec: ModuleSpec): Uint8Array<ArrayBuffer> {
  const names = Object.keys(spec.functions), funcs = names.map((n) => spec.functions[n]);
  const types = funcs.map((f) => [0x60, ...vec(f.params.map((t) => [t])), ...vec(f.results.map((t) => [t]))]);
  const functionSec = vec(funcs.map((_, i) => uleb(i)));
  const imported = spec.importedMemory;
  // Limits: flag 0 (min only) for a module's own memory; 1 (min, max) or 3 (min, max, shared) imported.
  const limits = imported
    ? [imported.shared ? 0x03 : 0x01, ...uleb(spec.pages), ...uleb(imported.maximum)]
    : [0x00, ...uleb(spec.pages)];
  const importSec = vec([[...name("env"), ...name("memory"), 0x02, ...limits]]);
  const memorySec = vec([limits]);
  const exportSec = vec([
    [...name("memory"), 0x02, 0x00],
    ...names.map((n, i) => [...name(n), 0x00, ...uleb(i)]),
  ]);
  const codeSec = vec(funcs.map((f) => {
    // Locals as (count, type) runs of equal neighbours.
    const runs: number[][] = [];
    for (const t of f.locals) {
      const last = runs[runs.length - 1];
      if (last && last[1] === t) last[0]++;
      else runs.push([1, t]);
    }
    const body = [...vec(runs.map(([n, t]) => [...uleb(n), t])), ...flat(f.body), 0x0b];
    return [...uleb(body.length), ...body];
  }));
  return new Uint8Array([
    0x00,
    0x61,
    0x73,
    0x6d,
    0x01,
    0x00,
    0x00,
    0x00,
    ...section(1, vec(types)),
    ...(imported ? section(2, importSec) : []),
    ...section(3, functionSec),
    ...(imported ? [] : section(5, memorySec)),
    ...section(7, exportSec),
    ...section(10, codeSec),
  ]);
}

/**
 * Whether this runtime runs 128-bit SIMD: validates a one-function module that splats, adds and
 * drops a vector.
 */
export function simdSupported(): boolean {
  try {
    const probe = fn([], [], [], [
      op.f32(1),
      op.f32x4_splat,
      op.f32(2),
      op.f32x4_splat,
      op.f32x4_add,
      op.drop,
    ]);
    return typeof WebAssembly === "object" &&
      WebAssembly.validate(assemble({ pages: 0, functions: { probe } }));
  } catch {
    return false;
  }
}

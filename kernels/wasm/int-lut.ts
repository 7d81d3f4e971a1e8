/**
 * The integer engine's WebAssembly half, made at load: a module with the one function `lut16_rows`
 * (kernels/wasm/lut.ts), and the codes of every lut4 matrix the engine serves laid out in its memory the
 * way kernels/int/gemv-lut.ts reads them. This file runs once per model load and is not serving code;
 * the serving code is gemv-lut.ts (audited as TypeScript) and the module's function (audited by opcode,
 * tests/audit.test.ts, from `INT_LUT_FUNCTIONS`, the very records assembled here).
 *
 * @example
 * ```ts
 * const made = createLutSums([mat]);          // null where WebAssembly SIMD is missing
 * if (made) { inputPlanes(x, 0, mat.cols, made.lut.mem8, made.lut.planesAt);
 *   gemvLut(out, 0, prepared, made.lut, made.at[0], xExp, outExp); }
 * ```
 * @module
 */
import { assemble, type Func } from "./asm.ts";
import { lut16Rows } from "./lut.ts";
import type { LutMatrix } from "../int/gemv.ts";
import type { LutSums } from "../int/gemv-lut.ts";

/** The functions of the module, by export name: what `createLutSums` assembles and the audit censuses. */
export const INT_LUT_FUNCTIONS: Record<string, Func> = { lut16_rows: lut16Rows() };

const PAGE = 65536;

/** Bytes of a matrix's codes in the 16-row-block layout (rows rounded up to 16). */
function codeBytes(m: LutMatrix): number {
  return Math.ceil(m.rows / 16) * 16 * m.cols;
}

/** Writes a matrix's codes at `mem[at, …)`: per 16-row block, per column, 16 rows' codes; padding is 8. */
export function layoutCodes(m: LutMatrix, mem: Uint8Array, at: number): void {
  const blocks = Math.ceil(m.rows / 16);
  mem.fill(8, at, at + codeBytes(m));
  for (let b = 0; b < blocks; b++) {
    for (let c = 0; c < m.cols; c++) {
      for (let lane = 0; lane < 16; lane++) {
        const r = b * 16 + lane;
        if (r >= m.rows) break;
        const i = r * m.cols + c; // code index, row-major
        const byte = m.nibbles[i >> 1];
        mem[at + (b * m.cols + c) * 16 + lane] = i & 1 ? byte >> 4 : byte & 15;
      }
    }
  }
}

/**
 * An instance holding `mats`' codes, with room for the planes of the widest input, one block's sums and
 * `digitBytes` of key digit planes (kernels/int/gemv-lut.ts `LutSums.digitsAt`);
 * `at[i]` is the byte address of `mats[i]`'s codes. Null where the runtime lacks WebAssembly SIMD (the
 * engine then runs kernels/int/gemv.ts alone).
 */
export function createLutSums(
  mats: LutMatrix[],
  digitBytes = 0,
  minPlaneCols = 0,
): { lut: LutSums; at: Int32Array } | null {
  if (typeof WebAssembly === "undefined") return null;
  let widest = 0;
  let groupsMax = 0;
  for (const m of mats) {
    if (m.cols % 32 !== 0) throw new RangeError(`${m.name}: ${m.cols} columns, expected a multiple of 32`);
    widest = Math.max(widest, m.cols);
    groupsMax = Math.max(groupsMax, m.cols / 32);
  }
  // Attention reuses the planes and sums areas: four tables of head_dim columns, six blocks of sums.
  const planesAt = 0;
  const sumsAt = planesAt + Math.max(widest, minPlaneCols) * 48;
  let next = sumsAt + Math.max(groupsMax, 6) * 64;
  const at = new Int32Array(mats.length);
  mats.forEach((m, i) => {
    next = Math.ceil(next / 16) * 16;
    at[i] = next;
    next += codeBytes(m);
  });
  const digitsAt = Math.ceil(next / 16) * 16;
  next = digitsAt + digitBytes;
  const pages = Math.ceil(next / PAGE);
  const bytes = assemble({ pages, functions: INT_LUT_FUNCTIONS });
  if (!WebAssembly.validate(bytes)) return null;
  const exports = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports as unknown as {
    memory: WebAssembly.Memory;
    lut16_rows(tabs: number, codes: number, cols: number, out: number): void;
  };
  const mem8 = new Uint8Array(exports.memory.buffer);
  mats.forEach((m, i) => layoutCodes(m, mem8, at[i]));
  return {
    lut: {
      lut16_rows: exports.lut16_rows,
      mem8,
      mem32: new Int32Array(exports.memory.buffer),
      planesAt,
      sumsAt,
      sumsIndex: sumsAt >> 2,
      digitsAt,
    },
    at,
  };
}

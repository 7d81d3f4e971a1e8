/**
 * Float weights → lut4 (offline, so floats are fine here): gains folded into the projections that
 * follow them where the maths allows, each group of 32 weights given the scale on the
 * (16 + m) · 2^(E − 4) grid that minimises its squared rounding error, the integer tables computed, and
 * a per-tensor report of the rounding error. Spec: formats/lut4/lut4.md.
 *
 * @example
 * ```ts
 * import { quantizeModel } from "./lut4-quantize.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { Tensor } from "../model/tensor.ts";
 * declare const config: ModelConfig, tensors: Tensor[];
 * const { weights, errors } = quantizeModel(config, tensors, { head: "tied" }); // errors: one per stored tensor
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import { materialize, type Tensor, type TensorSource } from "../model/tensor.ts";
import type { LutMatrix } from "../kernels/int/gemv.ts";
import type { GainTable, HeadMode, Lut4Tables, Lut4Weights } from "./lut4-types.ts";
import { lut4ShapeOf } from "./lut4-types.ts";

export type { HeadMode };

/** Rounding error of one stored tensor, against the (gain-folded) float values it stands for. */
export interface TensorError {
  name: string;
  kind: "matrix" | "gain";
  values: number;
  /** Root-mean-square error, and relative to the tensor's own RMS. */
  rmse: number;
  relRmse: number;
  maxAbsError: number;
}

/** Fixed parameters of the integer tables (the engine checks them on load). */
export const TABLES = {
  expStepLog2: -8,
  expRangeNats: 32,
  expQ: 30,
  siluStepLog2: -8,
  siluRangeLog2: 4,
  siluQ: 16,
  ropeQ: 14,
} as const;

/**
 * Weights per group: each run of `LUT4_GROUP` weights along a matrix's row (its input dimension) shares
 * one scale byte, so every matrix's columns must be whole groups (`notWholeGroups`). The hot loops below
 * spell the 32 out.
 */
export const LUT4_GROUP = 32;

/**
 * The groups' shape rule, the one check the quantizer, the reader and the registry's `cannotStore` make:
 * null when `n` is a multiple of `LUT4_GROUP`, else why not, as "`what` is not a multiple of 32" (`what`
 * names `n` the way the caller's message does; each caller throws its own error with it).
 *
 * @example
 * ```ts
 * import { notWholeGroups } from "./lut4-quantize.ts";
 * notWholeGroups(96, "width"); // null
 * notWholeGroups(40, "q: 40 columns"); // "q: 40 columns is not a multiple of 32"
 * ```
 */
export function notWholeGroups(n: number, what: string): string | null {
  return n % LUT4_GROUP === 0 ? null : `${what} is not a multiple of ${LUT4_GROUP}`;
}

/** A grid scale (m, E) and the weighted squared error of a group rounded with it. */
interface ScaleChoice {
  m: number;
  e: number;
  sse: number;
}

/**
 * The (m, E) of the grid scale that minimises Σ c_i (w − q·s)² over a group, for E in [eLo, eHi]:
 * c_i the importance of the group's column i (`ONES`, the plain squared error, without calibration).
 * Ties go to the smaller scale. With `known`, the best choice over exponents [skipLo, skipHi] found
 * by an earlier search, those exponents are not searched again and the answer is the best over both.
 *
 * The answer is the one the exhaustive search over every (m, E) gives, bit for bit (each candidate
 * that is summed is summed in the same order), but most candidates are never summed in full. The
 * search starts at the scale that maps the group's largest weight to about 7.5 and walks outwards; a
 * candidate is dropped as soon as its partial sum is worse than the best so far (terms are ≥ 0, and
 * adding one to a float never makes the sum smaller), and every smaller scale is dropped once the
 * largest weight's clipping error alone is worse (it only grows as the scale shrinks).
 */
function bestScale(
  w: Float64Array,
  off: number,
  eLo: number,
  eHi: number,
  imp: Float64Array = ONES,
  impOff = 0,
  known?: ScaleChoice,
  skipLo = 0,
  skipHi = -1,
): ScaleChoice {
  let iMax = 0, amax = 0;
  for (let i = 0; i < 32; i++) {
    const a = Math.abs(w[off + i]);
    if (a > amax) amax = a, iMax = i;
  }
  // Candidate k is (m, E) = (k & 15, eLo + (k >> 4)): its scale grows with k. Skipped: kSkipLo ≤ k < kSkipHi.
  const n = (eHi - eLo + 1) * 16, kSkipLo = (skipLo - eLo) * 16, kSkipHi = (skipHi - eLo + 1) * 16;
  let bestK = n, bestSse = Infinity;
  if (known) bestK = (known.e - eLo) * 16 + known.m, bestSse = known.sse;
  // Where to start: any candidate gives the same answer, the one nearest amax / 7.5 the fastest.
  const target = Math.floor(Math.log2(amax / 7.5)), mt = Math.floor((amax / 7.5) * 2 ** (4 - target)) - 16;
  const k0 = Math.max(0, Math.min(n - 1, (target - eLo) * 16 + Math.max(0, Math.min(15, mt))));
  // The best is within NEAR of k0 for most groups: those first, nearest first, so that the bound
  // that cuts the other sums short is tight from the start.
  const kLo = Math.max(0, k0 - NEAR), kHi = Math.min(n - 1, k0 + NEAR);
  for (let j = 0; j <= 2 * NEAR; j++) {
    const k = k0 + (j & 1 ? (j + 1) >> 1 : -(j >> 1));
    if (k < kLo || k > kHi || (k >= kSkipLo && k < kSkipHi)) continue;
    const sse = groupSse(w, off, gridScale(eLo, k), imp, impOff, bestSse, k > bestK);
    if (sse < bestSse || (sse === bestSse && k < bestK)) bestSse = sse, bestK = k;
  }
  for (let k = kHi + 1; k < n; k++) {
    if (k >= kSkipLo && k < kSkipHi) continue;
    const sse = groupSse(w, off, gridScale(eLo, k), imp, impOff, bestSse, k > bestK);
    if (sse < bestSse || (sse === bestSse && k < bestK)) bestSse = sse, bestK = k;
  }
  const xMax = w[off + iMax], cMax = imp[impOff + iMax];
  for (let k = kLo - 1; k >= 0; k--) {
    if (k >= kSkipLo && k < kSkipHi) continue;
    const s = gridScale(eLo, k);
    if (amax > 8 * s) {
      // Clipped: this term is part of the candidate's sum, and of every smaller scale's, larger.
      const d = xMax - (xMax > 0 ? 7 : -8) * s;
      if (d * d * cMax > bestSse) break;
    }
    const sse = groupSse(w, off, s, imp, impOff, bestSse, k > bestK);
    if (sse < bestSse || (sse === bestSse && k < bestK)) bestSse = sse, bestK = k;
  }
  return { m: bestK & 15, e: eLo + (bestK >> 4), sse: bestSse };
}

/** How many candidates either side of the first guess `bestScale` tries before the rest. */
const NEAR = 3;

/** The scale of candidate k of a search from exponent eLo: (16 + m) · 2^(E − 4). */
function gridScale(eLo: number, k: number): number {
  return (16 + (k & 15)) * POW2[eLo + (k >> 4) - 4 + POW2_BIAS];
}

/** 2^i for the exponents a scale can take (exp_base is in [−100, 60]; weights' exponents nearby). */
const POW2_BIAS = 1100;
const POW2 = Float64Array.from({ length: 2 * POW2_BIAS }, (_, i) => 2 ** (i - POW2_BIAS));

/**
 * Σ c_i (w_i − q_i·s)² over the group at `off`, or Infinity as soon as the partial sum shows it cannot
 * beat `bound` (ties lose when `tiesLose`: the candidate comes after the best so far).
 */
function groupSse(
  w: Float64Array,
  off: number,
  s: number,
  imp: Float64Array,
  impOff: number,
  bound: number,
  tiesLose: boolean,
): number {
  let sse = 0;
  if (imp === ONES) {
    // Unweighted: d · d · 1 is d · d exactly, so the multiply (and its load) can go.
    for (let i = 0; i < 32; i++) {
      const x = w[off + i], v = x / s;
      // roundHalfUp(v), written out: this loop is the quantizer's hot spot.
      let q = Math.floor(v + 0.5);
      if (q - 0.5 > v) q -= 1;
      q = Math.max(-8, Math.min(7, q));
      const d = x - q * s;
      sse += d * d;
      // Checked every fourth term: a later exit gives the same answer, and fewer branches.
      if ((i & 3) === 3 && (sse > bound || (tiesLose && sse === bound))) return Infinity;
    }
    return sse;
  }
  for (let i = 0; i < 32; i++) {
    const x = w[off + i], v = x / s;
    let q = Math.floor(v + 0.5);
    if (q - 0.5 > v) q -= 1;
    q = Math.max(-8, Math.min(7, q));
    const d = x - q * s;
    sse += d * d * imp[impOff + i];
    if ((i & 3) === 3 && (sse > bound || (tiesLose && sse === bound))) return Infinity;
  }
  return sse;
}

/**
 * `Math.round(v)` (halves up) for |v| < 2^52, without its data-dependent branch, which mispredicts on
 * rounding's coin flips and made it the quantizer's slowest step: floor(v + 0.5) is right unless
 * v + 0.5 rounded up onto an integer (v = 0.5 − 2^−54, say), which the rarely taken test undoes.
 *
 * @example
 * ```ts
 * import { roundHalfUp } from "./lut4-quantize.ts";
 * roundHalfUp(2.5); // 3
 * roundHalfUp(-2.5); // -2
 * roundHalfUp(0.49999999999999994); // 0 (Math.floor(v + 0.5) gives 1)
 * ```
 */
export function roundHalfUp(v: number): number {
  const q = Math.floor(v + 0.5);
  return q - 0.5 > v ? q - 1 : q;
}

/** Unit importance for every column of a group (multiplying by 1 is exact: uncalibrated files do not move). */
const ONES = new Float64Array(32).fill(1);

/**
 * How far below the group's largest weight the scale search looks, in exponents: with importance, a
 * smaller scale that clips an unimportant large weight can win, so the search goes one step lower.
 */
const SEARCH_BELOW = { plain: 1, weighted: 2 } as const;

/**
 * Quantizes a [rows, cols] matrix (cols a multiple of 32) to lut4, MSE-optimal per group; with
 * `importance` (one value per column: the mean square of the activation it multiplies) each weight's
 * squared error is weighed by its column's importance.
 */
export function quantizeMatrix(
  name: string,
  data: ArrayLike<number>,
  rows: number,
  cols: number,
  importance?: Float64Array,
): {
  matrix: LutMatrix;
  error: TensorError;
} {
  const q = rowQuantizer(name, rows, cols, importance);
  const w = Float64Array.from(data), per = rowsPerBlock(cols) * cols;
  q.survey(w, 0);
  for (let at = 0; at < w.length; at += per) q.encode(w.subarray(at, at + per), at / cols);
  return q.result();
}

/**
 * A matrix quantized (as `quantizeMatrix`, to the same bits) a block of whole rows at a time, so that
 * only a block's floats need be held: `survey` every block in order (each group's best scale, whence
 * the matrix's exp_base), then `encode` the same blocks again in the same order, then `result`. The
 * rounding error is summed per encoded block and the blocks' sums added in order (`quantizeMatrix`
 * encodes blocks of `BLOCK_VALUES`, so every path reports the same error).
 *
 * @example
 * ```ts
 * import { rowQuantizer } from "./lut4-quantize.ts";
 * declare function blocks(): Iterable<[number, Float64Array]>; // [first row, its block of whole rows]
 * const q = rowQuantizer("layers.0.up", 3072, 1024);
 * for (const [r0, block] of blocks()) q.survey(block, r0);
 * for (const [r0, block] of blocks()) q.encode(block, r0);
 * const { matrix, error } = q.result();
 * ```
 */
export function rowQuantizer(
  name: string,
  rows: number,
  cols: number,
  importance?: Float64Array,
): {
  survey(block: Float64Array, r0: number): void;
  encode(block: Float64Array, r0: number): void;
  /** `survey` done elsewhere (a worker): its answer for the block at row r0. */
  surveyed(found: FirstPass, r0: number): void;
  /** `encode` done elsewhere: its answer for the block at row r0. */
  encoded(found: EncodedBlock, r0: number): void;
  /** The search parameters a worker needs for a block at row r0: its slice of the first pass, exp_base. */
  jobOf(r0: number, values: number): BlockJob;
  result(): { matrix: LutMatrix; error: TensorError };
} {
  const notWhole = notWholeGroups(cols, `${name}: ${cols} columns`);
  if (notWhole) throw new RangeError(notWhole);
  if (importance && importance.length !== cols) {
    throw new RangeError(`${name}: ${importance.length} importance values for ${cols} columns`);
  }
  const groups = (rows * cols) / LUT4_GROUP, perRow = cols / LUT4_GROUP;
  const imp = importance ?? ONES, below = importance ? SEARCH_BELOW.weighted : SEARCH_BELOW.plain;
  const impCols = importance ? cols : 0;
  const first = firstPassArrays(groups);
  const nibbles = new Uint8Array((rows * cols) / 2), scales = new Uint8Array(groups);
  let expBase = NaN, sse = 0, ss = 0, maxErr = 0;
  const groupsOf = (values: number, r0: number) => {
    if (values % cols !== 0 || r0 + values / cols > rows) {
      throw new RangeError(
        `${name}: a block of ${values} values at row ${r0} is not whole rows inside ${rows}`,
      );
    }
    return [r0 * perRow, values / 32];
  };
  const base = () => {
    if (Number.isNaN(expBase)) expBase = Number.isFinite(first.eMax) ? first.eMax - 15 : 0;
    return expBase;
  };
  const jobOf = (r0: number, values: number): BlockJob => {
    const [g0, n] = groupsOf(values, r0);
    const slice = <T extends Int32Array | Uint8Array | Float64Array>(a: T) => a.subarray(g0, g0 + n) as T;
    const part = {
      es: slice(first.es),
      ecs: slice(first.ecs),
      ms: slice(first.ms),
      sses: slice(first.sses),
      zero: slice(first.zero),
      eMax: first.eMax,
    };
    return { g0, below, imp, impCols, cols, expBase: Number.isNaN(expBase) ? NaN : expBase, first: part };
  };
  const encoded = (found: EncodedBlock, r0: number) => {
    const [g0] = groupsOf(found.scales.length * 32, r0);
    nibbles.set(found.nibbles, g0 * 16), scales.set(found.scales, g0);
    sse += found.sse, ss += found.ss, maxErr = Math.max(maxErr, found.maxErr);
  };
  return {
    survey(block, r0) {
      const [g0, n] = groupsOf(block.length, r0);
      groupExponents(block, g0, n, below, imp, impCols, first, g0);
    },
    surveyed(found, r0) {
      const [g0] = groupsOf(found.es.length * 32, r0);
      for (const k of ["es", "ecs", "ms", "sses", "zero"] as const) first[k].set(found[k], g0);
      first.eMax = Math.max(first.eMax, found.eMax);
    },
    encode(w, r0) {
      base();
      encoded(encodeBlock(w, jobOf(r0, w.length)), r0);
    },
    encoded(found, r0) {
      base();
      encoded(found, r0);
    },
    jobOf: (r0, values) => (base(), jobOf(r0, values)),
    result: () => ({
      matrix: { name, rows, cols, expBase: base(), nibbles, scales },
      error: errorOf(name, "matrix", rows * cols, sse, ss, maxErr),
    }),
  };
}

/** What the second pass over one block needs besides its floats (a worker is sent this). */
export interface BlockJob {
  /** The block's first group. */
  g0: number;
  below: number;
  imp: Float64Array;
  /** Columns of the importance vector (0: `ONES`, no importance). */
  impCols: number;
  cols: number;
  expBase: number;
  /** The first pass's answers for the block's groups (index 0 is group g0). */
  first: FirstPass;
}

/** A block's codes and scales, and the sums of its rounding error. */
export interface EncodedBlock {
  nibbles: Uint8Array;
  scales: Uint8Array;
  sse: number;
  ss: number;
  maxErr: number;
}

/** The first pass over a block of groups (g0 the block's first), as a worker runs it. */
export function surveyBlock(w: Float64Array, job: Omit<BlockJob, "first" | "expBase">): FirstPass {
  const n = w.length / 32, out = firstPassArrays(n);
  groupExponents(w, job.g0, n, job.below, job.impCols ? job.imp : ONES, job.impCols, out, 0);
  return out;
}

/** The second pass over a block: each group's scale within exp_base's range, its codes, its error. */
export function encodeBlock(w: Float64Array, job: BlockJob): EncodedBlock {
  const { g0, below, expBase, impCols, cols } = job, { es, ecs, ms, sses, zero } = job.first;
  const imp = impCols ? job.imp : ONES, n = w.length / 32;
  const nibbles = new Uint8Array(n * 16), scales = new Uint8Array(n);
  let sse = 0, ss = 0, maxErr = 0;
  for (let j = 0; j < n; j++) {
    const off = j * 32;
    let m = 0, e = expBase;
    if (!zero[j]) {
      const lo = Math.max(expBase, es[j] - 1), hi = Math.min(expBase + 15, Math.max(lo, es[j] + 1));
      const impOff = impCols ? ((g0 + j) * 32) % cols : 0;
      if (lo === ecs[j] - below && hi === ecs[j] + 1) {
        // The range the first pass searched: its answer stands.
        m = ms[j], e = es[j];
      } else if (es[j] >= lo && es[j] <= hi) {
        // Only the exponents the first pass did not search are tried against its best.
        const known = { m: ms[j], e: es[j], sse: sses[j] };
        ({ m, e } = bestScale(w, off, lo, hi, imp, impOff, known, ecs[j] - below, ecs[j] + 1));
      } else ({ m, e } = bestScale(w, off, lo, hi, imp, impOff));
    }
    scales[j] = ((e - expBase) << 4) | m;
    const s = (16 + m) * 2 ** (e - 4);
    for (let i = 0; i < 32; i++) {
      const x = w[off + i];
      const q = zero[j] ? 0 : Math.max(-8, Math.min(7, roundHalfUp(x / s)));
      const k = off + i;
      nibbles[k >> 1] |= (q + 8) << ((k & 1) * 4);
      const d = x - q * s;
      sse += d * d;
      ss += x * x;
      maxErr = Math.max(maxErr, Math.abs(d));
    }
  }
  return { nibbles, scales, sse, ss, maxErr };
}

/** floor(log2(amax / 8)) of the group at `off` (amax its largest |w|), or NaN for an all-zero group (or one with a NaN). */
function ec(w: Float64Array, off: number): number {
  let amax = 0;
  for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(w[off + i]));
  // An infinite weight has no scale (the search would never end).
  if (amax === Infinity) throw new RangeError(`a group of 32 weights holds an infinite value`);
  return amax === 0 ? NaN : Math.floor(Math.log2(amax / 8));
}

/** Per group, what the first pass found; `eMax` the largest best exponent so far. */
export interface FirstPass {
  es: Int32Array;
  ecs: Int32Array;
  ms: Uint8Array;
  sses: Float64Array;
  zero: Uint8Array;
  eMax: number;
}

function firstPassArrays(groups: number): FirstPass {
  return {
    es: new Int32Array(groups),
    ecs: new Int32Array(groups),
    ms: new Uint8Array(groups),
    sses: new Float64Array(groups),
    zero: new Uint8Array(groups),
    eMax: -Infinity,
  };
}

/**
 * First pass over groups g0 … g0 + n − 1 (the block `w` holds them from its start): each group's best
 * scale with no limit, searched over exponents ec − `below` … ec + 1 (ec its floor(log2(amax / 8))),
 * and the largest best exponent (exp_base is that minus 15). Group g's importance starts at column
 * (32 g) mod `impCols` (0: one shared vector).
 */
function groupExponents(
  w: Float64Array,
  g0: number,
  n: number,
  below: number,
  imp: Float64Array,
  impCols: number,
  out: FirstPass,
  outAt: number,
): void {
  for (let j = 0; j < n; j++) {
    const g = g0 + j, o = outAt + j, e0 = ec(w, j * 32);
    if (Number.isNaN(e0)) {
      out.zero[o] = 1;
      continue;
    }
    const best = bestScale(w, j * 32, e0 - below, e0 + 1, imp, impCols ? (g * 32) % impCols : 0);
    out.ecs[o] = e0, out.es[o] = best.e, out.ms[o] = best.m, out.sses[o] = best.sse;
    out.eMax = Math.max(out.eMax, best.e);
  }
}

/**
 * GPTQ's first pass over groups g0 … g0 + n − 1 (`w` holds them from its start), weighted by `imp`
 * (the hessian's diagonal, one value per column of a `cols`-wide matrix): the largest best exponent,
 * whence exp_base, or −Infinity when every group is zero. The same number as `groupExponents`'s
 * `eMax`, without searching most groups: a group's best exponent is at most ec + 1 (the top of its
 * search), so groups are searched from the largest ec down, and none whose ec + 1 cannot beat the
 * best found so far.
 */
export function gptqFirstPass(
  w: Float64Array,
  g0: number,
  n: number,
  imp: Float64Array,
  cols: number,
): number {
  const below = SEARCH_BELOW.weighted, ecs = new Int32Array(n);
  let top = -Infinity, low = Infinity;
  for (let j = 0; j < n; j++) {
    const e0 = ec(w, j * 32);
    ecs[j] = Number.isNaN(e0) ? -0x80000000 : e0;
    if (!Number.isNaN(e0)) top = Math.max(top, e0), low = Math.min(low, e0);
  }
  let best = -Infinity;
  for (let level = top; level >= low && level + 1 > best; level--) {
    for (let j = 0; j < n && best < level + 1; j++) {
      if (ecs[j] !== level) continue;
      const g = g0 + j;
      best = Math.max(best, bestScale(w, j * 32, level - below, level + 1, imp, (g * 32) % cols).e);
    }
  }
  return best;
}

/**
 * Quantizes a [rows, cols] matrix with GPTQ's error feedback (Frantar et al., 2022): columns are
 * rounded in order, and each one's rounding error, weighed through the inverse of `hessian` (the
 * calibration inputs' cols × cols mean of x xᵀ), is spread over the columns not yet rounded, so that
 * the layer's output error on the calibration inputs, not the weights', is what is kept small. Each
 * group's scale is chosen (importance-weighted, on the grid) when its first column is reached.
 */
export function quantizeMatrixGptq(
  name: string,
  data: ArrayLike<number>,
  rows: number,
  cols: number,
  hessian: Float64Array,
): { matrix: LutMatrix; error: TensorError } {
  const notWhole = notWholeGroups(cols, `${name}: ${cols} columns`);
  if (notWhole) throw new RangeError(notWhole);
  if (hessian.length !== cols * cols) throw new RangeError(`${name}: hessian is not ${cols} × ${cols}`);
  const orig = Float64Array.from(data), w = orig.slice(), groups = (rows * cols) / LUT4_GROUP;
  const diag = Float64Array.from({ length: cols }, (_, c) => hessian[c * cols + c]);
  const u = gptqFactor(hessian, cols, diag);
  const first = firstPassArrays(groups);
  groupExponents(w, 0, groups, 2, diag, cols, first, 0);
  const expBase = Number.isFinite(first.eMax) ? first.eMax - 15 : 0;
  const nibbles = new Uint8Array((rows * cols) / 2), scales = new Uint8Array(groups);
  const step = new Float64Array(rows);
  for (let j = 0; j < cols; j++) {
    for (let r = 0; r < rows; r++) {
      const g = (r * cols + j) >> 5;
      if (j % 32 === 0) scales[g] = groupScale(w, g, expBase, diag, j);
      const sc = scales[g], s = (16 + (sc & 15)) * 2 ** (expBase + (sc >> 4) - 4);
      const k = r * cols + j, q = Math.max(-8, Math.min(7, roundHalfUp(w[k] / s)));
      nibbles[k >> 1] |= (q + 8) << ((k & 1) * 4);
      step[r] = (w[k] - q * s) / u[j * cols + j];
    }
    for (let r = 0; r < rows; r++) {
      for (let c = j + 1; c < cols; c++) w[r * cols + c] -= step[r] * u[j * cols + c];
    }
  }
  const matrix = { name, rows, cols, expBase, nibbles, scales };
  const back = dequantizeMatrix(matrix);
  let sse = 0, ss = 0, maxErr = 0;
  for (let k = 0; k < back.length; k++) {
    const d = orig[k] - back[k];
    sse += d * d, ss += orig[k] * orig[k], maxErr = Math.max(maxErr, Math.abs(d));
  }
  return { matrix, error: errorOf(name, "matrix", rows * cols, sse, ss, maxErr) };
}

/** The scale byte of group g (first column j0) for its current weights, within [expBase, expBase + 15]. */
export function groupScale(
  w: Float64Array,
  g: number,
  expBase: number,
  imp: Float64Array,
  j0: number,
): number {
  const e0 = ec(w, g * 32);
  if (Number.isNaN(e0)) return 0;
  const hi = Math.min(expBase + 15, Math.max(expBase, e0 + 1)), lo = Math.max(expBase, Math.min(hi, e0 - 2));
  const { m, e } = bestScale(w, g * 32, lo, hi, imp, j0);
  return ((e - expBase) << 4) | m;
}

/**
 * What runs GPTQ fast (quantize/gptq.ts `gptqEngine`: WebAssembly on a pool of threads): `quantize`
 * gives `quantizeMatrixGptq`'s bits for the matrix `read` gives (values [start, start + count), row-major,
 * as a `TensorSource` reads them: a block of rows at a time, so a matrix as large as Qwen3's embedding
 * is never held whole) with column c multiplied by `fold[c]`, and the hessian `hessian()` of the folded
 * matrix, asked for only when `key` differs from the last call's (matrices that read one input share
 * one factor; an undefined key shares nothing).
 */
export interface GptqRunner {
  quantize(
    name: string,
    read: TensorSource["read"],
    fold: Float64Array | undefined,
    rows: number,
    cols: number,
    hessian: () => Float64Array,
    key: unknown,
  ): Promise<{ matrix: LutMatrix; error: TensorError }>;
  close(): void;
}

/** Fraction of the mean diagonal added to the hessian's diagonal, as GPTQ does, so that it inverts. */
export const GPTQ_DAMP = 0.01;

/**
 * The upper Cholesky factor U of (H + damp·I)⁻¹ (= Uᵀ U), row-major: GPTQ's error propagation
 * reads row j of it. A column no input ever reaches (zero diagonal) gets a unit diagonal.
 *
 * One factorisation and one triangular inverse, not GPTQ's usual inverse-then-factor (two
 * factorisations and a product, twice the work): with J the reversal, J A J = L Lᵀ gives A = M Mᵀ for
 * the upper triangular M = J L J, so A⁻¹ = M⁻ᵀ M⁻¹ and U = M⁻¹ = J L⁻¹ J. J X J of a row-major matrix
 * is its values in reverse order.
 */
function gptqFactor(h: Float64Array, n: number, diag: Float64Array): Float64Array {
  const mean = diag.reduce((a, b) => a + b, 0) / n || 1;
  const a = h.slice().reverse();
  for (let i = 0; i < n; i++) {
    const d = diag[n - 1 - i];
    a[i * n + i] = (d > 0 ? d : 1) + GPTQ_DAMP * mean;
  }
  return lowerInverse(cholesky(a, n), n).reverse();
}

/** Lower Cholesky factor of a symmetric positive definite n × n matrix. */
function cholesky(a: Float64Array, n: number): Float64Array {
  const l = new Float64Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let s = a[i * n + j];
      for (let k = 0; k < j; k++) s -= l[i * n + k] * l[j * n + k];
      l[i * n + j] = i === j ? Math.sqrt(Math.max(s, 1e-300)) : s / l[j * n + j];
    }
  }
  return l;
}

/** The inverse of a lower triangular matrix (lower triangular too), column by column. */
function lowerInverse(l: Float64Array, n: number): Float64Array {
  const li = new Float64Array(n * n);
  for (let c = 0; c < n; c++) {
    for (let i = c; i < n; i++) {
      let s = i === c ? 1 : 0;
      for (let k = c; k < i; k++) s -= l[i * n + k] * li[k * n + c];
      li[i * n + c] = s / l[i * n + i];
    }
  }
  return li;
}

/** A tensor's rounding error from its sums: Σ d², Σ x², max |d| over its n values. */
export function errorOf(
  name: string,
  kind: "matrix" | "gain",
  n: number,
  sse: number,
  ss: number,
  maxErr: number,
): TensorError {
  const rmse = Math.sqrt(sse / n);
  return { name, kind, values: n, rmse, relRmse: ss > 0 ? rmse / Math.sqrt(ss / n) : 0, maxAbsError: maxErr };
}

/** The float value of weight k of a lut4 matrix. */
export function dequantizeMatrix(m: LutMatrix): Float32Array {
  const out = new Float32Array(m.rows * m.cols);
  for (let k = 0; k < out.length; k++) {
    const u = (m.nibbles[k >> 1] >> ((k & 1) * 4)) & 15;
    const sc = m.scales[k >> 5];
    out[k] = (u - 8) * (16 + (sc & 15)) * 2 ** (m.expBase + (sc >> 4) - 4);
  }
  return out;
}

/** A per-channel gain as int16 values sharing one exponent, the largest normalised to 15 bits. */
export function quantizeGain(name: string, g: ArrayLike<number>): { gain: GainTable; error: TensorError } {
  let gmax = 0;
  for (let i = 0; i < g.length; i++) gmax = Math.max(gmax, Math.abs(g[i]));
  const exp = gmax > 0 ? Math.floor(Math.log2(gmax)) - 14 : 0;
  const values = new Int16Array(g.length);
  let sse = 0, ss = 0, maxErr = 0;
  for (let i = 0; i < g.length; i++) {
    values[i] = Math.max(-32767, Math.min(32767, Math.round(g[i] * 2 ** -exp)));
    const d = g[i] - values[i] * 2 ** exp;
    sse += d * d;
    ss += g[i] * g[i];
    maxErr = Math.max(maxErr, Math.abs(d));
  }
  return { gain: { values, exp }, error: errorOf(name, "gain", g.length, sse, ss, maxErr) };
}

/** The exp, SiLU and RoPE tables for a model shape. */
export function makeTables(config: ModelConfig) {
  const expLen = TABLES.expRangeNats * 256 + 2;
  const exp = new Int32Array(expLen);
  for (let i = 0; i < expLen; i++) exp[i] = Math.round(2 ** TABLES.expQ * Math.exp(-i / 256));
  const siluHalf = 2 ** (TABLES.siluRangeLog2 - TABLES.siluStepLog2);
  const silu = new Int32Array(2 * siluHalf + 1);
  for (let i = 0; i < silu.length; i++) {
    const x = (i - siluHalf) / 256;
    silu[i] = Math.round(2 ** TABLES.siluQ * (x / (1 + Math.exp(-x))));
  }
  const half = config.head_dim / 2, P = lut4ShapeOf(config).maxPositions;
  const ropeCos = new Int16Array(P * half), ropeSin = new Int16Array(P * half);
  for (let i = 0; i < half; i++) {
    const invFreq = Math.pow(config.rope_theta, (-2 * i) / config.head_dim);
    for (let p = 0; p < P; p++) {
      ropeCos[p * half + i] = Math.round(2 ** TABLES.ropeQ * Math.cos(p * invFreq));
      ropeSin[p * half + i] = Math.round(2 ** TABLES.ropeQ * Math.sin(p * invFreq));
    }
  }
  return { exp, silu, siluHalf, ropeCos, ropeSin };
}

/**
 * eps as mantissa · 2^exp with the mantissa in [2^15, 2^16), rounded to nearest: the one form a lut4
 * header may hold for a given `rms_norm_eps`.
 *
 * @example
 * ```ts
 * import { epsFixed } from "./lut4-quantize.ts";
 * epsFixed(1e-6); // { mantissa: 34360, exp: -35 }
 * ```
 */
export function epsFixed(eps: number): { mantissa: number; exp: number } {
  let exp = Math.floor(Math.log2(eps)) - 15;
  // log2 can land one off next to a power of two, and rounding can carry the mantissa up to 2^16.
  if (eps * 2 ** -exp < 2 ** 15) exp -= 1;
  if (eps * 2 ** -exp >= 2 ** 16) exp += 1;
  const mantissa = Math.round(eps * 2 ** -exp);
  return mantissa === 2 ** 16 ? { mantissa: 2 ** 15, exp: exp + 1 } : { mantissa, exp };
}

const EMBED = "model.embed_tokens.weight";
const [Q, K, V, O] = ["q", "k", "v", "o"].map((x) => `self_attn.${x}_proj.weight`);
const [G, U, D] = ["gate", "up", "down"].map((x) => `mlp.${x}_proj.weight`);

/**
 * A column folded by f reads the activation divided by f: its importance is divided by f². (A zero
 * gain zeroes the column, whose weights then round exactly whatever their importance.)
 */
function unfoldImportance(imp: Float32Array, f?: Float64Array): Float64Array {
  return Float64Array.from(imp, (v, c) => (!f ? v : f[c] !== 0 ? v / (f[c] * f[c]) : 0));
}

/** The covariance of the folded matrix's input: entry (i, j) divided by f_i · f_j. */
function unfoldCovariance(cov: Float64Array, n: number, f?: Float64Array): Float64Array {
  if (!f) return cov;
  const div = (i: number) => (f[i] !== 0 ? 1 / f[i] : 0);
  return Float64Array.from(cov, (v, k) => v * div(Math.floor(k / n)) * div(k % n));
}

/** Multiplies column j of a [rows, cols] matrix by f[j]. */
function foldColumns(w: Float32Array, rows: number, cols: number, f: Float64Array): Float64Array {
  const out = new Float64Array(w.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = w[r * cols + c] * f[c];
  return out;
}

/**
 * One step of a model's quantization, in the file's order: a matrix (its data read from tensor `src`,
 * its columns multiplied by tensor `fold` · sqrt(width) when given, its calibration statistics those
 * of tensor `stats`) or a gain (tensor `src` times `factor`).
 */
type Step =
  | { kind: "matrix"; name: string; src: string; rows: number; cols: number; fold?: string; stats?: string }
  | { kind: "gain"; name: string; src: string; factor: number };

/**
 * The steps of a Qwen3 model's quantization: the input and post-attention norm gains (times
 * sqrt(width), ferry's norm convention) are folded into q/k/v and gate/up; the per-head q/k norm gains
 * cannot be (they act after the projection, per head, and RoPE mixes dimension i with i + head_dim/2),
 * so they are stored as int16 gains, k's times sqrt(head_dim) (the attention scale and q's norm factor
 * cancel); the final norm gain is folded into a separate head, or stored as a gain for a tied head.
 */
function quantizationSteps(config: ModelConfig, head: HeadMode): Step[] {
  const H = config.hidden_size, hd = config.head_dim, F = config.intermediate_size;
  const qDim = config.num_attention_heads * hd, kvDim = config.num_key_value_heads * hd;
  for (
    const [what, n] of [["hidden_size", H], ["heads · head_dim", qDim], ["intermediate_size", F]] as const
  ) {
    const notWhole = notWholeGroups(n, `lut4 export: ${what} = ${n}`);
    if (notWhole) throw new RangeError(notWhole);
  }
  const matrix = (name: string, src: string, rows: number, cols: number, fold?: string): Step => ({
    kind: "matrix",
    name,
    src,
    rows,
    cols,
    fold,
    stats: src,
  });
  // The embedding is rounded plainly even when tied: it is also the token lookup, which weighs every
  // column alike, and weighing it by the head's input (half and half, or alone) measured worse
  // (formats/lut4/lut4.md, "Calibration").
  const steps: Step[] = [{ kind: "matrix", name: "embed", src: EMBED, rows: config.vocab_size, cols: H }];
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, n = `layers.${i}.`;
    const gin = p + "input_layernorm.weight", gpost = p + "post_attention_layernorm.weight";
    steps.push(
      matrix(n + "q", p + Q, qDim, H, gin),
      matrix(n + "k", p + K, kvDim, H, gin),
      matrix(n + "v", p + V, kvDim, H, gin),
      matrix(n + "o", p + O, H, qDim),
      matrix(n + "gate", p + G, F, H, gpost),
      matrix(n + "up", p + U, F, H, gpost),
      matrix(n + "down", p + D, H, F),
      { kind: "gain", name: n + "q_gain", src: p + "self_attn.q_norm.weight", factor: 1 },
      { kind: "gain", name: n + "k_gain", src: p + "self_attn.k_norm.weight", factor: Math.sqrt(hd) },
    );
  }
  if (head === "tied" && config.tie_word_embeddings) {
    steps.push({ kind: "gain", name: "final_gain", src: "model.norm.weight", factor: Math.sqrt(H) });
  } else {
    const src = config.tie_word_embeddings ? EMBED : "lm_head.weight";
    steps.push(matrix("head", src, config.vocab_size, H, "model.norm.weight"));
  }
  return steps;
}

/** Calibration statistics a quantization may take, per tensor (Hugging Face name). */
export interface QuantizeStats {
  /** Each input column's mean square activation (weighted scales). */
  importance?: ReadonlyMap<string, Float32Array>;
  /** The inputs' mean x xᵀ: GPTQ error feedback (takes precedence over `importance`). */
  covariance?: ReadonlyMap<string, Float64Array>;
}

/** Runs one matrix step on its tensor's data and (when it folds) the fold tensor's. */
function quantizeStep(
  step: Step & { kind: "matrix" },
  data: Float32Array,
  foldGain: Float32Array | undefined,
  stats: QuantizeStats,
  width: number,
): { matrix: LutMatrix; error: TensorError } {
  const { name, rows, cols } = step;
  const f = foldGain && scaled(foldGain, Math.sqrt(width));
  const cov = step.stats ? stats.covariance?.get(step.stats) : undefined;
  const imp = step.stats ? stats.importance?.get(step.stats) : undefined;
  const folded = f ? foldColumns(data, rows, cols, f) : data;
  return cov
    ? quantizeMatrixGptq(name, folded, rows, cols, unfoldCovariance(cov, cols, f))
    : quantizeMatrix(name, folded, rows, cols, imp && unfoldImportance(imp, f));
}

/** `quantizeStep` of a GPTQ step on `gptq` (the same bits), the factor shared by steps of one `key`. */
function gptqStep(
  gptq: GptqRunner,
  step: Step & { kind: "matrix" },
  src: TensorSource,
  foldGain: Float32Array | undefined,
  cov: Float64Array,
  width: number,
  key: object,
): Promise<{ matrix: LutMatrix; error: TensorError }> {
  const { name, rows, cols } = step;
  const f = foldGain && scaled(foldGain, Math.sqrt(width));
  const read = (start: number, count: number, scratch: Float32Array) => src.read(start, count, scratch);
  return gptq.quantize(name, read, f, rows, cols, () => unfoldCovariance(cov, cols, f), key);
}

const scaled = (g: Float32Array, f: number) => Float64Array.from(g, (x) => x * f);

/** Values per block of rows that the quantizer reads and encodes (whole rows, at least one): 8 MiB as f64. */
export const BLOCK_VALUES = 1 << 20;

/** Rows per block of a matrix with `cols` columns. */
export function rowsPerBlock(cols: number): number {
  return Math.max(1, Math.floor(BLOCK_VALUES / cols));
}

/**
 * A pool of workers (quantize/lut4-worker.ts) that run the quantizer's passes over blocks of rows in
 * parallel. Each answer is the one the block would get here; blocks are handed out and their answers
 * applied in order by the caller, so the file does not depend on the pool's size.
 */
export interface QuantizePool {
  survey(block: Float64Array, job: Omit<BlockJob, "first" | "expBase">): Promise<FirstPass>;
  encode(block: Float64Array, job: BlockJob): Promise<EncodedBlock>;
  readonly size: number;
  close(): void;
}

/**
 * Starts `size` quantizer workers. Blocks are sent (their buffers transferred, not copied) to the
 * workers in turn.
 *
 * @example
 * ```ts
 * import { quantizeModelStreamed, quantizePool } from "./lut4-quantize.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { TensorSource } from "../model/tensor.ts";
 * import type { LutMatrix } from "../kernels/int/gemv.ts";
 * declare const config: ModelConfig, sources: TensorSource[], put: (m: LutMatrix) => Promise<void>;
 * const pool = quantizePool(2);
 * try { await quantizeModelStreamed(config, sources, { head: "tied", pool }, put); } finally { pool.close(); }
 * ```
 */
export function quantizePool(size: number): QuantizePool {
  const url = new URL("./lut4-worker.ts", import.meta.url).href;
  const workers = Array.from({ length: size }, () => new Worker(url, { type: "module" }));
  const waiting = new Map<number, { resolve: (r: never) => void; reject: (e: Error) => void }>();
  for (const w of workers) {
    w.onmessage = (e: MessageEvent<{ id: number; result?: never; error?: string }>) => {
      const { id, result, error } = e.data, p = waiting.get(id)!;
      waiting.delete(id);
      if (error !== undefined) p.reject(new Error(`lut4 quantizer worker: ${error}`));
      else p.resolve(result!);
    };
    w.onerror = (e: Event) => {
      e.preventDefault();
      for (const p of waiting.values()) {
        p.reject(new Error(`lut4 quantizer worker failed: ${(e as ErrorEvent).message}`));
      }
      waiting.clear();
    };
  }
  let next = 0;
  const send = <T>(op: "survey" | "encode", block: Float64Array, job: BlockJob): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve: resolve as (r: never) => void, reject });
      workers[id % size].postMessage({ id, op, block, job }, [block.buffer as ArrayBuffer]);
    });
  // A subarray would be cloned with its whole buffer: the block's slices of the first pass are copied.
  const own = (f: FirstPass): FirstPass => ({
    es: f.es.slice(),
    ecs: f.ecs.slice(),
    ms: f.ms.slice(),
    sses: f.sses.slice(),
    zero: f.zero.slice(),
    eMax: f.eMax,
  });
  return {
    size,
    survey: (block, job) => send("survey", block, { ...job, expBase: NaN, first: firstPassArrays(0) }),
    encode: (block, job) => send("encode", block, { ...job, first: own(job.first) }),
    close: () => workers.forEach((w) => w.terminate()),
  };
}

/** Workers the streamed export uses: one per core, at most 4, none on one core. */
export function defaultPoolSize(): number {
  const cores = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)?.hardwareConcurrency ??
    1;
  return cores > 1 ? Math.min(4, cores) : 0;
}

/**
 * A matrix step without GPTQ, read from its source a block of rows at a time, twice (`rowQuantizer`'s
 * two passes), the blocks run by `pool` when there is one: the same bits as `quantizeStep`, holding a
 * few blocks' floats instead of the matrix's.
 */
async function quantizeRowBlocks(
  step: Step & { kind: "matrix" },
  src: TensorSource,
  foldGain: Float32Array | undefined,
  stats: QuantizeStats,
  width: number,
  pool?: QuantizePool,
): Promise<{ matrix: LutMatrix; error: TensorError }> {
  const { name, rows, cols } = step;
  if (src.dims.length !== 2 || src.dims[0] !== rows || src.dims[1] !== cols) {
    throw new RangeError(`lut4 export: ${src.name} is [${src.dims}], expected [${rows}, ${cols}]`);
  }
  const f = foldGain && scaled(foldGain, Math.sqrt(width));
  const imp = step.stats ? stats.importance?.get(step.stats) : undefined;
  const importance = imp && unfoldImportance(imp, f);
  const q = rowQuantizer(name, rows, cols, importance);
  const per = rowsPerBlock(cols), scratch = new Float32Array(Math.min(rows, per) * cols);
  // The block of rows at r0, folded, in a buffer of its own (a worker takes it over).
  const blockAt = async (r0: number) => {
    const n = Math.min(per, rows - r0) * cols;
    const x = await src.read(r0 * cols, n, scratch.subarray(0, n)), b = new Float64Array(n);
    // A loop, not b.set(x): JavaScriptCore widens f32 to f64 in `set` an element at a time, 20× slower.
    if (f) { for (let r = 0; r < n; r += cols) for (let c = 0; c < cols; c++) b[r + c] = x[r + c] * f[c]; }
    else for (let i = 0; i < n; i++) b[i] = x[i];
    return b;
  };
  if (!pool || rows <= per) {
    for (let r0 = 0; r0 < rows; r0 += per) q.survey(await blockAt(r0), r0);
    for (let r0 = 0; r0 < rows; r0 += per) q.encode(await blockAt(r0), r0);
    return q.result();
  }
  const job = {
    g0: 0,
    below: importance ? SEARCH_BELOW.weighted : SEARCH_BELOW.plain,
    imp: importance ?? ONES,
  };
  const common = { ...job, impCols: importance ? cols : 0, cols };
  // Each pass: at most two blocks per worker in flight; answers applied in block order.
  for (const pass of ["survey", "encode"] as const) {
    const inFlight: Promise<void>[] = [];
    const answers: { r0: number; answer: Promise<FirstPass | EncodedBlock> }[] = [];
    for (let r0 = 0; r0 < rows; r0 += per) {
      const block = await blockAt(r0);
      const answer = pass === "survey"
        ? pool.survey(block, { ...common, g0: (r0 * cols) / 32 })
        : pool.encode(block, q.jobOf(r0, block.length));
      answers.push({ r0, answer });
      // Only a throttle: a failure surfaces below, where the answers are taken in order.
      inFlight.push(answer.then(() => {}, () => {}));
      if (inFlight.length >= 2 * pool.size) await inFlight.shift();
    }
    for (const { r0, answer } of answers) {
      const a = await answer;
      if (pass === "survey") q.surveyed(a as FirstPass, r0);
      else q.encoded(a as EncodedBlock, r0);
    }
  }
  return q.result();
}

/** The model-wide tables and the eps of a lut4 file, with its gains. */
function tablesFor(config: ModelConfig, head: HeadMode, gains: Map<string, GainTable>): Lut4Tables {
  const eps = epsFixed(config.rms_norm_eps);
  return {
    shape: lut4ShapeOf(config),
    epsMantissa: eps.mantissa,
    epsExp: eps.exp,
    head,
    finalGain: gains.get("final_gain") ?? null,
    gains: Array.from({ length: config.num_hidden_layers }, (_, i) => ({
      qGain: gains.get(`layers.${i}.q_gain`)!,
      kGain: gains.get(`layers.${i}.k_gain`)!,
    })),
    ...makeTables(config),
  };
}

/**
 * Quantizes a Qwen3 model held in memory (the steps of `quantizationSteps`): every matrix, gain and
 * table of its lut4 file, and the rounding error of each stored tensor, in file order.
 */
export function quantizeModel(
  config: ModelConfig,
  tensors: Tensor[],
  opts: { head: HeadMode } & QuantizeStats,
): {
  weights: Lut4Weights;
  errors: TensorError[];
} {
  const get = (n: string) => {
    const t = tensors.find((x) => x.name === n);
    if (!t) throw new Error(`lut4 export: missing tensor ${n}`);
    return t.data;
  };
  const errors: TensorError[] = [], mats = new Map<string, LutMatrix>(), gains = new Map<string, GainTable>();
  const head = opts.head === "tied" && config.tie_word_embeddings ? "tied" : "separate";
  for (const step of quantizationSteps(config, opts.head)) {
    const { name } = step;
    if (step.kind === "gain") {
      const { gain, error } = quantizeGain(name, scaled(get(step.src), step.factor));
      gains.set(name, gain), errors.push(error);
      continue;
    }
    const fold = step.fold ? get(step.fold) : undefined;
    const { matrix, error } = quantizeStep(step, get(step.src), fold, opts, config.hidden_size);
    mats.set(name, matrix), errors.push(error);
  }
  const { gains: layerGains, head: _, ...rest } = tablesFor(config, head, gains);
  const m = (n: string) => mats.get(n)!;
  return {
    weights: {
      ...rest,
      embed: m("embed"),
      head: mats.get("head") ?? null,
      layers: layerGains.map((g, i) => ({
        q: m(`layers.${i}.q`),
        k: m(`layers.${i}.k`),
        v: m(`layers.${i}.v`),
        o: m(`layers.${i}.o`),
        gate: m(`layers.${i}.gate`),
        up: m(`layers.${i}.up`),
        down: m(`layers.${i}.down`),
        ...g,
      })),
    },
    errors,
  };
}

/**
 * Quantizes a Qwen3 model a tensor at a time: each matrix is read from its source a block of rows at
 * a time (by `opts.pool`'s workers when given), quantized and handed to `put` (in file order) before
 * the next is read, so no more than a few blocks' floats (and the small norm gains) are held; the
 * tables and gains come back at the end, with every stored tensor's rounding error. A matrix with a
 * covariance goes through GPTQ, whole: on `opts.gptq` (quantize/gptq.ts, the same bits) when given,
 * else the scalar `quantizeMatrixGptq`.
 *
 * @example
 * ```ts
 * import { quantizeModelStreamed } from "./lut4-quantize.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { TensorSource } from "../model/tensor.ts";
 * import type { LutMatrix } from "../kernels/int/gemv.ts";
 * declare const config: ModelConfig, sources: TensorSource[], put: (m: LutMatrix) => Promise<void>;
 * const { tables, errors } = await quantizeModelStreamed(config, sources, { head: "tied" }, put);
 * ```
 */
export async function quantizeModelStreamed(
  config: ModelConfig,
  sources: readonly TensorSource[],
  opts: { head: HeadMode; pool?: QuantizePool; gptq?: GptqRunner } & QuantizeStats,
  put: (m: LutMatrix) => Promise<void>,
): Promise<{ tables: Lut4Tables; errors: TensorError[] }> {
  const byName = new Map(sources.map((s) => [s.name, s]));
  const small = new Map<string, Float32Array>();
  const read = async (n: string) => {
    const src = byName.get(n);
    if (!src) throw new Error(`lut4 export: missing tensor ${n}`);
    return (await materialize(src)).data;
  };
  // Norm gains are read once and kept (a width each); matrices are read, used and dropped.
  const readSmall = async (n: string) => small.get(n) ?? small.set(n, await read(n)).get(n)!;
  const errors: TensorError[] = [], gains = new Map<string, GainTable>();
  // One key per (covariance, fold): q, k and v share theirs, as gate and up do, and so GPTQ's factor.
  // Weak: a covariance read back from a file (measure/covariance-file.ts) is dropped after its matrices.
  const keys = new WeakMap<Float64Array, Map<string, object>>();
  const keyOf = (cov: Float64Array, fold = "") => {
    const byFold = keys.get(cov) ?? keys.set(cov, new Map()).get(cov)!;
    return byFold.get(fold) ?? byFold.set(fold, {}).get(fold)!;
  };
  for (const step of quantizationSteps(config, opts.head)) {
    if (step.kind === "gain") {
      const { gain, error } = quantizeGain(step.name, scaled(await readSmall(step.src), step.factor));
      gains.set(step.name, gain), errors.push(error);
      continue;
    }
    const fold = step.fold ? await readSmall(step.fold) : undefined;
    const src = byName.get(step.src);
    if (!src) throw new Error(`lut4 export: missing tensor ${step.src}`);
    const cov = step.stats ? opts.covariance?.get(step.stats) : undefined;
    const { matrix, error } = !cov
      ? await quantizeRowBlocks(step, src, fold, opts, config.hidden_size, opts.pool)
      : opts.gptq
      ? await gptqStep(opts.gptq, step, src, fold, cov, config.hidden_size, keyOf(cov, step.fold))
      : quantizeStep(step, await read(step.src), fold, opts, config.hidden_size);
    errors.push(error);
    await put(matrix);
  }
  const head = opts.head === "tied" && config.tie_word_embeddings ? "tied" : "separate";
  return { tables: tablesFor(config, head, gains), errors };
}

/**
 * The float model a lut4 file approximates, before rounding: the same gain folding as `quantizeModel`,
 * under Hugging Face names and in the layout `dequantizeLut4` gives, so the two can be mixed tensor by
 * tensor (scripts/gap.ts splits the rounding gap by tensor class that way).
 */
export function foldedFloat(config: ModelConfig, tensors: Tensor[], head: HeadMode): Tensor[] {
  const get = (n: string) => {
    const t = tensors.find((x) => x.name === n);
    if (!t) throw new Error(`missing tensor ${n}`);
    return t;
  };
  const H = config.hidden_size;
  const rootH = Math.sqrt(H);
  const out: Tensor[] = [];
  const flat = (name: string) => out.push({ name, dims: [H], data: new Float32Array(H).fill(1 / rootH) });
  const folded = (name: string, g: Float32Array) => {
    const t = get(name);
    const f = Float64Array.from(g, (x) => x * rootH);
    out.push({ name, dims: t.dims, data: Float32Array.from(foldColumns(t.data, t.dims[0], t.dims[1], f)) });
  };
  const copy = (name: string) => out.push({ name, dims: get(name).dims, data: get(name).data.slice() });
  copy("model.embed_tokens.weight");
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    const gin = get(p + "input_layernorm.weight").data,
      gpost = get(p + "post_attention_layernorm.weight").data;
    flat(p + "input_layernorm.weight");
    folded(p + "self_attn.q_proj.weight", gin);
    folded(p + "self_attn.k_proj.weight", gin);
    folded(p + "self_attn.v_proj.weight", gin);
    copy(p + "self_attn.q_norm.weight");
    copy(p + "self_attn.k_norm.weight");
    copy(p + "self_attn.o_proj.weight");
    flat(p + "post_attention_layernorm.weight");
    folded(p + "mlp.gate_proj.weight", gpost);
    folded(p + "mlp.up_proj.weight", gpost);
    copy(p + "mlp.down_proj.weight");
  }
  if (head === "tied" && config.tie_word_embeddings) copy("model.norm.weight");
  else {
    flat("model.norm.weight");
    const src = config.tie_word_embeddings ? get("model.embed_tokens.weight") : get("lm_head.weight");
    const f = Float64Array.from(get("model.norm.weight").data, (x) => x * rootH);
    out.push({
      name: "lm_head.weight",
      dims: src.dims,
      data: Float32Array.from(foldColumns(src.data, src.dims[0], src.dims[1], f)),
    });
  }
  return out;
}

// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The integer sampler's one pass over the vocabulary as WebAssembly: engines/int/sampler.ts `sample`
 * gives every id not masked its mass exp(−(top − logit) / T) from the exp table and keeps those above
 * min-p. In JavaScript that pass is 2–4 ms at 151,936 ids (several table reads and a branchy shift per
 * id), 4–6% of an integer token; here it is a straight loop of integer loads, adds and shifts.
 *
 * `sample_masses(logits, never, vocab, top, drop, thr, d, sh, quotA, quotB, quotC, remsA, remsB,
 * remsC, cap, expT, expLast, expMul, mass, ids, out, unit)`: for each id i < vocab with never[i] = 0
 * and diff = sat32(top − logits[i]) below `drop` (unsigned), the scaled difference min(⌊diff · 2^16 /
 * d⌋, cap): diff itself where `unit` says d = 2^16 (temperature 1, the OpenAI clients' default), else
 * from the division tables (the quotient and remainder parts at `quotA/B/C` and `remsA/B/C`, indexed by
 * diff's bits 16–31, 8–15 and 0–7), e = expNeg of it (the table at `expT`, `expLast` its
 * length less one, the difference multiples at `expMul`), m = shift(e, sh) for sh in [1, 31]; m > 0 and
 * m ≥ thr keeps i: mass[i] = m, ids[n] = i. Writes out[0] = n, out[1] = the masses' total (−1 once it
 * passes 2^31 − 1, and the pass stops), out[2] = the largest mass. Every argument is an i32; arrays
 * are byte addresses in the module's memory.
 *
 * The same integers as the TypeScript pass (tests/engines/sampler.test.ts runs both); only opcodes
 * `LUT_OPCODES` classifies (kernels/wasm/lut.ts), audited in tests/kernels/audit.test.ts.
 * @module
 */
import { assemble, type Code, fn, type Func, I32, op } from "./asm.ts";
import { get, I32_MAX, inc, localsAfter, set } from "./int-ops.ts";

/** The parameters of `sample_masses`, in order. */
const PARAMS = [
  "logits", "never", "vocab", "top", "drop", "thr", "d", "sh", "quotA", "quotB", "quotC",
  "remsA", "remsB", "remsC", "cap", "expT", "expLast", "expMul", "mass", "ids", "out", "unit",
] as const;
const P = Object.fromEntries(PARAMS.map((name, i) => [name, i])) as Record<typeof PARAMS[number], number>;

/** `sample_masses`, as the audit censuses it and `createSampleKernel` assembles it. */
export function sampleMassesFn(): Func {
  const l = localsAfter(PARAMS.length);
  const i = l.i32(), n = l.i32(), total = l.i32(), most = l.i32(), diff = l.i32();
  const q = l.i32(), r = l.i32(), ix = l.i32(), f = l.i32(), o = l.i32(), e = l.i32(), m = l.i32();
  // The int32 at base + (index << 2).
  const load = (base: number, index: Code): Code => [get(base), index, op.i32(2), op.i32_shl, op.i32_add, op.i32_load()];
  // diff's three parts: bits 16–31, 8–15, 0–7.
  const parts: Code[] = [
    [get(diff), op.i32(16), op.i32_shr_u],
    [get(diff), op.i32(8), op.i32_shr_u, op.i32(255), op.i32_and],
    [get(diff), op.i32(255), op.i32_and],
  ];
  const skip = (cond: Code): Code => [cond, op.br_if(0)];
  // One carry of the remainder: c = (r ≥ d); q += c; r = c ? r − d : r.
  const carry = (): Code => [
    get(r), get(P.d), op.i32_ge_s, set(f),
    get(q), get(f), op.i32_add, set(q),
    get(r), get(P.d), op.i32_sub, get(r), get(f), op.select, set(r),
  ];
  return fn(PARAMS.map(() => I32), [], l.types, [
    op.i32(0), set(i), op.i32(0), set(n), op.i32(0), set(total), op.i32(0), set(most),
    op.block([op.loop([
      get(i), get(P.vocab), op.i32_ge_s, op.br_if(1),
      op.block([
        skip([get(P.never), get(i), op.i32_add, op.i32_load8_u()]),
        // diff = sat32(top − logit): never negative for an id not masked, so a wrapped one saturates.
        get(P.top), load(P.logits, get(i)), op.i32_sub, set(diff),
        op.i32(I32_MAX), get(diff), get(diff), op.i32(0), op.i32_lt_s, op.select, set(diff),
        skip([get(diff), get(P.drop), op.i32_ge_u]),
        // The scaled difference: at temperature 1 (`unit`) diff itself; else the three parts' quotients
        // and remainders, the remainders carried. Then capped.
        get(P.unit),
        op.if_([get(diff), set(q)], [
          load(P.quotA, parts[0]), load(P.quotB, parts[1]), op.i32_add, load(P.quotC, parts[2]), op.i32_add, set(q),
          load(P.remsA, parts[0]), load(P.remsB, parts[1]), op.i32_add, load(P.remsC, parts[2]), op.i32_add, set(r),
          // The carries (r < 3d). The first without a branch: whether r ≥ d can be a coin toss per id,
          // which a branch mispredicted half the time (a third of the pass at temperature 0.7). A
          // second needs r ≥ 2d, so a difference of at least 2^16 (three remainders): rare, a branch.
          carry(),
          get(r), get(P.d), op.i32_ge_s,
          op.if_([inc(q, 1), get(r), get(P.d), op.i32_sub, set(r)]),
        ]),
        get(P.cap), get(q), get(q), get(P.cap), op.i32_gt_s, op.select, set(q),
        // expNeg: entry ix = q >> 8 and the interpolation by the fraction's two base-16 digits.
        op.i32(0), set(e),
        get(q), op.i32(8), op.i32_shr_s, set(ix),
        get(ix), get(P.expLast), op.i32_lt_s,
        op.if_([
          get(q), op.i32(255), op.i32_and, set(f),
          get(ix), op.i32(4), op.i32_shl, set(o),
          load(P.expT, get(ix)),
          load(P.expMul, [get(o), get(f), op.i32(4), op.i32_shr_u, op.i32_add]), op.i32(4), op.i32_shl,
          load(P.expMul, [get(o), get(f), op.i32(15), op.i32_and, op.i32_add]), op.i32_add,
          op.i32(8), op.i32_shr_s, op.i32_add, set(e),
        ]),
        // m = shift(e, sh), sh in [1, 31]: e >> sh, rounded half up by the bit below.
        get(e), get(P.sh), op.i32_shr_s,
        get(e), get(P.sh), op.i32(1), op.i32_sub, op.i32_shr_s, op.i32(1), op.i32_and, op.i32_add, set(m),
        skip([get(m), op.i32(0), op.i32_le_s]),
        skip([get(m), get(P.thr), op.i32_lt_s]),
        get(P.mass), get(i), op.i32(2), op.i32_shl, op.i32_add, get(m), op.i32_store(),
        get(P.ids), get(n), op.i32(2), op.i32_shl, op.i32_add, get(i), op.i32_store(),
        inc(n, 1),
        get(total), get(m), op.i32_add, set(total),
        // Past 2^31 − 1 the caller refuses the table: say so and stop.
        get(total), op.i32(I32_MAX), op.i32_gt_u,
        op.if_([op.i32(-1), set(total), op.br(3)]),
        get(m), get(most), get(m), get(most), op.i32_gt_s, op.select, set(most),
      ]),
      inc(i, 1),
      op.br(0),
    ])]),
    get(P.out), get(n), op.i32_store(0),
    get(P.out), get(total), op.i32_store(4),
    get(P.out), get(most), op.i32_store(8),
  ]);
}

/** The module's functions, by export name, for the audit. */
export const INT_SAMPLE_FUNCTIONS: Record<string, Func> = { sample_masses: sampleMassesFn() };

/** Byte addresses of the arrays `sample_masses` reads and writes, in one module's memory. */
export interface SampleLayout {
  out: number;
  quot: number;
  rems: number;
  expT: number;
  expMul: number;
  never: number;
  logits: number;
  mass: number;
  ids: number;
}

/** An instance of the module, with room for one vocabulary and one exp table. */
export interface SampleKernel {
  sample_masses: (...args: number[]) => void;
  memory: ArrayBuffer;
  layout: SampleLayout;
}

/**
 * Assembles and instantiates the module with room for `vocab` ids, division tables of `divLen` entries
 * and an exp table of `expLen` entries; null where WebAssembly is missing.
 *
 * @example
 * ```ts
 * import { createSampleKernel } from "./int-sample.ts";
 * const kernel = createSampleKernel(151936, 33280, 8194);
 * kernel?.layout.logits; // where the logits go, in bytes
 * ```
 */
export function createSampleKernel(vocab: number, divLen: number, expLen: number): SampleKernel | null {
  if (typeof WebAssembly !== "object") return null;
  const sizes: Array<[keyof SampleLayout, number]> = [
    ["out", 16], ["quot", 4 * divLen], ["rems", 4 * divLen], ["expT", 4 * expLen], ["expMul", 64 * expLen],
    ["never", vocab], ["logits", 4 * vocab], ["mass", 4 * vocab], ["ids", 4 * vocab],
  ];
  const layout = {} as SampleLayout;
  let at = 0;
  for (const [name, bytes] of sizes) layout[name] = at, at += Math.ceil(bytes / 16) * 16;
  const bytes = assemble({ pages: Math.ceil(at / 65536), functions: INT_SAMPLE_FUNCTIONS });
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  const memory = (exports.memory as WebAssembly.Memory).buffer as ArrayBuffer;
  return { sample_masses: exports.sample_masses as SampleKernel["sample_masses"], memory, layout };
}

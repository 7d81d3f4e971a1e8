/**
 * The integer engine's sampler: greedy (the lowest id on a tie), or a draw over integer masses from the
 * exp table after a fixed-point temperature, filtered by min-p, top-k and top-p, driven by a seeded
 * xorshift64 generator with an unbiased bounded draw (rejection, never a modulo). Integer-only, like the
 * forward it follows (tests/kernels/audit.test.ts).
 *
 * Fixed-point options: `tempQ16` is temperature · 2^16 (0: greedy); `minPQ16` and `topPQ16` are
 * probabilities · 2^16 (0 and 65536 switch them off); `topK` is a count (0: all).
 *
 * @example
 * ```ts
 * import { sample, type SamplerScratch, seedRng } from "./sampler.ts";
 * declare const logits: Int32Array, scratch: SamplerScratch;
 * const rng = new Int32Array(2);
 * seedRng(rng, 0, 42);
 * const id = sample(logits, { tempQ16: 52429, topK: 40, minPQ16: 3277, topPQ16: 65536 }, rng, scratch);
 * ```
 * @module
 */
import { divShifted } from "../../kernels/int/isqrt.ts";
import { multiples, mulU16, mulU8 } from "../../kernels/int/mul.ts";
import { bitlen, I32_MAX, sat32, shift } from "../../kernels/int/round.ts";
import { expNeg, type LookupTable } from "../../kernels/int/tables.ts";
import type { SampleKernel } from "../../kernels/wasm/int-sample.ts";

/** Sampling options as integers. */
export interface IntSampling {
  tempQ16: number;
  topK: number;
  minPQ16: number;
  topPQ16: number;
}

/** The largest top-k whose k-th logit is found first (`greedyAndKth`), so that the pass reads about k ids. */
const TOP_K_HEAP = 1024;
/** Bits of one digit of the radix selection (`locate`): 2^12 buckets a pass. */
const DIGIT = 12;
/** The scaled difference at which the exp table gives 0: 32 nats at 2^-16. */
const CAP = 2097152;
/**
 * The division tables of a difference n = a · 2^16 + b · 2^8 + c (a < 2^15, b, c < 2^8): entries
 * [0, 2^15) for a · 2^32, [2^15, 2^15 + 2^8) for b · 2^24, [2^15 + 2^8, 2^15 + 2^9) for c · 2^16.
 */
const DIV_B = 32768;
const DIV_C = 33024;
const DIV_LEN = 33280;
/** Temperatures (· 2^16) at or above this take the plain long division (3 remainders stay in int32). */
const DIV_TABLE_LIMIT = 16777216;
/** The sizes a sampler's WebAssembly pass needs room for (kernels/wasm/int-sample.ts `createSampleKernel`). */
export const SAMPLE_KERNEL_ROOM = { divLen: DIV_LEN };

/** Per-vocabulary scratch of the sampler, and the ids it never picks. */
export interface SamplerScratch {
  /** Each candidate's mass, at its id. */
  mass: Int32Array;
  /** The candidates' ids, in id order. */
  ids: Int32Array;
  /** One multiples table (`mulQ16`). */
  table: Int32Array;
  exp: LookupTable;
  /** One byte per id, 1 for an id never picked (model/sample.ts `neverSampled`, made by the adapter). */
  never: Uint8Array;
  /** The ids of one bucket while `locate` narrows down (vocab entries). */
  work: Int32Array;
  /** A min-heap of the k largest logits for a top-k cut (`greedyAndKth`; `TOP_K_HEAP` entries). */
  heap: Int32Array;
  /** The bucket sums of one `locate` pass (2^12 entries). */
  hist: Int32Array;
  /** floor(x · 2^e / tempQ16), capped at 32 nats, for the three parts of a difference (`divisionTables`). */
  quot: Int32Array;
  /** The matching remainders (0 where the quotient is capped). */
  rems: Int32Array;
  /** [0]: the tempQ16 `quot` and `rems` are for (0: none yet); [1]: the weight `locate` found before its id. */
  at: Int32Array;
  /**
   * Whether `exp` falls (`falls`; formats/lut4 refuses a table that does not): then a token's mass falls
   * as its logit does, and `sample` finds once per draw the difference past which none is kept.
   */
  falling: boolean;
  /**
   * The pass over the vocabulary as WebAssembly, where the caller made one: `mass`, `ids`, `quot`,
   * `rems` and `never` are then views of its memory, `logits` the room the logits are copied to, `out`
   * its results (count, total, largest mass).
   */
  kernel?: SampleKernel;
  logits?: Int32Array;
  out?: Int32Array;
}

/**
 * Scratch for a vocabulary of `vocab` ids, using the model's exp table; `never` marks the ids never
 * picked (default none). With `kernel` (kernels/wasm/int-sample.ts `createSampleKernel(vocab,
 * SAMPLE_KERNEL_ROOM.divLen, exp.t.length)`), the pass over the vocabulary runs in it: the same draws.
 */
export function samplerScratch(
  vocab: number,
  exp: LookupTable,
  never: Uint8Array = new Uint8Array(vocab),
  kernel?: SampleKernel,
): SamplerScratch {
  const s: SamplerScratch = {
    mass: new Int32Array(vocab),
    ids: new Int32Array(vocab),
    table: new Int32Array(32),
    exp,
    never,
    work: new Int32Array(vocab),
    heap: new Int32Array(TOP_K_HEAP),
    hist: new Int32Array(4096),
    quot: new Int32Array(DIV_LEN),
    rems: new Int32Array(DIV_LEN),
    at: new Int32Array(2),
    falling: falls(exp),
  };
  if (kernel === undefined) return s;
  const { memory, layout } = kernel;
  s.kernel = kernel;
  s.mass = new Int32Array(memory, layout.mass, vocab);
  s.ids = new Int32Array(memory, layout.ids, vocab);
  s.quot = new Int32Array(memory, layout.quot, DIV_LEN);
  s.rems = new Int32Array(memory, layout.rems, DIV_LEN);
  s.never = new Uint8Array(memory, layout.never, vocab);
  s.never.set(never);
  new Int32Array(memory, layout.expT, exp.t.length).set(exp.t);
  new Int32Array(memory, layout.expMul, exp.mul.length).set(exp.mul);
  s.logits = new Int32Array(memory, layout.logits, vocab);
  s.out = new Int32Array(memory, layout.out, 4);
  return s;
}

/**
 * Whether `expNeg` over this table never rises: entries that never rise and end at 0 or above, each
 * step under 2^23, and the multiples of each step as `prepareTable` makes them.
 */
export function falls(e: LookupTable): boolean {
  const t = e.t;
  for (let i = 0; i + 1 < t.length; i++) {
    const step = t[i + 1] - t[i];
    if (step > 0 || step <= -8388608) return false;
    let acc = 0;
    for (let k = 0; k < 16; k++) {
      if (e.mul[(i << 4) + k] !== acc) return false;
      acc = acc + step;
    }
  }
  return t.length === 0 || t[t.length - 1] >= 0;
}

/** Seeds the xorshift64 state (two 32-bit halves); the all-zero seed is replaced by 2^64 / φ. */
export function seedRng(rng: Int32Array, hi: number, lo: number): void {
  rng[0] = hi;
  rng[1] = lo;
  if (hi === 0 && lo === 0) {
    rng[0] = -1640531527; // 0x9E3779B9
    rng[1] = 2135587861; // 0x7F4A7C15
  }
}

/** Advances xorshift64 (shifts 13, 7, 17 on the 64-bit state held as two int32) and returns its high word. */
export function nextU32(rng: Int32Array): number {
  let hi = rng[0];
  let lo = rng[1];
  // x ^= x << 13
  hi = hi ^ ((hi << 13) | (lo >>> 19));
  lo = lo ^ (lo << 13);
  // x ^= x >> 7
  lo = lo ^ ((lo >>> 7) | (hi << 25));
  hi = hi ^ (hi >>> 7);
  // x ^= x << 17
  hi = hi ^ ((hi << 17) | (lo >>> 15));
  lo = lo ^ (lo << 17);
  rng[0] = hi;
  rng[1] = lo;
  return hi >>> 0;
}

/**
 * A uniform integer in [0, bound) for 1 ≤ bound < 2^31: the top bitlen(bound − 1) bits of a word,
 * rejected while ≥ bound (so never biased); at most 128 tries, then an error (probability < 2^-128).
 */
export function drawBelow(rng: Int32Array, bound: number): number {
  if (bound <= 1) return 0;
  const bits = bitlen(bound - 1);
  for (let i = 0; i < 128; i++) {
    const r = nextU32(rng) >>> (32 - bits);
    if (r < bound) return r;
  }
  throw new Error("drawBelow: 128 rejections in a row");
}

/** The largest logit's id among those `never` does not mark (default none), the lowest on a tie. */
export function greedy(logits: Int32Array, never?: Uint8Array): number {
  let best = -1;
  for (let i = 0; i < logits.length; i++) {
    if (never !== undefined && never[i] !== 0) continue;
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

/**
 * `greedy`'s id, and in `s.heap[0]` the `k`-th largest logit among the ids `s.never` does not mark (with
 * fewer, the least of them; I32_MIN with none), in one pass: a min-heap of the `k` largest seen, which
 * most ids only compare with its least; a new largest is always above that least, so it is caught there.
 */
function greedyAndKth(logits: Int32Array, k: number, s: SamplerScratch): number {
  const never = s.never, heap = s.heap;
  heap[0] = -2147483648;
  let best = -1;
  let size = 0;
  let i = 0;
  // The first k ids not masked fill the heap.
  for (; i < logits.length && size < k; i++) {
    if (never[i] !== 0) continue;
    const v = logits[i];
    let at = size;
    size = size + 1;
    while (at > 0 && heap[(at - 1) >> 1] > v) {
      heap[at] = heap[(at - 1) >> 1];
      at = (at - 1) >> 1;
    }
    heap[at] = v;
    if (best < 0 || v > logits[best]) best = i;
  }
  // Then a larger one replaces the least and sinks to its place.
  let least = heap[0];
  for (; i < logits.length; i++) {
    const v = logits[i];
    if (v <= least || never[i] !== 0) continue;
    let at = 0;
    for (;;) {
      let c = (at << 1) + 1;
      if (c >= k) break;
      if (c + 1 < k && heap[c + 1] < heap[c]) c = c + 1;
      if (heap[c] >= v) break;
      heap[at] = heap[c];
      at = c;
    }
    heap[at] = v;
    least = heap[0];
    if (v > logits[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

/**
 * floor(v · f / 2^16) for 0 ≤ v < 2^31 and 0 ≤ f < 2^16: v's high 15 bits times f exactly, plus its
 * low 16 bits times f in two bytes, with nested floors (each product below 2^31).
 */
function mulQ16(v: number, f: number, t: Int32Array): number {
  multiples(f, t, 0);
  const hi = v >> 16;
  const lo = v & 65535;
  const low = (mulU8(t, 0, lo >> 8) + (mulU8(t, 0, lo & 255) >> 8)) >> 8;
  return mulU16(t, 0, hi) + low;
}

/**
 * Fills `s.quot` and `s.rems` for the divisor d (1 ≤ d < 2^24): at each of the three parts of a
 * difference (`DIV_B`), min(floor(x · 2^e / d), 2^21) and x · 2^e − d · floor(…), by addition from the
 * long division of one step 2^e; a capped quotient stays capped (its remainder 0).
 */
function divisionTables(s: SamplerScratch, d: number): void {
  if (s.at[0] === d) return;
  divisionPart(s, 0, DIV_B, d, 32);
  divisionPart(s, DIV_B, DIV_C, d, 24);
  divisionPart(s, DIV_C, DIV_LEN, d, 16);
  s.at[0] = d;
}

function divisionPart(s: SamplerScratch, from: number, to: number, d: number, e: number): void {
  // 2^e = step · d + rest, bit by bit (both below 2^22 and d while not capped).
  let step = 0;
  let rest = 0;
  for (let i = e; i >= 0; i = i - 1) {
    rest = rest + rest + (i === e ? 1 : 0);
    step = step + step;
    if (rest >= d) {
      rest = rest - d;
      step = step + 1;
    }
    if (step >= CAP) {
      step = CAP;
      break;
    }
  }
  let q = 0;
  let r = 0;
  for (let x = from; x < to; x++) {
    s.quot[x] = q;
    s.rems[x] = r;
    if (q < CAP) {
      q = q + step;
      r = r + rest;
      if (r >= d) {
        r = r - d;
        q = q + 1;
      }
      if (q >= CAP) {
        q = CAP;
        r = 0;
      }
    }
  }
}

/**
 * kernels/int/isqrt.ts `divShifted(n, 16, d, 2^21)` = min(floor(n · 2^16 / d), 2^21) for 0 ≤ n < 2^31,
 * from the tables `divisionTables` made for d: n · 2^16 = a · 2^32 + b · 2^24 + c · 2^16, each part's
 * quotient and remainder read, the three remainders (below 3d) carried.
 */
function scaledDiff(s: SamplerScratch, n: number, d: number): number {
  const a = n >>> 16;
  const b = DIV_B + ((n >>> 8) & 255);
  const c = DIV_C + (n & 255);
  let q = s.quot[a] + s.quot[b] + s.quot[c];
  let r = s.rems[a] + s.rems[b] + s.rems[c];
  if (r >= d) {
    q = q + 1;
    r = r - d;
    if (r >= d) q = q + 1;
  }
  return q > CAP ? CAP : q;
}

/** A token's mass at `diff` below the top logit: exp(−diff / T) from the table, the top's at 2^massBits. */
function massOf(s: SamplerScratch, diff: number, d: number, tables: boolean, massBits: number): number {
  // Beyond 32 nats the exp table gives 0; the scaled difference is capped there.
  const scaled = tables ? scaledDiff(s, diff, d) : divShifted(diff, 16, d, CAP);
  return shift(expNeg(s.exp, scaled), 30 - massBits);
}

/**
 * Among the `n` candidates `s.ids[0, n)` (in id order, masses in `s.mass`, all below 2^bits), ranked by
 * mass descending then id ascending as `sample` ranks them, the one whose span holds position `r`, each
 * candidate spanning 1 position (`counting`) or its mass, in ranking order; `s.at[1]` gets the positions
 * before it. A radix selection, never a sort: each pass sums the candidates by a 12-bit digit of their
 * mass (from the top), walks the buckets from the heaviest and keeps the one holding `r`, in id order;
 * at the last digit the masses are equal and the walk goes by id. Linear in `n` (at most three passes).
 */
function locate(s: SamplerScratch, n: number, r: number, counting: boolean, bits: number): number {
  const mass = s.mass;
  const hist = s.hist;
  let src = s.ids;
  let count = n;
  let rest = r;
  let before = 0;
  let sh = bits > DIGIT ? bits - DIGIT : 0;
  let width = bits - sh;
  for (;;) {
    const top = (1 << width) - 1;
    for (let d = 0; d <= top; d++) hist[d] = 0;
    for (let j = 0; j < count; j++) {
      const m = mass[src[j]];
      const d = (m >> sh) & top;
      hist[d] = hist[d] + (counting ? 1 : m);
    }
    let pick = top;
    while (pick > 0 && rest >= hist[pick]) {
      rest = rest - hist[pick];
      before = before + hist[pick];
      pick = pick - 1;
    }
    if (sh === 0) {
      // One mass in this bucket: the ranking among its ids is id order.
      let last = 0;
      for (let j = 0; j < count; j++) {
        const id = src[j];
        const m = mass[id];
        if ((m & top) !== pick) continue;
        const w = counting ? 1 : m;
        last = id;
        if (rest < w) {
          s.at[1] = before;
          return id;
        }
        rest = rest - w;
        before = before + w;
      }
      s.at[1] = before;
      return last;
    }
    let k = 0;
    for (let j = 0; j < count; j++) {
      const id = src[j];
      if (((mass[id] >> sh) & top) === pick) {
        s.work[k] = id;
        k = k + 1;
      }
    }
    src = s.work;
    count = k;
    if (count === 1) {
      s.at[1] = before;
      return src[0];
    }
    const next = sh > DIGIT ? sh - DIGIT : 0;
    width = sh - next;
    sh = next;
  }
}

/** Keeps, of the `n` candidates, those ranked up to `id` (mass above its, or equal with an id ≤ it), in id order. */
function keepUpTo(s: SamplerScratch, n: number, id: number): number {
  const me = s.mass[id];
  let k = 0;
  for (let j = 0; j < n; j++) {
    const c = s.ids[j];
    const m = s.mass[c];
    if (m > me || (m === me && c <= id)) {
      s.ids[k] = c;
      k = k + 1;
    }
  }
  return k;
}

/**
 * What the pass over the vocabulary reads besides the logits: the top logit, the difference from it
 * where masses stop (`drop`), the least mass kept (`thr`), the temperature · 2^16 (`d`).
 */
interface Cut {
  top: number;
  drop: number;
  thr: number;
  d: number;
}

/** What the pass over the vocabulary leaves: the candidates (in `s.ids`), their total mass, the largest. */
interface Candidates {
  n: number;
  total: number;
  most: number;
}

/**
 * The pass over the vocabulary in TypeScript: each id not masked whose difference from the top is
 * below `drop` gets its mass, kept at or above `thr`.
 */
function passInLoop(
  s: SamplerScratch,
  logits: Int32Array,
  { top, drop, thr, d }: Cut,
  tables: boolean,
  massBits: number,
): Candidates {
  let n = 0;
  let total = 0;
  let most = 0;
  for (let i = 0; i < logits.length; i++) {
    if (s.never[i] !== 0) continue;
    const diff = sat32(top - logits[i]);
    if (diff >= drop) continue;
    const m = massOf(s, diff, d, tables, massBits);
    if (m > 0 && m >= thr) {
      s.mass[i] = m;
      s.ids[n] = i;
      n = n + 1;
      total = total + m;
      if (m > most) most = m;
    }
  }
  return { n, total, most };
}

/**
 * The same pass in the scratch's WebAssembly module (kernels/wasm/int-sample.ts `sample_masses`), the
 * division tables made for d, the final shift `sh` in [1, 30]; a total past 2^31 − 1 comes back as 2^31.
 */
function passInKernel(
  s: SamplerScratch,
  logits: Int32Array,
  { top, drop, thr, d }: Cut,
  sh: number,
): Candidates {
  const at = s.kernel!.layout, out = s.out!;
  s.logits!.set(logits);
  // The three parts of the division tables start DIV_B and DIV_C entries in (4 bytes each).
  const b = DIV_B << 2, c = DIV_C << 2, unit = d === 65536 ? 1 : 0;
  s.kernel!.sample_masses(
    at.logits,
    at.never,
    logits.length,
    top,
    drop | 0,
    thr,
    d,
    sh,
    at.quot,
    at.quot + b,
    at.quot + c,
    at.rems,
    at.rems + b,
    at.rems + c,
    CAP,
    at.expT,
    s.exp.t.length - 1,
    at.expMul,
    at.mass,
    at.ids,
    at.out,
    unit,
  );
  return { n: out[0], total: out[1] < 0 ? 2147483648 : out[1], most: out[2] };
}

/**
 * Picks the next token from logits at 2^-16 nats; ids marked in `s.never` are never picked (they take
 * no mass and are never the greedy choice). Greedy (no draw) when tempQ16 is 0 or topK is 1.
 * Otherwise each token's mass is exp(−(max − logit) / T) from the exp table, scaled so the top token's
 * is exactly 2^M with M = 31 − bitlen(vocab) (the total stays below 2^31); min-p keeps masses ≥
 * minP · 2^M; the rest are ranked by mass (then id); top-k and top-p cut the ranking; one unbiased draw
 * below the kept total walks it.
 *
 * The ranking is never built: the k-th candidate, the top-p cut and the drawn one are each found by a
 * radix selection over the masses (`locate`), so a draw is linear in the vocabulary, and picks what
 * walking the sorted ranking would. Each mass's division by T reads tables made once per temperature
 * (`scaledDiff`), and with a falling exp table (`falls`) the tokens past the last one kept are passed
 * over unread. The exp table is the one formats/lut4 checks (2^30 falling to 0); a table whose masses
 * total 2^31 or more is refused. With no mass at all (an exp table of zeros) the greedy id is picked.
 */
export function sample(logits: Int32Array, o: IntSampling, rng: Int32Array, s: SamplerScratch): number {
  if (o.tempQ16 <= 0 || o.topK === 1) return greedy(logits, s.never);
  const vocab = logits.length;
  // With a top-k cut (and masses that fall as logits do) nothing lighter than the k-th largest logit's
  // mass is kept, so the pass may leave those out at once: it then gives masses to about k ids, not
  // the vocabulary. Its logit is found in the same pass as the greedy id.
  const kthFirst = s.falling && o.topK > 0 && o.topK <= TOP_K_HEAP;
  const best = kthFirst ? greedyAndKth(logits, o.topK, s) : greedy(logits, s.never);
  const top = logits[best];
  let massBits = 31 - bitlen(vocab);
  if (massBits > 30) massBits = 30;
  const thr = o.minPQ16 <= 0 ? 1 : shift(o.minPQ16, 16 - massBits);
  const d = o.tempQ16;
  const tables = d < DIV_TABLE_LIMIT;
  if (tables) divisionTables(s, d);
  let floor = thr;
  if (kthFirst) {
    const m = massOf(s, sat32(top - s.heap[0]), d, tables, massBits);
    if (m > floor) floor = m;
  }
  // Where masses fall with the difference, those at or past `drop` are all left out: found by bisection.
  let drop = 2147483648;
  if (s.falling) {
    let lo = 0;
    while (lo < drop) {
      const mid = lo + ((drop - lo) >>> 1);
      const m = massOf(s, mid, d, tables, massBits);
      if (m > 0 && m >= floor) lo = mid + 1;
      else drop = mid;
    }
  }
  const cut: Cut = { top, drop, thr: floor, d };
  const pass = s.kernel !== undefined && tables && massBits <= 29
    ? passInKernel(s, logits, cut, 30 - massBits)
    : passInLoop(s, logits, cut, tables, massBits);
  let n = pass.n;
  let total = pass.total;
  const most = pass.most;
  if (n === 0) return best;
  if (total > I32_MAX) {
    throw new RangeError("sample: the masses total 2^31 or more (an exp table above 2^30)");
  }
  const bits = bitlen(most);
  if (o.topK > 0 && o.topK < n) {
    n = keepUpTo(s, n, locate(s, n, o.topK - 1, true, bits));
    total = 0;
    for (let j = 0; j < n; j++) total = total + s.mass[s.ids[j]];
  }
  if (o.topPQ16 > 0 && o.topPQ16 < 65536) {
    // The smallest prefix of the ranking whose mass reaches the target: up to the candidate holding
    // position target − 1 (the first one when the target is 0).
    const target = mulQ16(total, o.topPQ16, s.table);
    const last = locate(s, n, target > 0 ? target - 1 : 0, false, bits);
    total = s.at[1] + s.mass[last];
    // The kept prefix's positions are the first `total` of the whole ranking, so the draw below
    // `total` finds its candidate among all of them: no pass to drop the rest.
  }
  return locate(s, n, drawBelow(rng, total), false, bits);
}

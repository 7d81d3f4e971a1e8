/**
 * The float sampler's draw (model/sample.ts `pickToken` at a temperature above 0), in time linear in
 * the vocabulary and mostly without ranking it.
 *
 * What it must give is fixed: the id that ranking every candidate by probability (then id), summing in
 * that order in f64 and walking the sums would give (`exactDraw`, the definition). Ranking 151,936 ids
 * and taking as many `Math.exp` cost 4–8 ms a token, 6–10% of a float token at Qwen3-0.6B's shape. So:
 *
 * 1. One pass (WebAssembly: kernels/wasm/draw-pass.ts) gives each candidate a bucket, ⌊−x · 1024⌋
 *    for its scaled logit x ≤ 0, so a lower bucket never holds a less likely id, and a close
 *    probability, within `EXP_ERROR` of `Math.exp`: the bucket's e^(−b/1024) times a cubic. Per bucket,
 *    a count and a mass.
 * 2. With top-k, the buckets that hold the k most likely ids, and one more, are kept: every id below
 *    them is less likely by a whole bucket's width (a factor e^(1/1024), which no `Math.exp` rounding
 *    can undo), so the kept ids hold the top k, and `exactDraw` ranks only them.
 * 3. Without it, the masses locate the bucket where the walk (and before it the top-p cut) crosses its
 *    target. Only that bucket and its two neighbours get exact probabilities and are ranked. The
 *    result is kept if every sum that decides it clears its threshold by more than the worst error of
 *    both computations (`margin`); otherwise `exactDraw` ranks every candidate. The margin is about
 *    2^-32 of the total at a real vocabulary, so that is rare: no draw of 12,000 at 151,936 ids fell
 *    back (flat and spread rows, top-p 1 and 0.95).
 *
 * @module
 */
import type { SamplingChoice } from "./sampling.ts";
import { createDrawPass, type DrawPass } from "../kernels/wasm/draw-pass.ts";

/** One row of logits as the draw reads it: its values from `off`, its top value, the temperature. */
export interface Row {
  logits: Float32Array;
  off: number;
  n: number;
  max: number;
  temperature: number;
}

/**
 * 2^-53: a probability below it never changes a sum that starts at 1 (half an ulp of 1 or more), and
 * the ranked sums start with the top token's 1, so it is never kept, drawn or counted.
 */
export const NEGLIGIBLE = 2 ** -53;
/** Buckets per nat of scaled logit: e^(1/1024) between the ends of one is far beyond any rounding. */
const PER_NAT = 1024;
/** Scaled logits go down to log(2^-53) − 1, so buckets 0..BUCKETS − 1 hold every candidate. */
const BUCKETS = Math.ceil((53 * Math.LN2 + 1) * PER_NAT) + 2;
/** At or below this many candidates, `exactDraw` ranks them all: cheap, and no margin to check. */
const FEW = 2048;
/**
 * The bound on pass 1's relative distance from `Math.exp`: per id, the bucket's `BUCKET_EXP` times a
 * cubic in δ, within 4e-14 (δ^4/24) and a few roundings (measured: under 2^-47; tested: 2^-44).
 */
export const EXP_ERROR = 2 ** -40;
/** e^(−b/1024) for every bucket b: a bucket's probabilities are this times e^δ, δ in (−1/1024, 0]. */
const BUCKET_EXP = Float64Array.from({ length: BUCKETS }, (_, b) => Math.exp(-b / PER_NAT));

/**
 * The draw: one id from `row` under `choice` (temperature > 0), for the uniform `u` in [0, 1), with
 * the ids marked in `never` left out. `row.max` is the largest logit not masked, and finite.
 *
 * @example
 * ```ts
 * import { drawToken } from "./draw.ts";
 * const logits = new Float32Array([0, 2, 1]);
 * const choice = { temperature: 1, topK: 0, topP: 1, minP: 0 };
 * drawToken({ logits, off: 0, n: 3, max: 2, temperature: 1 }, choice, 0.5); // 1
 * ```
 */
export function drawToken(row: Row, choice: SamplingChoice, u: number, never?: Uint8Array): number {
  const { topK, topP, minP } = choice;
  const s = scratchFor(row.n), floor = Math.max(minP, NEGLIGIBLE);
  // Without WebAssembly (no runtime ferry supports), the definition ranks every candidate.
  const m = s.pass === null ? 0 : bucketCandidates(s, row, floor, topK > 0, never);
  if (topK > 0 && topK < m) {
    const kept = keepTop(s, row, floor, topK, never);
    if (kept >= 0) return exactDraw(s, kept, topK, topP, u);
  } else if (m > FEW) {
    const id = windowDraw(s, row, floor, m, topP, u, never);
    if (id >= 0) return id;
  }
  return exactDraw(s, exactCandidates(s, row, floor, never), topK, topP, u);
}

/**
 * Pass 1: per bucket, the count (with `counting`) and the mass relative to the bucket's `BUCKET_EXP`
 * (`s.mass`) of the candidates, ids not masked whose probability is at least `floor`; returns how many.
 * Those too near the floor to say are counted in (`s.near` says how many), so the masses may be off by
 * that many floors. Nothing per id is stored: the later steps read the row again.
 */
function bucketCandidates(
  s: Scratch,
  row: Row,
  floor: number,
  counting: boolean,
  never?: Uint8Array,
): number {
  const { logits, off, n, max } = row, { count, mass } = s, scale = scaleOf(row);
  const out = surelyBelow(floor), sure = out - 2 ** -15;
  s.used = Math.min(BUCKETS, Math.ceil(out) + 1);
  mass.fill(0, 0, s.used);
  if (counting) count.fill(0, 0, s.used);
  const pass = s.pass!;
  pass.logits.set(logits.subarray(off, off + n));
  if (never === undefined) pass.never.fill(0, 0, n);
  else pass.never.set(never.subarray(0, n));
  const { at } = pass;
  const m = pass.run(
    at.logits,
    at.never,
    n,
    max,
    scale,
    out,
    sure,
    counting ? 1 : 0,
    at.mass,
    at.count,
    at.result,
  );
  s.near = pass.result[0];
  return m;
}

/**
 * Scaled, a probability p is y = −1024 · log p. Past the floor's y plus 2^-16 an id is surely below
 * the floor, whatever the rounding of y and of `Math.exp`; from 2^-16 short of it, too near to say.
 */
function surelyBelow(floor: number): number {
  return -Math.log(floor) * PER_NAT + 2 ** -16;
}

/** The factor that scales a logit less the top one to y = −1024 · x: the same one everywhere. */
function scaleOf(row: Row): number {
  return -PER_NAT / row.temperature;
}

/** The bucket of id i, as pass 1 gives it. */
function bucketOf(row: Row, i: number, scale: number): number {
  return ((row.logits[row.off + i] - row.max) * scale) | 0;
}

/** The exact probability of id i, as `exactDraw` defines it (the logit less the top, divided). */
function exactProb(row: Row, i: number): number {
  return Math.exp((row.logits[row.off + i] - row.max) / row.temperature);
}

/**
 * The candidates with exact probability ≥ `floor` from the buckets 0..`last` into `s.ids` in id order,
 * with their exact probabilities in `s.probs`; returns how many. `last` = −1 takes every bucket.
 */
function gather(s: Scratch, row: Row, floor: number, last: number, never?: Uint8Array): number {
  const { logits, off, n, max, temperature } = row, { ids, probs } = s, scale = scaleOf(row);
  const every = last < 0, out = surelyBelow(floor);
  let m = 0;
  for (let i = 0; i < n; i++) {
    const y = (logits[off + i] - max) * scale;
    if (y > out || (!every && (y | 0) > last)) continue;
    if (never !== undefined && never[i]) continue;
    const p = Math.exp((logits[off + i] - max) / temperature);
    if (p >= floor) probs[i] = p, ids[m++] = i;
  }
  return m;
}

/** Every candidate, exactly: the ids `exactDraw` ranks when nothing shorter is safe. */
function exactCandidates(s: Scratch, row: Row, floor: number, never?: Uint8Array): number {
  return gather(s, row, floor, -1, never);
}

/**
 * Keeps (in id order) the candidates of the buckets that hold the k most likely, plus the next bucket:
 * everything below is less likely than all of them by a bucket's width. Returns how many, or −1 where
 * the candidates near the floor leave fewer than k above it.
 */
function keepTop(s: Scratch, row: Row, floor: number, k: number, never?: Uint8Array): number {
  let last = 0;
  for (let seen = s.count[0]; seen < k;) seen += s.count[++last];
  const below = last + 1, kept = gather(s, row, floor, below, never);
  if (s.near === 0) return kept;
  const scale = scaleOf(row);
  let above = 0;
  for (let j = 0; j < kept; j++) if (bucketOf(row, s.ids[j], scale) <= last) above++;
  return above >= k ? kept : -1;
}

/**
 * The draw from the bucket masses, or −1 where a sum that decides it comes within `margin` of its
 * threshold: first the top-p cut (the least prefix whose mass reaches topP of the whole), then the
 * walk to u times that mass.
 */
function windowDraw(
  s: Scratch,
  row: Row,
  floor: number,
  m: number,
  topP: number,
  u: number,
  never?: Uint8Array,
): number {
  let total = 0;
  for (let b = 0; b < s.used; b++) total += s.mass[b] * BUCKET_EXP[b];
  // The worst distance between a sum here and the same sum in exactDraw: the close probabilities'
  // error, twice, the rounding of every sum over the candidates and buckets, generously, and the
  // candidates near the floor that pass 1 may have counted wrongly.
  const margin = total * (4 * EXP_ERROR + (m + s.used + 16) * 2 ** -49) + 2 * s.near * floor;
  let mass = total;
  if (topP < 1) {
    if (crossing(s, row, floor, topP * total, margin, never) < 0) return -1;
    mass = s.reached;
  }
  const target = u * mass;
  if (!(target < mass - margin)) return -1;
  const at = crossing(s, row, floor, target, margin, never);
  return at < 0 ? -1 : s.ids2[at];
}

/**
 * The candidate where the sums in rank order first pass `target` by more than `margin`, the sum before
 * it short of `target` by more than `margin` too: its place in `s.ids2` (the ranked window), its sum
 * in `s.reached`; or −1. Only the bucket where the masses cross, and its neighbours, are ranked, and
 * the answer must lie in that middle bucket.
 */
function crossing(
  s: Scratch,
  row: Row,
  floor: number,
  target: number,
  margin: number,
  never?: Uint8Array,
): number {
  const mass = s.mass;
  let before = 0, above = 0, b = 0;
  for (; b < s.used; b++) {
    const bucket = mass[b] * BUCKET_EXP[b];
    if (before + bucket > target) break;
    above = before, before += bucket;
  }
  if (b === s.used) return -1;
  const first = Math.max(b - 1, 0), last = b + 1, scale = scaleOf(row);
  const { logits, off, n, max } = row, window = s.ids2;
  const span = last - first;
  let w = 0;
  for (let i = 0; i < n; i++) {
    // One unsigned comparison: a bucket outside the window, on either side, is rarely in it, so this
    // branch is predicted well where two comparisons (one per side) are a coin toss each.
    const offset = ((((logits[off + i] - max) * scale) | 0) - first) >>> 0;
    if (offset > span || (never !== undefined && never[i])) continue;
    if (exactProb(row, i) >= floor) window[w++] = i;
  }
  const ranked = rankWindow(s, row, w);
  let sum = above;
  for (let j = 0; j < w; j++) {
    const id = ranked[j], previous = sum;
    sum += s.probs[id];
    if (sum <= target) continue;
    const clear = sum - target > margin && target - previous > margin;
    if (!clear || bucketOf(row, id, scale) !== b) return -1;
    s.reached = sum;
    return j;
  }
  return -1;
}

/** Exact probabilities for the `w` window ids in `s.ids2` (id order), ranked in place; returns them. */
function rankWindow(s: Scratch, row: Row, w: number): Int32Array {
  const { ids2: ids, keys2: keys } = s;
  for (let j = 0; j < w; j++) s.probs[ids[j]] = exactProb(row, ids[j]), keys[j] = keyOf(s, ids[j]);
  if (w <= SMALL) insertion(s.probs, ids, 0, w);
  else sortKeys(s.probs, ids, keys, s.ids3, s.keys3, s.counts, w);
  return ids;
}

/**
 * The definition: ranks the `m` candidates in `s.ids` (id order, their exact probabilities in
 * `s.probs`) by probability, then id,
 * keeps the first `topK` (0: all), then the least prefix whose mass reaches `topP` of theirs, and
 * walks u times that mass down the ranking in f64.
 */
function exactDraw(s: Scratch, m: number, topK: number, topP: number, u: number): number {
  const { probs, ids, keys } = s;
  for (let j = 0; j < m; j++) keys[j] = keyOf(s, ids[j]);
  const candidates = topK > 0 ? Math.min(m, topK) : m;
  rankTop(s, m, candidates);
  let sum = 0;
  for (let j = 0; j < candidates; j++) sum += probs[ids[j]];
  let kept = 0, mass = 0;
  while (kept < candidates && (kept === 0 || mass < topP * sum)) mass += probs[ids[kept++]];
  let r = u * mass;
  for (let j = 0; j < kept; j++) {
    r -= probs[ids[j]];
    if (r < 0) return ids[j];
  }
  return ids[kept - 1];
}

/** The sort key of id's probability in `s.probs`: its top 32 bits that vary. */
function keyOf(s: Scratch, id: number): number {
  // Past the constant bits of a probability in [2^-53, 1]: 26 of the high word, 6 of the low.
  return ((s.words[2 * id + HI] - HIGH_BASE) << 6) | (s.words[2 * id + 1 - HI] >>> 26);
}

/** The high word of a probability in [2^-53, 1] less this is below 2^26. */
const HIGH_BASE = 0x3ca00000;
/** At or below this many ids, insertion sorts them. */
const SMALL = 32;
/** Where a Float64Array's high word sits in its Uint32Array view (1 on a little-endian machine). */
const HI = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0;

/**
 * The draw's scratch, grown to the longest row seen and kept (one module instance per thread; no
 * caller code runs while it is in use): each id's exact probability (and its 32-bit words); per
 * candidate its id and key; per bucket its count and mass; the window's ids and keys, with a second
 * buffer of each for the radix sort's passes.
 */
interface Scratch {
  probs: Float64Array;
  words: Uint32Array;
  ids: Int32Array;
  keys: Int32Array;
  ids2: Int32Array;
  keys2: Int32Array;
  ids3: Int32Array;
  keys3: Int32Array;
  count: Int32Array;
  mass: Float64Array;
  /** Bucket counts: the three LSD passes', and the top-k cut's (the keys' top 16 bits). */
  counts: [Int32Array, Int32Array, Int32Array];
  top: Int32Array;
  /** Buckets the current row can use. */
  used: number;
  /** `crossing`'s sum at the candidate it found. */
  reached: number;
  /** Pass 1's candidates whose close probability lies too near the floor to say. */
  near: number;
  /** Pass 1 in WebAssembly (kernels/wasm/draw-pass.ts), whose memory `mass` and `count` then are. */
  pass: DrawPass | null;
}

let scratch: Scratch | undefined;

function scratchFor(n: number): Scratch {
  if (scratch === undefined || scratch.probs.length < n) {
    const probs = new Float64Array(n), ints = () => new Int32Array(n), pass = createDrawPass(n, BUCKETS);
    scratch = {
      probs,
      words: new Uint32Array(probs.buffer),
      ids: ints(),
      keys: ints(),
      ids2: ints(),
      keys2: ints(),
      ids3: ints(),
      keys3: ints(),
      count: pass?.count ?? new Int32Array(BUCKETS),
      mass: pass?.mass ?? new Float64Array(BUCKETS),
      counts: [new Int32Array(2048), new Int32Array(2048), new Int32Array(1024)],
      top: new Int32Array(65536),
      used: 0,
      reached: 0,
      near: 0,
      pass,
    };
  }
  return scratch;
}

/**
 * Orders the `m` candidates (`ids`, in id order, their sort keys in `keys`) so that the first `k` are
 * the `k` most likely, most likely first, the lower id first on a tie; what follows them is left in no
 * order. Linear in `m`: for k < m, `cutTop` keeps only the candidates that can be among the first k;
 * what is kept is sorted by insertion when small, else by `sortKeys`.
 */
function rankTop(s: Scratch, m: number, k: number): void {
  const kept = k < m && m > SMALL ? cutTop(s, m, k) : m;
  if (kept <= SMALL) insertion(s.probs, s.ids, 0, kept);
  else sortKeys(s.probs, s.ids, s.keys, s.ids2, s.keys2, s.counts, kept);
}

/**
 * Keeps the candidates at or above the top 16 key bits that hold the k-th (at least k of them, in id
 * order), after one pass counting those bits; returns how many.
 */
function cutTop(s: Scratch, m: number, k: number): number {
  const ids = s.ids, keys = s.keys, top = s.top;
  top.fill(0);
  for (let j = 0; j < m; j++) top[keys[j] >>> 16]++;
  let at = 65535, seen = top[at];
  while (seen < k) seen += top[--at];
  let kept = 0;
  for (let j = 0; j < m; j++) {
    const key = keys[j];
    if (key >>> 16 >= at) keys[kept] = key, ids[kept++] = ids[j];
  }
  return kept;
}

/**
 * Sorts `m` ids (in id order, with their keys) by probability, highest first, ties by id: a stable
 * LSD radix sort of the keys (11, 11 and 10 bits, highest first, each pass carrying key and id, through
 * `ids2`/`keys2`), then each run of equal keys, still in id order, by the full probabilities
 * (insertion; a run longer than `SMALL` by a comparison sort).
 */
function sortKeys(
  probs: Float64Array,
  ids: Int32Array,
  keys: Int32Array,
  ids2: Int32Array,
  keys2: Int32Array,
  counts: Scratch["counts"],
  m: number,
): void {
  const [c0, c1, c2] = counts;
  c0.fill(0), c1.fill(0), c2.fill(0);
  for (let j = 0; j < m; j++) {
    const key = keys[j];
    c0[key & 2047]++, c1[(key >>> 11) & 2047]++, c2[key >>> 22]++;
  }
  // Each pass moves the keys to the other buffer, unless every key has the same digit there.
  let flipped = radixPass(keys, ids, keys2, ids2, c0, 0, 2047, m);
  if (flipped) flipped = !radixPass(keys2, ids2, keys, ids, c1, 11, 2047, m);
  else flipped = radixPass(keys, ids, keys2, ids2, c1, 11, 2047, m);
  if (flipped) flipped = !radixPass(keys2, ids2, keys, ids, c2, 22, 1023, m);
  else flipped = radixPass(keys, ids, keys2, ids2, c2, 22, 1023, m);
  if (flipped) ids.set(ids2.subarray(0, m)), keys.set(keys2.subarray(0, m));
  for (let j = 0; j < m;) {
    let end = j + 1;
    while (end < m && keys[end] === keys[j]) end++;
    if (end - j > SMALL) {
      const run = Array.from(ids.subarray(j, end)).sort((a, b) => probs[b] - probs[a] || a - b);
      ids.set(run, j);
    } else if (end - j > 1) insertion(probs, ids, j, end);
    j = end;
  }
}

/**
 * One stable pass of the LSD radix sort, highest digit first, from `inKeys`/`inIds` to `outKeys`/`outIds`,
 * by the digit `(key >>> shift) & mask` whose bucket sizes `count` holds; false (and nothing moved)
 * when every key has the same digit.
 */
function radixPass(
  inKeys: Int32Array,
  inIds: Int32Array,
  outKeys: Int32Array,
  outIds: Int32Array,
  count: Int32Array,
  shift: number,
  mask: number,
  m: number,
): boolean {
  let at = 0;
  for (let d = mask; d >= 0; d--) {
    const c = count[d];
    if (c === m) return false;
    count[d] = at;
    at += c;
  }
  for (let j = 0; j < m; j++) {
    const key = inKeys[j], to = count[(key >>> shift) & mask]++;
    outKeys[to] = key, outIds[to] = inIds[j];
  }
  return true;
}

/** Sorts `ids[from, to)` by probability, highest first, keeping the order of equal ones. */
function insertion(probs: Float64Array, ids: Int32Array, from: number, to: number): void {
  for (let j = from + 1; j < to; j++) {
    const id = ids[j], p = probs[id];
    let i = j;
    while (i > from && probs[ids[i - 1]] < p) ids[i] = ids[i - 1], i--;
    ids[i] = id;
  }
}

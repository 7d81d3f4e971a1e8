/**
 * The one float sampler: the next token from a row of float logits, under sampling options already
 * checked against the one contract (model/sampling.ts `checkSampling`). The float and WebGPU engines
 * pick through it; the integer engine keeps its own integer sampler (engines/int/sampler.ts), over the
 * same checked options, because its serving path holds no float. Generation — feed, pick, feed back —
 * is model/generate.ts. Here too: `neverSampled`, the one definition of the ids no engine picks (the
 * specials other than EOS; every engine's `pick` masks them), and `floatLogprobs`, the float engines'
 * log-probabilities.
 *
 * @example
 * ```ts
 * import { neverSampled, pickToken } from "./sample.ts";
 * import { checkSampling } from "./sampling.ts";
 * import { createRng } from "./random.ts";
 * import { PRESETS } from "./config.ts";
 * const config = PRESETS.default;
 * declare const logits: Float32Array; // one row of `config.vocab_size` logits
 * const choice = checkSampling({ temperature: 0.8, topK: 40, minP: 0.05 });
 * pickToken(logits, 0, 258, choice, createRng(1), neverSampled(config)); // never BOS
 * ```
 * @module
 */
import type { ModelConfig } from "./config.ts";
import type { TokenLogprobs } from "./engine.ts";
import type { Rng } from "./random.ts";
import type { SamplingChoice } from "./sampling.ts";
import { BOS, BYTE_VOCAB_SIZE, EOS } from "./tokenizer.ts";
import type { Tokenizer } from "./tokenizer-types.ts";

/** A tokenizer's special ids, as far as sampling cares: which ones end generation, and which exist. */
export interface SpecialIds {
  /** Every special id (control tokens, added special tokens), the end-of-sequence ones included. */
  specials: readonly number[];
  /** The ids that end generation: these stay samplable, so a model can stop. */
  eos: readonly number[];
  /** How many ids the tokenizer has; ids from here up to the model's vocab are padding. */
  tokenizerVocab: number;
}

/** ferry's byte tokenizer (model/tokenizer.ts): BOS 256 and EOS 257 after the 256 bytes. */
export const BYTE_SPECIALS: Readonly<SpecialIds> = Object.freeze({
  specials: [BOS, EOS],
  eos: [EOS],
  tokenizerVocab: BYTE_VOCAB_SIZE,
});

/**
 * The `SpecialIds` of a tokenizer: its special ids, its EOS set, its size. What engines/mod.ts
 * `loadEngine` hands every engine, so its sampler masks the model's own specials and padding ids.
 *
 * @example
 * ```ts
 * import { specialIds } from "./sample.ts";
 * import { byteTokenizer } from "./tokenizer.ts";
 * specialIds(byteTokenizer); // { specials: [256, 257], eos: [257], tokenizerVocab: 258 }
 * ```
 */
export function specialIds(tokenizer: Tokenizer): SpecialIds {
  return { specials: tokenizer.specials, eos: tokenizer.eos, tokenizerVocab: tokenizer.size };
}

/**
 * The one definition of the ids no engine ever samples, greedy or not: the tokenizer's special ids
 * other than its end-of-sequence ones, and padding ids at or past the tokenizer's vocab. As a bitmap of
 * `vocab_size` bytes (1: never sampled), so the integer sampler masks by table look-up. A model with
 * the byte tokenizer's vocab (258) gets `BYTE_SPECIALS`; a model with another vocab has some other
 * tokenizer, unknown here, and nothing is masked unless its `SpecialIds` are given (a future Qwen3
 * folder: its added special tokens, its EOS set, its tokenizer's size).
 *
 * @example
 * ```ts
 * import { neverSampled } from "./sample.ts";
 * import { PRESETS } from "./config.ts";
 * neverSampled(PRESETS.default)[256]; // 1: BOS is never sampled
 * neverSampled(PRESETS.default)[257]; // 0: EOS is, so generation can stop
 * ```
 */
export function neverSampled(
  config: Pick<ModelConfig, "vocab_size">,
  ids: SpecialIds | undefined = config.vocab_size === BYTE_VOCAB_SIZE ? BYTE_SPECIALS : undefined,
): Uint8Array {
  const V = config.vocab_size, mask = new Uint8Array(V);
  if (!ids) return mask;
  for (const id of ids.specials) if (id >= 0 && id < V && !ids.eos.includes(id)) mask[id] = 1;
  for (let id = Math.max(0, ids.tokenizerVocab); id < V; id++) if (!ids.eos.includes(id)) mask[id] = 1;
  // A mask of every id would leave nothing to pick: then none is masked.
  return mask.includes(0) ? mask : new Uint8Array(V);
}

/** The highest logit in `[off, off + n)` among ids not masked, the lowest id on a tie. */
export function maskedArgmax(logits: Float32Array, off: number, n: number, never?: Uint8Array): number {
  let best = -1;
  for (let i = 0; i < n; i++) {
    if (never?.[i]) continue;
    if (best < 0 || logits[off + i] > logits[off + best]) best = i;
  }
  return Math.max(best, 0);
}

/**
 * Picks a token from one row of logits `[off, off + n)`. Greedy (the highest logit, lowest id on a
 * tie; no draw) when temperature is 0; otherwise one seeded draw from the softmax at that temperature,
 * cut to the `topK` most likely tokens, then to those with at least `minP` times the top token's
 * probability, then to the smallest prefix whose mass reaches `topP` of what is left. Ids marked in
 * `never` (`neverSampled`) are left out before anything else, greedy or not.
 *
 * The candidates are ranked by probability, then id; the sums and the walk go in that order, in f64.
 * Only what can change them is ranked: probabilities below 2^-53 (their sum with the top token's 1 and
 * anything after it rounds to itself) and below min-p are dropped in one pass, one more keeps those
 * that can be among the top k, and only these are sorted, by a radix sort of their bits (`rankTop`):
 * a draw is linear in `n`, and draws what sorting every id did. A row whose largest logit is not
 * finite (NaN, ±∞) has no probabilities (each is NaN or 0): the draw is spent and the lowest id not in
 * `never` is picked, as the sort of every id in id order did.
 */
export function pickToken(
  logits: Float32Array,
  off: number,
  n: number,
  choice: SamplingChoice,
  rng: Rng,
  never?: Uint8Array,
): number {
  const { temperature, topK, topP, minP } = choice;
  if (temperature <= 0) return maskedArgmax(logits, off, n, never);
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (!never?.[i]) max = Math.max(max, logits[off + i]);
  if (!Number.isFinite(max)) {
    rng.next();
    let first = 0;
    while (first < n && never?.[first]) first++;
    return first < n ? first : 0;
  }
  // The one draw, before the scratch below is used (a caller's generator can never see it half-done).
  const u = rng.next();
  // The top token's probability is exp(0) = 1; min-p keeps probabilities ≥ minP · 1. Below `cut` an
  // exponent gives less than floor / e: no exp needed to leave it out.
  const floor = Math.max(minP, NEGLIGIBLE), cut = Math.log(floor) - 1;
  const s = scratchFor(n), { probs, words, ids, keys } = s;
  let m = 0;
  for (let i = 0; i < n; i++) {
    if (never?.[i]) continue;
    const x = (logits[off + i] - max) / temperature;
    if (x < cut) continue;
    const p = Math.exp(x);
    if (p < floor) continue;
    probs[i] = p;
    // The probability's top 32 bits past its constant ones: 26 of the high word, 6 of the low.
    keys[m] = ((words[2 * i + HI] - HIGH_BASE) << 6) | (words[2 * i + 1 - HI] >>> 26);
    ids[m++] = i;
  }
  const candidates = topK > 0 ? Math.min(m, topK) : m;
  rankTop(s, m, candidates);
  let sum = 0;
  for (let j = 0; j < candidates; j++) sum += probs[ids[j]];
  // Keep the smallest prefix of the ranked candidates whose mass reaches topP.
  let kept = 0, mass = 0;
  while (kept < candidates && (kept === 0 || mass < topP * sum)) mass += probs[ids[kept++]];
  let r = u * mass;
  for (let j = 0; j < kept; j++) {
    r -= probs[ids[j]];
    if (r < 0) return ids[j];
  }
  return ids[kept - 1];
}

/**
 * 2^-53: a probability below it never changes a sum that starts at 1 (half an ulp of 1 or more), and
 * the ranked sums start with the top token's 1, so it is never kept, drawn or counted.
 */
const NEGLIGIBLE = 2 ** -53;
/** The high word of a probability in [2^-53, 1] less this is below 2^26. */
const HIGH_BASE = 0x3ca00000;
/** At or below this many candidates, insertion sorts them. */
const SMALL = 32;
/** Where a Float64Array's high word sits in its Uint32Array view (1 on a little-endian machine). */
const HI = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1 ? 1 : 0;

/**
 * `pickToken`'s scratch, grown to the longest row seen and kept (one module instance per thread; no
 * caller code runs while it is in use): each id's probability (and its 32-bit words), and per
 * candidate its id and sort key, with a second buffer of each for the radix sort's passes.
 */
interface Scratch {
  probs: Float64Array;
  words: Uint32Array;
  ids: Int32Array;
  keys: Int32Array;
  ids2: Int32Array;
  keys2: Int32Array;
  /** Bucket counts: the three LSD passes', and the top-k cut's (the keys' top 16 bits). */
  counts: [Int32Array, Int32Array, Int32Array];
  top: Int32Array;
}

let scratch: Scratch | undefined;

function scratchFor(n: number): Scratch {
  if (scratch === undefined || scratch.probs.length < n) {
    const probs = new Float64Array(n);
    scratch = {
      probs,
      words: new Uint32Array(probs.buffer),
      ids: new Int32Array(n),
      keys: new Int32Array(n),
      ids2: new Int32Array(n),
      keys2: new Int32Array(n),
      counts: [new Int32Array(2048), new Int32Array(2048), new Int32Array(1024)],
      top: new Int32Array(65536),
    };
  }
  return scratch;
}

/**
 * Orders the `m` candidates (`ids`, in id order, each with its probability in [2^-53, 1] and the top
 * 32 bits of that in `keys`) so that the first `k` are the `k` most likely, most likely first, the
 * lower id first on a tie; what follows them is left in no order. Linear in `m`: for k < m,
 * `cutTop` keeps only the candidates that can be among the first k; what is kept is sorted by
 * insertion when small, else by `sortKeys`.
 */
function rankTop(s: Scratch, m: number, k: number): void {
  const kept = k < m && m > SMALL ? cutTop(s, m, k) : m;
  if (kept <= SMALL) insertion(s.probs, s.ids, 0, kept);
  else sortKeys(s, kept);
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
 * Sorts the `m` candidates: a stable LSD radix sort of their keys (11, 11 and 10 bits, highest first,
 * each pass carrying key and id), then each run of equal keys, still in id order, by the full
 * probabilities (insertion; a run longer than `SMALL` by a comparison sort).
 */
function sortKeys(s: Scratch, m: number): void {
  const probs = s.probs, ids = s.ids, keys = s.keys, ids2 = s.ids2, keys2 = s.keys2;
  const c0 = s.counts[0], c1 = s.counts[1], c2 = s.counts[2];
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

/**
 * Natural-log probabilities of the softmax of one row of float logits `[off, off + n)` at temperature
 * 1 with no filter (the model's own distribution, never-sampled ids included), in f64: for each of
 * `ids`, and for the `top` most likely ids (most likely first, the lower id on a tie). The float and
 * WebGPU engines' `EngineSession.logprobs`.
 *
 * @example
 * ```ts
 * import { floatLogprobs } from "./sample.ts";
 * floatLogprobs(new Float32Array([0, 0]), 0, 2, [1], 1); // { of: [-0.693…], top: [{ id: 0, logprob: -0.693… }] }
 * ```
 */
export function floatLogprobs(
  logits: Float32Array,
  off: number,
  n: number,
  ids: readonly number[],
  top: number,
): TokenLogprobs {
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[off + i]);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(logits[off + i] - max);
  const lse = max + Math.log(sum);
  const lp = (id: number) => {
    if (!(Number.isInteger(id) && id >= 0 && id < n)) {
      throw new RangeError(`logprobs: id ${id} is outside [0, ${n})`);
    }
    return logits[off + id] - lse;
  };
  return {
    of: ids.map(lp),
    top: topIds(n, Math.min(top, n), (a, b) => logits[off + b] - logits[off + a]).map((id) => ({
      id,
      logprob: lp(id),
    })),
  };
}

/**
 * The first `k` of ids 0..n−1 ordered by `cmp`, then by id: what a stable sort of the ids would give,
 * kept in a sorted list of `k` while the ids pass once (k is small, at most MAX_TOP_LOGPROBS, so this is
 * linear in n where a sort of 151,936 ids cost tens of milliseconds a token).
 *
 * @example
 * ```ts
 * import { topIds } from "./sample.ts";
 * topIds(4, 2, (a, b) => [3, 9, 9, 1][b] - [3, 9, 9, 1][a]); // [1, 2]
 * ```
 */
export function topIds(n: number, k: number, cmp: (a: number, b: number) => number): number[] {
  const best: number[] = [];
  if (k <= 0) return best;
  const before = (a: number, b: number) => (cmp(a, b) || a - b) < 0;
  for (let id = 0; id < n; id++) {
    if (best.length === k && !before(id, best[k - 1])) continue;
    let at = best.length === k ? k - 1 : best.length;
    while (at > 0 && before(id, best[at - 1])) best[at] = best[at - 1], at--;
    best[at] = id;
  }
  return best;
}

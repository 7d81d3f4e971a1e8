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
import { drawToken } from "./draw.ts";
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
 * The draw is defined by ranking the candidates by probability, then id, and summing and walking in
 * that order in f64 (model/draw.ts `drawToken`, which gets that id in linear time, mostly without
 * ranking). A row whose largest logit is not finite (NaN, ±∞) has no probabilities (each is NaN or 0):
 * the draw is spent and the lowest id not in `never` is picked, as the sort of every id in id order did.
 */
export function pickToken(
  logits: Float32Array,
  off: number,
  n: number,
  choice: SamplingChoice,
  rng: Rng,
  never?: Uint8Array,
): number {
  const { temperature } = choice;
  if (temperature <= 0) return maskedArgmax(logits, off, n, never);
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (!never?.[i]) max = Math.max(max, logits[off + i]);
  if (!Number.isFinite(max)) {
    rng.next();
    let first = 0;
    while (first < n && never?.[first]) first++;
    return first < n ? first : 0;
  }
  return drawToken({ logits, off, n, max, temperature }, choice, rng.next(), never);
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

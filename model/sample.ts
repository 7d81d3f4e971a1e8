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
  const probs = new Float64Array(n);
  for (let i = 0; i < n; i++) probs[i] = never?.[i] ? 0 : Math.exp((logits[off + i] - max) / temperature);
  const order = Array.from({ length: n }, (_, i) => i).filter((i) => !never?.[i]);
  order.sort((a, b) => probs[b] - probs[a] || a - b);
  let candidates = topK > 0 ? Math.min(order.length, topK) : order.length;
  // probs[order[0]] is the top token's (unnormalised) probability.
  while (minP > 0 && candidates > 1 && probs[order[candidates - 1]] < minP * probs[order[0]]) candidates--;
  let sum = 0;
  for (let j = 0; j < candidates; j++) sum += probs[order[j]];
  // Keep the smallest prefix of the sorted candidates whose mass reaches topP.
  let kept = 0, mass = 0;
  while (kept < candidates && (kept === 0 || mass < topP * sum)) mass += probs[order[kept++]];
  let r = rng.next() * mass;
  for (let j = 0; j < kept; j++) {
    r -= probs[order[j]];
    if (r < 0) return order[j];
  }
  return order[kept - 1];
}

/**
 * Natural-log probabilities of the softmax of one row of float logits `[off, off + n)` at temperature
 * 1 with no filter (the model's own distribution, never-sampled ids included), in f64: for each of
 * `ids`, and for the `top` most likely ids (most likely first, the lower id on a tie). The float and
 * WebGPU engines' `EngineSession.logprobs`.
 *
 * @example
 * ```ts
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

/** The first `k` of ids 0..n−1 ordered by `cmp`, then by id (a stable sort of ids in order). */
export function topIds(n: number, k: number, cmp: (a: number, b: number) => number): number[] {
  if (k <= 0) return [];
  return Array.from({ length: n }, (_, i) => i).sort((a, b) => cmp(a, b) || a - b).slice(0, k);
}

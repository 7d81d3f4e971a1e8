/**
 * Choosing the next token from logits (greedy, or seeded temperature with top-k, min-p and top-p), and
 * the float model's own synchronous generation loop. Engines generate through model/generate.ts.
 *
 * @example
 * ```ts
 * const ids = generate(model, encode("The jury said", { bos: true }), { maxTokens: 64 });
 * ```
 * @module
 */
import { argmax } from "../kernels/cpu.ts";
import { createCache, forward, type Model } from "./qwen3.ts";
import { createRng, type Rng } from "./random.ts";
import { EOS } from "./tokenizer.ts";
import type { SamplingOptions } from "./engine.ts";

/** How to pick tokens: temperature 0 is greedy. */
export interface SampleOptions {
  temperature?: number;
  topP?: number;
  seed?: number;
}

/**
 * Picks a token from one row of logits `[off, off + n)`. Greedy (lowest id on a tie) when temperature
 * is 0; otherwise a seeded draw from the softmax at that temperature, cut to the `topK` most likely
 * tokens, then those with at least `minP` times the top token's probability, then the smallest prefix
 * whose mass reaches `topP` of what is left. With topK and minP off this is `sampleToken`, draw for draw.
 *
 * @example
 * ```ts
 * pickToken(logits, 0, 258, { temperature: 0.8, topK: 40, minP: 0.05 }, createRng(1));
 * ```
 */
export function pickToken(
  logits: Float32Array,
  off: number,
  n: number,
  opts: SamplingOptions,
  rng: Rng,
): number {
  const { temperature = 0, topK = 0, topP = 1, minP = 0 } = opts;
  if (temperature <= 0) return argmax(logits, off, n);
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[off + i]);
  const probs = new Float64Array(n);
  for (let i = 0; i < n; i++) probs[i] = Math.exp((logits[off + i] - max) / temperature);
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => probs[b] - probs[a] || a - b);
  let candidates = topK > 0 ? Math.min(n, topK) : n;
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

/** Picks a token from one row of logits `[off, off + n)` by temperature and top-p (see `pickToken`). */
export function sampleToken(
  logits: Float32Array,
  off: number,
  n: number,
  temperature: number,
  topP: number,
  rng: Rng,
): number {
  return pickToken(logits, off, n, { temperature, topP }, rng);
}

/** Options of `generate`. */
export interface GenerateOptions extends SampleOptions {
  maxTokens: number;
  /** Stop when EOS is produced (default true); the EOS is not returned. */
  stopAtEos?: boolean;
  /** Called with each new token as it is chosen. */
  onToken?: (id: number) => void;
}

/** Runs the prompt, then picks up to `maxTokens` new tokens; returns only the new ones. */
export function generate(model: Model, prompt: number[], opts: GenerateOptions): number[] {
  const { temperature = 0, topP = 1, seed = 0, stopAtEos = true } = opts;
  const V = model.config.vocab_size;
  const budget = Math.min(opts.maxTokens, model.config.max_position_embeddings - prompt.length);
  const cache = createCache(model);
  const rng = createRng(seed);
  const out: number[] = [];
  if (budget <= 0) return out;
  let logits = forward(model, cache, prompt);
  let off = (prompt.length - 1) * V;
  for (let i = 0; i < budget; i++) {
    const id = sampleToken(logits, off, V, temperature, topP, rng);
    if (stopAtEos && id === EOS) break;
    out.push(id);
    opts.onToken?.(id);
    if (i + 1 === budget) break;
    logits = forward(model, cache, [id]);
    off = 0;
  }
  return out;
}

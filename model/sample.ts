/**
 * The one float sampler: the next token from a row of float logits, under sampling options already
 * checked against the one contract (model/sampling.ts `checkSampling`). The float and WebGPU engines
 * pick through it; the integer engine keeps its own integer sampler (engines/int/sampler.ts), over the
 * same checked options, because its serving path holds no float. Generation — feed, pick, feed back —
 * is model/generate.ts.
 *
 * @example
 * ```ts
 * const choice = checkSampling({ temperature: 0.8, topK: 40, minP: 0.05 });
 * pickToken(logits, 0, 258, choice, createRng(1));
 * ```
 * @module
 */
import { argmax } from "../kernels/cpu.ts";
import type { Rng } from "./random.ts";
import type { SamplingChoice } from "./sampling.ts";

/**
 * Picks a token from one row of logits `[off, off + n)`. Greedy (the highest logit, lowest id on a
 * tie; no draw) when temperature is 0; otherwise one seeded draw from the softmax at that temperature,
 * cut to the `topK` most likely tokens, then to those with at least `minP` times the top token's
 * probability, then to the smallest prefix whose mass reaches `topP` of what is left.
 */
export function pickToken(
  logits: Float32Array,
  off: number,
  n: number,
  choice: SamplingChoice,
  rng: Rng,
): number {
  const { temperature, topK, topP, minP } = choice;
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

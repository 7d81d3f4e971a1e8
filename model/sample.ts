/**
 * Choosing the next token from logits, and the generation loop: greedy, or seeded temperature with
 * top-p (nucleus) sampling.
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

/** How to pick tokens: temperature 0 is greedy. */
export interface SampleOptions {
  temperature?: number;
  topP?: number;
  seed?: number;
}

/** Picks a token from one row of logits `[off, off + n)`. Greedy when temperature is 0. */
export function sampleToken(
  logits: Float32Array,
  off: number,
  n: number,
  temperature: number,
  topP: number,
  rng: Rng,
): number {
  if (temperature <= 0) return argmax(logits, off, n);
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, logits[off + i]);
  const probs = new Float64Array(n);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += probs[i] = Math.exp((logits[off + i] - max) / temperature);
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => probs[b] - probs[a] || a - b);
  // Keep the smallest prefix of the sorted tokens whose mass reaches topP.
  let kept = 0, mass = 0;
  while (kept < n && (kept === 0 || mass < topP * sum)) mass += probs[order[kept++]];
  let r = rng.next() * mass;
  for (let j = 0; j < kept; j++) {
    r -= probs[order[j]];
    if (r < 0) return order[j];
  }
  return order[kept - 1];
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

/**
 * The integer engine's adapter, the part of it that runs per token: checking and stepping the fed
 * tokens, and the sampling options in fixed point remembered per request, so that neither a token fed
 * nor a token picked on the generate and chat path touches a float (engines/int/engine.ts converts
 * options once per new value and logits only for a caller that asks for them). Serving code: audited
 * with the forward (tests/kernels/audit.test.ts).
 *
 * @example
 * ```ts
 * import { remember, rememberedSampling, samplingMemo } from "./boundary.ts";
 * import { toIntSampling } from "./engine.ts";
 * import type { SamplingOptions } from "../../model/engine.ts";
 * declare const options: SamplingOptions; // a request's
 * const memo = samplingMemo();
 * let q = rememberedSampling(memo, options);       // null: options not seen yet
 * if (q === null) q = remember(memo, options, toIntSampling(options));
 * ```
 * @module
 */
import type { SamplingOptions } from "../../model/engine.ts";
import { prefill, step } from "./forward.ts";
import { type IntModel, type IntState, PREFILL_SLOTS } from "./model.ts";
import type { IntSampling } from "./sampler.ts";

/** The last sampling options seen, as given and in fixed point. */
export interface SamplingMemo {
  given: SamplingOptions | null;
  temperature: number | undefined;
  topK: number | undefined;
  minP: number | undefined;
  topP: number | undefined;
  int: IntSampling;
}

/** Greedy in fixed point, the options of a plain `pick()`. */
export const GREEDY: IntSampling = { tempQ16: 0, topK: 0, minPQ16: 0, topPQ16: 65536 };

/** A memo holding nothing yet. */
export function samplingMemo(): SamplingMemo {
  return {
    given: null,
    temperature: undefined,
    topK: undefined,
    minP: undefined,
    topP: undefined,
    int: GREEDY,
  };
}

/**
 * The fixed-point form of `options` when the memo holds it (the same object, or one with the same
 * four values); null when it must be converted (then `remember` it). No options is greedy.
 */
export function rememberedSampling(
  memo: SamplingMemo,
  options: SamplingOptions | undefined,
): IntSampling | null {
  if (options === undefined) return GREEDY;
  if (options === memo.given) return memo.int;
  if (
    memo.given !== null && options.temperature === memo.temperature && options.topK === memo.topK &&
    options.minP === memo.minP && options.topP === memo.topP
  ) {
    memo.given = options;
    return memo.int;
  }
  return null;
}

/** Keeps `int`, the fixed-point form of `options`, for the next picks; returns it. */
export function remember(memo: SamplingMemo, options: SamplingOptions, int: IntSampling): IntSampling {
  memo.given = options;
  memo.temperature = options.temperature;
  memo.topK = options.topK;
  memo.minP = options.minP;
  memo.topP = options.topP;
  memo.int = int;
  return int;
}

/**
 * Checks every token id and the room left before anything changes, then steps them all (a RangeError
 * names the first problem).
 */
export function feedTokens(m: IntModel, st: IntState, tokens: readonly number[]): void {
  checkTokens(m, st, tokens);
  // Runs of positions go through the projections together where the module serves (forward.ts
  // `prefill`: the same integers as one at a time); a lone token is one step.
  const batched = m.lut !== null && m.s.slots.length >= PREFILL_SLOTS;
  let t = 0;
  while (t < tokens.length) {
    let n = tokens.length - t;
    if (n > PREFILL_SLOTS) n = PREFILL_SLOTS;
    // Only the feed's last batch computes logits: the head (151,936 rows at Qwen3's vocabulary) of an
    // earlier batch would be overwritten unread.
    if (batched && n > 1) prefill(m, st, tokens, t, n, t + n === tokens.length);
    else step(m, st, tokens[t]);
    t = batched && n > 1 ? t + n : t + 1;
  }
}

/** Refuses (RangeError) an id outside the vocabulary or more tokens than the context has room for. */
export function checkTokens(m: IntModel, st: IntState, tokens: readonly number[]): void {
  for (const id of tokens) {
    if (!(id >= 0 && id < m.vocab && (id | 0) === id)) {
      throw new RangeError(`token id ${id} is outside [0, ${m.vocab})`);
    }
  }
  if (st.pos + tokens.length > m.maxPositions) {
    throw new RangeError(
      `context full: ${st.pos} + ${tokens.length} positions exceed the context of ${m.maxPositions}`,
    );
  }
}

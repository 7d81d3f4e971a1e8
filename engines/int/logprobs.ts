/**
 * The integer engine's log-probabilities, in its own arithmetic: exact integers at 2^-16 nats, the
 * unit of its logits (engines/int/forward.ts LOGIT_EXP). For OpenAI's `logprobs`; not on the serving
 * path (a request asks for it), so it sits outside the audited set, but it holds no float either: the
 * caller divides by 65536 to report.
 *
 * The distribution is the sampler's at temperature 1 with no filter: token i has mass
 * `expNeg(top − logit_i)` from the model's exp table (Q30; 0 past 32 nats), the masses sum to S, and the
 * log-normaliser is the exp table's own inverse of S: the smallest c ≥ 0 with `expNeg(c) · S ≤ 2^60`,
 * that is c = ⌈ln(S / 2^30)⌉ at 2^-16 nats as the table rounds it. Then
 * `logprob_i = logit_i − top − c`, an integer, and `expNeg(−logprob_i) / 2^30` is token i's share of
 * the sampler's mass to within the table's rounding.
 *
 * @example
 * ```ts
 * import { intLogprobs } from "./logprobs.ts";
 * import type { IntModel, IntState } from "./model.ts";
 * declare const model: IntModel, st: IntState; // st: a state whose logits are fresh
 * const lp = intLogprobs(st.logits, model.exp, [65], 5); // { of: [-123456], top: [{ id, logprob }, …] }
 * lp.of[0] / 65536;                                       // nats
 * ```
 * @module
 */
import { expNeg, type LookupTable } from "../../kernels/int/tables.ts";
import { topIds } from "../../model/sample.ts";

/** Log-probabilities at 2^-16 nats: the asked ids' in order, and the `top` most likely (lower id on a tie). */
export interface IntLogprobs {
  of: number[];
  top: Array<{ id: number; logprob: number }>;
}

/** 32 nats at 2^-16: past it the exp table gives 0. */
const EXP_RANGE = 32 << 16;

/**
 * The log-normaliser of `logits` at 2^-16 nats, relative to its largest logit `top`: the smallest
 * c in [0, 32 nats) with expNeg(c) · S ≤ 2^60, where S = Σ expNeg(top − logit_i) (found by bisection;
 * the table decreases).
 */
export function logNormaliser(logits: Int32Array, top: number, exp: LookupTable): number {
  let sum = 0n;
  for (let i = 0; i < logits.length; i++) sum += BigInt(expNeg(exp, Math.min(top - logits[i], EXP_RANGE)));
  const one = 1n << 60n;
  let lo = 0, hi = EXP_RANGE; // expNeg(hi) = 0 satisfies the bound
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (BigInt(expNeg(exp, mid)) * sum <= one) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The log-probabilities of `ids` and of the `top` most likely ids, from the pending integer logits. */
export function intLogprobs(
  logits: Int32Array,
  exp: LookupTable,
  ids: readonly number[],
  top: number,
): IntLogprobs {
  const V = logits.length;
  let max = logits[0];
  for (let i = 1; i < V; i++) if (logits[i] > max) max = logits[i];
  const c = logNormaliser(logits, max, exp);
  const lp = (id: number) => {
    if (!(Number.isInteger(id) && id >= 0 && id < V)) {
      throw new RangeError(`logprobs: id ${id} is outside [0, ${V})`);
    }
    return logits[id] - max - c;
  };
  const order = topIds(V, Math.min(top, V), (a, b) => logits[b] - logits[a]); // ties by id
  return { of: ids.map(lp), top: order.map((id) => ({ id, logprob: lp(id) })) };
}

/**
 * OpenAI's sampling fields mapped onto ferry's one sampling contract (model/sampling.ts), in this one
 * place: the HTTP names (`temperature`, `top_k`, `top_p`, `min_p`, `seed`) become the contract's
 * options, OpenAI's defaults fill what the client left out (`temperature` 1, `top_p` 1; `null` counts
 * as left out), and the contract's own check decides the ranges. A value out of range is the usual 400
 * naming the HTTP field.
 *
 * @example
 * ```ts
 * import { samplingFromBody } from "./sampling.ts";
 * samplingFromBody({ top_p: 0.9 });   // { sampling: { temperature: 1, topK: 0, topP: 0.9, minP: 0 }, seed: undefined }
 * samplingFromBody({ top_p: 2 });     // throws ApiError 400 "top_p: expected a number in (0, 1] ..., got 2"
 * ```
 * @module
 */
import { checkSampling, checkSeed, type SamplingChoice, SamplingError } from "../../model/sampling.ts";
import { invalidValue } from "../errors.ts";

/** The request's sampling, in the contract's terms. */
export interface RequestSampling {
  sampling: SamplingChoice;
  /** Reseed before generating; absent keeps the session's own stream. */
  seed?: number;
}

/** Each contract option's name in an OpenAI request body. */
export const HTTP_FIELD = {
  temperature: "temperature",
  topK: "top_k",
  topP: "top_p",
  minP: "min_p",
  seed: "seed",
} as const;

/**
 * A fresh seed for a request that gave none: a crypto-random safe integer (53 bits, non-negative), so
 * unseeded replies differ and the seed the response reports reproduces the reply.
 */
export function randomSeed(): number {
  const [hi, lo] = crypto.getRandomValues(new Uint32Array(2));
  return (hi & 0x1fffff) * 2 ** 32 + lo;
}

/** Reads the sampling fields of a request body (an object) and checks them against the contract. */
export function samplingFromBody(body: Record<string, unknown>): RequestSampling {
  // Left to the contract to refuse: a field of the wrong type is out of every range.
  const given = (option: keyof typeof HTTP_FIELD) => (body[HTTP_FIELD[option]] ?? undefined) as number;
  try {
    const sampling = checkSampling({
      temperature: given("temperature") ?? 1,
      topK: given("topK"),
      topP: given("topP") ?? 1,
      minP: given("minP"),
    });
    const seed = given("seed") === undefined ? undefined : checkSeed(given("seed"));
    return { sampling, seed };
  } catch (e) {
    if (!(e instanceof SamplingError)) throw e;
    const field = HTTP_FIELD[e.field];
    throw invalidValue(field, e.expected, body[field]);
  }
}

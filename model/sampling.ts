/**
 * The one sampling contract. Every engine's `pick`, every CLI flag and the HTTP layer accept the same
 * options with the same ranges, checked here and nowhere else; each refusal names the option, what it
 * expected and what it got.
 *
 * | option        | range                  | meaning of the neutral value                  |
 * |---------------|------------------------|-----------------------------------------------|
 * | `temperature` | [0, 100]               | 0: greedy (the highest logit, lowest id on a tie) |
 * | `topK`        | integer ≥ 0            | 0: every token                                 |
 * | `topP`        | (0, 1]                 | 1: every token                                 |
 * | `minP`        | [0, 1]                 | 0: no token dropped                            |
 * | `seed`        | safe integer           | (none: the session's own seed, 0 on a fresh one) |
 *
 * Absent options take the neutral value, so `{}` is greedy decoding.
 *
 * @example
 * ```ts
 * import { checkSampling } from "./sampling.ts";
 * const o = checkSampling({ temperature: 0.8, topP: 0.9 }); // { temperature: 0.8, topK: 0, topP: 0.9, minP: 0 }
 * checkSampling({ temperature: -1 });                        // throws SamplingError, field "temperature"
 * ```
 * @module
 */
import type { SamplingOptions } from "./engine.ts";

/** The largest temperature the contract accepts (the integer engine's fixed point holds far more). */
export const MAX_TEMPERATURE = 100;

/** What each option must be, in words, for refusals and `--help`. */
export const SAMPLING_EXPECTED = {
  temperature: `a number in [0, ${MAX_TEMPERATURE}] (0 is greedy)`,
  topK: "an integer >= 0 (0 keeps every token)",
  topP: "a number in (0, 1] (1 keeps every token)",
  minP: "a number in [0, 1] (0 drops none)",
  seed: "a safe integer",
} as const;

/** A sampling option out of the contract's range. */
export class SamplingError extends RangeError {
  constructor(
    /** The option, by its contract name (`temperature`, `topK`, `topP`, `minP`, `seed`). */
    readonly field: keyof typeof SAMPLING_EXPECTED,
    /** What the option must be. */
    readonly expected: string,
    /** What it was, as text. */
    readonly found: string,
  ) {
    super(`${field}: expected ${expected}, got ${found}`);
    this.name = "SamplingError";
  }
}

/** Sampling options with every neutral value filled in. */
export type SamplingChoice = Required<SamplingOptions>;

/** The greedy choice: what `checkSampling({})` returns. */
export const GREEDY: Readonly<SamplingChoice> = Object.freeze({ temperature: 0, topK: 0, topP: 1, minP: 0 });

const accepts: Record<keyof SamplingChoice, (x: number) => boolean> = {
  temperature: (x) => x >= 0 && x <= MAX_TEMPERATURE,
  topK: (x) => Number.isSafeInteger(x) && x >= 0,
  topP: (x) => x > 0 && x <= 1,
  minP: (x) => x >= 0 && x <= 1,
};

/**
 * Checks sampling options against the contract and fills in the neutral values. Throws
 * `SamplingError` naming the first option out of range (a NaN or a non-number is out of every range).
 */
export function checkSampling(options: SamplingOptions = {}): SamplingChoice {
  const out = { ...GREEDY };
  for (const field of Object.keys(accepts) as (keyof SamplingChoice)[]) {
    const value: unknown = options[field];
    if (value === undefined) continue;
    if (typeof value !== "number" || !accepts[field](value)) {
      throw new SamplingError(field, SAMPLING_EXPECTED[field], String(value));
    }
    out[field] = value;
  }
  return out;
}

/** Checks a seed against the contract (a safe integer; negative seeds are allowed) and returns it. */
export function checkSeed(seed: unknown): number {
  if (typeof seed !== "number" || !Number.isSafeInteger(seed)) {
    throw new SamplingError("seed", SAMPLING_EXPECTED.seed, String(seed));
  }
  return seed;
}

/**
 * A calibrated file's record of the data its quantizer saw (`CalibrationRecord`, quantize/lut4-types.ts),
 * said in words for an export's summary: lut4 and GGUF print the same line.
 *
 * @example
 * ```ts
 * import { calibrationLine } from "./calibration-record.ts";
 * calibrationLine({ source: "brown train split", windows: 2, window_tokens: 256, tokens: 512, seed: 1 });
 * // "2 windows of 256 tokens (512 tokens) of the brown train split, seed 1"
 * ```
 * @module
 */
import type { CalibrationRecord } from "../quantize/lut4-types.ts";

/**
 * A calibration record in words: `64 windows of 256 tokens (16,384 tokens) of the brown train split,
 * seed 1`; an earlier file's: `64 windows of 256 bytes of the brown train split, seed 1`.
 */
export function calibrationLine(r: CalibrationRecord): string {
  const size = r.window_tokens !== undefined
    ? `${r.window_tokens} tokens (${(r.tokens ?? 0).toLocaleString("en-US")} tokens)`
    : `${r.window_bytes} bytes`;
  return `${r.windows} windows of ${size} of the ${r.source}, seed ${r.seed}`;
}

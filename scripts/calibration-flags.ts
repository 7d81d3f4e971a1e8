/**
 * The calibration flags export.ts and measure.ts share (`--calibrate N`, `--calibration FILE`,
 * `--calibration-tokens N`, and llama.cpp's importance matrix: `--imatrix FILE` to read one instead,
 * `--imatrix-out FILE` to write what was measured): their option specs, their help lines, and their
 * values turned into one calibrator for the whole command (measure/calibrate.ts `calibrateOnce`), with
 * a progress bar over the windows.
 *
 * @example
 * ```ts
 * import { CALIBRATION_FLAGS, calibrationFlags } from "./calibration-flags.ts";
 * import { cli } from "./cli.ts";
 * declare const HELP: string; // the command's --help text
 * const { values } = cli(HELP, { ...CALIBRATION_FLAGS, json: { type: "boolean" } });
 * const calibrate = calibrationFlags(values); // undefined with --calibrate 0
 * ```
 * @module
 */
import { EXIT_USAGE, fail, type Progress, progress } from "./cli.ts";
import {
  calibrateOnce,
  CALIBRATION,
  imatrixCalibrator,
  lut4Calibrator,
  MIN_DEFAULT_WINDOWS,
  writingImatrix,
} from "../measure/calibrate.ts";
import type { Lut4Calibrator } from "../quantize/lut4-types.ts";

/** The option specs, to spread into a command's `cli` options. */
export const CALIBRATION_FLAGS = {
  calibrate: { type: "string" },
  calibration: { type: "string" },
  "calibration-tokens": { type: "string" },
  imatrix: { type: "string" },
  "imatrix-out": { type: "string" },
} as const;

/** The help lines, to put in a command's HELP text under its options. */
export const CALIBRATION_FLAGS_HELP =
  `  --calibrate N       calibrate lut4's quantizer (GPTQ) and the importance-weighted GGUF types (q4_k,
                      q6_k, iq4_nl, q4_k_m) on N windows of ${CALIBRATION.windowTokens} of the model's own tokens (fewer
                      when it has fewer positions); recorded in the file; 0: plain rounding [${CALIBRATION.windows}; without
                      any calibration flag, as many as an export estimated within 9 minutes on two cores
                      allows (Qwen3-0.6B: 46 for lut4, about 9 minutes; all 64 for q4_k_m, about 7.6),
                      plain rounding where fewer than ${MIN_DEFAULT_WINDOWS} fit; the summary says so]
  --calibration FILE  calibrate on this UTF-8 text (or FILE.tokens: token ids, decimal, whitespace-separated)
                      instead of the Brown corpus's training split; cut into consecutive windows
  --calibration-tokens N  the budget in tokens instead of --calibrate's windows (⌈N / window⌉ windows)
  --imatrix FILE      weigh the scales by llama.cpp's importance matrix (llama-imatrix's GGUF or .dat
                      file) instead of calibrating; lut4 then rounds without GPTQ's feedback
  --imatrix-out FILE  also write the importance as a llama.cpp imatrix (FILE.dat: the legacy layout)`;

/** A positive integer flag value, or exit 2 naming the flag. */
function count(name: string, raw: string, zero: boolean): number {
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isSafeInteger(n) || n < (zero ? 0 : 1)) {
    fail(`--${name} ${raw}: expected a ${zero ? "whole number (0: none)" : "positive integer"}`, EXIT_USAGE);
  }
  return n;
}

/**
 * The command's calibrator from the flags' values, computed once for all its exports; undefined with
 * `--calibrate 0`. Contradicting flags exit 2.
 */
export function calibrationFlags(
  values: {
    calibrate?: string;
    calibration?: string;
    "calibration-tokens"?: string;
    imatrix?: string;
    "imatrix-out"?: string;
  },
): Lut4Calibrator | undefined {
  const windows = values.calibrate === undefined ? undefined : count("calibrate", values.calibrate, true);
  const budget = values["calibration-tokens"];
  const tokens = budget === undefined ? undefined : count("calibration-tokens", budget, false);
  const out = values["imatrix-out"];
  if (windows === 0) {
    if (tokens !== undefined || values.calibration !== undefined || values.imatrix || out) {
      fail("--calibrate 0 turns calibration off: the other calibration flags contradict it", EXIT_USAGE);
    }
    return undefined;
  }
  if (windows !== undefined && tokens !== undefined) {
    fail("--calibrate N and --calibration-tokens N both set the budget: give one", EXIT_USAGE);
  }
  if (values.imatrix !== undefined) {
    if (windows !== undefined || tokens !== undefined || values.calibration !== undefined) {
      fail(
        "--imatrix FILE replaces calibration: --calibrate, --calibration and --calibration-tokens contradict it",
        EXIT_USAGE,
      );
    }
    const read = calibrateOnce(imatrixCalibrator(values.imatrix));
    return out ? calibrateOnce(writingImatrix(read, out)) : read;
  }
  let bar: Progress | undefined;
  // No calibration flag given: the default, skipped for a model too large to calibrate in minutes.
  const byDefault = windows === undefined && tokens === undefined && values.calibration === undefined;
  const measured = calibrateOnce(lut4Calibrator({
    byDefault,
    ...(windows !== undefined ? { windows } : {}),
    ...(tokens !== undefined ? { tokens } : {}),
    ...(values.calibration !== undefined ? { file: values.calibration } : {}),
    onProgress: (done, total) => {
      bar ??= progress("calibrate", total, { unit: "layer" });
      bar.tick();
      if (done === total) bar.done();
    },
  }));
  return out ? calibrateOnce(writingImatrix(measured, out)) : measured;
}

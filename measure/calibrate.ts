/**
 * Calibration statistics for importance-weighted quantizers: the float reference runs over windows of
 * the training split (never the held-out documents), and for every linear layer's weight the mean
 * square of the activation that multiplies each of its input columns is accumulated. A quantizer that
 * weighs column c's rounding error by that mean square minimises the expected squared error of the
 * layer's output (for independent columns) instead of the weights' own.
 *
 * @example
 * ```ts
 * const { train } = await loadBrown();
 * const windows = calibrationWindows(train, 64, 1);
 * const imp = columnImportance(config, tensors, windows); // "model.layers.0.self_attn.q_proj.weight" → [96]
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Tensor } from "../model/tensor.ts";
import { buildModel, createCache, forward, LAYER_TENSORS } from "../model/qwen3.ts";
import { type Kernels, kernelSet } from "../kernels/kernels.ts";
import { loadBrown, WINDOW_BYTES } from "../model/corpus.ts";
import type { Lut4Calibration, Lut4Calibrator } from "../formats/lut4-types.ts";
import { windowInputs } from "./metrics.ts";

/** The linear layers whose inputs are measured, after `model.layers.N.`. */
const LINEAR = ["wq", "wk", "wv", "wo", "wGate", "wUp", "wDown"] as const;

/**
 * `count` windows of `size` bytes at seeded pseudo-random offsets of `train` (a 32-bit xorshift: the
 * same seed gives the same windows on every runtime).
 */
export function calibrationWindows(
  train: Uint8Array,
  count: number,
  seed: number,
  size = WINDOW_BYTES,
): Uint8Array[] {
  if (train.length < size) throw new RangeError(`${train.length} bytes hold no ${size}-byte window`);
  let s = (seed >>> 0) || 0x9e3779b9;
  const next = () => {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0;
    return s;
  };
  const span = train.length - size + 1;
  return Array.from({ length: count }, () => {
    const start = Math.floor((next() / 2 ** 32) * span);
    return train.subarray(start, start + size);
  });
}

/**
 * Per weight tensor (Hugging Face name), the mean over calibration positions of x_c² for each input
 * column c, x being the activation the weight multiplies (the norm's output, gain included, for q/k/v
 * and gate/up; the attention output for o; SwiGLU's product for down; the final norm's output for the
 * head, `lm_head.weight` or, tied, `model.embed_tokens.weight`). The other engineer's GGUF quantizers
 * take these as their importance vectors; lut4's uses `inputCovariance` (whose diagonal this is).
 */
export function columnImportance(
  config: ModelConfig,
  tensors: Tensor[],
  windows: Uint8Array[],
  kernels: Kernels = kernelSet("ref"),
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const [name, s] of accumulate(config, tensors, windows, kernels, false)) {
    out.set(name, Float32Array.from(s));
  }
  return out;
}

/**
 * Per weight tensor (as `columnImportance`), the mean of x xᵀ over calibration positions: a cols × cols
 * row-major matrix, symmetric. Its diagonal is `columnImportance`'s vector.
 */
export function inputCovariance(
  config: ModelConfig,
  tensors: Tensor[],
  windows: Uint8Array[],
  kernels: Kernels = kernelSet("ref"),
): Map<string, Float64Array> {
  return accumulate(config, tensors, windows, kernels, true);
}

/** Runs the windows through the float model and sums x_c² (or x xᵀ when `full`) at every linear input. */
function accumulate(
  config: ModelConfig,
  tensors: Tensor[],
  windows: Uint8Array[],
  kernels: Kernels,
  full: boolean,
): Map<string, Float64Array> {
  const names = new Map<Float32Array, string>(), sums = new Map<string, Float64Array>();
  const recording: Kernels = {
    ...kernels,
    matmul(out, x, w, M, K, N, acc) {
      const name = names.get(w);
      if (name) (full ? addOuter : addSquares)(sums.get(name)!, x, M, K);
      kernels.matmul(out, x, w, M, K, N, acc);
    },
  };
  const model = buildModel(config, tensors, "calibration", recording);
  const watch = (w: Float32Array, name: string, cols: number) => {
    names.set(w, name);
    sums.set(name, new Float64Array(full ? cols * cols : cols));
  };
  const H = config.hidden_size, qDim = config.num_attention_heads * config.head_dim;
  const colsOf = { wo: qDim, wDown: config.intermediate_size } as Record<string, number>;
  model.layers.forEach((L, i) => {
    for (const key of LINEAR) watch(L[key], `model.layers.${i}.${LAYER_TENSORS[key]}`, colsOf[key] ?? H);
  });
  watch(model.lmHead, model.lmHead === model.embed ? "model.embed_tokens.weight" : "lm_head.weight", H);
  let positions = 0;
  for (const w of windows) {
    const ids = windowInputs(w);
    forward(model, createCache(model, ids.length), ids);
    positions += ids.length;
  }
  for (const [name, s] of sums) {
    const K = full ? Math.sqrt(s.length) : s.length;
    if (full) { for (let i = 0; i < K; i++) for (let j = 0; j < i; j++) s[i * K + j] = s[j * K + i]; }
    for (let i = 0; i < s.length; i++) s[i] /= Math.max(1, positions);
    sums.set(name, s);
  }
  return sums;
}

function addSquares(s: Float64Array, x: Float32Array, M: number, K: number): void {
  for (let m = 0; m < M; m++) for (let k = 0; k < K; k++) s[k] += x[m * K + k] * x[m * K + k];
}

/** The upper triangle of Σ_m x_m x_mᵀ (the lower one is mirrored at the end). */
function addOuter(s: Float64Array, x: Float32Array, M: number, K: number): void {
  for (let m = 0; m < M; m++) {
    const o = m * K;
    for (let i = 0; i < K; i++) {
      const xi = x[o + i], row = i * K;
      if (xi === 0) continue;
      for (let j = i; j < K; j++) s[row + j] += xi * x[o + j];
    }
  }
}

/** Calibration windows lut4's export takes by default, and the seed that places them. */
export const CALIBRATION = { windows: 64, seed: 1, source: "brown train split" } as const;

/**
 * The calibrator the lut4 writer takes (`exportCheckpoint({ calibrate })`): `windows` seeded windows of
 * the Brown training split (of 256 bytes, or the model's max positions if fewer), the float reference
 * run over them, the inputs' covariances returned with the record the file's header keeps.
 *
 * @example
 * ```ts
 * await exportCheckpoint({ format: "lut4", calibrate: lut4Calibrator(64) });
 * ```
 */
export function lut4Calibrator(
  windows: number = CALIBRATION.windows,
  seed: number = CALIBRATION.seed,
): Lut4Calibrator {
  return async (config, tensors) => {
    // A window is fed whole from position 0: a model with fewer positions gets shorter windows.
    const size = Math.min(WINDOW_BYTES, config.max_position_embeddings);
    const picked = calibrationWindows((await loadBrown()).train, windows, seed, size);
    return {
      covariance: inputCovariance(config, tensors, picked, kernelSet("wasm")),
      record: { source: CALIBRATION.source, windows, window_bytes: size, seed },
    };
  };
}

/**
 * A calibrator that runs once and hands its result to every later call. For a command that exports one
 * source several times (export.ts's formats, measure.ts's rows): the statistics depend only on the
 * source, the windows and the seed, and the quantizers only read them.
 *
 * @example
 * ```ts
 * const calibrate = calibrateOnce(lut4Calibrator(64));
 * for (const format of ["gguf", "lut4"]) await exportCheckpoint({ format, calibrate });
 * ```
 */
export function calibrateOnce(calibrate: Lut4Calibrator): Lut4Calibrator {
  let result: Promise<Lut4Calibration> | undefined;
  return (config, tensors) => result ??= calibrate(config, tensors);
}

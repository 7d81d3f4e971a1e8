/**
 * The integer weights of a lut4 file, as the reader hands them out and the quantizer makes them: the
 * types `formats/lut4/lut4.ts` (the file) and `quantize/lut4-quantize.ts` (float weights → integers) share,
 * here so that neither module imports the other for its types. Spec: formats/lut4/lut4.md.
 *
 * @example
 * ```ts
 * import type { Lut4Weights } from "./lut4-types.ts";
 * const layers = (w: Lut4Weights) => w.shape.layers;
 * ```
 * @module
 */
import type { LutMatrix } from "../kernels/int/gemv.ts";
import type { ModelConfig } from "../model/config.ts";
import type { Tensor, TensorSource } from "../model/tensor.ts";
import type { TokenizerFiles } from "../model/tokenizer-types.ts";

/** How the output head is stored: `tied` reads the embedding matrix (final-norm gain applied at run
 * time), `separate` stores a second copy with the final-norm gain folded in. */
export type HeadMode = "tied" | "separate";

/** The model's shape, under the reference's key names (header key `shape`, snake_case there). */
export interface Lut4Shape {
  vocab: number;
  width: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  ffn: number;
  maxPositions: number;
}

/** A per-channel gain: int16 values meaning values[i] · 2^exp. */
export interface GainTable {
  values: Int16Array;
  exp: number;
}

/** Everything the integer engine reads from a lut4 file, as integers. */
export interface Lut4Weights {
  shape: Lut4Shape;
  /** rms_norm_eps = epsMantissa · 2^epsExp. */
  epsMantissa: number;
  epsExp: number;
  embed: LutMatrix;
  /** null: the head is the embedding matrix (tied), with `finalGain` applied before it. */
  head: LutMatrix | null;
  finalGain: GainTable | null;
  layers: {
    q: LutMatrix;
    k: LutMatrix;
    v: LutMatrix;
    o: LutMatrix;
    gate: LutMatrix;
    up: LutMatrix;
    down: LutMatrix;
    qGain: GainTable;
    kGain: GainTable;
  }[];
  /** round(2^30 · exp(−i/256)). */
  exp: Int32Array;
  /** round(2^16 · silu((i − siluHalf)/256)). */
  silu: Int32Array;
  siluHalf: number;
  /** round(2^14 · cos / sin(p · θ^(−2i/head_dim))), [position][i]. */
  ropeCos: Int16Array;
  ropeSin: Int16Array;
}

/**
 * What a calibrated file records of the data its quantizer saw (lut4 header key `calibration`, GGUF
 * `quantize.imatrix.*` and `ferry.calibration.*`). Files written before calibration took any tokenizer
 * carry `window_bytes` instead of `window_tokens` and `tokens` (the byte model: one byte a position).
 */
export interface CalibrationRecord {
  /**
   * `"brown train split"` (never the held-out documents), or a user's file: `"text NAME sha256:HEX16"`,
   * `"tokens NAME sha256:HEX16"` (measure/calibration-text.ts).
   */
  source: string;
  windows: number;
  /** Positions per window (the model's tokens; a shorter last or only window is possible). */
  window_tokens?: number;
  /** Positions over all windows: what the statistics are a mean over. */
  tokens?: number;
  /** Earlier files only: bytes per window of the byte model. */
  window_bytes?: number;
  seed: number;
}

/**
 * Calibration statistics for the quantizers, and the record the file keeps of them: the covariances
 * (ferry's own calibration: lut4's GPTQ, their diagonals GGUF's importance), or only the importance
 * (a llama.cpp imatrix file: lut4's and GGUF's importance-weighted scales).
 */
export interface Lut4Calibration {
  /** Per tensor (Hugging Face name), the cols × cols mean of x xᵀ over the calibration inputs. */
  covariance?: ReadonlyMap<string, Float64Array>;
  /** Per tensor, the mean of x_c² per input column (absent: the covariances' diagonals). */
  importance?: ReadonlyMap<string, Float32Array>;
  record: CalibrationRecord;
}

/**
 * Computes calibration statistics for a model's tensors (in memory, or sources it reads as it goes, a
 * layer at a time), its text tokenized with the model's own tokenizer (`tokenizer` absent: ferry's byte
 * tokenizer). formats/ may not run models on data (tests/imports.test.ts), so the caller hands one in
 * (`measure/calibrate.ts` `lut4Calibrator`).
 */
export type Lut4Calibrator =
  & ((
    config: ModelConfig,
    tensors: ReadonlyArray<Tensor | TensorSource>,
    tokenizer?: TokenizerFiles,
    needs?: CalibrationNeeds,
  ) => Promise<Lut4Calibration>)
  & {
    /**
     * Why a model is exported with plain rounding instead (a default calibration that would take too
     * long at its size), or undefined to calibrate; asked before any tensor is read.
     */
    skip?: (config: ModelConfig, needs?: CalibrationNeeds) => string | undefined;
    /**
     * What a default calibration changed that its record does not say (fewer windows than asked, to
     * finish in time), given the record the export keeps; undefined when nothing.
     */
    note?: (config: ModelConfig, record: CalibrationRecord, needs?: CalibrationNeeds) => string | undefined;
  };

/**
 * What a quantizer needs of calibration: lut4's GPTQ the covariances (`"covariance"`, the default),
 * the GGUF types only each column's mean square (`"importance"`: no cols² sums, no GPTQ).
 */
export type CalibrationNeeds = "covariance" | "importance";

/**
 * Everything of a lut4 file but its matrices: what a writer that is handed the matrices one at a time
 * (`writeLut4Streamed` in formats/lut4/lut4.ts) still needs once they are all written.
 */
export type Lut4Tables = Omit<Lut4Weights, "embed" | "head" | "layers"> & {
  head: HeadMode;
  /** Per layer, the q and k norm gains. */
  gains: { qGain: GainTable; kGain: GainTable }[];
};

/**
 * The most positions a lut4 file holds (`shape.max_positions`). Its RoPE tables are sized from it and
 * its reader bounds the KV cache a file may imply; a model whose config claims more (a real Qwen3 says
 * 40,960) is written with this many, and its export summary says so.
 */
export const MAX_LUT4_POSITIONS = 1 << 14;

/** The shape of the lut4 file of a model (positions capped at `MAX_LUT4_POSITIONS`). */
export function lut4ShapeOf(config: ModelConfig): Lut4Shape {
  return {
    vocab: config.vocab_size,
    width: config.hidden_size,
    layers: config.num_hidden_layers,
    heads: config.num_attention_heads,
    kvHeads: config.num_key_value_heads,
    headDim: config.head_dim,
    ffn: config.intermediate_size,
    maxPositions: Math.min(config.max_position_embeddings, MAX_LUT4_POSITIONS),
  };
}

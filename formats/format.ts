/**
 * The one shape every export format has. Each `formats/NAME/NAME.ts` exports one `FormatDescriptor`, and
 * `formats/mod.ts` lists them: export, load, generate, info, measure and the fuzzer iterate that list, so
 * a new format is one folder (the module, its spec `NAME.md`, its fuzz hook `NAME-fuzz.ts`), its minimal
 * reader `readers/NAME.ts` and one line there.
 *
 * @example
 * ```ts
 * import { FORMATS, formatOf } from "./mod.ts";
 * const f = formatOf("out/ferry.bf16.dmexp");   // the dmexp descriptor
 * const { config, tensors } = await f.read("out/ferry.bf16.dmexp");
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Tensor, TensorSource } from "../model/tensor.ts";
import type { CalibrationNeeds, Lut4Calibration } from "../quantize/lut4-types.ts";
import type { TokenizerFiles } from "../model/tokenizer-types.ts";

/** What a writer is given: the model's shape and its tensors, streamed a chunk at a time. */
export interface ExportInput {
  config: ModelConfig;
  tensors: TensorSource[];
  /** Where the weights came from (`path@stepN`), recorded by formats that keep provenance. */
  source: string;
  /** Training step of the weights (0 when unknown). */
  step: number;
  /** A short model name (the checkpoint's base name), for formats that store one. */
  name: string;
  /** The model's own tokenizer; absent for a byte model (ferry's byte tokenizer). */
  tokenizer?: TokenizerFiles;
}

/** What a writer reports; printed as the export summary. */
export interface WriteResult {
  /** The file (or folder) written. */
  file: string;
  bytes: number;
  params: number;
  tensors: number;
  /** Format-specific details (checksums, ranges, side files). */
  [detail: string]: unknown;
}

/**
 * Where an export's weights came from, as far as its file records it: the model's name, the training
 * step and the original source (`path@stepN`). Re-exporting an export keeps them.
 */
export interface ExportOrigin {
  name?: string;
  step?: number;
  source?: string;
}

/** An export read back: its shape and its named f32 tensors (dequantized where the format quantizes). */
export interface ReadResult {
  config: ModelConfig;
  tensors: Tensor[];
  /** What the file records of the weights' provenance (absent fields: the file does not say). */
  origin?: ExportOrigin;
  /** The tokenizer the file carries; absent for a byte model. */
  tokenizer?: TokenizerFiles;
}

/** An export opened for streaming: checked as `read` checks it, its tensors read a chunk at a time. */
export interface OpenedExport {
  config: ModelConfig;
  sources: TensorSource[];
  /** Releases the file(s). */
  close(): Promise<void>;
}

/** One format: how its files are recognised, what it stores, its writer, its full reader and `info`. */
export interface FormatDescriptor<D extends string = string> {
  /** The name `--format` takes. */
  readonly name: string;
  /** One line for `--help` and the README. */
  readonly summary: string;
  /** The output's extension, with the dot (`.dmexp`; a folder format names its folder `NAME.hf`). */
  readonly extension: string;
  /** Whether this path is a file (or folder) of this format. */
  recognises(path: string): boolean;
  readonly dtypes: readonly D[];
  readonly defaultDtype: D;
  /** What the file stores: float weights, or lut4 codes (engines/mod.ts maps this to an engine). */
  readonly weights: "float" | "lut4";
  /**
   * Why this file's weights are not the values it was written from (quantized: re-exporting them would
   * round the rounding), or undefined when it stores them exactly. `export --input` refuses a lossy file.
   */
  lossy(path: string): Promise<string | undefined>;
  /**
   * Why this format cannot store a model of this shape, as the config field, what it must be and what
   * it is; null (or no method) when it can. Export asks before it writes anything.
   */
  cannotStore?(config: ModelConfig): { field: string; expected: string; found: string } | null;
  /**
   * What writing `dtype` needs of calibration: "covariance" (lut4's GPTQ feedback), "importance" (GGUF's
   * importance-weighted types), or undefined (none; absent: never). The one rule for which exports
   * calibrate: the export job (formats/export.ts) runs the calibrator for what this says, and hands
   * `write` the statistics. A format never runs a model.
   */
  calibrates?(dtype: D): CalibrationNeeds | undefined;
  write(
    path: string,
    input: ExportInput,
    options: { dtype: D; onProgress?: (done: number, total: number) => void; calibration?: Lut4Calibration },
  ): Promise<WriteResult>;
  read(path: string, options?: { onProgress?: (done: number, total: number) => void }): Promise<ReadResult>;
  /**
   * The file opened for streaming (absent: only `read`): what a reader that must not hold the whole model
   * uses, such as the float engine packing its weights as it goes.
   */
  open?(
    path: string,
    options?: { onProgress?: (done: number, total: number) => void },
  ): Promise<OpenedExport>;
  /**
   * Only the tokenizer the file carries (checked as `read` checks it), without reading the weights;
   * undefined for a byte model. Engines and the chat call it beside loading the weights.
   */
  readTokenizer?(path: string): Promise<TokenizerFiles | undefined>;
  /**
   * Every header field and the verdict of every check, as plain data (`info --json` prints it). A file
   * this format refuses outright throws its `FormatError`; a verdict that `info` should still show (a
   * dmexp checksum mismatch) is reported in the data.
   */
  inspect(
    path: string,
    options?: { onProgress?: (done: number, total: number) => void },
  ): Promise<Record<string, unknown>>;
  /** The format's spec, from the repository root: `formats/NAME/NAME.md` (tests/formats/registry.test.ts checks it). */
  readonly spec: string;
  /** Its standalone minimal reader, from the repository root: `readers/NAME.ts` (node: built-ins only). */
  readonly minimalReader: string;
  /**
   * Its fuzz hook, from the repository root: a module exporting `FUZZ_TARGETS`, by convention
   * `formats/NAME/NAME-fuzz.ts`, loaded only by the mutation campaign (`loadFuzzHook` in formats/fuzz-kit.ts).
   * A path rather than an import, so the hook (which imports the format) and the format form no circle.
   */
  readonly fuzzHook: string;
}

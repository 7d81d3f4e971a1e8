/**
 * The export pipeline: a training checkpoint (or a lossless export, or a Hugging Face Qwen3 folder)
 * becomes named tensors, and a format writer from the registry stores them. Data flows one way:
 * checkpoint -> tensors -> writer. scripts/export.ts is the command line on top of it.
 *
 * The config comes from the `<name>.config.toml` snapshot beside the checkpoint, the shape the weights
 * were trained under; a preset is accepted only when that snapshot is missing. Only the checkpoint's
 * model section is read into the export: the EMA copy and the optimizer state are passed over (their
 * bytes go through the checkpoint's checksum and nowhere else). The model streams a chunk at a time,
 * so memory does not grow with the model; so does a Hugging Face folder. A model's own tokenizer (a real
 * Qwen3 folder's) goes to the writer with the tensors (`ExportInput.tokenizer`).
 *
 * An export is input too when it holds the values it was given: dmexp (f32, f16 or bf16, widened
 * exactly), hf, GGUF F32/F16/BF16 and f64lines. A lossy one (quantized GGUF blocks, lut4) is refused: its
 * rounding would be rounded again. A re-export keeps the model's name, step and source as the input
 * export records them (`ReadResult.origin`), so it is the file the checkpoint itself would give.
 *
 * @example
 * ```ts
 * import { exportCheckpoint } from "./export.ts";
 * const s = await exportCheckpoint({ input: "runs/a.ckpt", output: "out/", format: "dmexp", dtype: "f16" });
 * console.log(s.file, s.bytes);
 * ```
 * @module
 */
import { mkdir, open, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import {
  CheckpointError,
  type CheckpointModel,
  configPathFor,
  isCheckpoint,
  openCheckpointModel,
} from "./checkpoint/checkpoint.ts";
import { hfFormat, openHuggingFace } from "./huggingface/huggingface.ts";
import { dmexpFormat, dmexpOrigin, openDmexp } from "./dmexp/dmexp.ts";
import { requireInput, unreadable } from "./io.ts";
import { type FormatDescriptor, formatNamed, FORMATS, refuseLossy, type WriteResult } from "./mod.ts";
import { type ModelConfig, paramShapes, PRESETS, readConfigFile } from "../model/config.ts";
import { FormatError } from "../model/error.ts";
import type { CalibrationNeeds, Lut4Calibration, Lut4Calibrator } from "../quantize/lut4-types.ts";
import { type TensorSource, tensorSource } from "../model/tensor.ts";
import type { TokenizerFiles } from "../model/tokenizer-types.ts";
import { DEFAULT_INPUT, joinParts } from "./checkpoint/parts.ts";

/** The checkpoint exported when no input is given: the shipped model. */
export { DEFAULT_INPUT };
/** The folder exports go to when no output is given. */
export const DEFAULT_OUTPUT = "out/";

/** A misuse of the options (an unknown format or dtype, a preset that is not allowed), not bad input. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * A model the chosen format cannot store (lut4 needs widths in multiples of 32): refused before writing,
 * with the shared code `UnsupportedModel`.
 */
export class UnsupportedModelError extends FormatError {
  constructor(path: string, readonly format: string, field: string, expected: string, found: string) {
    super(
      path,
      "UnsupportedModel",
      field,
      `${path}: ${format} cannot store this model: ${field} is ${found}, expected ${expected}`,
      { expected, found },
    );
  }
}

/** What an export is made from: its tensors opened for streaming, and where they came from. */
export interface CheckpointInput extends CheckpointModel {
  /** The snapshot's path, `preset <name>`, or the export (or its config.json) the shape was read from. */
  configFrom: string;
  /** The model's short name (a checkpoint's base name; what an export records, else its base name). */
  name: string;
  /** The training run the weights came from, `path@stepN`. */
  source: string;
  /** The model's own tokenizer, when the input carries one (absent: a byte model). */
  tokenizer?: TokenizerFiles;
}

/**
 * Opens what to export. A training checkpoint: the config from its snapshot (or an explicitly named
 * preset when the snapshot is missing), the whole-file CRC verified in chunks, and the model section
 * checked against that config. A Hugging Face folder: opened for streaming (`openHuggingFace`: every
 * header and the tokenizer checked, the tensors read a chunk at a time as the writer asks). A lossless
 * export: read whole through its format's reader. Either keeps its name, step and source as it records
 * them, and its tokenizer. A lossy export is refused, saying why; a missing path gets io.ts's sentence.
 */
export async function openInput(
  path: string,
  opts: { preset?: string; onProgress?: (done: number, total: number) => void } = {},
): Promise<CheckpointInput> {
  requireInput(path);
  if (await stat(path).then((st) => st.isDirectory())) return await openExport(path, hfFormat, opts.preset);
  const head = new Uint8Array(8);
  try {
    const fh = await open(path, "r");
    await fh.read(head, 0, 8, 0).finally(() => fh.close());
  } catch (e) {
    throw unreadable(path, e);
  }
  const format = isCheckpoint(head) ? undefined : FORMATS.find((f) => f.recognises(path));
  if (format) return await openExport(path, format, opts.preset);
  const { config, configFrom } = isCheckpoint(head)
    ? await resolveConfig(path, opts.preset)
    : { config: undefined, configFrom: undefined }; // not a checkpoint: openCheckpointModel names the problem
  const model = await openCheckpointModel(path, { config, configFrom, onProgress: opts.onProgress });
  return {
    ...model,
    configFrom: configFrom ?? configPathFor(path),
    name: basename(path).replace(/\.ckpt$/, ""),
    source: `${model.path}@step${model.step}`,
  };
}

/**
 * An export as export input: refused when lossy; else read whole, its tensors in the config's
 * canonical order (so the writer sees what a checkpoint would give it) and its origin kept.
 */
async function openExport(path: string, format: FormatDescriptor, preset?: string): Promise<CheckpointInput> {
  if (preset !== undefined) {
    throw new UsageError(`--preset ${preset} refused: ${path} is an export and carries its own config`);
  }
  await refuseLossy(
    path,
    format,
    "cannot be an export's input: export from the checkpoint or a lossless export",
  );
  if (format === dmexpFormat) {
    // A dmexp file streams too: checked whole in one chunked pass, then read a chunk at a time.
    const m = await openDmexp(path);
    const origin = dmexpOrigin(m.header);
    return {
      path,
      step: origin.step ?? 0,
      config: m.config,
      configFrom: path,
      tensors: canonicalOrder(m.config, m.sources),
      name: origin.name ?? exportName(path, format),
      source: origin.source ?? `${path}@step${origin.step ?? 0}`,
      ...(m.tokenizer ? { tokenizer: m.tokenizer } : {}),
      close: m.close,
    };
  }
  if (format === hfFormat) {
    // A Hugging Face folder streams: its tensors are read a chunk at a time while the writer runs.
    const hf = await openHuggingFace(path);
    const step = hf.origin.step ?? 0;
    return {
      path,
      step,
      config: hf.config,
      configFrom: join(path, "config.json"),
      tensors: hf.sources,
      name: hf.origin.name ?? exportName(path, format),
      source: hf.origin.source ?? `${path}@step${step}`,
      ...(hf.tokenizer ? { tokenizer: hf.tokenizer } : {}),
      close: hf.close,
    };
  }
  const { config, tensors, origin, tokenizer } = await format.read(path);
  const step = origin?.step ?? 0;
  return {
    path,
    step,
    config,
    configFrom: path,
    tensors: canonicalOrder(config, tensors).map(tensorSource),
    name: origin?.name ?? exportName(path, format),
    source: origin?.source ?? `${path}@step${step}`,
    ...(tokenizer ? { tokenizer } : {}),
    close: () => Promise.resolve(),
  };
}

// The config's parameter order (paramShapes), whatever order the file listed them in.
function canonicalOrder<T extends { name: string }>(config: ModelConfig, tensors: T[]): T[] {
  const rank = new Map(paramShapes(config).map((p, i) => [p.name, i]));
  const at = (t: T) => rank.get(t.name) ?? rank.size;
  return [...tensors].sort((a, b) => at(a) - at(b));
}

/**
 * The model name in an export's file name, for a file that records none: `NAME.DTYPE.EXT` (the name
 * ferry gives its exports) gives NAME, any other file its name without the extension.
 *
 * @example
 * ```ts
 * import { exportName } from "./export.ts";
 * import { hfFormat } from "./huggingface/huggingface.ts";
 * exportName("out/ferry.f32.hf", hfFormat); // "ferry"
 * ```
 */
export function exportName(path: string, format: FormatDescriptor): string {
  const file = basename(path.replace(/\/+$/, ""));
  const stem = file.endsWith(format.extension) ? file.slice(0, -format.extension.length) : file;
  const dot = stem.lastIndexOf(".");
  const dtype = dot > 0 ? stem.slice(dot + 1) : "";
  return FORMATS.some((f) => f.dtypes.includes(dtype)) ? stem.slice(0, dot) : stem;
}

async function resolveConfig(
  path: string,
  preset?: string,
): Promise<{ config: ModelConfig; configFrom: string }> {
  const snapshot = configPathFor(path);
  const exists = await stat(snapshot).then(() => true, () => false);
  if (exists && preset !== undefined) {
    throw new UsageError(
      `--preset ${preset} refused: ${snapshot} exists, and it is the shape these weights were trained under. ` +
        `Drop --preset (it is accepted only when the snapshot is missing).`,
    );
  }
  if (exists) return { config: await readConfigFile(snapshot), configFrom: snapshot };
  if (preset === undefined) {
    throw new CheckpointError(
      path,
      "MissingConfig",
      "config",
      `the config snapshot ${snapshot} is missing. If you know the shape the run trained under, ` +
        `name it explicitly with --preset (one of: ${Object.keys(PRESETS).join(", ")}).`,
    );
  }
  if (!Object.hasOwn(PRESETS, preset)) {
    throw new UsageError(`--preset ${preset}: unknown (expected one of: ${Object.keys(PRESETS).join(", ")})`);
  }
  return { config: PRESETS[preset], configFrom: `preset ${preset}` };
}

/** Options of `exportCheckpoint`. */
export interface ExportOptions {
  input?: string;
  /** A folder, or a file path ending in the format's extension. */
  output?: string;
  /** A format's name (default dmexp). */
  format?: string;
  /** One of the format's dtypes (default the format's). */
  dtype?: string;
  preset?: string;
  /** Called per phase (`verify` the checkpoint, then `write`) as work is done. */
  onProgress?: (phase: "verify" | "write", done: number, total: number) => void;
  /** Calibration statistics for a quantizer that takes them (lut4; measure/calibrate.ts makes one). */
  calibrate?: Lut4Calibrator;
}

/** The summary of one export. */
export interface ExportSummary extends WriteResult {
  format: string;
  dtype: string;
  /** What was exported: a checkpoint, or an export. */
  input: string;
  /** The training run the weights came from (`path@stepN`), as written into the export. */
  source: string;
  step: number;
  config_from: string;
  seconds: number;
}

/**
 * Whether an export of this format and dtype takes calibration: lut4 (GPTQ, or an imatrix's weighted
 * scales), and the GGUF types whose scale search weighs by importance.
 *
 * @example
 * ```ts
 * import { takesCalibration } from "./export.ts";
 * takesCalibration("gguf", "q4_k_m"); // true
 * takesCalibration("gguf", "q8_0");   // false
 * ```
 */
export function takesCalibration(format: string, dtype: string): boolean {
  return calibrationNeeds(format, dtype) !== undefined;
}

/** What an export of this format and dtype needs of calibration, if anything: the format says. */
export function calibrationNeeds(format: string, dtype: string): CalibrationNeeds | undefined {
  return formatNamed(format)?.calibrates?.(dtype as never);
}

/**
 * Runs the calibrator on the model: the float model over calibration text, reading the tensors from
 * their sources as it goes (measure/calibrate.ts: a layer at a time), which the writer then reads again.
 * Returns the sources for the writer, and the statistics it quantizes with.
 */
async function calibrated(
  model: { config: ModelConfig; tensors: TensorSource[]; tokenizer?: TokenizerFiles },
  calibrate: Lut4Calibrator,
  needs: CalibrationNeeds,
): Promise<{ sources: TensorSource[]; calibration: Lut4Calibration }> {
  const calibration = await calibrate(model.config, model.tensors, model.tokenizer, needs);
  return { sources: model.tensors, calibration };
}

/** The format a `--format` name names, or a `UsageError` listing the names. */
export function formatFor(name: string): FormatDescriptor {
  const format = formatNamed(name);
  if (!format) {
    throw new UsageError(
      `--format ${name}: unknown (expected one of: ${FORMATS.map((f) => f.name).join(", ")})`,
    );
  }
  return format;
}

/**
 * Where an export goes: `output` itself when it ends in the format's extension, else `NAME.DTYPE.EXT`
 * in that folder, NAME the model's name (default: the input's, as `exportName` or a checkpoint's
 * base name gives it).
 *
 * @example
 * ```ts
 * import { outputPath } from "./export.ts";
 * import { lut4Format } from "./lut4/lut4.ts";
 * outputPath("out/", lut4Format, "model/default/ferry.ckpt", "q4"); // "out/ferry.q4.lut4"
 * ```
 */
export function outputPath(
  output: string,
  format: FormatDescriptor,
  input: string,
  dtype: string,
  name = inputName(input),
): string {
  if (output.endsWith(format.extension)) return output;
  return join(output, `${name}.${dtype}${format.extension}`);
}

// A checkpoint's base name, or an export's name by its file name.
function inputName(input: string): string {
  const format = FORMATS.find((f) => f.recognises(input));
  return format ? exportName(input, format) : basename(input).replace(/\.ckpt$/, "");
}

/**
 * Exports one checkpoint to one format. Throws `UsageError` for bad options and `CheckpointError`,
 * `ConfigError` or the format's own error (all `FormatError`s) for refused input.
 *
 * @example
 * ```ts
 * import { exportCheckpoint } from "./export.ts";
 * const s = await exportCheckpoint({ input: "runs/a.ckpt", format: "gguf", dtype: "q8_0", output: "out/" });
 * console.log(s.file, s.bytes);
 * ```
 */
export async function exportCheckpoint(opts: ExportOptions = {}): Promise<ExportSummary> {
  const started = performance.now();
  // The shipped model is kept in parts (formats/checkpoint/parts.ts): joined here on a fresh clone, as
  // every command line does, so the library's default works before any command has run.
  if (opts.input === undefined) joinParts(DEFAULT_INPUT);
  const input = opts.input ?? DEFAULT_INPUT;
  const format = formatFor(opts.format ?? "dmexp");
  const dtype = opts.dtype ?? format.defaultDtype;
  if (!format.dtypes.includes(dtype)) {
    throw new UsageError(`--dtype ${dtype}: ${format.name} stores ${format.dtypes.join(", ")}`);
  }
  const model = await openInput(input, {
    preset: opts.preset,
    onProgress: (d, t) => opts.onProgress?.("verify", d, t),
  });
  const file = outputPath(opts.output ?? DEFAULT_OUTPUT, format, input, dtype, model.name);
  try {
    const why = format.cannotStore?.(model.config);
    if (why) throw new UnsupportedModelError(model.path, format.name, why.field, why.expected, why.found);
    await mkdir(dirname(file), { recursive: true });
    // A default calibration too long for this model's size runs on fewer windows or is skipped, and the
    // summary says so.
    const needs = calibrationNeeds(format.name, dtype);
    const skipped = needs ? opts.calibrate?.skip?.(model.config, needs) : undefined;
    const { sources, calibration } = needs && opts.calibrate && !skipped
      ? await calibrated(model, opts.calibrate, needs)
      : { sources: model.tensors, calibration: undefined };
    const result = await format.write(file, {
      config: model.config,
      tensors: sources,
      source: model.source,
      step: model.step,
      name: model.name,
      ...(model.tokenizer ? { tokenizer: model.tokenizer } : {}),
    }, { dtype, onProgress: (d, t) => opts.onProgress?.("write", d, t), calibration });
    const { file: written, bytes, params, tensors, ...details } = result;
    if (skipped) details.calibration = skipped;
    const changed = calibration && needs && opts.calibrate?.note?.(model.config, calibration.record, needs);
    if (changed) details.calibration = `${details.calibration}; ${changed}`;
    return {
      file: written,
      format: format.name,
      dtype,
      bytes,
      params,
      tensors,
      input,
      source: model.source,
      step: model.step,
      config_from: model.configFrom,
      ...(model.tokenizer
        ? { tokenizer: `the model's own: ${Object.keys(model.tokenizer).join(", ")}` }
        : {}),
      ...details,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await model.close();
  }
}

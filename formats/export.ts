/**
 * The export pipeline: a training checkpoint (or a Hugging Face Qwen3 folder) becomes named tensors,
 * and a format writer from the registry stores them. Data flows one way: checkpoint -> tensors ->
 * writer. scripts/export.ts is the command line on top of it.
 *
 * The config comes from the `<name>.config.toml` snapshot beside the checkpoint, the shape the weights
 * were trained under; a preset is accepted only when that snapshot is missing. Only the checkpoint's
 * model section is read into the export: the EMA copy and the optimizer state are passed over (their
 * bytes go through the checkpoint's checksum and nowhere else). The model streams a chunk at a time,
 * so memory does not grow with the model.
 *
 * @example
 * ```ts
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
} from "./checkpoint.ts";
import { DMEXP_MAGIC } from "./dmexp.ts";
import { importHuggingFace } from "./huggingface.ts";
import { type FormatDescriptor, formatNamed, FORMATS, type WriteResult } from "./mod.ts";
import { type ModelConfig, PRESETS, readConfigFile } from "../model/config.ts";
import { FormatError } from "../model/error.ts";
import { tensorSource } from "../model/tensor.ts";

/** The checkpoint exported when no input is given: the shipped model. */
export const DEFAULT_INPUT = "model/default/ferry.ckpt";
/** The folder exports go to when no output is given. */
export const DEFAULT_OUTPUT = "out/";

/** A misuse of the options (an unknown format or dtype, a preset that is not allowed), not bad input. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** A model the chosen format cannot store (lut4 needs widths in multiples of 32): refused before writing. */
export class UnsupportedModelError extends FormatError {
  constructor(path: string, readonly format: string, field: string, expected: string, found: string) {
    super(
      path,
      field,
      `${path}: ${format} cannot store this model: ${field} is ${found}, expected ${expected}`,
      {
        expected,
        found,
      },
    );
    this.name = "UnsupportedModelError";
  }
}

/** A checkpoint's model section opened for streaming, and where its config came from. */
export interface CheckpointInput extends CheckpointModel {
  /** The snapshot's path, or `preset <name>`. */
  configFrom: string;
}

/**
 * Opens what to export: the config from its snapshot (or an explicitly named preset when the snapshot
 * is missing), the whole-file CRC verified in chunks, and the model section checked against that
 * config. A Hugging Face folder is read whole. A missing file or a dmexp given by mistake gets a
 * sentence that says so.
 */
export async function openInput(
  path: string,
  opts: { preset?: string; onProgress?: (done: number, total: number) => void } = {},
): Promise<CheckpointInput> {
  if (await stat(path).then((st) => st.isDirectory(), () => false)) {
    return await openHfFolder(path, opts.preset);
  }
  const head = new Uint8Array(8);
  try {
    const fh = await open(path, "r");
    await fh.read(head, 0, 8, 0).finally(() => fh.close());
  } catch (e) {
    const missing = (e as { code?: string }).code === "ENOENT";
    throw new CheckpointError(path, "file", missing ? "no such file" : (e as Error).message);
  }
  if (new TextDecoder().decode(head.subarray(0, 7)) === DMEXP_MAGIC) {
    throw new CheckpointError(path, "magic", "this is already a dmexp export, not a training checkpoint");
  }
  const { config, configFrom } = isCheckpoint(head)
    ? await resolveConfig(path, opts.preset)
    : { config: undefined, configFrom: undefined }; // not a checkpoint: openCheckpointModel names the problem
  const model = await openCheckpointModel(path, { config, configFrom, onProgress: opts.onProgress });
  return { ...model, configFrom: configFrom ?? configPathFor(path) };
}

/**
 * A Hugging Face Qwen3 folder as export input (a model trained in PyTorch, say): its config.json is
 * the shape, and it has no training step. The import refuses what ferry's maths would not follow.
 */
async function openHfFolder(path: string, preset?: string): Promise<CheckpointInput> {
  if (preset !== undefined) {
    throw new UsageError(`--preset ${preset} refused: ${path} carries its own config.json`);
  }
  const { config, tensors } = await importHuggingFace(path);
  return {
    path,
    step: 0,
    config,
    configFrom: join(path, "config.json"),
    tensors: tensors.map(tensorSource),
    close: () => Promise.resolve(),
  };
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
}

/** The summary of one export. */
export interface ExportSummary extends WriteResult {
  format: string;
  dtype: string;
  source: string;
  step: number;
  config_from: string;
  seconds: number;
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

/** Where an export goes: `output` itself when it ends in the format's extension, else a file in that folder. */
export function outputPath(output: string, format: FormatDescriptor, input: string, dtype: string): string {
  if (output.endsWith(format.extension)) return output;
  return join(output, `${basename(input).replace(/\.(ckpt|hf)$/, "")}.${dtype}${format.extension}`);
}

/**
 * Exports one checkpoint to one format. Throws `UsageError` for bad options and `CheckpointError`,
 * `ConfigError` or the format's own error (all `FormatError`s) for refused input.
 *
 * @example
 * ```ts
 * const s = await exportCheckpoint({ input: "runs/a.ckpt", format: "gguf", dtype: "q8_0", output: "out/" });
 * console.log(s.file, s.bytes);
 * ```
 */
export async function exportCheckpoint(opts: ExportOptions = {}): Promise<ExportSummary> {
  const started = performance.now();
  const input = opts.input ?? DEFAULT_INPUT;
  const format = formatFor(opts.format ?? "dmexp");
  const dtype = opts.dtype ?? format.defaultDtype;
  if (!format.dtypes.includes(dtype)) {
    throw new UsageError(`--dtype ${dtype}: ${format.name} stores ${format.dtypes.join(", ")}`);
  }
  const file = outputPath(opts.output ?? DEFAULT_OUTPUT, format, input, dtype);
  const model = await openInput(input, {
    preset: opts.preset,
    onProgress: (d, t) => opts.onProgress?.("verify", d, t),
  });
  try {
    const why = format.cannotStore?.(model.config);
    if (why) throw new UnsupportedModelError(model.path, format.name, why.field, why.expected, why.found);
    await mkdir(dirname(file), { recursive: true });
    const result = await format.write(file, {
      config: model.config,
      tensors: model.tensors,
      source: `${model.path}@step${model.step}`,
      step: model.step,
      name: basename(model.path).replace(/\.ckpt$/, ""),
    }, { dtype, onProgress: (d, t) => opts.onProgress?.("write", d, t) });
    const { file: written, bytes, params, tensors, ...details } = result;
    return {
      file: written,
      format: format.name,
      dtype,
      bytes,
      params,
      tensors,
      source: `${input}@step${model.step}`,
      step: model.step,
      config_from: model.configFrom,
      ...details,
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    await model.close();
  }
}

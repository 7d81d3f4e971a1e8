/**
 * Exports a training checkpoint to an inference format: `deno run -A scripts/export.ts` with no
 * arguments exports the shipped model (model/default/ferry.ckpt) to out/ as bf16 dmexp.
 *
 * The config comes from the `<name>.config.toml` snapshot beside the checkpoint, the shape the weights
 * were trained under; `--preset` is accepted only when that snapshot is missing. Only the checkpoint's
 * model section is read into the export: the EMA copy and the optimizer state are passed over (their
 * bytes go through the checkpoint's checksum and nowhere else). The model streams a chunk at a time,
 * so memory does not grow with the model.
 *
 * Formats plug in through `FORMATS`: one entry (extension, dtypes, writer) per format.
 *
 * @example
 * ```ts
 * // deno run -A scripts/export.ts --input runs/a.ckpt --format dmexp --dtype f16 --output out/
 * const summary = await exportCheckpoint({ input: "runs/a.ckpt", output: "out/", format: "dmexp", dtype: "f16" });
 * ```
 * @module
 */
import { mkdir, open, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { cli, EXIT_USAGE, fail, type Progress, progress, run } from "./cli.ts";
import {
  CheckpointError,
  type CheckpointModel,
  configPathFor,
  isCheckpoint,
  openCheckpointModel,
} from "../formats/checkpoint.ts";
import { DMEXP_MAGIC, type DmexpDtype, DTYPES, hex32, writeDmexp } from "../formats/dmexp.ts";
import { exportHuggingFace, type HfDtype, importHuggingFace } from "../formats/huggingface.ts";
import { type GgufDtype, writeGguf } from "../formats/gguf.ts";
import { writeF64Lines } from "../formats/f64lines.ts";
import { writeAtomic } from "../formats/io.ts";
import { configToToml, type ModelConfig, PRESETS, readConfigFile } from "../model/config.ts";
import { countParams, materialize, type Tensor, tensorSource } from "../model/tensor.ts";

/** The checkpoint exported when `--input` is not given. */
export const DEFAULT_INPUT = "model/default/ferry.ckpt";
/** The folder exports go to when `--output` is not given. */
export const DEFAULT_OUTPUT = "out/";

/** A misuse of the command line (exit code 2), as opposed to refused input (exit code 1). */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/** A checkpoint's model section opened for streaming, and where its config came from. */
export interface CheckpointInput extends CheckpointModel {
  /** The snapshot's path, or `preset <name>`. */
  configFrom: string;
}

/**
 * Opens the checkpoint to export: the config from its snapshot (or an explicitly named preset when the
 * snapshot is missing), the whole-file CRC verified in chunks, and the model section checked against
 * that config. A missing file or a dmexp given by mistake gets a sentence that says so.
 */
export async function openInput(
  path: string,
  opts: { preset?: string; onProgress?: (done: number, total: number) => void } = {},
): Promise<CheckpointInput> {
  if (await stat(path).then((st) => st.isDirectory(), () => false)) return await openHfFolder(path, opts.preset);
  const head = new Uint8Array(8);
  try {
    const fh = await open(path, "r");
    await fh.read(head, 0, 8, 0).finally(() => fh.close());
  } catch (e) {
    const missing = (e as { code?: string }).code === "ENOENT";
    const hint = path === DEFAULT_INPUT
      ? " (the default model appears here once it is trained; pass --input to export another checkpoint)"
      : "";
    throw new CheckpointError(path, "file", missing ? `no such file${hint}` : (e as Error).message);
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
  if (preset !== undefined) throw new UsageError(`--preset ${preset} refused: ${path} carries its own config.json`);
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

/** What a format writer is given. */
export interface ExportJob {
  input: CheckpointInput;
  /** The file (or folder, for a folder format) to write. */
  output: string;
  dtype: string;
  onProgress?: (done: number, total: number) => void;
}

/** What a writer reports; printed as the summary. */
export interface ExportResult {
  file: string;
  bytes: number;
  dtype: string;
  params: number;
  tensors: number;
  [detail: string]: unknown;
}

/** One export format: how its outputs are named, what it stores, and its writer. */
export interface ExportFormat {
  /** Extension of the output file (with the dot). */
  ext: string;
  dtypes: readonly string[];
  defaultDtype: string;
  write(job: ExportJob): Promise<ExportResult>;
}

/** Every format `--format` accepts; adding a format is one line here. `all` writes each at its default dtype. */
export const FORMATS: Record<string, ExportFormat> = {
  dmexp: { ext: ".dmexp", dtypes: DTYPES, defaultDtype: "bf16", write: exportDmexp },
  hf: { ext: ".hf", dtypes: ["f32", "f16", "bf16"], defaultDtype: "f32", write: exportHf },
  gguf: { ext: ".gguf", dtypes: ["f32", "f16", "bf16", "q8_0", "q4_0"], defaultDtype: "f16", write: exportGguf },
  f64lines: { ext: ".f64lines", dtypes: ["f64"], defaultDtype: "f64", write: exportF64Lines },
};

/** The writers below take whole tensors; a model this size fits in memory (dmexp alone streams). */
async function loadAll(input: CheckpointInput): Promise<Tensor[]> {
  return await Promise.all(input.tensors.map(materialize));
}

async function exportHf({ input, output, dtype }: ExportJob): Promise<ExportResult> {
  const tensors = await loadAll(input);
  const files = await exportHuggingFace(output, tensors, input.config, { dtype: dtype as HfDtype });
  let bytes = 0;
  for (const f of files) bytes += (await stat(f)).size;
  return { file: output, bytes, dtype, params: countParams(tensors), tensors: tensors.length, files: files.length };
}

async function exportGguf({ input, output, dtype }: ExportJob): Promise<ExportResult> {
  const tensors = await loadAll(input);
  await writeGguf(output, tensors, input.config, { type: dtype as GgufDtype, name: basename(input.path).replace(/\.ckpt$/, "") });
  return { file: output, bytes: (await stat(output)).size, dtype, params: countParams(tensors), tensors: tensors.length };
}

async function exportDmexp({ input, output, dtype, onProgress }: ExportJob): Promise<ExportResult> {
  const r = await writeDmexp(output, input.tensors, input.config, {
    dtype: dtype as DmexpDtype,
    source: `${input.path}@step${input.step}`,
    step: input.step,
    onProgress,
  });
  return {
    file: r.path,
    bytes: r.bytes,
    dtype,
    params: r.header.num_params,
    tensors: r.header.num_tensors,
    max_abs: r.header.max_abs,
    min_nonzero_abs: r.header.min_nonzero_abs,
    flushed: r.header.flushed,
    crc32: hex32(r.crc32),
  };
}

/** f64lines holds named arrays only, so the shape travels in `NAME.config.toml` beside the file. */
async function exportF64Lines({ input, output, dtype }: ExportJob): Promise<ExportResult> {
  const tensors = await loadAll(input);
  await writeF64Lines(output, tensors);
  await writeAtomic(f64linesConfigPath(output), [new TextEncoder().encode(configToToml(input.config))]);
  return { file: output, bytes: (await stat(output)).size, dtype, params: countParams(tensors), tensors: tensors.length, config: f64linesConfigPath(output) };
}

/** `a.f64lines` → `a.config.toml`: where an f64lines export's config lives. */
export function f64linesConfigPath(path: string): string {
  return path.replace(/\.f64lines$/, "") + ".config.toml";
}

/** Options of `exportCheckpoint`. */
export interface ExportOptions {
  input?: string;
  /** A folder, or a file path ending in the format's extension. */
  output?: string;
  format?: string;
  dtype?: string;
  preset?: string;
  /** Called per phase (`verify` the checkpoint, then `write`) as work is done. */
  onProgress?: (phase: "verify" | "write", done: number, total: number) => void;
}

/** The summary of one export. */
export interface ExportSummary extends ExportResult {
  format: string;
  source: string;
  step: number;
  config_from: string;
  seconds: number;
}

/** Where an export goes: `output` itself when it ends in the format's extension, else a file in that folder. */
export function outputPath(output: string, format: string, input: string, dtype: string): string {
  const ext = FORMATS[format].ext;
  if (output.endsWith(ext)) return output;
  return join(output, `${basename(input).replace(/\.(ckpt|hf)$/, "")}.${dtype}${ext}`);
}

/**
 * Exports one checkpoint. Throws `UsageError` for bad options and `CheckpointError`, `ConfigError`
 * or the format's own error for refused input.
 *
 * @example
 * ```ts
 * const s = await exportCheckpoint({ input: "runs/a.ckpt", format: "dmexp", dtype: "bf16", output: "out/" });
 * console.log(s.file, s.bytes);
 * ```
 */
export async function exportCheckpoint(opts: ExportOptions = {}): Promise<ExportSummary> {
  const started = performance.now();
  const input = opts.input ?? DEFAULT_INPUT;
  const formatName = opts.format ?? "dmexp";
  if (!Object.hasOwn(FORMATS, formatName)) {
    throw new UsageError(
      `--format ${formatName}: unknown (expected one of: ${Object.keys(FORMATS).join(", ")})`,
    );
  }
  const format = FORMATS[formatName];
  const dtype = opts.dtype ?? format.defaultDtype;
  if (!format.dtypes.includes(dtype)) {
    throw new UsageError(`--dtype ${dtype}: ${formatName} stores ${format.dtypes.join(", ")}`);
  }
  const file = outputPath(opts.output ?? DEFAULT_OUTPUT, formatName, input, dtype);
  const model = await openInput(input, {
    preset: opts.preset,
    onProgress: (d, t) => opts.onProgress?.("verify", d, t),
  });
  try {
    await mkdir(dirname(file), { recursive: true });
    const result = await format.write({
      input: model,
      output: file,
      dtype,
      onProgress: (d, t) => opts.onProgress?.("write", d, t),
    });
    const { file: written, bytes, params, tensors, dtype: _dtype, ...details } = result;
    return {
      file: written,
      format: formatName,
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

const HELP = `
Export a training checkpoint to an inference format.

Usage: deno run -A scripts/export.ts [--input CKPT] [--format NAME] [--dtype NAME] [--output PATH] [--json]

With no options: every format of the shipped model (model/default/ferry.ckpt) into out/.

Options:
  --input CKPT    training checkpoint (default ${DEFAULT_INPUT}); its config is read from the
                  CKPT-name.config.toml snapshot beside it. A Hugging Face Qwen3 folder (config.json +
                  model.safetensors, single or sharded) is accepted too
  --format NAME   all, ${Object.keys(FORMATS).join(", ")} (default all: every format at its default dtype)
  --dtype NAME    weight dtype (default per format; with all, applied where the format stores it); ${
  Object.entries(FORMATS).map(([n, f]) => `${n}: ${f.dtypes.join("/")} (default ${f.defaultDtype})`).join("; ")
}
  --output PATH   a folder (default ${DEFAULT_OUTPUT}, file named NAME.DTYPE.EXT) or a file path ending in .EXT
  --preset NAME   the shape to assume when the snapshot is missing (${Object.keys(PRESETS).join(", ")});
                  refused when the snapshot exists
  --json          print the summary as JSON
  -h, --help      this text

Exit codes: 0 written, 1 refused (missing or corrupt input, a value the dtype cannot hold), 2 usage.
`;

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    input: { type: "string" },
    output: { type: "string" },
    format: { type: "string", default: "all" },
    dtype: { type: "string" },
    preset: { type: "string" },
    json: { type: "boolean" },
  });
  if (positionals.length > 0) {
    fail(`unexpected argument ${positionals[0]} (use --input)\n\n${HELP.trim()}`, EXIT_USAGE);
  }
  const names = values.format === "all" ? Object.keys(FORMATS) : [values.format!];
  if (names.length > 1 && values.output?.match(/\.[a-z0-9]+$/)) {
    fail(`--output ${values.output}: with --format all, give a folder`, EXIT_USAGE);
  }
  if (values.dtype && !names.some((f) => FORMATS[f]?.dtypes.includes(values.dtype!))) {
    fail(`--dtype ${values.dtype}: no format stores it (${names.map((f) => `${f}: ${FORMATS[f]?.dtypes.join("/")}`).join("; ")})`, EXIT_USAGE);
  }
  const summaries: ExportSummary[] = [];
  for (const format of names) {
    // With every format, --dtype applies where the format stores it; the others keep their default.
    const dtype = names.length > 1 && !FORMATS[format].dtypes.includes(values.dtype ?? "") ? undefined : values.dtype;
    const bars: Partial<Record<"verify" | "write", { bar: Progress; shown: number }>> = {};
    try {
      summaries.push(await exportCheckpoint({
        input: values.input,
        output: values.output,
        format,
        dtype,
        preset: values.preset,
        onProgress: (phase, done, total) => {
          // Counted in MiB (verify reports bytes, write reports f32 values); under 64 MiB needs no bar.
          const unit = phase === "verify" ? 1 << 20 : (1 << 20) / 4;
          if (total < 64 * unit) return;
          const b = bars[phase] ??= {
            bar: progress(phase === "verify" ? "verify checkpoint" : `export ${format}`, Math.ceil(total / unit), {
              unit: "MiB",
            }),
            shown: 0,
          };
          const now = Math.floor(done / unit);
          if (now > b.shown) b.bar.tick(now - b.shown), b.shown = now;
          if (done === total) b.bar.done();
        },
      }));
    } catch (e) {
      if (e instanceof UsageError) fail(e.message, EXIT_USAGE);
      throw e;
    }
  }
  if (values.json) {
    console.log(JSON.stringify(names.length === 1 ? summaries[0] : summaries, null, 2));
    return;
  }
  if (summaries.length > 1) {
    const s0 = summaries[0];
    console.log(`exported ${s0.source} (${s0.params.toLocaleString("en-US")} params, config from ${s0.config_from})`);
    for (const s of summaries) {
      console.log(`  ${s.format.padEnd(8)} ${s.dtype.padEnd(5)} ${s.bytes.toLocaleString("en-US").padStart(12)} bytes  ${s.file}`);
    }
    return;
  }
  const summary = summaries[0];
  console.log(`wrote ${summary.file}`);
  const rows: Array<[string, unknown]> = [
    ["format", `${summary.format}, ${summary.dtype}`],
    ["bytes", summary.bytes.toLocaleString("en-US")],
    ["params", summary.params.toLocaleString("en-US")],
    ["tensors", summary.tensors],
    ["source", summary.source],
    ["config from", summary.config_from],
  ];
  for (const [k, v] of Object.entries(summary)) {
    if (
      !["file", "bytes", "dtype", "params", "tensors", "format", "source", "step", "config_from", "seconds"]
        .includes(k)
    ) rows.push([k, v]);
  }
  rows.push(["seconds", summary.seconds.toFixed(2)]);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(16)} ${v}`);
}

if (import.meta.main) await run(main);

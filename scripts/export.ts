/**
 * Exports a training checkpoint (or a lossless export) to inference formats: `deno run -A
 * scripts/export.ts` with no arguments exports the shipped model (model/default/ferry.ckpt) to out/ in
 * every format, each at its default dtype. The pipeline itself is formats/export.ts; the formats come
 * from the registry (formats/mod.ts).
 *
 * @example
 * ```ts
 * // deno run -A scripts/export.ts --input runs/a.ckpt --format dmexp --dtype f16 --output out/
 * ```
 * @module
 */
import {
  cli,
  didYouMean,
  EXIT_REFUSED,
  EXIT_USAGE,
  fail,
  failUsage,
  type Progress,
  progress,
  run,
} from "./cli.ts";
import {
  DEFAULT_INPUT,
  DEFAULT_OUTPUT,
  exportCheckpoint,
  type ExportSummary,
  takesCalibration,
  UnsupportedModelError,
  UsageError,
} from "../formats/export.ts";
import { formatNamed, FORMATS } from "../formats/mod.ts";
import { IMPORTANCE_DTYPES } from "../formats/gguf/gguf.ts";
import { PRESETS } from "../model/config.ts";
import { FormatError } from "../model/error.ts";
import { CALIBRATION_FLAGS, CALIBRATION_FLAGS_HELP, calibrationFlags } from "./calibration-flags.ts";

const HELP = `
Export a training checkpoint to an inference format.

Usage: deno run -A scripts/export.ts [--input CKPT] [--format NAME] [--dtype NAME] [--output PATH] [--json]

With no options: every format of the shipped model (model/default/ferry.ckpt) into out/.

Options:
  --input CKPT    training checkpoint (default ${DEFAULT_INPUT}); its config is read from the
                  CKPT-name.config.toml snapshot beside it. A lossless export is accepted too (dmexp,
                  hf or any Hugging Face Qwen3 folder, GGUF F32/F16/BF16, f64lines), keeping the
                  model's name and step; a lossy one (quantized GGUF, lut4) is refused
  --format NAME   all, ${
  FORMATS.map((f) => f.name).join(", ")
} (default all: every format at its default dtype; one that
                  cannot store the model's shape is skipped, saying why)
  --dtype NAME    weight dtype (default per format; with all, applied where the format stores it); ${
  FORMATS.map((f) => `${f.name}: ${f.dtypes.join("/")} (default ${f.defaultDtype})`).join("; ")
}
  --output PATH   a folder (default ${DEFAULT_OUTPUT}, file named NAME.DTYPE.EXT) or a file path ending in .EXT
  --preset NAME   the shape to assume when the snapshot is missing (${Object.keys(PRESETS).join(", ")});
                  refused when the snapshot exists
${CALIBRATION_FLAGS_HELP}
  --json          print the summary as JSON
  -h, --help      this text

Exit codes: 0 written, 1 refused (missing or corrupt input, a value the dtype cannot hold), 2 usage.
`;

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    input: { type: "string" },
    output: { type: "string" },
    format: { type: "string", default: "all", choices: ["all", ...FORMATS.map((f) => f.name)] },
    dtype: { type: "string" },
    preset: { type: "string", choices: Object.keys(PRESETS) },
    ...CALIBRATION_FLAGS,
    json: { type: "boolean" },
  });
  const calibrate = calibrationFlags(values);
  if (positionals.length > 0) {
    failUsage(`unexpected argument ${positionals[0]} (use --input)`, HELP);
  }
  const names = values.format === "all" ? FORMATS.map((f) => f.name) : [values.format];
  const dtypesOf = (name: string) => formatNamed(name)?.dtypes ?? [];
  if (names.length > 1 && values.output?.match(/\.[a-z0-9]+$/)) {
    fail(`--output ${values.output}: with --format all, give a folder`, EXIT_USAGE);
  }
  if (values.dtype && !names.some((f) => dtypesOf(f).includes(values.dtype!))) {
    const near = didYouMean(values.dtype, [...new Set(names.flatMap(dtypesOf))]);
    fail(
      `--dtype ${values.dtype}: no format stores it (${
        names.map((f) => `${f}: ${dtypesOf(f).join("/")}`).join("; ")
      }${near ? `; did you mean ${near}?` : ""})`,
      EXIT_USAGE,
    );
  }
  // The imatrix is written when a calibrated format runs: lut4, or a GGUF type that weighs its scales.
  const calibrated = names.some((f) =>
    takesCalibration(
      f,
      names.length > 1 && !dtypesOf(f).includes(values.dtype ?? "")
        ? formatNamed(f)!.defaultDtype
        : values.dtype ?? formatNamed(f)!.defaultDtype,
    )
  );
  if (values["imatrix-out"] && !calibrated) {
    fail(
      `--imatrix-out ${values["imatrix-out"]}: nothing here is calibrated (lut4, or gguf with --dtype ${
        [...IMPORTANCE_DTYPES].join("/")
      })`,
      EXIT_USAGE,
    );
  }
  const summaries: ExportSummary[] = [];
  // With every format, one that cannot store this model's shape is skipped with its reason (nothing of
  // it is written); asked for by name, it is refused.
  const skipped: Array<{ format: string; skipped: string }> = [];
  for (const format of names) {
    // With every format, --dtype applies where the format stores it; the others keep their default.
    const dtype = names.length > 1 && !dtypesOf(format).includes(values.dtype ?? "")
      ? undefined
      : values.dtype;
    const bars: Partial<Record<"verify" | "write", { bar: Progress; shown: number }>> = {};
    try {
      summaries.push(
        await exportCheckpoint({
          input: values.input,
          output: values.output,
          format,
          dtype,
          preset: values.preset,
          calibrate,
          onProgress: (phase, done, total) => {
            // Counted in MiB (verify reports bytes, write reports f32 values); under 64 MiB needs no bar.
            const unit = phase === "verify" ? 1 << 20 : (1 << 20) / 4;
            if (total < 64 * unit) return;
            const b = bars[phase] ??= {
              bar: progress(
                phase === "verify" ? "verify checkpoint" : `export ${format}`,
                Math.ceil(total / unit),
                {
                  unit: "MiB",
                },
              ),
              shown: 0,
            };
            // The last tick reaches the bar's total (a part MiB counts as one, as the total does).
            const now = done === total ? Math.ceil(total / unit) : Math.floor(done / unit);
            if (now > b.shown) b.bar.tick(now - b.shown), b.shown = now;
            if (done === total) b.bar.done();
          },
        }),
      );
    } catch (e) {
      if (e instanceof UsageError) fail(e.message, EXIT_USAGE);
      if (e instanceof UnsupportedModelError && names.length > 1) {
        console.error(`${format}: skipped: ${e.message}`);
        skipped.push({ format, skipped: e.message });
        continue;
      }
      if (e instanceof FormatError && e.field === "file" && e.path === DEFAULT_INPUT && !values.input) {
        fail(
          `${e.message} (the default model appears here once it is trained; pass --input to export another checkpoint)`,
          EXIT_REFUSED,
        );
      }
      throw e;
    }
  }
  if (summaries.length === 0) {
    fail(`no format can store this model: ${skipped.map((s) => s.skipped).join("; ")}`);
  }
  if (values.json) {
    console.log(JSON.stringify(names.length === 1 ? summaries[0] : [...summaries, ...skipped], null, 2));
    return;
  }
  if (names.length > 1) {
    const s0 = summaries[0];
    const what = s0.source.startsWith(`${s0.input}@`) ? s0.source : `${s0.input} (weights of ${s0.source})`;
    console.log(
      `exported ${what} (${s0.params.toLocaleString("en-US")} params, config from ${s0.config_from})`,
    );
    for (const s of summaries) {
      console.log(
        `  ${s.format.padEnd(8)} ${s.dtype.padEnd(5)} ${
          s.bytes.toLocaleString("en-US").padStart(12)
        } bytes  ${s.file}`,
      );
    }
    for (const s of skipped) console.log(`  ${s.format.padEnd(8)} skipped (${s.skipped})`);
    return;
  }
  const summary = summaries[0];
  console.log(`wrote ${summary.file}`);
  const rows: Array<[string, unknown]> = [
    ["format", `${summary.format}, ${summary.dtype}`],
    ["bytes", summary.bytes.toLocaleString("en-US")],
    ["params", summary.params.toLocaleString("en-US")],
    ["tensors", summary.tensors],
    ["input", summary.input],
    ["source", summary.source],
    ["config from", summary.config_from],
  ];
  const shown = ["file", "bytes", "dtype", "params", "tensors", "format", "input", "source", "step"];
  for (const [k, v] of Object.entries(summary)) {
    if (![...shown, "config_from", "seconds"].includes(k)) rows.push([k, v]);
  }
  rows.push(["seconds", summary.seconds.toFixed(2)]);
  for (const [k, v] of rows) console.log(`  ${k.padEnd(16)} ${v}`);
}

if (import.meta.main) await run(main);

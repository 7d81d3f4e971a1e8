/**
 * What each export costs against the float source, on the trained model: every format and dtype is
 * written (lut4 calibrated as its export is by default), read back through its own reader, and
 * compared with the checkpoint's f32 weights over the 64 held-out windows (KL divergence first, its
 * mean and 99th percentile over positions as llama.cpp's perplexity tool reports them, then top-1
 * agreement, bits per byte and its gap, logit deltas) and on greedy 64-byte continuations of 8 prompts.
 *
 *   deno run -A scripts/measure.ts                    # the shipped model, every export, natural engines
 *   deno run -A scripts/measure.ts --engine float     # every export on one engine
 *
 * @module
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseKernels, cli, didYouMean, EXIT_USAGE, fail, KERNELS_HELP, progress, run } from "./cli.ts";
import { DEFAULT_INPUT, exportCheckpoint } from "../formats/export.ts";
import { formatNamed, FORMATS } from "../formats/mod.ts";
import { readCheckpoint } from "../formats/checkpoint.ts";
import { requireInput } from "../formats/io.ts";
import { engineKinds, loadEngine } from "../engines/mod.ts";
import { evalWindows, loadBrown } from "../model/corpus.ts";
import { createFloatEngine } from "../engines/float.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "./engine-flags.ts";
import { compareLogits, percentile, profileEngine } from "../measure/metrics.ts";
import { CALIBRATION, lut4Calibrator } from "../measure/calibrate.ts";

/** The prompts whose greedy continuations must match. */
export const PROMPTS = [
  "The jury said",
  "In the beginning",
  "She walked into the room and",
  "The government of the United States",
  "It was a cold night",
  "Scientists have found that",
  "He looked at me and said",
  "The price of",
];

const HELP = `
Usage: deno run -A scripts/measure.ts [CHECKPOINT] [options]

Exports the checkpoint to every format and dtype, loads each on an engine (the format's own, or
--engine), and compares it with the checkpoint's f32 weights on the float engine: KL divergence
(mean and 99th percentile over positions), top-1 agreement over the held-out windows, held-out bits
per byte and its gap to the source, whether the greedy ${64}-byte continuations of ${PROMPTS.length} prompts
are identical, and max and mean |logit delta|.

Arguments:
  CHECKPOINT        a training checkpoint            [${DEFAULT_INPUT}]
Options:
  --windows N       held-out windows of 256 bytes    [64]
  --prompts N       the first N greedy prompts       [${PROMPTS.length}]
  --only LIST       comma-separated format:dtype pairs (e.g. dmexp:bf16,gguf:q4_0)
  --calibrate N     lut4's calibration windows, as scripts/export.ts (0: none) [${CALIBRATION.windows}]
${KERNELS_HELP}
${ENGINE_FLAGS_HELP}
  --engine NAME     run every export on this engine (${engineKinds().join(", ")}) [each format's own]
  --json            machine-readable output
  -h, --help        this text
`;

const { values: a, positionals } = cli(HELP, {
  windows: { type: "string", default: "64" },
  prompts: { type: "string", default: String(PROMPTS.length) },
  only: { type: "string" },
  calibrate: { type: "string", default: String(CALIBRATION.windows) },
  kernels: { type: "string", default: "wasm", choices: ["wasm", "ref"] },
  engine: { type: "string", choices: engineKinds() },
  json: { type: "boolean", default: false },
  ...ENGINE_FLAGS,
});

/** One row of the table. */
interface Row {
  format: string;
  dtype: string;
  engine: string;
  bytes: number;
  max_abs_delta: number;
  mean_abs_delta: number;
  top1: number;
  mean_kl: number;
  /** 99th percentile of the per-position KL over every window. */
  kl_p99: number;
  bpb: number;
  bpb_gap: number;
  greedy_identical: number;
}

await run(async () => {
  const kernels = chooseKernels(a.kernels);
  const input = positionals[0] ?? DEFAULT_INPUT;
  const count = Number(a.windows);
  if (!Number.isInteger(count) || count < 1) fail("--windows expects a positive integer", EXIT_USAGE);
  const promptCount = Number(a.prompts);
  if (!Number.isInteger(promptCount) || promptCount < 1 || promptCount > PROMPTS.length) {
    fail(`--prompts expects an integer from 1 to ${PROMPTS.length}`, EXIT_USAGE);
  }
  const variants = a.only
    ? a.only.split(",").map((p) => p.split(":") as [string, string])
    : FORMATS.flatMap((f) => f.dtypes.map((d) => [f.name, d] as [string, string]));
  const pairs = FORMATS.flatMap((f) => f.dtypes.map((d) => `${f.name}:${d}`));
  for (const [f, d] of variants) {
    if (!formatNamed(f)?.dtypes.includes(d)) {
      const near = didYouMean(`${f}:${d}`, pairs);
      fail(
        `--only ${f}:${d}: not a format and dtype ferry writes${near ? ` (did you mean ${near}?)` : ""}`,
        EXIT_USAGE,
      );
    }
  }
  const calWindows = Number(a.calibrate);
  if (!Number.isSafeInteger(calWindows) || calWindows < 0) {
    fail("--calibrate expects a whole number of windows (0: none)", EXIT_USAGE);
  }
  const calibrate = calWindows > 0 ? lut4Calibrator(calWindows) : undefined;
  requireInput(input, "file");
  const ck = await readCheckpoint(input, { sections: ["model"] });
  const source = createFloatEngine(ck.config, ck.model, input, { frozen: true, kernels, ...engineFlags(a) });
  const windows = evalWindows((await loadBrown()).heldOut, count);
  const prompts = PROMPTS.slice(0, promptCount).map((p) => source.tokenizer.encode(p, { bos: true }));
  const V = ck.config.vocab_size;
  const bar = progress("measure", (variants.length + 1) * (windows.length + prompts.length), {
    unit: "eval",
  });
  const reference = await profileEngine(source, windows, prompts, 64, () => bar.tick());
  const dir = mkdtempSync(join(tmpdir(), "ferry-measure-"));
  const rows: Row[] = [];
  try {
    for (const [format, dtype] of variants) {
      const s = await exportCheckpoint({ input, output: dir, format, dtype, calibrate });
      const engine = await loadEngine(s.file, a.engine, {
        kernels,
        ...engineFlags(a),
        onNote: (line) => console.error(line),
      });
      const got = await profileEngine(engine, windows, prompts, 64, () => bar.tick());
      engine.dispose?.();
      let maxAbs = 0, sumAbs = 0, top1 = 0, kl = 0;
      const kls: number[] = [];
      got.logits.forEach((l, i) => {
        const c = compareLogits(reference.logits[i], l, V);
        maxAbs = Math.max(maxAbs, c.maxAbsDelta);
        sumAbs += c.meanAbsDelta, top1 += c.top1Agreement, kl += c.meanKL;
        kls.push(...c.kl);
      });
      rows.push({
        format,
        dtype,
        engine: engine.kind,
        bytes: s.bytes,
        max_abs_delta: maxAbs,
        mean_abs_delta: sumAbs / windows.length,
        top1: top1 / windows.length,
        mean_kl: kl / windows.length,
        kl_p99: percentile(kls, 0.99),
        bpb: got.bpb,
        bpb_gap: got.bpb - reference.bpb,
        greedy_identical: got.greedy.filter((g, i) => g === reference.greedy[i]).length,
      });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  bar.done();
  const result = {
    checkpoint: input,
    step: ck.step,
    windows: count,
    prompts: prompts.length,
    source_bpb: reference.bpb,
    rows,
  };
  if (a.json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(
    `${input} (step ${ck.step}): source held-out bits per byte ${
      reference.bpb.toFixed(4)
    } over ${count} windows`,
  );
  const engines = new Set(rows.map((r) => r.engine));
  const withEngine = engines.size > 1 || (engines.size === 1 && !engines.has("float"));
  console.log(
    `| format | dtype |${
      withEngine ? " engine |" : ""
    } bytes | mean KL (nats) | KL p99 | top-1 | bits/byte | gap | greedy identical | max abs Δlogit | mean abs Δlogit |`,
  );
  console.log(`|---|---|${withEngine ? "---|" : ""}---:|---:|---:|---:|---:|---:|---:|---:|---:|`);
  const e2 = (x: number) => x.toExponential(2);
  for (const r of rows) {
    const cells = [
      r.bytes.toLocaleString("en-US"),
      e2(r.mean_kl),
      e2(r.kl_p99),
      `${(100 * r.top1).toFixed(2)}%`,
      r.bpb.toFixed(4),
      `${r.bpb_gap >= 0 ? "+" : ""}${r.bpb_gap.toFixed(4)}`,
      `${r.greedy_identical}/${prompts.length}`,
      e2(r.max_abs_delta),
      e2(r.mean_abs_delta),
    ];
    console.log(`| ${r.format} | ${r.dtype} |${withEngine ? ` ${r.engine} |` : ""} ${cells.join(" | ")} |`);
  }
});

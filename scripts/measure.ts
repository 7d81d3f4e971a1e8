/**
 * What each export costs against the float source: every format and dtype is written from the source
 * (lut4 calibrated as its export is by default), read back through its own reader, and compared with
 * the source on the float engine over the 64 held-out windows (KL divergence first, its mean and 99th
 * percentile over positions as llama.cpp's perplexity tool reports them, then top-1 agreement, bits per
 * byte and its gap, logit deltas) and on greedy 64-token continuations of 8 prompts. The source is a
 * training checkpoint or any lossless export (a Hugging Face Qwen3 folder, dmexp, ...): a model with
 * its own tokenizer is scored over its own tokens of the same 256-byte windows (measure/metrics.ts
 * `scoredWindow`), bits per byte staying bits over the bytes those tokens cover.
 *
 *   deno run -A scripts/measure.ts                    # the shipped model, every export, natural engines
 *   deno run -A scripts/measure.ts --engine float     # every export on one engine
 *   bun scripts/measure.ts ~/Qwen3-0.6B --only lut4:q4,dmexp:bf16   # a Hugging Face folder
 *
 * @module
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chooseKernels, cli, didYouMean, EXIT_USAGE, fail, KERNELS_HELP, progress, run } from "./cli.ts";
import { DEFAULT_INPUT, exportCheckpoint } from "../formats/export.ts";
import { formatNamed, formatOf, FORMATS, refuseLossy } from "../formats/mod.ts";
import { isCheckpointFile, readCheckpoint } from "../formats/checkpoint/checkpoint.ts";
import { requireInput } from "../formats/io.ts";
import { engineKinds, type EngineLoadOptions, loadEngine } from "../engines/mod.ts";
import type { Engine } from "../model/engine.ts";
import { evalWindows, loadBrown } from "../model/corpus.ts";
import { createFloatEngine } from "../engines/float.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "./engine-flags.ts";
import {
  compareLogits,
  type EngineProfile,
  percentile,
  profileEngine,
  scoredWindow,
} from "../measure/metrics.ts";
import { CALIBRATION_FLAGS, CALIBRATION_FLAGS_HELP, calibrationFlags } from "./calibration-flags.ts";

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
Usage: deno run -A scripts/measure.ts [SOURCE] [options]

Exports the source to every format and dtype, loads each on an engine (the format's own, or
--engine), and compares it with the source on the float engine: KL divergence (mean and 99th
percentile over positions), top-1 agreement over the held-out windows, held-out bits per byte and
its gap to the source, whether the greedy ${64}-token continuations of ${PROMPTS.length} prompts are identical,
and max and mean |logit delta|. A model with its own tokenizer is scored over its own tokens of the
same windows (no BOS: the first token's bytes are left out); bits per byte = bits / bytes covered.

Arguments:
  SOURCE            a training checkpoint, a Hugging Face folder or a lossless export [${DEFAULT_INPUT}]
Options:
  --windows N       held-out windows of 256 bytes of text [64]
  --prompts N       the first N greedy prompts       [${PROMPTS.length}]
  --only LIST       comma-separated format:dtype pairs (e.g. dmexp:bf16,gguf:q4_0)
${CALIBRATION_FLAGS_HELP}
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
  ...CALIBRATION_FLAGS,
  kernels: { type: "string", default: "wasm", choices: ["wasm", "ref"] },
  engine: { type: "string", choices: engineKinds() },
  json: { type: "boolean", default: false },
  ...ENGINE_FLAGS,
});

/**
 * The reference: a training checkpoint's f32 weights on the float engine (its step known), or any
 * lossless export (a Hugging Face folder, dmexp, hf, GGUF F32/F16/BF16, f64lines) read through its
 * format onto the float engine with the tokenizer it carries. A lossy export is refused: every variant
 * is exported from the source, and export refuses to round a rounding again.
 */
async function openSource(
  input: string,
  options: EngineLoadOptions,
): Promise<{ engine: Engine; step?: number }> {
  requireInput(input);
  if (await isCheckpointFile(input)) {
    const ck = await readCheckpoint(input, { sections: ["model"] });
    return {
      engine: createFloatEngine(ck.config, ck.model, input, {
        frozen: true,
        ...options,
        specials: await options.specials,
      }),
      step: ck.step,
    };
  }
  const format = formatOf(input);
  await refuseLossy(
    input,
    format,
    "cannot be measured against: measure the checkpoint or a lossless export it came from",
  );
  return { engine: await loadEngine(input, "float", options) };
}

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
  const calibrate = calibrationFlags(a);
  const loadOptions = { kernels, ...engineFlags(a), onNote: (line: string) => console.error(line) };
  // The reference is dropped once profiled, so a large model's reference and a variant are never both held.
  let source: Engine | undefined, step: number | undefined;
  ({ engine: source, step } = await openSource(input, loadOptions));
  // The held-out text through the source's tokenizer, once: every variant is scored on these tokens.
  const tok = source.tokenizer;
  const windows = evalWindows((await loadBrown()).heldOut, count).map((w) => scoredWindow(tok, w));
  const prompts = PROMPTS.slice(0, promptCount).map((p) => tok.encode(p, { bos: true }));
  const V = source.config.vocab_size;
  const bar = progress("measure", (variants.length + 1) * (windows.length + prompts.length), {
    unit: "eval",
  });
  const dir = mkdtempSync(join(tmpdir(), "ferry-measure-"));
  const rows: Row[] = [];
  let reference: EngineProfile;
  try {
    // The source's logits wait on disk, one file a window: a real vocabulary makes them tens of MB each.
    const refFile = (i: number) => join(dir, `reference-${i}.f32`);
    reference = await profileEngine(source, windows, prompts, 64, () => bar.tick(), (i, l) => {
      writeFileSync(refFile(i), new Uint8Array(l.buffer, l.byteOffset, l.byteLength));
    });
    source.dispose?.();
    source = undefined;
    for (const [format, dtype] of variants) {
      const s = await exportCheckpoint({ input, output: dir, format, dtype, calibrate });
      const engine = await loadEngine(s.file, a.engine, loadOptions);
      if (engine.tokenizer.kind !== tok.kind || engine.tokenizer.size !== tok.size) {
        fail(
          `${s.file}: tokenizer: a ${engine.tokenizer.kind} tokenizer of ${engine.tokenizer.size} ids, ` +
            `expected the source's (${tok.kind}, ${tok.size} ids)`,
        );
      }
      let maxAbs = 0, sumAbs = 0, top1 = 0, kl = 0;
      const kls: number[] = [];
      const got = await profileEngine(engine, windows, prompts, 64, () => bar.tick(), (i, l) => {
        const b = readFileSync(refFile(i));
        const ref = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
        const c = compareLogits(ref, l, V);
        maxAbs = Math.max(maxAbs, c.maxAbsDelta);
        sumAbs += c.meanAbsDelta, top1 += c.top1Agreement, kl += c.meanKL;
        kls.push(...c.kl);
      });
      engine.dispose?.();
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
      rmSync(s.file, { recursive: true, force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  bar.done();
  const result = {
    checkpoint: input,
    step,
    tokenizer: tok.kind,
    windows: count,
    /** Tokens scored and the UTF-8 bytes they cover, over every window (a byte model: the same). */
    scored_tokens: windows.reduce((n, w) => n + w.targets.length, 0),
    scored_bytes: windows.reduce((n, w) => n + w.bytes, 0),
    prompts: prompts.length,
    source_bpb: reference.bpb,
    rows,
  };
  if (a.json) {
    console.log(JSON.stringify(result, null, 2));
    return;
  }
  console.log(
    `${input}${step === undefined ? "" : ` (step ${step})`}: source held-out bits per byte ${
      reference.bpb.toFixed(4)
    } over ${count} windows${
      tok.kind === "byte" ? "" : ` (${result.scored_tokens} ${tok.kind} tokens, ${result.scored_bytes} bytes)`
    }`,
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

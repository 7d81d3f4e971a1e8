/**
 * The lut4 export gap on a checkpoint, split into its two parts: the weights' rounding (the float model
 * on the lut4 file's dequantized weights) and the integer engine's own arithmetic (the integer engine
 * on that file), over the same held-out windows `scripts/eval.ts` uses; the rounding split again by
 * tensor class; and the integer engine against the float model on the same dequantized weights:
 * |Δlogit| and greedy identity over 8 prompts × 64 tokens. With `--llama` (Bun: node-llama-cpp is a
 * Node-API addon) llama.cpp's own Q4_0 gap on the same windows is measured beside it. The measurement
 * is measure/gap.ts; this is its command line.
 *
 *   bun scripts/gap.ts [CHECKPOINT] [--windows N] [--head tied|separate] [--llama] [--json]
 *   bun scripts/gap.ts ~/Qwen3-0.6B --windows 8    # a Hugging Face folder, over its own tokens
 *
 * @module
 */
import { cli, EXIT_USAGE, fail, progress, run } from "./cli.ts";
import { isCheckpointFile, readCheckpoint } from "../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../formats/checkpoint/parts.ts";
import { requireInput } from "../formats/io.ts";
import { formatOf, refuseLossy } from "../formats/mod.ts";
import type { ModelConfig } from "../model/config.ts";
import { loadTokenizer } from "../model/hf-tokenizer.ts";
import type { Tensor } from "../model/tensor.ts";
import type { Tokenizer } from "../model/tokenizer-types.ts";
import type { HeadMode } from "../quantize/lut4-quantize.ts";
import { EVAL_WINDOWS, evalWindows, loadBrown, WINDOW_BYTES } from "../model/corpus.ts";
import { lut4Gap, lut4GapSteps } from "../measure/gap.ts";

const HELP = `
Usage: bun scripts/gap.ts [SOURCE] [options]

Measures what the lut4 export costs on a checkpoint or lossless export (a model with its own
tokenizer over its own tokens of the same windows, as scripts/measure.ts): bits per byte of the f32 model, of the float
model on the lut4 file's dequantized weights, and of the integer engine, over the held-out windows
scripts/eval.ts uses; the rounding split by tensor class; |Δlogit| and greedy identity between the
integer engine and the float model on the same weights (8 prompts x 64 tokens).

Arguments:
  SOURCE              a training checkpoint, a Hugging Face folder or a lossless export
                      [model/default/ferry.ckpt]
Options:
  --windows N         held-out windows of ${WINDOW_BYTES} bytes of text [${EVAL_WINDOWS}]
  --head H            tied | separate: how the head is stored  [tied]
  --llama             also measure llama.cpp's own Q4_0 gap (Bun only)
  --json              machine-readable output
  -h, --help          this text
`;

if (import.meta.main) {
  const { values: a, positionals } = cli(HELP, {
    windows: { type: "string", default: String(EVAL_WINDOWS) },
    head: { type: "string", default: "tied", choices: ["tied", "separate"] },
    llama: { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  await run(async () => {
    const path = positionals[0] ?? DEFAULT_INPUT;
    const count = Number(a.windows);
    if (!Number.isInteger(count) || count < 1) fail("--windows expects a positive integer", EXIT_USAGE);
    const src = await readSource(path);
    if (a.llama && src.tokenizer.kind !== "byte") {
      fail("--llama measures byte models only (the Q4_0 GGUF it writes carries no tokenizer)", EXIT_USAGE);
    }
    const { heldOut } = await loadBrown();
    const windows = evalWindows(heldOut, count);
    const bar = progress("gap", lut4GapSteps(windows.length), { unit: "window" });
    const result = await lut4Gap(src.config, src.tensors, {
      source: path,
      tokenizer: src.tokenizer,
      windows,
      heldOut,
      head: a.head as HeadMode,
      llama: a.llama,
      onWindow: () => bar.tick(),
    });
    bar.done();
    if (a.json) console.log(JSON.stringify(result, null, 2));
    else printTable(result);
  });
}

/**
 * The float weights to measure: a training checkpoint's model section, or any lossless export (a Hugging
 * Face folder, dmexp, hf, GGUF F32/F16/BF16, f64lines) through its format, with the tokenizer it carries.
 * A lossy export is refused: its rounding would be rounded again.
 */
async function readSource(
  path: string,
): Promise<{ config: ModelConfig; tensors: Tensor[]; tokenizer: Tokenizer }> {
  requireInput(path);
  if (await isCheckpointFile(path)) {
    const ck = await readCheckpoint(path, { sections: ["model"] });
    return { config: ck.config, tensors: ck.model!, tokenizer: loadTokenizer(undefined, path) };
  }
  const format = formatOf(path);
  await refuseLossy(path, format, "cannot be measured: its rounding would be rounded again");
  const { config, tensors, tokenizer } = await format.read(path);
  return { config, tensors, tokenizer: loadTokenizer(tokenizer, path) };
}

function printTable(r: Awaited<ReturnType<typeof lut4Gap>>): void {
  const f = (x: number) => x.toFixed(4), g = (x: number) => (x >= 0 ? "+" : "") + x.toFixed(6);
  console.log(
    `${r.checkpoint}: lut4 (${r.head} head, ${
      r.file_bytes.toLocaleString("en-US")
    } bytes), ${r.windows} held-out windows of ${r.window_bytes} bytes${
      r.tokenizer === "byte"
        ? ""
        : ` (${r.scored_tokens} ${r.tokenizer} tokens scored, over ${r.scored_bytes} bytes)`
    }`,
  );
  console.log(`| measure | bits/byte | gap vs f32 |`);
  console.log(`|---|---:|---:|`);
  console.log(`| f32 float model | ${f(r.bpb.f32)} | |`);
  console.log(
    `| float model, lut4 weights (rounding) | ${f(r.bpb.lut4_dequantized_float)} | ${
      g(r.gap.weight_rounding)
    } |`,
  );
  console.log(`| integer engine, lut4 file | ${f(r.bpb.lut4_integer_engine)} | ${g(r.gap.total)} |`);
  if (r.llama_q4_0) {
    console.log(`| llama.cpp Q4_0 (node-llama-cpp) | ${f(r.llama_q4_0.bpb)} | ${g(r.llama_q4_0.gap)} |`);
  }
  console.log(
    `\nengine arithmetic (integer − float on the same weights): ${g(r.gap.engine_arithmetic)} bits/byte`,
  );
  for (const [k, v] of Object.entries(r.rounding_by_class)) {
    console.log(`rounding of ${k} alone: ${g(v as number)} bits/byte`);
  }
  const c = r.engine_vs_float_same_weights;
  console.log(
    `integer vs float on the same weights, ${c.prompts} prompts x 64 tokens: max |Δlogit| ${
      c.maxAbsDelta.toExponential(2)
    }, mean ${
      c.meanAbsDelta.toExponential(2)
    }, greedy identical ${c.greedySame}/${c.prompts} (mean common prefix ${c.meanPrefix.toFixed(1)})`,
  );
  console.log(
    `\nrounding error per stored tensor (relative RMS, RMS, max abs), against the gain-folded float values:`,
  );
  for (const e of r.rounding_per_tensor) {
    console.log(
      `  ${e.name.padEnd(18)} ${e.kind.padEnd(6)} ${e.rel_rmse.toFixed(4)}  ${e.rmse.toExponential(2)}  ${
        e.max_abs_error.toExponential(2)
      }`,
    );
  }
}

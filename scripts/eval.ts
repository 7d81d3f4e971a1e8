/**
 * Held-out bits per byte of a training checkpoint over the fixed evaluation windows (64 windows of
 * 256 bytes spread evenly through the held-out Brown documents), plus a greedy continuation.
 *
 *   deno run -A scripts/eval.ts model/default/ferry.ckpt
 *
 * @module
 */
import { chooseKernels, cli, EXIT_USAGE, fail, KERNELS_HELP, progress, run } from "./cli.ts";
import { EVAL_WINDOWS, evalWindows, loadBrown, WINDOW_BYTES } from "../model/corpus.ts";
import { bitsPerByte } from "../model/measure.ts";
import { buildModel } from "../model/qwen3.ts";
import { generate } from "../model/sample.ts";
import { decode, encode } from "../model/tokenizer.ts";
import { readCheckpoint } from "../formats/checkpoint.ts";

const HELP = `
Usage: deno run -A scripts/eval.ts [CHECKPOINT] [options]

Reports held-out bits per byte over ${EVAL_WINDOWS} windows of ${WINDOW_BYTES} bytes spread evenly through
the held-out Brown documents (the same windows every ferry measurement uses), and a greedy
continuation of the prompt.

Arguments:
  CHECKPOINT          a training checkpoint          [model/default/ferry.ckpt]
Options:
  --weights W         model | ema                    [model]
  --windows N         number of windows              [${EVAL_WINDOWS}]
  --prompt TEXT       prompt for the continuation    ["The jury said"]
  --tokens N          bytes to continue              [64]
${KERNELS_HELP}
  --json              machine-readable output
  -h, --help          this text
`;

const { values: a, positionals } = cli(HELP, {
  weights: { type: "string", default: "model" },
  windows: { type: "string", default: String(EVAL_WINDOWS) },
  prompt: { type: "string", default: "The jury said" },
  tokens: { type: "string", default: "64" },
  kernels: { type: "string", default: "wasm" },
  json: { type: "boolean", default: false },
});

await run(async () => {
  chooseKernels(a.kernels);
  const path = positionals[0] ?? "model/default/ferry.ckpt";
  if (a.weights !== "model" && a.weights !== "ema") fail(`--weights must be model or ema, got ${a.weights}`, EXIT_USAGE);
  const count = Number(a.windows);
  if (!Number.isInteger(count) || count < 1) fail(`--windows expects a positive integer`, EXIT_USAGE);
  const run = await readCheckpoint(path, { sections: [a.weights as "model" | "ema"] });
  const tensors = a.weights === "ema" ? run.ema : run.model;
  if (!tensors) fail(`${path}: has no ${a.weights} section`);
  const model = buildModel(run.config, tensors!, path);
  const { heldOut } = await loadBrown();
  const windows = evalWindows(heldOut, count);
  const bar = progress("eval", windows.length, { unit: "window" });
  const bpb = bitsPerByte(model, windows, () => bar.tick());
  bar.done();
  const cont = decode(generate(model, encode(a.prompt!, { bos: true }), { maxTokens: Number(a.tokens) }));
  const result = { file: path, weights: a.weights, step: run.step, windows: count, window_bytes: WINDOW_BYTES, heldout_bpb: bpb, prompt: a.prompt, continuation: cont };
  if (a.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(`${path} (${a.weights} weights, step ${run.step})`);
    console.log(`held-out bits per byte: ${bpb.toFixed(4)} over ${count} windows of ${WINDOW_BYTES} bytes`);
    console.log(`greedy: ${JSON.stringify(a.prompt + cont)}`);
  }
});

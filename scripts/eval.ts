/**
 * Held-out bits per byte of a training checkpoint or of any export, on any engine, over the fixed
 * evaluation windows (64 windows of 256 bytes spread evenly through the held-out Brown documents),
 * plus a greedy continuation.
 *
 *   deno run -A scripts/eval.ts model/default/ferry.ckpt
 *   deno run -A scripts/eval.ts out/ferry.q8_0.gguf --engine float
 *
 * @module
 */
import { chooseKernels, cli, EXIT_USAGE, fail, KERNELS_HELP, progress, run } from "./cli.ts";
import { isCheckpointFile, readCheckpoint } from "../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../formats/checkpoint/parts.ts";
import { requireInput } from "../formats/io.ts";
import { engineKinds, loadEngine } from "../engines/mod.ts";
import { EVAL_WINDOWS, evalWindows, loadBrown, WINDOW_BYTES } from "../model/corpus.ts";
import type { Engine } from "../model/engine.ts";
import { createFloatEngine } from "../engines/float.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "./engine-flags.ts";
import { generateAll } from "../model/generate.ts";
import { bitsPerByte } from "../measure/metrics.ts";

const HELP = `
Usage: deno run -A scripts/eval.ts [FILE] [options]

Reports held-out bits per byte over ${EVAL_WINDOWS} windows of ${WINDOW_BYTES} bytes spread evenly through
the held-out Brown documents (the same windows every ferry measurement uses), and a greedy
continuation of the prompt.

Arguments:
  FILE                a training checkpoint or any export    [model/default/ferry.ckpt]
Options:
  --weights W         model | ema (checkpoints only)          [model]
  --engine NAME       ${engineKinds().join(", ")}        [the format's own; float for a checkpoint]
  --windows N         number of windows                      [${EVAL_WINDOWS}]
  --prompt TEXT       prompt for the continuation            ["The jury said"]
  --tokens N          bytes to continue                      [64]
${KERNELS_HELP}
${ENGINE_FLAGS_HELP}
  --json              machine-readable output
  -h, --help          this text
`;

const { values: a, positionals } = cli(HELP, {
  weights: { type: "string", default: "model", choices: ["model", "ema"] },
  engine: { type: "string", choices: engineKinds() },
  windows: { type: "string", default: String(EVAL_WINDOWS) },
  prompt: { type: "string", default: "The jury said" },
  tokens: { type: "string", default: "64" },
  kernels: { type: "string", default: "wasm", choices: ["wasm", "ref"] },
  json: { type: "boolean", default: false },
  ...ENGINE_FLAGS,
});

await run(async () => {
  const kernels = chooseKernels(a.kernels);
  const path = positionals[0] ?? DEFAULT_INPUT;
  const count = Number(a.windows);
  if (!Number.isInteger(count) || count < 1) fail(`--windows expects a positive integer`, EXIT_USAGE);
  let engine: Engine, step: number | null = null;
  requireInput(path); // a checkpoint or any export: the one sentence for a path that is not there
  if (await isCheckpointFile(path)) {
    // A checkpoint holds float training weights: they run on the float engine, as the trainer ran them.
    if (a.engine !== undefined && a.engine !== "float") {
      fail(`--engine ${a.engine}: a checkpoint runs on float; export it first`, EXIT_USAGE);
    }
    const ck = await readCheckpoint(path, { sections: [a.weights as "model" | "ema"] });
    const tensors = a.weights === "ema" ? ck.ema : ck.model;
    if (!tensors) fail(`${path}: has no ${a.weights} section`);
    engine = createFloatEngine(ck.config, tensors!, path, { frozen: true, kernels, ...engineFlags(a) });
    step = ck.step;
  } else {
    if (a.weights !== "model") fail(`--weights ${a.weights}: an export holds one set of weights`, EXIT_USAGE);
    engine = await loadEngine(path, a.engine, {
      kernels,
      ...engineFlags(a),
      onNote: (line) => console.error(line),
    });
  }
  const { heldOut } = await loadBrown();
  const windows = evalWindows(heldOut, count);
  const bar = progress("eval", windows.length, { unit: "window" });
  const bpb = await bitsPerByte(engine, windows, () => bar.tick());
  bar.done();
  const tok = engine.tokenizer;
  const cont = tok.decode(
    await generateAll(engine, tok.encode(a.prompt!, { bos: true, specials: true }), {
      maxTokens: Number(a.tokens),
    }),
  );
  const result = {
    file: path,
    weights: a.weights,
    engine: engine.kind,
    step,
    windows: count,
    window_bytes: WINDOW_BYTES,
    heldout_bpb: bpb,
    prompt: a.prompt,
    continuation: cont,
  };
  if (a.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(
      `${path} (${step === null ? `${engine.kind} engine` : `${a.weights} weights, step ${step}`})`,
    );
    console.log(`held-out bits per byte: ${bpb.toFixed(4)} over ${count} windows of ${WINDOW_BYTES} bytes`);
    console.log(`greedy: ${JSON.stringify(a.prompt + cont)}`);
  }
});

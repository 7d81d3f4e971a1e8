/**
 * The lut4 export gap on a checkpoint, split into its two parts: the weights' rounding (the float model
 * on the lut4 file's dequantized weights) and the integer engine's own arithmetic (the integer engine
 * on that file), over the same held-out windows `scripts/eval.ts` uses; the rounding split again by
 * tensor class; and the integer engine against the float model on the same dequantized weights:
 * |Δlogit| and greedy identity over 8 prompts × 64 tokens. With `--llama` (Bun: node-llama-cpp is a
 * Node-API addon) llama.cpp's own Q4_0 gap on the same windows is measured beside it.
 *
 *   bun scripts/gap.ts [CHECKPOINT] [--windows N] [--head tied|separate] [--llama] [--json]
 *
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cli, EXIT_USAGE, fail, progress, run } from "./cli.ts";
import { readCheckpoint } from "../formats/checkpoint.ts";
import { dequantizeLut4, readLut4, writeLut4 } from "../formats/lut4.ts";
import { foldedFloat, type HeadMode, quantizeModel } from "../formats/lut4-quantize.ts";
import { EVAL_WINDOWS, evalWindows, loadBrown, WINDOW_BYTES } from "../model/corpus.ts";
import { bitsPerByte, windowBits, windowInputs } from "../measure/metrics.ts";
import { buildModel, createCache, forward, type Model } from "../model/qwen3.ts";
import type { Tensor } from "../model/tensor.ts";
import { intEngineFromFile } from "../engines/int/engine.ts";
import type { Engine } from "../model/engine.ts";

const HELP = `
Usage: bun scripts/gap.ts [CHECKPOINT] [options]

Measures what the lut4 export costs on a checkpoint: bits per byte of the f32 model, of the float
model on the lut4 file's dequantized weights, and of the integer engine, over the held-out windows
scripts/eval.ts uses; the rounding split by tensor class; |Δlogit| and greedy identity between the
integer engine and the float model on the same weights (8 prompts x 64 tokens).

Arguments:
  CHECKPOINT          a training checkpoint                 [model/default/ferry.ckpt]
Options:
  --windows N         held-out windows of ${WINDOW_BYTES} bytes         [${EVAL_WINDOWS}]
  --head H            tied | separate: how the head is stored  [tied]
  --llama             also measure llama.cpp's own Q4_0 gap (Bun only)
  --json              machine-readable output
  -h, --help          this text
`;

/** Tensor classes the rounding gap is split by. */
const CLASSES: Record<string, (name: string) => boolean> = {
  "embedding and head": (n) =>
    n === "model.embed_tokens.weight" || n === "lm_head.weight" || n === "model.norm.weight",
  attention: (n) => n.includes(".self_attn."),
  mlp: (n) => n.includes(".mlp."),
};

/** Bits per byte of an engine over the windows (each window from a fresh session). */
export async function engineBitsPerByte(
  engine: Engine,
  windows: Uint8Array[],
  onWindow?: () => void,
): Promise<number> {
  let bits = 0, bytes = 0;
  for (const w of windows) {
    const s = engine.start();
    const logits = await s.feed(windowInputs(w), "all");
    bits += windowBits(logits, w, engine.config.vocab_size);
    bytes += w.length;
    onWindow?.();
  }
  return bits / bytes;
}

/** The prompts of the greedy comparison: 8 held-out snippets of 24 bytes, BOS first. */
export function gapPrompts(heldOut: Uint8Array, count = 8, bytes = 24): number[][] {
  return evalWindows(heldOut, count, bytes).map((w) => [256, ...w]);
}

/** |Δlogit| along the float model's greedy path, and how many greedy continuations are identical. */
export async function compareGreedy(engine: Engine, model: Model, prompts: number[][], tokens: number) {
  let maxAbs = 0, sumAbs = 0, count = 0, same = 0, prefix = 0;
  const V = model.config.vocab_size;
  for (const p of prompts) {
    // The float model's greedy path.
    const cache = createCache(model);
    let logits = forward(model, cache, p).subarray((p.length - 1) * V);
    const path: number[] = [];
    for (let i = 0; i < tokens; i++) {
      let best = 0;
      for (let j = 1; j < V; j++) if (logits[j] > logits[best]) best = j;
      path.push(best);
      logits = forward(model, cache, [best]);
    }
    // The integer engine fed the same tokens: logit differences position by position.
    const ref = forward(model, createCache(model), [...p, ...path.slice(0, -1)]);
    const got = await engine.start().feed([...p, ...path.slice(0, -1)], "all");
    for (let i = (p.length - 1) * V; i < ref.length; i++) {
      const d = Math.abs(ref[i] - got[i]);
      if (d > maxAbs) maxAbs = d;
      sumAbs += d;
      count++;
    }
    // The integer engine's own greedy continuation.
    const s = engine.start();
    await s.feed(p, "none");
    const mine: number[] = [];
    for (let i = 0; i < tokens; i++) {
      const id = s.pick();
      mine.push(id);
      if (i + 1 < tokens) await s.feed([id], "none");
    }
    let k = 0;
    while (k < tokens && mine[k] === path[k]) k++;
    prefix += k;
    if (k === tokens) same++;
  }
  return {
    maxAbsDelta: maxAbs,
    meanAbsDelta: sumAbs / count,
    greedySame: same,
    prompts: prompts.length,
    meanPrefix: prefix / prompts.length,
  };
}

async function llamaQ4Gap(config: Model["config"], tensors: Tensor[], windows: Uint8Array[], dir: string) {
  const { writeGguf } = await import("../formats/gguf.ts");
  const { openLlamaGguf } = await import("../measure/llama-cpp.ts");
  const path = join(dir, "q4_0.gguf");
  await writeGguf(path, tensors, config, { type: "q4_0" });
  const lm = await openLlamaGguf(path, { contextSize: 512 });
  let bits = 0, bytes = 0;
  for (const w of windows) {
    const probs = await lm.nextTokenProbs(windowInputs(w));
    for (let t = 0; t < w.length; t++) bits -= Math.log2(probs[t][w[t]]);
    bytes += w.length;
  }
  await lm.close();
  return bits / bytes;
}

if (import.meta.main) {
  const { values: a, positionals } = cli(HELP, {
    windows: { type: "string", default: String(EVAL_WINDOWS) },
    head: { type: "string", default: "tied" },
    llama: { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  await run(async () => {
    const path = positionals[0] ?? "model/default/ferry.ckpt";
    const count = Number(a.windows);
    if (!Number.isInteger(count) || count < 1) fail("--windows expects a positive integer", EXIT_USAGE);
    if (a.head !== "tied" && a.head !== "separate") fail("--head must be tied or separate", EXIT_USAGE);
    const head = a.head as HeadMode;
    const ck = await readCheckpoint(path, { sections: ["model"] });
    const config = ck.config, tensors = ck.model!;
    const { heldOut } = await loadBrown();
    const windows = evalWindows(heldOut, count);
    const dir = await mkdtemp(join(tmpdir(), "ferry-gap-"));
    try {
      const file = join(dir, "model.lut4");
      const { weights, errors } = quantizeModel(config, tensors, { head });
      await writeLut4(file, weights, {
        source: path,
        ropeTheta: config.rope_theta,
        rmsNormEps: config.rms_norm_eps,
      });
      const lut = await readLut4(file);
      const deq = dequantizeLut4(lut);
      const folded = foldedFloat(config, tensors, head);
      const steps = 3 + Object.keys(CLASSES).length + 1;
      const bar = progress("gap", steps * windows.length, { unit: "window" });
      const tick = () => bar.tick();
      const f32 = bitsPerByte(buildModel(config, tensors), windows, tick);
      const deqModel = buildModel(lut.config, deq);
      const rounded = bitsPerByte(deqModel, windows, tick);
      const byClass: Record<string, number> = {};
      for (const [name, pick] of Object.entries(CLASSES)) {
        const mixed = folded.map((t) => (pick(t.name) ? deq.find((d) => d.name === t.name)! : t));
        byClass[name] = bitsPerByte(buildModel(lut.config, mixed), windows, tick) - f32;
      }
      const engine = intEngineFromFile(lut);
      const integer = await engineBitsPerByte(engine, windows, tick);
      for (let i = 0; i < windows.length; i++) tick();
      bar.done();
      const greedy = await compareGreedy(engine, deqModel, gapPrompts(heldOut), 64);
      const llama = a.llama ? await llamaQ4Gap(config, tensors, windows, dir) : undefined;
      const rounding = errors.map((e) => ({
        name: e.name,
        kind: e.kind,
        rel_rmse: e.relRmse,
        rmse: e.rmse,
        max_abs_error: e.maxAbsError,
      }));
      const result = {
        checkpoint: path,
        head,
        file_bytes: lut.bytes,
        windows: count,
        window_bytes: WINDOW_BYTES,
        bpb: { f32, lut4_dequantized_float: rounded, lut4_integer_engine: integer },
        gap: { total: integer - f32, weight_rounding: rounded - f32, engine_arithmetic: integer - rounded },
        rounding_by_class: byClass,
        engine_vs_float_same_weights: greedy,
        llama_q4_0: llama === undefined ? undefined : { bpb: llama, gap: llama - f32 },
        rounding_per_tensor: rounding,
      };
      if (a.json) console.log(JSON.stringify(result, null, 2));
      else printTable(result);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
}

function printTable(r: Record<string, any>): void {
  const f = (x: number) => x.toFixed(4), g = (x: number) => (x >= 0 ? "+" : "") + x.toFixed(6);
  console.log(
    `${r.checkpoint}: lut4 (${r.head} head, ${
      r.file_bytes.toLocaleString("en-US")
    } bytes), ${r.windows} held-out windows of ${r.window_bytes} bytes`,
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

/**
 * The lut4 export gap on a float model, split into its two parts: the weights' rounding (the float
 * model on the lut4 file's dequantized weights) and the integer engine's own arithmetic (the integer
 * engine on that file), over held-out windows; the rounding split again by tensor class; and the
 * integer engine against the float model on the same dequantized weights (|Δlogit| and greedy
 * identity). scripts/gap.ts is the command line on top of it.
 *
 * @example
 * ```ts
 * import { lut4Gap } from "./gap.ts";
 * import { readCheckpoint } from "../formats/checkpoint/checkpoint.ts";
 * import { evalWindows, loadBrown } from "../model/corpus.ts";
 * const ck = await readCheckpoint("runs/a.ckpt", { sections: ["model"] });
 * const { heldOut } = await loadBrown(), windows = evalWindows(heldOut);
 * const r = await lut4Gap(ck.config, ck.model, { source: "runs/a.ckpt", windows, heldOut });
 * console.log(r.gap.weight_rounding, r.gap.engine_arithmetic);
 * ```
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dequantizeLut4, readLut4, writeLut4 } from "../formats/lut4/lut4.ts";
import { foldedFloat, type HeadMode, quantizeModel } from "../quantize/lut4-quantize.ts";
import { evalWindows, WINDOW_BYTES } from "../model/corpus.ts";
import type { ModelConfig } from "../model/config.ts";
import type { Engine } from "../model/engine.ts";
import { buildModel, createCache, forward, type Model } from "../model/qwen3.ts";
import type { Tensor } from "../model/tensor.ts";
import { intEngineFromFile } from "../engines/int/engine.ts";
import type { Tokenizer } from "../model/tokenizer-types.ts";
import { byteTokenizer } from "../model/tokenizer.ts";
import { type ScoredWindow, scoredWindow, windowBits, windowInputs } from "./metrics.ts";

/** Tensor classes the rounding gap is split by. */
export const TENSOR_CLASSES: Record<string, (name: string) => boolean> = {
  "embedding and head": (n) =>
    n === "model.embed_tokens.weight" || n === "lm_head.weight" || n === "model.norm.weight",
  attention: (n) => n.includes(".self_attn."),
  mlp: (n) => n.includes(".mlp."),
};

/**
 * Bits per byte of an engine over the windows (each window from a fresh session).
 *
 * @example
 * ```ts
 * import { engineBitsPerByte } from "./gap.ts";
 * import { evalWindows, loadBrown } from "../model/corpus.ts";
 * import type { Engine } from "../model/engine.ts";
 * declare const engine: Engine;
 * const { heldOut } = await loadBrown();
 * const bpb = await engineBitsPerByte(engine, evalWindows(heldOut, 64));
 * ```
 */
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

/**
 * The prompts of the greedy comparison: `count` held-out snippets of `bytes` bytes, BOS first; through
 * a model's own tokenizer when it has one (its BOS only if it has one).
 *
 * @example
 * ```ts
 * import { gapPrompts } from "./gap.ts";
 * import { loadBrown } from "../model/corpus.ts";
 * const { heldOut } = await loadBrown();
 * gapPrompts(heldOut)[0]; // [256, 84, 104, ...] (8 prompts of 24 bytes)
 * ```
 */
export function gapPrompts(heldOut: Uint8Array, count = 8, bytes = 24, tokenizer?: Tokenizer): number[][] {
  const snippets = evalWindows(heldOut, count, bytes);
  if (!tokenizer || tokenizer.kind === "byte") return snippets.map((w) => [256, ...w]);
  return snippets.map((w) => tokenizer.encode(new TextDecoder().decode(w), { bos: true }));
}

/**
 * Bits per byte of the float model or an engine over windows already through the tokenizer
 * (`scoredWindow`): total bits over the bytes covered. On byte windows the same sums as `bitsPerByte`.
 *
 * @example
 * ```ts
 * import { scoredBitsPerByte } from "./gap.ts";
 * import { scoredWindow } from "./metrics.ts";
 * import type { Model } from "../model/qwen3.ts";
 * import { byteTokenizer } from "../model/tokenizer.ts";
 * declare const model: Model, windows: Uint8Array[];
 * scoredBitsPerByte(model, windows.map((w) => scoredWindow(byteTokenizer, w)));
 * ```
 */
export async function scoredBitsPerByte(
  m: Model | Engine,
  windows: readonly ScoredWindow[],
  onWindow?: () => void,
): Promise<number> {
  let bits = 0, bytes = 0;
  for (const w of windows) {
    const logits = "start" in m
      ? await m.start().feed(w.inputs, "all")
      : forward(m, createCache(m, w.inputs.length), w.inputs);
    bits += windowBits(logits, w.targets, m.config.vocab_size);
    bytes += w.bytes;
    onWindow?.();
  }
  return bits / bytes;
}

/** How an engine follows the float model's greedy path (see `compareGreedy`). */
export interface GreedyComparison {
  maxAbsDelta: number;
  meanAbsDelta: number;
  /** Prompts whose whole continuation is the float model's. */
  greedySame: number;
  prompts: number;
  /** Mean length of the continuation the two share from its start. */
  meanPrefix: number;
}

/**
 * |Δlogit| along the float model's greedy path, and how many of the engine's own greedy continuations
 * of `tokens` tokens are identical to it.
 *
 * @example
 * ```ts
 * import { compareGreedy, gapPrompts } from "./gap.ts";
 * import { loadBrown } from "../model/corpus.ts";
 * import type { Engine } from "../model/engine.ts";
 * import type { Model } from "../model/qwen3.ts";
 * declare const intEngine: Engine, floatModel: Model; // the lut4 export on the integer engine; its source
 * const { heldOut } = await loadBrown();
 * const c = await compareGreedy(intEngine, floatModel, gapPrompts(heldOut), 64);
 * console.log(`${c.greedySame}/${c.prompts}`);
 * ```
 */
export async function compareGreedy(
  engine: Engine,
  model: Model,
  prompts: number[][],
  tokens: number,
): Promise<GreedyComparison> {
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
    // The engine fed the same tokens: logit differences position by position.
    const ref = forward(model, createCache(model), [...p, ...path.slice(0, -1)]);
    const got = await engine.start().feed([...p, ...path.slice(0, -1)], "all");
    for (let i = (p.length - 1) * V; i < ref.length; i++) {
      const d = Math.abs(ref[i] - got[i]);
      if (d > maxAbs) maxAbs = d;
      sumAbs += d;
      count++;
    }
    // The engine's own greedy continuation.
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

/** Options of `lut4Gap`. */
export interface Lut4GapOptions {
  /** Where the weights came from, recorded in the lut4 file. */
  source: string;
  /** The held-out windows bits per byte is measured over. */
  windows: Uint8Array[];
  /** The held-out text the greedy prompts are drawn from. */
  heldOut: Uint8Array;
  /** How the head is stored (default tied). */
  head?: HeadMode;
  /** Also measure llama.cpp's own Q4_0 gap (Bun: node-llama-cpp is a Node-API addon). */
  llama?: boolean;
  /** The model's own tokenizer (default ferry's byte one): windows and prompts go through it. */
  tokenizer?: Tokenizer;
  /** Called once per window evaluated: `lut4GapSteps(windows.length)` calls in all. */
  onWindow?: () => void;
}

/** How many times `lut4Gap` calls `onWindow` for `windows` windows (for a progress bar). */
export function lut4GapSteps(windows: number): number {
  return (3 + Object.keys(TENSOR_CLASSES).length + 1) * windows;
}

/**
 * The lut4 gap of a float model: its bits per byte as f32, on the lut4 file's dequantized weights and
 * on the integer engine; the rounding by tensor class; the integer engine against the float model on
 * the same weights (8 prompts x 64 tokens); optionally llama.cpp's Q4_0 beside it. The lut4 file is
 * written to a temporary folder and removed.
 */
export async function lut4Gap(config: ModelConfig, tensors: Tensor[], opts: Lut4GapOptions) {
  const { heldOut } = opts;
  const tok = opts.tokenizer ?? byteTokenizer;
  if (opts.llama && tok.kind !== "byte") {
    throw new RangeError(
      "llama.cpp's Q4_0 gap is measured on byte models only (its GGUF carries no tokenizer)",
    );
  }
  const windows = opts.windows.map((w) => scoredWindow(tok, w));
  const head = opts.head ?? "tied";
  const tick = () => opts.onWindow?.();
  const dir = await mkdtemp(join(tmpdir(), "ferry-gap-"));
  try {
    const file = join(dir, "model.lut4");
    const { weights, errors } = quantizeModel(config, tensors, { head });
    await writeLut4(file, weights, {
      source: opts.source,
      ropeTheta: config.rope_theta,
      rmsNormEps: config.rms_norm_eps,
    });
    const lut = await readLut4(file);
    const deq = dequantizeLut4(lut);
    const folded = foldedFloat(config, tensors, head);
    const f32 = await scoredBitsPerByte(buildModel(config, tensors), windows, tick);
    const deqModel = buildModel(lut.config, deq);
    const rounded = await scoredBitsPerByte(deqModel, windows, tick);
    const byClass: Record<string, number> = {};
    for (const [name, pick] of Object.entries(TENSOR_CLASSES)) {
      const mixed = folded.map((t) => (pick(t.name) ? deq.find((d) => d.name === t.name)! : t));
      byClass[name] = await scoredBitsPerByte(buildModel(lut.config, mixed), windows, tick) - f32;
    }
    const engine = intEngineFromFile(lut);
    const integer = await scoredBitsPerByte(engine, windows, tick);
    for (let i = 0; i < windows.length; i++) tick();
    const greedy = await compareGreedy(engine, deqModel, gapPrompts(heldOut, 8, 24, tok), 64);
    const llama = opts.llama ? await llamaQ4Gap(config, tensors, opts.windows, dir) : undefined;
    return {
      checkpoint: opts.source,
      head,
      file_bytes: lut.bytes,
      windows: windows.length,
      window_bytes: WINDOW_BYTES,
      tokenizer: tok.kind,
      scored_tokens: windows.reduce((n, w) => n + w.targets.length, 0),
      scored_bytes: windows.reduce((n, w) => n + w.bytes, 0),
      bpb: { f32, lut4_dequantized_float: rounded, lut4_integer_engine: integer },
      gap: { total: integer - f32, weight_rounding: rounded - f32, engine_arithmetic: integer - rounded },
      rounding_by_class: byClass,
      engine_vs_float_same_weights: greedy,
      llama_q4_0: llama === undefined ? undefined : { bpb: llama, gap: llama - f32 },
      rounding_per_tensor: errors.map((e) => ({
        name: e.name,
        kind: e.kind,
        rel_rmse: e.relRmse,
        rmse: e.rmse,
        max_abs_error: e.maxAbsError,
      })),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// llama.cpp's own bits per byte on a Q4_0 GGUF of the same weights.
async function llamaQ4Gap(config: ModelConfig, tensors: Tensor[], windows: Uint8Array[], dir: string) {
  const { writeGguf } = await import("../formats/gguf/gguf.ts");
  const { openLlamaGguf } = await import("./llama-cpp.ts");
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

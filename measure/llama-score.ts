/**
 * How faithful ferry's GGUF files are, measured by llama.cpp itself: writes a model as GGUF in every
 * type ferry supports, loads each into llama.cpp (node-llama-cpp 3.21.1, CPU, one thread), and
 * compares llama.cpp's next-token distributions over held-out text, and its greedy continuations,
 * with ferry's f32 engine. The command line is scripts/tools/measure-gguf.ts; tests/llama/gguf-llama.test.ts
 * checks the same figures.
 *
 * @example
 * ```ts
 * import { formatGgufTable, measureGguf } from "./llama-score.ts";
 * import type { Model } from "../model/qwen3.ts";
 * declare const model: Model, windows: Uint8Array[], prompts: number[][];
 * const rows = await measureGguf(model, { windows, prompts, tokens: 64 });
 * console.log(formatGgufTable(rows));
 * ```
 * @module
 */
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GGUF_DTYPE_NAMES, type GgufDtype, readGguf, writeGguf } from "../formats/gguf/gguf.ts";
import { evalWindows } from "../model/corpus.ts";
import { compareLogits, logSoftmax, windowInputs, windowLogits } from "./metrics.ts";
import { buildModel, type Model } from "../model/qwen3.ts";
import { generateAll } from "../model/generate.ts";
import { floatEngineOf } from "../engines/float.ts";
import { BOS } from "../model/tokenizer.ts";
import { openLlamaGguf } from "./llama-cpp.ts";

/** Every GGUF type ferry writes, in the order the table lists them (the K-quants and IQ4_NL last). */
export const GGUF_DTYPES: readonly GgufDtype[] = GGUF_DTYPE_NAMES;

/** The figures of one GGUF type. */
export interface GgufFigures {
  type: GgufDtype;
  fileBytes: number;
  positions: number;
  /** llama.cpp on this file against ferry's f32 engine on the source weights. */
  meanKL: number;
  maxKL: number;
  top1: number;
  /** Largest |p_llama − p_ferry| over every position and every token. */
  maxAbsDeltaP: number;
  /**
   * llama.cpp on this file against ferry's engine on the same file's weights read back (dequantized):
   * what llama.cpp's kernels add on top of the rounding the file itself makes.
   */
  sameWeightsMeanKL: number;
  sameWeightsTop1: number;
  /** Ferry's engine on the file's weights against ferry's engine on the source: the file's own cost. */
  roundingMeanKL: number;
  roundingTop1: number;
  /** Prompts whose greedy continuation from llama.cpp equals ferry's f32 engine's, token for token. */
  greedySame: number;
  greedyPrompts: number;
  /** Mean length of the common prefix of the two continuations, in tokens. */
  greedyMeanPrefix: number;
}

/** Options of `measureGguf`. */
export interface MeasureOptions {
  /** Held-out byte windows for the distributions (BOS then the bytes, as ferry evaluates). */
  windows: Uint8Array[];
  /** Prompts (token ids) for greedy decoding. */
  prompts: number[][];
  /** Greedy tokens per prompt; both sides go on past EOS, so every continuation has this length. */
  tokens: number;
  types?: readonly GgufDtype[];
  kvCache?: "F32" | "F16";
  /** Directory for the GGUF files (default: a temporary one, removed afterwards). */
  dir?: string;
  onStep?: (what: string) => void;
}

/** Writes `model` as GGUF in each type and measures each file in llama.cpp against ferry. */
export async function measureGguf(model: Model, opts: MeasureOptions): Promise<GgufFigures[]> {
  const V = model.config.vocab_size;
  const dir = opts.dir ?? await mkdtemp(join(tmpdir(), "ferry-gguf-"));
  const step = opts.onStep ?? (() => {});
  try {
    const refLogp = opts.windows.map((w) => logProbs(windowLogits(model, w), V));
    const refGreedy: number[][] = [];
    for (const p of opts.prompts) {
      refGreedy.push(
        await generateAll(floatEngineOf(model), p, { maxTokens: opts.tokens, stopAtEos: false }),
      );
    }
    const out: GgufFigures[] = [];
    for (const type of opts.types ?? GGUF_DTYPES) {
      const path = join(dir, `model.${type}.gguf`);
      await writeGguf(path, model.tensors, model.config, { type });
      step(`${type}: written`);
      const lm = await openLlamaGguf(path, { kvCache: opts.kvCache, contextSize: contextFor(opts) });
      try {
        // An F32 file reads back bit for bit (tests/formats/gguf.test.ts), so its weights are the source's.
        const readBack = type === "f32"
          ? model
          : await readGguf(path).then((g) => buildModel(g.config, g.tensors, path));
        const llamaLogp: Float32Array[] = [], sameLogp: Float32Array[] = [];
        let maxAbsDeltaP = 0;
        for (let i = 0; i < opts.windows.length; i++) {
          const rows = await lm.nextTokenProbs(windowInputs(opts.windows[i]));
          const lp = new Float32Array(rows.length * V);
          rows.forEach((row, t) => {
            for (let v = 0; v < V; v++) {
              // f32 softmax underflows to 0 below about e^-103; floor it there so log stays finite.
              lp[t * V + v] = Math.log(Math.max(row[v], 1e-45));
              maxAbsDeltaP = Math.max(maxAbsDeltaP, Math.abs(row[v] - Math.exp(refLogp[i][t * V + v])));
            }
          });
          llamaLogp.push(lp);
          sameLogp.push(
            readBack === model ? refLogp[i] : logProbs(windowLogits(readBack, opts.windows[i]), V),
          );
        }
        const vsRef = compareLogits(concat(refLogp), concat(llamaLogp), V);
        const vsSame = compareLogits(concat(sameLogp), concat(llamaLogp), V);
        const rounding = compareLogits(concat(refLogp), concat(sameLogp), V);
        step(`${type}: distributions`);
        let greedySame = 0, prefix = 0;
        for (let i = 0; i < opts.prompts.length; i++) {
          const got = await lm.greedy(opts.prompts[i], opts.tokens);
          const want = refGreedy[i];
          let k = 0;
          while (k < got.length && k < want.length && got[k] === want[k]) k++;
          prefix += k;
          if (k === got.length && k === want.length) greedySame++;
        }
        step(`${type}: greedy`);
        out.push({
          type,
          fileBytes: (await stat(path)).size,
          positions: vsRef.positions,
          meanKL: vsRef.meanKL,
          maxKL: vsRef.maxKL,
          top1: vsRef.top1Agreement,
          maxAbsDeltaP,
          sameWeightsMeanKL: vsSame.meanKL,
          sameWeightsTop1: vsSame.top1Agreement,
          roundingMeanKL: rounding.meanKL,
          roundingTop1: rounding.top1Agreement,
          greedySame,
          greedyPrompts: opts.prompts.length,
          greedyMeanPrefix: opts.prompts.length ? prefix / opts.prompts.length : 0,
        });
      } finally {
        await lm.close();
      }
    }
    return out;
  } finally {
    if (!opts.dir) await rm(dir, { recursive: true, force: true });
  }
}

/** The figures as a plain-text table. */
export function formatGgufTable(rows: readonly GgufFigures[]): string {
  const head = [
    "type",
    "bytes",
    "mean KL",
    "max KL",
    "top-1",
    "max |Δp|",
    "KL same wts",
    "top-1 same",
    "KL rounding",
    "greedy =",
    "prefix",
  ];
  const body = rows.map((r) => [
    r.type,
    String(r.fileBytes),
    r.meanKL.toExponential(2),
    r.maxKL.toExponential(2),
    pct(r.top1),
    r.maxAbsDeltaP.toExponential(2),
    r.sameWeightsMeanKL.toExponential(2),
    pct(r.sameWeightsTop1),
    r.roundingMeanKL.toExponential(2),
    `${r.greedySame}/${r.greedyPrompts}`,
    r.greedyMeanPrefix.toFixed(1),
  ]);
  const width = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(width[i])).join("  ");
  return [line(head), ...body.map(line)].join("\n");
}

/** `count` greedy prompts from held-out text: BOS then `bytes` bytes, evenly spaced. */
export function heldOutPrompts(heldOut: Uint8Array, count: number, bytes = 24): number[][] {
  return evalWindows(heldOut, count, bytes).map((w) => [BOS, ...w]);
}

function contextFor(opts: MeasureOptions): number {
  const longest = Math.max(
    0,
    ...opts.windows.map((w) => w.length),
    ...opts.prompts.map((p) => p.length + opts.tokens),
  );
  // One spare slot: with a sequence exactly filling the context, node-llama-cpp's last distribution is off.
  return Math.ceil((longest + 1) / 256) * 256;
}

function logProbs(logits: Float32Array, V: number): Float32Array {
  const out = new Float32Array(logits.length), row = new Float64Array(V);
  for (let t = 0; t < logits.length / V; t++) {
    logSoftmax(logits, t * V, V, row);
    out.set(row, t * V);
  }
  return out;
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) out.set(p, off), off += p.length;
  return out;
}

function pct(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}

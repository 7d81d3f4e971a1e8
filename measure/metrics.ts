/**
 * What an export costs: logits of a model or engine under test compared with the float source's,
 * position by position, held-out bits per byte, and greedy continuations. Every function that runs a
 * model takes any `Engine` (float, integer, WebGPU); the float model itself is accepted too, synchronously.
 *
 * @example
 * ```ts
 * import { compareLogits } from "./metrics.ts";
 * import { createCache, forward, type Model } from "../model/qwen3.ts";
 * declare const source: Model, exported: Model, ids: number[]; // exported: read back from an export
 * const ref = forward(source, createCache(source), ids);
 * const got = forward(exported, createCache(exported), ids);
 * compareLogits(ref, got, 258); // { maxAbsDelta, meanAbsDelta, top1Agreement, meanKL, ... }
 * ```
 * @module
 */
import { BOS } from "../model/tokenizer.ts";
import { createCache, forward, type Model } from "../model/qwen3.ts";
import type { Engine } from "../model/engine.ts";
import { generateAll } from "../model/generate.ts";
import type { Tokenizer } from "../model/tokenizer-types.ts";

/** Differences between reference logits and logits under test, over the same positions. */
export interface LogitComparison {
  positions: number;
  maxAbsDelta: number;
  meanAbsDelta: number;
  /** Fraction of positions whose argmax is the same. */
  top1Agreement: number;
  /** Mean KL(reference ‖ test) of the softmax distributions, in nats. */
  meanKL: number;
  maxKL: number;
  /** KL(reference ‖ test) at each position, in nats (for percentiles across windows: `percentile`). */
  kl: Float64Array;
}

/** Compares two `[positions, vocab]` logit arrays. */
export function compareLogits(ref: Float32Array, test: Float32Array, vocab: number): LogitComparison {
  if (ref.length !== test.length || ref.length % vocab !== 0) {
    throw new RangeError(
      `logit arrays of ${ref.length} and ${test.length} values do not match vocab ${vocab}`,
    );
  }
  const positions = ref.length / vocab;
  let maxAbs = 0, sumAbs = 0, agree = 0, sumKL = 0, maxKL = 0;
  const kls = new Float64Array(positions);
  const p = new Float64Array(vocab), q = new Float64Array(vocab);
  for (let r = 0; r < positions; r++) {
    const off = r * vocab;
    let aRef = 0, aTest = 0;
    for (let i = 0; i < vocab; i++) {
      const d = Math.abs(ref[off + i] - test[off + i]);
      if (d > maxAbs) maxAbs = d;
      sumAbs += d;
      if (ref[off + i] > ref[off + aRef]) aRef = i;
      if (test[off + i] > test[off + aTest]) aTest = i;
    }
    if (aRef === aTest) agree++;
    logSoftmax(ref, off, vocab, p);
    logSoftmax(test, off, vocab, q);
    let kl = 0;
    for (let i = 0; i < vocab; i++) kl += Math.exp(p[i]) * (p[i] - q[i]);
    kl = Math.max(0, kl);
    kls[r] = kl;
    sumKL += kl;
    if (kl > maxKL) maxKL = kl;
  }
  return {
    positions,
    maxAbsDelta: maxAbs,
    meanAbsDelta: sumAbs / ref.length,
    top1Agreement: agree / positions,
    meanKL: sumKL / positions,
    maxKL,
    kl: kls,
  };
}

/**
 * The p-quantile (p in [0, 1]) of `values`, interpolating linearly between the two nearest of the
 * sorted values, as llama.cpp's perplexity tool reports its "99.0% KLD".
 *
 * @example
 * ```ts
 * import { percentile } from "./metrics.ts";
 * percentile([0, 1, 2, 3, 4], 0.99); // 3.96
 * ```
 */
export function percentile(values: ArrayLike<number>, p: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const at = (sorted.length - 1) * Math.min(1, Math.max(0, p)), lo = Math.floor(at);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (at - lo);
}

/** `out[i] = log softmax(x[off .. off + n))[i]`, in f64. */
export function logSoftmax(x: Float32Array, off: number, n: number, out: Float64Array): void {
  let max = -Infinity;
  for (let i = 0; i < n; i++) if (x[off + i] > max) max = x[off + i];
  let sum = 0;
  for (let i = 0; i < n; i++) sum += Math.exp(x[off + i] - max);
  const lse = max + Math.log(sum);
  for (let i = 0; i < n; i++) out[i] = x[off + i] - lse;
}

/**
 * The model's inputs for a window of bytes: BOS then all but the last byte, so position t predicts
 * byte t. Training and evaluation share this convention.
 */
export function windowInputs(window: Uint8Array): number[] {
  const ids = [BOS];
  for (let i = 0; i + 1 < window.length; i++) ids.push(window[i]);
  return ids;
}

/**
 * Logits of every position of a window, from a fresh start: on the float model directly (sync), or on
 * any engine (async, through a fresh session).
 */
export function windowLogits(model: Model, window: Uint8Array): Float32Array;
export function windowLogits(engine: Engine, window: Uint8Array): Promise<Float32Array>;
export function windowLogits(m: Model | Engine, window: Uint8Array): Float32Array | Promise<Float32Array> {
  if (isEngine(m)) return m.start().feed(windowInputs(window), "all");
  return forward(m, createCache(m, window.length), windowInputs(window));
}

/**
 * Bits of `targets` under `logits` (as given by `windowLogits`): position t's logits score
 * `targets[t]`. A byte window is its own targets.
 *
 * @example
 * ```ts
 * import { windowBits, windowLogits } from "./metrics.ts";
 * import type { Model } from "../model/qwen3.ts";
 * declare const model: Model, w: Uint8Array; // a byte model, a window of bytes
 * windowBits(windowLogits(model, w), w, 258) / w.length; // the window's bits per byte
 * ```
 */
export function windowBits(logits: Float32Array, targets: ArrayLike<number>, vocab: number): number {
  const lp = new Float64Array(vocab);
  let nats = 0;
  for (let t = 0; t < targets.length; t++) {
    logSoftmax(logits, t * vocab, vocab, lp);
    nats -= lp[targets[t]];
  }
  return nats / Math.LN2;
}

/**
 * A held-out window as a model sees it: the ids fed, the id each fed position must predict, and the
 * UTF-8 bytes those predicted ids cover (what bits per byte divides by).
 */
export interface ScoredWindow {
  inputs: number[];
  targets: number[];
  bytes: number;
}

/**
 * A window of text through a tokenizer. The byte tokenizer: BOS then all but the last byte, every byte
 * predicted (`windowInputs`). A BPE: the window, trimmed to whole UTF-8 characters, encoded with
 * special-token strings as text; with a BOS every token is predicted and every byte counted; without
 * one (Qwen3) the first token is fed but nothing predicts it, so its bytes are left out.
 *
 * @example
 * ```ts
 * import { scoredWindow, windowBits } from "./metrics.ts";
 * import { evalWindows, loadBrown } from "../model/corpus.ts";
 * import type { Engine } from "../model/engine.ts";
 * declare const engine: Engine;
 * const { heldOut } = await loadBrown(), V = engine.config.vocab_size;
 * const w = scoredWindow(engine.tokenizer, evalWindows(heldOut, 1)[0]);
 * const bits = windowBits(await engine.start().feed(w.inputs, "all"), w.targets, V);
 * bits / w.bytes; // the window's bits per byte
 * ```
 */
export function scoredWindow(tok: Tokenizer, window: Uint8Array): ScoredWindow {
  if (tok.kind === "byte") {
    return { inputs: windowInputs(window), targets: Array.from(window), bytes: window.length };
  }
  const text = wholeCharacters(window);
  const ids = tok.encode(new TextDecoder().decode(text));
  if (tok.bos !== undefined) {
    return { inputs: [tok.bos, ...ids.slice(0, -1)], targets: ids, bytes: text.length };
  }
  if (ids.length < 2) return { inputs: [], targets: [], bytes: 0 };
  return {
    inputs: ids.slice(0, -1),
    targets: ids.slice(1),
    bytes: text.length - tok.tokenBytes(ids[0]).length,
  };
}

/**
 * The window without a character cut at either end (continuation bytes first, a sequence unfinished
 * last): bytes a BPE tokenizer can take as text.
 *
 * @example
 * ```ts
 * import { wholeCharacters } from "./metrics.ts";
 * wholeCharacters(new Uint8Array([0xa9, 0x41, 0xc3])); // [0x41]
 * ```
 */
export function wholeCharacters(w: Uint8Array): Uint8Array {
  let start = 0, end = w.length;
  while (start < end && (w[start] & 0xc0) === 0x80) start++;
  let lead = end - 1, back = 0;
  while (lead >= start && (w[lead] & 0xc0) === 0x80 && back < 3) lead--, back++;
  if (lead >= start && w[lead] >= 0xc0) {
    const need = w[lead] >= 0xf0 ? 4 : w[lead] >= 0xe0 ? 3 : 2;
    if (end - lead < need) end = lead;
  }
  return w.subarray(start, end);
}

/** A window's logits at every fed position, from a fresh session of `engine`. */
function scoredLogits(engine: Engine, w: ScoredWindow): Promise<Float32Array> {
  return w.inputs.length === 0 ? Promise.resolve(new Float32Array(0)) : engine.start().feed(w.inputs, "all");
}

/**
 * Bits of a window of text under a model with its own tokenizer, and the bytes they cover
 * (`scoredWindow`'s rules: no BOS, so the first token's bytes are left out). For a byte model this is
 * `windowBits` of `windowLogits`, over every byte.
 *
 * @example
 * ```ts
 * import { tokenWindowBits } from "./metrics.ts";
 * import type { Engine } from "../model/engine.ts";
 * declare const engine: Engine;
 * const { bits, bytes } = await tokenWindowBits(engine, new TextEncoder().encode("The jury said"));
 * ```
 */
export async function tokenWindowBits(
  engine: Engine,
  window: Uint8Array,
): Promise<{ bits: number; bytes: number }> {
  const w = scoredWindow(engine.tokenizer, window);
  if (w.targets.length === 0) return { bits: 0, bytes: 0 };
  return {
    bits: windowBits(await scoredLogits(engine, w), w.targets, engine.config.vocab_size),
    bytes: w.bytes,
  };
}

/**
 * Held-out bits per byte over the given windows: of the float model (sync), or of any engine (async;
 * each window through the engine's tokenizer: `scoredWindow`), total bits over the bytes predicted.
 *
 * @example
 * ```ts
 * import { bitsPerByte } from "./metrics.ts";
 * import { evalWindows, loadBrown } from "../model/corpus.ts";
 * import type { Model } from "../model/qwen3.ts";
 * declare const model: Model;
 * const { heldOut } = await loadBrown();
 * bitsPerByte(model, evalWindows(heldOut, 64)); // the byte model's held-out bits per byte
 * ```
 */
export function bitsPerByte(model: Model, windows: Uint8Array[], onWindow?: (i: number) => void): number;
export function bitsPerByte(
  engine: Engine,
  windows: Uint8Array[],
  onWindow?: (i: number) => void,
): Promise<number>;
export function bitsPerByte(
  m: Model | Engine,
  windows: Uint8Array[],
  onWindow?: (i: number) => void,
): number | Promise<number> {
  const V = m.config.vocab_size;
  if (isEngine(m)) {
    return (async () => {
      let bits = 0, bytes = 0;
      for (let i = 0; i < windows.length; i++) {
        const w = scoredWindow(m.tokenizer, windows[i]);
        bits += windowBits(await scoredLogits(m, w), w.targets, V);
        bytes += w.bytes;
        onWindow?.(i);
      }
      return bits / bytes;
    })();
  }
  const bytes = windows.reduce((n, w) => n + w.length, 0);
  let bits = 0;
  windows.forEach((w, i) => {
    bits += windowBits(windowLogits(m, w), w, V);
    onWindow?.(i);
  });
  return bits / bytes;
}

/** What an engine gives on the measurement set: logits per window, bits per byte, greedy continuations. */
export interface EngineProfile {
  /** `[positions × vocab]` logits of each window (empty when they went to `onLogits` instead). */
  logits: Float32Array[];
  bpb: number;
  /** Each prompt's greedy continuation, as comma-joined token ids. */
  greedy: string[];
}

/**
 * Runs an engine over held-out windows and greedy prompts: the raw material of every export-cost
 * figure (compare two profiles with `compareLogits` and the greedy strings). A window of bytes goes
 * through the engine's tokenizer (`scoredWindow`); pass `ScoredWindow`s to score every engine on the
 * same tokens. `tick` is called once per window and per prompt. With `onLogits`, each window's logits
 * are handed to it and not kept (a 151,936-token vocabulary makes them tens of MB a window).
 *
 * @example
 * ```ts
 * import { profileEngine } from "./metrics.ts";
 * import { loadEngine } from "../engines/mod.ts";
 * import type { Engine } from "../model/engine.ts";
 * declare const floatEngine: Engine, windows: Uint8Array[], prompts: number[][];
 * const ref = await profileEngine(floatEngine, windows, prompts, 64);
 * const got = await profileEngine(await loadEngine("out/ferry.q4_0.gguf"), windows, prompts, 64);
 * ```
 */
export async function profileEngine(
  engine: Engine,
  windows: readonly (Uint8Array | ScoredWindow)[],
  prompts: readonly number[][],
  tokens: number,
  tick: () => void = () => {},
  onLogits?: (window: number, logits: Float32Array) => void,
): Promise<EngineProfile> {
  const V = engine.config.vocab_size;
  let bits = 0, bytes = 0;
  const logits: Float32Array[] = [];
  for (let i = 0; i < windows.length; i++) {
    const raw = windows[i];
    const w = raw instanceof Uint8Array ? scoredWindow(engine.tokenizer, raw) : raw;
    const l = await scoredLogits(engine, w);
    bits += windowBits(l, w.targets, V);
    bytes += w.bytes;
    if (onLogits) onLogits(i, l);
    else logits.push(l);
    tick();
  }
  const greedy: string[] = [];
  for (const p of prompts) {
    greedy.push((await generateAll(engine, p, { maxTokens: tokens, stopAtEos: false })).join(","));
    tick();
  }
  return { logits, bpb: bits / bytes, greedy };
}

function isEngine(m: Model | Engine): m is Engine {
  return typeof (m as Engine).start === "function";
}

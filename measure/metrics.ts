/**
 * What an export costs: logits of a model or engine under test compared with the float source's,
 * position by position, held-out bits per byte, and greedy continuations. Every function that runs a
 * model takes any `Engine` (float, integer, WebGPU); the float model itself is accepted too, synchronously.
 *
 * @example
 * ```ts
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

/** Bits per byte of `window` under `logits` (as given by `windowLogits`). */
export function windowBits(logits: Float32Array, window: Uint8Array, vocab: number): number {
  const lp = new Float64Array(vocab);
  let nats = 0;
  for (let t = 0; t < window.length; t++) {
    logSoftmax(logits, t * vocab, vocab, lp);
    nats -= lp[window[t]];
  }
  return nats / Math.LN2;
}

/**
 * Bits of a window of text under a model with its own tokenizer (a BPE, no BOS), and the bytes they
 * cover: the window's text is encoded (special-token strings as text), its tokens after the first are
 * predicted from the ones before, and the first token's bytes, which nothing predicts, are left out.
 * For a byte model this is `windowBits` of `windowLogits` with BOS as the first input.
 */
export async function tokenWindowBits(
  engine: Engine,
  window: Uint8Array,
): Promise<{ bits: number; bytes: number }> {
  const tok = engine.tokenizer, V = engine.config.vocab_size;
  const ids = tok.encode(new TextDecoder().decode(window));
  if (ids.length < 2) return { bits: 0, bytes: 0 };
  const logits = await engine.start().feed(ids.slice(0, -1), "all");
  const lp = new Float64Array(V);
  let nats = 0;
  for (let t = 1; t < ids.length; t++) {
    logSoftmax(logits, (t - 1) * V, V, lp);
    nats -= lp[ids[t]];
  }
  return { bits: nats / Math.LN2, bytes: window.length - tok.tokenBytes(ids[0]).length };
}

/**
 * Held-out bits per byte over the given windows: of the float model (sync), or of any engine (async;
 * an engine whose tokenizer is not the byte one is scored over its own tokens: `tokenWindowBits`).
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
  const bytes = windows.reduce((n, w) => n + w.length, 0);
  if (isEngine(m) && m.tokenizer.kind !== "byte") {
    return (async () => {
      let bits = 0, covered = 0;
      for (let i = 0; i < windows.length; i++) {
        const r = await tokenWindowBits(m, windows[i]);
        bits += r.bits, covered += r.bytes;
        onWindow?.(i);
      }
      return bits / covered;
    })();
  }
  if (isEngine(m)) {
    return (async () => {
      let bits = 0;
      for (let i = 0; i < windows.length; i++) {
        bits += windowBits(await windowLogits(m, windows[i]), windows[i], V);
        onWindow?.(i);
      }
      return bits / bytes;
    })();
  }
  let bits = 0;
  windows.forEach((w, i) => {
    bits += windowBits(windowLogits(m, w), w, V);
    onWindow?.(i);
  });
  return bits / bytes;
}

/** What an engine gives on the measurement set: logits per window, bits per byte, greedy continuations. */
export interface EngineProfile {
  /** `[positions × vocab]` logits of each window. */
  logits: Float32Array[];
  bpb: number;
  /** Each prompt's greedy continuation, as comma-joined token ids. */
  greedy: string[];
}

/**
 * Runs an engine over held-out windows and greedy prompts: the raw material of every export-cost
 * figure (compare two profiles with `compareLogits` and the greedy strings). `tick` is called once
 * per window and per prompt.
 *
 * @example
 * ```ts
 * const ref = await profileEngine(floatEngine, windows, prompts, 64);
 * const got = await profileEngine(await loadEngine("out/ferry.q4_0.gguf"), windows, prompts, 64);
 * ```
 */
export async function profileEngine(
  engine: Engine,
  windows: Uint8Array[],
  prompts: readonly number[][],
  tokens: number,
  tick: () => void = () => {},
): Promise<EngineProfile> {
  const V = engine.config.vocab_size;
  let bits = 0, bytes = 0;
  const logits: Float32Array[] = [];
  for (const w of windows) {
    const l = await windowLogits(engine, w);
    bits += windowBits(l, w, V);
    bytes += w.length;
    logits.push(l);
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

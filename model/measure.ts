/**
 * What an export costs: logits of a model under test compared with the float source's, position by
 * position, and held-out bits per byte.
 *
 * @example
 * ```ts
 * const ref = forward(source, createCache(source), ids);
 * const got = forward(exported, createCache(exported), ids);
 * compareLogits(ref, got, 258); // { maxAbsDelta, meanAbsDelta, top1Agreement, meanKL, ... }
 * ```
 * @module
 */
import { BOS } from "./tokenizer.ts";
import { createCache, forward, type Model } from "./qwen3.ts";

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
}

/** Compares two `[positions, vocab]` logit arrays. */
export function compareLogits(ref: Float32Array, test: Float32Array, vocab: number): LogitComparison {
  if (ref.length !== test.length || ref.length % vocab !== 0) {
    throw new RangeError(`logit arrays of ${ref.length} and ${test.length} values do not match vocab ${vocab}`);
  }
  const positions = ref.length / vocab;
  let maxAbs = 0, sumAbs = 0, agree = 0, sumKL = 0, maxKL = 0;
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
  };
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

/** Logits of every position of a window, from a fresh cache. */
export function windowLogits(model: Model, window: Uint8Array): Float32Array {
  return forward(model, createCache(model, window.length), windowInputs(window));
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

/** Held-out bits per byte of a model over the given windows. */
export function bitsPerByte(model: Model, windows: Uint8Array[], onWindow?: (i: number) => void): number {
  let bits = 0, bytes = 0;
  windows.forEach((w, i) => {
    bits += windowBits(windowLogits(model, w), w, model.config.vocab_size);
    bytes += w.length;
    onWindow?.(i);
  });
  return bits / bytes;
}

/**
 * A training worker: computes the loss and gradient of its share of each batch over parameters
 * shared with the main thread (SharedArrayBuffer), so two cores train one model without copying it,
 * and runs the optimizer over its own range of the parameters, so the step after the gradients is
 * split between the workers too.
 *
 * Protocol (each message is answered once the work is done):
 * - `init` {config, seqLen, kernels (a kernel set's name: this worker's trainer runs on it), params,
 *   grads (one buffer per sequence of a batch), losses, next, m, v, ema, corpus, from, to} → `ready`.
 *   This worker owns elements `from` <= i < `to` of the optimizer's work.
 * - `step` {starts, seqLen, gradScale} → {}: takes sequence numbers j from the shared counter `next`
 *   until the batch is done, and writes the gradient of sequence j (from zero) into `grads[j]` and
 *   its loss into `losses[j]`.
 * - `reduce` → {}: `grads[0][i] += grads[j][i]` for j = 1, 2, ... in order, over its range (once
 *   every worker has answered `step`).
 * - `update` {scale, step, lr, adam, emaDecay} → {}: over its range, the gradient times `scale` (the
 *   clipping factor; 1 for none), an AdamW step on `params`, `m` and `v`, and the EMA update.
 * Every operation is element by element, so the bits do not depend on how the ranges are cut.
 * @module
 */
import type { ModelConfig } from "./config.ts";
import { byteTokenizer } from "./tokenizer.ts";
import { kernelSet } from "../kernels/kernels.ts";
import {
  adamwStep,
  createScratch,
  emaUpdate,
  type ParamLayout,
  paramLayout,
  scaleRange,
  type Scratch,
  sequenceLossAndGrad,
  sumInto,
} from "./train.ts";

/** Every training window starts with the byte tokenizer's BOS (the corpus is its ids). */
const BOS_ID = byteTokenizer.bos!;

interface State {
  cfg: ModelConfig;
  layout: ParamLayout;
  losses: Float64Array;
  next: Int32Array;
  sharedParams: Float32Array;
  sharedGrads: Float32Array[];
  m: Float32Array;
  v: Float32Array;
  ema: Float32Array;
  from: number;
  to: number;
  // Private copies: V8 runs the kernels several times slower on SharedArrayBuffer-backed arrays.
  params: Float32Array;
  grads: Float32Array;
  corpus: Uint8Array;
  scratch: Scratch;
}

let state: State | undefined;
// The worker's global scope, typed for the two members used (Deno and Bun both provide them).
const scope = self as unknown as { postMessage(m: unknown): void; onmessage: (ev: MessageEvent) => void };

scope.onmessage = (ev: MessageEvent) => {
  const msg = ev.data;
  if (msg.type === "init") {
    const cfg = msg.config as ModelConfig, layout = paramLayout(cfg);
    state = {
      cfg,
      layout,
      losses: new Float64Array(msg.losses),
      next: new Int32Array(msg.next),
      sharedParams: new Float32Array(msg.params),
      sharedGrads: (msg.grads as SharedArrayBuffer[]).map((b) => new Float32Array(b)),
      m: new Float32Array(msg.m),
      v: new Float32Array(msg.v),
      ema: new Float32Array(msg.ema),
      from: msg.from,
      to: msg.to,
      params: new Float32Array(layout.size),
      grads: new Float32Array(layout.size),
      corpus: new Uint8Array(msg.corpus),
      scratch: createScratch(cfg, msg.seqLen, kernelSet(msg.kernels ?? "wasm")),
    };
    scope.postMessage({ type: "ready" });
    return;
  }
  const s = state!;
  if (msg.type === "step") {
    s.params.set(s.sharedParams);
    const T: number = msg.seqLen, starts = msg.starts as number[];
    const inputs = new Array<number>(T), targets = new Array<number>(T);
    for (let j = Atomics.add(s.next, 0, 1); j < starts.length; j = Atomics.add(s.next, 0, 1)) {
      inputs[0] = BOS_ID;
      for (let t = 0; t < T; t++) {
        targets[t] = s.corpus[starts[j] + t];
        if (t + 1 < T) inputs[t + 1] = s.corpus[starts[j] + t];
      }
      s.grads.fill(0);
      s.losses[j] = sequenceLossAndGrad(
        s.cfg,
        s.layout,
        s.params,
        s.grads,
        inputs,
        targets,
        s.scratch,
        msg.gradScale,
      );
      s.sharedGrads[j].set(s.grads);
    }
    scope.postMessage({ type: "done" });
  } else if (msg.type === "reduce") {
    sumInto(s.sharedGrads[0], s.sharedGrads.slice(1), s.from, s.to);
    scope.postMessage({ type: "done" });
  } else if (msg.type === "update") {
    const total = s.sharedGrads[0];
    if (msg.scale !== 1) scaleRange(total, msg.scale, s.from, s.to);
    adamwStep(s.layout, s.sharedParams, total, s.m, s.v, msg.step, msg.lr, msg.adam, s.from, s.to);
    emaUpdate(s.ema, s.sharedParams, msg.emaDecay, s.from, s.to);
    scope.postMessage({ type: "done" });
  }
};

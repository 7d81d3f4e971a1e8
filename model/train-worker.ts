/**
 * A training worker: computes the loss and gradient of its share of each batch over parameters
 * shared with the main thread (SharedArrayBuffer), so two cores train one model without copying it.
 *
 * Protocol: `init` {config, params, grads, corpus, seqLen, kernels} once; then `step`
 * {starts, seqLen, gradScale} → replies {loss} after writing its summed gradient into its own `grads`
 * buffer.
 * @module
 */
import type { ModelConfig } from "./config.ts";
import { BOS } from "./tokenizer.ts";
import { useKernels } from "../kernels/kernels.ts";
import { createScratch, paramLayout, type ParamLayout, type Scratch, sequenceLossAndGrad } from "./train.ts";

interface State {
  cfg: ModelConfig;
  layout: ParamLayout;
  sharedParams: Float32Array;
  sharedGrads: Float32Array;
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
    const cfg = msg.config as ModelConfig;
    useKernels(msg.kernels ?? "wasm");
    state = {
      cfg,
      layout: paramLayout(cfg),
      sharedParams: new Float32Array(msg.params),
      sharedGrads: new Float32Array(msg.grads),
      params: new Float32Array(paramLayout(cfg).size),
      grads: new Float32Array(paramLayout(cfg).size),
      corpus: new Uint8Array(msg.corpus),
      scratch: createScratch(cfg, msg.seqLen),
    };
    scope.postMessage({ type: "ready" });
    return;
  }
  if (msg.type === "step") {
    const s = state!;
    s.params.set(s.sharedParams);
    s.grads.fill(0);
    let loss = 0;
    const T: number = msg.seqLen;
    const inputs = new Array<number>(T), targets = new Array<number>(T);
    for (const start of msg.starts as number[]) {
      inputs[0] = BOS;
      for (let t = 0; t < T; t++) {
        targets[t] = s.corpus[start + t];
        if (t + 1 < T) inputs[t + 1] = s.corpus[start + t];
      }
      loss += sequenceLossAndGrad(s.cfg, s.layout, s.params, s.grads, inputs, targets, s.scratch, msg.gradScale);
    }
    s.sharedGrads.set(s.grads);
    scope.postMessage({ type: "done", loss });
  }
};

/**
 * Deterministic random initialisation: the same config and seed give the same bits, so tests can
 * build models without any file.
 *
 * @example
 * ```ts
 * import { initParams } from "./init.ts";
 * import { PRESETS } from "./config.ts";
 * import { buildModel } from "./qwen3.ts";
 * const tensors = initParams(PRESETS.tiny, 1);
 * const model = buildModel(PRESETS.tiny, tensors);
 * ```
 * @module
 */
import { type ModelConfig, paramShapes } from "./config.ts";
import { createRng } from "./random.ts";
import { type Tensor, tensor } from "./tensor.ts";

/**
 * Norm weights start at 1; every matrix is normal with std 0.02 (Hugging Face's initializer_range),
 * except the two projections that write into the residual stream (o_proj, down_proj), which are
 * scaled by 1/sqrt(2 * layers) so the residual grows slowly with depth (GPT-2's rule).
 */
export function initParams(cfg: ModelConfig, seed: number, std = 0.02): Tensor[] {
  const rng = createRng(seed);
  const residualStd = std / Math.sqrt(2 * cfg.num_hidden_layers);
  return paramShapes(cfg).map(({ name, dims }) => {
    const t = tensor(name, dims);
    if (dims.length === 1) t.data.fill(1);
    else {
      const s = /o_proj|down_proj/.test(name) ? residualStd : std;
      for (let i = 0; i < t.data.length; i++) t.data[i] = rng.normal() * s;
    }
    return t;
  });
}

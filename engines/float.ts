/**
 * The float CPU engine: the reference Qwen3 model (model/qwen3.ts) in f32 behind the `Engine`
 * interface. It is built from a config and named tensors, whatever file they came from; reading files
 * is the loader's job (engines/mod.ts), so this module knows no format.
 *
 * @example
 * ```ts
 * const engine = createFloatEngine(config, tensors, "out/ferry.bf16.dmexp");
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }));
 * const next = s.pick();                      // greedy
 * ```
 * @module
 */
import type { Kernels } from "../kernels/kernels.ts";
import type { ModelConfig } from "../model/config.ts";
import type { Engine, EngineSession, LogitsWanted, SamplingOptions } from "../model/engine.ts";
import { buildModel, createCache, forward, type Model } from "../model/qwen3.ts";
import { createRng, type Rng } from "../model/random.ts";
import { pickToken } from "../model/sample.ts";
import { checkSampling, checkSeed } from "../model/sampling.ts";
import type { Tensor } from "../model/tensor.ts";

/** How a float engine runs, and how it may treat the tensors it is given. */
export interface FloatEngineOptions {
  /**
   * The caller will never write the tensors again (they were read from a file for this engine alone),
   * so the kernels may keep prepared copies of them: see kernels/types.ts `Kernels.freeze`.
   */
  frozen?: boolean;
  /** The kernel set (kernels/kernels.ts `kernelSet`; default the WebAssembly SIMD set where there is one). */
  kernels?: Kernels;
}

/**
 * A float engine over `tensors`, which must be exactly the ones `config` implies (checked; the
 * refusal names `source`). The tensors are used in place, not copied.
 */
export function createFloatEngine(
  config: ModelConfig,
  tensors: Tensor[],
  source = "tensors",
  options: FloatEngineOptions = {},
): Engine {
  const model = buildModel(config, tensors, source, options.kernels);
  if (options.frozen) { for (const t of tensors) model.kernels.freeze(t.data); }
  return floatEngineOf(model, source);
}

/**
 * The float engine over a model already built, on the model's kernel set: how a model made in memory
 * (live training weights, a test's random init) generates and is measured through the `Engine` interface.
 */
export function floatEngineOf(model: Model, source = "model"): Engine {
  return {
    kind: "float",
    config: model.config,
    source,
    start: () => floatSession(model),
  };
}

function floatSession(model: Model): EngineSession {
  const V = model.config.vocab_size;
  const cache = createCache(model);
  const tokens: number[] = [];
  let rng: Rng = createRng(0);
  let pending: Float32Array | undefined;
  return {
    get position() {
      return tokens.length;
    },
    get tokens() {
      return tokens;
    },
    feed(ids: readonly number[], wanted: LogitsWanted = "last") {
      // A refusal (a position past the context, an id outside the vocabulary) rejects, never throws.
      try {
        if (ids.length === 0) return Promise.resolve(new Float32Array(0));
        const logits = forward(model, cache, ids);
        tokens.push(...ids);
        pending = logits.subarray(logits.length - V);
        if (wanted === "all") return Promise.resolve(logits);
        return Promise.resolve(wanted === "last" ? pending.slice() : new Float32Array(0));
      } catch (e) {
        return Promise.reject(e);
      }
    },
    pick(options: SamplingOptions = {}) {
      const choice = checkSampling(options);
      if (!pending) throw new Error("pick: nothing fed yet, so there is no next-token distribution");
      return pickToken(pending, 0, V, choice, rng);
    },
    seed(seed: number) {
      rng = createRng(checkSeed(seed));
    },
  };
}

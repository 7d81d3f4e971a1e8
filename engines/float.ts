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
import type { Engine, EngineSession, LogitsWanted, SamplingOptions, TokenLogprobs } from "../model/engine.ts";
import { buildModel, createCache, forward, type KVCache, type Model } from "../model/qwen3.ts";
import { createRng, type Rng } from "../model/random.ts";
import { floatLogprobs, neverSampled, pickToken, type SpecialIds } from "../model/sample.ts";
import { byteTokenizer } from "../model/tokenizer.ts";
import { checkSampling, checkSeed } from "../model/sampling.ts";
import type { Tensor } from "../model/tensor.ts";
import {
  decodeFloatSession,
  encodeFloatSession,
  floatSessionShape,
  type SessionShape,
} from "../formats/session.ts";

/** How a float engine runs, and how it may treat the tensors it is given. */
export interface FloatEngineOptions {
  /**
   * The caller will never write the tensors again (they were read from a file for this engine alone),
   * so the kernels may keep prepared copies of them: see kernels/types.ts `Kernels.freeze`.
   */
  frozen?: boolean;
  /** The kernel set (kernels/kernels.ts `kernelSet`; default the WebAssembly SIMD set where there is one). */
  kernels?: Kernels;
  /** The tokenizer's special ids, which the sampler never picks (model/sample.ts `neverSampled`). */
  specials?: SpecialIds;
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
  return floatEngineOf(model, source, options.specials);
}

/**
 * The float engine over a model already built, on the model's kernel set: how a model made in memory
 * (live training weights, a test's random init) generates and is measured through the `Engine` interface.
 * Its sessions save as float sessions (formats/session.md, version 2), bound to the model by
 * `floatModelDigest` of its config and tensors (computed once, on the first save or restore).
 */
export function floatEngineOf(model: Model, source = "model", specials?: SpecialIds): Engine {
  const never = neverSampled(model.config, specials);
  let shape: SessionShape | undefined;
  const shapeOf = () => shape ??= floatSessionShape(model.config, model.tensors);
  return {
    kind: "float",
    config: model.config,
    source,
    tokenizer: byteTokenizer, // engines/mod.ts loadEngine sets the model's own
    start: () => floatSession(model, never, shapeOf, freshState(model)),
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const d = decodeFloatSession(bytes, shapeOf(), "float", where);
      const st = freshState(model);
      st.tokens.push(...d.tokens);
      st.cache.length = d.position;
      d.keys.forEach((k, l) => st.cache.keys[l].set(k));
      d.values.forEach((v, l) => st.cache.values[l].set(v));
      st.rng = createRng(d.rng);
      st.pending = d.position > 0 ? d.logits : undefined;
      return floatSession(model, never, shapeOf, st);
    },
  };
}

/** One conversation's state on the float engine. */
interface FloatState {
  cache: KVCache;
  tokens: number[];
  rng: Rng;
  /** The last fed position's logits: what `pick` and `logprobs` read. */
  pending: Float32Array | undefined;
}

function freshState(model: Model): FloatState {
  return { cache: createCache(model), tokens: [], rng: createRng(0), pending: undefined };
}

/** A deep copy: the same continuation, bit for bit, and nothing shared. */
function copyState(st: FloatState): FloatState {
  const c = st.cache;
  return {
    cache: { ...c, keys: c.keys.map((k) => k.slice()), values: c.values.map((v) => v.slice()) },
    tokens: [...st.tokens],
    rng: createRng(st.rng.state()),
    pending: st.pending?.slice(),
  };
}

function floatSession(
  model: Model,
  never: Uint8Array,
  shapeOf: () => SessionShape,
  st: FloatState,
): EngineSession {
  const V = model.config.vocab_size;
  const kvDim = model.config.num_key_value_heads * model.config.head_dim;
  const cache = st.cache, tokens = st.tokens;
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
        st.pending = logits.subarray(logits.length - V);
        if (wanted === "all") return Promise.resolve(logits);
        return Promise.resolve(wanted === "last" ? st.pending.slice() : new Float32Array(0));
      } catch (e) {
        return Promise.reject(e);
      }
    },
    pick(options: SamplingOptions = {}) {
      const choice = checkSampling(options);
      if (!st.pending) throw new Error("pick: nothing fed yet, so there is no next-token distribution");
      return pickToken(st.pending, 0, V, choice, st.rng, never);
    },
    seed(seed: number) {
      st.rng = createRng(checkSeed(seed));
    },
    logprobs(ids: readonly number[], top: number): TokenLogprobs {
      if (!st.pending) throw new Error("logprobs: nothing fed yet, so there is no next-token distribution");
      return floatLogprobs(st.pending, 0, V, ids, top);
    },
    save(): Uint8Array {
      const n = tokens.length;
      return encodeFloatSession({
        shape: shapeOf(),
        engine: "float",
        position: n,
        tokens,
        rng: st.rng.state(),
        logits: st.pending ?? new Float32Array(0),
        keys: cache.keys.map((k) => k.subarray(0, n * kvDim)),
        values: cache.values.map((v) => v.subarray(0, n * kvDim)),
      });
    },
    fork: () => floatSession(model, never, shapeOf, copyState(st)),
  };
}

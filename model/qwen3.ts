/**
 * The Qwen3 decoder with exactly the maths of Hugging Face's Qwen3ForCausalLM, on CPU kernels:
 * RMSNorm, per-head q/k RMSNorm before rotate-half RoPE, grouped-query causal attention scaled by
 * 1/sqrt(head_dim), a SwiGLU MLP, no biases, a final norm and an lm_head (tied when the config says so).
 *
 * @example
 * ```ts
 * import { buildModel, createCache, forward } from "./qwen3.ts";
 * import type { ModelConfig } from "./config.ts";
 * import type { Tensor } from "./tensor.ts";
 * declare const cfg: ModelConfig, tensors: Tensor[];
 * const model = buildModel(cfg, tensors);
 * const cache = createCache(model);
 * const logits = forward(model, cache, [256, 84, 104]); // [3, vocab]: one row per position
 * const next = forward(model, cache, [101]);            // one-token decode, reusing the cache
 * ```
 * @module
 */
import { checkTensors, type ModelConfig, paramShapes } from "./config.ts";
import { FormatError } from "./error.ts";
import type { Tensor } from "./tensor.ts";
import {
  defaultKernels,
  type Kernels,
  rmsnorm,
  ropeHead,
  type RopeTables,
  ropeTables,
} from "../kernels/kernels.ts";

/**
 * One decoder layer's weights. `W` is how a backend holds a weight: a Float32Array here, a GPU buffer in
 * the WebGPU engine. The fields, their tensor names and their order are the model's one weight layout.
 */
export interface Layer<W = Float32Array> {
  inputNorm: W;
  wq: W;
  wk: W;
  wv: W;
  qNorm: W;
  kNorm: W;
  wo: W;
  postNorm: W;
  wGate: W;
  wUp: W;
  wDown: W;
}

/** Each layer field's tensor name, after the `model.layers.N.` prefix. */
export const LAYER_TENSORS: Readonly<Record<keyof Layer, string>> = {
  inputNorm: "input_layernorm.weight",
  wq: "self_attn.q_proj.weight",
  wk: "self_attn.k_proj.weight",
  wv: "self_attn.v_proj.weight",
  qNorm: "self_attn.q_norm.weight",
  kNorm: "self_attn.k_norm.weight",
  wo: "self_attn.o_proj.weight",
  postNorm: "post_attention_layernorm.weight",
  wGate: "mlp.gate_proj.weight",
  wUp: "mlp.up_proj.weight",
  wDown: "mlp.down_proj.weight",
};

/** Every weight a forward pass reads, held the way one backend holds them. */
export interface Weights<W = Float32Array> {
  embed: W;
  layers: Layer<W>[];
  norm: W;
  /** The same object as `embed` when the config ties them. */
  lmHead: W;
}

/**
 * A model ready to run: its config, the named tensors it was built from, views into them, and the
 * kernel set its forward pass runs on.
 */
export interface Model extends Weights<Float32Array> {
  config: ModelConfig;
  tensors: Tensor[];
  rope: RopeTables;
  kernels: Kernels;
}

/**
 * The model's weights carried over to another backend by `put` (an upload to a GPU, say), with the same
 * layout; a tied lm_head is put once and shared, as it is here.
 */
export function mapWeights<W>(model: Model, put: (data: Float32Array, name: string) => W): Weights<W> {
  const data = new Map(model.tensors.map((t) => [t.name, t.data]));
  return weightsByName(model.config, (name) => put(data.get(name)!, name));
}

/**
 * The weight layout filled by tensor name (`get` is asked once per tensor the config implies; a tied
 * lm_head is the embedding, asked for once).
 *
 * @example
 * ```ts
 * import { weightsByName } from "./qwen3.ts";
 * import type { ModelConfig } from "./config.ts";
 * import { byName, type Tensor } from "./tensor.ts";
 * declare const config: ModelConfig, tensors: Tensor[];
 * const w = weightsByName(config, (name) => byName(tensors, name).data);
 * ```
 */
export function weightsByName<W>(config: ModelConfig, get: (name: string) => W): Weights<W> {
  const embed = get("model.embed_tokens.weight");
  const layers = Array.from({ length: config.num_hidden_layers }, (_, i) => {
    const out = {} as Layer<W>;
    for (const key of Object.keys(LAYER_TENSORS) as (keyof Layer)[]) {
      out[key] = get(`model.layers.${i}.${LAYER_TENSORS[key]}`);
    }
    return out;
  });
  const norm = get("model.norm.weight");
  const lmHead = config.tie_word_embeddings ? embed : get("lm_head.weight");
  return { embed, layers, norm, lmHead };
}

/**
 * Builds a model from named tensors, checking them against the shapes the config implies.
 * A missing tensor, an unknown name or a shape that differs is refused by name; `where` names the
 * source (a file) in the message. The model runs on `kernels` (kernels/kernels.ts `kernelSet`; default
 * the WebAssembly SIMD set where the runtime has it).
 */
export function buildModel(
  config: ModelConfig,
  tensors: Tensor[],
  where = "model",
  kernels: Kernels = defaultKernels,
): Model {
  const bad = checkTensors(config, tensors);
  if (bad) throw new FormatError(where, bad.code, bad.tensor, `${where}: ${bad.message}`, bad);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const expected = paramShapes(config);
  return {
    config,
    tensors: expected.map((p) => byName.get(p.name)!),
    ...weightsByName(config, (n) => byName.get(n)!.data),
    rope: ropeTables(config.max_position_embeddings, config.head_dim, config.rope_theta),
    kernels,
  };
}

/** Keys and values of every layer for the positions seen so far. */
export interface KVCache {
  keys: Float32Array[];
  values: Float32Array[];
  /** Positions filled. */
  length: number;
  capacity: number;
}

/** An empty cache for up to `capacity` positions (default: max_position_embeddings). */
export function createCache(model: Model, capacity = model.config.max_position_embeddings): KVCache {
  const kvDim = model.config.num_key_value_heads * model.config.head_dim;
  const n = model.config.num_hidden_layers;
  return {
    keys: Array.from({ length: n }, () => new Float32Array(capacity * kvDim)),
    values: Array.from({ length: n }, () => new Float32Array(capacity * kvDim)),
    length: 0,
    capacity,
  };
}

/** The activations of one forward pass over T positions, in a backend's buffer type. */
export interface Activations<B> {
  /** The residual stream, [T, hidden]. */
  x: B;
  /** Normalized input of an attention or MLP block, [T, hidden]. */
  xn: B;
  /** [T, heads × head_dim]. */
  q: B;
  /** [T, kv_heads × head_dim]. */
  k: B;
  v: B;
  /** Attention output, [T, heads × head_dim]. */
  att: B;
  /** Output of o_proj or down_proj before the residual add, [T, hidden]. */
  proj: B;
  /** [T, intermediate]; holds SwiGLU's result. */
  gate: B;
  up: B;
  /** [T, vocab], or [1, vocab] when only the last position's logits are asked for. */
  logits: B;
}

/**
 * The kernels a Qwen3 forward pass is made of. A backend (the CPU here, WebGPU in `kernels/webgpu/`)
 * implements them over its own buffers; `walkForward` alone fixes which run, in what order, on what shapes.
 * Matrices are `[out, in]`: `matmul` computes `out[m, n] = sum_k x[m, k] * w[n, k]`.
 */
export interface Qwen3Kernels<B, W> {
  embed(x: B, tokens: ArrayLike<number>, table: W, dim: number): void;
  /** `out` may be `x` (in place). */
  rmsnorm(out: B, x: B, w: W, rows: number, dim: number, eps: number): void;
  matmul(out: B, x: B, w: W, M: number, K: number, N: number): void;
  /** Rotate-half RoPE in place on x: [T, heads, headDim], row t at position pos0 + t. */
  rope(x: B, T: number, heads: number, pos0: number): void;
  /** Appends k and v ([T, kvDim]) to `layer`'s cache at pos0 and writes causal GQA attention of q into out. */
  attention(out: B, q: B, k: B, v: B, layer: number, T: number, pos0: number): void;
  /** x += y over n values. */
  addInto(x: B, y: B, n: number): void;
  /** gate = silu(gate) * up over n values. */
  swiglu(gate: B, up: B, n: number): void;
  /** Copies row `row` of x ([*, dim]) into row 0 of out. */
  copyRow(out: B, x: B, row: number, dim: number): void;
}

/** Which positions get logits: all of them (`[T, vocab]`), the last (`[1, vocab]`), or none. */
export type HeadRows = "all" | "last" | "none";

/**
 * Refuses, before anything runs, tokens that cannot be fed at pos0: an id outside the vocabulary, or
 * positions past the cache's `capacity` or the config's max_position_embeddings.
 */
export function checkTokens(c: ModelConfig, tokens: ArrayLike<number>, pos0: number, capacity: number): void {
  const T = tokens.length, V = c.vocab_size;
  if (pos0 + T > capacity) {
    throw new RangeError(`context full: ${pos0} + ${T} positions exceed the cache's ${capacity}`);
  }
  if (pos0 + T > c.max_position_embeddings) {
    throw new RangeError(
      `position ${pos0 + T - 1} is past max_position_embeddings = ${c.max_position_embeddings}`,
    );
  }
  for (let t = 0; t < T; t++) {
    const id = tokens[t];
    if (!(id >= 0 && id < V && Number.isInteger(id))) {
      throw new RangeError(`token id ${id} is outside [0, ${V})`);
    }
  }
}

/**
 * The Qwen3 forward pass, once for every backend: runs `tokens` at positions pos0.. through the layers,
 * appending to the backend's KV cache, then the final norm and lm_head on the rows `head` asks for.
 * Checks token ids and that the positions fit `capacity` and the config before any kernel runs.
 */
export function walkForward<B, W>(
  c: ModelConfig,
  w: Weights<W>,
  k: Qwen3Kernels<B, W>,
  a: Activations<B>,
  tokens: ArrayLike<number>,
  pos0: number,
  capacity: number,
  head: HeadRows,
): void {
  const T = tokens.length, H = c.hidden_size, hd = c.head_dim, eps = c.rms_norm_eps;
  const nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const qDim = nh * hd, kvDim = nkv * hd, I = c.intermediate_size, V = c.vocab_size;
  checkTokens(c, tokens, pos0, capacity);
  k.embed(a.x, tokens, w.embed, H);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const L = w.layers[l];
    k.rmsnorm(a.xn, a.x, L.inputNorm, T, H, eps);
    k.matmul(a.q, a.xn, L.wq, T, H, qDim);
    k.matmul(a.k, a.xn, L.wk, T, H, kvDim);
    k.matmul(a.v, a.xn, L.wv, T, H, kvDim);
    k.rmsnorm(a.q, a.q, L.qNorm, T * nh, hd, eps);
    k.rmsnorm(a.k, a.k, L.kNorm, T * nkv, hd, eps);
    k.rope(a.q, T, nh, pos0);
    k.rope(a.k, T, nkv, pos0);
    k.attention(a.att, a.q, a.k, a.v, l, T, pos0);
    k.matmul(a.proj, a.att, L.wo, T, qDim, H);
    k.addInto(a.x, a.proj, T * H);
    k.rmsnorm(a.xn, a.x, L.postNorm, T, H, eps);
    k.matmul(a.gate, a.xn, L.wGate, T, H, I);
    k.matmul(a.up, a.xn, L.wUp, T, H, I);
    k.swiglu(a.gate, a.up, T * I);
    k.matmul(a.proj, a.gate, L.wDown, T, I, H);
    k.addInto(a.x, a.proj, T * H);
  }
  if (head === "none") return;
  if (head === "last") {
    k.copyRow(a.proj, a.x, T - 1, H);
    k.rmsnorm(a.xn, a.proj, w.norm, 1, H, eps);
    k.matmul(a.logits, a.xn, w.lmHead, 1, H, V);
  } else {
    k.rmsnorm(a.xn, a.x, w.norm, T, H, eps);
    k.matmul(a.logits, a.xn, w.lmHead, T, H, V);
  }
}

/** The CPU kernels over f32 arrays (the model's kernel set), attending over (and appending to) `cache`. */
function cpuKernels(model: Model, cache: KVCache): Qwen3Kernels<Float32Array, Float32Array> {
  const c = model.config, hd = c.head_dim, kernels = model.kernels;
  const nh = c.num_attention_heads, nkv = c.num_key_value_heads, kvDim = nkv * hd;
  return {
    embed(x, tokens, table, dim) {
      for (let t = 0; t < tokens.length; t++) {
        x.set(table.subarray(tokens[t] * dim, tokens[t] * dim + dim), t * dim);
      }
    },
    rmsnorm,
    matmul: (out, x, w, M, K, N) => kernels.matmul(out, x, w, M, K, N),
    rope(x, T, heads, pos0) {
      for (let t = 0; t < T; t++) {
        for (let h = 0; h < heads; h++) ropeHead(x, (t * heads + h) * hd, pos0 + t, model.rope);
      }
    },
    attention(att, q, k, v, layer, T, pos0) {
      const K = cache.keys[layer], Vc = cache.values[layer];
      K.set(k.subarray(0, T * kvDim), pos0 * kvDim);
      Vc.set(v.subarray(0, T * kvDim), pos0 * kvDim);
      kernels.attendCached(att, q, K, Vc, T, pos0, nh, nkv, hd);
    },
    addInto(x, y, n) {
      for (let i = 0; i < n; i++) x[i] += y[i];
    },
    swiglu: (gate, up, n) => kernels.swiglu(gate, gate, up, n),
    copyRow(out, x, row, dim) {
      out.set(x.subarray(row * dim, row * dim + dim));
    },
  };
}

/**
 * Runs `tokens` through the model at the positions after those already in `cache`, appends their keys
 * and values, and returns the logits of every one of them: `[tokens.length, vocab_size]`.
 * Prefill and one-token decode are the same call; both give the same bits as a full recompute.
 */
export function forward(model: Model, cache: KVCache, tokens: ArrayLike<number>): Float32Array {
  const c = model.config, T = tokens.length, H = c.hidden_size, I = c.intermediate_size;
  const qDim = c.num_attention_heads * c.head_dim, kvDim = c.num_key_value_heads * c.head_dim;
  const a: Activations<Float32Array> = {
    x: new Float32Array(T * H),
    xn: new Float32Array(T * H),
    q: new Float32Array(T * qDim),
    k: new Float32Array(T * kvDim),
    v: new Float32Array(T * kvDim),
    att: new Float32Array(T * qDim),
    proj: new Float32Array(T * H),
    gate: new Float32Array(T * I),
    up: new Float32Array(T * I),
    logits: new Float32Array(T * c.vocab_size),
  };
  walkForward(c, model, cpuKernels(model, cache), a, tokens, cache.length, cache.capacity, "all");
  cache.length += T;
  return a.logits;
}

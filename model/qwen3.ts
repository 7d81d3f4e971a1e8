/**
 * The Qwen3 decoder with exactly the maths of Hugging Face's Qwen3ForCausalLM, on CPU kernels:
 * RMSNorm, per-head q/k RMSNorm before rotate-half RoPE, grouped-query causal attention scaled by
 * 1/sqrt(head_dim), a SwiGLU MLP, no biases, a final norm and an lm_head (tied when the config says so).
 *
 * @example
 * ```ts
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
import { matmul, rmsnorm, ropeHead, type RopeTables, ropeTables, silu, softmax } from "../kernels/cpu.ts";

/** One decoder layer's weights. */
export interface Layer {
  inputNorm: Float32Array;
  wq: Float32Array;
  wk: Float32Array;
  wv: Float32Array;
  qNorm: Float32Array;
  kNorm: Float32Array;
  wo: Float32Array;
  postNorm: Float32Array;
  wGate: Float32Array;
  wUp: Float32Array;
  wDown: Float32Array;
}

/** A model ready to run: its config, the named tensors it was built from, and views into them. */
export interface Model {
  config: ModelConfig;
  tensors: Tensor[];
  embed: Float32Array;
  layers: Layer[];
  norm: Float32Array;
  lmHead: Float32Array;
  rope: RopeTables;
}

/**
 * Builds a model from named tensors, checking them against the shapes the config implies.
 * A missing tensor, an unknown name or a shape that differs is refused by name; `where` names the
 * source (a file) in the message.
 */
export function buildModel(config: ModelConfig, tensors: Tensor[], where = "model"): Model {
  const bad = checkTensors(config, tensors);
  if (bad) throw new FormatError(where, bad.tensor, `${where}: ${bad.message}`, bad);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const expected = paramShapes(config);
  const get = (n: string) => byName.get(n)!.data;
  const layers: Layer[] = [];
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    layers.push({
      inputNorm: get(p + "input_layernorm.weight"),
      wq: get(p + "self_attn.q_proj.weight"),
      wk: get(p + "self_attn.k_proj.weight"),
      wv: get(p + "self_attn.v_proj.weight"),
      qNorm: get(p + "self_attn.q_norm.weight"),
      kNorm: get(p + "self_attn.k_norm.weight"),
      wo: get(p + "self_attn.o_proj.weight"),
      postNorm: get(p + "post_attention_layernorm.weight"),
      wGate: get(p + "mlp.gate_proj.weight"),
      wUp: get(p + "mlp.up_proj.weight"),
      wDown: get(p + "mlp.down_proj.weight"),
    });
  }
  const embed = get("model.embed_tokens.weight");
  return {
    config,
    tensors: expected.map((p) => byName.get(p.name)!),
    embed,
    layers,
    norm: get("model.norm.weight"),
    lmHead: config.tie_word_embeddings ? embed : get("lm_head.weight"),
    rope: ropeTables(config.max_position_embeddings, config.head_dim, config.rope_theta),
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

/**
 * Runs `tokens` through the model at the positions after those already in `cache`, appends their keys
 * and values, and returns the logits of every one of them: `[tokens.length, vocab_size]`.
 * Prefill and one-token decode are the same call; both give the same bits as a full recompute.
 */
export function forward(model: Model, cache: KVCache, tokens: ArrayLike<number>): Float32Array {
  const c = model.config;
  const T = tokens.length, H = c.hidden_size, hd = c.head_dim;
  const nh = c.num_attention_heads, nkv = c.num_key_value_heads, group = nh / nkv;
  const qDim = nh * hd, kvDim = nkv * hd, I = c.intermediate_size, V = c.vocab_size;
  const pos0 = cache.length;
  if (pos0 + T > cache.capacity) {
    throw new RangeError(`context full: ${pos0} + ${T} positions exceed the cache's ${cache.capacity}`);
  }
  if (pos0 + T > c.max_position_embeddings) {
    throw new RangeError(`position ${pos0 + T - 1} is past max_position_embeddings = ${c.max_position_embeddings}`);
  }
  const x = new Float32Array(T * H);
  for (let t = 0; t < T; t++) {
    const id = tokens[t];
    if (!(id >= 0 && id < V && Number.isInteger(id))) throw new RangeError(`token id ${id} is outside [0, ${V})`);
    x.set(model.embed.subarray(id * H, id * H + H), t * H);
  }
  const xn = new Float32Array(T * H);
  const q = new Float32Array(T * qDim), k = new Float32Array(T * kvDim), v = new Float32Array(T * kvDim);
  const att = new Float32Array(T * qDim), proj = new Float32Array(T * H);
  const gate = new Float32Array(T * I), up = new Float32Array(T * I);
  const scores = new Float32Array(pos0 + T);
  const scale = 1 / Math.sqrt(hd);

  for (let l = 0; l < c.num_hidden_layers; l++) {
    const L = model.layers[l];
    rmsnorm(xn, x, L.inputNorm, T, H, c.rms_norm_eps);
    matmul(q, xn, L.wq, T, H, qDim);
    matmul(k, xn, L.wk, T, H, kvDim);
    matmul(v, xn, L.wv, T, H, kvDim);
    rmsnorm(q, q, L.qNorm, T * nh, hd, c.rms_norm_eps);
    rmsnorm(k, k, L.kNorm, T * nkv, hd, c.rms_norm_eps);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < nh; h++) ropeHead(q, t * qDim + h * hd, pos0 + t, model.rope);
      for (let h = 0; h < nkv; h++) ropeHead(k, t * kvDim + h * hd, pos0 + t, model.rope);
    }
    const K = cache.keys[l], Vc = cache.values[l];
    K.set(k, pos0 * kvDim);
    Vc.set(v, pos0 * kvDim);
    for (let t = 0; t < T; t++) {
      const n = pos0 + t + 1;
      for (let h = 0; h < nh; h++) {
        const qo = t * qDim + h * hd, ko = Math.floor(h / group) * hd;
        for (let p = 0; p < n; p++) {
          let s = 0;
          const kp = p * kvDim + ko;
          for (let i = 0; i < hd; i++) s += q[qo + i] * K[kp + i];
          scores[p] = s * scale;
        }
        softmax(scores, 0, n);
        for (let i = 0; i < hd; i++) {
          let s = 0;
          for (let p = 0; p < n; p++) s += scores[p] * Vc[p * kvDim + ko + i];
          att[qo + i] = s;
        }
      }
    }
    matmul(proj, att, L.wo, T, qDim, H);
    for (let i = 0; i < x.length; i++) x[i] += proj[i];
    rmsnorm(xn, x, L.postNorm, T, H, c.rms_norm_eps);
    matmul(gate, xn, L.wGate, T, H, I);
    matmul(up, xn, L.wUp, T, H, I);
    for (let i = 0; i < gate.length; i++) gate[i] = silu(gate[i]) * up[i];
    matmul(proj, gate, L.wDown, T, I, H);
    for (let i = 0; i < x.length; i++) x[i] += proj[i];
  }
  cache.length = pos0 + T;
  rmsnorm(xn, x, model.norm, T, H, c.rms_norm_eps);
  const logits = new Float32Array(T * V);
  matmul(logits, xn, model.lmHead, T, H, V);
  return logits;
}

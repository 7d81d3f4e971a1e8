/**
 * Training maths: the loss and its gradient for one sequence (forward with saved activations, then
 * the hand-written backward), AdamW, the learning-rate schedule, gradient clipping and EMA, over
 * parameters kept in one flat f32 buffer so workers can share it.
 *
 * @example
 * ```ts
 * import { createScratch, paramLayout, sequenceLossAndGrad } from "./train.ts";
 * import { PRESETS } from "./config.ts";
 * const cfg = PRESETS.tiny;
 * declare const inputs: number[], targets: number[]; // 256 token ids, and the same shifted by one
 * const layout = paramLayout(cfg);
 * const params = new Float32Array(layout.size), grads = new Float32Array(layout.size);
 * const loss = sequenceLossAndGrad(cfg, layout, params, grads, inputs, targets, createScratch(cfg, 256));
 * ```
 * @module
 */
import { checkTensors, type ModelConfig, paramShapes } from "./config.ts";
import type { Tensor } from "./tensor.ts";
import {
  crossEntropyBackward,
  defaultKernels,
  type Kernels,
  rmsnorm,
  rmsnormBackward,
  ropeBackward,
  ropeHead,
  type RopeTables,
  ropeTables,
} from "../kernels/kernels.ts";

/** Where each parameter lives in the flat buffer. */
export interface ParamLayout {
  size: number;
  entries: Array<{ name: string; dims: number[]; offset: number; length: number }>;
  offset: Record<string, number>;
}

/** The flat layout of a config's parameters, in canonical order. */
export function paramLayout(cfg: ModelConfig): ParamLayout {
  let off = 0;
  const entries = paramShapes(cfg).map(({ name, dims }) => {
    const length = dims.reduce((a, b) => a * b, 1);
    const e = { name, dims, offset: off, length };
    off += length;
    return e;
  });
  return { size: off, entries, offset: Object.fromEntries(entries.map((e) => [e.name, e.offset])) };
}

/** Views of a flat buffer as named tensors (no copy). */
export function viewTensors(layout: ParamLayout, flat: Float32Array): Tensor[] {
  return layout.entries.map((e) => ({
    name: e.name,
    dims: [...e.dims],
    data: flat.subarray(e.offset, e.offset + e.length),
  }));
}

/** Copies named tensors into a flat buffer, in layout order. */
export function flattenTensors(
  layout: ParamLayout,
  tensors: Tensor[],
  flat: Float32Array = new Float32Array(layout.size),
): Float32Array {
  const bad = checkTensors(layout.entries, tensors);
  if (bad) throw new Error(`flattenTensors: ${bad.message}`);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  for (const e of layout.entries) flat.set(byName.get(e.name)!.data, e.offset);
  return flat;
}

/** Buffers reused across sequences of up to T tokens, and the kernel set the trainer runs on. */
export interface Scratch {
  T: number;
  kernels: Kernels;
  rope: RopeTables;
  layers: LayerActs[];
  xFinal: Float32Array;
  rstdFinal: Float32Array;
  xnFinal: Float32Array;
  logits: Float32Array;
  // Gradient work buffers.
  dx: Float32Array;
  dxn: Float32Array;
  dh: Float32Array;
  dg: Float32Array;
  du: Float32Array;
  dAtt: Float32Array;
  dq: Float32Array;
  dk: Float32Array;
  dv: Float32Array;
  dqRaw: Float32Array;
  dkRaw: Float32Array;
  dxn2: Float32Array;
}

interface LayerActs {
  xIn: Float32Array;
  rstd1: Float32Array;
  xn1: Float32Array;
  qRaw: Float32Array;
  kRaw: Float32Array;
  rstdQ: Float32Array;
  rstdK: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  probs: Float32Array;
  att: Float32Array;
  xMid: Float32Array;
  rstd2: Float32Array;
  xn2: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  h: Float32Array;
}

/**
 * Allocates the activations and gradient buffers for sequences of up to T tokens; the trainer that
 * uses them runs on `kernels` (default the WebAssembly SIMD set where the runtime has it).
 */
export function createScratch(cfg: ModelConfig, T: number, kernels: Kernels = defaultKernels): Scratch {
  const H = cfg.hidden_size, hd = cfg.head_dim, nh = cfg.num_attention_heads, nkv = cfg.num_key_value_heads;
  const qDim = nh * hd, kvDim = nkv * hd, I = cfg.intermediate_size, V = cfg.vocab_size;
  const f = (n: number) => new Float32Array(n);
  const layers = Array.from({ length: cfg.num_hidden_layers }, () => ({
    xIn: f(T * H),
    rstd1: f(T),
    xn1: f(T * H),
    qRaw: f(T * qDim),
    kRaw: f(T * kvDim),
    rstdQ: f(T * nh),
    rstdK: f(T * nkv),
    q: f(T * qDim),
    k: f(T * kvDim),
    v: f(T * kvDim),
    probs: f(nh * T * T),
    att: f(T * qDim),
    xMid: f(T * H),
    rstd2: f(T),
    xn2: f(T * H),
    gate: f(T * I),
    up: f(T * I),
    h: f(T * I),
  }));
  return {
    T,
    kernels,
    rope: ropeTables(Math.max(T, 1), hd, cfg.rope_theta),
    layers,
    xFinal: f(T * H),
    rstdFinal: f(T),
    xnFinal: f(T * H),
    logits: f(T * V),
    dx: f(T * H),
    dxn: f(T * H),
    dh: f(T * I),
    dg: f(T * I),
    du: f(T * I),
    dAtt: f(T * qDim),
    dq: f(T * qDim),
    dk: f(T * kvDim),
    dv: f(T * kvDim),
    dqRaw: f(T * qDim),
    dkRaw: f(T * kvDim),
    dxn2: f(T * H),
  };
}

/**
 * Loss (summed nats over the sequence) of predicting `targets` from `inputs` (positions 0..T-1),
 * and its gradient times `gradScale`, added into `grads` (same flat layout as `params`), on the
 * scratch's kernel set.
 */
export function sequenceLossAndGrad(
  cfg: ModelConfig,
  layout: ParamLayout,
  params: Float32Array,
  grads: Float32Array,
  inputs: ArrayLike<number>,
  targets: ArrayLike<number>,
  s: Scratch,
  gradScale = 1,
): number {
  const T = inputs.length;
  if (T > s.T) throw new RangeError(`sequence of ${T} is longer than the scratch's ${s.T}`);
  const H = cfg.hidden_size, hd = cfg.head_dim, nh = cfg.num_attention_heads, nkv = cfg.num_key_value_heads;
  const qDim = nh * hd,
    kvDim = nkv * hd,
    I = cfg.intermediate_size,
    V = cfg.vocab_size,
    eps = cfg.rms_norm_eps;
  const shape = { T, heads: nh, kvHeads: nkv, headDim: hd };
  const P = (name: string, n: number) => params.subarray(layout.offset[name], layout.offset[name] + n);
  const G = (name: string, n: number) => grads.subarray(layout.offset[name], layout.offset[name] + n);
  const embedName = "model.embed_tokens.weight";
  const headName = cfg.tie_word_embeddings ? embedName : "lm_head.weight";
  const embed = P(embedName, V * H);
  const { kernels } = s;

  // ---- forward, saving what the backward needs
  // Each layer's input buffer is written by the layer before it (the first by the embedding).
  const x0 = s.layers.length ? s.layers[0].xIn : s.xFinal;
  for (let t = 0; t < T; t++) x0.set(embed.subarray(inputs[t] * H, inputs[t] * H + H), t * H);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const a = s.layers[l], p = `model.layers.${l}.`;
    rmsnorm(a.xn1, a.xIn, P(p + "input_layernorm.weight", H), T, H, eps, a.rstd1);
    kernels.matmul(a.qRaw, a.xn1, P(p + "self_attn.q_proj.weight", qDim * H), T, H, qDim);
    kernels.matmul(a.kRaw, a.xn1, P(p + "self_attn.k_proj.weight", kvDim * H), T, H, kvDim);
    kernels.matmul(a.v, a.xn1, P(p + "self_attn.v_proj.weight", kvDim * H), T, H, kvDim);
    rmsnorm(a.q, a.qRaw, P(p + "self_attn.q_norm.weight", hd), T * nh, hd, eps, a.rstdQ);
    rmsnorm(a.k, a.kRaw, P(p + "self_attn.k_norm.weight", hd), T * nkv, hd, eps, a.rstdK);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < nh; h++) ropeHead(a.q, t * qDim + h * hd, t, s.rope);
      for (let h = 0; h < nkv; h++) ropeHead(a.k, t * kvDim + h * hd, t, s.rope);
    }
    kernels.attentionForward(a.att, a.probs, a.q, a.k, a.v, shape);
    kernels.matmul(a.xMid, a.att, P(p + "self_attn.o_proj.weight", H * qDim), T, qDim, H);
    addInto(a.xMid, a.xIn, T * H);
    rmsnorm(a.xn2, a.xMid, P(p + "post_attention_layernorm.weight", H), T, H, eps, a.rstd2);
    kernels.matmul(a.gate, a.xn2, P(p + "mlp.gate_proj.weight", I * H), T, H, I);
    kernels.matmul(a.up, a.xn2, P(p + "mlp.up_proj.weight", I * H), T, H, I);
    kernels.swiglu(a.h, a.gate, a.up, T * I);
    const next = l + 1 < cfg.num_hidden_layers ? s.layers[l + 1].xIn : s.xFinal;
    kernels.matmul(next, a.h, P(p + "mlp.down_proj.weight", H * I), T, I, H);
    addInto(next, a.xMid, T * H);
  }
  rmsnorm(s.xnFinal, s.xFinal, P("model.norm.weight", H), T, H, eps, s.rstdFinal);
  const head = P(headName, V * H);
  const logits = s.logits.subarray(0, T * V);
  kernels.matmul(logits, s.xnFinal, head, T, H, V);
  const loss = crossEntropyBackward(logits, targets, V, gradScale);

  // ---- backward
  const dx = s.dx.subarray(0, T * H), dxn = s.dxn.subarray(0, T * H);
  // logits = xn @ head^T: dxn = dlogits @ head; dhead += dlogits^T @ xn
  linearBackward(kernels, dxn, G(headName, V * H), logits, s.xnFinal, head, T, H, V);
  dx.fill(0);
  rmsnormBackward(dx, G("model.norm.weight", H), dxn, s.xFinal, P("model.norm.weight", H), s.rstdFinal, T, H);
  for (let l = cfg.num_hidden_layers - 1; l >= 0; l--) {
    const a = s.layers[l], p = `model.layers.${l}.`;
    // MLP: x_out = x_mid + down(h)
    const dh = s.dh.subarray(0, T * I), dg = s.dg.subarray(0, T * I), du = s.du.subarray(0, T * I);
    linearBackward(
      kernels,
      dh,
      G(p + "mlp.down_proj.weight", H * I),
      dx,
      a.h,
      P(p + "mlp.down_proj.weight", H * I),
      T,
      I,
      H,
    );
    kernels.swigluBackward(dg, du, dh, a.gate, a.up);
    linearBackward(
      kernels,
      dxn,
      G(p + "mlp.gate_proj.weight", I * H),
      dg,
      a.xn2,
      P(p + "mlp.gate_proj.weight", I * H),
      T,
      H,
      I,
    );
    const dxn2b = s.dxn2.subarray(0, T * H);
    linearBackward(
      kernels,
      dxn2b,
      G(p + "mlp.up_proj.weight", I * H),
      du,
      a.xn2,
      P(p + "mlp.up_proj.weight", I * H),
      T,
      H,
      I,
    );
    addInto(dxn, dxn2b, T * H);
    rmsnormBackward(
      dx,
      G(p + "post_attention_layernorm.weight", H),
      dxn,
      a.xMid,
      P(p + "post_attention_layernorm.weight", H),
      a.rstd2,
      T,
      H,
    );
    // attention: x_mid = x_in + o_proj(att)
    const dAtt = s.dAtt.subarray(0, T * qDim);
    linearBackward(
      kernels,
      dAtt,
      G(p + "self_attn.o_proj.weight", H * qDim),
      dx,
      a.att,
      P(p + "self_attn.o_proj.weight", H * qDim),
      T,
      qDim,
      H,
    );
    const dq = s.dq.subarray(0, T * qDim), dk = s.dk.subarray(0, T * kvDim), dv = s.dv.subarray(0, T * kvDim);
    dq.fill(0), dk.fill(0), dv.fill(0);
    kernels.attentionBackward(dq, dk, dv, dAtt, a.probs, a.q, a.k, a.v, shape);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < nh; h++) ropeBackward(dq, t * qDim + h * hd, t, s.rope);
      for (let h = 0; h < nkv; h++) ropeBackward(dk, t * kvDim + h * hd, t, s.rope);
    }
    // q/k norms: their inputs were qRaw/kRaw; their outputs (before RoPE) were overwritten, so the
    // backward uses rstd and the raw inputs, which is all RMSNorm's backward needs.
    const dqRaw = s.dqRaw.subarray(0, T * qDim);
    dqRaw.fill(0);
    rmsnormBackward(
      dqRaw,
      G(p + "self_attn.q_norm.weight", hd),
      dq,
      a.qRaw,
      P(p + "self_attn.q_norm.weight", hd),
      a.rstdQ,
      T * nh,
      hd,
    );
    const dkRaw = s.dkRaw.subarray(0, T * kvDim);
    dkRaw.fill(0);
    rmsnormBackward(
      dkRaw,
      G(p + "self_attn.k_norm.weight", hd),
      dk,
      a.kRaw,
      P(p + "self_attn.k_norm.weight", hd),
      a.rstdK,
      T * nkv,
      hd,
    );
    linearBackward(
      kernels,
      dxn,
      G(p + "self_attn.q_proj.weight", qDim * H),
      dqRaw,
      a.xn1,
      P(p + "self_attn.q_proj.weight", qDim * H),
      T,
      H,
      qDim,
    );
    const dxnk = s.dxn2.subarray(0, T * H);
    linearBackward(
      kernels,
      dxnk,
      G(p + "self_attn.k_proj.weight", kvDim * H),
      dkRaw,
      a.xn1,
      P(p + "self_attn.k_proj.weight", kvDim * H),
      T,
      H,
      kvDim,
    );
    addInto(dxn, dxnk, T * H);
    linearBackward(
      kernels,
      dxnk,
      G(p + "self_attn.v_proj.weight", kvDim * H),
      dv,
      a.xn1,
      P(p + "self_attn.v_proj.weight", kvDim * H),
      T,
      H,
      kvDim,
    );
    addInto(dxn, dxnk, T * H);
    rmsnormBackward(
      dx,
      G(p + "input_layernorm.weight", H),
      dxn,
      a.xIn,
      P(p + "input_layernorm.weight", H),
      a.rstd1,
      T,
      H,
    );
  }
  const dEmbed = G(embedName, V * H);
  for (let t = 0; t < T; t++) addInto(dEmbed.subarray(inputs[t] * H), dx.subarray(t * H), H);
  return loss;
}

// The elementwise loops live in small functions: inside sequenceLossAndGrad, JavaScriptCore ran
// them several times slower (a loop in a large function is optimised late, if at all).
function addInto(out: Float32Array, x: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] += x[i];
}

/**
 * Backward of y = x @ W^T with x: [T, IN], W: [OUT, IN], given dy: [T, OUT].
 * Writes dx = dy @ W (overwriting) and adds dy^T @ x into dW.
 */
function linearBackward(
  kernels: Kernels,
  dxOut: Float32Array,
  dW: Float32Array,
  dy: Float32Array,
  x: Float32Array,
  W: Float32Array,
  T: number,
  IN: number,
  OUT: number,
): void {
  kernels.matmulNN(dxOut, dy, W, T, OUT, IN);
  kernels.matmulTN(dW, dy, x, OUT, T, IN, true);
}

/** AdamW hyperparameters. */
export interface AdamConfig {
  beta1: number;
  beta2: number;
  eps: number;
  weightDecay: number;
}

/**
 * One AdamW step (decoupled weight decay, not applied to 1-D tensors: norms). `step` counts from 1.
 * Only elements `from` <= i < `to` change: each element's update reads only that element, so
 * workers can each run a range and get the bits of one call over everything.
 */
export function adamwStep(
  layout: ParamLayout,
  params: Float32Array,
  grads: Float32Array,
  m: Float32Array,
  v: Float32Array,
  step: number,
  lr: number,
  c: AdamConfig,
  from = 0,
  to: number = layout.size,
): void {
  const bc1 = 1 - Math.pow(c.beta1, step), bc2 = 1 - Math.pow(c.beta2, step);
  for (const e of layout.entries) {
    const decay = e.dims.length > 1 ? c.weightDecay : 0;
    const end = Math.min(e.offset + e.length, to);
    for (let i = Math.max(e.offset, from); i < end; i++) {
      const g = grads[i];
      const mi = m[i] = c.beta1 * m[i] + (1 - c.beta1) * g;
      const vi = v[i] = c.beta2 * v[i] + (1 - c.beta2) * g * g;
      params[i] -= lr * ((mi / bc1) / (Math.sqrt(vi / bc2) + c.eps) + decay * params[i]);
    }
  }
}

/** The global L2 norm of `grads` (summed in f64, in index order). */
export function gradNorm(grads: Float32Array): number {
  let ss = 0;
  for (let i = 0; i < grads.length; i++) ss += grads[i] * grads[i];
  return Math.sqrt(ss);
}

/** The factor `clipGradNorm` scales by: 1 when `norm` <= `maxNorm`. */
export const clipFactor = (norm: number, maxNorm: number): number => (norm > maxNorm ? maxNorm / norm : 1);

/** Scales `grads` so their global L2 norm is at most `maxNorm`; returns the norm before clipping. */
export function clipGradNorm(grads: Float32Array, maxNorm: number): number {
  const norm = gradNorm(grads), k = clipFactor(norm, maxNorm);
  if (k !== 1) scaleRange(grads, k);
  return norm;
}

/** `x[i] *= k` for `from` <= i < `to`. */
export function scaleRange(x: Float32Array, k: number, from = 0, to: number = x.length): void {
  for (let i = from; i < to; i++) x[i] *= k;
}

/** `into[i] += parts[p][i]` for each part in order, for `from` <= i < `to` (the gradients' all-reduce). */
export function sumInto(into: Float32Array, parts: Float32Array[], from = 0, to: number = into.length): void {
  for (const part of parts) addRange(into, part, from, to);
}

function addRange(into: Float32Array, x: Float32Array, from: number, to: number): void {
  for (let i = from; i < to; i++) into[i] += x[i];
}

/** Linear warm-up to `peak`, then cosine decay to `floor` at `total` steps. */
export function learningRate(
  step: number,
  total: number,
  warmup: number,
  peak: number,
  floor: number,
): number {
  if (step < warmup) return (peak * (step + 1)) / warmup;
  const p = Math.min(1, (step - warmup) / Math.max(1, total - warmup));
  return floor + 0.5 * (peak - floor) * (1 + Math.cos(Math.PI * p));
}

/** ema = decay * ema + (1 - decay) * params, for `from` <= i < `to`. */
export function emaUpdate(
  ema: Float32Array,
  params: Float32Array,
  decay: number,
  from = 0,
  to: number = ema.length,
): void {
  for (let i = from; i < to; i++) ema[i] = decay * ema[i] + (1 - decay) * params[i];
}

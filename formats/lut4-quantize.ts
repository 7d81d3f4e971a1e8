/**
 * Float weights → lut4 (offline, so floats are fine here): gains folded into the projections that
 * follow them where the maths allows, each group of 32 weights given the scale on the
 * (16 + m) · 2^(E − 4) grid that minimises its squared rounding error, the integer tables computed, and
 * a per-tensor report of the rounding error. Spec: formats/lut4.md.
 *
 * @example
 * ```ts
 * const { weights, report } = quantizeModel(config, tensors, { head: "tied" });
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Tensor } from "../model/tensor.ts";
import type { LutMatrix } from "../kernels/int/gemv.ts";
import type { GainTable, HeadMode, Lut4Weights } from "./lut4-types.ts";

export type { HeadMode };

/** Rounding error of one stored tensor, against the (gain-folded) float values it stands for. */
export interface TensorError {
  name: string;
  kind: "matrix" | "gain";
  values: number;
  /** Root-mean-square error, and relative to the tensor's own RMS. */
  rmse: number;
  relRmse: number;
  maxAbsError: number;
}

/** Fixed parameters of the integer tables (the engine checks them on load). */
export const TABLES = {
  expStepLog2: -8,
  expRangeNats: 32,
  expQ: 30,
  siluStepLog2: -8,
  siluRangeLog2: 4,
  siluQ: 16,
  ropeQ: 14,
} as const;

/** The (m, E) of the grid scale that minimises Σ (w − q·s)² over a group, for E in [eLo, eHi]. */
function bestScale(
  w: Float64Array,
  off: number,
  eLo: number,
  eHi: number,
): { m: number; e: number; sse: number } {
  let best = { m: 0, e: eLo, sse: Infinity };
  for (let e = eLo; e <= eHi; e++) {
    for (let m = 0; m < 16; m++) {
      const s = (16 + m) * 2 ** (e - 4);
      let sse = 0;
      for (let i = 0; i < 32; i++) {
        const q = Math.max(-8, Math.min(7, Math.round(w[off + i] / s)));
        const d = w[off + i] - q * s;
        sse += d * d;
      }
      if (sse < best.sse) best = { m, e, sse };
    }
  }
  return best;
}

/** Quantizes a [rows, cols] matrix (cols a multiple of 32) to lut4, MSE-optimal per group. */
export function quantizeMatrix(name: string, data: ArrayLike<number>, rows: number, cols: number): {
  matrix: LutMatrix;
  error: TensorError;
} {
  if (cols % 32 !== 0) throw new RangeError(`${name}: ${cols} columns is not a multiple of 32`);
  const w = Float64Array.from(data);
  const groups = (rows * cols) / 32;
  const es = new Int32Array(groups), zero = new Uint8Array(groups);
  let eMax = -Infinity;
  // First pass: each group's best exponent with no limit, to find the matrix's exp_base.
  for (let g = 0; g < groups; g++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(w[g * 32 + i]));
    if (amax === 0) {
      zero[g] = 1;
      continue;
    }
    const ec = Math.floor(Math.log2(amax / 8));
    es[g] = bestScale(w, g * 32, ec - 1, ec + 1).e;
    eMax = Math.max(eMax, es[g]);
  }
  const expBase = Number.isFinite(eMax) ? eMax - 15 : 0;
  const nibbles = new Uint8Array((rows * cols) / 2), scales = new Uint8Array(groups);
  let sse = 0, ss = 0, maxErr = 0;
  for (let g = 0; g < groups; g++) {
    let m = 0, e = expBase;
    if (!zero[g]) {
      const lo = Math.max(expBase, es[g] - 1), hi = Math.min(expBase + 15, Math.max(lo, es[g] + 1));
      ({ m, e } = bestScale(w, g * 32, lo, hi));
    }
    scales[g] = ((e - expBase) << 4) | m;
    const s = (16 + m) * 2 ** (e - 4);
    for (let i = 0; i < 32; i++) {
      const x = w[g * 32 + i];
      const q = zero[g] ? 0 : Math.max(-8, Math.min(7, Math.round(x / s)));
      const k = g * 32 + i;
      nibbles[k >> 1] |= (q + 8) << ((k & 1) * 4);
      const d = x - q * s;
      sse += d * d;
      ss += x * x;
      maxErr = Math.max(maxErr, Math.abs(d));
    }
  }
  const n = rows * cols;
  return {
    matrix: { name, rows, cols, expBase, nibbles, scales },
    error: errorOf(name, "matrix", n, sse, ss, maxErr),
  };
}

function errorOf(
  name: string,
  kind: "matrix" | "gain",
  n: number,
  sse: number,
  ss: number,
  maxErr: number,
): TensorError {
  const rmse = Math.sqrt(sse / n);
  return { name, kind, values: n, rmse, relRmse: ss > 0 ? rmse / Math.sqrt(ss / n) : 0, maxAbsError: maxErr };
}

/** The float value of weight k of a lut4 matrix. */
export function dequantizeMatrix(m: LutMatrix): Float32Array {
  const out = new Float32Array(m.rows * m.cols);
  for (let k = 0; k < out.length; k++) {
    const u = (m.nibbles[k >> 1] >> ((k & 1) * 4)) & 15;
    const sc = m.scales[k >> 5];
    out[k] = (u - 8) * (16 + (sc & 15)) * 2 ** (m.expBase + (sc >> 4) - 4);
  }
  return out;
}

/** A per-channel gain as int16 values sharing one exponent, the largest normalised to 15 bits. */
export function quantizeGain(name: string, g: ArrayLike<number>): { gain: GainTable; error: TensorError } {
  let gmax = 0;
  for (let i = 0; i < g.length; i++) gmax = Math.max(gmax, Math.abs(g[i]));
  const exp = gmax > 0 ? Math.floor(Math.log2(gmax)) - 14 : 0;
  const values = new Int16Array(g.length);
  let sse = 0, ss = 0, maxErr = 0;
  for (let i = 0; i < g.length; i++) {
    values[i] = Math.max(-32767, Math.min(32767, Math.round(g[i] * 2 ** -exp)));
    const d = g[i] - values[i] * 2 ** exp;
    sse += d * d;
    ss += g[i] * g[i];
    maxErr = Math.max(maxErr, Math.abs(d));
  }
  return { gain: { values, exp }, error: errorOf(name, "gain", g.length, sse, ss, maxErr) };
}

/** The exp, SiLU and RoPE tables for a model shape. */
export function makeTables(config: ModelConfig) {
  const expLen = TABLES.expRangeNats * 256 + 2;
  const exp = new Int32Array(expLen);
  for (let i = 0; i < expLen; i++) exp[i] = Math.round(2 ** TABLES.expQ * Math.exp(-i / 256));
  const siluHalf = 2 ** (TABLES.siluRangeLog2 - TABLES.siluStepLog2);
  const silu = new Int32Array(2 * siluHalf + 1);
  for (let i = 0; i < silu.length; i++) {
    const x = (i - siluHalf) / 256;
    silu[i] = Math.round(2 ** TABLES.siluQ * (x / (1 + Math.exp(-x))));
  }
  const half = config.head_dim / 2, P = config.max_position_embeddings;
  const ropeCos = new Int16Array(P * half), ropeSin = new Int16Array(P * half);
  for (let i = 0; i < half; i++) {
    const invFreq = Math.pow(config.rope_theta, (-2 * i) / config.head_dim);
    for (let p = 0; p < P; p++) {
      ropeCos[p * half + i] = Math.round(2 ** TABLES.ropeQ * Math.cos(p * invFreq));
      ropeSin[p * half + i] = Math.round(2 ** TABLES.ropeQ * Math.sin(p * invFreq));
    }
  }
  return { exp, silu, siluHalf, ropeCos, ropeSin };
}

/**
 * eps as mantissa · 2^exp with the mantissa in [2^15, 2^16), rounded to nearest: the one form a lut4
 * header may hold for a given `rms_norm_eps`.
 *
 * @example
 * ```ts
 * epsFixed(1e-6); // { mantissa: 34360, exp: -35 }
 * ```
 */
export function epsFixed(eps: number): { mantissa: number; exp: number } {
  let exp = Math.floor(Math.log2(eps)) - 15;
  // log2 can land one off next to a power of two, and rounding can carry the mantissa up to 2^16.
  if (eps * 2 ** -exp < 2 ** 15) exp -= 1;
  if (eps * 2 ** -exp >= 2 ** 16) exp += 1;
  const mantissa = Math.round(eps * 2 ** -exp);
  return mantissa === 2 ** 16 ? { mantissa: 2 ** 15, exp: exp + 1 } : { mantissa, exp };
}

/** Multiplies column j of a [rows, cols] matrix by f[j]. */
function foldColumns(w: Float32Array, rows: number, cols: number, f: Float64Array): Float64Array {
  const out = new Float64Array(w.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[r * cols + c] = w[r * cols + c] * f[c];
  return out;
}

/**
 * Quantizes a Qwen3 model: the input and post-attention norm gains (times sqrt(width), ferry's norm
 * convention) are folded into q/k/v and gate/up; the per-head q/k norm gains cannot be (they act after
 * the projection, per head, and RoPE mixes dimension i with i + head_dim/2), so they are stored as int16
 * gains, k's times sqrt(head_dim) (the attention scale and q's norm factor cancel); the final norm gain
 * is folded into a separate head, or stored as a gain for a tied head.
 */
export function quantizeModel(config: ModelConfig, tensors: Tensor[], opts: { head: HeadMode }): {
  weights: Lut4Weights;
  errors: TensorError[];
} {
  const get = (n: string) => {
    const t = tensors.find((x) => x.name === n);
    if (!t) throw new Error(`lut4 export: missing tensor ${n}`);
    return t.data;
  };
  const H = config.hidden_size, hd = config.head_dim, F = config.intermediate_size;
  const qDim = config.num_attention_heads * hd, kvDim = config.num_key_value_heads * hd;
  for (
    const [what, n] of [["hidden_size", H], ["heads · head_dim", qDim], ["intermediate_size", F]] as const
  ) {
    if (n % 32 !== 0) throw new RangeError(`lut4 export: ${what} = ${n} is not a multiple of 32`);
  }
  const errors: TensorError[] = [];
  const mat = (name: string, data: ArrayLike<number>, rows: number, cols: number) => {
    const { matrix, error } = quantizeMatrix(name, data, rows, cols);
    errors.push(error);
    return matrix;
  };
  const gain = (name: string, g: ArrayLike<number>) => {
    const { gain, error } = quantizeGain(name, g);
    errors.push(error);
    return gain;
  };
  const scaled = (g: Float32Array, f: number) => Float64Array.from(g, (x) => x * f);
  const rootH = Math.sqrt(H), rootHd = Math.sqrt(hd);
  const embedData = get("model.embed_tokens.weight");
  const embed = mat("embed", embedData, config.vocab_size, H);
  const layers: Lut4Weights["layers"] = [];
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`, n = `layers.${i}.`;
    const gin = scaled(get(p + "input_layernorm.weight"), rootH);
    const gpost = scaled(get(p + "post_attention_layernorm.weight"), rootH);
    layers.push({
      q: mat(n + "q", foldColumns(get(p + "self_attn.q_proj.weight"), qDim, H, gin), qDim, H),
      k: mat(n + "k", foldColumns(get(p + "self_attn.k_proj.weight"), kvDim, H, gin), kvDim, H),
      v: mat(n + "v", foldColumns(get(p + "self_attn.v_proj.weight"), kvDim, H, gin), kvDim, H),
      o: mat(n + "o", get(p + "self_attn.o_proj.weight"), H, qDim),
      gate: mat(n + "gate", foldColumns(get(p + "mlp.gate_proj.weight"), F, H, gpost), F, H),
      up: mat(n + "up", foldColumns(get(p + "mlp.up_proj.weight"), F, H, gpost), F, H),
      down: mat(n + "down", get(p + "mlp.down_proj.weight"), H, F),
      qGain: gain(n + "q_gain", get(p + "self_attn.q_norm.weight")),
      kGain: gain(n + "k_gain", scaled(get(p + "self_attn.k_norm.weight"), rootHd)),
    });
  }
  const gfinal = scaled(get("model.norm.weight"), rootH);
  const headData = config.tie_word_embeddings ? embedData : get("lm_head.weight");
  let head: LutMatrix | null = null, finalGain: GainTable | null = null;
  if (opts.head === "tied" && config.tie_word_embeddings) finalGain = gain("final_gain", gfinal);
  else head = mat("head", foldColumns(headData, config.vocab_size, H, gfinal), config.vocab_size, H);
  const eps = epsFixed(config.rms_norm_eps);
  return {
    weights: {
      shape: {
        vocab: config.vocab_size,
        width: H,
        layers: config.num_hidden_layers,
        heads: config.num_attention_heads,
        kvHeads: config.num_key_value_heads,
        headDim: hd,
        ffn: F,
        maxPositions: config.max_position_embeddings,
      },
      epsMantissa: eps.mantissa,
      epsExp: eps.exp,
      embed,
      head,
      finalGain,
      layers,
      ...makeTables(config),
    },
    errors,
  };
}

/**
 * The float model a lut4 file approximates, before rounding: the same gain folding as `quantizeModel`,
 * under Hugging Face names and in the layout `dequantizeLut4` gives, so the two can be mixed tensor by
 * tensor (scripts/gap.ts splits the rounding gap by tensor class that way).
 */
export function foldedFloat(config: ModelConfig, tensors: Tensor[], head: HeadMode): Tensor[] {
  const get = (n: string) => {
    const t = tensors.find((x) => x.name === n);
    if (!t) throw new Error(`missing tensor ${n}`);
    return t;
  };
  const H = config.hidden_size;
  const rootH = Math.sqrt(H);
  const out: Tensor[] = [];
  const flat = (name: string) => out.push({ name, dims: [H], data: new Float32Array(H).fill(1 / rootH) });
  const folded = (name: string, g: Float32Array) => {
    const t = get(name);
    const f = Float64Array.from(g, (x) => x * rootH);
    out.push({ name, dims: t.dims, data: Float32Array.from(foldColumns(t.data, t.dims[0], t.dims[1], f)) });
  };
  const copy = (name: string) => out.push({ name, dims: get(name).dims, data: get(name).data.slice() });
  copy("model.embed_tokens.weight");
  for (let i = 0; i < config.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    const gin = get(p + "input_layernorm.weight").data,
      gpost = get(p + "post_attention_layernorm.weight").data;
    flat(p + "input_layernorm.weight");
    folded(p + "self_attn.q_proj.weight", gin);
    folded(p + "self_attn.k_proj.weight", gin);
    folded(p + "self_attn.v_proj.weight", gin);
    copy(p + "self_attn.q_norm.weight");
    copy(p + "self_attn.k_norm.weight");
    copy(p + "self_attn.o_proj.weight");
    flat(p + "post_attention_layernorm.weight");
    folded(p + "mlp.gate_proj.weight", gpost);
    folded(p + "mlp.up_proj.weight", gpost);
    copy(p + "mlp.down_proj.weight");
  }
  if (head === "tied" && config.tie_word_embeddings) copy("model.norm.weight");
  else {
    flat("model.norm.weight");
    const src = config.tie_word_embeddings ? get("model.embed_tokens.weight") : get("lm_head.weight");
    const f = Float64Array.from(get("model.norm.weight").data, (x) => x * rootH);
    out.push({
      name: "lm_head.weight",
      dims: src.dims,
      data: Float32Array.from(foldColumns(src.data, src.dims[0], src.dims[1], f)),
    });
  }
  return out;
}

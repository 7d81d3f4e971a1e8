/**
 * Which ggml type each GGUF tensor gets, for each `--dtype`, by llama.cpp's own rules
 * (`src/llama-quant.cpp` of llama.cpp v0.4.0, commit 80fb11ac73e6, the source node-llama-cpp 3.21.1
 * ships; ggml-org/llama.cpp's current file has the same rules):
 *
 * - 1-D tensors (the norms) stay F32; llama.cpp quantizes only 2-D and 3-D weights
 *   (`tensor_allows_quantization`).
 * - `q4_k`, `q6_k`, `iq4_nl` are "pure" files (llama-quantize `--pure`): every matrix in that type.
 * - `q4_k_m` is llama.cpp's Q4_K_M mix (`llama_tensor_get_type_impl`): Q4_K by default; Q6_K for
 *   `output.weight` (and for `token_embd.weight` when the embeddings are tied, as llama.cpp quantizes
 *   a shared tensor as the output), and for `attn_v` and `ffn_down` in the layers `useMoreBits` picks.
 *   The output rule asks for Q8_0 outright when the row width is not a multiple of the K-quant's 256.
 * - Then, for every type, the shape fallback (`tensor_type_fallback`): a row width (ne[0]) that is
 *   not a whole number of the type's blocks turns Q4_K into Q5_0 and Q6_K into Q8_0; a width the
 *   fallback cannot take either becomes F16. The 32-value types (Q4_0, Q8_0, IQ4_NL) on a width that is
 *   not a multiple of 32 (v0.4.0: F16; current llama.cpp: an error) are refused by the writer, as before.
 *
 * @example
 * ```ts
 * import { ggufTensorType } from "./gguf-mix.ts";
 * ggufTensorType("q4_k_m", "blk.3.ffn_down.weight", [256, 96], { layers: 4, tied: true }); // "Q6_K"
 * ```
 * @module
 */
import { GGML_TYPES, type GgmlType } from "./quants.ts";

/** The `--dtype` names of GGUF files ferry writes. */
export type GgufDtype = "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "q4_k" | "q6_k" | "iq4_nl" | "q4_k_m";

/** Per `--dtype`: the matrices' default type and the llama_ftype the file declares in general.file_type. */
export const GGUF_DTYPE_TYPES: Readonly<Record<GgufDtype, { type: GgmlType; ftype: number }>> = {
  f32: { type: "F32", ftype: 0 },
  f16: { type: "F16", ftype: 1 },
  bf16: { type: "BF16", ftype: 32 },
  q8_0: { type: "Q8_0", ftype: 7 },
  q4_0: { type: "Q4_0", ftype: 2 },
  q4_k: { type: "Q4_K", ftype: 14 }, // LLAMA_FTYPE_MOSTLY_Q4_K_S: llama.h has no "all Q4_K"
  q6_k: { type: "Q6_K", ftype: 18 },
  iq4_nl: { type: "IQ4_NL", ftype: 25 },
  q4_k_m: { type: "Q4_K", ftype: 15 },
};

/** llama-quant.cpp's shape fallback: the type a too-narrow row takes instead. */
export const SHAPE_FALLBACK: Readonly<Partial<Record<GgmlType, GgmlType>>> = { Q4_K: "Q5_0", Q6_K: "Q8_0" };

/** What the rules need to know of the model. */
export interface MixModel {
  /** Number of layers (n_layer). */
  layers: number;
  /** Whether token_embd doubles as the output (no output.weight). */
  tied: boolean;
}

/**
 * llama.cpp's `use_more_bits`: the first and last eighth of the layers, and every third layer
 * in between, get more bits in the K_M mixes. For 4 layers: layers 2 and 3.
 *
 * @example
 * ```ts
 * import { useMoreBits } from "./gguf-mix.ts";
 * [0, 1, 2, 3].filter((i) => useMoreBits(i, 4)); // [2, 3]
 * ```
 */
export function useMoreBits(layer: number, layers: number): boolean {
  const eighth = Math.floor(layers / 8);
  return layer < eighth || layer >= Math.floor((7 * layers) / 8) || (layer - eighth) % 3 === 2;
}

/**
 * The ggml type llama.cpp's quantizer would give GGUF tensor `name` (dims `ne`, innermost first)
 * in a file of `dtype`, fallback included.
 *
 * @example
 * ```ts
 * import { ggufTensorType } from "./gguf-mix.ts";
 * ggufTensorType("q4_k", "blk.0.attn_q.weight", [96, 128], { layers: 4, tied: true }); // "Q5_0"
 * ```
 */
export function ggufTensorType(
  dtype: GgufDtype,
  name: string,
  ne: readonly number[],
  model: MixModel,
): GgmlType {
  if (ne.length === 1) return "F32";
  let type = GGUF_DTYPE_TYPES[dtype].type;
  if (dtype === "q4_k_m") type = q4kmType(name, ne, model);
  if (ne[0] % GGML_TYPES[type].blockSize === 0) return type;
  const fallback = SHAPE_FALLBACK[type];
  if (!fallback) return type; // refused by the writer, naming the tensor and the width
  return ne[0] % GGML_TYPES[fallback].blockSize === 0 ? fallback : "F16";
}

// Q4_K_M's choices in llama_tensor_get_type_impl, for the tensors a qwen3 model has.
function q4kmType(name: string, ne: readonly number[], model: MixModel): GgmlType {
  if (name === "output.weight" || (model.tied && name === "token_embd.weight")) {
    return ne[0] % GGML_TYPES.Q4_K.blockSize === 0 ? "Q6_K" : "Q8_0";
  }
  const layer = /^blk\.(\d+)\.(attn_v|ffn_down)\.weight$/.exec(name);
  if (layer && useMoreBits(Number(layer[1]), model.layers)) return "Q6_K";
  return "Q4_K";
}

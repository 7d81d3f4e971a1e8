/**
 * Calibration statistics for importance-weighted quantizers: the float reference runs over token
 * windows (measure/calibration-text.ts: the training split, never the held-out documents, or a user's
 * file, tokenized with the model's own tokenizer), and for every linear layer's weight the mean
 * square of the activation that multiplies each of its input columns is accumulated. A quantizer that
 * weighs column c's rounding error by that mean square minimises the expected squared error of the
 * layer's output (for independent columns) instead of the weights' own.
 *
 * @example
 * ```ts
 * import { columnImportance } from "./calibrate.ts";
 * import { calibrationText } from "./calibration-text.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { Tensor } from "../model/tensor.ts";
 * import { byteTokenizer } from "../model/tokenizer.ts";
 * declare const config: ModelConfig, tensors: Tensor[]; // a byte model's
 * const { inputs } = await calibrationText(byteTokenizer, { windows: 64, seed: 1, size: 256, vocab: 258 });
 * const imp = columnImportance(config, tensors, inputs); // "model.layers.0.self_attn.q_proj.weight" → [96]
 * ```
 * @module
 */
import { checkTensors, type ModelConfig } from "../model/config.ts";
import { materialize, type Tensor, type TensorSource, tensorSource } from "../model/tensor.ts";
import { buildModel, checkTokens, createCache, forward, LAYER_TENSORS } from "../model/qwen3.ts";
import { type Kernels, kernelSet, rmsnorm, ropeHead, ropeTables } from "../kernels/kernels.ts";
import { createCovarianceKernels, type OuterSum, type PackedWeight } from "../kernels/wasm/covariance.ts";
import { loadTokenizer } from "../model/hf-tokenizer.ts";
import type {
  CalibrationNeeds,
  CalibrationRecord,
  Lut4Calibration,
  Lut4Calibrator,
} from "../quantize/lut4-types.ts";
import type { TokenizerFiles } from "../model/tokenizer-types.ts";
import { BROWN_SOURCE, calibrationText } from "./calibration-text.ts";
import { imatrixImportance, imatrixOf, parseImatrix, writeImatrix } from "../formats/imatrix/imatrix.ts";
import { importanceOf } from "../formats/gguf/gguf.ts";
import { FormatError } from "../model/error.ts";
import { createCovarianceFile } from "./covariance-file.ts";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { basename } from "node:path";

/** The linear layers whose inputs are measured, after `model.layers.N.`. */
const LINEAR = ["wq", "wk", "wv", "wo", "wGate", "wUp", "wDown"] as const;

/**
 * Layers whose input is another's, by construction of the forward pass: k and v read q's (the
 * attention norm's output), up reads gate's (the MLP norm's). They share its statistics, one array
 * (summed once: at the 0.6B widths that is 2 of 5 hidden-wide covariances, 8 MB each a layer).
 */
const SHARED_INPUT: Partial<Record<typeof LINEAR[number], typeof LINEAR[number]>> = {
  wk: "wq",
  wv: "wq",
  wUp: "wGate",
};

/**
 * Per weight tensor (Hugging Face name), the mean over calibration positions of x_c² for each input
 * column c over token `windows` (each fed from position 0), x being the activation the weight
 * multiplies (the norm's output, gain included, for q/k/v and gate/up; the attention output for o;
 * SwiGLU's product for down; the final norm's output for the head, `lm_head.weight` or, tied,
 * `model.embed_tokens.weight`). The GGUF quantizers take these as their importance vectors (llama.cpp's
 * imatrix); lut4's uses `inputCovariance`.
 */
export function columnImportance(
  config: ModelConfig,
  tensors: Tensor[],
  windows: ReadonlyArray<ArrayLike<number>>,
  kernels: Kernels = kernelSet("ref"),
  onWindow?: (done: number) => void,
): Map<string, Float32Array> {
  return accumulate(config, tensors, windows, kernels, false, onWindow).importance;
}

/**
 * Per weight tensor (as `columnImportance`), the mean of x xᵀ over calibration positions: a cols × cols
 * row-major matrix, symmetric. Its diagonal is `columnImportance`'s vector (to f32 rounding of the
 * products). Matrices that read the same input (q/k/v, gate/up) map to one shared array: treat them as
 * read-only.
 */
export function inputCovariance(
  config: ModelConfig,
  tensors: Tensor[],
  windows: ReadonlyArray<ArrayLike<number>>,
  kernels: Kernels = kernelSet("ref"),
  onWindow?: (done: number) => void,
): Map<string, Float64Array> {
  return accumulate(config, tensors, windows, kernels, true, onWindow).covariance!;
}

/**
 * Runs the windows through the float model and sums x_c² (always: the importance) and x xᵀ (when
 * `full`: the covariance) at every linear input; returns their means.
 */
function accumulate(
  config: ModelConfig,
  tensors: Tensor[],
  windows: ReadonlyArray<ArrayLike<number>>,
  kernels: Kernels,
  full: boolean,
  onWindow?: (done: number) => void,
): { importance: Map<string, Float32Array>; covariance?: Map<string, Float64Array> } {
  const names = new Map<Float32Array, string>();
  const squares = new Map<string, Float64Array>(), outer = new Map<string, Float64Array>();
  const products = new Map<number, Float32Array>();
  // x xᵀ summed over a window's positions by the kernels' own xᵀx product (f32, WebAssembly SIMD where
  // the runtime has it), then added into f64 sums: at 1,024-3,072 columns the scalar f64 triangle cost
  // 6 of the 7 seconds a window took per layer (scripts/tools/bench-calibrate.ts).
  const addOuter = (s: Float64Array, x: Float32Array, M: number, K: number) => {
    const p = products.get(K) ?? products.set(K, new Float32Array(K * K)).get(K)!;
    kernels.matmulTN(p, x.subarray(0, M * K), x.subarray(0, M * K), K, M, K);
    for (let i = 0; i < p.length; i++) s[i] += p[i];
  };
  const recording: Kernels = {
    ...kernels,
    matmul(out, x, w, M, K, N, acc) {
      const name = names.get(w);
      if (name) {
        addSquares(squares.get(name)!, x, M, K);
        if (full) addOuter(outer.get(name)!, x, M, K);
      }
      // The logits are not read: the head's input is all calibration needs of it, and its product is
      // the largest of the pass (a real vocabulary: 150k columns).
      if (w !== model.lmHead) kernels.matmul(out, x, w, M, K, N, acc);
    },
  };
  const model = buildModel(config, tensors, "calibration", recording);
  const watch = (w: Float32Array, name: string, cols: number) => {
    names.set(w, name);
    squares.set(name, new Float64Array(cols));
    if (full) outer.set(name, new Float64Array(cols * cols));
  };
  const share = (name: string, lead: string) => {
    squares.set(name, squares.get(lead)!);
    if (full) outer.set(name, outer.get(lead)!);
  };
  const H = config.hidden_size, qDim = config.num_attention_heads * config.head_dim;
  const colsOf = { wo: qDim, wDown: config.intermediate_size } as Record<string, number>;
  model.layers.forEach((L, i) => {
    const name = (key: typeof LINEAR[number]) => `model.layers.${i}.${LAYER_TENSORS[key]}`;
    for (const key of LINEAR) {
      const lead = SHARED_INPUT[key];
      if (lead) share(name(key), name(lead));
      else watch(L[key], name(key), colsOf[key] ?? H);
    }
  });
  watch(model.lmHead, model.lmHead === model.embed ? "model.embed_tokens.weight" : "lm_head.weight", H);
  let positions = 0;
  for (const [i, ids] of windows.entries()) {
    forward(model, createCache(model, ids.length), ids);
    positions += ids.length;
    onWindow?.(i + 1);
  }
  const n = Math.max(1, positions);
  for (const s of new Set(outer.values())) {
    const K = Math.sqrt(s.length);
    // Exactly symmetric: a SIMD product may sum (i, j) and (j, i) in different orders.
    for (let i = 0; i < K; i++) for (let j = 0; j < i; j++) s[i * K + j] = s[j * K + i];
    for (let i = 0; i < s.length; i++) s[i] /= n;
  }
  const importance = new Map<string, Float32Array>();
  for (const [name, s] of squares) importance.set(name, Float32Array.from(s, (v) => v / n));
  return { importance, ...(full ? { covariance: outer } : {}) };
}

/**
 * `columnImportance` and, with `needs` "covariance", `inputCovariance` on the WebAssembly kernels in one
 * pass, a layer at a time over every window, its matrix products and covariance sums split between
 * `threads` threads (kernels/wasm/covariance.ts): the same statistics, bit for bit, as the
 * window-at-a-time pass on the `wasm` set (each window's arithmetic is the forward pass's own, and each
 * sum takes the windows in order), read from the tensors' sources as it goes. It holds the residual
 * stream of every window (windows × positions × hidden f32: 64 MB for 64 windows at Qwen3-0.6B's
 * widths), one layer's weights (packed f32, 63 MB there) and its covariance sums (123 MB), and of the
 * embedding only the rows it looks up. It returns the importance and the covariances (per layer
 * 2 · hidden² + (heads · head_dim)² + intermediate² f64: 123 MB a layer, 3.4 GB at Qwen3-0.6B): past
 * `spillBytes` they are written to a temporary file as each layer ends and read back one at a time
 * (measure/covariance-file.ts), so only a layer's are in memory.
 * `onLayer` is called after each layer over every window, and after the final norm.
 *
 * @example
 * ```ts
 * import { calibrationPass } from "./calibrate.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { TensorSource } from "../model/tensor.ts";
 * declare const config: ModelConfig, sources: TensorSource[], windows: number[][];
 * const { covariance } = await calibrationPass(config, sources, windows, { needs: "covariance", threads: 2 });
 * ```
 */
export async function calibrationPass(
  config: ModelConfig,
  sources: readonly TensorSource[],
  windows: ReadonlyArray<ArrayLike<number>>,
  opts: {
    needs?: CalibrationNeeds;
    threads?: number;
    onLayer?: (done: number, total: number) => void;
    /** Covariances past this many bytes go to a temporary file (default `SPILL_BYTES`). */
    spillBytes?: number;
  } = {},
): Promise<{ importance: Map<string, Float32Array>; covariance?: ReadonlyMap<string, Float64Array> }> {
  const full = opts.needs !== "importance", threads = opts.threads ?? calibrationThreads(config);
  const onLayer = opts.onLayer;
  const bad = checkTensors(config, sources);
  if (bad) throw new FormatError("calibration", bad.code, bad.tensor, `calibration: ${bad.message}`, bad);
  for (const ids of windows) checkTokens(config, ids, 0, ids.length);
  const wasm = kernelSet("wasm");
  const byName = new Map(sources.map((s) => [s.name, s]));
  const read = async (name: string) => (await materialize(byName.get(name)!)).data;
  const H = config.hidden_size, hd = config.head_dim, eps = config.rms_norm_eps, L = config.num_hidden_layers;
  const nh = config.num_attention_heads, nkv = config.num_key_value_heads, I = config.intermediate_size;
  const Q = nh * hd, KV = nkv * hd;
  const rope = ropeTables(config.max_position_embeddings, hd, config.rope_theta);
  const n = Math.max(1, windows.reduce((s, w) => s + w.length, 0));
  // The residual stream of every window, from the embedding's rows, read a row at a time (the table
  // itself is never held: at Qwen3's vocabulary it is 622 MB of f32).
  const xs = windows.map((ids) => new Float32Array(ids.length * H));
  const embed = byName.get("model.embed_tokens.weight")!, row = new Float32Array(H);
  for (const [w, ids] of windows.entries()) {
    for (let t = 0; t < ids.length; t++) {
      xs[w].set((await embed.read(ids[t] * H, H, row)).subarray(0, H), t * H);
    }
  }
  const importance = new Map<string, Float32Array>();
  // The covariances, on disk past `spillBytes` (one layer's are in memory while it is summed).
  const file = full && covarianceBytes(config) > (opts.spillBytes ?? SPILL_BYTES)
    ? createCovarianceFile()
    : undefined;
  const covariance = file?.covariances ?? new Map<string, Float64Array>();
  const keep = (names: readonly string[], data: Float64Array) => {
    if (file) file.put(names, data);
    else for (const name of names) (covariance as Map<string, Float64Array>).set(name, data);
  };
  // With a file, each input's array is reused layer after layer (the last layer's are on file by the
  // time the next are taken), so the pass leaves no 123 MB a layer for the collector; in memory, each
  // is kept.
  const reused = new Map<string, Float64Array>();
  const into = (input: string, K: number) => {
    if (!file) return undefined;
    const have = reused.get(input);
    return have?.length === K * K ? have : reused.set(input, new Float64Array(K * K)).get(input)!;
  };
  const mean = (s: Float64Array) => Float32Array.from(s, (v) => v / n);
  const cov = createCovarianceKernels(threads);
  try {
    await cov.ready;
    const T0 = Math.max(...windows.map((w) => w.length), 1);
    const xn = new Float32Array(T0 * H), q = new Float32Array(T0 * Q), k = new Float32Array(T0 * KV);
    const v = new Float32Array(T0 * KV), att = new Float32Array(T0 * Q), proj = new Float32Array(T0 * H);
    const gate = new Float32Array(T0 * I), up = new Float32Array(T0 * I);
    // One input's sums: of squares always, of x xᵀ with `full`.
    const input = (K: number) => ({ squares: new Float64Array(K), outer: full ? cov.sum(K) : undefined });
    const record = (
      s: { squares: Float64Array; outer?: OuterSum },
      x: Float32Array,
      M: number,
      K: number,
    ) => {
      addSquares(s.squares, x, M, K);
      if (s.outer) cov.addOuter(s.outer, x, M);
    };
    const ropeAll = (x: Float32Array, T: number, heads: number) => {
      for (let t = 0; t < T; t++) for (let h = 0; h < heads; h++) ropeHead(x, (t * heads + h) * hd, t, rope);
    };
    const addInto = (x: Float32Array, y: Float32Array, count: number) => {
      for (let i = 0; i < count; i++) x[i] += y[i];
    };
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}.`, name = (key: keyof typeof LAYER_TENSORS) => p + LAYER_TENSORS[key];
      // One read at a time: a source may share its read buffer between tensors (dmexp's does).
      const inputNorm = await read(name("inputNorm")), qNorm = await read(name("qNorm"));
      const kNorm = await read(name("kNorm")), postNorm = await read(name("postNorm"));
      cov.clearSums();
      const qkv = input(H), o = input(Q), gu = input(H), down = input(I);
      const packed = {} as Record<typeof LINEAR[number], PackedWeight>;
      for (const key of LINEAR) {
        const src = byName.get(name(key))!;
        packed[key] = await cov.pack(
          (start, count, scratch) => src.read(start, count, scratch),
          src.dims[0],
          src.dims[1],
        );
      }
      for (const x of xs) {
        const T = x.length / H;
        rmsnorm(xn, x, inputNorm, T, H, eps);
        record(qkv, xn, T, H);
        cov.matmul(q, xn, packed.wq, T);
        cov.matmul(k, xn, packed.wk, T);
        cov.matmul(v, xn, packed.wv, T);
        rmsnorm(q, q, qNorm, T * nh, hd, eps);
        rmsnorm(k, k, kNorm, T * nkv, hd, eps);
        ropeAll(q, T, nh);
        ropeAll(k, T, nkv);
        wasm.attendCached(att, q, k, v, T, 0, nh, nkv, hd);
        record(o, att, T, Q);
        cov.matmul(proj, att, packed.wo, T);
        addInto(x, proj, T * H);
        rmsnorm(xn, x, postNorm, T, H, eps);
        record(gu, xn, T, H);
        cov.matmul(gate, xn, packed.wGate, T);
        cov.matmul(up, xn, packed.wUp, T);
        wasm.swiglu(gate, gate, up, T * I);
        record(down, gate, T, I);
        cov.matmul(proj, gate, packed.wDown, T);
        addInto(x, proj, T * H);
      }
      // In the window-at-a-time pass's order: q, k, v (q's input), o, gate, up (gate's), down.
      const sums = { wq: qkv, wk: qkv, wv: qkv, wo: o, wGate: gu, wUp: gu, wDown: down };
      for (const key of LINEAR) importance.set(name(key), mean(sums[key].squares));
      // The last layer's covariances are on file by now (a layer's pass takes far longer than its
      // writes); waiting here bounds what is held to one layer's if the disk is slow.
      await file?.written();
      for (const [input, s] of Object.entries({ qkv, o, gu, down })) {
        if (!s.outer) continue;
        keep(
          LINEAR.filter((key) => sums[key] === s).map(name),
          cov.takeSum(s.outer, n, into(input, s.outer.K)),
        );
      }
      onLayer?.(l + 1, L + 1);
    }
    // The head's input: the final norm's output.
    cov.clearSums();
    const norm = await read("model.norm.weight"), head = input(H);
    for (const x of xs) {
      const T = x.length / H;
      rmsnorm(xn, x, norm, T, H, eps);
      record(head, xn, T, H);
    }
    const headName = config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    importance.set(headName, mean(head.squares));
    if (head.outer) keep([headName], cov.takeSum(head.outer, n, into("head", H)));
    onLayer?.(L + 1, L + 1);
  } catch (e) {
    file?.close();
    throw e;
  } finally {
    cov.close();
  }
  return { importance, ...(full ? { covariance } : {}) };
}

/**
 * Covariances past this many bytes are kept in a temporary file rather than in memory
 * (measure/covariance-file.ts): the export's memory rule allows the largest tensor and about 256 MB.
 */
export const SPILL_BYTES = 256 * 2 ** 20;

/**
 * Bytes of the covariances a calibration pass makes for `config`: per layer, one for q/k/v's input, o's,
 * gate/up's and down's, and one for the head's (f64, full matrices).
 *
 * @example
 * ```ts
 * import { covarianceBytes } from "./calibrate.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * declare const config: ModelConfig; // Qwen3-0.6B's widths
 * covarianceBytes(config); // 3_531_603_968 (3.3 GiB)
 * ```
 */
export function covarianceBytes(config: ModelConfig): number {
  const H = config.hidden_size, Q = config.num_attention_heads * config.head_dim;
  const I = config.intermediate_size;
  return 8 * (config.num_hidden_layers * (2 * H * H + Q * Q + I * I) + H * H);
}

function addSquares(s: Float64Array, x: Float32Array, M: number, K: number): void {
  for (let m = 0; m < M; m++) for (let k = 0; k < K; k++) s[k] += x[m * K + k] * x[m * K + k];
}

/**
 * Threads a calibration runs on by default: one per core, at most 4; one for a model whose MLP matrices
 * hold under 65,536 weights (the `small` preset's 24,576), where starting a worker costs more than it
 * saves. The shipped model's 196,608 take two: its README export ran 9.5–11.3 s so against 12.5–17.4 s
 * on one thread (three runs each, docs/benchmarks.md's machine).
 */
export function calibrationThreads(config: ModelConfig): number {
  if (config.hidden_size * config.intermediate_size < 1 << 16) return 1;
  const cores = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)?.hardwareConcurrency ??
    1;
  return Math.max(1, Math.min(4, cores));
}

/** What calibration takes by default: windows, their positions (fewer when the model has fewer), seed. */
export const CALIBRATION = { windows: 64, windowTokens: 256, seed: 1, source: BROWN_SOURCE } as const;

/** What a calibrator measures on (every field optional: `CALIBRATION`'s defaults). */
export interface CalibrationOptions {
  /** How many windows (default 64). */
  windows?: number;
  /** A budget of positions instead: ⌈tokens / window size⌉ windows. */
  tokens?: number;
  seed?: number;
  /** A user's UTF-8 text or `*.tokens` file (measure/calibration-text.ts); absent: the Brown training split. */
  file?: string;
  /**
   * Called as the float model runs: after each layer over every window (and the final norm), with the
   * count of layers done and their total (the layers plus one).
   */
  onProgress?: (done: number, total: number) => void;
  /** Threads the pass's products and sums run on (default: one per core, at most 4); the bits are the same. */
  threads?: number;
  /**
   * A default the user did not ask for: a model whose calibrated export is estimated over
   * `DEFAULT_LIMIT_S` (`calibratedExportSeconds`) is exported with plain rounding instead, and the
   * summary says so.
   */
  byDefault?: boolean;
}

/** The longest a default calibrated export should take on two idle cores: 10 minutes. */
export const DEFAULT_LIMIT_S = 600;

/**
 * What a default calibration's estimate is held to: the limit less a tenth, for the machine's noise
 * (the same calibrated lut4 export of Qwen3-0.6B's shape took 611 s and 472 s two hours apart).
 */
export const DEFAULT_BUDGET_S = 0.9 * DEFAULT_LIMIT_S;

/** The fewest windows a default calibration runs; a model where fewer fit is rounded plainly. */
export const MIN_DEFAULT_WINDOWS = 16;

/**
 * The windows a default calibration runs: the most, up to `wanted`, whose export is estimated
 * (`calibratedExportSeconds`) within `DEFAULT_BUDGET_S`; 0 (plain rounding) when that is fewer than
 * `MIN_DEFAULT_WINDOWS`. Qwen3-0.6B's shape: 40 of 64 for lut4, all 64 for the GGUF types; the
 * shipped model: all.
 *
 * @example
 * ```ts
 * import { defaultWindows } from "./calibrate.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * declare const config: ModelConfig;
 * defaultWindows(config, 64, "covariance"); // 64 where they fit, fewer where not, 0 for plain rounding
 * ```
 */
export function defaultWindows(config: ModelConfig, wanted: number, needs: CalibrationNeeds): number {
  let windows = wanted;
  while (windows > 0 && calibratedExportSeconds(config, windows, needs) > DEFAULT_BUDGET_S) windows--;
  return windows < Math.min(MIN_DEFAULT_WINDOWS, wanted) ? 0 : windows;
}

/**
 * The rates `calibrationSeconds` and `calibratedExportSeconds` estimate from, per core of the two-core
 * machine of docs/benchmarks.md, idle: f32 products (the pass's matrix products and covariance sums,
 * WebAssembly SIMD), the pass's work besides its products (attention, norms, sums of squares, copies)
 * as a fraction of its products' time, what a split job keeps of each added core, GPTQ's f64 products
 * (its factors and error feedback) and its scale searches per weight, and the rest of a calibrated
 * export per parameter (reading, the embedding's rounding, writing; GGUF's K-quants run on one thread).
 * Fitted to the calibrated Qwen3-0.6B-shape exports timed on 2026-12-03 (docs/benchmarks.md), the f32
 * rate to the slowest hour seen (a 46-window covariance pass of 408 s; the same pass took 318 s two
 * hours later), so that a default holds when the machine is slow: the importance pass's 306 s and the
 * whole exports' 611 s and 455 s.
 */
export const CALIBRATION_RATES = {
  f32Gmacs: 11,
  passOverhead: 0.06,
  splitEfficiency: 0.9,
  f64Gmacs: 7,
  searchSecondsPerWeight: 0.15e-6,
  restSecondsPerParam: { covariance: 0.16e-6, importance: 0.245e-6 },
} as const;

/**
 * An estimate of a calibration's wall seconds on `cores` idle cores (default 2, the goal's machine), from
 * the multiply-adds it does and `CALIBRATION_RATES`: the pass over `windows` windows (its products, with
 * the covariances' upper triangles for lut4's GPTQ) and, for the covariances, GPTQ itself (the factors'
 * n³/3 and the feedback's rows · cols² / 2 f64 multiply-adds, the scale searches). Qwen3-0.6B at 64
 * windows: about 6.4 minutes for the importance alone (the GGUF types; 8.8 for a q4_k_m export with
 * it), about 10.8 with the covariances and GPTQ (12.4 for a lut4 export); the shipped model: about 8
 * seconds.
 *
 * @example
 * ```ts
 * import { calibrationSeconds } from "./calibrate.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * declare const config: ModelConfig;
 * calibrationSeconds(config, 64, "importance"); // the GGUF types' pass
 * ```
 */
export function calibrationSeconds(
  config: ModelConfig,
  windows: number,
  needs: CalibrationNeeds = "covariance",
  cores = 2,
): number {
  const r = CALIBRATION_RATES, split = r.f32Gmacs * (1 + (cores - 1) * r.splitEfficiency);
  const H = config.hidden_size, I = config.intermediate_size, L = config.num_hidden_layers;
  const Q = config.num_attention_heads * config.head_dim, KV = config.num_key_value_heads * config.head_dim;
  const size = Math.min(CALIBRATION.windowTokens, config.max_position_embeddings);
  const products = (size * (H * (Q + 2 * KV) + Q * H + 3 * H * I)) / 1e9;
  const overhead = (products * r.passOverhead) / r.f32Gmacs;
  if (needs === "importance") return L * windows * (products / split + overhead);
  const sums = (size * (2 * H * H + Q * Q + I * I)) / 2 / 1e9;
  // GPTQ per layer: four factors (q/k/v and gate/up share theirs), seven sweeps, every weight searched.
  const cube = (n: number) => n ** 3 / 3;
  const mats: Array<[number, number]> = [[Q, H], [KV, H], [KV, H], [H, Q], [I, H], [I, H], [H, I]];
  let gmacs = L * (2 * cube(H) + cube(Q) + cube(I) + mats.reduce((s, [n, k]) => s + (n * k * k) / 2, 0)) /
    1e9;
  let weights = L * mats.reduce((s, [n, k]) => s + n * k, 0);
  if (!config.tie_word_embeddings) gmacs += (cube(H) + (config.vocab_size * H * H) / 2) / 1e9;
  if (!config.tie_word_embeddings) weights += config.vocab_size * H;
  const f64 = r.f64Gmacs * (1 + (cores - 1) * r.splitEfficiency);
  const gptq = gmacs / f64 + (weights * r.searchSecondsPerWeight) / (1 + (cores - 1) * r.splitEfficiency);
  return L * windows * ((products + sums) / split + overhead) + gptq;
}

/**
 * `calibrationSeconds` plus the rest of the export (`CALIBRATION_RATES.restSecondsPerParam`): what a
 * default calibration is held against (`DEFAULT_LIMIT_S`).
 *
 * @example
 * ```ts
 * import { calibratedExportSeconds, DEFAULT_LIMIT_S } from "./calibrate.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * declare const config: ModelConfig;
 * calibratedExportSeconds(config, 64) > DEFAULT_LIMIT_S; // rounded plainly by default
 * ```
 */
export function calibratedExportSeconds(
  config: ModelConfig,
  windows: number,
  needs: CalibrationNeeds = "covariance",
  cores = 2,
): number {
  const H = config.hidden_size, I = config.intermediate_size, L = config.num_hidden_layers;
  const Q = config.num_attention_heads * config.head_dim, KV = config.num_key_value_heads * config.head_dim;
  const params = config.vocab_size * H * (config.tie_word_embeddings ? 1 : 2) +
    L * (H * (2 * Q + 2 * KV) + 3 * H * I);
  return calibrationSeconds(config, windows, needs, cores) +
    params * CALIBRATION_RATES.restSecondsPerParam[needs];
}

/**
 * The calibrator the lut4 and GGUF writers take (`exportCheckpoint({ calibrate })`): windows of the
 * model's own tokens (measure/calibration-text.ts), the float reference run over them, the inputs'
 * covariances returned with the record the file keeps (source, windows, their size, tokens, seed).
 *
 * @example
 * ```ts
 * import { lut4Calibrator } from "./calibrate.ts";
 * import { exportCheckpoint } from "../formats/export.ts";
 * await exportCheckpoint({ format: "lut4", calibrate: lut4Calibrator({ windows: 64 }) });
 * await exportCheckpoint({ format: "lut4", calibrate: lut4Calibrator({ file: "my.txt", tokens: 32768 }) });
 * ```
 */
export function lut4Calibrator(options: CalibrationOptions = {}): Lut4Calibrator {
  const asked = (config: ModelConfig) => {
    const size = Math.min(CALIBRATION.windowTokens, config.max_position_embeddings);
    return options.tokens !== undefined
      ? Math.max(1, Math.ceil(options.tokens / size))
      : options.windows ?? CALIBRATION.windows;
  };
  // By default, as many of the windows asked as finish in time (`defaultWindows`); else all of them.
  const count = (config: ModelConfig, needs: CalibrationNeeds) =>
    options.byDefault ? defaultWindows(config, asked(config), needs) : asked(config);
  const minutes = (config: ModelConfig, windows: number, needs: CalibrationNeeds) =>
    (calibratedExportSeconds(config, windows, needs) / 60).toFixed(1);
  const skip = (config: ModelConfig, needs: CalibrationNeeds = "covariance") => {
    if (count(config, needs) > 0) return undefined;
    return `skipped by default (plain rounding): the calibrated export would take about ${
      minutes(config, asked(config), needs)
    } minutes on two cores, and fewer than ${MIN_DEFAULT_WINDOWS} windows fit in ${
      DEFAULT_BUDGET_S / 60
    } minutes (--calibrate N runs it)`;
  };
  // From the record: a calibration kept for a second format (calibrateOnce) has the first's count.
  const note = (config: ModelConfig, record: CalibrationRecord, needs: CalibrationNeeds = "covariance") => {
    const wanted = asked(config);
    if (!options.byDefault || record.windows >= wanted) return undefined;
    return `by default ${record.windows} of ${wanted} windows, to finish within ${
      DEFAULT_LIMIT_S / 60
    } minutes on two cores (--calibrate ${wanted}: about ${minutes(config, wanted, needs)} minutes)`;
  };
  return Object.assign(async (
    config: ModelConfig,
    tensors: ReadonlyArray<Tensor | TensorSource>,
    files?: TokenizerFiles,
    needs: CalibrationNeeds = "covariance",
  ) => {
    const tok = loadTokenizer(files, "calibration tokenizer");
    // A window is fed whole from position 0: a model with fewer positions gets shorter windows.
    const size = Math.min(CALIBRATION.windowTokens, config.max_position_embeddings);
    const windows = count(config, needs);
    const seed = options.seed ?? CALIBRATION.seed;
    const text = await calibrationText(tok, {
      windows,
      seed,
      size,
      vocab: config.vocab_size,
      file: options.file,
    });
    const full = needs === "covariance";
    const sources = tensors.map((t) => "read" in t ? t : tensorSource(t));
    // A layer at a time on the threads where the runtime has WebAssembly SIMD; else the reference pass.
    const stats = kernelSet("wasm").name === "wasm"
      ? await calibrationPass(config, sources, text.inputs, {
        needs,
        threads: options.threads,
        onLayer: options.onProgress,
      })
      : accumulate(
        config,
        await Promise.all(sources.map(materialize)),
        text.inputs,
        kernelSet("ref"),
        full,
        options.onProgress && ((done) => options.onProgress!(done, text.inputs.length)),
      );
    const tokens = text.inputs.reduce((n, w) => n + w.length, 0);
    return {
      ...stats,
      record: { source: text.source, windows: text.inputs.length, window_tokens: size, tokens, seed },
    };
  }, { skip, note });
}

/**
 * A calibrator that runs once and hands its result to every later call. For a command that exports one
 * source several times (export.ts's formats, measure.ts's rows): the statistics depend only on the
 * source, the windows and the seed, and the quantizers only read them.
 *
 * @example
 * ```ts
 * import { calibrateOnce, lut4Calibrator } from "./calibrate.ts";
 * import { exportCheckpoint } from "../formats/export.ts";
 * const calibrate = calibrateOnce(lut4Calibrator({ windows: 64 }));
 * for (const format of ["gguf", "lut4"]) await exportCheckpoint({ format, calibrate });
 * ```
 */
export function calibrateOnce(calibrate: Lut4Calibrator): Lut4Calibrator {
  // One result, kept; a call that needs the covariances after one that measured only the importance
  // measures again (with both: the importance is the same sums either way).
  let result: Promise<Lut4Calibration> | undefined, full = false;
  return Object.assign(
    (
      config: ModelConfig,
      tensors: ReadonlyArray<Tensor | TensorSource>,
      tokenizer?: TokenizerFiles,
      needs?: CalibrationNeeds,
    ) => {
      const wantsFull = needs !== "importance";
      if (!result || (wantsFull && !full)) {
        result = calibrate(config, tensors, tokenizer, needs);
        full = wantsFull;
      }
      return result;
    },
    { skip: calibrate.skip, note: calibrate.note },
  );
}

/**
 * A calibrator that measures nothing: it reads a llama.cpp importance matrix (formats/imatrix/imatrix.ts,
 * either encoding) and hands its importance to the quantizers, lut4's and GGUF's weighted scales (no
 * covariances: lut4 rounds without GPTQ's feedback). A file of another model or shape is refused,
 * naming the tensor. The record says `imatrix NAME sha256:HEX16`, its chunks and their size.
 *
 * @example
 * ```ts
 * import { imatrixCalibrator } from "./calibrate.ts";
 * import { exportCheckpoint } from "../formats/export.ts";
 * await exportCheckpoint({ format: "gguf", dtype: "q4_k_m", calibrate: imatrixCalibrator("imatrix.gguf") });
 * ```
 */
export function imatrixCalibrator(path: string): Lut4Calibrator {
  return async (config) => {
    let bytes: Uint8Array;
    try {
      bytes = await readFile(path);
    } catch (e) {
      throw new FormatError(
        path,
        "Unreadable",
        "file",
        `${path}: cannot read the imatrix file (${(e as Error).message})`,
      );
    }
    const m = parseImatrix(bytes, path);
    const importance = imatrixImportance(m, config, path);
    const digest = createHash("sha256").update(bytes).digest("hex").slice(0, 16);
    const tokens = Math.max(1, ...[...m.entries.values()].map((e) => e.count));
    return {
      importance,
      record: {
        source: `imatrix ${basename(path)} sha256:${digest}${
          m.datasets.length ? ` (${m.datasets.join(", ")})` : ""
        }`,
        windows: Math.max(1, m.chunkCount),
        window_tokens: Math.max(1, m.chunkSize),
        tokens,
        seed: 0,
      },
    };
  };
}

/**
 * A calibrator that also writes what it computed as a llama.cpp imatrix at `path` (GGUF, or the
 * legacy layout for `*.dat`): each matrix's mean squares over the record's tokens, the record's
 * source as its dataset, its windows as chunks. Wrap the inner calibrator in `calibrateOnce` first
 * when several exports share it: the file is written on each call.
 *
 * @example
 * ```ts
 * import { calibrateOnce, lut4Calibrator, writingImatrix } from "./calibrate.ts";
 * const calibrate = writingImatrix(calibrateOnce(lut4Calibrator()), "ferry.imatrix.gguf");
 * ```
 */
export function writingImatrix(calibrate: Lut4Calibrator, path: string): Lut4Calibrator {
  return Object.assign(async (
    config: ModelConfig,
    tensors: ReadonlyArray<Tensor | TensorSource>,
    tokenizer?: TokenizerFiles,
    needs?: CalibrationNeeds,
  ) => {
    const cal = await calibrate(config, tensors, tokenizer, needs);
    const importance = cal.importance ?? new Map(Object.entries(importanceOf(cal.covariance ?? new Map())));
    const r = cal.record;
    await writeImatrix(
      path,
      imatrixOf(importance, r.tokens ?? 0, {
        datasets: [r.source],
        chunkCount: r.windows,
        chunkSize: r.window_tokens ?? r.window_bytes ?? 0,
      }),
    );
    return cal;
  }, { skip: calibrate.skip, note: calibrate.note });
}

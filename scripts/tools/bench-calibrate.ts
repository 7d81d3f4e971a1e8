/**
 * Where calibration's forward pass spends its time at Qwen3-0.6B's widths (hidden 1,024, 16 heads of
 * 128, intermediate 3,072): one layer of seeded random weights, windows of 256 positions, timed four
 * ways in interleaved rounds: the float forward alone (WebAssembly kernels), the same with its matrix
 * products timed, the forward with the per-column sums of squares (`columnImportance`, what the
 * K-quants and IQ4_NL take) and with the full covariance sums (`inputCovariance`, what lut4's GPTQ
 * takes). Medians per window per layer; the head is skipped by calibration, so the vocabulary is
 * ferry's byte one. Then the covariance sums alone, side by side on the same activations: the scalar
 * f64 upper triangle calibration used before, against the kernels' f32 xᵀx product added into f64
 * sums (what it uses now), for each input width. A benchmark, not a test: figures from a shared
 * machine are noisy.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-calibrate.ts --rounds 3
 * ```
 * @module
 */
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { QWEN3_SHAPES } from "./make-qwen3.ts";
import type { ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { type Kernels, kernelSet } from "../../kernels/kernels.ts";
import { columnImportance, inputCovariance } from "../../measure/calibrate.ts";

const HELP = `
Time calibration's forward pass at Qwen3-0.6B's widths, one layer, split into its parts.

Usage: bun scripts/tools/bench-calibrate.ts [--rounds N] [--positions N] [--json]

Options:
  --rounds N     interleaved rounds (default 3)
  --positions N  positions per window (default 256, calibration's)
  --json         print the figures as JSON
  -h, --help     this text
`;

/** The sums calibration used before: Σ_m x_m x_mᵀ's upper triangle, scalar f64. */
function triangle64(s: Float64Array, x: Float32Array, M: number, K: number): void {
  for (let m = 0; m < M; m++) {
    const o = m * K;
    for (let i = 0; i < K; i++) {
      const xi = x[o + i], row = i * K;
      if (xi === 0) continue;
      for (let j = i; j < K; j++) s[row + j] += xi * x[o + j];
    }
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

await run(() => {
  const { values } = cli(HELP, {
    rounds: { type: "string", default: "3" },
    positions: { type: "string", default: "256" },
    json: { type: "boolean" },
  });
  const rounds = Number(values.rounds), T = Number(values.positions);
  if (!Number.isInteger(rounds) || rounds < 1) fail("--rounds expects a positive integer", EXIT_USAGE);
  if (!Number.isInteger(T) || T < 1) fail("--positions expects a positive integer", EXIT_USAGE);
  const s = QWEN3_SHAPES["qwen3-0.6b-body"];
  const config: ModelConfig = {
    ...s,
    num_hidden_layers: 1,
    max_position_embeddings: T,
    rms_norm_eps: 1e-6,
  } as ModelConfig;
  const tensors = initParams(config, 1);
  const ids = Array.from({ length: T }, (_, i) => (i * 37 + 11) % 256);
  const wasm = kernelSet("wasm");
  let matmulMs = 0;
  const timed: Kernels = {
    ...wasm,
    matmul(out, x, w, M, K, N, acc) {
      const t = performance.now();
      wasm.matmul(out, x, w, M, K, N, acc);
      matmulMs += performance.now() - t;
    },
  };
  const plain = buildModel(config, tensors, "bench", wasm),
    timedModel = buildModel(config, tensors, "bench", timed);
  const time = (f: () => void) => {
    const t = performance.now();
    f();
    return performance.now() - t;
  };
  const rows: Record<string, number[]> = { forward: [], matmul: [], importance: [], covariance: [] };
  for (let r = 0; r < rounds; r++) {
    rows.forward.push(time(() => forward(plain, createCache(plain, T), ids)));
    matmulMs = 0;
    time(() => forward(timedModel, createCache(timedModel, T), ids));
    rows.matmul.push(matmulMs);
    rows.importance.push(time(() => columnImportance(config, tensors, [ids], wasm)));
    rows.covariance.push(time(() => inputCovariance(config, tensors, [ids], wasm)));
    console.error(
      `round ${r + 1}/${rounds}: ${
        Object.entries(rows).map(([k, v]) => `${k} ${(v[r] / 1000).toFixed(2)} s`).join(", ")
      }`,
    );
  }
  const H = config.hidden_size,
    Q = config.num_attention_heads * config.head_dim,
    I = config.intermediate_size;
  const f = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v) / 1000]));
  // Multiply-adds per window: the layer's products, and the covariance products (q/k/v share one
  // input, gate/up another: two hidden-wide ones, o's and down's).
  const kv = config.num_key_value_heads * config.head_dim;
  const productMacs = T * (H * (Q + 2 * kv) + Q * H + 2 * H * I + I * H);
  const covarianceMacs = T * (2 * H * H + Q * Q + I * I);
  const out = {
    positions: T,
    seconds_per_window_per_layer: f,
    products_gmac: productMacs / 1e9,
    covariance_products_gmac: covarianceMacs / 1e9,
    covariance_share: (f.covariance - f.forward) / f.covariance,
  } as Record<string, unknown> & {
    products_gmac: number;
    covariance_products_gmac: number;
    covariance_share: number;
  };
  // The covariance sums alone, interleaved: before (scalar f64 triangle) and now (f32 product + f64 add).
  const sums: Record<string, { before: number[]; now: number[] }> = {};
  for (const K of [H, Q, I]) {
    const x = Float32Array.from({ length: T * K }, (_, i) => Math.sin(i * 0.37));
    const s64 = new Float64Array(K * K), p = new Float32Array(K * K);
    const e: { before: number[]; now: number[] } = { before: [], now: [] };
    sums[`${K} columns`] = e;
    for (let r = 0; r < rounds; r++) {
      e.before.push(time(() => triangle64(s64, x, T, K)));
      e.now.push(time(() => {
        wasm.matmulTN(p, x, x, K, T, K);
        for (let i = 0; i < p.length; i++) s64[i] += p[i];
      }));
    }
  }
  const sumFigures = Object.fromEntries(
    Object.entries(sums).map((
      [k, v],
    ) => [k, { before_s: median(v.before) / 1000, now_s: median(v.now) / 1000 }]),
  );
  Object.assign(out, { covariance_sums_alone: sumFigures });
  if (values.json) return console.log(JSON.stringify(out, null, 2));
  console.log(`per window of ${T} positions, per layer (medians of ${rounds} rounds):`);
  console.log(
    `  forward alone            ${f.forward.toFixed(2)} s (matrix products ${f.matmul.toFixed(2)} s, ${
      out.products_gmac.toFixed(2)
    } GMAC)`,
  );
  console.log(`  + sums of squares        ${f.importance.toFixed(2)} s`);
  console.log(
    `  + covariance sums        ${f.covariance.toFixed(2)} s (products ${
      out.covariance_products_gmac.toFixed(2)
    } GMAC)`,
  );
  console.log(`  covariance share         ${(100 * out.covariance_share).toFixed(0)}%`);
  console.log(`covariance sums alone, one matrix input, ${T} positions (medians):`);
  for (const [k, v] of Object.entries(sumFigures)) {
    console.log(
      `  ${k.padEnd(14)} scalar f64 ${v.before_s.toFixed(3)} s, f32 xᵀx + f64 add ${v.now_s.toFixed(3)} s (${
        (v.before_s / v.now_s).toFixed(1)
      }×)`,
    );
  }
});

/**
 * CPU path against WebGPU, side by side in one run (Deno only): prefill and decode tokens/s and
 * matrix-product GFLOP/s, on the default model and on a wide synthetic one (hidden 1024), plus the
 * cost of one GPU readback, naming the adapter. Prints the ratios; `--json` prints the figures as data.
 *
 * Decode on WebGPU reads back 4 bytes a token (the GPU's argmax), so its floor is one readback.
 *
 * @example
 * ```ts
 * // deno run -A scripts/tools/bench-webgpu.ts
 * // deno run -A scripts/tools/bench-webgpu.ts --prefill 64 --decode 16 --json
 * ```
 * @module
 */
import process from "node:process";
import { cli, EXIT_REFUSED, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../../formats/checkpoint/parts.ts";
import { argmax, matmul } from "../../kernels/cpu.ts";
import { openGpu } from "../../kernels/webgpu/device.ts";
import { createWebGpuEngine } from "../../engines/webgpu.ts";
import { gpuMatmul } from "../../kernels/webgpu/matmul.ts";
import { type ModelConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { createRng } from "../../model/random.ts";
import type { Tensor } from "../../model/tensor.ts";

const HELP = `
Benchmark the WebGPU engine against the CPU path: prefill and decode tokens/s, matrix-product GFLOP/s,
default model and a wide synthetic model (hidden 1024), and the cost of one readback. Deno only.

Usage: deno run -A scripts/tools/bench-webgpu.ts [options]

Options:
  --prefill N   prompt length for prefill (default 64)
  --decode N    tokens to decode (default 16)
  --runs N      timed runs of each figure; the median is kept (default 3)
  --json        print the figures as JSON
  -h, --help    this text
`;

/** The wide synthetic model: hidden 1024, Qwen3-like proportions, 2 layers to keep the CPU side short. */
export const WIDE: ModelConfig = {
  ...PRESETS.default,
  hidden_size: 1024,
  intermediate_size: 2816,
  num_hidden_layers: 2,
  num_attention_heads: 16,
  num_key_value_heads: 4,
  head_dim: 64,
  tie_word_embeddings: true,
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

async function time(runs: number, f: () => Promise<unknown> | unknown): Promise<number> {
  const ms: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    await f();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

interface Figures {
  model: string;
  params: number;
  prefillTokens: number;
  decodeTokens: number;
  /** The product's shape K x N (hidden x intermediate: the MLP's up projection). */
  matmul: string;
  cpu: { prefillTokS: number; decodeTokS: number; matmulGflops: number; gemvGflops: number };
  webgpu: { prefillTokS: number; decodeTokS: number; matmulGflops: number; gemvGflops: number };
}

async function main(): Promise<void> {
  const { values } = cli(HELP, {
    prefill: { type: "string" },
    decode: { type: "string" },
    runs: { type: "string" },
    json: { type: "boolean" },
  });
  const int = (name: string, raw: string | undefined, dflt: number) => {
    const x = raw === undefined ? dflt : Number(raw);
    if (!Number.isInteger(x) || x < 1) fail(`--${name} ${raw}: expected a positive integer`, EXIT_USAGE);
    return x;
  };
  const P = int("prefill", values.prefill, 64), D = int("decode", values.decode, 16);
  const runs = int("runs", values.runs, 3);
  if (P + D + 1 > 512) fail(`--prefill + --decode must stay under 512 positions`, EXIT_USAGE);

  const gpu = await openGpu();
  const mm = gpuMatmul(gpu);
  const bar = progress("bench-webgpu", 2 * 6 + 1);

  // One readback: a 16-byte copy and mapAsync, nothing else queued.
  const rb = gpu.device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const src = gpu.device.createBuffer({ size: 16, usage: GPUBufferUsage.COPY_SRC });
  const readbacks: number[] = [];
  for (let i = 0; i < 20; i++) {
    const t0 = performance.now();
    const enc = gpu.device.createCommandEncoder();
    enc.copyBufferToBuffer(src, 0, rb, 0, 16);
    gpu.device.queue.submit([enc.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    rb.unmap();
    readbacks.push(performance.now() - t0);
  }
  const readbackMs = median(readbacks);
  bar.tick();

  const ckpt = await readCheckpoint(DEFAULT_INPUT, { sections: ["model"] });
  const models: [string, ModelConfig, () => Tensor[]][] = [
    ["default (model/default/ferry.ckpt)", ckpt.config, () => ckpt.model],
    ["wide synthetic (hidden 1024, 2 layers)", WIDE, () => initParams(WIDE, 7)],
  ];
  const rng = createRng(1);
  const results: Figures[] = [];
  for (const [name, config, tensors] of models) {
    const ts = tensors();
    const model = buildModel(config, ts);
    const engine = await createWebGpuEngine(config, ts, name, { gpu, readback: "argmax" });
    const prompt = Array.from({ length: P }, () => 32 + rng.int(90));
    const cpuPrefill = await time(runs, () => forward(model, createCache(model), prompt));
    bar.tick();
    const cpuDecode = await time(runs, () => {
      const cache = createCache(model);
      let l = forward(model, cache, prompt.slice(0, 1));
      for (let i = 0; i < D; i++) l = forward(model, cache, [argmax(l, 0, config.vocab_size)]);
    });
    bar.tick();
    await engine.start().feed(prompt, "last"); // first use compiles the shaders on some drivers
    const gpuPrefill = await time(runs, () => engine.start().feed(prompt, "last"));
    bar.tick();
    const gpuDecode = await time(runs, async () => {
      const s = engine.start();
      await s.feed(prompt.slice(0, 1), "none");
      for (let i = 0; i < D; i++) await s.feed([s.pick()], "none");
    });
    bar.tick();
    // The MLP's widest product, as prefill (P rows) and as decode (one row).
    const K = config.hidden_size, N = config.intermediate_size;
    const w = Float32Array.from({ length: N * K }, () => rng.normal() * 0.02);
    const x = Float32Array.from({ length: P * K }, () => rng.normal());
    const out = new Float32Array(P * N);
    // Repeat small products until a run lasts about a second, as on the GPU side.
    const cpuReps = (M: number) => {
      const t0 = performance.now();
      matmul(out, x, w, M, K, N);
      return Math.max(1, Math.min(1000, Math.round(1000 / Math.max(performance.now() - t0, 0.01))));
    };
    const mmR = cpuReps(P), mvR = cpuReps(1);
    const cpuMm = await time(runs, () => {
      for (let i = 0; i < mmR; i++) matmul(out, x, w, P, K, N);
    }) / mmR;
    const cpuMv = await time(runs, () => {
      for (let i = 0; i < mvR; i++) matmul(out, x, w, 1, K, N);
    }) / mvR;
    bar.tick();
    // Enough products per submission to fill about a second, so the one readback is amortized.
    const reps = async (M: number) =>
      Math.max(1, Math.min(50, Math.round(1000 / (await mm(x, w, M, K, N, 1)).msEach)));
    const mmReps = await reps(P), mvReps = await reps(1);
    const gpuMm: number[] = [], gpuMv: number[] = [];
    for (let r = 0; r < runs; r++) gpuMm.push((await mm(x, w, P, K, N, mmReps)).msEach);
    for (let r = 0; r < runs; r++) gpuMv.push((await mm(x, w, 1, K, N, mvReps)).msEach);
    bar.tick();
    engine.dispose?.();
    const gf = (M: number, ms: number) => 2 * M * K * N / (ms * 1e6);
    results.push({
      model: name,
      params: ts.reduce((n, t) => n + t.data.length, 0),
      prefillTokens: P,
      decodeTokens: D,
      matmul: `${K} x ${N}`,
      cpu: {
        prefillTokS: P / (cpuPrefill / 1000),
        decodeTokS: D / (cpuDecode / 1000),
        matmulGflops: gf(P, cpuMm),
        gemvGflops: gf(1, cpuMv),
      },
      webgpu: {
        prefillTokS: P / (gpuPrefill / 1000),
        decodeTokS: D / (gpuDecode / 1000),
        matmulGflops: gf(P, median(gpuMm)),
        gemvGflops: gf(1, median(gpuMv)),
      },
    });
  }
  bar.done();
  const runtime = `deno ${(globalThis as { Deno?: { version: { deno: string } } }).Deno?.version.deno}`;
  if (values.json) {
    console.log(
      JSON.stringify({ adapter: gpu.name, fallback: gpu.fallback, runtime, readbackMs, results }, null, 2),
    );
    return;
  }
  console.log(`adapter: ${gpu.name}${gpu.fallback ? " (software fallback adapter)" : ""}; ${runtime}`);
  console.log(`one readback (16 bytes, mapAsync): ${readbackMs.toFixed(1)} ms (median of 20)`);
  const f = (x: number) => x >= 100 ? x.toFixed(0) : x.toPrecision(3);
  for (const r of results) {
    console.log(
      `\n${r.model}: ${
        (r.params / 1e6).toFixed(2)
      }M params; prefill ${r.prefillTokens} tokens, decode ${r.decodeTokens}`,
    );
    const rows: [string, keyof Figures["cpu"]][] = [
      ["prefill tok/s", "prefillTokS"],
      ["decode tok/s", "decodeTokS"],
      [`matmul GFLOP/s (${r.prefillTokens} x ${r.matmul})`, "matmulGflops"],
      [`matmul GFLOP/s (1 x ${r.matmul})`, "gemvGflops"],
    ];
    console.log(
      `  ${"".padEnd(44)} ${"CPU".padStart(9)} ${"WebGPU".padStart(9)} ${"WebGPU/CPU".padStart(11)}`,
    );
    for (const [label, key] of rows) {
      console.log(
        `  ${label.padEnd(44)} ${f(r.cpu[key]).padStart(9)} ${f(r.webgpu[key]).padStart(9)} ` +
          `${(r.webgpu[key] / r.cpu[key]).toFixed(2).padStart(10)}x`,
      );
    }
  }
}

if (import.meta.main) {
  if (!("Deno" in globalThis)) {
    console.error(
      "error: bench-webgpu needs Deno (Bun has no WebGPU): deno run -A scripts/tools/bench-webgpu.ts",
    );
    process.exit(EXIT_REFUSED);
  }
  await run(main);
}

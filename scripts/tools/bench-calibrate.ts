/**
 * What calibrated quantization costs per layer at Qwen3-0.6B's widths (hidden 1,024, 16 heads of 128, 8
 * KV heads, intermediate 3,072): one layer of seeded random weights, side by side in interleaved rounds.
 *
 * - The calibration pass per window of 256 positions: the window-at-a-time pass on the WebAssembly
 *   kernels (`columnImportance`, `inputCovariance`: what calibration ran before) against the layer-at-a-
 *   time pass (`calibrationPass`) on 1 and 2 threads, each for the importance alone (what the GGUF
 *   types take) and with the covariance sums (what lut4's GPTQ takes). The same statistics, bit for bit
 *   (checked once).
 * - GPTQ of the layer's seven matrices on the covariances of that pass: quantize/gptq.ts on 1 and 2
 *   threads (by phase: the factors, the first pass, the error feedback, the error sums), and with
 *   `--scalar` the scalar JavaScript it replaced (`quantizeMatrixGptq`, about 200 s a layer), checked to
 *   give the same bits.
 *
 * Wall seconds are medians over the rounds; CPU seconds (all threads) are the steadier figure on a
 * shared machine. The load average is printed with them. A benchmark, not a test.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-calibrate.ts --rounds 3
 * // deno run -A scripts/tools/bench-calibrate.ts --rounds 3 --scalar
 * ```
 * @module
 */
import { loadavg } from "node:os";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { QWEN3_SHAPES } from "./make-qwen3.ts";
import type { ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { type Tensor, tensorSource } from "../../model/tensor.ts";
import { kernelSet } from "../../kernels/kernels.ts";
import { calibrationPass, columnImportance, inputCovariance } from "../../measure/calibrate.ts";
import { gptqEngine } from "../../quantize/gptq.ts";
import { quantizeMatrixGptq } from "../../quantize/lut4-quantize.ts";
import type { LutMatrix } from "../../kernels/int/gemv.ts";

const HELP = `
Time calibration and GPTQ at Qwen3-0.6B's widths, one layer: before and after, side by side.

Usage: bun scripts/tools/bench-calibrate.ts [--rounds N] [--windows N] [--scalar] [--json]

Options:
  --rounds N     interleaved rounds (default 3)
  --windows N    windows of 256 positions per pass (default 4)
  --scalar       also time the scalar GPTQ on the layer (minutes) and check the bits agree
  --json         print the figures as JSON
  -h, --help     this text
`;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Wall and CPU seconds (every thread of the process) of `f`. */
async function timed(f: () => unknown): Promise<{ wall: number; cpu: number }> {
  const c = process.cpuUsage(), t = performance.now();
  await f();
  const d = process.cpuUsage(c);
  return { wall: (performance.now() - t) / 1000, cpu: (d.user + d.system) / 1e6 };
}

const LAYER = [
  ["q", "self_attn.q_proj", "input_layernorm"],
  ["k", "self_attn.k_proj", "input_layernorm"],
  ["v", "self_attn.v_proj", "input_layernorm"],
  ["o", "self_attn.o_proj", ""],
  ["gate", "mlp.gate_proj", "post_attention_layernorm"],
  ["up", "mlp.up_proj", "post_attention_layernorm"],
  ["down", "mlp.down_proj", ""],
] as const;

await run(async () => {
  const { values } = cli(HELP, {
    rounds: { type: "string", default: "3" },
    windows: { type: "string", default: "4" },
    scalar: { type: "boolean" },
    json: { type: "boolean" },
  });
  const rounds = Number(values.rounds), W = Number(values.windows), T = 256;
  if (!Number.isInteger(rounds) || rounds < 1) fail("--rounds expects a positive integer", EXIT_USAGE);
  if (!Number.isInteger(W) || W < 1) fail("--windows expects a positive integer", EXIT_USAGE);
  const config = {
    ...QWEN3_SHAPES["qwen3-0.6b-body"],
    num_hidden_layers: 1,
    max_position_embeddings: T,
    rms_norm_eps: 1e-6,
  } as ModelConfig;
  const tensors = initParams(config, 1);
  const windows = Array.from(
    { length: W },
    (_, w) => Array.from({ length: T }, (_, i) => (i * 37 + 11 * w + 5) % 256),
  );
  const sources = tensors.map(tensorSource), wasm = kernelSet("wasm");
  const load = () => loadavg()[0];
  const loads: number[] = [load()];

  // The calibration pass: before (window at a time, one thread) and after (layer at a time, 1 and 2 threads).
  const passes: Record<string, () => unknown> = {
    "importance, window at a time": () => columnImportance(config, tensors, windows, wasm),
    "importance, layer at a time, 1 thread": () =>
      calibrationPass(config, sources, windows, { needs: "importance", threads: 1 }),
    "importance, layer at a time, 2 threads": () =>
      calibrationPass(config, sources, windows, { needs: "importance", threads: 2 }),
    "covariance, window at a time": () => inputCovariance(config, tensors, windows, wasm),
    "covariance, layer at a time, 1 thread": () => calibrationPass(config, sources, windows, { threads: 1 }),
    "covariance, layer at a time, 2 threads": () => calibrationPass(config, sources, windows, { threads: 2 }),
  };
  // The same statistics, bit for bit.
  const before = inputCovariance(config, tensors, windows, wasm);
  const after = await calibrationPass(config, sources, windows, { threads: 2 });
  for (const [name, c] of before) {
    if (!c.every((v, i) => Object.is(v, after.covariance!.get(name)![i]))) {
      fail(`the passes disagree on ${name}'s covariance`);
    }
  }
  const pass: Record<string, { wall: number[]; cpu: number[] }> = {};
  for (let r = 0; r < rounds; r++) {
    for (const [label, f] of Object.entries(passes)) {
      const t = await timed(f);
      (pass[label] ??= { wall: [], cpu: [] }).wall.push(t.wall / W);
      pass[label].cpu.push(t.cpu / W);
    }
    loads.push(load());
    console.error(`pass round ${r + 1}/${rounds} done (load ${load().toFixed(1)})`);
  }

  // GPTQ of the layer on the pass's covariances (the gains folded as the lut4 writer folds them).
  const byName = new Map(tensors.map((t) => [t.name, t]));
  const gain = (n: string) => {
    if (!n) return undefined;
    const g = byName.get(`model.layers.0.${n}.weight`)!.data, root = Math.sqrt(config.hidden_size);
    return Float64Array.from(g, (x) => x * root);
  };
  const jobs = LAYER.map(([short, name, fold]) => {
    const t = byName.get(`model.layers.0.${name}.weight`) as Tensor, cols = t.dims[1];
    const cov = after.covariance!.get(`model.layers.0.${name}.weight`)!, f = gain(fold);
    const h = f ? Float64Array.from(cov, (v, k) => v / (f[Math.floor(k / cols)] * f[k % cols])) : cov;
    return { short, data: t.data, rows: t.dims[0], cols, fold: f, h, key: `${fold}|${cols}` };
  });
  const gptqLayer = async (threads: number) => {
    const engine = gptqEngine(threads);
    await engine.ready;
    const out: LutMatrix[] = [];
    const t = await timed(async () => {
      for (const j of jobs) {
        const read = (start: number, count: number) => j.data.subarray(start, start + count);
        out.push((await engine.quantize(j.short, read, j.fold, j.rows, j.cols, () => j.h, j.key)).matrix);
      }
    });
    engine.close();
    return { ...t, out, phases: { ...engine.phases } };
  };
  const gptq: Record<string, { wall: number[]; cpu: number[]; phases: Record<string, number>[] }> = {};
  let reference: LutMatrix[] | undefined;
  for (let r = 0; r < rounds; r++) {
    for (const threads of [1, 2]) {
      const g = await gptqLayer(threads);
      const e = gptq[`GPTQ, WebAssembly, ${threads} thread${threads > 1 ? "s" : ""}`] ??= {
        wall: [],
        cpu: [],
        phases: [],
      };
      e.wall.push(g.wall), e.cpu.push(g.cpu), e.phases.push(g.phases);
      reference ??= g.out;
    }
    loads.push(load());
    console.error(`GPTQ round ${r + 1}/${rounds} done (load ${load().toFixed(1)})`);
  }
  if (values.scalar) {
    const out: LutMatrix[] = [];
    const t = await timed(() => {
      for (const j of jobs) {
        const folded = j.fold ? Float64Array.from(j.data, (x, k) => x * j.fold![k % j.cols]) : j.data;
        out.push(quantizeMatrixGptq(j.short, folded, j.rows, j.cols, j.h).matrix);
        console.error(`scalar GPTQ: ${j.short} done`);
      }
    });
    const same = out.every((m, i) =>
      m.expBase === reference![i].expBase &&
      Buffer.from(m.nibbles).equals(Buffer.from(reference![i].nibbles)) &&
      Buffer.from(m.scales).equals(Buffer.from(reference![i].scales))
    );
    if (!same) fail("the scalar GPTQ and the WebAssembly engine disagree");
    gptq["GPTQ, scalar JavaScript (before), 1 thread"] = { wall: [t.wall], cpu: [t.cpu], phases: [] };
    loads.push(load());
  }
  const figures = {
    shape: "one layer of Qwen3-0.6B's widths, windows of 256 positions",
    windows_per_pass: W,
    rounds,
    load_average: { min: Math.min(...loads), max: Math.max(...loads) },
    pass_seconds_per_window_per_layer: Object.fromEntries(
      Object.entries(pass).map(([k, v]) => [k, { wall: median(v.wall), cpu: median(v.cpu) }]),
    ),
    gptq_seconds_per_layer: Object.fromEntries(
      Object.entries(gptq).map(([k, v]) => [k, {
        wall: median(v.wall),
        cpu: median(v.cpu),
        ...(v.phases.length
          ? {
            phases: Object.fromEntries(
              Object.keys(v.phases[0]).map((p) => [p, median(v.phases.map((x) => x[p])) / 1000]),
            ),
          }
          : {}),
      }]),
    ),
  };
  if (values.json) return console.log(JSON.stringify(figures, null, 2));
  const f3 = (x: number) => x.toFixed(3);
  console.log(
    `${figures.shape}; medians of ${rounds} rounds; load ${figures.load_average.min.toFixed(1)}–${
      figures.load_average.max.toFixed(1)
    }`,
  );
  console.log(`calibration pass, per window per layer (${W} windows a pass):`);
  for (const [k, v] of Object.entries(figures.pass_seconds_per_window_per_layer)) {
    console.log(`  ${k.padEnd(40)} wall ${f3(v.wall)} s, CPU ${f3(v.cpu)} s`);
  }
  console.log("GPTQ of the layer's seven matrices:");
  for (const [k, v] of Object.entries(figures.gptq_seconds_per_layer)) {
    const phases = "phases" in v && v.phases
      ? ` (${Object.entries(v.phases).map(([p, s]) => `${p} ${(s as number).toFixed(2)}`).join(", ")})`
      : "";
    console.log(`  ${k.padEnd(40)} wall ${v.wall.toFixed(2)} s, CPU ${v.cpu.toFixed(2)} s${phases}`);
  }
});

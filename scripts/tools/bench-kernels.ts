/**
 * The WebAssembly SIMD kernels against the JavaScript reference, side by side in one run, as ratios:
 * matrix-product GFLOP/s on the training shapes, prefill of a 256-token prompt (ferry-wasm,
 * ferry-JS, and llama.cpp F32 through node-llama-cpp on one thread), and trainer tokens/s before
 * and after on Bun and Deno (scripts/tools/bench-train.ts with `--kernels ref` and `--kernels wasm`).
 *
 *   bun scripts/tools/bench-kernels.ts
 *
 * llama.cpp needs node-llama-cpp installed (`bun install`). The machine is shared, so each one-thread
 * figure is CPU time of this process (wall-clock is in --json too), the best of several interleaved
 * rounds, and only the ratios mean much. The trainer's figures are wall-clock (it uses two cores).
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../../formats/checkpoint/parts.ts";
import { writeGguf } from "../../formats/gguf/gguf.ts";
import { kernelSet } from "../../kernels/kernels.ts";
import { PRESETS } from "../../model/config.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { createRng } from "../../model/random.ts";
import { BOS } from "../../model/tokenizer.ts";

const HELP = `
Usage: bun scripts/tools/bench-kernels.ts [options]

Prints, side by side: matrix-product GFLOP/s of the JavaScript and WebAssembly kernels on the
trainer's shapes; prefill tokens/s of a 256-token prompt for ferry-wasm, ferry-JS and llama.cpp F32
(one thread); trainer tokens/s with each kernel set on Bun and Deno (scripts/tools/bench-train.ts).
Options:
  --rounds N      interleaved timing rounds (the best of each is kept)   [5]
  --steps N       optimizer steps per trainer run                       [50]
  --train-rounds N  trainer runs of each worker count, interleaved (best kept) [1]
  --skip-train    leave out the trainer runs (they take a few minutes)
  --json          machine-readable output
  -h, --help      this text
`;
const { values: a } = cli(HELP, {
  rounds: { type: "string", default: "5" },
  steps: { type: "string", default: "50" },
  "train-rounds": { type: "string", default: "1" },
  "skip-train": { type: "boolean", default: false },
  json: { type: "boolean", default: false },
});
const rounds = Number(a.rounds);
if (!Number.isInteger(rounds) || rounds < 1) fail("--rounds expects a positive integer", EXIT_USAGE);

/** Seconds per call: wall-clock, and CPU time of this process (what a shared machine leaves intact). */
interface Timing {
  wall: number;
  cpu: number;
}

const cpuSeconds = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Best wall and CPU seconds per call of each `f`, over `rounds` interleaved rounds of at least `minMs`. */
async function timeBest(fs: Array<() => unknown>, minMs: number, bar: { tick(): void }): Promise<Timing[]> {
  const best = fs.map(() => ({ wall: Infinity, cpu: Infinity }));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < fs.length; i++) {
      const call = async () => {
        const r = fs[i]();
        if (r instanceof Promise) await r; // only llama.cpp's calls are asynchronous
      };
      await call();
      let n = 0;
      const t0 = performance.now(), c0 = cpuSeconds();
      do await call(), n++; while (performance.now() - t0 < minMs);
      best[i].wall = Math.min(best[i].wall, (performance.now() - t0) / 1000 / n);
      best[i].cpu = Math.min(best[i].cpu, (cpuSeconds() - c0) / n);
      bar.tick();
    }
  }
  return best;
}

/** The default shape's width and MLP width: the gate and up projections, the trainer's widest matrices. */
const { hidden_size: H, intermediate_size: F } = PRESETS.default;

/** The shapes: the trainer's MLP projection over a batch of 16 sequences of 256 tokens, and one decode row. */
const SHAPES: {
  form: string;
  f: "matmul" | "matmulNN" | "matmulTN";
  M: number;
  K: number;
  N: number;
  frozen?: true;
}[] = [
  { form: "x @ W^T (forward)", f: "matmul", M: 4096, K: H, N: F },
  { form: "dy @ W (grad of x)", f: "matmulNN", M: 4096, K: F, N: H },
  { form: "dy^T @ x (grad of W)", f: "matmulTN", M: F, K: 4096, N: H },
  { form: "x @ W^T, one row (decode)", f: "matmul", M: 1, K: H, N: F },
  // A model loaded for inference freezes its weights: W is packed once, not on every call.
  { form: "the same, W frozen", f: "matmul", M: 1, K: H, N: F, frozen: true },
];

await run(async () => {
  const runtime = process.versions.bun
    ? `bun ${process.versions.bun}`
    : `deno ${(globalThis as any).Deno?.version?.deno}`;
  const rng = createRng(7);
  const rand = (n: number) => Float32Array.from({ length: n }, () => rng.next() * 2 - 1);

  // ---- matrix products
  const bar = progress("matmul", SHAPES.length * rounds * 2, { unit: "run" });
  const products = [];
  for (const { form, f, M, K, N, frozen } of SHAPES) {
    const x = rand(M * K), y = rand(K * N), out = new Float32Array(M * N);
    if (frozen) kernelSet("wasm").freeze(y);
    const call = (k: "ref" | "wasm") => () => kernelSet(k)[f](out, x, y, M, K, N);
    const [js, wasm] = await timeBest([call("ref"), call("wasm")], M === 1 ? 50 : 250, bar);
    const gf = (s: number) => (2 * M * N * K) / s / 1e9;
    products.push({
      form,
      shape: `${M}x${K}x${N}`,
      js_gflops: gf(js.cpu),
      wasm_gflops: gf(wasm.cpu),
      ratio: js.cpu / wasm.cpu,
      wall_ratio: js.wall / wasm.wall,
    });
  }
  bar.done();

  // ---- prefill of a 256-token prompt: BOS and 255 held-out bytes
  const ck = await readCheckpoint(DEFAULT_INPUT, { sections: ["model"] });
  const model = buildModel(ck.config, ck.model!, DEFAULT_INPUT);
  const window = evalWindows((await loadBrown()).heldOut, 1)[0];
  const ids = [BOS, ...window.subarray(0, 255)];
  const llama = await openLlama(model).catch((e) => ({ error: String((e as Error).message ?? e) }));
  const runners: Array<() => unknown> = (["ref", "wasm"] as const).map((k) => {
    const on = buildModel(ck.config, ck.model!, DEFAULT_INPUT, kernelSet(k));
    return () => forward(on, createCache(on, ids.length), ids);
  });
  if ("prefill" in llama) runners.push(() => llama.prefill(ids));
  const pbar = progress("prefill", rounds * runners.length, { unit: "run" });
  const [ferryJs, ferryWasm, llamaCpp] = await timeBest(runners, 300, pbar);
  pbar.done();
  if ("prefill" in llama) await llama.close();
  const prefill = {
    tokens: ids.length,
    ferry_wasm_tok_s: ids.length / ferryWasm.cpu,
    ferry_js_tok_s: ids.length / ferryJs.cpu,
    llama_cpp_tok_s: llamaCpp ? ids.length / llamaCpp.cpu : null,
    wall_tok_s: {
      ferry_wasm: ids.length / ferryWasm.wall,
      ferry_js: ids.length / ferryJs.wall,
      llama_cpp: llamaCpp ? ids.length / llamaCpp.wall : null,
    },
    llama_cpp_note: "error" in llama
      ? llama.error
      : "node-llama-cpp 3.21.1, CPU, 1 thread, F32 file, F32 KV cache",
  };

  // ---- trainer, before (ref) and after (wasm), on both runtimes
  const trainer: Array<Record<string, unknown>> = [];
  if (!a["skip-train"]) {
    const tbar = progress("trainer", 4, { unit: "run" });
    for (const [exe, pre] of [["bun", []], ["deno", ["run", "-A"]]] as const) {
      for (const k of ["ref", "wasm"]) {
        const r = spawnSync(exe, [
          ...pre,
          "scripts/tools/bench-train.ts",
          "--json",
          "--kernels",
          k,
          "--steps",
          a.steps!,
          "--rounds",
          a["train-rounds"]!,
        ], { encoding: "utf8" });
        if (r.status !== 0) {
          throw new Error(`${exe} bench-train --kernels ${k} failed: ${r.stderr.trim().split("\n").pop()}`);
        }
        trainer.push(JSON.parse(r.stdout));
        tbar.tick();
      }
    }
    tbar.done();
  }

  const load = `load ${loadavg()[0].toFixed(1)} at the end on ${navigator.hardwareConcurrency} cores`;
  const result = { runtime, load, products, prefill, trainer };
  if (a.json) return console.log(JSON.stringify(result, null, 2));
  const f0 = (x: number) => x.toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  console.log(
    `ferry kernels on ${runtime}, ${load}: best of ${rounds} interleaved rounds, by CPU time`,
  );
  console.log(`\nmatrix product, one thread, GFLOP/s\n`);
  console.log(
    `${"form".padEnd(28)}${"M x K x N".padEnd(16)}${"JS".padStart(8)}${"wasm".padStart(8)}${
      "wasm/JS".padStart(10)
    }`,
  );
  for (const p of products) {
    console.log(
      `${p.form.padEnd(28)}${p.shape.padEnd(16)}${p.js_gflops.toFixed(2).padStart(8)}${
        p.wasm_gflops.toFixed(2).padStart(8)
      }${(p.ratio.toFixed(1) + "x").padStart(10)}`,
    );
  }
  console.log(`\nprefill of a ${prefill.tokens}-token prompt, default model, one thread, tokens/s\n`);
  console.log(`  ferry-wasm   ${f0(prefill.ferry_wasm_tok_s).padStart(8)}`);
  console.log(
    `  ferry-JS     ${f0(prefill.ferry_js_tok_s).padStart(8)}   wasm/JS ${
      (prefill.ferry_wasm_tok_s / prefill.ferry_js_tok_s).toFixed(1)
    }x`,
  );
  if (prefill.llama_cpp_tok_s) {
    console.log(
      `  llama.cpp    ${f0(prefill.llama_cpp_tok_s).padStart(8)}   ferry-wasm/llama.cpp ${
        (prefill.ferry_wasm_tok_s / prefill.llama_cpp_tok_s).toFixed(2)
      }x  (${prefill.llama_cpp_note})`,
    );
  } else console.log(`  llama.cpp    n/a (${prefill.llama_cpp_note})`);
  if (trainer.length) {
    console.log(`\ntrainer, default config (seq 256, batch 8), tokens/s\n`);
    console.log(
      `${"runtime".padEnd(12)}${"kernels".padEnd(9)}${"one thread".padStart(11)}${"1 worker".padStart(10)}${
        "2 workers".padStart(11)
      }${"2/1".padStart(7)}${"2 procs/1".padStart(11)}`,
    );
    for (const t of trainer) {
      const n = (k: string) => t[k] as number;
      console.log(
        `${String(t.runtime).padEnd(12)}${String(t.kernels).padEnd(9)}${
          f0(n("single_thread_tok_s")).padStart(11)
        }${f0(n("one_worker_tok_s")).padStart(10)}${f0(n("two_workers_tok_s")).padStart(11)}${
          (n("two_over_one").toFixed(2) + "x").padStart(7)
        }${
          ((t.independent_processes as { two_over_one: number }).two_over_one.toFixed(2) + "x").padStart(11)
        }`,
      );
    }
    for (let i = 0; i + 1 < trainer.length; i += 2) {
      const [ref, wasm] = [trainer[i], trainer[i + 1]];
      const x = (k: string) => ((wasm[k] as number) / (ref[k] as number)).toFixed(2) + "x";
      console.log(
        `${String(ref.runtime).padEnd(12)}wasm/ref: one thread ${x("single_thread_tok_s")}, 1 worker ${
          x("one_worker_tok_s")
        }, 2 workers ${x("two_workers_tok_s")}`,
      );
    }
  }
});

/** llama.cpp (one thread) on an F32 GGUF of the same weights, ready to prefill from an empty context. */
async function openLlama(model: ReturnType<typeof buildModel>) {
  const { cpuLlama } = await import("../../measure/llama-cpp.ts");
  const dir = mkdtempSync(join(tmpdir(), "ferry-bench-kernels-"));
  const path = join(dir, "model.f32.gguf");
  await writeGguf(path, model.tensors, model.config, { type: "f32" });
  const llama = await cpuLlama();
  const lm = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const context = await lm.createContext({
    contextSize: 512,
    batchSize: 512,
    threads: 1,
    sequences: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32",
  });
  const seq = context.getSequence();
  return {
    async prefill(ids: number[]) {
      await seq.clearHistory();
      // deno-lint-ignore no-explicit-any
      await seq.evaluateWithoutGeneratingNewTokens(ids as any[]);
    },
    async close() {
      await context.dispose();
      await lm.dispose();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

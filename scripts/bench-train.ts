/**
 * Trainer throughput on the default config: tokens per second of the loss-and-gradient pass on one
 * thread, and of full optimizer steps with one and with two workers, side by side in one run.
 *
 *   bun scripts/bench-train.ts
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { chooseKernels, cli, KERNELS_HELP, run } from "./cli.ts";
import { PRESETS } from "../model/config.ts";
import { initParams } from "../model/init.ts";
import { createScratch, flattenTensors, paramLayout, sequenceLossAndGrad } from "../model/train.ts";

const HELP = `
Usage: bun scripts/bench-train.ts [--steps N] [--kernels K] [--json]

Measures the trainer on the default config (sequences of 256 tokens, batch 8): one-thread
loss+gradient throughput, then whole steps of scripts/train.ts with 1 and 2 workers.
  --steps N   optimizer steps per trainer run (logged every 10)  [30]
${KERNELS_HELP}
  --json      machine-readable output
`;
const { values: a } = cli(HELP, {
  steps: { type: "string", default: "30" },
  kernels: { type: "string", default: "wasm" },
  json: { type: "boolean", default: false },
});
const kernels = chooseKernels(a.kernels);

await run(() => {
  const cfg = PRESETS.default, T = 256, layout = paramLayout(cfg);
  const params = flattenTensors(layout, initParams(cfg, 1)), grads = new Float32Array(layout.size);
  const s = createScratch(cfg, T);
  const ids = Array.from({ length: T }, (_, i) => (i * 31) % 256);
  sequenceLossAndGrad(cfg, layout, params, grads, ids, ids, s);
  const t0 = performance.now(), n = 6;
  for (let i = 0; i < n; i++) sequenceLossAndGrad(cfg, layout, params, grads, ids, ids, s);
  const single = (n * T) / ((performance.now() - t0) / 1000);

  const runTrainer = (workers: number) => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-bench-train-"));
    try {
      const r = spawnSync(process.execPath, [
        ...(process.versions.bun ? [] : ["run", "-A"]),
        "scripts/train.ts", "--out", join(dir, "b.ckpt"), "--preset", "default", "--steps", a.steps!, "--batch", "8",
        "--workers", String(workers), "--save-every", "100000", "--eval-every", "100000", "--kernels", kernels,
      ], { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`trainer failed: ${r.stderr}`);
      // The log holds every 10th step; skip the first (JIT warm-up) and average the rest.
      const rates = readFileSync(join(dir, "b.log"), "utf8").split("\n").filter((l) => /^\d/.test(l)).map((l) => Number(l.split("\t")[5]));
      const tail = rates.slice(1);
      return tail.reduce((x, y) => x + y, 0) / Math.max(1, tail.length);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const one = runTrainer(1), two = runTrainer(2);
  const runtime = process.versions.bun ? `bun ${process.versions.bun}` : `deno ${(globalThis as any).Deno?.version?.deno}`;
  const result = { runtime, kernels, params: layout.size, single_thread_tok_s: single, one_worker_tok_s: one, two_workers_tok_s: two, two_over_one: two / one };
  if (a.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(`trainer on ${runtime}, ${kernels} kernels, default config (${layout.size} params, seq 256, batch 8)`);
    console.log(`  loss+grad, one thread      ${single.toFixed(0)} tok/s`);
    console.log(`  train.ts, 1 worker         ${one.toFixed(0)} tok/s`);
    console.log(`  train.ts, 2 workers        ${two.toFixed(0)} tok/s   (${(two / one).toFixed(2)}x of 1 worker)`);
  }
});

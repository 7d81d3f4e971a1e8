/**
 * Trainer throughput on the default config: tokens per second of the loss-and-gradient pass on one
 * thread, and of full optimizer steps with one and with two workers, side by side in one run.
 *
 *   bun scripts/tools/bench-train.ts
 *
 * @module
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { chooseKernels, cli, EXIT_USAGE, fail, KERNELS_HELP, run } from "../cli.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { createScratch, flattenTensors, paramLayout, sequenceLossAndGrad } from "../../model/train.ts";

const HELP = `
Usage: bun scripts/tools/bench-train.ts [--steps N] [--kernels K] [--json]

Measures the trainer on the default config (sequences of 256 tokens, batch 8): one-thread
loss+gradient throughput, then whole steps of scripts/train.ts with 1 and 2 workers, alternately,
each the best of --rounds runs (its rate after the first 20 steps, the JIT's warm-up). Each round
also runs the loss+gradient alone in one process and in two processes at once: how this machine
scales two independent copies of the work, the yardstick for the two workers (a 2-core machine gives
at most 2x, and a busy or noisy one less).
  --steps N   optimizer steps per trainer run  [50]
  --rounds N  runs of each worker count, interleaved  [2]
${KERNELS_HELP}
  --json      machine-readable output
`;
const { values: a } = cli(HELP, {
  steps: { type: "string", default: "50" },
  rounds: { type: "string", default: "2" },
  kernels: { type: "string", default: "wasm" },
  json: { type: "boolean", default: false },
  "probe-ms": { type: "string" }, // internal: one timed loss+gradient process of the ceiling
});
const kernelsUsed = chooseKernels(a.kernels), kernels = kernelsUsed.name;
const rounds = Number(a.rounds), steps = Number(a.steps);
if (!Number.isInteger(rounds) || rounds < 1) fail("--rounds expects a positive integer", EXIT_USAGE);
if (!Number.isInteger(steps) || steps <= 20) {
  fail("--steps expects an integer above 20 (the first 20 are warm-up)", EXIT_USAGE);
}

const cfg = PRESETS.default, T = 256, layout = paramLayout(cfg);

/** Tokens per second of the loss-and-gradient pass on this thread, timed over `ms` after `warmMs`. */
function lossAndGradRate(warmMs: number, ms: number): number {
  const params = flattenTensors(layout, initParams(cfg, 1)), grads = new Float32Array(layout.size);
  const s = createScratch(cfg, T, kernelsUsed);
  const ids = Array.from({ length: T }, (_, i) => (i * 31) % 256);
  const pass = () => sequenceLossAndGrad(cfg, layout, params, grads, ids, ids, s);
  for (const end = performance.now() + warmMs; performance.now() < end;) pass();
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < ms) pass(), n++;
  return (n * T) / ((performance.now() - t0) / 1000);
}

// The ceiling's child process: one rate on stdout.
if (a["probe-ms"] !== undefined) {
  console.log(lossAndGradRate(3000, Number(a["probe-ms"])));
  process.exit(0);
}

/** Runs `count` loss+gradient processes at once; their rates in tokens per second. */
function probes(count: number): Promise<number[]> {
  const one = () =>
    new Promise<number>((resolve, reject) => {
      const args = [
        ...(process.versions.bun ? [] : ["run", "-A"]),
        "scripts/tools/bench-train.ts",
        "--kernels",
        kernels,
        "--probe-ms",
        "6000",
      ];
      const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
      let out = "";
      child.stdout.on("data", (d) => (out += d));
      child.on("error", reject);
      child.on(
        "close",
        (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`probe exited ${code}`))),
      );
    });
  return Promise.all(Array.from({ length: count }, one));
}

await run(async () => {
  const loadBefore = loadavg()[0];

  type Run = { tok_per_s: number; tok_per_cpu_s: number; cores_busy: number };
  const runTrainer = (workers: number): Run => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-bench-train-"));
    try {
      const r = spawnSync(process.execPath, [
        ...(process.versions.bun ? [] : ["run", "-A"]),
        "scripts/train.ts",
        "--out",
        join(dir, "b.ckpt"),
        "--preset",
        "default",
        "--steps",
        String(steps),
        "--batch",
        "8",
        "--workers",
        String(workers),
        "--save-every",
        "100000",
        "--eval-every",
        "100000",
        "--kernels",
        kernels,
        "--json",
      ], { encoding: "utf8" });
      if (r.status !== 0) throw new Error(`trainer failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split("\n").pop()!); // its rates after its first 20 steps
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  // 1 and 2 workers alternately, so that other work on the machine weighs on both alike.
  let best1: Run | undefined, best2: Run | undefined;
  const better = (x: Run | undefined, y: Run) => (x && x.tok_per_s >= y.tok_per_s ? x : y);
  // The same for independent processes (no trainer, nothing shared): the pair's summed rate.
  let alone = 0, pair = 0;
  for (let r = 0; r < rounds; r++) {
    best1 = better(best1, runTrainer(1)), best2 = better(best2, runTrainer(2));
    alone = Math.max(alone, (await probes(1))[0]);
    pair = Math.max(pair, (await probes(2)).reduce((x, y) => x + y));
  }
  const one = best1!.tok_per_s, two = best2!.tok_per_s, ceiling = pair / alone;
  // By CPU time: whether two workers spend more CPU per token than one (work the split adds), and
  // how many cores each run kept busy (below 2 with two workers: waiting, for each other or a core).
  const cpu = { one_worker: best1!.tok_per_cpu_s, two_workers: best2!.tok_per_cpu_s };
  const cores = { one_worker: best1!.cores_busy, two_workers: best2!.cores_busy };
  const runtime = process.versions.bun
    ? `bun ${process.versions.bun}`
    : `deno ${(globalThis as any).Deno?.version?.deno}`;
  const load = `load ${loadBefore.toFixed(1)} before, ${
    loadavg()[0].toFixed(1)
  } after, on ${navigator.hardwareConcurrency} cores`;
  const result = {
    runtime,
    kernels,
    load,
    params: layout.size,
    single_thread_tok_s: alone,
    one_worker_tok_s: one,
    two_workers_tok_s: two,
    two_over_one: two / one,
    independent_processes: { one_tok_s: alone, two_tok_s: pair, two_over_one: ceiling },
    two_over_one_of_ceiling: two / one / ceiling,
    tok_per_cpu_s: cpu,
    cores_busy: cores,
  };
  if (a.json) console.log(JSON.stringify(result, null, 2));
  else {
    console.log(
      `trainer on ${runtime}, ${kernels} kernels, default config (${layout.size} params, seq 256, batch 8), ${load}`,
    );
    console.log(`  loss+grad, 1 process       ${alone.toFixed(0)} tok/s`);
    console.log(`  train.ts, 1 worker         ${one.toFixed(0)} tok/s`);
    console.log(
      `  train.ts, 2 workers        ${two.toFixed(0)} tok/s   (${(two / one).toFixed(2)}x of 1 worker)`,
    );
    console.log(
      `  loss+grad, 2 processes     ${pair.toFixed(0)} tok/s   (${
        ceiling.toFixed(2)
      }x of 1: this machine's own 2-core scaling)`,
    );
    console.log(`  2 workers / 2 processes    ${(two / one / ceiling).toFixed(2)}`);
    console.log(
      `  tokens per CPU-second      1 worker ${cpu.one_worker.toFixed(0)}, 2 workers ${
        cpu.two_workers.toFixed(0)
      } (${(cpu.two_workers / cpu.one_worker).toFixed(2)}x)`,
    );
    console.log(
      `  cores busy                 1 worker ${cores.one_worker.toFixed(2)}, 2 workers ${
        cores.two_workers.toFixed(2)
      }`,
    );
  }
});

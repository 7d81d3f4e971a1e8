/**
 * Trains a ferry model on the Brown corpus and writes a training checkpoint (a run, not a model).
 *
 *   deno run -A scripts/train.ts --out runs/a.ckpt --preset default --steps 3000
 *
 * @module
 */
import { existsSync } from "node:fs";
import { appendFile, mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import process from "node:process";
import { chooseKernels, cli, EXIT_USAGE, fail, KERNELS_HELP, progress, run } from "./cli.ts";
import { type ModelConfig, PRESETS, readConfigFile } from "../model/config.ts";
import { evalWindows, loadBrown } from "../model/corpus.ts";
import { initParams } from "../model/init.ts";
import { bitsPerByte } from "../measure/metrics.ts";
import { buildModel } from "../model/qwen3.ts";
import { createRng } from "../model/random.ts";
import {
  clipFactor,
  flattenTensors,
  gradNorm,
  learningRate,
  paramLayout,
  viewTensors,
} from "../model/train.ts";
import { configPathFor, readCheckpoint, writeCheckpoint } from "../formats/checkpoint/checkpoint.ts";
import { cloneTensors } from "../model/tensor.ts";

const HELP = `
Usage: deno run -A scripts/train.ts --out RUN.ckpt [options]

Trains a Qwen3-style byte model on the Brown corpus (held-out documents never seen) and writes
RUN.ckpt (weights, EMA, AdamW state), RUN.config.toml and RUN.log. Resumes when RUN.ckpt exists.

Options:
  --out PATH         checkpoint to write (and resume from)       [required]
  --preset NAME      model shape for a new run: ${Object.keys(PRESETS).join(", ")}   [default]
  --config PATH      model shape from a TOML file instead of a preset
  --steps N          total optimizer steps (the schedule's length)  [2000]
  --batch N          sequences per step                          [16]
  --seq N            tokens per sequence                         [256]
  --lr X             peak learning rate                          [3e-3]
  --warmup N         warm-up steps                               [100]
  --workers N        worker threads                              [2]
  --seed N           initialisation and data seed                [1]
  --save-every N     steps between checkpoints                   [200]
  --eval-every N     steps between held-out evaluations (16 windows) [500]
  --stop-after N     stop (with a checkpoint) after this many steps of this invocation
${KERNELS_HELP}
  --json             print the final summary as JSON (tok_per_s: the rate after the first 20 steps;
                     tok_per_cpu_s and cores_busy: the same steps by CPU time)
  -h, --help         this text
`;

const { values: a } = cli(HELP, {
  out: { type: "string" },
  preset: { type: "string", default: "default", choices: Object.keys(PRESETS) },
  config: { type: "string" },
  steps: { type: "string", default: "2000" },
  batch: { type: "string", default: "16" },
  seq: { type: "string", default: "256" },
  lr: { type: "string", default: "3e-3" },
  warmup: { type: "string", default: "100" },
  workers: { type: "string", default: "2" },
  seed: { type: "string", default: "1" },
  "save-every": { type: "string", default: "200" },
  "eval-every": { type: "string", default: "500" },
  "stop-after": { type: "string" },
  kernels: { type: "string", default: "wasm", choices: ["wasm", "ref"] },
  json: { type: "boolean", default: false },
});

function int(name: string, v: string | undefined): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) fail(`--${name} expects a positive integer, got ${v}`, EXIT_USAGE);
  return n;
}

await run(async () => {
  if (!a.out) fail("--out is required", EXIT_USAGE);
  const out = a.out!;
  const totalSteps = int("steps", a.steps), batch = int("batch", a.batch), seqLen = int("seq", a.seq);
  const warmup = int("warmup", a.warmup), nWorkers = int("workers", a.workers), seed = Number(a.seed);
  const saveEvery = int("save-every", a["save-every"]), evalEvery = int("eval-every", a["eval-every"]);
  const stopAfter = a["stop-after"] ? int("stop-after", a["stop-after"]) : Infinity;
  const peakLr = Number(a.lr);
  const kernels = chooseKernels(a.kernels);

  const resuming = existsSync(out);
  let cfg: ModelConfig;
  if (resuming) cfg = await readConfigFile(configPathFor(out));
  else if (a.config) cfg = await readConfigFile(a.config);
  else {
    cfg = PRESETS[a.preset];
    if (!cfg) fail(`unknown --preset ${a.preset}; known: ${Object.keys(PRESETS).join(", ")}`, EXIT_USAGE);
  }
  if (seqLen > cfg.max_position_embeddings) {
    fail(`--seq ${seqLen} exceeds max_position_embeddings`, EXIT_USAGE);
  }

  const corpus = await loadBrown();
  const layout = paramLayout(cfg);
  const shared = (n: number) => new Float32Array(new SharedArrayBuffer(n * 4));
  // Everything the optimizer touches is shared: the workers run it, each over its own range.
  const params = shared(layout.size),
    m = shared(layout.size),
    v = shared(layout.size),
    ema = shared(layout.size);
  let step = 0, tokensSeen = 0, rngState: number[] | undefined;
  if (resuming) {
    const ck = await readCheckpoint(out);
    flattenTensors(layout, ck.model, params);
    if (ck.adam) flattenTensors(layout, ck.adam.m, m), flattenTensors(layout, ck.adam.v, v);
    if (ck.ema) flattenTensors(layout, ck.ema, ema);
    else ema.set(params);
    step = ck.step;
    tokensSeen = Number(ck.trainer.tokens_seen ?? 0);
    rngState = ck.trainer.rng as number[] | undefined;
    console.error(`resuming ${out} at step ${step}`);
  } else {
    flattenTensors(layout, initParams(cfg, seed), params);
    ema.set(params);
    await mkdir(dirname(out) || ".", { recursive: true });
  }
  const rng = createRng(rngState ?? seed + 1000);
  const trainBytes = new Uint8Array(new SharedArrayBuffer(corpus.train.length));
  trainBytes.set(corpus.train);
  // One gradient buffer per sequence of the batch: the workers take sequences from a shared counter
  // (the faster one takes more), and the sum over sequences runs in their order, so the bits do not
  // depend on which worker ran which sequence, nor on how many workers there are.
  const grads = Array.from({ length: batch }, () => shared(layout.size));
  const losses = new Float64Array(new SharedArrayBuffer(batch * 8)),
    next = new Int32Array(new SharedArrayBuffer(4));
  // Worker i owns elements [cut(i), cut(i + 1)) of the optimizer's work (cuts on 16-element bounds).
  const cut = (
    i: number,
  ) => (i === nWorkers ? layout.size : Math.floor((layout.size * i) / nWorkers / 16) * 16);
  const workers = Array.from({ length: nWorkers }, (_, index) => {
    const w = new Worker(new URL("../model/train-worker.ts", import.meta.url).href, { type: "module" });
    w.postMessage({
      type: "init",
      config: cfg,
      seqLen,
      kernels: kernels.name,
      from: cut(index),
      to: cut(index + 1),
      corpus: trainBytes.buffer,
      params: params.buffer,
      grads: grads.map((g) => g.buffer),
      m: m.buffer,
      v: v.buffer,
      ema: ema.buffer,
      losses: losses.buffer,
      next: next.buffer,
    });
    return w;
  });
  const call = (w: Worker, msg: unknown) =>
    new Promise<{ loss: number }>((resolve, reject) => {
      w.onmessage = (ev) => resolve(ev.data);
      w.onerror = (e) => reject(new Error(`training worker failed: ${e.message}`));
      w.postMessage(msg);
    });
  await Promise.all(workers.map((w) => new Promise((r) => (w.onmessage = r))));

  const evalSet = evalWindows(corpus.heldOut, 16, Math.min(256, seqLen));
  const logPath = out.replace(/\.ckpt$/, "") + ".log";
  if (!resuming) {
    await appendFile(
      logPath,
      `# ferry train: ${
        JSON.stringify({ ...cfg })
      }\n# steps=${totalSteps} batch=${batch} seq=${seqLen} lr=${peakLr} warmup=${warmup} seed=${seed} workers=${nWorkers} kernels=${kernels.name}\n# step\ttokens\tloss_bits_per_byte\tlr\tgrad_norm\ttok_per_s\theldout16_bpb\n`,
    );
  }
  const adam = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
  const emaDecay = 0.998;
  const bar = progress("train", totalSteps, { unit: "step" });
  bar.tick(step);
  const save = async () => {
    const t = (f: Float32Array) => cloneTensors(viewTensors(layout, f));
    await writeCheckpoint(out, cfg, {
      step,
      model: t(params),
      ema: t(ema),
      adam: { m: t(m), v: t(v) },
      trainer: {
        tokens_seen: tokensSeen,
        rng: rng.state(),
        steps: totalSteps,
        batch,
        seq: seqLen,
        lr: peakLr,
        warmup,
        seed,
      },
    });
  };
  const heldOut = (f: Float32Array) =>
    bitsPerByte(buildModel(cfg, viewTensors(layout, f), out, kernels), evalSet);
  let ran = 0, lastTime = performance.now(), lastTokens = tokensSeen, lossAvg = NaN;
  // The summary's rate: over this invocation's steps after its first WARM (JIT warm-up), if any.
  const WARM = 20;
  let warmAt = lastTime, warmTokens = tokensSeen, stepsDoneAt = lastTime;
  // CPU time of the whole process (every thread), to tell work from waiting for a core.
  const cpuSeconds = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  };
  let warmCpu = cpuSeconds(), stepsDoneCpu = warmCpu;
  while (step < totalSteps && ran < stopAfter) {
    const span = trainBytes.length - seqLen;
    const starts = Array.from({ length: batch }, () => rng.int(span));
    Atomics.store(next, 0, 0);
    await Promise.all(
      workers.map((w) => call(w, { type: "step", starts, seqLen, gradScale: 1 / (batch * seqLen) })),
    );
    // The sum over sequences into grads[0], the clipping and AdamW + EMA run in the workers, each over
    // its range; only the norm (one ordered f64 sum) is serial, here.
    await Promise.all(workers.map((w) => call(w, { type: "reduce" })));
    const loss = losses.reduce((s, x) => s + x, 0) / (batch * seqLen) / Math.LN2;
    const norm = gradNorm(grads[0]);
    const lr = learningRate(step, totalSteps, warmup, peakLr, peakLr * 0.1);
    const update = { type: "update", scale: clipFactor(norm, 1.0), step: step + 1, lr, adam, emaDecay };
    await Promise.all(workers.map((w) => call(w, update)));
    step++, ran++, tokensSeen += batch * seqLen;
    lossAvg = Number.isNaN(lossAvg) ? loss : 0.95 * lossAvg + 0.05 * loss;
    const now = performance.now();
    const tps = ((tokensSeen - lastTokens) / (now - lastTime)) * 1000;
    if (ran === WARM) warmAt = now, warmTokens = tokensSeen, warmCpu = cpuSeconds();
    let line = `${step}\t${tokensSeen}\t${loss.toFixed(4)}\t${lr.toExponential(3)}\t${norm.toFixed(3)}\t${
      tps.toFixed(0)
    }`;
    if (step % evalEvery === 0 || step === totalSteps) line += `\t${heldOut(ema).toFixed(4)}`;
    if (step % 10 === 0 || line.split("\t").length > 6) await appendFile(logPath, line + "\n");
    lastTime = now, lastTokens = tokensSeen;
    stepsDoneAt = now, stepsDoneCpu = cpuSeconds();
    bar.tick(1, `loss ${lossAvg.toFixed(3)} bits/byte, ${Math.round(tps)} tok/s`);
    if (step % saveEvery === 0 || step === totalSteps) await save();
  }
  if (ran > 0 && step % saveEvery !== 0 && step !== totalSteps) await save();
  bar.done();
  for (const w of workers) w.terminate();
  const wall = (stepsDoneAt - warmAt) / 1000, cpu = stepsDoneCpu - warmCpu;
  const summary = {
    checkpoint: out,
    step,
    tokens_seen: tokensSeen,
    train_loss_bpb: lossAvg,
    tok_per_s: (tokensSeen - warmTokens) / wall,
    tok_per_cpu_s: (tokensSeen - warmTokens) / cpu,
    cores_busy: cpu / wall,
  };
  if (a.json) console.log(JSON.stringify(summary));
  else {console.log(
      `wrote ${out} at step ${step} (${tokensSeen} tokens, train loss ${lossAvg.toFixed(3)} bits/byte)`,
    );}
  process.exit(0);
});

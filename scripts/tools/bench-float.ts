/**
 * The frozen float engine at a real model's size: a seeded random model of the Qwen3-0.6B body's shape
 * (hidden 1024, 28 layers, 16/8 heads, head_dim 128, intermediate 3072, the byte vocabulary: 0.44B
 * parameters), its weights bf16-valued (as a bf16 export's are) unless `--f32`, loaded the way
 * loadEngine hands tensors over (frozen), then timed: load (packing), greedy decode after a short
 * prompt, and a prompt's prefill, the median of the repetitions, with the peak resident memory.
 * `--against DIR` also times another ferry checkout's float engine on the same tensors (a before/after).
 * `--model FILE` times an export instead (any format the float engine loads, e.g. a Q4_0 GGUF), loaded
 * as loadEngine loads it, and with `--against DIR` the same file on that checkout's loadEngine.
 * `--load` instead writes the model as a bf16 dmexp and times, each in a fresh process of this runtime,
 * reading it (the format's full reader, f32 tensors out) against loading it on the float engine
 * (read, then pack), with each one's peak resident memory.
 *
 *   bun scripts/tools/bench-float.ts --threads 1
 *   deno run -A scripts/tools/bench-float.ts --threads 2 --layers 8
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-float.ts --threads 2 --tokens 64 --prompt 128 --json
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { loadEngine } from "../../engines/mod.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { writeDmexp } from "../../formats/dmexp/dmexp.ts";
import { formatOf } from "../../formats/mod.ts";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { createFloatEngine, defaultThreads, floatEngineMemory } from "../../engines/float.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import type { Engine } from "../../model/engine.ts";
import type { Tensor } from "../../model/tensor.ts";

const HELP = `
Usage: bun scripts/tools/bench-float.ts [options]

Load, decode and prefill of the frozen float engine on a random Qwen3-0.6B-bodied model (byte vocab).

Options:
  --threads N     threads of the products                    [the machine's cores]
  --context N     KV cache positions                         [1024]
  --layers N      decoder layers (28 is the 0.6B body)       [28]
  --tokens N      greedy tokens decoded                      [64]
  --prompt N      prefill length                             [128]
  --reps N        repetitions (the median is reported)       [3]
  --f32           f32-valued weights (kept as f32, not bf16)
  --against DIR   also time DIR's engines/float.ts (another checkout) on the same tensors
  --checkpoint P  time this checkpoint's model (e.g. model/default/ferry.ckpt) instead of the body
  --model FILE    time this export, loaded as loadEngine does (with --against: on both checkouts)
  --load          time reading a bf16 dmexp of the model against loading it on the engine
  --json          machine-readable output
  -h, --help      this text
`;

/** The 0.6B body with `layers` layers and the byte vocabulary. */
export function bodyConfig(layers: number, context: number): ModelConfig {
  return {
    vocab_size: 258,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: layers,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    max_position_embeddings: Math.max(context, 40960),
    tie_word_embeddings: true,
  };
}

/** Seeded uniform weights in about ±0.05 (norms 1), bf16-valued unless `f32`: fast to make, peaked enough. */
export function randomTensors(cfg: ModelConfig, seed: number, f32: boolean): Tensor[] {
  let s = seed >>> 0 || 1;
  return paramShapes(cfg).map(({ name, dims }) => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    if (dims.length === 1) data.fill(1);
    else {
      const bits = new Uint32Array(data.buffer);
      for (let i = 0; i < data.length; i++) {
        s ^= s << 13, s ^= s >>> 17, s ^= s << 5;
        data[i] = ((s >>> 0) / 2 ** 32 - 0.5) * 0.1;
        if (!f32) bits[i] &= 0xffff0000;
      }
    }
    return { name, dims, data };
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Peak resident set (VmHWM) in bytes, where /proc has it. */
function peakRss(): number | undefined {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

async function timeEngine(engine: Engine, tokens: number, prompt: number) {
  const s = engine.start();
  await s.feed([256, 84, 104, 101], "none");
  const t0 = performance.now();
  for (let i = 0; i < tokens; i++) await s.feed([s.pick()], "none");
  const decode = tokens / ((performance.now() - t0) / 1000);
  const ids = Array.from({ length: prompt }, (_, i) => (i * 37 + 11) % 256);
  const t1 = performance.now();
  await engine.start().feed(ids, "none");
  return { decode, prefill: prompt / ((performance.now() - t1) / 1000) };
}

/** `--child read|load FILE`: one timed operation in this process, its time and peak memory as JSON. */
async function child(what: string, file: string, threads: number): Promise<void> {
  const t0 = performance.now();
  if (what === "read") await formatOf(file).read(file);
  else await loadEngine(file, "float", { threads });
  console.log(JSON.stringify({ ms: performance.now() - t0, peakRss: peakRss() }));
}

/** Writes a bf16 dmexp of the model and times reading it against loading it, each in a fresh process. */
async function loadBench(cfg: ModelConfig, reps: number, threads: number, json: boolean): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "ferry-bench-float-"));
  try {
    const file = join(dir, "m.bf16.dmexp");
    await writeDmexp(file, randomTensors(cfg, 7, false), cfg, { dtype: "bf16", source: "bench", step: 0 });
    const deno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
    const self = fileURLToPath(import.meta.url);
    const once = (what: string) => {
      const args = [
        ...(deno ? ["run", "-A"] : []),
        self,
        "--child",
        what,
        "--threads",
        String(threads),
        file,
      ];
      const r = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 20 });
      if (r.status !== 0) throw new Error(`child ${what} failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { ms: number; peakRss?: number };
    };
    const got: Record<string, { ms: number; peakRss?: number }[]> = { read: [], load: [] };
    for (let r = 0; r < reps; r++) for (const what of ["read", "load"]) got[what].push(once(what));
    const pick = (xs: { ms: number; peakRss?: number }[]) => ({
      ms: median(xs.map((x) => x.ms)),
      peakRss: median(xs.map((x) => x.peakRss ?? 0)),
    });
    const report = { read: pick(got.read), load: pick(got.load), threads };
    if (json) return void console.log(JSON.stringify(report));
    for (const [what, x] of Object.entries({ read: report.read, load: report.load })) {
      console.log(
        `${what.padEnd(5)} ${x.ms.toFixed(0).padStart(6)} ms  peak RSS ${(x.peakRss / 1e9).toFixed(2)} GB`,
      );
    }
    console.log(`load / read = ${(report.load.ms / report.read.ms).toFixed(2)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `--model FILE`: decode and prefill of an export on this checkout's loadEngine (and `against`'s). */
async function modelBench(
  file: string,
  against: string | undefined,
  threads: number,
  tokens: number,
  prompt: number,
  reps: number,
): Promise<void> {
  const loaders: Record<string, typeof loadEngine> = { float: loadEngine };
  if (against) {
    const other = await import(resolve(against, "engines/mod.ts")) as { loadEngine: typeof loadEngine };
    loaders[`float @ ${against}`] = other.loadEngine;
  }
  const engines: Record<string, Engine> = {},
    got: Record<string, { decode: number[]; prefill: number[] }> = {};
  for (const [name, load] of Object.entries(loaders)) {
    const t0 = performance.now();
    engines[name] = await load(file, "float", { threads });
    console.log(
      `${name}: loaded in ${(performance.now() - t0).toFixed(0)} ms, weightBytes ${
        (engines[name].weightBytes! / 1e9).toFixed(3)
      } GB`,
    );
    await timeEngine(engines[name], 2, 8), got[name] = { decode: [], prefill: [] };
  }
  for (let r = 0; r < reps; r++) {
    for (const [name, e] of Object.entries(engines)) {
      const x = await timeEngine(e, tokens, prompt);
      got[name].decode.push(x.decode), got[name].prefill.push(x.prefill);
    }
  }
  const runtime = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined" ? "deno" : "bun";
  console.log(
    `${runtime}, ${threads} thread(s), ${file}, ${tokens} tokens, ${prompt}-token prompt, ${reps} reps`,
  );
  for (const [name, g] of Object.entries(got)) {
    console.log(
      `${name.padEnd(32)} decode ${median(g.decode).toFixed(2)} tok/s  prefill ${
        median(g.prefill).toFixed(1)
      } tok/s`,
    );
  }
}

run(async () => {
  const { values, positionals } = cli(HELP, {
    threads: { type: "string" },
    context: { type: "string", default: "1024" },
    layers: { type: "string", default: "28" },
    tokens: { type: "string", default: "64" },
    prompt: { type: "string", default: "128" },
    reps: { type: "string", default: "3" },
    f32: { type: "boolean" },
    against: { type: "string" },
    load: { type: "boolean" },
    checkpoint: { type: "string" },
    model: { type: "string" },
    child: { type: "string", choices: ["read", "load"] },
    json: { type: "boolean" },
  });
  const int = (name: string, v: string | undefined, fallback: number) => {
    const n = v === undefined ? fallback : Number(v);
    if (!Number.isInteger(n) || n < 1) fail(`--${name} must be a positive integer, got ${v}`, EXIT_USAGE);
    return n;
  };
  const threads = int("threads", values.threads, defaultThreads()),
    context = int("context", values.context, 1024);
  const tokens = int("tokens", values.tokens, 64), prompt = int("prompt", values.prompt, 128);
  const reps = int("reps", values.reps, 3), cfg = bodyConfig(int("layers", values.layers, 28), context);
  if (values.child) return await child(values.child, positionals[0], threads);
  if (values.load) return await loadBench(cfg, reps, threads, values.json === true);
  if (values.model) return await modelBench(values.model, values.against, threads, tokens, prompt, reps);
  const ck = values.checkpoint ? await readCheckpoint(values.checkpoint, { sections: ["model"] }) : undefined;
  if (ck) Object.assign(cfg, ck.config);
  const tensors = ck ? ck.model! : randomTensors(cfg, 7, values.f32 === true);
  const bytes = tensors.reduce((a, t) => a + t.data.byteLength, 0);
  const engines: Record<string, Engine> = {};
  const t0 = performance.now();
  engines.float = createFloatEngine(cfg, tensors, "bench", {
    frozen: true,
    threads,
    context: Math.min(context, cfg.max_position_embeddings),
  });
  const loadMs = performance.now() - t0;
  if (values.against) {
    const other = await import(resolve(values.against, "engines/float.ts")) as {
      createFloatEngine: typeof createFloatEngine;
    };
    engines[`float @ ${values.against}`] = other.createFloatEngine(cfg, tensors, "bench", { frozen: true });
  }
  const got: Record<string, { decode: number[]; prefill: number[] }> = {};
  for (const [name, e] of Object.entries(engines)) {
    await timeEngine(e, 2, 8), got[name] = { decode: [], prefill: [] };
  }
  for (let r = 0; r < reps; r++) {
    for (const [name, e] of Object.entries(engines)) {
      const x = await timeEngine(e, tokens, prompt);
      got[name].decode.push(x.decode), got[name].prefill.push(x.prefill);
    }
  }
  const mem = floatEngineMemory(engines.float);
  const rows = Object.entries(got).map(([engine, g]) => ({
    engine,
    decode: median(g.decode),
    prefill: median(g.prefill),
  }));
  const report = {
    runtime: typeof (globalThis as { Deno?: unknown }).Deno !== "undefined" ? "deno" : "bun",
    threads,
    f32Bytes: bytes,
    loadMs,
    memory: mem,
    peakRss: peakRss(),
    rows,
  };
  if (values.json) return void console.log(JSON.stringify(report));
  console.log(
    `${report.runtime}, ${threads} thread(s), ${(bytes / 1e9).toFixed(2)} GB of f32 weights; load (pack) ` +
      `${loadMs.toFixed(0)} ms; packed ${(mem!.packedBytes / 1e9).toFixed(2)} GB ` +
      `(${Object.entries(mem!.matrices).map(([dtype, n]) => `${n} ${dtype}`).join(", ")}); peak RSS ${
        ((report.peakRss ?? 0) / 1e9).toFixed(2)
      } GB`,
  );
  for (const r of rows) {
    console.log(
      `${r.engine.padEnd(32)} decode ${r.decode.toFixed(2)} tok/s  prefill ${r.prefill.toFixed(1)} tok/s`,
    );
  }
  process.exitCode = 0;
});

/**
 * Decode and prefill speed of the integer engine beside ferry's float engine and llama.cpp (node-llama-cpp,
 * CPU, one thread, Q4_0 and F32 GGUF of the same model): 256 greedy tokens after the same prompt, and a
 * 256-token prompt's prefill, timed by wall clock from this script, in interleaved repetitions (the
 * median is reported), with the ratios printed. `--runtimes deno,bun` runs the whole bench under each
 * runtime in turn (child processes) and prints one table.
 *
 *   bun scripts/tools/bench-engine.ts --runtimes deno,bun
 *   git worktree add .bench/before <commit> && bun scripts/tools/bench-engine.ts --against .bench/before
 *
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../../formats/checkpoint/parts.ts";
import { lut4Format } from "../../formats/lut4/lut4.ts";
import { writeGguf } from "../../formats/gguf/gguf.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import type { Engine } from "../../model/engine.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { encode } from "../../model/tokenizer.ts";
import { tensorSource } from "../../model/tensor.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "../engine-flags.ts";

const HELP = `
Usage: bun scripts/tools/bench-engine.ts [CHECKPOINT] [options]

Decode tokens/s (256 greedy tokens after a short prompt) and prefill tokens/s (a 256-token prompt) of
the integer engine on the lut4 export, ferry's float engine on the f32 weights, and llama.cpp on Q4_0
and F32 GGUF exports (one thread), interleaved, median of the repetitions.

Options:
  --reps N            repetitions of each measurement            [5]
  --tokens N          decoded tokens                             [256]
  --runtimes LIST     run under each of these (deno,bun) and merge [this runtime only]
${ENGINE_FLAGS_HELP}
  --against DIR       also time the integer engine of another ferry checkout at DIR (inside this
                      one, e.g. a git worktree in .bench/), interleaved with the rest: a before/after
  --json              machine-readable output
  -h, --help          this text
`;

type Row = { runtime: string; engine: string; decode: number; prefill: number };
const RUNTIME = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined" ? "deno" : "bun";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

async function timeEngine(engine: Engine, prompt: number[], long: number[], tokens: number) {
  const s = engine.start();
  await s.feed(prompt, "none");
  const t0 = performance.now();
  for (let i = 0; i < tokens; i++) await s.feed([s.pick()], "none");
  const decode = tokens / ((performance.now() - t0) / 1000);
  const t1 = performance.now();
  await engine.start().feed(long, "none");
  const prefill = long.length / ((performance.now() - t1) / 1000);
  return { decode, prefill };
}

async function bench(
  path: string,
  reps: number,
  tokens: number,
  against?: string,
  flags: { threads?: number; context?: number } = {},
): Promise<Row[]> {
  const ck = await readCheckpoint(path, { sections: ["model"] });
  const { heldOut } = await loadBrown();
  const prompt = encode("The jury said", { bos: true });
  const long = [256, ...evalWindows(heldOut, 1, 255)[0]];
  const dir = await mkdtemp(join(tmpdir(), "ferry-bench-engine-"));
  try {
    const lut = join(dir, "m.lut4");
    const input = {
      config: ck.config,
      tensors: ck.model!.map(tensorSource),
      source: path,
      step: ck.step,
      name: "ferry",
    };
    await lut4Format.write(lut, input, { dtype: "q4" });
    const runners: Record<string, () => Promise<{ decode: number; prefill: number }>> = {};
    const int = await loadIntEngine(lut);
    const float = createFloatEngine(ck.config, ck.model!, path, { frozen: true, ...flags }); // as loadEngine serves it
    runners["ferry int (lut4)"] = () => timeEngine(int, prompt, long, tokens);
    runners["ferry float (f32)"] = () => timeEngine(float, prompt, long, tokens);
    if (against) {
      // The other checkout's own engine on the same file (lut4's bytes are the same in every version).
      const other = await import(resolve(against, "engines/int/engine.ts")) as {
        loadIntEngine: typeof loadIntEngine;
      };
      const before = await other.loadIntEngine(lut);
      runners[`ferry int (lut4) @ ${against}`] = () => timeEngine(before, prompt, long, tokens);
    }
    try {
      const { openLlamaGguf } = await import("../../measure/llama-cpp.ts");
      for (const type of ["q4_0", "f32"] as const) {
        const g = join(dir, `m.${type}.gguf`);
        await writeGguf(g, ck.model!, ck.config, { type });
        const lm = await openLlamaGguf(g, { contextSize: 512, kvCache: "F16" });
        runners[`llama.cpp ${type.toUpperCase()}`] = async () => {
          const t0 = performance.now();
          await lm.greedy(prompt, 1);
          const first = performance.now() - t0;
          const t1 = performance.now();
          const out = await lm.greedy(prompt, tokens + 1); // it stops early at EOS: count what came
          const decode = (out.length - 1) / ((performance.now() - t1 - first) / 1000);
          const t2 = performance.now();
          await lm.greedy(long, 1);
          return { decode, prefill: long.length / ((performance.now() - t2) / 1000) };
        };
      }
    } catch (e) {
      console.error(`llama.cpp not measured under ${RUNTIME}: ${(e as Error).message.split("\n")[0]}`);
    }
    const got: Record<string, { decode: number[]; prefill: number[] }> = {};
    for (const name of Object.keys(runners)) await runners[name](); // warm-up, not counted
    for (let r = 0; r < reps; r++) {
      for (const [name, f] of Object.entries(runners)) {
        const x = await f();
        (got[name] ??= { decode: [], prefill: [] }).decode.push(x.decode);
        got[name].prefill.push(x.prefill);
      }
    }
    return Object.entries(got).map(([engine, v]) => ({
      runtime: RUNTIME,
      engine,
      decode: median(v.decode),
      prefill: median(v.prefill),
    }));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function table(rows: Row[]): string {
  const lines = [
    "| runtime | engine | decode tok/s | prefill tok/s | decode vs llama.cpp Q4_0 | decode vs ferry float |",
    "|---|---|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    const q4 = rows.find((x) => x.runtime === r.runtime && x.engine === "llama.cpp Q4_0");
    const fl = rows.find((x) => x.runtime === r.runtime && x.engine === "ferry float (f32)")!;
    const ratio = (a: number, b?: number) => (b ? `${(a / b).toFixed(2)}x` : "n/a");
    lines.push(
      `| ${r.runtime} | ${r.engine} | ${r.decode.toFixed(0)} | ${r.prefill.toFixed(0)} | ${
        ratio(r.decode, q4?.decode)
      } | ${ratio(r.decode, fl.decode)} |`,
    );
  }
  return lines.join("\n");
}

if (import.meta.main) {
  const { values: a, positionals } = cli(HELP, {
    reps: { type: "string", default: "5" },
    tokens: { type: "string", default: "256" },
    runtimes: { type: "string" },
    json: { type: "boolean", default: false },
    against: { type: "string" },
    ...ENGINE_FLAGS,
  });
  await run(async () => {
    const path = positionals[0] ?? DEFAULT_INPUT;
    const reps = Number(a.reps), tokens = Number(a.tokens);
    if (!(Number.isInteger(reps) && reps > 0 && Number.isInteger(tokens) && tokens > 0 && tokens <= 400)) {
      fail("--reps expects a positive integer and --tokens one in [1, 400]", EXIT_USAGE);
    }
    let rows: Row[];
    if (a.runtimes) {
      rows = [];
      for (const rt of a.runtimes.split(",")) {
        if (rt !== "deno" && rt !== "bun") fail(`--runtimes: ${rt} is not deno or bun`, EXIT_USAGE);
        const args = [
          ...(rt === "deno" ? ["run", "-A"] : []),
          "scripts/tools/bench-engine.ts",
          path,
          "--reps",
          a.reps!,
          "--tokens",
          a.tokens!,
          ...(a.against ? ["--against", a.against] : []),
          ...(a.threads ? ["--threads", a.threads] : []),
          ...(a.context ? ["--context", a.context] : []),
          "--json",
        ];
        const r = spawnSync(rt, args, {
          encoding: "utf8",
          stdio: ["ignore", "pipe", "inherit"],
          maxBuffer: 1 << 24,
        });
        if (r.status !== 0) fail(`${rt} run failed (exit ${r.status})`);
        rows.push(...JSON.parse(r.stdout).rows);
      }
    } else rows = await bench(path, reps, tokens, a.against, engineFlags(a));
    const meta = {
      checkpoint: path,
      reps,
      tokens,
      prefill_tokens: 256,
      load: (await import("node:os")).loadavg(),
    };
    if (a.json) console.log(JSON.stringify({ ...meta, rows }, null, 2));
    else {
      console.log(
        `${path}: ${tokens} greedy tokens after "The jury said"; prefill of 256 tokens; median of ${reps} interleaved repetitions; load ${
          meta.load.map((x) => x.toFixed(1)).join(" ")
        }`,
      );
      console.log(table(rows));
    }
    process.exitCode = 0;
  });
}

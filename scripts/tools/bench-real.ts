/**
 * ferry beside llama.cpp at a real model's size (issue 22): a Qwen3 Hugging Face folder of the
 * Qwen3-0.6B shape with seeded random weights (scripts/tools/make-qwen3.ts; the byte vocabulary by
 * default), the machine's streaming-read ceiling measured in the same run (1 and 2 threads), every
 * export of the folder timed (wall clock, peak RSS, size; each export its own process), then decode
 * and prefill of ferry's float and integer engines (under Deno and Bun) and llama.cpp's F32, F16 and
 * Q4_0 (node-llama-cpp, CPU), 1 and 2 threads, in interleaved rounds, medians printed with ratios.
 *
 *   bun scripts/tools/bench-real.ts                  # the 0.6B body, 3 rounds (long: exports and loads)
 *   bun scripts/tools/bench-real.ts --quick          # a small shape, end to end in a few minutes
 *   bun scripts/tools/bench-real.ts --vocab 151936 --tokenizer tests/fixtures/qwen3-tokenizer
 *
 * The arithmetic and tables are measure/bench-real.ts; the measuring children bench-real-child.ts.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-real.ts --quick --rounds 1 --json
 * ```
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { makeQwen3Folder, QWEN3_SHAPES, type Qwen3Shape } from "./make-qwen3.ts";
import {
  deriveRows,
  engineTable,
  type ExportRow,
  exportTable,
  type LoadRow,
  loadTable,
  median,
  parseCounts,
} from "../../measure/bench-real.ts";

const HELP = `
Usage: bun scripts/tools/bench-real.ts [options]

ferry beside llama.cpp at Qwen3-0.6B's size, on a seeded random Hugging Face folder: the memory
bandwidth ceiling (streaming read, 1 and 2 threads), each export's time, peak RSS and size, then
decode (tokens/s of greedy decoding) and prefill (tokens/s of one prompt) of ferry's float engine
(dmexp bf16, kept as bf16) and integer engine (lut4) under each runtime, and llama.cpp F32,
F16 and Q4_0, in interleaved rounds; medians, with ferry / llama.cpp (float also / F16), 2-thread /
1-thread and the fraction of the bandwidth ceiling that the bytes read per decoded token make (the
weights as each engine keeps them); then each ferry engine's load time beside a cached read of its file.

Options:
  --rounds N          interleaved rounds (the median is reported)                [3]
  --tokens N          decoded tokens per measurement                             [64]
  --prefill N         prompt tokens of the prefill measurement                   [128]
  --quick             a small shape (hidden 256, 4 layers) for a smoke run
  --vocab N           vocabulary size (151936: Qwen3's own; needs --tokenizer)   [258]
  --tokenizer DIR     tokenizer.json and tokenizer_config.json to put in the folder
  --threads LIST      thread counts for llama.cpp                                [1,2]
  --ferry-threads L   thread counts for ferry's engines (passed as EngineLoadOptions.threads) [1,2]
  --runtimes LIST     runtimes of ferry's engines                                [deno,bun]
  --calibrate N       lut4 export's calibration windows (0: plain rounding; 64 is the CLI's default,
                      hours at this size)                                        [0]
  --f64lines          also export f64lines (large and slow)
  --dir DIR           work folder to use and keep (default: a temporary one, removed)
  --json              machine-readable output
  -h, --help          this text
`;

/** Qwen3-0.6B's body at a context of 1024 positions: the integer engine sizes its KV cache by it. */
export const FULL_SHAPE: Qwen3Shape = { ...QWEN3_SHAPES["qwen3-0.6b-body"], max_position_embeddings: 1024 };
/** The `--quick` shape: the same structure, small enough for a smoke run. */
export const QUICK_SHAPE: Qwen3Shape = {
  ...FULL_SHAPE,
  hidden_size: 256,
  intermediate_size: 768,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  max_position_embeddings: 512,
};

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const CHILD = fileURLToPath(new URL("./bench-real-child.ts", import.meta.url));
const runtimeArgs = (rt: string) => (rt === "deno" ? ["run", "-A"] : []);

/** Size of a file, or of every file in a folder, in bytes. */
function sizeOf(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((n, f) => n + sizeOf(join(path, f)), 0);
}

/** A process's peak resident set so far (VmHWM), in bytes; 0 once it has gone. */
function peakRss(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** A process's user + system CPU seconds so far (every thread), from /proc; undefined once it has gone. */
function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th, in ticks.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** What `measured` saw of a command. */
export interface Measured {
  seconds: number;
  /** Peak RSS in bytes, and the second it was set. */
  peakRss: number;
  peakAt: number;
  /** User + system seconds, every thread (to the last sample). */
  cpuSeconds: number;
  stdout: string;
}

/**
 * Runs a command to its end (in `cwd`, default the repository): wall seconds, its stdout, and its peak
 * RSS and CPU seconds sampled every 50 ms from /proc (the last sample before it exits; 0 where /proc is
 * missing). Fails with its stderr when it exits non-zero.
 */
export function measured(cmd: string, args: string[], cwd = ROOT): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
    let peak = 0, peakAt = 0, cpu = 0, out = "", err = "";
    const poll = setInterval(() => {
      const rss = peakRss(child.pid!);
      if (rss > peak) peak = rss, peakAt = (performance.now() - t0) / 1000;
      cpu = cpuSeconds(child.pid!) ?? cpu;
    }, 50);
    child.stdout!.on("data", (d) => out += d);
    child.stderr!.on("data", (d) => err = (err + d).slice(-4000));
    child.on("error", reject);
    child.on("close", (code) => {
      clearInterval(poll);
      const seconds = (performance.now() - t0) / 1000;
      if (code === 0) resolve({ seconds, peakRss: peak, peakAt, cpuSeconds: cpu, stdout: out });
      else reject(new Error(`${cmd} ${args.join(" ")} exited ${code}:\n${err}`));
    });
  });
}

/** The streaming-read rate of `threads` processes at once, each over `bytes`: total bytes/s. */
async function bandwidth(threads: number, bytes: number): Promise<number> {
  const one = () =>
    new Promise<{ bytes: number; seconds: number }>((resolve, reject) => {
      const child = spawn("bun", [CHILD, "bandwidth", String(bytes)], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout!.on("data", (d) => out += d);
      child.on("error", reject);
      child.on(
        "exit",
        (code) => code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`bandwidth probe exited ${code}`)),
      );
    });
  const got = await Promise.all(Array.from({ length: threads }, one));
  return got.reduce((n, g) => n + g.bytes, 0) / Math.max(...got.map((g) => g.seconds));
}

/** A measuring child holding one engine, answering one request at a time. */
interface EngineChild {
  ask(op: "decode" | "prefill", n: number): Promise<{ seconds: number; tokens: number }>;
  close(): void;
  /** What a ferry child said once loaded (scripts/tools/bench-real-child.ts `Loaded`). */
  loaded: { bytesPerToken?: number; readSeconds?: number; loadSeconds?: number };
}

function startChild(runtime: string, args: string[]): Promise<EngineChild> {
  return new Promise((resolve, reject) => {
    const child = spawn(runtime, [...runtimeArgs(runtime), CHILD, ...args], {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "inherit"],
    });
    let buf = "", waiting: ((line: string) => void) | null = null;
    const lines: string[] = [];
    child.stdout!.on("data", (d) => {
      buf += d;
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (waiting) waiting(line), waiting = null;
        else lines.push(line);
      }
    });
    const next = () =>
      new Promise<string>((res, rej) => {
        if (lines.length) return res(lines.shift()!);
        waiting = res;
        child.once("exit", (code) => rej(new Error(`${args.join(" ")} (${runtime}) exited ${code}`)));
      });
    child.on("error", reject);
    next().then((line) =>
      resolve({
        loaded: JSON.parse(line),
        async ask(op, n) {
          child.stdin!.write(JSON.stringify({ op, n }) + "\n");
          return JSON.parse(await next());
        },
        close: () => child.stdin!.end(JSON.stringify({ op: "quit" }) + "\n"),
      }), reject);
  });
}

/** The exports the engines need, and f64lines when asked. */
function exportPlan(dir: string, f64lines: boolean): { format: string; dtype: string; file: string }[] {
  const plan = [
    { format: "dmexp", dtype: "bf16", file: join(dir, "m.bf16.dmexp") },
    { format: "hf", dtype: "bf16", file: join(dir, "m.bf16.hf") },
    { format: "gguf", dtype: "f32", file: join(dir, "m.f32.gguf") },
    { format: "gguf", dtype: "f16", file: join(dir, "m.f16.gguf") },
    { format: "gguf", dtype: "q4_0", file: join(dir, "m.q4_0.gguf") },
    { format: "lut4", dtype: "q4", file: join(dir, "m.lut4") },
  ];
  if (f64lines) plan.push({ format: "f64lines", dtype: "f64", file: join(dir, "m.f64lines") });
  return plan;
}

/** Parameters of the weight matrices a decoded token reads (the tied embedding as the head, once). */
function matrixParams(s: Qwen3Shape): number {
  const H = s.hidden_size, q = s.num_attention_heads * s.head_dim, kv = s.num_key_value_heads * s.head_dim;
  const layer = q * H + 2 * kv * H + H * q + 3 * s.intermediate_size * H;
  return s.num_hidden_layers * layer + s.vocab_size * H * (s.tie_word_embeddings ? 1 : 2);
}

async function main(): Promise<void> {
  const { values: a } = cli(HELP, {
    rounds: { type: "string", default: "3" },
    tokens: { type: "string", default: "64" },
    prefill: { type: "string", default: "128" },
    quick: { type: "boolean" },
    vocab: { type: "string" },
    tokenizer: { type: "string" },
    threads: { type: "string", default: "1,2" },
    "ferry-threads": { type: "string", default: "1,2" },
    runtimes: { type: "string", default: "deno,bun" },
    calibrate: { type: "string", default: "0" },
    f64lines: { type: "boolean" },
    dir: { type: "string" },
    json: { type: "boolean" },
  });
  const count = (flag: string, v: string) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 1) {
      fail(`--${flag} ${v}: expected a positive whole number`, EXIT_USAGE);
    }
    return n;
  };
  const rounds = count("rounds", a.rounds!), tokens = count("tokens", a.tokens!);
  const prefill = count("prefill", a.prefill!);
  const calibrate = Number(a.calibrate);
  if (!Number.isSafeInteger(calibrate) || calibrate < 0) {
    fail(`--calibrate ${a.calibrate}: expected a whole number of windows (0: none)`, EXIT_USAGE);
  }
  const lists = [parseCounts("--threads", a.threads!), parseCounts("--ferry-threads", a["ferry-threads"]!)];
  for (const l of lists) if (typeof l === "string") fail(l, EXIT_USAGE);
  const [threads, ferryThreads] = lists as number[][];
  const runtimes = a.runtimes!.split(",");
  for (const rt of runtimes) {
    if (rt !== "deno" && rt !== "bun") fail(`--runtimes: ${rt} is not deno or bun`, EXIT_USAGE);
  }
  const shape: Qwen3Shape = { ...(a.quick ? QUICK_SHAPE : FULL_SHAPE) };
  if (a.vocab) shape.vocab_size = count("vocab", a.vocab);
  if (shape.vocab_size > 258 && !a.tokenizer) {
    fail(`--vocab ${shape.vocab_size}: give --tokenizer DIR too`, EXIT_USAGE);
  }
  if (prefill + tokens + 16 > Math.min(512, shape.max_position_embeddings)) {
    fail(
      `--prefill ${prefill} and --tokens ${tokens}: together at most ${
        Math.min(512, shape.max_position_embeddings) - 16
      }`,
      EXIT_USAGE,
    );
  }

  const dir = a.dir ?? await mkdtemp(join(tmpdir(), "ferry-bench-real-"));
  const folder = join(dir, "model.hf");
  const plan = exportPlan(dir, a.f64lines ?? false);
  const file = (format: string, dtype: string) =>
    plan.find((p) => p.format === format && p.dtype === dtype)!.file;
  type Spec = { engine: string; runtime: string; threads: number; args: string[]; bytesPerToken: number };
  const specs: Spec[] = [];
  const params = matrixParams(shape);
  for (const rt of runtimes) {
    for (const t of ferryThreads) {
      specs.push({
        engine: "ferry float",
        runtime: rt,
        threads: t,
        args: ["engine", "ferry-float", file("dmexp", "bf16"), String(shape.vocab_size), String(t)],
        bytesPerToken: 0, // what the engine keeps, as the child reports it
      });
      specs.push({
        engine: "ferry int",
        runtime: rt,
        threads: t,
        args: ["engine", "ferry-int", file("lut4", "q4"), String(shape.vocab_size), String(t)],
        bytesPerToken: 0, // the lut4 file's size, once written
      });
    }
  }
  for (const type of ["f32", "f16", "q4_0"]) {
    for (const t of threads) {
      specs.push({
        engine: `llama.cpp ${type.toUpperCase()}`,
        runtime: "bun",
        threads: t,
        args: ["engine", "llama", file("gguf", type), String(shape.vocab_size), String(t)],
        bytesPerToken: 0,
      });
    }
  }
  const steps = 2 + plan.length + specs.length * (1 + 2 * rounds);
  const bar = progress("bench-real", steps, { unit: "step" });
  try {
    if (!existsSync(join(folder, "config.json"))) {
      await makeQwen3Folder(folder, { shape, seed: 1, tokenizerDir: a.tokenizer ?? null });
    }
    bar.tick(1, "folder");
    const probe = a.quick ? 64 << 20 : 1 << 30;
    const ceiling: Record<number, number> = {};
    for (const t of new Set([1, 2, ...threads, ...ferryThreads])) ceiling[t] = await bandwidth(t, probe);
    bar.tick(1, "bandwidth");
    const exports: ExportRow[] = [];
    for (const p of plan) {
      const args = [
        "run",
        "-A",
        "scripts/export.ts",
        "--input",
        folder,
        "--format",
        p.format,
        "--dtype",
        p.dtype,
      ];
      args.push("--output", p.file, "--calibrate", String(calibrate));
      const { seconds, peakRss: rss } = await measured("deno", args);
      exports.push({ ...p, seconds, peakRssMB: rss / 2 ** 20, sizeMB: sizeOf(p.file) / 2 ** 20 });
      bar.tick(1, `export ${p.format} ${p.dtype}`);
    }
    for (const s of specs) {
      if (s.bytesPerToken === 0) s.bytesPerToken = sizeOf(s.args[2]);
    }
    const children: EngineChild[] = [];
    try {
      for (const s of specs) {
        const c = await startChild(s.runtime, s.args);
        children.push(c);
        if (c.loaded.bytesPerToken) s.bytesPerToken = c.loaded.bytesPerToken;
        await c.ask("decode", 4), await c.ask("prefill", Math.min(prefill, 16)); // warm-up, not counted
        bar.tick(1, `loaded ${s.engine} (${s.runtime}, ${s.threads}t)`);
      }
      const got = specs.map(() => ({ decode: [] as number[], prefill: [] as number[] }));
      for (let r = 0; r < rounds; r++) {
        for (const [i, c] of children.entries()) {
          const d = await c.ask("decode", tokens);
          got[i].decode.push(d.tokens / d.seconds);
          bar.tick(1, `round ${r + 1}`);
          const p = await c.ask("prefill", prefill);
          got[i].prefill.push(p.tokens / p.seconds);
          bar.tick(1, `round ${r + 1}`);
        }
      }
      bar.done();
      const results = specs.map((s, i) => ({
        engine: s.engine,
        runtime: s.runtime,
        threads: s.threads,
        decode: median(got[i].decode),
        prefill: median(got[i].prefill),
        bytesPerToken: s.bytesPerToken,
      }));
      const rows = deriveRows(results, ceiling);
      const loads: LoadRow[] = specs.flatMap((s, i) => {
        const { readSeconds, loadSeconds } = children[i].loaded;
        return readSeconds && loadSeconds
          ? [{
            engine: s.engine,
            runtime: s.runtime,
            threads: s.threads,
            file: s.args[2],
            readSeconds,
            loadSeconds,
          }]
          : [];
      });
      const meta = { shape, rounds, tokens, prefill, calibrate, load: (await import("node:os")).loadavg() };
      if (a.json) {
        console.log(JSON.stringify({ ...meta, bandwidth: ceiling, exports, rows, loads }, null, 2));
        return;
      }
      const gb = (t: number) => `${(ceiling[t] / 1e9).toFixed(1)} GB/s`;
      console.log(
        `shape: hidden ${shape.hidden_size}, ${shape.num_hidden_layers} layers, vocab ${shape.vocab_size}, ` +
          `${
            (params / 1e6).toFixed(0)
          }M matrix parameters; ${rounds} rounds, ${tokens} decoded, ${prefill} prefilled`,
      );
      console.log(
        `streaming read: ${
          Object.keys(ceiling).map((t) => `${t} thread${t === "1" ? "" : "s"} ${gb(Number(t))}`).join(", ")
        }\n`,
      );
      console.log(exportTable(exports) + "\n");
      console.log(engineTable(rows) + "\n");
      console.log(loadTable(loads));
    } finally {
      for (const c of children) c.close();
    }
  } finally {
    if (!a.dir) await rm(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await run(main);

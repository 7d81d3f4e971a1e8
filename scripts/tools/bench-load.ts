/**
 * The integer engine's load beside a cached read of the same lut4 file, under Deno and Bun, in fresh
 * processes and interleaved rounds (medians): each child reads the file once to warm the page cache,
 * times a second read into a new buffer, then times `loadEngine(file, "int")` and the CPU seconds it
 * took (every thread), and last the time from a prompt of `--prompt` tokens to its first token.
 * `--against DIR` times another checkout's loader in the same rounds (a before and after).
 *
 *   bun scripts/tools/bench-load.ts /tmp/q06/m.lut4
 *   bun scripts/tools/bench-load.ts /tmp/q06/m.lut4 --against /tmp/base --rounds 5
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-load.ts out/ferry.q4.lut4 --rounds 1 --json
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";

const HELP = `
Time the integer engine's load of a lut4 file beside a cached read of it, under Deno and Bun.

Usage: bun scripts/tools/bench-load.ts FILE.lut4 [options]

Options:
  --rounds N        interleaved rounds, each a fresh process per runtime and loader (default 3)
  --threads N       the engine's threads (default 1)
  --prompt N        tokens of the prompt timed to its first token after the load (default 300; 0: none)
  --runtimes LIST   deno,bun (default both)
  --against DIR     also time the loader of the checkout at DIR (its engines/mod.ts), interleaved
  --json            print the figures as JSON
  -h, --help        this text
`;

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** What one child prints: milliseconds, and the load's CPU seconds (user + system, every thread). */
interface Sample {
  readMs: number;
  loadMs: number;
  loadCpuS: number;
  firstTokenMs?: number;
}

// The child: FILE, ROOT, THREADS and PROMPT come in the environment. Its prompt is a fixed spread of ids
// below the vocabulary, the same in every child.
const CHILD = `
import { readFile } from "node:fs/promises";
import process from "node:process";
const { FILE, ROOT, THREADS, PROMPT } = process.env;
const { loadEngine } = await import(ROOT + "/engines/mod.ts");
await readFile(FILE);
let t = performance.now();
await readFile(FILE);
const readMs = performance.now() - t;
const cpu0 = process.cpuUsage();
t = performance.now();
const engine = await loadEngine(FILE, "int", { threads: Number(THREADS) });
const loadMs = performance.now() - t;
const cpu = process.cpuUsage(cpu0);
let firstTokenMs;
if (Number(PROMPT) > 0) {
  const vocab = engine.config.vocab_size;
  const ids = Array.from({ length: Number(PROMPT) }, (_, i) => (i * 7919 + 13) % Math.min(vocab, 150000));
  const s = engine.start();
  t = performance.now();
  await s.feed(ids, "last");
  s.pick();
  firstTokenMs = performance.now() - t;
}
engine.dispose?.();
console.log(JSON.stringify({ readMs, loadMs, loadCpuS: (cpu.user + cpu.system) / 1e6, firstTokenMs }));
`;

function child(runtime: string, root: string, file: string, threads: number, prompt: number): Sample {
  const args = runtime === "deno" ? ["eval", "--ext=ts", CHILD] : ["--eval", CHILD];
  const env = { ...process.env, FILE: file, ROOT: root, THREADS: String(threads), PROMPT: String(prompt) };
  const r = spawnSync(runtime, args, { cwd: root, env, encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) fail(`${runtime} child (${root}) exited ${r.status}: ${r.stderr.slice(-2000)}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    rounds: { type: "string", default: "3" },
    threads: { type: "string", default: "1" },
    prompt: { type: "string", default: "300" },
    runtimes: { type: "string", default: "deno,bun" },
    against: { type: "string" },
    json: { type: "boolean", default: false },
  });
  if (positionals.length !== 1) fail("expected one FILE.lut4", EXIT_USAGE);
  const whole = (name: string, v: string, min: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) fail(`--${name} ${v}: expected an integer >= ${min}`, EXIT_USAGE);
    return n;
  };
  const rounds = whole("rounds", values.rounds!, 1);
  const threads = whole("threads", values.threads!, 1);
  const prompt = whole("prompt", values.prompt!, 0);
  const runtimes = values.runtimes!.split(",");
  for (const rt of runtimes) if (rt !== "deno" && rt !== "bun") fail(`--runtimes: unknown ${rt}`, EXIT_USAGE);
  const file = resolve(positionals[0]);
  if (!existsSync(file)) fail(`${positionals[0]}: no such file`, EXIT_USAGE);
  if (values.against && !existsSync(join(values.against, "engines", "mod.ts"))) {
    fail(`--against ${values.against}: no engines/mod.ts there (expected a ferry checkout)`, EXIT_USAGE);
  }
  const loaders = [
    { name: "this", root: ROOT },
    ...(values.against ? [{ name: "against", root: resolve(values.against) }] : []),
  ];
  const samples = new Map<string, Sample[]>();
  for (let r = 0; r < rounds; r++) {
    for (const runtime of runtimes) {
      // The loaders' order alternates by round, so neither always runs right after the other.
      for (const loader of r % 2 === 0 ? loaders : [...loaders].reverse()) {
        const s = child(runtime, loader.root, file, threads, prompt);
        const key = `${runtime} ${loader.name}`;
        samples.set(key, [...samples.get(key) ?? [], s]);
        if (!values.json) {
          console.error(
            `round ${r + 1} ${key}: read ${s.readMs.toFixed(0)} ms, load ${s.loadMs.toFixed(0)} ms ` +
              `(${(s.loadMs / s.readMs).toFixed(2)}×), first token ${s.firstTokenMs?.toFixed(0) ?? "-"} ms`,
          );
        }
      }
    }
  }
  const rows = [...samples].map(([key, ss]) => {
    const [runtime, loader] = key.split(" ");
    return {
      runtime,
      loader: loader === "this" ? ROOT : resolve(values.against!),
      read_ms: Math.round(median(ss.map((s) => s.readMs))),
      load_ms: Math.round(median(ss.map((s) => s.loadMs))),
      load_over_read: Number(median(ss.map((s) => s.loadMs / s.readMs)).toFixed(2)),
      load_cpu_s: Number(median(ss.map((s) => s.loadCpuS)).toFixed(2)),
      first_token_ms: prompt > 0 ? Math.round(median(ss.map((s) => s.firstTokenMs!))) : undefined,
    };
  });
  const meta = { file, rounds, threads, prompt, loadavg: (await import("node:os")).loadavg() };
  if (values.json) return console.log(JSON.stringify({ ...meta, rows }, null, 2));
  console.log(
    `${file}: ${rounds} rounds, ${threads} thread(s), medians; load average ${
      meta.loadavg.map((x) => x.toFixed(2)).join(" ")
    }`,
  );
  console.log(
    "runtime  loader   read ms  load ms  load/read  load CPU s  first token ms (" + prompt + " tokens)",
  );
  for (const r of rows) {
    const name = r.loader === ROOT ? "this" : "against";
    console.log(
      `${r.runtime.padEnd(8)} ${name.padEnd(8)} ${String(r.read_ms).padStart(7)} ${
        String(r.load_ms).padStart(8)
      } ` +
        `${r.load_over_read.toFixed(2).padStart(9)}× ${r.load_cpu_s.toFixed(2).padStart(10)} ${
          String(r.first_token_ms ?? "-").padStart(15)
        }`,
    );
  }
}

if (import.meta.main) await run(main);

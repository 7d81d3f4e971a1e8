/**
 * The measuring side of scripts/tools/bench-real.ts: one process per engine (or per bandwidth probe),
 * so that each holds one model and the parent can interleave rounds across them. An engine child
 * loads its model, prints `{"ready": …}` on stdout, then answers each line of stdin — `{"op": "decode",
 * "n": 64}` or `{"op": "prefill", "n": 128}` — with one JSON line `{"seconds": …, "tokens": …}`, timed
 * here by wall clock around the engine's work alone. A bandwidth child reads a buffer end to end and
 * prints what it read and how long it took.
 *
 *   bun scripts/tools/bench-real-child.ts engine ferry-int out/m.lut4 258 1
 *   bun scripts/tools/bench-real-child.ts engine llama out/m.q4_0.gguf 258 2
 *   bun scripts/tools/bench-real-child.ts bandwidth 268435456
 *
 * @module
 */
import process from "node:process";
import { createInterface } from "node:readline";
import { benchTokens, streamRead } from "../../measure/bench-real.ts";

/** What an engine child does for each request: the seconds of `n` decoded tokens or an `n`-token prefill. */
type Timer = (op: "decode" | "prefill", n: number) => Promise<{ seconds: number; tokens: number }>;

/**
 * What a ferry child says once loaded: the weight bytes a decoded token reads (the float engine's packed
 * matrices as it keeps them, bf16 or f32; the integer engine's lut4 codes and scales: its file), and its
 * load beside a plain read of the file (the file read once before, so both find it cached).
 */
interface Loaded {
  bytesPerToken?: number;
  readSeconds?: number;
  loadSeconds?: number;
}

/** The prompt decoding starts from, and the seed of the prefill's ids. */
const PROMPT_TOKENS = 8, PREFILL_SEED = 2;

/** A ferry engine (`float` or `int`) on an export with `threads` threads. */
async function ferryTimer(
  kind: "float" | "int",
  path: string,
  vocab: number,
  threads: number,
): Promise<Timer & Loaded> {
  const { loadEngine } = await import("../../engines/mod.ts");
  const { floatEngineMemory } = await import("../../engines/float.ts");
  const { readFile } = await import("node:fs/promises");
  await readFile(path);
  const t0 = performance.now();
  await readFile(path);
  const readSeconds = (performance.now() - t0) / 1000;
  const t1 = performance.now();
  // Always handed over: the engines' default is every core, so one thread must be asked for.
  const engine = await loadEngine(path, kind, { threads });
  const loadSeconds = (performance.now() - t1) / 1000;
  const packed = kind === "float" ? floatEngineMemory(engine)?.packedBytes : undefined;
  const prompt = benchTokens(vocab, PROMPT_TOKENS, 1);
  const timer: Timer = async (op, n) => {
    if (op === "prefill") {
      const ids = benchTokens(vocab, n, PREFILL_SEED);
      const t0 = performance.now();
      await engine.start().feed(ids, "none");
      return { seconds: (performance.now() - t0) / 1000, tokens: n };
    }
    const s = engine.start();
    await s.feed(prompt, "none");
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await s.feed([s.pick()], "none");
    return { seconds: (performance.now() - t0) / 1000, tokens: n };
  };
  return Object.assign(timer, { bytesPerToken: packed, readSeconds, loadSeconds });
}

/** llama.cpp (node-llama-cpp, CPU) on a GGUF with `threads` threads. */
async function llamaTimer(path: string, vocab: number, threads: number): Promise<Timer> {
  const { openLlamaGguf } = await import("../../measure/llama-cpp.ts");
  const lm = await openLlamaGguf(path, { contextSize: 512, kvCache: "F16", threads });
  const prompt = benchTokens(vocab, PROMPT_TOKENS, 1);
  return async (op, n) => {
    if (op === "prefill") {
      const ids = benchTokens(vocab, n, PREFILL_SEED);
      const t0 = performance.now();
      await lm.greedy(ids, 1);
      return { seconds: (performance.now() - t0) / 1000, tokens: n };
    }
    // The prompt's own evaluation and first token are timed apart (before and after, the mean) and
    // taken off; greedy decoding may stop early at an end-of-generation token, so the tokens that came
    // are counted.
    const firstToken = async () => {
      const t = performance.now();
      await lm.greedy(prompt, 1);
      return performance.now() - t;
    };
    const before = await firstToken();
    const t1 = performance.now();
    const out = await lm.greedy(prompt, n + 1);
    const all = performance.now() - t1, first = (before + await firstToken()) / 2;
    return { seconds: Math.max(all - first, 1e-6) / 1000, tokens: out.length - 1 };
  };
}

async function serve(timer: Timer & Loaded): Promise<void> {
  const { bytesPerToken, readSeconds, loadSeconds } = timer;
  console.log(JSON.stringify({ ready: true, bytesPerToken, readSeconds, loadSeconds }));
  for await (const line of createInterface({ input: process.stdin })) {
    if (!line.trim()) continue;
    const req = JSON.parse(line) as { op: "decode" | "prefill" | "quit"; n: number };
    if (req.op === "quit") break;
    console.log(JSON.stringify(await timer(req.op, req.n)));
  }
  process.exit(0);
}

if (import.meta.main) {
  const [mode, ...rest] = process.argv.slice(2);
  try {
    if (mode === "bandwidth") {
      console.log(JSON.stringify(streamRead(Number(rest[0]))));
    } else if (mode === "engine") {
      const [kind, path, vocab, threads] = rest;
      const v = Number(vocab), t = Number(threads);
      const timer = kind === "llama"
        ? await llamaTimer(path, v, t)
        : await ferryTimer(kind === "ferry-float" ? "float" : "int", path, v, t);
      await serve(timer);
    } else {
      console.error("usage: bench-real-child.ts engine KIND PATH VOCAB THREADS | bandwidth BYTES");
      process.exit(2);
    }
  } catch (e) {
    console.error(`bench-real-child ${mode} ${rest.join(" ")}: ${(e as Error).message}`);
    process.exit(1);
  }
}

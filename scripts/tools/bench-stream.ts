/**
 * Streamed speed against the engine's own: how many tokens per second the engine decodes on its own
 * (model/generate.ts's loop, no server, in this process), and how many a streamed `/v1/completions`
 * reply delivers over HTTP on loopback, the client in this process, from two servers: the chat server's
 * way (`startSlots`: the model in a worker slot, the server's thread doing only HTTP) and an engine in
 * memory served on the server's own thread (`createSlots`' one slot, as a library user may). Each is
 * timed from its start (calling the loop; sending the request) to the last token (yielded; the stream's
 * end), the prompt included. The three run in turn, `--runs` rounds; each figure is the median, and
 * each ratio the median of the rounds' ratios. Run it under both runtimes.
 *
 * @example
 * ```ts
 * // deno run -A scripts/tools/bench-stream.ts --tokens 200
 * // bun scripts/tools/bench-stream.ts
 * // engine 1480 tok/s; streamed from a worker slot 1500 tok/s, ratio 1.01; from the server's thread 1430 tok/s, ratio 0.97 (200 tokens, bun, int engine)
 * ```
 * @module
 */
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { openServedEngine } from "../chat.ts";
import { servedTokenizer } from "../../engines/mod.ts";
import { startSlots } from "../../serve/slots/slots.ts";
import type { Engine } from "../../model/engine.ts";
import { generateTokens } from "../../model/generate.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";

const HELP = `
Engine decode tok/s against streamed tok/s over HTTP (from a worker slot, as the chat server runs,
and from the server's own thread), and their ratios.

Usage: deno run -A scripts/tools/bench-stream.ts [MODEL] [options]
       bun scripts/tools/bench-stream.ts [MODEL] [options]

Options:
  --tokens N   tokens per reply (default 200)
  --runs N     rounds of the three, the medians kept (default 9)
  --engine K   the engine (default: the format's own)
  --json       one JSON line instead of the sentence
  -h, --help   this text
`;

const PROMPT = "The jury said";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Tokens per second over the time from `start` to the last token. */
const rate = (n: number, start: number, last: number) => n / ((last - start) / 1000);

/** The engine's own loop, prompt included: tokens per second. */
async function engineDecode(engine: Engine, tokens: number) {
  let n = 0, last = 0;
  const start = performance.now();
  for await (const _ of generateTokens(engine, encode(PROMPT, { bos: true }), { maxTokens: tokens })) {
    last = performance.now(), n++;
  }
  return { tokens: n, rate: rate(n, start, last) };
}

/**
 * A streamed reply over HTTP, from sending the request to the end of the stream (its last text chunk,
 * then the finish, the usage and `[DONE]`); the body is read afterwards, so parsing it costs the server
 * nothing while it streams.
 */
async function streamedDecode(url: string, tokens: number) {
  const start = performance.now();
  const res = await fetch(new URL("v1/completions", url), {
    method: "POST",
    body: JSON.stringify({
      prompt: PROMPT,
      max_tokens: tokens,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  const body = await res.text();
  const end = performance.now();
  // A worker slot sends the tokens of ~2 ms as one event: the count is the usage chunk's.
  const n = Number(/"completion_tokens":(\d+)/.exec(body)?.[1] ?? 0);
  return { tokens: n, rate: rate(n, start, end) };
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    tokens: { type: "string", default: "200" },
    runs: { type: "string", default: "9" },
    engine: { type: "string" },
    json: { type: "boolean", default: false },
  });
  const tokens = Number(values.tokens), runs = Number(values.runs);
  if (!Number.isInteger(tokens) || tokens < 1 || tokens > 500) {
    fail("--tokens: expected 1 to 500", EXIT_USAGE);
  }
  if (!Number.isInteger(runs) || runs < 1) fail("--runs: expected an integer >= 1", EXIT_USAGE);
  const engine = await openServedEngine(positionals[0], values.engine);
  const { tokenizer } = await servedTokenizer(engine.source, engine.tokenizer.files);
  const slotted = await startSlots(engine.source, tokenizer, {
    kind: engine.kind,
    context: engine.context,
  });
  await slotted.slots.warm();
  const listenAt = { hostname: "127.0.0.1", port: 0 };
  const worker = await listen(createApp({ engine: slotted.engine, slots: slotted.slots }).fetch, listenAt);
  const here = await listen(createApp({ engine }).fetch, listenAt);
  try {
    const engineRates: number[] = [], workerRates: number[] = [], hereRates: number[] = [];
    const workerRatios: number[] = [], hereRatios: number[] = [];
    let count = 0;
    for (let i = 0; i < runs; i++) {
      const e = await engineDecode(engine, tokens);
      const w = await streamedDecode(worker.url, tokens);
      const h = await streamedDecode(here.url, tokens);
      for (const got of [w, h]) {
        if (got.tokens !== e.tokens) throw new Error(`streamed ${got.tokens} tokens, the engine ${e.tokens}`);
      }
      count = e.tokens;
      engineRates.push(e.rate), workerRates.push(w.rate), hereRates.push(h.rate);
      workerRatios.push(w.rate / e.rate), hereRatios.push(h.rate / e.rate);
    }
    const [engineRate, workerRate, hereRate, workerRatio, hereRatio] = [
      engineRates,
      workerRates,
      hereRates,
      workerRatios,
      hereRatios,
    ].map(median);
    const runtime = "Bun" in globalThis ? "bun" : "deno";
    if (values.json) {
      console.log(
        JSON.stringify({
          runtime,
          engine: engine.kind,
          tokens: count,
          engine_tok_s: engineRate,
          worker_tok_s: workerRate,
          worker_ratio: workerRatio,
          thread_tok_s: hereRate,
          thread_ratio: hereRatio,
        }),
      );
    } else {
      const f = (x: number) => x.toFixed(0), r = (x: number) => x.toFixed(2);
      console.log(
        `engine ${f(engineRate)} tok/s; streamed from a worker slot ${f(workerRate)} tok/s, ratio ${
          r(workerRatio)
        }; from the server's thread ${f(hereRate)} tok/s, ratio ${
          r(hereRatio)
        } (${count} tokens, ${runtime}, ${engine.kind} engine)`,
      );
    }
  } finally {
    await worker.close();
    await here.close();
    slotted.slots.close();
    engine.dispose?.();
  }
}

if (import.meta.main) await run(main);

/**
 * Streamed speed against the engine's own: how many tokens per second the engine decodes on its own
 * (model/generate.ts's loop, no server), and how many a streamed `/v1/completions` reply delivers over
 * HTTP on loopback (server and client in this process), and the ratio: each from the start (calling
 * the loop; sending the request) to the last token (yielded; the stream's end), the prompt included. The
 * engine and the stream run in turn, `--runs` pairs; each figure is the median. Run it under both runtimes.
 *
 * @example
 * ```ts
 * // deno run -A scripts/tools/bench-stream.ts --tokens 200
 * // bun scripts/tools/bench-stream.ts
 * // engine 1480 tok/s, streamed 1430 tok/s, ratio 0.97 (200 tokens, bun, int engine)
 * ```
 * @module
 */
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { openServedEngine } from "../chat.ts";
import type { Engine } from "../../model/engine.ts";
import { generateTokens } from "../../model/generate.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";

const HELP = `
Engine decode tok/s against streamed tok/s over HTTP, and their ratio.

Usage: deno run -A scripts/tools/bench-stream.ts [MODEL] [options]
       bun scripts/tools/bench-stream.ts [MODEL] [options]

Options:
  --tokens N   tokens per reply (default 200)
  --runs N     engine/stream pairs, the median kept (default 9)
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
 * then the finish and `[DONE]`); the events are counted afterwards, so parsing them costs the server
 * nothing while it streams.
 */
async function streamedDecode(url: string, tokens: number) {
  const start = performance.now();
  const res = await fetch(new URL("v1/completions", url), {
    method: "POST",
    body: JSON.stringify({ prompt: PROMPT, max_tokens: tokens, temperature: 0, stream: true }),
  });
  const body = await res.text();
  const end = performance.now();
  const n = body.split("\n\n").filter((e) => e.includes('"text":"') && !e.includes('"text":""')).length;
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
  const server = await listen(createApp({ engine }).fetch, { hostname: "127.0.0.1", port: 0 });
  try {
    const engineRates: number[] = [], streamRates: number[] = [], ratios: number[] = [];
    let count = 0;
    for (let i = 0; i < runs; i++) {
      const e = await engineDecode(engine, tokens);
      const h = await streamedDecode(server.url, tokens);
      if (h.tokens !== e.tokens) throw new Error(`streamed ${h.tokens} tokens, the engine ${e.tokens}`);
      count = e.tokens;
      engineRates.push(e.rate), streamRates.push(h.rate), ratios.push(h.rate / e.rate);
    }
    const [engineRate, streamRate, ratio] = [engineRates, streamRates, ratios].map(median);
    const runtime = "Bun" in globalThis ? "bun" : "deno";
    if (values.json) {
      console.log(
        JSON.stringify({
          runtime,
          engine: engine.kind,
          tokens: count,
          engine_tok_s: engineRate,
          streamed_tok_s: streamRate,
          ratio,
        }),
      );
    } else {
      console.log(
        `engine ${engineRate.toFixed(0)} tok/s, streamed ${streamRate.toFixed(0)} tok/s, ratio ${
          ratio.toFixed(2)
        } (${count} tokens, ${runtime}, ${engine.kind} engine)`,
      );
    }
  } finally {
    await server.close();
    engine.dispose?.();
  }
}

if (import.meta.main) await run(main);

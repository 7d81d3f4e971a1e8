/**
 * The first request's time to first token on a fresh server with two worker slots, warmed before it is
 * ready (serve/slots/slots.ts `warm`, as scripts/chat.ts does now) and not (as it did before: the workers
 * still loading and compiling when the first request came), beside that server's second request.
 * Each round makes both pools afresh, in an order that alternates by round; figures are medians. A
 * benchmark, not a test: figures from a shared machine are noisy.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-first-request.ts /tmp/q06 --engine float --rounds 2
 * ```
 * @module
 */
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { engineKinds, loadEngine } from "../../engines/mod.ts";
import { createApp } from "../../serve/app.ts";
import { createSlots } from "../../serve/slots/slots.ts";

const HELP = `
Time a fresh two-slot server's first request, warmed before ready and not, and its second.

Usage: bun scripts/tools/bench-first-request.ts MODEL [--engine KIND] [--rounds N] [--json]

Options:
  --engine KIND  int or float (default: the format's own)
  --rounds N     fresh servers of each kind (default 2)
  --json         print the figures as JSON
  -h, --help     this text
`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Milliseconds from a chat request to its first streamed token. */
async function firstToken(app: ReturnType<typeof createApp>, question: string): Promise<number> {
  const t0 = performance.now();
  const res = await app.request("/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({
      messages: [{ role: "user", content: question }],
      max_tokens: 2,
      seed: 1,
      stream: true,
    }),
  });
  const reader = res.body!.getReader(), dec = new TextDecoder();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (/"(?:content|reasoning_content)":"[^"]/.test(text)) return performance.now() - t0;
  }
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    engine: { type: "string", choices: engineKinds() },
    rounds: { type: "string", default: "2" },
    json: { type: "boolean", default: false },
  });
  if (positionals.length !== 1) fail("expected one MODEL", EXIT_USAGE);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    fail(`--rounds ${values.rounds}: expected an integer >= 1`, EXIT_USAGE);
  }
  const engine = await loadEngine(positionals[0], values.engine);
  const ms = {
    warm: { first: [] as number[], second: [] as number[] },
    cold: { first: [] as number[], second: [] as number[] },
  };
  for (let r = 0; r < rounds; r++) {
    for (const kind of r % 2 === 0 ? ["warm", "cold"] as const : ["cold", "warm"] as const) {
      const slots = createSlots(engine, { parallel: 2 });
      if (kind === "warm") await slots.warm();
      const app = createApp({ engine, slots });
      ms[kind].first.push(await firstToken(app, `Round ${r}: what is the capital of France, and why?`));
      ms[kind].second.push(await firstToken(app, `Round ${r}: which river runs through Vienna?`));
      slots.close();
      if (!values.json) {
        console.error(
          `round ${r + 1} ${kind}: first ${ms[kind].first.at(-1)!.toFixed(0)} ms, second ${
            ms[kind].second.at(-1)!.toFixed(0)
          } ms`,
        );
      }
    }
  }
  const m = (xs: number[]) => Math.round(median(xs));
  const result = {
    engine: engine.kind,
    layers: engine.config.num_hidden_layers,
    rounds,
    warm: { first_ms: m(ms.warm.first), second_ms: m(ms.warm.second) },
    cold: { first_ms: m(ms.cold.first), second_ms: m(ms.cold.second) },
  };
  if (values.json) return console.log(JSON.stringify(result, null, 2));
  console.log(
    `${result.engine} engine, 2 worker slots: first request's first token ${result.cold.first_ms} ms unwarmed, ` +
      `${result.warm.first_ms} ms warmed (second request ${result.cold.second_ms} / ${result.warm.second_ms} ms), medians of ${rounds}`,
  );
}

if (import.meta.main) await run(main);

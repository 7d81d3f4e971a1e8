/**
 * Turn 2 of a Qwen3 chat with and without the prompt cache: the time to its first token, on one slot.
 * Two apps share one engine, one with the default cache and one with none; each round has both hold a
 * fresh two-turn conversation (a system message and a question, a seeded sampled reply resent with a
 * follow-up, thinking off), the two servers taking turns in an order that alternates by round, and
 * times turn 2 from its request to its first streamed token. Between the turns each server is left
 * `--pause` seconds, as a user reading the reply and typing would leave it: the cached one reads the
 * next turn ahead meanwhile (serve/slots/slots.ts `Lease.prime`); `--pause 0` sends turn 2 at once,
 * which stops that. Figures are medians; the ratio is the cache's speed-up. A benchmark, not a test:
 * figures from a shared machine are noisy.
 *
 * @example
 * ```ts
 * // bun scripts/tools/make-qwen3.ts --out /tmp/q06 --shape qwen3-0.6b
 * // bun scripts/tools/bench-prompt-cache.ts /tmp/q06 --engine int --rounds 3
 * // deno run -A scripts/tools/bench-prompt-cache.ts /tmp/q06 --engine float --json
 * ```
 * @module
 */
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { engineKinds, loadEngine } from "../../engines/mod.ts";
import { ENGINE_FLAGS, engineFlags } from "../engine-flags.ts";
import { createApp } from "../../serve/app.ts";
import { createSlots } from "../../serve/slots/slots.ts";

const HELP = `
Time turn 2 of a Qwen3 chat's first token with and without the prompt cache, on one slot.

Usage: bun scripts/tools/bench-prompt-cache.ts MODEL [--engine KIND] [--rounds N] [--reply N] [--pause S] [--json]

MODEL is a model with a chat template (a Qwen3 folder, or an export carrying its tokenizer).

Options:
  --engine KIND  int or float (default: the format's own)
  --rounds N     conversations per server, interleaved (default 3)
  --reply N      turn 1's reply in tokens (default 48)
  --pause S      seconds between turn 1's reply and turn 2, the user's reading and typing (default 5;
                 the cached server reads the next turn ahead meanwhile; 0: turn 2 follows at once)
  --threads N    threads the engine's products run on (default: the cores)
  --json         print the figures as JSON
  -h, --help     this text
`;

/** Turn 1: a system message and a question of a few hundred tokens, made distinct by the round. */
function firstTurn(round: number) {
  const system = "You are a careful assistant. Answer in plain prose, briefly, and say when you are unsure.";
  const question = [
    `Conversation ${round}.`,
    "I am reading about the Brown corpus, a million words of American English printed in 1961, sampled",
    "from fifteen genres: press reportage, editorials and reviews, religion, skills and hobbies, popular",
    "lore, belles lettres, government documents, learned writing, and six kinds of fiction. Each of its",
    "five hundred samples runs to about two thousand words. It was tagged by hand for parts of speech,",
    "and for decades it was the standard against which taggers and language models were measured.",
    "Which of its genres would you expect to be the hardest for a small language model to predict,",
    "and why? Please think about vocabulary, sentence length, and how often names and numbers occur.",
  ].join(" ");
  return [{ role: "system", content: system }, { role: "user", content: question }];
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Milliseconds from sending `body` to the first streamed token, and the usage reported at the end. */
async function timeFirstToken(app: ReturnType<typeof createApp>, body: Record<string, unknown>) {
  const t0 = performance.now();
  const res = await app.request("/v1/chat/completions", {
    method: "POST",
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) fail(`turn 2: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader(), dec = new TextDecoder();
  let text = "", first = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    // The opening chunk carries only the role; the first with text is the first token's.
    if (!first && /"(?:content|reasoning_content)":"[^"]/.test(text)) first = performance.now() - t0;
  }
  const usage = [...text.matchAll(/"usage":(\{[^]*?\}\})/g)].map((m) => JSON.parse(m[1])).at(-1);
  return { ms: first || performance.now() - t0, usage };
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    engine: { type: "string", choices: engineKinds() },
    rounds: { type: "string", default: "3" },
    reply: { type: "string", default: "48" },
    pause: { type: "string", default: "5" },
    json: { type: "boolean", default: false },
    ...ENGINE_FLAGS,
  });
  if (positionals.length !== 1) {
    fail("expected one MODEL (a Qwen3 folder or an export with its tokenizer)", EXIT_USAGE);
  }
  const rounds = Number(values.rounds), reply = Number(values.reply), pause = Number(values.pause);
  if (!Number.isInteger(rounds) || rounds < 1) {
    fail(`--rounds ${values.rounds}: expected an integer >= 1`, EXIT_USAGE);
  }
  if (!Number.isInteger(reply) || reply < 1) {
    fail(`--reply ${values.reply}: expected an integer >= 1`, EXIT_USAGE);
  }
  if (!Number.isFinite(pause) || pause < 0) {
    fail(`--pause ${values.pause}: expected seconds >= 0`, EXIT_USAGE);
  }
  const t = performance.now();
  const engine = await loadEngine(positionals[0], values.engine, engineFlags(values));
  const loadS = (performance.now() - t) / 1000;
  const servers = {
    cache: createSlots(engine, { parallel: 1 }),
    no_cache: createSlots(engine, { parallel: 1, cacheBytes: 0 }),
  };
  const apps = {
    cache: createApp({ engine, slots: servers.cache }),
    no_cache: createApp({ engine, slots: servers.no_cache }),
  };
  await servers.cache.warm();
  await servers.no_cache.warm();
  const ms: Record<string, number[]> = { cache: [], no_cache: [] };
  const seen: Record<string, { prompt: number; cached: number }> = {};
  const kwargs = { chat_template_kwargs: { enable_thinking: false } };
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? ["cache", "no_cache"] as const : ["no_cache", "cache"] as const;
    for (const name of order) {
      const app = apps[name];
      const messages: Array<Record<string, string>> = firstTurn(r);
      const res = await app.request("/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages, max_tokens: reply, temperature: 0.7, seed: r, ...kwargs }),
      });
      const a = await res.json() as any;
      messages.push({ role: "assistant", content: a.choices[0].message.content });
      messages.push({ role: "user", content: "Say more about the second of those genres." });
      // The user's pause; reading ahead that outlasts it is stopped by turn 2 (what it read is kept).
      const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const paused = performance.now();
      const done = await Promise.race([
        servers[name].idle().then(() => true),
        sleep(pause * 1000).then(() => false),
      ]);
      if (done) await sleep(pause * 1000 - (performance.now() - paused));
      else if (pause > 0 && !values.json) {
        console.error(`round ${r + 1} ${name}: still reading ahead after the pause`);
      }
      const b = await timeFirstToken(app, { messages, max_tokens: 2, temperature: 0.7, seed: r, ...kwargs });
      ms[name].push(b.ms);
      seen[name] = { prompt: b.usage.prompt_tokens, cached: b.usage.prompt_tokens_details.cached_tokens };
      if (!values.json) {
        console.error(
          `round ${r + 1} ${name}: turn 2 first token ${b.ms.toFixed(0)} ms (${seen[name].cached} of ${
            seen[name].prompt
          } prompt tokens cached)`,
        );
      }
    }
  }
  servers.cache.close(), servers.no_cache.close();
  const result = {
    model: positionals[0],
    engine: engine.kind,
    layers: engine.config.num_hidden_layers,
    hidden: engine.config.hidden_size,
    load_s: +loadS.toFixed(1),
    rounds,
    pause_s: pause,
    turn2_prompt_tokens: seen.cache.prompt,
    turn2_cached_tokens: seen.cache.cached,
    ttft_ms: { no_cache: +median(ms.no_cache).toFixed(0), cache: +median(ms.cache).toFixed(0) },
    speedup: +(median(ms.no_cache) / median(ms.cache)).toFixed(2),
  };
  if (values.json) return console.log(JSON.stringify(result, null, 2));
  console.log(
    `${result.engine} engine, ${result.layers} layers × ${result.hidden}: turn 2 (${result.turn2_prompt_tokens} prompt tokens, ` +
      `${result.turn2_cached_tokens} cached) first token ${result.ttft_ms.no_cache} ms without the cache, ` +
      `${result.ttft_ms.cache} ms with (${result.speedup}x), medians of ${rounds}, ${pause} s between the turns`,
  );
}

if (import.meta.main) await run(main);

/**
 * A bounded load test of the chat server, on loopback only: N requests from C concurrent clients, a mix
 * of streamed chats and one-shot completions, with some clients hanging up mid-stream. Every answer must
 * be well formed (a complete SSE stream ending with [DONE], or a JSON body) or a clean 429 with
 * Retry-After; the server must keep serving; and its memory must come back to the baseline afterwards.
 * Prints throughput and the p50/p99 time to first token and total latency.
 *
 * By default it starts the server itself, in this process, on the default model; `--url` points it at
 * one already running (which must be on loopback).
 *
 * @example
 * ```ts
 * // bun scripts/tools/load-test.ts --requests 200 --clients 20
 * // deno run -A scripts/tools/load-test.ts --json
 * ```
 * @module
 */
import { loadavg } from "node:os";
import process from "node:process";
import { cli, EXIT_REFUSED, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import type { Engine } from "../../model/engine.ts";
import { createApp } from "../../serve/app.ts";
import { isLoopback, listen } from "../../serve/listen.ts";
import { createSlots, type Slots, startSlots } from "../../serve/slots/slots.ts";
import { encode } from "../../model/tokenizer.ts";
import { openServedEngine } from "../chat.ts";

const HELP = `
Load-test the chat server on loopback: every response must be well formed or a clean 429, nothing may
crash, and memory must return to its baseline.

Usage: bun scripts/tools/load-test.ts [MODEL] [options]
       deno run -A scripts/tools/load-test.ts [MODEL] [options]

Options:
  --requests N      requests in all (default 200)
  --clients C       concurrent clients (default 20)
  --disconnect K    every K-th request hangs up after its first streamed token (default 7; 0: never)
  --max-tokens M    tokens per reply (default 16)
  --queue Q         the server's waiting places before 429 (default 32: with fewer than clients - 1,
                    some requests are refused with 429 by design)
  --engine KIND     int (default), float, or webgpu (Deno)
  --parallel N      the server's slots (default 1: one, on its own thread)
  --cache-mb MB     the server's prompt cache (default 32; 0: off)
  --soak N          a soak instead: N requests (say 2000), then RSS must be within 10% of its baseline
  --warmup W        the soak's warm-up requests before the baseline (default N/2, at most 1000)
  --bench           the parallel-slot and prompt-cache benchmark instead (figures and ratios; see
                    docs/chat-server.md): 1 slot and 1 user against 2 slots and 2 users, and the
                    5th turn's time to first token with and without the cache; beside them, in
                    the same rounds, 2 users / 1 user on two slots without HTTP (the ceiling the
                    machine allowed). With --bench,
                    --requests counts per user and round (default 4), --max-tokens defaults to 128
  --rounds R        --bench: interleaved rounds, medians reported (default 5)
  --url URL         test a server already running at URL (loopback only) instead of starting one
  --json            print the results as JSON
  -h, --help        this text

Exit codes: 0 every check held, 1 a check failed, 2 usage.
`;

/** One request's outcome. */
interface Outcome {
  kind: "ok" | "429" | "disconnected" | "bad";
  ttftMs?: number;
  totalMs: number;
  detail?: string;
}

function flag(name: string, raw: string | undefined, fallback: number, min: number): number {
  if (raw === undefined) return fallback;
  const x = Number(raw);
  if (!Number.isInteger(x) || x < min) fail(`--${name} ${raw}: expected an integer >= ${min}`, EXIT_USAGE);
  return x;
}

function percentile(xs: number[], p: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}

/** Checks a complete SSE body: JSON data events, one id, a finish chunk, then [DONE]. */
function checkStream(body: string): string | undefined {
  if (!body.endsWith("data: [DONE]\n\n")) return "stream does not end with data: [DONE]";
  const events = body.slice(0, -2).split("\n\n");
  const ids = new Set<string>();
  let finished = false;
  for (const e of events.slice(0, -1)) {
    if (!e.startsWith("data: ")) return `not a data event: ${e.slice(0, 40)}`;
    let chunk;
    try {
      chunk = JSON.parse(e.slice(6));
    } catch {
      return `event is not JSON: ${e.slice(0, 40)}`;
    }
    if (chunk.error) return `stream error: ${chunk.error.message}`;
    ids.add(chunk.id);
    if (chunk.choices?.[0]?.finish_reason) finished = true;
  }
  if (ids.size !== 1) return `${ids.size} ids in one stream`;
  if (!finished) return "no finish_reason";
}

async function one(base: string, i: number, maxTokens: number, disconnect: boolean): Promise<Outcome> {
  const t0 = performance.now();
  const streamed = disconnect || i % 2 === 0;
  const chat = i % 3 !== 0;
  const body = chat
    ? {
      messages: [{ role: "user", content: `Question ${i}: what did the jury say?` }],
      max_tokens: maxTokens,
      stream: streamed,
    }
    : {
      prompt: `Request ${i}. The jury said`,
      max_tokens: maxTokens,
      stream: streamed,
      temperature: 0.8,
      seed: i,
    };
  const ac = new AbortController();
  let res: Response;
  try {
    res = await fetch(new URL(chat ? "v1/chat/completions" : "v1/completions", base), {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: ac.signal,
    });
  } catch (e) {
    return { kind: "bad", totalMs: performance.now() - t0, detail: `fetch failed: ${(e as Error).message}` };
  }
  if (res.status === 429) {
    const err = await res.json().catch(() => undefined) as any;
    const retry = Number(res.headers.get("retry-after"));
    if (err?.error?.type !== "rate_limit_error" || !(retry >= 1)) {
      return {
        kind: "bad",
        totalMs: performance.now() - t0,
        detail: "429 without the error shape or Retry-After",
      };
    }
    return { kind: "429", totalMs: performance.now() - t0 };
  }
  if (res.status !== 200) {
    return {
      kind: "bad",
      totalMs: performance.now() - t0,
      detail: `status ${res.status}: ${await res.text()}`,
    };
  }
  if (!streamed) {
    const json = await res.json().catch(() => undefined) as any;
    const c = json?.choices?.[0];
    const ok = c && typeof (chat ? c.message?.content : c.text) === "string" &&
      Number.isInteger(json.usage?.completion_tokens);
    const totalMs = performance.now() - t0;
    return ok ? { kind: "ok", totalMs } : { kind: "bad", totalMs, detail: "malformed JSON body" };
  }
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "", ttftMs: number | undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
    // The first token: a chunk with text after the chat's opening role chunk.
    if (ttftMs === undefined && /"(content|text)":"[^"]/.test(text)) {
      ttftMs = performance.now() - t0;
      if (disconnect) {
        ac.abort();
        await reader.cancel().catch(() => {});
        return { kind: "disconnected", ttftMs, totalMs: performance.now() - t0 };
      }
    }
  }
  const problem = checkStream(text);
  const totalMs = performance.now() - t0;
  return problem
    ? { kind: "bad", totalMs, detail: problem }
    : { kind: "ok", ttftMs: ttftMs ?? totalMs, totalMs };
}

/** Whether this runtime lets the test collect garbage before measuring (Deno: --v8-flags=--expose-gc). */
const canCollect = () => Boolean((globalThis as any).Bun || (globalThis as any).gc);

async function memory(collectWorkers: () => void): Promise<{ heap: number; rss: number }> {
  const g = globalThis as any;
  for (let i = 0; i < 3; i++) {
    collectWorkers();
    if (g.Bun) g.Bun.gc(true);
    else g.gc?.();
    await new Promise((r) => setTimeout(r, 50));
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

/** A server on loopback with `parallel` worker slots (as the chat server) and a `cacheMb` prompt cache; `close` ends its workers. */
async function startServer(engine: Engine, parallel: number, cacheMb: number, queueLimit: number) {
  // As the chat server starts its slots: workers that load the model, none of it on the HTTP thread.
  const { engine: served, slots } = await startSlots(engine.source, engine.tokenizer, {
    kind: engine.kind,
    context: engine.context,
    parallel,
    queueLimit,
    cacheBytes: cacheMb << 20,
  });
  await slots.warm();
  const server = await listen(createApp({ engine: served, slots, queueLimit }).fetch, {
    hostname: "127.0.0.1",
    port: 0,
  });
  return {
    base: server.url,
    close: async () => (await server.close(), slots.close()),
    cacheBytes: () => slots.cache?.size.bytes ?? 0,
    collect: () => slots.collect(),
  };
}

const post = (base: string, path: string, body: unknown) =>
  fetch(new URL(path, base), {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });

/** `users` clients each asking `each` seeded completions of `tokens` tokens: aggregate tok/s, mean latency. */
async function throughput(base: string, users: number, each: number, tokens: number) {
  const latencies: number[] = [];
  let generated = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: users }, async (_, u) => {
    for (let i = 0; i < each; i++) {
      const t = performance.now();
      const res = await post(base, "v1/completions", {
        prompt: `Request ${u}.${i}. The jury said`,
        max_tokens: tokens,
        temperature: 0.8,
        seed: u * 1000 + i,
      });
      const json = await res.json() as any;
      if (res.status !== 200) fail(`bench request failed: ${res.status} ${JSON.stringify(json)}`);
      generated += json.usage.completion_tokens;
      latencies.push(performance.now() - t);
    }
  }));
  const s = (performance.now() - t0) / 1000;
  return {
    tok_s: +(generated / s).toFixed(0),
    latency_ms: +(latencies.reduce((a, b) => a + b, 0) / latencies.length).toFixed(1),
  };
}

/** A five-turn chat resending its history; the 5th turn's time to its first streamed token, in ms. */
async function fifthTurnTtft(base: string, n: number): Promise<{ ttft: number; promptTokens: number }> {
  const messages: Array<{ role: string; content: string }> = [];
  let ttft = 0, promptTokens = 0;
  for (let turn = 1; turn <= 5; turn++) {
    // Short turns: five of them, replies included, stay well inside the context of 512.
    messages.push({ role: "user", content: `Q${n}.${turn}: and what did the jury say?` });
    const t0 = performance.now();
    const res = await post(base, "v1/chat/completions", {
      messages,
      max_tokens: 32,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    if (res.status !== 200) fail(`bench: turn ${turn} failed: ${res.status} ${await res.text()}`);
    const reader = res.body!.getReader(), decoder = new TextDecoder();
    let text = "", first = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (!first && /"content":"[^"]/.test(text)) first = performance.now() - t0;
    }
    ttft = first || performance.now() - t0;
    const chunks = text.split("\n\n").map((e) =>
      e.startsWith("data: {") ? JSON.parse(e.slice(6)) : undefined
    );
    const reply = chunks.map((c) => c?.choices?.[0]?.delta?.content ?? "").join("");
    promptTokens = chunks.find((c) => c?.usage)?.usage.prompt_tokens ?? 0;
    messages.push({ role: "assistant", content: reply });
  }
  return { ttft, promptTokens };
}

/**
 * `throughput`'s requests straight on the slots, no HTTP: the workers' own scaling on this machine at
 * this moment, the ceiling the served figures are read against (a busy neighbour on the cores lowers
 * both alike; only a gap between them is the server's thread's).
 */
async function slotThroughput(engine: Engine, slots: Slots, users: number, each: number, tokens: number) {
  let generated = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: users }, async (_, u) => {
    for (let i = 0; i < each; i++) {
      const lease = await slots.acquire(new AbortController().signal);
      try {
        const prompt = encode(`Request ${u}.${i}. The jury said`, { bos: true });
        const r = await lease.reply(engine.start(), prompt, {
          maxTokens: tokens,
          sampling: { temperature: 0.8 },
          seed: u * 1000 + i,
        });
        generated += r.completionTokens;
      } finally {
        lease.release();
      }
    }
  }));
  return generated / ((performance.now() - t0) / 1000);
}

const median = (xs: number[]) => percentile(xs, 50);

/** The benchmark of docs/chat-server.md: slots' aggregate throughput and latency, the cache's TTFT. */
async function bench(
  engine: Engine,
  json: boolean,
  rounds: number,
  each: number,
  tokens: number,
): Promise<void> {
  // Both servers stay up and the runs interleave, round by round, so a burst of other work on the
  // machine lands on every configuration alike; each figure is the median over the rounds.
  const one = await startServer(engine, 1, 0, 8), two = await startServer(engine, 2, 0, 8);
  const bare = createSlots(engine, { parallel: 2, cacheBytes: 0 }); // the same workers without HTTP
  // Warm every slot first, uncounted: each worker compiles its own code, and the compilers take their
  // time (a worker warmed by a few tokens ran slower than the server's thread, and Bun's compiler
  // threads were still busy after a few requests per user; docs/chat-server.md).
  const warm = Math.max(each, 100);
  await throughput(one.base, 1, warm, tokens), await throughput(two.base, 2, warm, tokens);
  await slotThroughput(engine, bare, 2, warm, tokens);
  const bareRatios: number[] = [];
  const runs: Record<"one" | "lone" | "two", Array<{ tok_s: number; latency_ms: number }>> = {
    one: [],
    lone: [],
    two: [],
  };
  for (let r = 0; r < rounds; r++) {
    runs.one.push(await throughput(one.base, 1, each, tokens));
    runs.lone.push(await throughput(two.base, 1, each, tokens));
    runs.two.push(await throughput(two.base, 2, each, tokens));
    const bareOne = await slotThroughput(engine, bare, 1, each, tokens);
    bareRatios.push((await slotThroughput(engine, bare, 2, each, tokens)) / bareOne);
  }
  await one.close(), await two.close(), bare.close();
  const med = (xs: Array<{ tok_s: number; latency_ms: number }>) => ({
    tok_s: median(xs.map((x) => x.tok_s)),
    latency_ms: median(xs.map((x) => x.latency_ms)),
  });
  const [oneSlot, lone, both] = [med(runs.one), med(runs.lone), med(runs.two)];
  // The 5th turn of a conversation, with and without the cache, interleaved the same way.
  const off = await startServer(engine, 1, 0, 8), on = await startServer(engine, 1, 32, 8);
  await fifthTurnTtft(off.base, 0), await fifthTurnTtft(on.base, 0); // warm-up
  const ttfts = { no_cache: [] as number[], cache: [] as number[] };
  let promptTokens = 0;
  for (let n = 1; n <= 7; n++) {
    ttfts.no_cache.push((await fifthTurnTtft(off.base, n)).ttft);
    const r = await fifthTurnTtft(on.base, n);
    ttfts.cache.push(r.ttft);
    promptTokens = r.promptTokens;
  }
  await off.close(), await on.close();
  const ttft = { no_cache: +median(ttfts.no_cache).toFixed(1), cache: +median(ttfts.cache).toFixed(1) };
  const result = {
    runtime: (globalThis as any).Bun
      ? `bun ${(globalThis as any).Bun.version}`
      : `deno ${(globalThis as any).Deno.version.deno}`,
    cores: navigator.hardwareConcurrency,
    // The machine's load when it ended: figures taken with other work running are noisy.
    load_average: loadavg().map((x) => +x.toFixed(2)),
    rounds,
    requests_per_user: each,
    tokens_per_request: tokens,
    one_slot_one_user: oneSlot,
    two_slots_one_user: lone,
    two_slots_two_users: both,
    aggregate_ratio: +(both.tok_s / oneSlot.tok_s).toFixed(2),
    aggregate_ratio_vs_one_worker: +(both.tok_s / lone.tok_s).toFixed(2),
    latency_ratio: +(both.latency_ms / lone.latency_ms).toFixed(2),
    // 2 users / 1 user on two worker slots without HTTP, in the same rounds: what the machine allowed.
    aggregate_ratio_without_http: +median(bareRatios).toFixed(2),
    fifth_turn_prompt_tokens: promptTokens,
    fifth_turn_ttft_ms: ttft,
    ttft_speedup: +(ttft.no_cache / ttft.cache).toFixed(2),
  };
  if (json) return console.log(JSON.stringify(result, null, 2));
  console.log(
    `${result.runtime}, ${result.cores} cores, load ${result.load_average.join(" ")}, ` +
      `${rounds} rounds of ${each} requests of ${tokens} tokens per user, medians`,
  );
  console.log(`  1 slot,  1 user:  ${oneSlot.tok_s} tok/s, ${oneSlot.latency_ms} ms per request`);
  console.log(`  2 slots, 1 user:  ${lone.tok_s} tok/s, ${lone.latency_ms} ms per request`);
  console.log(`  2 slots, 2 users: ${both.tok_s} tok/s, ${both.latency_ms} ms per request`);
  console.log(`  aggregate 2 slots / 1 slot: ${result.aggregate_ratio}x (target >= 1.7)`);
  console.log(`  aggregate 2 users / 1 user on 2 slots: ${result.aggregate_ratio_vs_one_worker}x`);
  console.log(`  latency 2 users / lone user: ${result.latency_ratio}x (target <= 1.2)`);
  console.log(
    `  the same slots without HTTP, 2 users / 1 user: ${result.aggregate_ratio_without_http}x ` +
      `(the machine's ceiling for the ratios above, in the same rounds)`,
  );
  console.log(
    `  5th turn (${promptTokens} prompt tokens) TTFT, median of 7: ${ttft.no_cache} ms without the cache, ` +
      `${ttft.cache} ms with (${result.ttft_speedup}x)`,
  );
}

/** `requests` requests of the mix from `clients` concurrent clients; every `every`-th hangs up mid-stream. */
async function drive(
  base: string,
  requests: number,
  clients: number,
  maxTokens: number,
  every: number,
  bar: { tick(): void; done(): void },
): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  let next = 0;
  const client = async () => {
    for (let i = next++; i < requests; i = next++) {
      const o = await one(base, i, maxTokens, every > 0 && i % every === every - 1);
      outcomes.push(o);
      bar.tick();
      // A refused client waits the way Retry-After asks, but briefly: the test is bounded.
      if (o.kind === "429") await new Promise((r) => setTimeout(r, 100));
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  bar.done();
  return outcomes;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    requests: { type: "string" },
    clients: { type: "string" },
    disconnect: { type: "string" },
    "max-tokens": { type: "string" },
    queue: { type: "string" },
    engine: { type: "string" },
    url: { type: "string" },
    json: { type: "boolean" },
    parallel: { type: "string" },
    "cache-mb": { type: "string" },
    soak: { type: "string" },
    warmup: { type: "string" },
    bench: { type: "boolean" },
    rounds: { type: "string" },
  });
  if (positionals.length > 1) fail(`expected at most one MODEL, got ${positionals.length}`, EXIT_USAGE);
  const soak = flag("soak", values.soak, 0, 0);
  const requests = soak || flag("requests", values.requests, 200, 1);
  const parallel = flag("parallel", values.parallel, 1, 1);
  const cacheMb = flag("cache-mb", values["cache-mb"], 32, 0);
  if (values.bench) {
    if (values.url !== undefined) fail("--bench starts its own servers; it takes no --url", EXIT_USAGE);
    const engine = await openServedEngine(positionals[0], values.engine);
    const rounds = flag("rounds", values.rounds, 5, 1);
    return await bench(
      engine,
      values.json ?? false,
      rounds,
      flag("requests", values.requests, 4, 1),
      flag("max-tokens", values["max-tokens"], 128, 1),
    );
  }
  const clients = flag("clients", values.clients, 20, 1);
  const every = flag("disconnect", values.disconnect, 7, 0);
  const maxTokens = flag("max-tokens", values["max-tokens"], 16, 1);
  const queueLimit = flag("queue", values.queue, 32, 0);

  let base: string, close = async () => {}, engineKind = "?", cacheBytes = () => 0, collect = () => {};
  if (values.url !== undefined) {
    let url: URL;
    try {
      url = new URL(values.url);
    } catch {
      fail(`--url ${values.url}: not a URL`, EXIT_USAGE);
    }
    if (!isLoopback(url.hostname.replace(/^\[|\]$/g, ""))) {
      fail(`--url ${values.url}: the load test only runs against loopback`, EXIT_USAGE);
    }
    base = url.href.endsWith("/") ? url.href : url.href + "/";
  } else {
    const engine = await openServedEngine(positionals[0], values.engine);
    engineKind = engine.kind;
    ({ base, close, cacheBytes, collect } = await startServer(engine, parallel, cacheMb, queueLimit));
  }

  // Warm up (the first request pays for compilation), then take the baseline.
  // One request per slot at once, so every worker has compiled and allocated before the baseline.
  for (
    const warm of await Promise.all(Array.from({ length: parallel }, () => one(base, 1, maxTokens, false)))
  ) {
    if (warm.kind !== "ok") fail(`warm-up request failed: ${warm.detail ?? warm.kind}`);
  }
  // A soak first runs a warm-up load of the same mix, so the baseline is the server's steady state
  // (the runtime's compiled code, allocator pools and the cache's fill), not its first minute. Deno with
  // two slots climbed for about 1,000 requests before it held (400 were too few: it then grew 15%).
  const warmup = soak ? flag("warmup", values.warmup, Math.min(1000, Math.ceil(soak / 2)), 0) : 0;
  if (warmup) {
    await drive(base, warmup, clients, maxTokens, every, progress("warm-up", warmup, { unit: "req" }));
  }
  const before = await memory(collect);
  const cachedBefore = cacheBytes();
  const bar = progress("load", requests, { unit: "req" });
  const t0 = performance.now();
  const outcomes = await drive(base, requests, clients, maxTokens, every, bar);
  const wallS = (performance.now() - t0) / 1000;

  // Still serving after the load, and memory back where it was.
  const after1 = await one(base, 0, maxTokens, false);
  await new Promise((r) => setTimeout(r, 200));
  const after = await memory(collect);
  // What the prompt cache took on is kept by design (bounded by --cache-mb), not a leak: not counted.
  const cached = cacheBytes() - cachedBefore;
  await close();

  const count = (k: Outcome["kind"]) => outcomes.filter((o) => o.kind === k).length;
  const served = outcomes.filter((o) => o.kind === "ok");
  // Time to first token is a streamed request's; a one-shot answer has only its total.
  const ttft = outcomes.filter((o) => o.ttftMs !== undefined).map((o) => o.ttftMs!);
  const total = served.map((o) => o.totalMs);
  const heapGrowth = after.heap - cached - before.heap;
  const result = {
    engine: engineKind,
    requests,
    clients,
    ok: count("ok"),
    rejected_429: count("429"),
    disconnected: count("disconnected"),
    bad: count("bad"),
    wall_s: +wallS.toFixed(2),
    throughput_req_s: +(count("ok") / wallS).toFixed(2),
    ttft_ms: { p50: +percentile(ttft, 50).toFixed(1), p99: +percentile(ttft, 99).toFixed(1) },
    total_ms: { p50: +percentile(total, 50).toFixed(1), p99: +percentile(total, 99).toFixed(1) },
    heap_mb: { before: +(before.heap / 2 ** 20).toFixed(1), after: +(after.heap / 2 ** 20).toFixed(1) },
    rss_mb: { before: +(before.rss / 2 ** 20).toFixed(1), after: +(after.rss / 2 ** 20).toFixed(1) },
    prompt_cache_mb: {
      before: +(cachedBefore / 2 ** 20).toFixed(1),
      after: +(cacheBytes() / 2 ** 20).toFixed(1),
    },
    served_after: after1.kind === "ok",
    memory_checked: false,
  };
  const failures: string[] = [];
  for (const o of outcomes.filter((o) => o.kind === "bad").slice(0, 5)) {
    failures.push(`malformed: ${o.detail}`);
  }
  if (outcomes.length !== requests) failures.push(`${requests - outcomes.length} requests never finished`);
  if (!result.served_after) failures.push("the server did not answer after the load");
  // Baseline: the heap may keep a few MiB of caches, not the replies it served. Against a server in
  // another process (--url) this process's memory says nothing, and without a collector it is noise.
  const memoryChecked = values.url === undefined && canCollect();
  result.memory_checked = memoryChecked;
  if (memoryChecked && heapGrowth > 16 * 2 ** 20) {
    failures.push(`heap grew by ${(heapGrowth / 2 ** 20).toFixed(1)} MiB`);
  }
  // The soak's bound: the whole process (workers included) back within 10% of its resident baseline.
  if (soak && memoryChecked && after.rss - cached > 1.1 * before.rss) {
    failures.push(`rss grew from ${result.rss_mb.before} to ${result.rss_mb.after} MiB (more than 10%)`);
  }
  if (values.json) console.log(JSON.stringify({ ...result, failures }, null, 2));
  else {
    const r = result;
    console.log(`${r.requests} requests from ${r.clients} clients on the ${r.engine} engine, ${r.wall_s} s`);
    console.log(
      `  ok ${r.ok}, 429 ${r.rejected_429}, disconnected mid-stream ${r.disconnected}, malformed ${r.bad}`,
    );
    console.log(`  throughput ${r.throughput_req_s} completed requests/s`);
    console.log(`  time to first token  p50 ${r.ttft_ms.p50} ms  p99 ${r.ttft_ms.p99} ms`);
    console.log(`  total latency        p50 ${r.total_ms.p50} ms  p99 ${r.total_ms.p99} ms`);
    const note = r.memory_checked
      ? ""
      : values.url
      ? " (not checked: the server is another process)"
      : " (not checked: run Deno with --v8-flags=--expose-gc)";
    console.log(
      `  heap ${r.heap_mb.before} -> ${r.heap_mb.after} MiB, rss ${r.rss_mb.before} -> ${r.rss_mb.after} MiB, ` +
        `prompt cache ${r.prompt_cache_mb.before} -> ${r.prompt_cache_mb.after} MiB${note}`,
    );
    for (const f of failures) console.log(`  FAIL ${f}`);
  }
  if (failures.length) process.exit(EXIT_REFUSED);
}

if (import.meta.main) await run(main);

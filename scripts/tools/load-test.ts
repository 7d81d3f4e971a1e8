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
import process from "node:process";
import { cli, EXIT_REFUSED, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";
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

/** Whether a URL's host is a loopback address. */
export function isLoopback(url: URL): boolean {
  const h = url.hostname.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
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

async function memory(): Promise<{ heap: number; rss: number }> {
  const g = globalThis as any;
  for (let i = 0; i < 3; i++) {
    if (g.Bun) g.Bun.gc(true);
    else g.gc?.();
    await new Promise((r) => setTimeout(r, 50));
  }
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
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
  });
  if (positionals.length > 1) fail(`expected at most one MODEL, got ${positionals.length}`, EXIT_USAGE);
  const requests = flag("requests", values.requests, 200, 1);
  const clients = flag("clients", values.clients, 20, 1);
  const every = flag("disconnect", values.disconnect, 7, 0);
  const maxTokens = flag("max-tokens", values["max-tokens"], 16, 1);
  const queueLimit = flag("queue", values.queue, 32, 0);

  let base: string, close = async () => {}, engineKind = "?";
  if (values.url !== undefined) {
    let url: URL;
    try {
      url = new URL(values.url);
    } catch {
      fail(`--url ${values.url}: not a URL`, EXIT_USAGE);
    }
    if (!isLoopback(url)) fail(`--url ${values.url}: the load test only runs against loopback`, EXIT_USAGE);
    base = url.href.endsWith("/") ? url.href : url.href + "/";
  } else {
    const engine = await openServedEngine(positionals[0], values.engine);
    engineKind = engine.kind;
    const app = createApp({ engine, queueLimit });
    const server = await listen(app.fetch, { hostname: "127.0.0.1", port: 0 });
    base = server.url;
    close = server.close;
  }

  // Warm up (the first request pays for compilation), then take the baseline.
  const warm = await one(base, 1, maxTokens, false);
  if (warm.kind !== "ok") fail(`warm-up request failed: ${warm.detail ?? warm.kind}`);
  const before = await memory();

  const outcomes: Outcome[] = [];
  const bar = progress("load", requests, { unit: "req" });
  let next = 0;
  const t0 = performance.now();
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
  const wallS = (performance.now() - t0) / 1000;
  bar.done();

  // Still serving after the load, and memory back where it was.
  const after1 = await one(base, 0, maxTokens, false);
  await new Promise((r) => setTimeout(r, 200));
  const after = await memory();
  await close();

  const count = (k: Outcome["kind"]) => outcomes.filter((o) => o.kind === k).length;
  const served = outcomes.filter((o) => o.kind === "ok");
  // Time to first token is a streamed request's; a one-shot answer has only its total.
  const ttft = outcomes.filter((o) => o.ttftMs !== undefined).map((o) => o.ttftMs!);
  const total = served.map((o) => o.totalMs);
  const heapGrowth = after.heap - before.heap;
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
      `  heap ${r.heap_mb.before} -> ${r.heap_mb.after} MiB, rss ${r.rss_mb.before} -> ${r.rss_mb.after} MiB${note}`,
    );
    for (const f of failures) console.log(`  FAIL ${f}`);
  }
  if (failures.length) process.exit(EXIT_REFUSED);
}

if (import.meta.main) await run(main);

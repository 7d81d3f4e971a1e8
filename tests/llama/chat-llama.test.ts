// The endpoints llama.cpp's server users expect, through app.request: /health, /tokenize, /detokenize,
// /apply-template, /metrics (strictly parsed Prometheus text whose counters move), and logprobs in
// OpenAI's shapes (chat and legacy completions, streamed too) and llama.cpp's completion_probabilities.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Engine } from "../../model/engine.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { loadingApp } from "../../serve/loading.ts";
import { logSoftmax } from "../../serve/openai/logprobs.ts";
import { renderChat } from "../../serve/chat/transcript.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";
import { sseChunks, streamedText } from "../helpers/chat-sse.ts";

let engine: Engine, app: ReturnType<typeof createApp>, cleanup = () => {};

beforeAll(async () => {
  const exported = await exportChatModel();
  cleanup = exported.cleanup;
  engine = await chatEngine(exported.path);
  app = createApp({ engine });
}, 60_000);
afterAll(() => cleanup());

const post = async (path: string, body: unknown) => {
  const res = await app.request(path, { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() as any };
};

describe("llama.cpp's utility endpoints", () => {
  test("GET /health is ok; while the engine loads it is 503 loading, and every other route 503", async () => {
    const res = await app.request("/health");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    const loading = loadingApp({});
    const l = await loading.request("/health");
    expect(l.status).toBe(503);
    expect(await l.json()).toEqual({ status: "loading" });
    const busy = await loading.request("/v1/completions", { method: "POST", body: "{}" });
    expect(busy.status).toBe(503);
    expect(busy.headers.get("retry-after")).toBe("1");
    expect((await loading.request("/health", { headers: { Host: "evil.example" } })).status).toBe(403);
  });

  test("/tokenize gives byte tokens, BOS with add_special, pieces when asked; /detokenize inverts it", async () => {
    expect((await post("/tokenize", { content: "Hi" })).body).toEqual({ tokens: [72, 105] });
    expect((await post("/tokenize", { content: "Hi", add_special: true })).body).toEqual({
      tokens: [256, 72, 105],
    });
    expect((await post("/tokenize", { content: "Hé", with_pieces: true })).body).toEqual({
      tokens: [{ id: 72, piece: "H" }, { id: 0xc3, piece: [0xc3] }, { id: 0xa9, piece: [0xa9] }],
    });
    expect((await post("/detokenize", { tokens: [256, 72, 0xc3, 0xa9] })).body).toEqual({ content: "Hé" });
    const bad = await post("/detokenize", { tokens: [72, 999] });
    expect(bad.status).toBe(400);
    expect(bad.body.error.param).toBe("tokens");
    expect((await post("/tokenize", { content: 3 })).body.error.param).toBe("content");
  });

  test("/apply-template gives exactly the text a chat request feeds", async () => {
    const messages = [{ role: "system", content: "Be brief." }, {
      role: "user",
      content: "Where is the jury?",
    }];
    const { body } = await post("/apply-template", { messages });
    expect(body).toEqual({ prompt: renderChat(messages as any) });
    const chat = await post("/v1/chat/completions", { messages, max_tokens: 1, temperature: 0 });
    expect(chat.body.usage.prompt_tokens).toBe(encode(body.prompt, { bos: true }).length);
    expect((await post("/apply-template", { messages: [] })).body.error.param).toBe("messages");
  });
});

/** Every line of a Prometheus text exposition, checked; the samples by name{labels}. */
function parsePrometheus(text: string): Map<string, number> {
  expect(text.endsWith("\n")).toBe(true);
  const samples = new Map<string, number>();
  for (const line of text.slice(0, -1).split("\n")) {
    if (
      /^# (HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*|TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|histogram))$/.test(
        line,
      )
    ) {
      continue;
    }
    const m =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})?) (\S+)$/
        .exec(line);
    if (!m) throw new Error(`not a sample or comment: ${JSON.stringify(line)}`);
    expect(Number.isNaN(Number(m[2]))).toBe(false);
    samples.set(m[1], Number(m[2]));
  }
  return samples;
}

test("GET /metrics is valid Prometheus text whose counters and histograms move after a request", async () => {
  const scrape = async () => {
    const res = await app.request("/metrics");
    expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
    return parsePrometheus(await res.text());
  };
  const before = await scrape();
  const r = await post("/v1/completions", { prompt: "The jury said", max_tokens: 8, temperature: 0 });
  expect(r.status).toBe(200);
  await app.request("/v1/nothing");
  const after = await scrape();
  const key = 'ferry_requests_total{route="/v1/completions",status="200"}';
  expect(after.get(key)).toBe((before.get(key) ?? 0) + 1);
  expect(after.get('ferry_requests_total{route="other",status="404"}')).toBeGreaterThanOrEqual(1);
  expect(after.get("ferry_prompt_tokens_total")! - before.get("ferry_prompt_tokens_total")!).toBe(14);
  expect(after.get("ferry_generated_tokens_total")! - before.get("ferry_generated_tokens_total")!).toBe(8);
  expect(
    after.get("ferry_time_to_first_token_seconds_count")! -
      before.get("ferry_time_to_first_token_seconds_count")!,
  )
    .toBe(1);
  expect(after.get("ferry_time_per_token_seconds_count")! - before.get("ferry_time_per_token_seconds_count")!)
    .toBe(7);
  expect(after.get('ferry_time_per_token_seconds_bucket{le="+Inf"}')).toBe(
    after.get("ferry_time_per_token_seconds_count"),
  );
  expect(after.get("ferry_queue_depth")).toBe(0);
  expect(after.get("ferry_active_slots")).toBe(0);
});

describe("logprobs", () => {
  const messages = [{ role: "user", content: "Where did the jury go?" }];

  test("chat: logprobs and top_logprobs in OpenAI's shape, matching the model's own distribution", async () => {
    const { body } = await post("/v1/chat/completions", {
      messages,
      max_tokens: 12,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const text = body.choices[0].message.content as string;
    const content = body.choices[0].logprobs.content as any[];
    expect(content.map((t) => t.token).join("")).toBe(text); // ASCII reply: one token per character
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.bytes).toEqual([t.token.charCodeAt(0)]);
      expect(t.top_logprobs).toHaveLength(3);
      expect(t.top_logprobs[0].token).toBe(t.token); // greedy: the pick is the most likely
      expect(t.top_logprobs[0].logprob).toBeCloseTo(t.logprob, 6);
      expect(t.top_logprobs[1].logprob).toBeLessThanOrEqual(t.top_logprobs[0].logprob);
    }
    // The first token's value is the log-softmax of the engine's own logits after the prompt.
    const s = engine.start();
    const logits = await s.feed(encode(renderChat(messages as any), { bos: true }));
    const want = logSoftmax(logits, [content[0].bytes[0]], 0).of[0];
    expect(content[0].logprob).toBeCloseTo(want, 2); // an engine's own logprobs may be fixed-point

    const plain = await post("/v1/chat/completions", { messages, max_tokens: 4 });
    expect(plain.body.choices[0].logprobs).toBeNull();
    expect((await post("/v1/chat/completions", { messages, top_logprobs: 2 })).body.error.param).toBe(
      "top_logprobs",
    );
    expect(
      (await post("/v1/chat/completions", { messages, logprobs: true, top_logprobs: 21 })).body.error.param,
    )
      .toBe("top_logprobs");
  });

  test("chat, streamed: each chunk carries its tokens' logprobs, the same as the whole reply's", async () => {
    const req = { messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 2 };
    const whole = (await post("/v1/chat/completions", req)).body;
    const res = await app.request("/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ ...req, stream: true }),
    });
    const chunks = sseChunks(await res.text());
    const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    expect(streamedText(chunks)).toBe(whole.choices[0].message.content);
    expect(streamed).toEqual(whole.choices[0].logprobs.content);
  });

  test("completions: logprobs N in the legacy shape, streamed too; n_probs as completion_probabilities", async () => {
    const req = { prompt: "The jury said", max_tokens: 10, temperature: 0, logprobs: 2, n_probs: 3 };
    const { body } = await post("/v1/completions", req);
    const lp = body.choices[0].logprobs;
    expect(lp.tokens.join("")).toBe(body.choices[0].text);
    expect(lp.token_logprobs).toHaveLength(10);
    expect(lp.text_offset).toEqual(Array.from({ length: 10 }, (_, i) => "The jury said".length + i));
    for (const [i, top] of (lp.top_logprobs as Record<string, number>[]).entries()) {
      expect(Object.keys(top)).toHaveLength(2);
      expect(top[lp.tokens[i]]).toBeCloseTo(lp.token_logprobs[i], 6);
    }
    const probs = body.completion_probabilities as any[];
    expect(probs).toHaveLength(10);
    expect(probs[0]).toMatchObject({ id: lp.tokens[0].charCodeAt(0), token: lp.tokens[0] });
    expect(probs[0].top_logprobs).toHaveLength(3);

    const res = await app.request("/v1/completions", {
      method: "POST",
      body: JSON.stringify({ ...req, stream: true }),
    });
    const chunks = sseChunks(await res.text());
    const tokens = chunks.flatMap((c) => c.choices[0]?.logprobs?.tokens ?? []);
    const offsets = chunks.flatMap((c) => c.choices[0]?.logprobs?.text_offset ?? []);
    expect(tokens).toEqual(lp.tokens);
    expect(offsets).toEqual(lp.text_offset);
  });

  test("an engine without logprobs is answered from feed's float logits, the same values", async () => {
    const bare: Engine = {
      ...engine,
      kind: engine.kind,
      config: engine.config,
      source: engine.source,
      start() {
        const s = engine.start();
        return {
          get position() {
            return s.position;
          },
          get tokens() {
            return s.tokens;
          },
          feed: (t, w) => s.feed(t, w),
          pick: (o) => s.pick(o),
          seed: (x) => s.seed(x),
        };
      },
    };
    const req = { messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2 };
    const a = (await post("/v1/chat/completions", req)).body;
    const res = await createApp({ engine: bare }).request("/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify(req),
    });
    const b = await res.json() as any;
    expect(b.choices[0].message.content).toBe(a.choices[0].message.content);
    const la = a.choices[0].logprobs.content, lb = b.choices[0].logprobs.content;
    expect(lb.map((t: any) => t.token)).toEqual(la.map((t: any) => t.token));
    // The integer engine's own logprobs are fixed-point; the fallback's are float: close, not equal.
    for (let i = 0; i < la.length; i++) expect(lb[i].logprob).toBeCloseTo(la[i].logprob, 2);
  });
});

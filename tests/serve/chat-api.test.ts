// The chat server's API through app.request (no sockets): both response modes, every limit and
// refusal, the queue, disconnects, and sessions that continue with exactly the tokens of an
// uninterrupted run. The Deno half runs the same app under deno and compares.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import type { Engine } from "../../model/engine.ts";
import { MAX_TEMPERATURE, SAMPLING_EXPECTED } from "../../model/sampling.ts";
import { createApp } from "../../serve/app.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { renderChat } from "../../serve/chat/transcript.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";
import { sseChunks, streamedText } from "../helpers/chat-sse.ts";

let model: Awaited<ReturnType<typeof exportChatModel>>;
let engine: Engine;
let feeds = 0;
let app: ReturnType<typeof createApp>;

/** The engine with a count of `feed` calls, so a test can see a generation stop. */
function counting(e: Engine): Engine {
  const wrap = (s: ReturnType<Engine["start"]>) => {
    const feed = s.feed.bind(s);
    s.feed = (t, w) => (feeds++, feed(t, w));
    return s;
  };
  return {
    ...e,
    kind: e.kind,
    config: e.config,
    source: e.source,
    start: () => wrap(e.start()),
    restore: (b, w) => wrap(e.restore!(b, w)),
  };
}

beforeAll(async () => {
  model = await exportChatModel();
  engine = counting(await chatEngine(model.path));
  app = createApp({
    engine,
    sessions: await createSessionStore(join(model.dir, "sessions")),
    queueLimit: 1,
    maxBodyBytes: 4096,
  });
}, 60_000);
afterAll(() => model?.cleanup());

const post = (path: string, body: unknown, init: RequestInit = {}) =>
  app.request(path, {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
const complete = async (body: Record<string, unknown>) => {
  const res = await post("/v1/completions", body);
  expect(res.status).toBe(200);
  return await res.json() as any;
};
const expectError = async (res: Response, status: number, param: string | null) => {
  expect(res.status).toBe(status);
  const body = await res.json() as any;
  expect(Object.keys(body)).toEqual(["error"]);
  expect(body.error.param).toBe(param);
  expect(typeof body.error.message).toBe("string");
  expect(typeof body.error.type).toBe("string");
  if (param) expect(body.error.message).toContain(param);
  return body.error;
};

describe("endpoints", () => {
  test("GET /v1/models names the model, the engine and the context", async () => {
    const res = await app.request("/v1/models");
    expect(res.status).toBe(200);
    const body = await res.json() as any;
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({
      object: "model",
      owned_by: "ferry",
      engine: engine.kind,
      context_length: 512,
      tokenizer: "byte",
      chat_template: false,
      thinking_switch: false,
    });
  });

  test("a greedy completion repeats, counts its tokens, and streams the same text ending with [DONE]", async () => {
    const req = { prompt: "The jury said", max_tokens: 24, temperature: 0 };
    const a = await complete(req), b = await complete(req);
    expect(a.object).toBe("text_completion");
    expect(a.choices[0].text).toHaveLength(24); // ASCII continuation: one byte per token
    expect(b.choices[0].text).toBe(a.choices[0].text);
    expect(a.choices[0].finish_reason).toBe("length");
    expect(a.usage).toEqual({
      prompt_tokens: 14,
      completion_tokens: 24,
      total_tokens: 38,
      prompt_tokens_details: { cached_tokens: 0 },
    }); // BOS + 13 bytes

    const res = await post("/v1/completions", {
      ...req,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const chunks = sseChunks(await res.text());
    expect(chunks.length).toBeGreaterThan(24); // one chunk per token, then the finish and usage chunks
    expect(streamedText(chunks)).toBe(a.choices[0].text);
    expect(chunks.at(-2).choices[0].finish_reason).toBe("length");
    // The streamed repeat finds the whole prompt in the slot's last state, and says so: all of it but
    // the last token, read again for its next-token distribution (that state holds the reply too).
    expect(chunks.at(-1).usage).toEqual({
      ...a.usage,
      prompt_tokens_details: { cached_tokens: a.usage.prompt_tokens - 1 },
    });
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  test("chat renders a transcript, replies up to the end of its line, and streams the same reply", async () => {
    const messages = [{ role: "user", content: "Where did the jury go?" }];
    const res = await post("/v1/chat/completions", { messages, max_tokens: 60, temperature: 0 });
    const body = await res.json() as any;
    expect(body.object).toBe("chat.completion");
    expect(body.choices[0].message.role).toBe("assistant");
    const reply = body.choices[0].message.content as string;
    expect(reply).not.toContain("\n");
    expect(body.usage.prompt_tokens).toBe(1 + renderChat(messages as any).length);
    if (body.choices[0].finish_reason === "stop") expect(body.usage.completion_tokens).toBe(reply.length + 1);

    const s = await post("/v1/chat/completions", { messages, max_tokens: 60, temperature: 0, stream: true });
    const chunks = sseChunks(await s.text());
    expect(chunks[0].object).toBe("chat.completion.chunk");
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    expect(streamedText(chunks)).toBe(reply);
  });

  test("sampling is seeded: the same seed repeats, another seed differs, temperature 0 ignores it", async () => {
    const req = { prompt: "It was", max_tokens: 40, temperature: 1, top_k: 40, min_p: 0.01 };
    const a = await complete({ ...req, seed: 1 }),
      b = await complete({ ...req, seed: 1 }),
      c = await complete({ ...req, seed: 2 });
    expect(b.choices[0].text).toBe(a.choices[0].text);
    expect(c.choices[0].text).not.toBe(a.choices[0].text);
  });

  test("no seed: a fresh random seed per request, reported, and the reported seed reproduces the reply", async () => {
    const req = { prompt: "The jury said", max_tokens: 24, temperature: 1 };
    const replies = [await complete(req), await complete(req), await complete(req)];
    for (const r of replies) expect(Number.isSafeInteger(r.seed)).toBe(true);
    expect(new Set(replies.map((r) => r.seed)).size).toBe(3);
    expect(new Set(replies.map((r) => r.choices[0].text)).size).toBeGreaterThan(1);
    const again = await complete({ ...req, seed: replies[0].seed });
    expect(again.seed).toBe(replies[0].seed);
    expect(again.choices[0].text).toBe(replies[0].choices[0].text);

    const messages = [{ role: "user", content: "Where did the jury go?" }];
    const chat = await (await post("/v1/chat/completions", { messages, max_tokens: 16 })).json() as any;
    expect(Number.isSafeInteger(chat.seed)).toBe(true);
    const s = sseChunks(
      await (await post("/v1/chat/completions", {
        messages,
        max_tokens: 16,
        seed: chat.seed,
        stream: true,
      })).text(),
    );
    expect(s[0].seed).toBe(chat.seed);
    expect(s.at(-1).seed).toBe(chat.seed);
    expect(streamedText(s)).toBe(chat.choices[0].message.content);

    // Continuing a session without a seed keeps the session's own random stream: no seed to report.
    const saved = await complete({ ...req, max_tokens: 4, save_session: true });
    const continued = await complete({
      prompt: " and",
      max_tokens: 4,
      temperature: 1,
      session: saved.session,
    });
    expect(continued.seed).toBeNull();
  });

  test("a stop string ends the reply before it, in both modes", async () => {
    const greedy = (await complete({ prompt: "The jury said", max_tokens: 24, temperature: 0 })).choices[0]
      .text as string;
    const stop = greedy.slice(8, 11);
    const cut = greedy.slice(0, greedy.indexOf(stop));
    const a = await complete({
      prompt: "The jury said",
      max_tokens: 24,
      temperature: 0,
      stop: [stop, "zzz"],
    });
    expect(a.choices[0].text).toBe(cut);
    expect(a.choices[0].finish_reason).toBe("stop");
    const res = await post("/v1/completions", {
      prompt: "The jury said",
      max_tokens: 24,
      temperature: 0,
      stop,
      stream: true,
    });
    expect(streamedText(sseChunks(await res.text()))).toBe(cut);
  });

  test("the page and its files are served as they are", async () => {
    const page = await app.request("/");
    expect(page.headers.get("content-type")).toStartWith("text/html");
    expect(await page.text()).toContain("<html");
    for (const f of ["/page/chat.js", "/page/style.css"]) expect((await app.request(f)).status).toBe(200);
    await expectError(await app.request("/nope"), 404, null);
  });
});

describe("limits and bad input", () => {
  test("malformed JSON and non-object bodies are 400 in OpenAI's error shape", async () => {
    const e = await expectError(await post("/v1/completions", '{"prompt": '), 400, "body");
    expect(e.type).toBe("invalid_request_error");
    await expectError(await post("/v1/completions", "[1, 2]"), 400, "body");
    await expectError(await post("/v1/chat/completions", "null"), 400, "body");
  });

  test("every field of the wrong type or range is 400 naming it", async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["/v1/completions", { prompt: 5 }, "prompt"],
      ["/v1/completions", { prompt: "a", max_tokens: 1.5 }, "max_tokens"],
      ["/v1/completions", { prompt: "a", max_tokens: "10" }, "max_tokens"],
      ["/v1/completions", { prompt: "a", temperature: "hot" }, "temperature"],
      ["/v1/completions", { prompt: "a", temperature: -1 }, "temperature"],
      ["/v1/completions", { prompt: "a", top_k: -1 }, "top_k"],
      ["/v1/completions", { prompt: "a", top_p: 0 }, "top_p"],
      ["/v1/completions", { prompt: "a", min_p: 2 }, "min_p"],
      ["/v1/completions", { prompt: "a", seed: "x" }, "seed"],
      ["/v1/completions", { prompt: "a", seed: 1.5 }, "seed"],
      ["/v1/completions", { prompt: "a", seed: 2 ** 53 }, "seed"],
      ["/v1/completions", { prompt: "a", temperature: MAX_TEMPERATURE + 1 }, "temperature"],
      ["/v1/completions", { prompt: "a", stop: 5 }, "stop"],
      ["/v1/completions", { prompt: "a", stop: ["a", "b", "c", "d", "e"] }, "stop"],
      ["/v1/completions", { prompt: "a", stream: "yes" }, "stream"],
      ["/v1/completions", { prompt: "a", n: 2 }, "n"],
      ["/v1/completions", { prompt: "a", model: 1 }, "model"],
      ["/v1/completions", { prompt: "a", session: 7 }, "session"],
      ["/v1/chat/completions", { messages: "hi" }, "messages"],
      ["/v1/chat/completions", { messages: [] }, "messages"],
      ["/v1/chat/completions", { messages: [{ role: "bot", content: "hi" }] }, "messages[0].role"],
      [
        "/v1/chat/completions",
        { messages: [{ role: "user", content: "a" }, { role: "user", content: 3 }] },
        "messages[1].content",
      ],
    ];
    for (const [path, body, param] of cases) await expectError(await post(path, body), 400, param);
  });

  test("sampling follows the one contract: its ranges and words, OpenAI's names and defaults", async () => {
    const text = async (body: Record<string, unknown>) => (await complete(body)).choices[0].text as string;
    const req = { prompt: "It was", max_tokens: 24, seed: 4 };
    // OpenAI's defaults, absent or null: temperature 1 and top_p 1, so an unsaid temperature samples.
    const one = await text({ ...req, temperature: 1, top_p: 1 });
    expect(await text(req)).toBe(one);
    expect(await text({ ...req, temperature: null, top_p: null, top_k: null, min_p: null })).toBe(one);
    expect(await text({ ...req, temperature: 0 })).not.toBe(one);
    // The contract's range, past OpenAI's 2; and its seeds, negative ones included.
    expect(await text({ ...req, temperature: 5 })).not.toBe(one);
    expect(await text({ ...req, seed: -1 })).toBe(await text({ ...req, seed: -1 }));
    // Refusals name the HTTP field, in the contract's words, with the value as sent.
    const message = async (field: string, value: string) =>
      (await expectError(await post("/v1/completions", `{"prompt": "a", "${field}": ${value}}`), 400, field))
        .message;
    expect(await message("top_p", "2")).toBe(`top_p: expected ${SAMPLING_EXPECTED.topP}, got 2`);
    expect(await message("top_k", '"all"')).toBe(`top_k: expected ${SAMPLING_EXPECTED.topK}, got "all"`);
    expect(await message("min_p", "-0.5")).toBe(`min_p: expected ${SAMPLING_EXPECTED.minP}, got -0.5`);
    expect(await message("seed", "0.5")).toBe(`seed: expected ${SAMPLING_EXPECTED.seed}, got 0.5`);
    // 1e999 parses to Infinity, which JSON would print as null.
    expect(await message("temperature", "1e999")).toBe(
      `temperature: expected ${SAMPLING_EXPECTED.temperature}, got Infinity`,
    );
  });

  test("max_tokens and the prompt are capped against the context", async () => {
    await expectError(await post("/v1/completions", { prompt: "a", max_tokens: 513 }), 400, "max_tokens");
    const e = await expectError(await post("/v1/completions", { prompt: "x".repeat(511) }), 400, "prompt");
    expect(e.code).toBe("context_length_exceeded");
    await expectError(
      await post("/v1/chat/completions", { messages: [{ role: "user", content: "x".repeat(600) }] }),
      400,
      "messages",
    );
    // 510 prompt bytes + BOS leave one position: max_tokens is cut to it.
    const r = await complete({ prompt: "x".repeat(510), max_tokens: 50, temperature: 0 });
    expect(r.usage.completion_tokens).toBe(1);
    expect(r.choices[0].finish_reason).toBe("length");
  });

  test("bodies over the limit are 413, with and without Content-Length", async () => {
    const big = JSON.stringify({ prompt: "x".repeat(5000) });
    await expectError(await post("/v1/completions", big), 413, null);
    const chunked = new ReadableStream({
      start(c) {
        c.enqueue(new TextEncoder().encode(big));
        c.close();
      },
    });
    const res = await app.request(
      "/v1/completions",
      { method: "POST", body: chunked, duplex: "half" } as RequestInit,
    );
    await expectError(res, 413, null);
  });
});

describe("one generation at a time", () => {
  test("a full queue answers 429 with Retry-After; a disconnect stops its generation and frees its place", async () => {
    // The first request holds the engine: its stream is not read, so generation waits on the writes.
    const first = await post("/v1/completions", { prompt: "The", max_tokens: 400, stream: true });
    const reader = first.body!.getReader();
    await reader.read();
    // The second waits in the one place of the line; the third finds the line full.
    const waiting = new AbortController();
    const second = post("/v1/completions", { prompt: "The", max_tokens: 2 }, { signal: waiting.signal });
    await Bun.sleep(150);
    const third = await post("/v1/completions", { prompt: "The", max_tokens: 2 });
    await expectError(third, 429, null);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // The waiter gives up: its place frees, so a new request can queue again.
    waiting.abort();
    await second.then((r) => r.status, () => "aborted");
    const fourth = post("/v1/completions", { prompt: "The", max_tokens: 2, temperature: 0 });
    await Bun.sleep(150);
    // The streaming client disconnects: its generation stops well short of 400 tokens.
    const before = feeds;
    await reader.cancel();
    const done = await fourth;
    expect(done.status).toBe(200);
    expect((await done.json() as any).usage.completion_tokens).toBe(2);
    expect(feeds - before).toBeLessThan(50);
  });

  test("a client that disconnects mid-stream stops its generation", async () => {
    const ac = new AbortController();
    const res = await post("/v1/chat/completions", {
      messages: [{ role: "user", content: "Tell me" }],
      max_tokens: 400,
      stream: true,
      temperature: 1,
      seed: 3,
    }, { signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.read();
    const before = feeds;
    ac.abort();
    await reader.cancel().catch(() => {});
    await Bun.sleep(50);
    const after = feeds;
    await Bun.sleep(50);
    expect(feeds).toBe(after); // nothing is generating any more
    expect(after - before).toBeLessThan(50);
    expect((await post("/v1/completions", { prompt: "a", max_tokens: 1 })).status).toBe(200);
  });
});

describe("sessions", () => {
  test("save, continue: the exact tokens of an uninterrupted run; download and upload keep them", async () => {
    // Sampling settings belong to each request; the sampler's state travels in the session.
    const sampling = { temperature: 0.9, top_k: 50 };
    const whole = (await complete({ prompt: "The jury said", ...sampling, seed: 11, max_tokens: 40 }))
      .choices[0].text as string;
    const first = await complete({
      prompt: "The jury said",
      ...sampling,
      seed: 11,
      max_tokens: 20,
      save_session: true,
    });
    expect(first.session).toMatch(/^[0-9a-f]{32}$/);
    const rest = await complete({ prompt: "", ...sampling, max_tokens: 20, session: first.session });
    expect(first.choices[0].text + rest.choices[0].text).toBe(whole);
    expect(rest.usage.prompt_tokens).toBe(0);

    const file = await app.request(`/v1/sessions/${first.session}`);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-disposition")).toContain("attachment");
    const bytes = new Uint8Array(await file.arrayBuffer());
    const up = await app.request("/v1/sessions", { method: "POST", body: bytes });
    expect(up.status).toBe(201);
    const uploaded = await up.json() as any;
    expect(uploaded.id).not.toBe(first.session);
    expect(uploaded.tokens).toBe(14 + 20);
    expect(uploaded.text).toBe("The jury said" + first.choices[0].text);
    const again = await complete({ prompt: "", ...sampling, max_tokens: 20, session: uploaded.id });
    expect(again.choices[0].text).toBe(rest.choices[0].text);
    // Streaming continues the same way.
    const s = await post("/v1/completions", {
      prompt: "",
      ...sampling,
      max_tokens: 20,
      session: uploaded.id,
      stream: true,
    });
    expect(streamedText(sseChunks(await s.text()))).toBe(rest.choices[0].text);
  });

  test("a chat continues from its session reading only the new turn, with the same reply", async () => {
    const turn1 = [{ role: "user", content: "Hello." }];
    const a = await (await post("/v1/chat/completions", {
      messages: turn1,
      max_tokens: 30,
      temperature: 0,
      save_session: true,
    })).json() as any;
    const turn2 = [...turn1, a.choices[0].message, { role: "user", content: "And then?" }];
    const fresh =
      await (await post("/v1/chat/completions", { messages: turn2, max_tokens: 30, temperature: 0 }))
        .json() as any;
    const cont = await (await post("/v1/chat/completions", {
      messages: turn2,
      max_tokens: 30,
      temperature: 0,
      session: a.session,
    }))
      .json() as any;
    expect(cont.choices[0].message.content).toBe(fresh.choices[0].message.content);
    expect(cont.usage.prompt_tokens).toBe(
      fresh.usage.prompt_tokens - (1 + renderChat(turn1 as any).length + a.usage.completion_tokens),
    );
    // A conversation that is not the session's own is refused.
    const other = [{ role: "user", content: "Something else" }];
    await expectError(
      await post("/v1/chat/completions", { messages: other, session: a.session }),
      400,
      "messages",
    );
  });

  test("session ids are opaque: unknown, malformed and path-like ids are 404 and read no file", async () => {
    await expectError(await app.request(`/v1/sessions/${"0".repeat(32)}`), 404, "session");
    await expectError(await app.request("/v1/sessions/abc"), 404, "session");
    for (const id of ["..%2F..%2Fetc%2Fpasswd", "%2E%2E%2Fpackage.json", "..", "%2E%2E"]) {
      expect((await app.request(`/v1/sessions/${id}`)).status).toBe(404); // the URL may normalise away the route
    }
    for (const session of ["../../etc/passwd", "/etc/passwd", "0".repeat(32), "../ferry.q4"]) {
      await expectError(await post("/v1/completions", { prompt: "a", session }), 404, "session");
    }
    await expectError(
      await app.request("/v1/sessions", { method: "POST", body: new Uint8Array([1, 2, 3]) }),
      400,
      "session",
    );
  });
});

crossProcessTest("the same app answers the same under Deno", async () => {
  const script = `
    import { createApp } from "./serve/app.ts";
    import { loadEngine } from "./engines/mod.ts";
    import process from "node:process";
    const app = createApp({ engine: await loadEngine(process.env.FERRY_CHAT_MODEL), maxBodyBytes: 4096 });
    const post = (p, b) => app.request(p, { method: "POST", body: JSON.stringify(b) });
    const out = [];
    out.push((await (await app.request("/v1/models")).json()).data[0].engine);
    out.push((await (await post("/v1/completions", { prompt: "The jury said", max_tokens: 24, temperature: 0 })).json()).choices[0].text);
    out.push(await (await post("/v1/completions", { prompt: "The jury said", max_tokens: 24, temperature: 0, stream: true })).text());
    out.push((await (await post("/v1/completions", { prompt: "a", top_k: -1 })).json()).error.param);
    out.push((await post("/v1/completions", { prompt: "x".repeat(5000) })).status);
    out.push((await (await post("/v1/completions", { prompt: "It was", max_tokens: 40, temperature: 1, seed: 1 })).json()).choices[0].text);
    console.log(JSON.stringify(out));
  `;
  const deno = spawnSync("deno", ["eval", "--ext=ts", script], {
    encoding: "utf8",
    env: { ...process.env, FERRY_CHAT_MODEL: model.path },
  });
  expect(withoutDenoDownloads(deno.stderr)).toBe("");
  expect(deno.status).toBe(0);
  const [kind, greedy, stream, param, status, sampled] = JSON.parse(deno.stdout);
  expect(kind).toBe(engine.kind);
  expect(greedy).toBe(
    (await complete({ prompt: "The jury said", max_tokens: 24, temperature: 0 })).choices[0].text,
  );
  expect(streamedText(sseChunks(stream))).toBe(greedy);
  expect(param).toBe("top_k");
  expect(status).toBe(413);
  expect(sampled).toBe(
    (await complete({ prompt: "It was", max_tokens: 40, temperature: 1, seed: 1 })).choices[0].text,
  );
});

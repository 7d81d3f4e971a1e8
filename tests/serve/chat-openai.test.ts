// A real OpenAI client library (npm `openai`) against the chat server on loopback: streamed and
// non-streamed completions and chat completions, and an API error surfacing as the client's own error.
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

let server: Listening, client: OpenAI, model: string, cleanup = () => {};

beforeAll(async () => {
  const exported = await exportChatModel();
  cleanup = exported.cleanup;
  const app = createApp({ engine: await chatEngine(exported.path) });
  server = await listen(app.fetch, { hostname: "127.0.0.1", port: 0 });
  client = new OpenAI({ baseURL: new URL("v1", server.url).href, apiKey: "unused", maxRetries: 0 });
  model = (await client.models.list()).data[0].id;
}, 60_000);
afterAll(async () => {
  await server?.close();
  cleanup();
});

test("the openai client lists the model and gets a non-streamed and a streamed completion", async () => {
  expect(model.length).toBeGreaterThan(0);
  const once = await client.completions.create({
    model,
    prompt: "The jury said",
    max_tokens: 24,
    temperature: 0,
  });
  expect(once.choices[0].text).toHaveLength(24);
  expect(once.usage).toEqual({
    prompt_tokens: 14,
    completion_tokens: 24,
    total_tokens: 38,
    prompt_tokens_details: { cached_tokens: 0 },
  });
  const stream = await client.completions.create({
    model,
    prompt: "The jury said",
    max_tokens: 24,
    temperature: 0,
    stream: true,
  });
  let text = "", chunks = 0;
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "", chunks++;
  expect(chunks).toBeGreaterThanOrEqual(24);
  expect(text).toBe(once.choices[0].text);
});

test("the openai client gets a non-streamed and a streamed chat completion with usage", async () => {
  const messages = [{ role: "user" as const, content: "Where did the jury go?" }];
  const once = await client.chat.completions.create({ model, messages, max_tokens: 32, temperature: 0 });
  expect(once.choices[0].message.role).toBe("assistant");
  expect(once.choices[0].message.content).not.toContain("\n");
  const stream = await client.chat.completions.create({
    model,
    messages,
    max_tokens: 32,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "", usage;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? "";
    usage = chunk.usage ?? usage;
  }
  expect(text).toBe(once.choices[0].message.content!);
  // The repeat finds the whole prompt in the slot's last state, and says so: all but its last token,
  // read again for its next-token distribution (that state holds the reply too).
  expect(usage).toEqual({
    ...once.usage,
    prompt_tokens_details: { cached_tokens: once.usage!.prompt_tokens - 1 },
  });
});

test("a refused request is the client's BadRequestError naming the field", async () => {
  let error: unknown;
  try {
    await client.completions.create({ model, prompt: "a", max_tokens: 100_000 });
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(400);
  expect((error as InstanceType<typeof OpenAI.APIError>).param).toBe("max_tokens");
});

test("the openai client reads logprobs and top_logprobs on chat, logprobs on completions, streamed too", async () => {
  const messages = [{ role: "user" as const, content: "Where did the jury go?" }];
  const once = await client.chat.completions.create({
    model,
    messages,
    max_tokens: 8,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
  });
  const content = once.choices[0].logprobs!.content!;
  expect(content.map((t) => t.token).join("")).toBe(once.choices[0].message.content!);
  expect(content[0].top_logprobs).toHaveLength(2);
  expect(content[0].logprob).toBeLessThanOrEqual(0);
  expect(content[0].bytes).toEqual([content[0].token.charCodeAt(0)]);
  const stream = await client.chat.completions.create({
    model,
    messages,
    max_tokens: 8,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
    stream: true,
  });
  const streamed = [];
  for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  expect(streamed).toEqual(content);

  const c = await client.completions.create({
    model,
    prompt: "The jury said",
    max_tokens: 6,
    temperature: 0,
    logprobs: 3,
  });
  const lp = c.choices[0].logprobs!;
  expect(lp.tokens!.join("")).toBe(c.choices[0].text);
  expect(lp.token_logprobs).toHaveLength(6);
  expect(Object.keys(lp.top_logprobs![0])).toHaveLength(3);
  expect(lp.text_offset![0]).toBe("The jury said".length);
});

test("the openai client sees the seed: unseeded replies differ, and the reported seed repeats one", async () => {
  const req = { model, prompt: "The jury said", max_tokens: 24, temperature: 1 };
  const a = await client.completions.create(req) as any, b = await client.completions.create(req) as any;
  expect(Number.isSafeInteger(a.seed)).toBe(true);
  expect(b.seed).not.toBe(a.seed);
  expect(b.choices[0].text).not.toBe(a.choices[0].text);
  const again = await client.completions.create({ ...req, seed: a.seed });
  expect(again.choices[0].text).toBe(a.choices[0].text);
  const messages = [{ role: "user" as const, content: "Hello" }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, seed: 42 }) as any;
  expect(chat.seed).toBe(42);
});

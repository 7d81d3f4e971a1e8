// The prompt cache (serve/prompt-cache.ts, used by serve/slots.ts): the longest cached prefix, LRU
// eviction within its byte bound, and replies bit-identical with and without it on the integer engine
// (greedy and seeded, on the server's thread and on worker slots), with the reused tokens reported.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Engine } from "../../model/engine.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { createPromptCache } from "../../serve/prompt-cache.ts";
import type { ChatMessage } from "../../serve/requests.ts";
import { createSlots, type Slots } from "../../serve/slots.ts";
import { renderChat } from "../../serve/transcript.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

describe("the cache itself", () => {
  const bytes = (n: number) => new Uint8Array(n);
  test("finds the longest entry that begins the tokens, and nothing longer or different", () => {
    const c = createPromptCache(1000);
    c.put([1, 2], bytes(10));
    c.put([1, 2, 3, 4], bytes(10));
    c.put([1, 9, 9], bytes(10));
    expect(c.longest([1, 2, 3, 4, 5])?.length).toBe(4);
    expect(c.longest([1, 2, 3])?.length).toBe(2);
    expect(c.longest([1, 2, 3, 4])?.length).toBe(4);
    expect(c.longest([7, 1, 2])).toBeUndefined();
    expect(c.longest([1])).toBeUndefined();
  });
  test("holds at most its bound, dropping the least recently used first", () => {
    const c = createPromptCache(25);
    c.put([1], bytes(10));
    c.put([2], bytes(10));
    c.longest([1, 5]); // [1] is now the most recently used
    c.put([3], bytes(10)); // 30 > 25: [2] goes
    expect(c.size).toEqual({ entries: 2, bytes: 20 });
    expect(c.longest([2])).toBeUndefined();
    expect(c.longest([1])?.length).toBe(1);
    expect(c.longest([3])?.length).toBe(1);
    c.put([4], bytes(26)); // larger than the whole bound: not kept, nothing evicted
    expect(c.size.entries).toBe(2);
    expect(createPromptCache(0).size.entries).toBe(0);
  });
});

let model: Awaited<ReturnType<typeof exportChatModel>>;
let engine: Engine;
let restores = 0;
const pools: Slots[] = [];

beforeAll(async () => {
  model = await exportChatModel();
  const e = await chatEngine(model.path);
  engine = { ...e, restore: (b, w) => (restores++, e.restore!(b, w)) };
}, 60_000);
afterAll(() => {
  for (const p of pools) p.close();
  model?.cleanup();
});

/** A five-turn conversation on `app`: each request resends the whole history, as the page does. */
async function converse(app: ReturnType<typeof createApp>, sampling: Record<string, unknown>) {
  const messages: ChatMessage[] = [];
  const replies: string[] = [];
  for (const ask of ["Hello.", "What did the jury say?", "And then?", "Why?", "Thank you."]) {
    messages.push({ role: "user", content: ask });
    const res = await app.request("/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ messages, max_tokens: 40, ...sampling }),
    });
    expect(res.status).toBe(200);
    const reply = (await res.json() as any).choices[0].message.content as string;
    replies.push(reply);
    messages.push({ role: "assistant", content: reply });
  }
  return replies;
}

for (const parallel of [1, 2]) {
  test(`${parallel} slot(s): a conversation is bit-identical with and without the cache, greedy and seeded`, async () => {
    const off = createSlots(engine, { parallel, cacheBytes: 0 });
    const on = createSlots(engine, { parallel });
    pools.push(off, on);
    // Every request carries a seed: an unseeded one gets a fresh random seed (reported), so no pair could match.
    for (
      const sampling of [{ temperature: 0 }, { temperature: 0.9, seed: 5 }, { temperature: 0.7, seed: 0 }]
    ) {
      const without = await converse(createApp({ engine, slots: off }), sampling);
      restores = 0;
      const withCache = await converse(createApp({ engine, slots: on }), sampling);
      expect(withCache).toEqual(without);
      if (parallel === 1) expect(restores).toBeGreaterThanOrEqual(4); // turns 2-5 continued a cached state
    }
    expect(on.cache!.size.entries).toBeGreaterThan(0);
    expect(off.cache).toBeUndefined();
  });
}

test("a prompt extending an earlier exchange reports the tokens it reused", async () => {
  const slots = createSlots(engine, { parallel: 1 });
  pools.push(slots);
  const ask = async (text: string) => {
    const lease = await slots.acquire(new AbortController().signal);
    try {
      const prompt = encode(text, { bos: true });
      return {
        prompt,
        r: await lease.reply(engine.start(), prompt, { maxTokens: 24, sampling: {}, stop: ["\n"] }),
      };
    } finally {
      lease.release();
    }
  };
  const first = renderChat([{ role: "user", content: "Hello." }]);
  const a = await ask(first);
  expect(a.r.cachedTokens).toBe(0);
  // The next turn as the page sends it: the whole history, the reply and its newline included.
  const next = renderChat([
    { role: "user", content: "Hello." },
    { role: "assistant", content: a.r.text },
    { role: "user", content: "And then?" },
  ]);
  const b = await ask(next);
  // The state after the reply: the prompt, the reply's tokens and the stop newline (fed back).
  expect(b.r.cachedTokens).toBe(a.prompt.length + a.r.completionTokens);
  expect(b.r.cachedTokens).toBeLessThan(b.prompt.length);
  // The same prompt again reuses all of it.
  expect((await ask(next)).r.cachedTokens).toBe(b.prompt.length);
});

// The prompt cache (serve/slots/prompt-cache.ts, used by serve/slots/slots.ts): the longest common prefix, LRU
// eviction within its byte bound, and replies bit-identical with and without it on the integer engine
// (greedy and seeded, on the server's thread and on worker slots), with the reused tokens reported.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Engine } from "../../model/engine.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { createPromptCache } from "../../serve/slots/prompt-cache.ts";
import type { ChatMessage } from "../../serve/openai/requests.ts";
import { createSlots, PRIME_PIECE, type Slots } from "../../serve/slots/slots.ts";
import { renderChat } from "../../serve/chat/transcript.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

describe("the cache itself", () => {
  const bytes = (n: number) => new Uint8Array(n);
  test("finds the entry with the longest common prefix, whether or not it begins the tokens", () => {
    const c = createPromptCache(1000);
    c.put([1, 2, 3, 4], bytes(10));
    c.put([1, 9, 9], bytes(11));
    c.put([5, 6], bytes(12));
    const hit = (t: number[]) => {
      const h = c.longest(t);
      return h && [h.length, h.holds, h.bytes.length];
    };
    expect(hit([1, 2, 3, 4, 5])).toEqual([4, 4, 10]);
    expect(hit([1, 2, 3])).toEqual([3, 4, 10]); // the entry holds more: the caller rewinds it
    expect(hit([1, 2, 7, 7])).toEqual([2, 4, 10]);
    expect(hit([1, 9, 9, 9])).toEqual([3, 3, 11]);
    expect(hit([5, 7])).toEqual([1, 2, 12]);
    expect(hit([7, 1, 2])).toBeUndefined();
    expect(hit([])).toBeUndefined();
    // A tie goes to the shortest entry, the least to restore.
    c.put([1, 2, 8], bytes(13));
    expect(hit([1, 2, 5])).toEqual([2, 3, 13]);
  });
  test("an entry that begins a new one goes: the new one serves its prompts", () => {
    const c = createPromptCache(1000);
    c.put([1, 2], bytes(10));
    c.put([1, 3], bytes(10));
    c.put([1, 2, 3], bytes(10)); // [1, 2] goes; [1, 3] stays
    expect(c.size).toEqual({ entries: 2, bytes: 20 });
    c.put([1, 2, 3], bytes(7)); // the same tokens again: replaced
    expect(c.size).toEqual({ entries: 2, bytes: 17 });
    expect(c.longest([1, 2])?.holds).toBe(3);
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
  const replies: string[] = [], cached: number[] = [];
  for (const ask of ["Hello.", "What did the jury say?", "And then?", "Why?", "Thank you."]) {
    messages.push({ role: "user", content: ask });
    const res = await app.request("/v1/chat/completions", {
      method: "POST",
      body: JSON.stringify({ messages, max_tokens: 40, ...sampling }),
    });
    expect(res.status).toBe(200);
    const body = await res.json() as any;
    const reply = body.choices[0].message.content as string;
    replies.push(reply);
    cached.push(body.usage.prompt_tokens_details.cached_tokens);
    messages.push({ role: "assistant", content: reply });
  }
  return { replies, cached };
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
      expect(withCache.replies).toEqual(without.replies);
      expect(without.cached).toEqual([0, 0, 0, 0, 0]);
      // Turns 2-5 continued an earlier state; on one slot its own, which needs no restore.
      expect(withCache.cached.slice(1).every((n) => n > 0)).toBe(true);
      if (parallel === 1) expect(restores).toBe(0);
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
  // The same prompt again reuses all of it but its last token, read again for the next-token
  // distribution the state after the reply no longer has there.
  expect((await ask(next)).r.cachedTokens).toBe(b.prompt.length - 1);
  // A prompt that leaves the conversation part way reuses the part it shares.
  const other = renderChat([{ role: "user", content: "Hello." }, { role: "assistant", content: "No." }]);
  const shared = [...encode(other, { bos: true })].findIndex((t, i) => t !== a.prompt[i]);
  expect((await ask(other)).r.cachedTokens).toBe(shared);
});

describe("reading the next turn ahead (Lease.prime)", () => {
  const hello = renderChat([{ role: "user", content: "Hello." }]);
  /** A reply on `slots`, then `prime(ahead(reply))` before the slot is given back. */
  const turn = async (slots: Slots, prompt: number[], ahead?: (ids: number[]) => number[]) => {
    const lease = await slots.acquire(new AbortController().signal);
    try {
      const r = await lease.reply(undefined, prompt, { maxTokens: 24, sampling: {}, stop: ["\n"], seed: 3 });
      if (ahead) lease.prime(ahead(r.ids));
      return r;
    } finally {
      lease.release();
    }
  };
  const first = encode(hello, { bos: true });

  for (const parallel of [1, 2]) {
    test(`${parallel} slot(s): an idle slot reads the next turn ahead; the next prompt reads only its end`, async () => {
      const slots = createSlots(engine, { parallel });
      const plain = createSlots(engine, { parallel: 1, cacheBytes: 0 });
      pools.push(slots, plain);
      let ahead: number[] = [];
      const a = await turn(slots, first, (ids) => {
        const text = renderChat([{ role: "user", content: "Hello." }, {
          role: "assistant",
          content: new TextDecoder().decode(new Uint8Array(ids.filter((t) => t < 256))).trimEnd(),
        }, { role: "user", content: "And then?" }]);
        ahead = encode(text, { bos: true }).slice(0, -12); // the next prompt less its last 12 tokens
        return ahead;
      });
      expect(ahead.length).toBeGreaterThan(first.length + a.ids.length - 1);
      await slots.idle();
      expect(slots.cache!.longest(ahead)?.holds).toBe(ahead.length);
      const next = [...ahead, ...encode(" And then?\nAssistant:", { bos: false })];
      const b = await turn(slots, next);
      expect(b.cachedTokens).toBe(ahead.length);
      await turn(plain, first);
      expect((await turn(plain, next)).text).toBe(b.text); // bit-identical to a fresh prefill
    });
  }

  test("a request that needs the slot stops the prime within a piece and keeps what it read", async () => {
    const fed: number[] = [];
    const counting: Engine = {
      ...engine,
      start: () => {
        const s = engine.start();
        const feed = s.feed.bind(s);
        s.feed = (tokens, wanted) => (fed.push(tokens.length), feed(tokens, wanted));
        return s;
      },
    };
    const slots = createSlots(counting, { parallel: 1 });
    pools.push(slots);
    const filler = encode(" the jury said it did find that many of the registration practices".repeat(3));
    let held = 0;
    const a = await turn(slots, first, (ids) => {
      fed.length = 0; // from here on, only the prime feeds
      held = first.length + ids.length;
      return [...first, ...ids, ...filler];
    });
    for (let i = 0; i < 500 && fed.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 1));
    const before = fed.length;
    expect(before).toBeGreaterThan(0); // it has begun
    const lease = await slots.acquire(new AbortController().signal); // the slot was priming: it stops
    try {
      const read = fed.reduce((x, y) => x + y, 0);
      expect(fed.every((n) => n === PRIME_PIECE)).toBe(true);
      expect(fed.length - before).toBeLessThanOrEqual(1); // the piece under way when asked, no more
      expect(read).toBeLessThan(filler.length);
      // What it read is the slot's: a prompt continuing it reuses the reply and the part read.
      const r = await lease.reply(undefined, [...first, ...a.ids, ...filler], { maxTokens: 2, sampling: {} });
      expect(r.cachedTokens).toBe(held + read);
    } finally {
      lease.release();
    }
  });
});

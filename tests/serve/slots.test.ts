// Parallel slots (serve/slots/slots.ts): replies in workers give the same tokens as the server's own thread,
// run at once, stop when their client leaves, fail cleanly with 500 when their worker dies (which is
// replaced), and continue stored sessions on any slot. The Deno half runs two worker slots under deno.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import type { Engine } from "../../model/engine.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { ApiError } from "../../serve/errors.ts";
import { createSessionStore, type SessionStore } from "../../serve/sessions/session-store.ts";
import { createSlots, type Slots } from "../../serve/slots/slots.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

let model: Awaited<ReturnType<typeof exportChatModel>>;
let engine: Engine;
let store: SessionStore;
let one: ReturnType<typeof createApp>, two: ReturnType<typeof createApp>;
let pool: Slots;

beforeAll(async () => {
  model = await exportChatModel();
  engine = await chatEngine(model.path);
  store = await createSessionStore(join(model.dir, "sessions"));
  one = createApp({ engine, sessions: store });
  pool = createSlots(engine, { parallel: 2, queueLimit: 4 });
  two = createApp({ engine, sessions: store, slots: pool });
}, 60_000);
afterAll(() => {
  pool?.close();
  model?.cleanup();
});

const complete = async (app: ReturnType<typeof createApp>, body: Record<string, unknown>) => {
  const res = await app.request("/v1/completions", { method: "POST", body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  return await res.json() as any;
};

const SEEDED = { prompt: "The jury said", max_tokens: 48, temperature: 0.9, top_p: 0.95, seed: 11 };

test("a seeded request gives the same tokens on either worker slot as on the server's own thread", async () => {
  const want = (await complete(one, SEEDED)).choices[0].text;
  expect(want.length).toBeGreaterThan(0);
  // Four at once on two slots: every slot answers, each the same.
  const got = await Promise.all([1, 2, 3, 4].map(() => complete(two, SEEDED)));
  expect(got.map((r) => r.choices[0].text)).toEqual([want, want, want, want]);
  const greedy = { prompt: "It was", max_tokens: 32, temperature: 0 };
  expect((await complete(two, greedy)).choices[0].text).toBe((await complete(one, greedy)).choices[0].text);
});

test("two replies run at once on two slots, and the pool reports them", async () => {
  const signal = new AbortController().signal;
  const a = await pool.acquire(signal), b = await pool.acquire(signal);
  expect(pool.load()).toEqual({ active: 2, waiting: 0 });
  const prompt = encode("The jury said", { bos: true });
  const opts = { maxTokens: 200, sampling: {}, stop: [] };
  let overlap = false;
  const bDone = b.reply(engine.start(), prompt, opts);
  const aDone = a.reply(engine.start(), prompt, opts, () => {
    if (pool.load().active === 2) overlap = true;
  });
  const [ra, rb] = await Promise.all([aDone, bDone]);
  a.release(), b.release();
  expect(overlap).toBe(true);
  expect(ra.text).toBe(rb.text);
  expect(pool.load()).toEqual({ active: 0, waiting: 0 });
});

test("past the slots, requests wait in the bounded line; past the line, 429 with Retry-After", async () => {
  const small = createSlots(engine, { parallel: 2, queueLimit: 1 });
  try {
    const signal = new AbortController().signal;
    const a = await small.acquire(signal), b = await small.acquire(signal);
    let third = false;
    const c = small.acquire(signal).then((l) => ((third = true), l));
    const err = await small.acquire(signal).then(() => undefined, (e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(429);
    expect(Number((err as ApiError).headers["Retry-After"])).toBeGreaterThanOrEqual(1);
    expect(small.load()).toEqual({ active: 2, waiting: 1 });
    await Promise.resolve();
    expect(third).toBe(false);
    a.release();
    const lc = await c;
    expect(lc.slot).toBe(a.slot); // the freed slot passes straight on
    b.release(), lc.release();
    expect(small.load()).toEqual({ active: 0, waiting: 0 });
  } finally {
    small.close();
  }
});

test("an abort reaches the worker and stops its generation", async () => {
  const ac = new AbortController();
  const lease = await pool.acquire(new AbortController().signal);
  let pieces = 0;
  const r = await lease.reply(engine.start(), encode("The jury said", { bos: true }), {
    maxTokens: 400,
    sampling: {},
    stop: [],
    signal: ac.signal,
  }, () => {
    if (++pieces === 1) ac.abort();
  });
  lease.release();
  expect(r.finishReason).toBe("abort");
  // Of 400: the first text goes out after ~2 ms of tokens (the worker's batch), and the worker sees the
  // abort at its next turn, within ~4 ms of work (serve/slots/generation.ts): about 30-40 tokens here on
  // an idle machine, and 110 in one CI run on two busy cores (this small model makes a token in about
  // 0.1 ms), so the bound is half of what was asked.
  expect(r.completionTokens).toBeLessThan(200);
});

test("a worker that dies fails its request with 500 and is replaced", async () => {
  const lease = await pool.acquire(new AbortController().signal);
  const reply = lease.reply(engine.start(), encode("The jury said", { bos: true }), {
    maxTokens: 400,
    sampling: {},
    stop: [],
  });
  pool.crash(lease.slot);
  const err = await reply.then(() => undefined, (e) => e);
  lease.release();
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).status).toBe(500);
  // The replacements serve, with the same tokens as before.
  const got = await Promise.all([1, 2].map(() => complete(two, SEEDED)));
  const want = (await complete(one, SEEDED)).choices[0].text;
  expect(got.map((r) => r.choices[0].text)).toEqual([want, want]);
});

test("a session saved on one slot continues on any other, exactly as on the server's thread", async () => {
  const saved = await complete(two, { ...SEEDED, save_session: true });
  expect(typeof saved.session).toBe("string");
  const next = { prompt: " and then", max_tokens: 24, temperature: 0.9, session: saved.session };
  const want = (await complete(one, next)).choices[0].text;
  const got = await Promise.all([1, 2].map(() => complete(two, next)));
  expect(got.map((r) => r.choices[0].text)).toEqual([want, want]);
});

crossProcessTest(
  "under Deno, two worker slots answer as one thread does, and a dead worker is a 500 and replaced",
  async () => {
    const script = `
    import { createApp } from "./serve/app.ts";
    import { createSlots } from "./serve/slots/slots.ts";
    import { loadEngine } from "./engines/mod.ts";
    import process from "node:process";
    const engine = await loadEngine(process.env.FERRY_CHAT_MODEL);
    const slots = createSlots(engine, { parallel: 2 });
    const app = createApp({ engine, slots });
    const body = JSON.stringify(${JSON.stringify(SEEDED)});
    const ask = async () => (await (await app.request("/v1/completions", { method: "POST", body })).json()).choices[0].text;
    const texts = await Promise.all([ask(), ask()]);
    const lease = await slots.acquire(new AbortController().signal);
    const dying = lease.reply(engine.start(), [256, 84, 104, 101], { maxTokens: 400, sampling: {}, stop: [] });
    slots.crash(lease.slot);
    const status = await dying.then(() => 200, (e) => e.status);
    lease.release();
    console.log(JSON.stringify([...texts, status, await ask()]));
    slots.close();
  `;
    const deno = spawnSync("deno", ["eval", "--ext=ts", script], {
      encoding: "utf8",
      env: { ...process.env, FERRY_CHAT_MODEL: model.path },
    });
    expect(withoutDenoDownloads(deno.stderr)).toBe("");
    expect(deno.status).toBe(0);
    const want = (await complete(one, SEEDED)).choices[0].text;
    expect(JSON.parse(deno.stdout)).toEqual([want, want, 500, want]);
  },
);

// serve/slots/slots.ts `startSlots`, as the chat server starts its model: every slot is a worker that loads the
// model itself, and the server's thread holds only what the routes need (serve/slots/slot-model.ts). The same
// tokens as the engine in memory, stored sessions checked on the thread and continued on a slot, a corrupt
// file refused as a FormatError naming it, and the same under Deno.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import type { Engine } from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import { loadEngine, servedTokenizer } from "../../engines/mod.ts";
import { floatEngineMemory } from "../../engines/float.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { createApp } from "../../serve/app.ts";
import { createSessionStore, type SessionStore } from "../../serve/sessions/session-store.ts";
import { type Slots, startSlots } from "../../serve/slots/slots.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

let model: Awaited<ReturnType<typeof exportChatModel>>;
let engine: Engine;
let store: SessionStore;
let here: ReturnType<typeof createApp>, slotted: ReturnType<typeof createApp>;
let started: { engine: Engine; slots: Slots };

beforeAll(async () => {
  model = await exportChatModel();
  engine = await chatEngine(model.path);
  store = await createSessionStore(join(model.dir, "sessions"));
  here = createApp({ engine, sessions: store });
  const { tokenizer } = await servedTokenizer(model.path);
  started = await startSlots(model.path, tokenizer, { parallel: 1 });
  slotted = createApp({ engine: started.engine, sessions: store, slots: started.slots });
}, 60_000);
afterAll(() => {
  started?.slots.close();
  model?.cleanup();
});

const post = async (app: ReturnType<typeof createApp>, path: string, body: Record<string, unknown>) => {
  const res = await app.request(path, { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, json: await res.json() as any };
};

/** The same checkpoint as a bf16 dmexp, which the float engine serves (exported once, when first asked for). */
let floatFile: Promise<string> | undefined;
const floatExport = () =>
  floatFile ??= exportCheckpoint({ format: "dmexp", output: join(model.dir, "ferry.bf16.dmexp") }).then((r) =>
    r.file
  );

const SEEDED = { prompt: "The jury said", max_tokens: 40, temperature: 0.9, top_p: 0.95, seed: 7 };

test("the server's thread knows the model without loading it: kind, config, context, tokenizer", () => {
  const e = started.engine;
  expect([e.kind, e.source, e.context]).toEqual([engine.kind, engine.source, engine.context]);
  expect(e.config).toEqual(engine.config);
  expect(e.tokenizer.encode("jury")).toEqual(engine.tokenizer.encode("jury"));
  expect(() => e.start()).toThrow(/slot/); // nothing runs on it
});

test("a worker slot gives the in-memory engine's tokens, greedy and seeded", async () => {
  for (const body of [SEEDED, { prompt: "It was", max_tokens: 32, temperature: 0 }]) {
    const want = (await post(here, "/v1/completions", body)).json.choices[0].text;
    expect(want.length).toBeGreaterThan(0);
    expect((await post(slotted, "/v1/completions", body)).json.choices[0].text).toBe(want);
  }
});

test("a stored session is checked on the server's thread and continued on a slot, as in memory", async () => {
  const first = await post(slotted, "/v1/completions", { ...SEEDED, save_session: true });
  const id = first.json.session;
  expect(typeof id).toBe("string");
  const next = { prompt: " and then", max_tokens: 24, temperature: 0.9, seed: 3, session: id };
  const want = (await post(here, "/v1/completions", next)).json.choices[0].text;
  expect((await post(slotted, "/v1/completions", next)).json.choices[0].text).toBe(want);
  // An altered session is refused on the thread, before any slot sees it.
  const bytes = new Uint8Array(await (await slotted.request(`/v1/sessions/${id}`)).arrayBuffer());
  bytes[bytes.length - 9] ^= 1;
  const res = await slotted.request("/v1/sessions", { method: "POST", body: bytes });
  expect(res.status).toBe(400);
  expect(((await res.json()) as any).error.message).toMatch(/crc32|checksum/);
});

test("two slots on one copy of the weights answer as the engine in memory, also after the first worker died", async () => {
  const { tokenizer } = await servedTokenizer(model.path);
  const two = await startSlots(model.path, tokenizer, { parallel: 2 });
  try {
    const app = createApp({ engine: two.engine, slots: two.slots });
    const want = (await post(here, "/v1/completions", SEEDED)).json.choices[0].text;
    const texts = async () =>
      (await Promise.all([1, 2, 3, 4].map(() => post(app, "/v1/completions", SEEDED)))).map((r) =>
        r.json.choices[0].text
      );
    expect(await texts()).toEqual([want, want, want, want]);
    // The worker that laid the weights out dies: its replacement attaches to the memory the other uses.
    const lease = await two.slots.acquire(new AbortController().signal);
    expect(lease.slot).toBe(1); // the free list hands out the last slot first; take both to reach slot 0
    const lease0 = await two.slots.acquire(new AbortController().signal);
    expect(lease0.slot).toBe(0);
    const dying = lease0.reply(undefined, [256, 84, 104, 101], { maxTokens: 400, sampling: {}, stop: [] });
    two.slots.crash(0);
    expect(await dying.then(() => 200, (e) => e.status)).toBe(500);
    lease0.release(), lease.release();
    expect(await texts()).toEqual([want, want, want, want]);
  } finally {
    two.slots.close();
  }
});

test("float slots share one copy of the packed weights and answer as the engine in memory, also after the first worker died", async () => {
  const file = await floatExport();
  const inMemory = createApp({ engine: await loadEngine(file), sessions: store });
  const { tokenizer } = await servedTokenizer(file);
  const two = await startSlots(file, tokenizer, { parallel: 2 });
  try {
    expect(two.engine.kind).toBe("float");
    expect(two.slots.sharedWeights).toBe(true);
    // The one copy's bytes: the packed matrices (bf16 here) and the norm vectors, once.
    const m = floatEngineMemory(await loadEngine(file, "float", { threads: 1 }))!;
    expect(two.engine.weightBytes).toBe(m.packedBytes + m.vectorBytes);
    const app = createApp({ engine: two.engine, sessions: store, slots: two.slots });
    const greedy = { prompt: "It was", max_tokens: 24, temperature: 0 };
    const texts = async () =>
      (await Promise.all([SEEDED, greedy, SEEDED, greedy].map((b) => post(app, "/v1/completions", b)))).map((
        r,
      ) => r.json.choices[0].text);
    const want = [SEEDED, greedy, SEEDED, greedy].map(async (b) =>
      (await post(inMemory, "/v1/completions", b)).json.choices[0].text
    );
    const wanted = await Promise.all(want);
    expect(wanted[0].length).toBeGreaterThan(0);
    expect(await texts()).toEqual(wanted);
    // The worker that packed the weights dies: its replacement attaches to the memory the other uses.
    // Both slots taken (which is handed out first depends on the order the replies above ended).
    const leases = [
      await two.slots.acquire(new AbortController().signal),
      await two.slots.acquire(new AbortController().signal),
    ].sort((a, b) => a.slot - b.slot);
    const dying = leases[0].reply(undefined, [256, 84, 104, 101], { maxTokens: 400, sampling: {}, stop: [] });
    two.slots.crash(0);
    expect(await dying.then(() => 200, (e) => e.status)).toBe(500);
    leases.forEach((l) => l.release());
    expect(await texts()).toEqual(wanted);
    // A session saved on a slot continues on both slots at once as it does in memory.
    const saved = await post(app, "/v1/completions", { ...SEEDED, save_session: true });
    const next = {
      prompt: " and then",
      max_tokens: 16,
      temperature: 0.9,
      seed: 3,
      session: saved.json.session,
    };
    const mine = (await post(inMemory, "/v1/completions", next)).json.choices[0].text;
    const onBoth = await Promise.all([
      post(app, "/v1/completions", next),
      post(app, "/v1/completions", next),
    ]);
    expect(onBoth.map((r) => r.json.choices[0].text)).toEqual([mine, mine]);
  } finally {
    two.slots.close();
  }
});

test("a corrupt file is refused as a FormatError naming it", async () => {
  const bad = join(model.dir, "corrupt.lut4");
  const bytes = readFileSync(model.path);
  bytes[bytes.length - 100] ^= 0xff;
  writeFileSync(bad, bytes);
  const { tokenizer } = await servedTokenizer(model.path);
  const e = await startSlots(bad, tokenizer, { parallel: 2 }).catch((e) => e);
  expect(e).toBeInstanceOf(FormatError);
  expect(e.path).toBe(bad);
  expect(e.message).toContain(bad);
});

test("the first slot loads while the tokenizer is still being built, and answers as the engine in memory", async () => {
  // The tokenizer arrives only after a while: the first worker's load has begun without it.
  const { tokenizer } = await servedTokenizer(model.path);
  const late = new Promise<typeof tokenizer>((resolve) => setTimeout(() => resolve(tokenizer), 200));
  const two = await startSlots(model.path, late, { parallel: 2 });
  try {
    expect(two.engine.tokenizer).toBe(tokenizer);
    const app = createApp({ engine: two.engine, sessions: store, slots: two.slots });
    const want = (await post(here, "/v1/completions", SEEDED)).json.choices[0].text;
    const got = await Promise.all([
      post(app, "/v1/completions", SEEDED),
      post(app, "/v1/completions", SEEDED),
    ]);
    expect(got.map((r) => r.json.choices[0].text)).toEqual([want, want]);
  } finally {
    two.slots.close();
  }
});

test("a tokenizer that fails while the first slot loads fails the start with its own error", async () => {
  const refused = new FormatError(model.path, "InvalidTokenizer", "tokenizer.json", `${model.path}: broken`);
  const e = await startSlots(model.path, Promise.reject(refused), { parallel: 2 }).catch((e) => e);
  expect(e).toBe(refused);
});

test("a table promised to a load that resolves to nothing stands for the byte tokenizer", async () => {
  const e = await loadEngine(model.path, "int", { tokens: Promise.resolve(undefined), threads: 1 });
  expect(e.tokenizer.kind).toBe("byte");
  expect(e.tokenizer.encode("jury")).toEqual(engine.tokenizer.encode("jury"));
  e.dispose?.();
});

crossProcessTest(
  "under Deno, a worker slot started by startSlots answers as the engine in memory",
  async () => {
    const script = `
    import { createApp } from "./serve/app.ts";
    import { startSlots } from "./serve/slots/slots.ts";
    import { servedTokenizer } from "./engines/mod.ts";
    import process from "node:process";
    const path = process.env.FERRY_CHAT_MODEL;
    const { engine, slots } = await startSlots(path, (await servedTokenizer(path)).tokenizer, { parallel: 1 });
    const app = createApp({ engine, slots });
    const body = JSON.stringify(${JSON.stringify(SEEDED)});
    const r = await (await app.request("/v1/completions", { method: "POST", body })).json();
    console.log(JSON.stringify(r.choices[0].text));
    slots.close();
  `;
    const deno = spawnSync("deno", ["eval", "--ext=ts", script], {
      encoding: "utf8",
      env: { ...process.env, FERRY_CHAT_MODEL: model.path },
    });
    expect(withoutDenoDownloads(deno.stderr)).toBe("");
    expect(deno.status).toBe(0);
    expect(JSON.parse(deno.stdout)).toBe((await post(here, "/v1/completions", SEEDED)).json.choices[0].text);
  },
);

crossProcessTest(
  "under Deno, two float slots on one copy of the weights answer at once as the engine in memory",
  async () => {
    const file = await floatExport();
    const script = `
    import { createApp } from "./serve/app.ts";
    import { startSlots } from "./serve/slots/slots.ts";
    import { servedTokenizer } from "./engines/mod.ts";
    import process from "node:process";
    const path = process.env.FERRY_CHAT_MODEL;
    const { engine, slots } = await startSlots(path, (await servedTokenizer(path)).tokenizer, { parallel: 2 });
    const app = createApp({ engine, slots });
    const body = JSON.stringify(${JSON.stringify(SEEDED)});
    const ask = async () => (await (await app.request("/v1/completions", { method: "POST", body })).json()).choices[0].text;
    console.log(JSON.stringify({ shared: slots.sharedWeights, texts: await Promise.all([ask(), ask()]) }));
    slots.close();
  `;
    const deno = spawnSync("deno", ["eval", "--ext=ts", script], {
      encoding: "utf8",
      env: { ...process.env, FERRY_CHAT_MODEL: file },
    });
    expect(withoutDenoDownloads(deno.stderr)).toBe("");
    expect(deno.status).toBe(0);
    const want = (await post(createApp({ engine: await loadEngine(file) }), "/v1/completions", SEEDED)).json
      .choices[0].text;
    expect(JSON.parse(deno.stdout)).toEqual({ shared: true, texts: [want, want] });
  },
);

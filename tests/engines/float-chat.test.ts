// The chat server on the float engine (the issue: the page always sends save_session, and the float
// engine answered 501 sessions_unavailable): a saved session continues with the exact tokens of an
// uninterrupted run, a chat's next turn continues from its session, and a session survives download
// and upload. The server's own session tests run on the integer engine (tests/serve/chat-api.test.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import { loadEngine } from "../../engines/mod.ts";
import { createApp } from "../../serve/app.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";

const dir = mkdtempSync(join(tmpdir(), "ferry-float-chat-"));
let app: ReturnType<typeof createApp>;
beforeAll(async () => {
  const { file } = await exportCheckpoint({ format: "dmexp", output: join(dir, "ferry.bf16.dmexp") });
  const engine = await loadEngine(file);
  expect(engine.kind).toBe("float");
  app = createApp({ engine, sessions: await createSessionStore(join(dir, "sessions")), queueLimit: 1 });
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const post = async (path: string, body: unknown) => {
  const res = await app.request(path, { method: "POST", body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() as any };
};

test("float engine: a saved session continues with the exact tokens of an uninterrupted run", async () => {
  const sampling = { temperature: 0.9, top_k: 50 };
  const whole = await post("/v1/completions", {
    prompt: "The jury said",
    ...sampling,
    seed: 11,
    max_tokens: 40,
  });
  const first = await post("/v1/completions", {
    prompt: "The jury said",
    ...sampling,
    seed: 11,
    max_tokens: 20,
    save_session: true,
  });
  expect(first.status).toBe(200);
  expect(first.body.session).toMatch(/^[0-9a-f]{32}$/);
  const rest = await post("/v1/completions", {
    prompt: "",
    ...sampling,
    max_tokens: 20,
    session: first.body.session,
  });
  expect(rest.status).toBe(200);
  expect(first.body.choices[0].text + rest.body.choices[0].text).toBe(whole.body.choices[0].text);
  // Downloaded and uploaded, it continues the same way.
  const bytes = new Uint8Array(await (await app.request(`/v1/sessions/${first.body.session}`)).arrayBuffer());
  const up = await app.request("/v1/sessions", { method: "POST", body: bytes });
  expect(up.status).toBe(201);
  const again = await post("/v1/completions", {
    prompt: "",
    ...sampling,
    max_tokens: 20,
    session: ((await up.json()) as any).id,
  });
  expect(again.body.choices[0].text).toBe(rest.body.choices[0].text);
});

test("float engine: a chat's next turn continues from its session with the same reply as a fresh one", async () => {
  const turn1 = [{ role: "user", content: "Hello." }];
  const a = await post("/v1/chat/completions", {
    messages: turn1,
    max_tokens: 30,
    temperature: 0,
    save_session: true,
  });
  expect(a.status).toBe(200);
  const turn2 = [...turn1, a.body.choices[0].message, { role: "user", content: "And then?" }];
  const fresh = await post("/v1/chat/completions", { messages: turn2, max_tokens: 30, temperature: 0 });
  const cont = await post("/v1/chat/completions", {
    messages: turn2,
    max_tokens: 30,
    temperature: 0,
    session: a.body.session,
  });
  expect(cont.status).toBe(200);
  expect(cont.body.choices[0].message.content).toBe(fresh.body.choices[0].message.content);
  expect(cont.body.usage.prompt_tokens).toBeLessThan(fresh.body.usage.prompt_tokens);
});

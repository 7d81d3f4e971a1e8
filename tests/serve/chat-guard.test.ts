// The chat server's defenses: a foreign Host (DNS rebinding) and a foreign Origin (a page on another
// site, including the preflight-free text/plain POST) are refused with 403 before anything runs; CORS
// for origins allowed with `cors`; the API key; the header limit; HEAD, the icon and refused `tools`.
// Host checks run on a real socket (raw HTTP, so the Host header is exactly what is sent).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import type { Engine } from "../../model/engine.ts";
import { createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

let engine: Engine, cleanup = () => {};
let server: Listening, port: number;
let feeds = 0;
/** Milliseconds of busy CPU work per feed, to make a reply long without more tokens. */
let busyMs = 0;

beforeAll(async () => {
  const exported = await exportChatModel();
  cleanup = exported.cleanup;
  const e = await chatEngine(exported.path);
  engine = {
    ...e,
    kind: e.kind,
    config: e.config,
    source: e.source,
    start() {
      const s = e.start();
      const feed = s.feed.bind(s);
      s.feed = (t, w) => {
        feeds++;
        for (const t0 = performance.now(); performance.now() - t0 < busyMs;);
        return feed(t, w);
      };
      return s;
    },
  };
  // The address is known only after listening, so the app is made then (as scripts/chat.ts does).
  const served: { app?: ReturnType<typeof createApp> } = {};
  server = await listen((r) => served.app!.fetch(r), { hostname: "127.0.0.1", port: 0 });
  port = Number(new URL(server.url).port);
  served.app = createApp({ engine, address: { hostname: "127.0.0.1", port }, allowHosts: ["chat.lan"] });
}, 60_000);
afterAll(async () => {
  await server?.close();
  cleanup();
});

/** One raw HTTP/1.1 request; resolves with the status and the whole response text. */
function raw(request: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => socket.write(request));
    let text = "";
    socket.setTimeout(20_000, () => socket.destroy(new Error("no answer in 20 s")));
    socket.on("data", (d) => (text += d));
    socket.on("end", () => resolve({ status: Number(text.split(" ")[1]), text }));
    socket.on("error", reject);
  });
}
const get = (path: string, host: string) =>
  raw(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);

describe("Host", () => {
  test("the server's own address, its loopback names and --allow-host names are served", async () => {
    for (
      const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        `[::1]:${port}`,
        "chat.lan",
        `CHAT.lan:${port}`,
      ]
    ) {
      expect({ host, status: (await get("/health", host)).status }).toEqual({ host, status: 200 });
    }
  });

  test("a foreign Host is 403 naming the header, before a generation runs", async () => {
    for (const host of ["evil.example", `evil.example:${port}`, "localhost:1", `127.0.0.1:${port + 1}`]) {
      const r = await get("/v1/models", host);
      expect({ host, status: r.status }).toEqual({ host, status: 403 });
      expect(r.text).toContain("Host header");
    }
    const before = feeds;
    const body = JSON.stringify({ prompt: "The jury said", max_tokens: 4 });
    const r = await raw(
      `POST /v1/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect(r.status).toBe(403);
    expect(feeds).toBe(before);
  });
});

describe("Origin and CORS", () => {
  const base = () => `http://127.0.0.1:${port}`;

  test("a text/plain POST from a foreign Origin is 403 and runs nothing; the server's own origin is served", async () => {
    const before = feeds;
    const body = JSON.stringify({ prompt: "The jury said", max_tokens: 4, temperature: 0 });
    const evil = await fetch(`${base()}/v1/completions`, {
      method: "POST",
      headers: { "Content-Type": "text/plain", Origin: "http://evil.example" },
      body,
    });
    expect(evil.status).toBe(403);
    expect((await evil.json() as any).error.message).toContain("Origin header");
    expect(evil.headers.get("access-control-allow-origin")).toBeNull();
    expect(feeds).toBe(before);
    const own = await fetch(`${base()}/v1/completions`, {
      method: "POST",
      headers: { "Content-Type": "text/plain", Origin: base() },
      body,
    });
    expect(own.status).toBe(200);
    expect(feeds).toBeGreaterThan(before);
  });

  test("without --cors a foreign preflight is 403; with it, 204 with the CORS headers, and ACAO on answers", async () => {
    const preflight = (app: ReturnType<typeof createApp>, origin: string) =>
      app.request("/v1/chat/completions", {
        method: "OPTIONS",
        headers: {
          Origin: origin,
          "Access-Control-Request-Method": "POST",
          "Access-Control-Request-Headers": "authorization, content-type",
        },
      });
    const closed = createApp({ engine });
    expect((await preflight(closed, "http://evil.example")).status).toBe(403);

    const open = createApp({ engine, cors: ["http://localhost:5173"], apiKey: "k" });
    const ok = await preflight(open, "http://localhost:5173");
    expect(ok.status).toBe(204);
    expect(ok.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    expect(ok.headers.get("access-control-allow-methods")).toContain("POST");
    expect(ok.headers.get("access-control-allow-headers")!.toLowerCase()).toContain("authorization");
    expect(ok.headers.get("access-control-allow-headers")!.toLowerCase()).toContain("content-type");
    expect(Number(ok.headers.get("access-control-max-age"))).toBeGreaterThan(0);
    expect((await preflight(open, "http://evil.example")).status).toBe(403);

    const models = await open.request("/v1/models", {
      headers: { Origin: "http://localhost:5173", Authorization: "Bearer k" },
    });
    expect(models.status).toBe(200);
    expect(models.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");

    const any = createApp({ engine, cors: ["*"] });
    expect((await preflight(any, "http://anywhere.example")).headers.get("access-control-allow-origin")).toBe(
      "*",
    );
  });
});

describe("API key", () => {
  const app = () => createApp({ engine, apiKey: "s3cret" });

  test("every API route needs Bearer KEY (401 without or wrong); /health, the icon, the page and the tab's modules stay open", async () => {
    const a = app();
    for (const path of ["/v1/models", "/metrics"]) {
      const res = await a.request(path);
      expect({ path, status: res.status }).toEqual({ path, status: 401 });
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect((await a.request(path, { headers: { Authorization: "Bearer wrong" } })).status).toBe(401);
      expect((await a.request(path, { headers: { Authorization: "Bearer s3cret" } })).status).toBe(200);
    }
    const post = (path: string, auth?: string) =>
      a.request(path, {
        method: "POST",
        headers: auth ? { Authorization: auth } : {},
        body: JSON.stringify({ content: "Hi", tokens: [72], messages: [{ role: "user", content: "Hi" }] }),
      });
    for (const path of ["/tokenize", "/detokenize", "/apply-template", "/v1/completions"]) {
      expect({ path, status: (await post(path)).status }).toEqual({ path, status: 401 });
    }
    expect((await post("/tokenize", "Bearer s3cret")).status).toBe(200);
    // The tab's worker and its imports come from /src/: a module Worker's fetches carry no header.
    for (const path of ["/health", "/favicon.ico", "/", "/page/chat.js", "/src/serve/page/worker.js"]) {
      expect({ path, ok: (await a.request(path)).ok }).toEqual({ path, ok: true });
    }
  });
});

describe("small defects", () => {
  test("headers over 16 KiB are 431 with a JSON error body", async () => {
    const app = createApp({ engine });
    const res = await app.request("/v1/models", { headers: { "X-Big": "a".repeat(17 * 1024) } });
    expect(res.status).toBe(431);
    expect((await res.json() as any).error.message).toContain("headers");
    expect((await app.request("/v1/models", { headers: { "X-Big": "a".repeat(8 * 1024) } })).status).toBe(
      200,
    );
  });

  test("HEAD / over a socket says the length GET sends, without a body; /favicon.ico is 204", async () => {
    const got = await get("/", `127.0.0.1:${port}`);
    const length = Number(/content-length: (\d+)/i.exec(got.text)![1]);
    expect(length).toBeGreaterThan(100);
    const head = await raw(`HEAD / HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`);
    expect(head.status).toBe(200);
    expect(Number(/content-length: (\d+)/i.exec(head.text)![1])).toBe(length);
    expect(head.text.endsWith("\r\n\r\n")).toBe(true);
    expect((await get("/favicon.ico", `127.0.0.1:${port}`)).status).toBe(204);
  });

  test("tools, tool_choice and functions are refused with 400 saying they are not supported", async () => {
    const app = createApp({ engine });
    const messages = [{ role: "user", content: "Hi" }];
    for (
      const extra of [
        { tools: [{ type: "function", function: { name: "f" } }] },
        { tool_choice: "auto" },
        { functions: [{ name: "f" }] },
      ]
    ) {
      const res = await app.request("/v1/chat/completions", {
        method: "POST",
        body: JSON.stringify({ messages, max_tokens: 2, ...extra }),
      });
      expect(res.status).toBe(400);
      const err = (await res.json() as any).error;
      expect(err.param).toBe(Object.keys(extra)[0]);
      expect(err.message).toContain("not supported");
    }
  });
});

test("while a long reply streams over a socket, another request is answered before it ends", async () => {
  busyMs = 1; // 300 tokens: at least 300 ms of work, long enough whatever the machine's load
  const base = `http://127.0.0.1:${port}`;
  const res = await fetch(`${base}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt: "The jury said", max_tokens: 300, temperature: 0, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read(); // the reply has started
  let ended = false;
  const rest = (async () => {
    while (!(await reader.read()).done);
    ended = true;
  })();
  const health = await fetch(`${base}/health`);
  expect(health.status).toBe(200);
  expect(ended).toBe(false);
  await rest;
  busyMs = 0;
});

test("a long reply reaches the client as it is generated, not all at its end", async () => {
  busyMs = 1; // 300 tokens: at least 300 ms of work
  try {
    const t0 = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ prompt: "The jury said", max_tokens: 300, temperature: 0, stream: true }),
    });
    const reader = res.body!.getReader();
    let firstText = 0;
    const decoder = new TextDecoder();
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      if (!firstText && decoder.decode(r.value).includes('"text":"')) firstText = performance.now() - t0;
    }
    const total = performance.now() - t0;
    expect(firstText).toBeGreaterThan(0);
    expect(firstText).toBeLessThan(total / 2);
  } finally {
    busyMs = 0;
  }
});

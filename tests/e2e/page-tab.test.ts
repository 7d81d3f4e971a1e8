// "Run in this tab" in real Chromium: the page switches to the integer engine in a Web Worker, loads
// the shipped model's lut4 export from the server (downloaded once, kept in IndexedDB across a reload)
// or from a file chosen in the picker (a damaged file and a non-lut4 file refused with the lut4
// reader's own message), and generates exactly the tokens the server's integer engine generates for
// the same request and seed. A session saved in the tab is byte for byte the server's, restores on the
// server and continues identically, and the reverse. The folder scripts/page.ts writes, served by a
// plain static file server, generates the same reply in tab mode.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { loadEngine } from "../../engines/mod.ts";
import { parseLut4 } from "../../formats/lut4/lut4.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { serveStatic, serveTabChat, switchToTab, tabModelSettled, type TabServer } from "../helpers/tab.ts";

let browser: Browser, server: TabServer;
const pageErrors: string[] = [];

/** The page's sampling settings in the tests, and the same request's fields for the server. */
const SETTINGS = { "max-tokens": "40", temperature: "0.8", "top-k": "40", "top-p": "0.95", "min-p": "0.05" };
const SAMPLING = { max_tokens: 40, temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 };

beforeAll(async () => {
  server = await serveTabChat();
  browser = await launchBrowser();
});

afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** A fresh page (its own IndexedDB) at `url`, failing the test on any page error. */
async function openPage(url = server.url): Promise<Page> {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(url);
  await page.waitForFunction(() =>
    /engine|no model|unreachable/.test(document.getElementById("model")!.textContent!)
  );
  return page;
}

/** Sets the sampling settings (and the seed: empty for none) in the Settings panel. */
async function settings(page: Page, seed: string) {
  if (!(await page.$eval("#settings", (d) => (d as HTMLDetailsElement).open))) {
    await page.click("#settings summary");
  }
  for (const [id, v] of Object.entries({ ...SETTINGS, seed })) await page.fill(`#${id}`, v);
  await page.dispatchEvent("#seed", "change");
}

/** Sends `text` and waits for reply number `n`; resolves to its raw text as the conversation stores it. */
async function send(page: Page, text: string, n: number): Promise<string> {
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
  await page.waitForFunction(
    (n) =>
      document.querySelectorAll("#log li.assistant").length === n &&
      !document.querySelector("#log li.streaming"),
    n,
    { timeout: 30_000 },
  );
  expect(await page.locator("#log li.assistant .error").count()).toBe(0);
  return await page.evaluate(async () => {
    const { listConversations } = await import("/page/store.js");
    const current = localStorage.getItem("ferry.current");
    const conv = (await listConversations()).find((c: { id: string }) => c.id === current);
    return conv.messages.at(-1).content;
  });
}

/** The server's reply to a chat request (its integer engine, over HTTP), and its saved session's bytes. */
async function serverReply(
  body: Record<string, unknown>,
): Promise<{ content: string; session?: Uint8Array }> {
  const res = await fetch(`${server.url}v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const r = await res.json();
  expect(res.status).toBe(200);
  if (!r.session) return { content: r.choices[0].message.content };
  const bytes = new Uint8Array(await (await fetch(`${server.url}v1/sessions/${r.session}`)).arrayBuffer());
  return { content: r.choices[0].message.content, session: bytes };
}

/** Clicks Save session and resolves to the downloaded file's bytes. */
async function saveSession(page: Page): Promise<Uint8Array> {
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#save")]);
  return new Uint8Array(readFileSync((await download.path())!));
}

/** Restores `bytes` through the Restore session picker and waits until the page says so. */
async function restoreSession(page: Page, bytes: Uint8Array) {
  await page.setInputFiles("#restore", {
    name: "chat.session",
    mimeType: "application/octet-stream",
    buffer: Buffer.from(bytes),
  });
  await page.waitForFunction(() =>
    document.getElementById("stats")!.textContent!.startsWith("session restored")
  );
}

test("the server's model runs in the tab: downloaded once, the server's tokens, kept across a reload", async () => {
  const page = await openPage();
  const before = server.downloads();
  await switchToTab(page);
  // Every text the status line shows on the way (a load says each of its steps as it starts).
  await page.evaluate(() => {
    const seen: string[] = ((globalThis as unknown as { statuses: string[] }).statuses = []);
    const status = document.getElementById("tab-status")!;
    new MutationObserver(() => seen.push(status.textContent ?? "")).observe(status, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  });
  await page.click("#tab-load-server");
  expect(await tabModelSettled(page)).toContain("ferry.lut4 (0.35 MB, SHA-256");
  expect(await page.textContent("#tab-status")).toContain("downloaded from the server");
  // The server's isolation headers: the page has shared memory, and nothing it loads was blocked.
  expect(await page.evaluate(() => crossOriginIsolated)).toBe(true);
  expect(await page.textContent("#where-note")).not.toContain("not cross-origin isolated");
  // With shared memory the download went into the worker's memory too, and the model was laid out there.
  expect(await page.evaluate(async () => (await import("/page/tab.js" as string)).loaded.inPlace)).toBe(true);
  const steps = (await page.evaluate(() => (globalThis as unknown as { statuses: string[] }).statuses))
    .map((t) => /^loading the model: (\w+)/.exec(t)?.[1]).filter((step) => step !== undefined);
  expect([...new Set(steps)]).toEqual(["checking", "building", "laying"]);
  // The model answers before its bytes are in IndexedDB: the status line says it is keeping them, then
  // that it keeps them.
  await page.waitForFunction(() =>
    document.getElementById("tab-status")!.textContent!.includes("browser keeps")
  );
  const keeps = (await page.evaluate(() => (globalThis as unknown as { statuses: string[] }).statuses))
    .map((t) => /keeping it in this browser…|this browser keeps/.exec(t)?.[0]).filter((said) =>
      said !== undefined
    );
  expect([...new Set(keeps)]).toEqual(["keeping it in this browser…", "this browser keeps"]);
  expect(await page.textContent("#model")).toBe("ferry.lut4 · int engine · context 512");
  expect(await page.inputValue("#where")).toBe("tab");
  expect(server.downloads()).toBe(before + 1);
  await settings(page, "11");
  const tab = await send(page, "Where is the jury?", 1);
  const want = await serverReply({
    messages: [{ role: "user", content: "Where is the jury?" }],
    ...SAMPLING,
    seed: 11,
  });
  expect(tab.length).toBeGreaterThan(0);
  expect(tab).toBe(want.content);
  expect(await page.textContent("#stats")).toMatch(/tok\/s · int in this tab$/);

  await page.reload();
  expect(await tabModelSettled(page)).toContain("kept in this browser");
  expect(server.downloads()).toBe(before + 1); // no second download
  expect(await page.inputValue("#where")).toBe("tab");
  await page.close();
});

test("a lut4 file from the picker (or dropped) runs in the tab; a damaged file and a non-lut4 file are refused as the reader refuses them", async () => {
  const page = await openPage();
  await switchToTab(page);
  const bytes = readFileSync(server.lut4);
  const damaged = Buffer.from(bytes);
  damaged[damaged.length - 100] ^= 0xff;
  const reader = (b: Uint8Array, name: string) => {
    try {
      parseLut4(b, name);
    } catch (e) {
      return (e as Error).message;
    }
    throw new Error("the reader accepted it");
  };
  const notLut4 = Buffer.from('{"this": "is a JSON file, not a model"}\n'.repeat(4));
  for (const [name, buffer] of [["damaged.lut4", damaged], ["notes.lut4", notLut4]] as const) {
    await page.setInputFiles("#tab-file", { name, mimeType: "application/octet-stream", buffer });
    expect(await tabModelSettled(page)).toBe(`refused: ${reader(new Uint8Array(buffer), name)}`);
  }
  await page.setInputFiles("#tab-file", {
    name: "mine.lut4",
    mimeType: "application/octet-stream",
    buffer: bytes,
  });
  expect(await tabModelSettled(page)).toContain("mine.lut4 (0.35 MB, SHA-256");
  expect(await page.textContent("#tab-status")).toContain("read from disk");
  // Dropped on the page: the same reader.
  await page.evaluate(async () => {
    const data = new DataTransfer();
    const bytes = await (await fetch("/page/model/ferry.lut4")).arrayBuffer();
    data.items.add(new File([bytes], "dropped.lut4"));
    document.dispatchEvent(new DragEvent("drop", { dataTransfer: data, cancelable: true }));
  });
  expect(await tabModelSettled(page)).toContain("dropped.lut4 (0.35 MB, SHA-256");
  await settings(page, "-3");
  const tab = await send(page, "Tell me about the weather.", 1);
  const want = await serverReply({
    messages: [{ role: "user", content: "Tell me about the weather." }],
    ...SAMPLING,
    seed: -3,
  });
  expect(tab).toBe(want.content);
  await page.close();
});

test("a session saved in the tab is the server's, byte for byte, and continues the same on either side", async () => {
  const page = await openPage();
  await switchToTab(page);
  await page.click("#tab-load-server");
  await tabModelSettled(page);
  await settings(page, "5");
  const first = await send(page, "Hello", 1);
  expect(first.length).toBeGreaterThan(0);
  const inTab = await saveSession(page);
  const onServer = await serverReply({
    messages: [{ role: "user", content: "Hello" }],
    ...SAMPLING,
    seed: 5,
    save_session: true,
  });
  expect(first).toBe(onServer.content);
  expect(inTab).toEqual(onServer.session!);

  // The tab's session restored on the server, continued without a seed (the session's own stream).
  await page.selectOption("#where", "server");
  await page.waitForFunction(() => document.body.dataset.where === "server");
  await settings(page, "");
  await restoreSession(page, inTab);
  const serverGoesOn = await send(page, "Go on", 2);
  const serverAfter = await saveSession(page);

  // The server's session restored in the tab, continued the same way.
  await page.selectOption("#where", "tab");
  await page.waitForFunction(() => document.body.dataset.where === "tab");
  await restoreSession(page, onServer.session!);
  const tabGoesOn = await send(page, "Go on", 2);
  const tabAfter = await saveSession(page);
  expect(tabGoesOn).toBe(serverGoesOn);
  expect(tabAfter).toEqual(serverAfter);
  await page.close();
});

test("the static folder of scripts/page.ts runs the model in the tab from a plain file server", async () => {
  const dir = join(scratchDir(), "site");
  const made = Bun.spawnSync(["bun", "scripts/page.ts", "--out", dir, server.lut4], {
    cwd: join(import.meta.dir, "../.."),
  });
  expect(made.stderr.toString()).toBe("");
  expect(made.exitCode).toBe(0);
  const site = await serveStatic(dir);
  try {
    const page = await openPage(site.url);
    expect(await tabModelSettled(page)).toContain("ferry.lut4 (0.35 MB, SHA-256");
    // A plain file server sends no isolation headers: the page says it runs on one thread.
    expect(await page.evaluate(() => crossOriginIsolated)).toBe(false);
    expect(await page.textContent("#where-note")).toBe(
      "a static page: the model runs in this tab only; " +
        "this page is not cross-origin isolated (its host sends no COOP/COEP headers): one thread",
    );
    expect(await page.isDisabled('#where option[value="server"]')).toBe(true);
    // Nor shared memory for the download to go into: the bytes are copied into the engine's after it.
    expect(await page.evaluate(async () => (await import("./page/tab.js" as string)).loaded.inPlace)).toBe(
      false,
    );
    await settings(page, "11");
    const tab = await send(page, "Where is the jury?", 1);
    const want = await serverReply({
      messages: [{ role: "user", content: "Where is the jury?" }],
      ...SAMPLING,
      seed: 11,
    });
    expect(tab).toBe(want.content);
    await page.close();
  } finally {
    await site.close();
  }
});

test("on a Deno server the tab is served the same modules and generates the same tokens", async () => {
  const deno = Bun.spawn(
    [
      "deno",
      "run",
      "-A",
      "scripts/chat.ts",
      server.lut4,
      "--port",
      "0",
      "--sessions",
      join(scratchDir(), "deno"),
    ],
    { cwd: join(import.meta.dir, "../.."), stdout: "pipe", stderr: "pipe" },
  );
  try {
    const reader = deno.stdout.getReader();
    let said = "";
    while (!/ferry chat: (\S+)/.test(said)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`deno chat ended: ${await new Response(deno.stderr).text()}`);
      said += new TextDecoder().decode(value);
    }
    const url = said.match(/ferry chat: (\S+)/)![1];
    const page = await openPage(url);
    await switchToTab(page);
    await page.click("#tab-load-server");
    expect(await tabModelSettled(page)).toContain("downloaded from the server");
    await settings(page, "11");
    const tab = await send(page, "Where is the jury?", 1);
    const body = { messages: [{ role: "user", content: "Where is the jury?" }], ...SAMPLING, seed: 11 };
    const onDeno = await (await fetch(`${url.replace(/\/?$/, "/")}v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    })).json();
    expect(tab.length).toBeGreaterThan(0);
    expect(tab).toBe(onDeno.choices[0].message.content);
    expect(tab).toBe((await serverReply(body)).content); // and the Bun server's
    await page.close();
  } finally {
    deno.kill();
    await deno.exited;
  }
});

test("Stop ends a reply in the tab at once, and the tab's engine answers the next request", async () => {
  const page = await openPage();
  await switchToTab(page);
  await page.click("#tab-load-server");
  await tabModelSettled(page);
  const request = {
    messages: [{ role: "user", content: "Tell me a long story about the jury" }],
    sampling: { max_tokens: 200, temperature: 1, seed: 1 },
  };
  const whole = await serverReply({ messages: request.messages, ...request.sampling });
  expect(whole.content.length).toBeGreaterThan(20); // a reply long enough to be stopped in
  const r = await page.evaluate(async (request) => {
    const tab = await import("/page/tab.js");
    const stop = new AbortController();
    let text = "";
    const reply = tab.complete(request, (piece: string) => (text += piece), stop.signal);
    stop.abort(); // as Stop does: the worker hears it between two tokens
    const stopped = await reply.then(() => "finished", (e: Error) => e.name);
    const next = await tab.complete({ ...request, sampling: { max_tokens: 8, seed: 2 } }, () => {});
    return { stopped, text, next: next.usage.completion_tokens };
  }, request);
  expect(r.stopped).toBe("AbortError");
  expect(r.text.length).toBeLessThan(whole.content.length);
  expect(whole.content.startsWith(r.text)).toBe(true);
  expect(r.next).toBeGreaterThan(0);
  await page.close();
});

test("the float engine in the tab is the server's float engine on the same file: its tokens, its session bytes", async () => {
  const float = await listen(
    createApp({
      engine: await loadEngine(server.lut4, "float"),
      sessions: await createSessionStore(join(scratchDir(), "float-sessions")),
    }).fetch,
    { hostname: "127.0.0.1", port: 0 },
  );
  try {
    const page = await openPage();
    await switchToTab(page);
    await page.click("#tab-load-server");
    await tabModelSettled(page);
    await page.selectOption("#tab-engine", "float");
    await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("float engine"));
    await settings(page, "21");
    const tab = await send(page, "Where is the jury?", 1);
    expect(await page.textContent("#stats")).toMatch(/tok\/s · float in this tab$/);
    const inTab = await saveSession(page);
    const body = {
      messages: [{ role: "user", content: "Where is the jury?" }],
      ...SAMPLING,
      seed: 21,
      save_session: true,
    };
    const res = await (await fetch(`${float.url}v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    })).json();
    const onServer = new Uint8Array(
      await (await fetch(`${float.url}v1/sessions/${res.session}`)).arrayBuffer(),
    );
    expect(tab.length).toBeGreaterThan(0);
    expect(tab).toBe(res.choices[0].message.content);
    expect(inTab).toEqual(onServer);
    await page.close();
  } finally {
    await float.close();
  }
});

// Chromium refuses an IndexedDB value over 127 MB and aborts the whole transaction: a Qwen3-0.6B-shape
// lut4 (328 MB) was loaded but never kept. The store keeps a model's bytes in 64 MB pieces.
test("a model larger than one IndexedDB value is kept in pieces and read back whole", async () => {
  const page = await openPage();
  const result = await page.evaluate(async () => {
    const store = await import("/page/tab-store.js" as string);
    const length = 200 * 1048576 + 12345; // four pieces, the last a short one
    const bytes = new Uint8Array(length);
    for (let i = 0; i < length; i += 4093) bytes[i] = (i * 2654435761) >>> 24;
    bytes[length - 1] = 7;
    await store.keepModel({ name: "big.lut4", sha256: "ab".repeat(32), from: "disk", bytes: bytes.buffer });
    const kept = await store.keptModel();
    const back = new Uint8Array(kept.bytes);
    let same = back.length === length;
    for (let i = 0; same && i < length; i += 4093) same = back[i] === bytes[i];
    const info = await store.keptInfo();
    await store.forgetModel();
    return {
      same,
      last: back[length - 1],
      pieces: info.pieces,
      length: info.length,
      after: await store.keptInfo(),
    };
  });
  expect(result).toEqual({ same: true, last: 7, pieces: 4, length: 200 * 1048576 + 12345, after: undefined });
});

// The pieces are written one transaction each, the description last: the tab's worker holds the writing
// back while a reply runs (`between`), and a keep cut short leaves nothing that looks kept.
test("a keep waits before each piece, and one cut short leaves nothing kept", async () => {
  const page = await openPage();
  const result = await page.evaluate(async () => {
    const store = await import("/page/tab-store.js" as string);
    const bytes = new Uint8Array(64 * 1048576 + 4096).fill(3).buffer; // two pieces, the second short
    let waits = 0;
    await store.keepModel({ name: "a.lut4", sha256: "cd".repeat(32), from: "disk", bytes }, () => {
      waits++;
      return Promise.resolve();
    });
    const whole = await store.keptInfo();
    // Another keep stopped before its second piece: the first model is gone, and nothing is kept.
    let cut = "";
    await store.keepModel({ name: "b.lut4", sha256: "ef".repeat(32), from: "disk", bytes }, () => {
      return ++waits === 4 ? Promise.reject(new Error("stopped")) : Promise.resolve();
    }).catch((e: Error) => cut = e.message);
    return {
      waits,
      pieces: whole.pieces,
      name: whole.name,
      cut,
      after: await store.keptInfo(),
      model: await store.keptModel(),
    };
  });
  expect(result).toEqual({
    waits: 4,
    pieces: 2,
    name: "a.lut4",
    cut: "stopped",
    after: undefined,
    model: undefined,
  });
});

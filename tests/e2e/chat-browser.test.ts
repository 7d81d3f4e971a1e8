// End to end in a real browser: headless Chromium (tests/helpers/chromium.ts), driven by playwright-core, uses the chat page served
// on loopback: a prompt streams text in, a long reply is stopped, and a session is saved (downloaded)
// and restored (uploaded) into a fresh page that continues the conversation; and a chat longer than the
// context goes on at the default settings, continuing sessions and then dropping the oldest turns.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { chatEngine, exportChatModel } from "../helpers/chat-model.ts";

let dir: string, cleanup = () => {}, server: Listening, browser: Browser;

beforeAll(async () => {
  const exported = await exportChatModel();
  (dir = exported.dir), (cleanup = exported.cleanup);
  const app = createApp({
    engine: await chatEngine(exported.path),
    sessions: await createSessionStore(join(dir, "sessions")),
  });
  server = await listen(app.fetch, { hostname: "127.0.0.1", port: 0 });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  cleanup();
});

test("the chat page streams a reply, stops one, saves and restores a session, by keyboard", async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, acceptDownloads: true });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(server.url);
  await expect(page.locator("#model")).toBeDefined();
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));

  // Short, fully greedy replies so the test does not wait on a long generation.
  await page.locator("#settings summary").press("Enter");
  await page.fill("#max-tokens", "40");
  await page.fill("#temperature", "0");
  // A fixed seed: the long reply below is then the same every run (unseeded, each reply is random).
  await page.fill("#seed", "0");

  // Keyboard only: the prompt has focus; Enter sends.
  await page.focus("#prompt");
  await page.keyboard.type("The jury said");
  await page.keyboard.press("Enter");
  const reply = page.locator("#log li.assistant .content").first();
  // Text arrives while the reply is still streaming, then the reply completes.
  await page.waitForFunction(() => {
    const li = document.querySelector("#log li.assistant");
    return li !== null && li.textContent!.length > 0;
  });
  await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
  const first = await reply.textContent();
  expect(first!.length).toBeGreaterThan(0);
  expect(await page.locator("#stats").textContent()).toMatch(/\d+ tokens · [\d.–]+ tok\/s · int/);

  // A long reply, stopped with Escape while it streams.
  await page.fill("#max-tokens", "500");
  await page.fill("#temperature", "1");
  // Seed 5 gives this reply 409 tokens when left alone (seed 0 gave 84, about 50 ms: Escape then
  // sometimes came after the end, and "stopped" was not shown).
  await page.fill("#seed", "5");
  await page.focus("#prompt");
  await page.keyboard.type("Tell me more");
  await page.keyboard.press("Enter");
  // Seen mid-stream: the reply already shows text while it is still marked as streaming.
  await page.waitForFunction(() => {
    const li = document.querySelectorAll("#log li.assistant")[1];
    return li?.classList.contains("streaming") && li.textContent!.length > 3;
  });
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
  expect(await page.locator("#stats").textContent()).toContain("stopped");
  const stopped = await page.locator("#log li.assistant .content").nth(1).textContent();
  expect(stopped!.length).toBeLessThan(500);
  // The README's picture: FERRY_SCREENSHOT=docs/chat.png bun test tests/e2e/chat-browser.test.ts
  if (process.env.FERRY_SCREENSHOT) {
    await page.locator("#settings summary").click(); // closed for the picture, open again for Save
    await page.screenshot({ path: process.env.FERRY_SCREENSHOT });
    await page.locator("#settings summary").click();
  }

  // Save: the session after the first reply downloads as a file.
  const download = page.waitForEvent("download");
  await page.locator("#save").focus();
  await page.keyboard.press("Enter");
  const file = join(dir, "chat.session");
  await (await download).saveAs(file);
  expect(readFileSync(file).length).toBeGreaterThan(0);

  // Restore it into a fresh page: the conversation up to the saved reply comes back and continues.
  const fresh = await context.newPage();
  await fresh.goto(server.url);
  await fresh.locator("#settings summary").press("Enter");
  await fresh.setInputFiles("#restore", file);
  await fresh.waitForFunction(() =>
    document.getElementById("stats")!.textContent!.startsWith("session restored")
  );
  expect(await fresh.locator("#log li.user .content").first().textContent()).toBe("The jury said");
  expect(await fresh.locator("#log li.assistant .content").first().textContent()).toBe(first);
  await fresh.fill("#max-tokens", "20");
  await fresh.focus("#prompt");
  await fresh.keyboard.type("Go on");
  await fresh.keyboard.press("Enter");
  await fresh.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant").length === 2 &&
    !document.querySelector("#log li.streaming")
  );
  expect(await fresh.locator("#stats").textContent()).not.toContain("error");
  expect(errors).toEqual([]);
  await context.close();
}, 60_000);

test(
  "six turns at the default settings: sessions carry the chat, then the oldest turns are dropped, no error",
  async () => {
    const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const sent: Record<string, unknown>[] = [];
    page.on("request", (r) => r.url().endsWith("/v1/chat/completions") && sent.push(r.postDataJSON()));
    await page.goto(server.url);
    await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
    for (let n = 1; n <= 6; n++) {
      await page.focus("#prompt");
      await page.keyboard.type(`Turn ${n}: what did the jury say?`);
      await page.keyboard.press("Enter");
      await page.waitForFunction(
        (n) =>
          document.querySelectorAll("#log li.assistant").length === n &&
          !document.querySelector("#log li.streaming"),
        n,
      );
    }
    expect(await page.locator("#log .error").count()).toBe(0);
    expect(sent[1].session).toBeString(); // the second turn continues the first one's session
    expect(await page.locator("#log .notice").count()).toBeGreaterThan(0);
    expect(await page.locator("#log .notice").first().textContent()).toMatch(
      /^The oldest \d+ turns? (was|were) dropped/,
    );
    const meter = await page.evaluate(() =>
      (document.getElementById("context-meter") as HTMLMeterElement).value
    );
    expect(meter).toBeGreaterThan(0);
    expect(meter).toBeLessThanOrEqual(512);
    expect(errors).toEqual([]);
    await context.close();
  },
  60_000,
);

// The chat page on the float engine, as `scripts/chat.ts out/ferry.bf16.dmexp` serves it: a float
// export (dmexp, bf16), loaded on its natural engine with a session store beside it, as chat.ts passes
// one. Where the float engine cannot keep sessions the page must chat anyway, sending the whole
// history each turn; where it can, the same turns work through them.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { loadEngine } from "../../engines/mod.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import type { Listening } from "../../serve/listen.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { launchBrowser, serveChat } from "../helpers/browser.ts";

let dir: string, browser: Browser, server: Listening;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ferry-page-float-"));
  const { file } = await exportCheckpoint({
    format: "dmexp",
    dtype: "bf16",
    output: join(dir, "ferry.bf16.dmexp"),
  });
  const engine = await loadEngine(file);
  if (engine.kind !== "float") throw new Error(`expected the float engine for ${file}, got ${engine.kind}`);
  server = await serveChat({ engine, sessions: await createSessionStore(join(dir, "sessions")) });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the page chats on the float engine: three turns, each reply shown, no error", async () => {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  const refused: number[] = [];
  page.on("response", (r) => r.url().endsWith("/v1/chat/completions") && !r.ok() && refused.push(r.status()));
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("float engine"));
  await page.locator("#settings summary").click();
  await page.fill("#max-tokens", "24");
  await page.fill("#temperature", "0");
  for (const [i, text] of ["The jury said", "Tell me more", "And then?"].entries()) {
    await page.focus("#prompt");
    await page.keyboard.type(text);
    await page.keyboard.press("Enter");
    await page.waitForFunction(
      (n) =>
        document.querySelectorAll("#log li.assistant").length === n &&
        !document.querySelector("#log li.streaming"),
      i + 1,
    );
  }
  const replies = await page.locator("#log li.assistant .content").evaluateAll((els) =>
    els.map((e) => e.textContent!.trim())
  );
  expect(replies.length).toBe(3);
  for (const r of replies) expect(r.length).toBeGreaterThan(0);
  expect(await page.locator("#log .error").count()).toBe(0);
  expect(await page.locator("#stats").textContent()).toMatch(/^\d+ tokens · [\d.–]+ tok\/s · float$/);
  expect(refused).toEqual([]); // the page read /v1/models and asked for no session the server lacks
  expect(errors).toEqual([]);
  await context.close();
});

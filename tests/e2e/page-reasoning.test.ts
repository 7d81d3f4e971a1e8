// The chat page on a model with Qwen3's tokenizer and template (tests/serve/chat-qwen3.test.ts's scripted
// reply over a reduced Qwen3 folder): a reply's think block is shown folded in a <details> above the
// answer, streamed into it, and the answer alone is in the reply's content.
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import type { Listening } from "../../serve/listen.ts";
import { launchBrowser, serveChat } from "../helpers/browser.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";

let browser: Browser, server: Listening;

beforeAll(async () => {
  const engine = await loadEngine(await qwen3Folder({ peaked: true }), "float", {
    tokenizer: qwen3TokenizerFiles(),
  });
  const script = [
    ...engine.tokenizer.encode("<think>\nThe user says hi.\n</think>\n\nHello **there**."),
    151645,
  ];
  const start = (): EngineSession => {
    let next = 0;
    return Object.assign(engine.start(), { pick: () => script[Math.min(next++, script.length - 1)] });
  };
  const scripted: Engine = { ...engine, start, restore: undefined };
  server = await serveChat({ engine: scripted });
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

test("the reasoning is folded above the reply; the reply's content is the answer", async () => {
  const page = await (await browser.newContext()).newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
  await page.focus("#prompt");
  await page.keyboard.type("Hi");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant").length === 1 &&
    !document.querySelector("#log li.streaming")
  );
  const reply = page.locator("#log li.assistant");
  const fold = reply.locator("details.reasoning");
  expect(await fold.count()).toBe(1);
  expect(await fold.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
  expect(await fold.locator(".reasoning-text").textContent()).toBe("The user says hi.");
  expect((await reply.locator(".content").textContent())?.trim()).toBe("Hello there.");
  expect(await reply.locator(".content strong").textContent()).toBe("there");
  // The fold comes before the content.
  expect(await reply.evaluate((li) => li.querySelector("details")!.nextElementSibling!.className)).toBe(
    "content",
  );
  expect(errors).toEqual([]);
});

test("a Qwen3 model gets its own hint and the thinking switch, which the request carries", async () => {
  const page = await (await browser.newContext()).newPage();
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
  expect(await page.isVisible('#empty [data-for="template"]')).toBe(true);
  expect(await page.isVisible('#empty [data-for="byte"]')).toBe(false);
  expect(await page.isVisible("#thinking-field")).toBe(true);
  const sent: unknown[] = [];
  page.on("request", (r) => r.url().endsWith("/v1/chat/completions") && sent.push(r.postDataJSON()));
  await page.uncheck("#thinking");
  await page.focus("#prompt");
  await page.keyboard.type("Hi");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant").length === 1 &&
    !document.querySelector("#log li.streaming")
  );
  expect(sent).toMatchObject([{ chat_template_kwargs: { enable_thinking: false } }]);
});

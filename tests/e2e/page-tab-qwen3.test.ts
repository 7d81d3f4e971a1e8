// A model with its own tokenizer and chat template in the tab, in real Chromium: a lut4 export of a
// reduced Qwen3 folder (the real 151,936-token tokenizer and its Jinja template, carried in the file's
// tokenizer section) downloaded from the server runs in the tab's worker and gives the server's reply
// for the same chat request and seed: the prompt built by the template, the reply ended by the
// tokenizer's EOS set, thinking split off as the server splits it, the tab's token count the server's.
import { afterAll, afterEach, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { floatEngineFromLut4Bytes } from "../../engines/float-from-bytes.ts";
import { intEngineFromBytes } from "../../engines/int/from-bytes.ts";
import { loadEngine } from "../../engines/mod.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import type { Engine } from "../../model/engine.ts";
import { generateAll } from "../../model/generate.ts";
import { createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { launchBrowser } from "../helpers/browser.ts";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { switchToTab, tabModelSettled } from "../helpers/tab.ts";

setDefaultTimeout(90_000); // longer than the preload's minute: see the tests below

let browser: Browser, server: Listening, engine: Engine, lut4: string;
const pageErrors: string[] = [];

/** The sampling of both requests: sampled (not greedy), so the seed matters. */
const SAMPLING = { max_tokens: 24, temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05 };
const MESSAGES = [{ role: "user", content: "Where is the jury?" }];

beforeAll(async () => {
  const input = await qwen3Folder({ peaked: true });
  lut4 = join(scratchDir(), "qwen3-reduced.lut4");
  await exportCheckpoint({ input, output: lut4, format: "lut4" });
  engine = await loadEngine(lut4);
  const app = createApp({ engine, sessions: await createSessionStore(join(scratchDir(), "qwen3-sessions")) });
  server = await listen(app.fetch, { hostname: "127.0.0.1", port: 0 });
  browser = await launchBrowser();
});

afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** The server's answer to one chat request (its integer engine, over HTTP). */
async function serverReply(body: Record<string, unknown>) {
  const res = await fetch(`${server.url}v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return await res.json();
}

test("a lut4 Qwen3 export with its own tokenizer runs in the tab and gives the server's reply", async () => {
  expect(engine.tokenizer.kind).not.toBe("byte");
  const context = await browser.newContext();
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(server.url);
  await switchToTab(page);
  await page.click("#tab-load-server");
  expect(await tabModelSettled(page)).toContain("qwen3-reduced.lut4");
  expect(await page.textContent("#tab-status")).toContain("downloaded from the server");
  // Cross-origin isolated, the tab runs the integer engine on every core (up to 4): here its 151,936-row
  // head is split between Web Workers, and the replies below must still be the server's, token for token.
  const cores = await page.evaluate(() => Math.min(4, navigator.hardwareConcurrency));
  expect(await page.textContent("#tab-status")).toEndWith(cores > 1 ? `; ${cores} threads` : "; one thread");
  // One context figure for a file: the tab's engine holds what the server's says (not the file's most).
  const models = await (await fetch(`${server.url}v1/models`)).json();
  expect(await page.textContent("#model")).toContain(`context ${models.data[0].context_length}`);

  // Straight to the tab's backend (page/tab.js), as the page's chat calls it.
  const tab = await page.evaluate(async ({ messages, sampling }) => {
    const api = await import("/page/tab.js");
    const pieces: Array<[string, string]> = [];
    const r = await api.complete(
      { messages, sampling },
      (text: string, kind: string) => pieces.push([kind, text]),
    );
    return { ...r, pieces, count: await api.countTokens(messages) };
  }, { messages: MESSAGES, sampling: { ...SAMPLING, seed: 7 } });

  const want = await serverReply({ messages: MESSAGES, ...SAMPLING, seed: 7 });
  const message = want.choices[0].message;
  expect(want.usage.completion_tokens).toBeGreaterThan(0);
  expect(tab.content).toBe(message.content);
  expect(tab.reasoning).toBe(message.reasoning_content ?? "");
  expect(tab.finish).toBe(want.choices[0].finish_reason);
  expect([tab.usage.prompt_tokens, tab.usage.completion_tokens])
    .toEqual([want.usage.prompt_tokens, want.usage.completion_tokens]);
  expect(tab.seed).toBe(7);
  // The pieces streamed are the reply, each marked as the server's stream marks it.
  expect(tab.pieces.filter(([k]) => k === "content").map(([, t]) => t).join("")).toBe(tab.content);
  expect(tab.pieces.filter(([k]) => k === "reasoning").map(([, t]) => t).join("")).toBe(tab.reasoning);

  // The prompt is the template's, counted by the model's tokenizer: what /apply-template and /tokenize say.
  const { prompt } = await (await fetch(`${server.url}apply-template`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: MESSAGES }),
  })).json();
  expect(prompt).toContain("<|im_start|>user\nWhere is the jury?<|im_end|>");
  const { tokens } = await (await fetch(`${server.url}tokenize`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content: prompt }),
  })).json();
  expect(tab.count).toBe(tokens.length);
  expect(tab.usage.prompt_tokens).toBe(tokens.length);

  // The template's own options reach it in the tab too: without thinking, Qwen3's template closes an
  // empty think block in the prompt.
  const kwargs = { chat_template_kwargs: { enable_thinking: false }, ...SAMPLING, seed: 8 };
  const quiet = await page.evaluate(async ({ messages, sampling }) => {
    const api = await import("/page/tab.js");
    return await api.complete({ messages, sampling }, () => {});
  }, { messages: MESSAGES, sampling: kwargs });
  const wantQuiet = await serverReply({ messages: MESSAGES, ...kwargs });
  expect(quiet.content).toBe(wantQuiet.choices[0].message.content);
  expect(quiet.usage.prompt_tokens).toBe(wantQuiet.usage.prompt_tokens);
  expect(quiet.usage.prompt_tokens).toBeGreaterThan(tokens.length);

  // And through the chat itself: the page's Settings, the prompt box, the conversation it keeps.
  await page.click("#settings summary");
  const fields = { "max-tokens": "24", temperature: "0.8", "top-k": "40", "top-p": "0.95", "min-p": "0.05" };
  for (const [id, v] of Object.entries({ ...fields, seed: "7" })) await page.fill(`#${id}`, v);
  await page.dispatchEvent("#seed", "change");
  await page.fill("#prompt", MESSAGES[0].content);
  await page.press("#prompt", "Enter");
  await page.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant").length === 1 &&
    !document.querySelector("#log li.streaming")
  );
  expect(await page.locator("#log li.assistant .error").count()).toBe(0);
  const kept = await page.evaluate(async () => {
    const { listConversations } = await import("/page/store.js");
    const current = localStorage.getItem("ferry.current");
    const conv = (await listConversations()).find((c: { id: string }) => c.id === current);
    return conv.messages.at(-1).content;
  });
  expect(kept).toBe(message.content);
  await context.close();
});

test("the bytes entries give a file's own tokenizer and its sampler mask, as loadEngine does", async () => {
  const bytes = new Uint8Array(readFileSync(lut4));
  const prompt = engine.tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", {
    specials: true,
  });
  expect(prompt[0]).toBe(151644); // <|im_start|>: the file's tokenizer, not the byte one
  const opts = { maxTokens: 12, temperature: 0.8, topK: 40, seed: 3 };
  const int = (await intEngineFromBytes(bytes, "qwen3-reduced.lut4")).engine;
  expect(int.tokenizer.eos).toEqual(engine.tokenizer.eos);
  expect(int.tokenizer.encode("Hello world")).toEqual(engine.tokenizer.encode("Hello world"));
  expect(await generateAll(int, prompt, opts)).toEqual(await generateAll(engine, prompt, opts));
  const float = (await floatEngineFromLut4Bytes(bytes, "qwen3-reduced.lut4")).engine;
  expect(float.tokenizer.eos).toEqual(engine.tokenizer.eos);
  expect(await generateAll(float, prompt, opts)).toEqual(
    await generateAll(await loadEngine(lut4, "float"), prompt, opts),
  );
});

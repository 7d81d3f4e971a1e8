// The chat page in Chromium against a scripted engine (tests/helpers/browser.ts) whose replies each test
// chooses: the log keeps the newest reply in view above the footer (desktop and phone, streaming and
// after, Settings open), follows a streaming reply unless the user scrolled up, renders Markdown without
// running what a reply smuggles in, fits a long chat to the context by dropping the oldest turns (by
// the server's /apply-template and /tokenize where it has them, else by bytes), shows
// a failed turn's error with Retry, regenerates, edits, copies, keeps conversations across a reload (its
// IndexedDB calls rejecting when a transaction fails or is aborted), and falls back to the whole history
// when the server answers 501 for sessions.
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import type { Listening } from "../../serve/listen.ts";
import { launchBrowser, type ScriptedEngine, scriptedEngine, serveChat } from "../helpers/browser.ts";

let browser: Browser, server: Listening, engine: ScriptedEngine;
/** What the engine answers next; each test sets it. `prompts` holds every prompt the engine saw. */
let answer: (prompt: string) => string = () => "Hello there.";
const prompts: string[] = [];
/** Errors thrown in any page; a test fails if it leaves one. */
const pageErrors: string[] = [];

beforeAll(async () => {
  engine = scriptedEngine((p) => (prompts.push(p), answer(p))); // no sessions: as on the float engine
  server = await serveChat({ engine });
  browser = await launchBrowser();
});

afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** A fresh page (its own IndexedDB and storage) at `size`, failing the test on any page error. */
async function openPage(
  size = { width: 1366, height: 768 },
): Promise<{ page: Page; context: BrowserContext }> {
  const context = await browser.newContext({ viewport: size });
  const page = await context.newPage();
  page.on("pageerror", (e) => pageErrors.push(e.message));
  await page.goto(server.url);
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
  return { page, context };
}

/** Types `text` into the prompt, presses Enter and waits for reply number `n` (1-based) to finish. */
async function send(page: Page, text: string, n: number) {
  await page.focus("#prompt");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
  await page.waitForFunction(
    (n) =>
      document.querySelectorAll("#log li.assistant").length === n &&
      !document.querySelector("#log li.streaming"),
    n,
  );
}

/** Waits until the reply being streamed shows more than `chars` characters. */
function streamed(page: Page, chars: number) {
  return page.waitForFunction(
    (n) => (document.querySelector("#log li.streaming")?.textContent ?? "").length > n,
    chars,
  );
}

/** The text of each element `selector` matches, trimmed (rendered Markdown ends its paragraph with a newline). */
function texts(page: Page, selector: string): Promise<string[]> {
  return page.locator(selector).evaluateAll((els) => els.map((e) => e.textContent!.trim()));
}

/** How the newest reply sits: its bottom edge against the log's visible bottom and the footer's top. */
function lastReplyGeometry(page: Page) {
  return page.evaluate(() => {
    const li = [...document.querySelectorAll("#log li.assistant")].at(-1)!.getBoundingClientRect();
    const main = document.getElementById("scroller")!.getBoundingClientRect();
    const footer = document.querySelector("footer")!.getBoundingClientRect();
    return {
      bottom: li.bottom,
      top: li.top,
      mainTop: main.top,
      mainBottom: main.bottom,
      footerTop: footer.top,
    };
  });
}

/** The newest reply's last line is on screen: above the footer, inside the log's visible box. */
function expectLastReplyVisible(g: Awaited<ReturnType<typeof lastReplyGeometry>>) {
  expect(g.bottom).toBeLessThanOrEqual(g.footerTop + 1);
  expect(g.bottom).toBeLessThanOrEqual(g.mainBottom + 1);
  expect(g.bottom).toBeGreaterThan(g.mainTop + 20);
}

const LONG = "The jury said it did not know what the county would do next with all the money left over. "
  .repeat(3);

for (
  const [name, size] of [["desktop", { width: 1366, height: 768 }], ["phone", { width: 390, height: 844 }]]
) {
  test(`${name}: the newest reply stays in view above the footer, streaming and after, Settings open`, async () => {
    const { page, context } = await openPage(size as { width: number; height: number });
    answer = () => LONG;
    for (let i = 1; i <= 4; i++) await send(page, `Question ${i}`, i);
    expectLastReplyVisible(await lastReplyGeometry(page));

    // Streaming: slow tokens; the reply is followed as it grows.
    engine.delayMs = 15;
    await page.focus("#prompt");
    await page.keyboard.type("Question 5");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => {
      const li = document.querySelector("#log li.streaming");
      return li !== null && li.textContent!.length > 60;
    });
    expectLastReplyVisible(await lastReplyGeometry(page));
    await page.locator("#settings summary").click(); // Settings open mid-stream: the footer grows
    await page.waitForTimeout(100);
    expectLastReplyVisible(await lastReplyGeometry(page));
    engine.delayMs = 0;
    await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
    expectLastReplyVisible(await lastReplyGeometry(page));
    await context.close();
  });
}

test("a streaming reply does not pull the log down once the user has scrolled up", async () => {
  const { page, context } = await openPage({ width: 390, height: 844 });
  answer = () => LONG;
  for (let i = 1; i <= 3; i++) await send(page, `Question ${i}`, i);
  engine.delayMs = 15;
  await page.focus("#prompt");
  await page.keyboard.type("Question 4");
  await page.keyboard.press("Enter");
  await streamed(page, 20);
  await page.evaluate(() => document.getElementById("scroller")!.scrollTo(0, 0));
  await streamed(page, 80);
  expect(await page.evaluate(() => document.getElementById("scroller")!.scrollTop)).toBe(0);
  engine.delayMs = 0;
  await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
  await context.close();
});

test("Markdown is rendered, and a reply's script, event handler and javascript: link do not run", async () => {
  const { page, context } = await openPage();
  answer = () =>
    '**bold** and `code` <script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">' +
    '<a href="javascript:window.pwned = 3" id="bad">link</a>';
  await page.locator("#settings summary").click();
  await page.fill("#max-tokens", "300");
  await send(page, "Show me", 1);
  const reply = page.locator("#log li.assistant .content");
  expect(await reply.locator("strong").textContent()).toBe("bold");
  expect(await reply.locator("code").textContent()).toBe("code");
  expect(await reply.locator("script").count()).toBe(0);
  expect(await reply.locator("img[onerror]").count()).toBe(0);
  expect(await reply.locator("a").textContent()).toBe("link");
  expect(await reply.locator('a[href^="javascript"]').count()).toBe(0);
  await page.waitForTimeout(200); // an image's onerror would have fired by now
  expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();

  // A code block (replies end at a newline, so through the page's own renderer) gets a Copy button.
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.evaluate(async () => {
    const { renderInto } = await import("/page/markdown.js");
    const el = document.createElement("div");
    el.id = "probe";
    document.getElementById("log")!.append(el);
    renderInto(el, '```js\nlet x = 1;\n```\n<img src=x onerror="window.pwned = 4">');
  });
  await page.locator("#probe .copy-code").click();
  await page.waitForFunction(() => document.querySelector("#probe .copy-code")!.textContent === "Copied");
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("let x = 1;\n");
  expect(await page.evaluate(() => (globalThis as { pwned?: number }).pwned)).toBeUndefined();
  await context.close();
});

test("the context meter fills, and a full context drops the oldest turns and says so", async () => {
  const { page, context } = await openPage();
  prompts.length = 0;
  answer = () => "x".repeat(200);
  await send(page, "Turn 1", 1);
  const used = () =>
    page.evaluate(() => (document.getElementById("context-meter") as HTMLMeterElement).value);
  const first = await used();
  expect(first).toBeGreaterThan(120); // the prompt and 120 tokens (max tokens) of reply
  expect(await page.locator("#context-text").textContent()).toBe(`context ${first} / 512`);
  await send(page, "Turn 2", 2);
  expect(await used()).toBeGreaterThan(first);
  await send(page, "Turn 3", 3);
  await send(page, "Turn 4", 4); // 3 turns of ~145 tokens and room for 120 more do not fit in 512
  const notice = page.locator("#log li.assistant").nth(3).locator(".notice");
  expect(await notice.textContent()).toMatch(
    /^The oldest [12] turns? (was|were) dropped to fit the model's context\.$/,
  );
  expect(prompts.at(-1)).not.toContain("Turn 1");
  expect(prompts.at(-1)).toContain("Turn 4");
  expect(await page.locator("#log .error").count()).toBe(0);
  expect(await used()).toBeLessThanOrEqual(512);
  await context.close();
});

test("while the prompt is read the status counts its tokens (the server's prompt_progress)", async () => {
  const { page, context } = await openPage();
  answer = () => "Done.";
  await page.evaluate(() => {
    const seen: string[] = ((globalThis as unknown as { statuses: string[] }).statuses = []);
    const stats = document.getElementById("stats")!;
    // Each text the status was given (several may come in one task: the records keep every one).
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) seen.push(n.textContent ?? "");
    }).observe(stats, { childList: true });
  });
  await send(page, "Tell me about the jury and the registration practices. ".repeat(4), 1);
  const said = await page.evaluate(() => (globalThis as unknown as { statuses: string[] }).statuses);
  const counts = said.map((t) => /^reading the prompt: (\d+) \/ (\d+) tokens/.exec(t)).filter((m) =>
    m !== null
  );
  expect(counts.length).toBeGreaterThanOrEqual(3); // pieces of 64 of a prompt over 200 tokens
  expect(counts.map((m) => Number(m![1]))).toEqual(counts.map((m) => Number(m![1])).sort((a, b) => a - b));
  expect(counts.at(-1)![1]).toBe(counts.at(-1)![2]); // read to the end
  await context.close();
});

test("with /apply-template and /tokenize the page counts the model's own tokens", async () => {
  const { page, context } = await openPage();
  // Those endpoints are not on this branch yet: answer them here in their shapes, with a tokenizer that
  // makes two tokens of every byte, so the counts differ from the page's own byte estimate.
  const templated: unknown[] = [];
  await page.route("**/apply-template", async (route) => {
    const { messages } = route.request().postDataJSON();
    templated.push(messages);
    const prompt = messages.map((m: { role: string; content: string }) => `${m.role}: ${m.content}\n`).join(
      "",
    );
    await route.fulfill({ json: { prompt: prompt + "assistant: " } });
  });
  await page.route("**/tokenize", async (route) => {
    const { content } = route.request().postDataJSON();
    await route.fulfill({ json: { tokens: Array.from({ length: content.length * 2 }, (_, i) => i % 256) } });
  });
  prompts.length = 0;
  answer = () => "x".repeat(100);
  for (let n = 1; n <= 3; n++) await send(page, `T${n}`, n);
  // By bytes the third turn fits (about 260 + 120 of 512); at two tokens a byte it does not.
  expect(await page.locator("#log li.assistant").nth(2).locator(".notice").textContent()).toContain(
    "The oldest 1 turn was dropped",
  );
  expect(prompts.at(-1)).not.toContain("T1");
  expect(templated[0]).toEqual([ // the second turn's history, as the chat request would send it
    { role: "user", content: "T1" },
    { role: "assistant", content: "x".repeat(100) },
    { role: "user", content: "T2" },
  ]);
  const before = await page.locator("#context-text").textContent();
  expect(before).toMatch(/^context \d+ \/ 512$/);
  await page.reload(); // a stored conversation keeps its count
  await page.waitForFunction((t) => document.getElementById("context-text")!.textContent === t, before);
  await context.close();
});

test("a failed turn shows its error in the turn, with Retry, and no empty reply", async () => {
  const { page, context } = await openPage();
  answer = () => "Back again.";
  await page.route("**/v1/chat/completions", (route) => route.abort("connectionrefused"));
  await page.focus("#prompt");
  await page.keyboard.type("Are you there?");
  await page.keyboard.press("Enter");
  const error = page.locator("#log li.assistant .error");
  await error.waitFor();
  expect(await error.textContent()).toContain("cannot be reached");
  expect(await page.locator("#log li.assistant .error button").textContent()).toBe("Retry");
  expect(await page.textContent("#announce")).toStartWith("The turn failed: ");
  await page.unroute("**/v1/chat/completions");
  await page.locator("#log li.assistant .error button").click();
  await page.waitForFunction(() =>
    document.querySelector("#log li.assistant .content")?.textContent?.trim() === "Back again."
  );
  expect(await page.locator("#log li.assistant").count()).toBe(1);
  expect(await page.locator("#log .error").count()).toBe(0);
  await context.close();
});

test("regenerate replaces the last reply; edit resends from that message; copy copies", async () => {
  const { page, context } = await openPage();
  let n = 0;
  answer = () => `Reply number ${++n}.`;
  await send(page, "First question", 1);
  await send(page, "Second question", 2);
  const replies = page.locator("#log li.assistant .content");
  expect(await texts(page, "#log li.assistant .content")).toEqual(["Reply number 1.", "Reply number 2."]);
  await page.locator("#log li.assistant").nth(1).getByRole("button", { name: "Regenerate this reply" })
    .click();
  await page.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant .content")[1]?.textContent?.trim() === "Reply number 3."
  );
  expect(await replies.count()).toBe(2);

  prompts.length = 0;
  await page.locator("#log li.user").first().getByRole("button", { name: "Edit and resend" }).click();
  const box = page.getByRole("textbox", { name: "Edit message" });
  await box.fill("Edited question");
  await box.press("Enter");
  await page.waitForFunction(() =>
    document.querySelectorAll("#log li.assistant").length === 1 &&
    !document.querySelector("#log li.streaming")
  );
  expect(await page.locator("#log li.user .content").allTextContents()).toEqual(["Edited question"]);
  expect(prompts.at(-1)).toBe("User: Edited question\nAssistant: ");
  expect(await page.textContent("#announce")).toBe("Model: Reply number 4."); // read once, when done

  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.locator("#log li.assistant").getByRole("button", { name: "Copy message" }).click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe("Reply number 4.");
  await context.close();
});

test("conversations survive a reload; New chat keeps the old one; rename and delete", async () => {
  const { page, context } = await openPage();
  answer = () => "Noted.";
  await send(page, "About the jury", 1);
  await page.waitForFunction(() => document.querySelectorAll("#chat-list li").length === 1); // stored
  await page.reload();
  await page.locator("#log li.user").first().waitFor();
  expect(await page.locator("#log li.user .content").textContent()).toBe("About the jury");
  expect(await page.locator("#chat-list li").count()).toBe(1);

  await page.locator("#new").click();
  expect(await page.locator("#log li").count()).toBe(0);
  await send(page, "About the county", 1);
  await page.waitForFunction(() => document.querySelectorAll("#chat-list li").length === 2);
  expect(await page.locator("#chat-list .title").allTextContents()).toEqual([
    "About the county",
    "About the jury",
  ]);

  page.once("dialog", (d) => d.accept("Jury notes"));
  await page.getByRole("button", { name: "Rename About the jury" }).click();
  await page.waitForFunction(() =>
    document.querySelector("#chat-list li:last-child .title")!.textContent === "Jury notes"
  );
  await page.reload();
  await page.locator("#chat-list li").nth(1).waitFor();
  expect(await page.locator("#log li.user .content").textContent()).toBe("About the county"); // the one open
  await page.locator("#chat-list .title", { hasText: "Jury notes" }).click();
  await page.waitForFunction(() =>
    document.querySelector("#log li.user .content")?.textContent === "About the jury"
  );

  page.once("dialog", (d) => d.accept());
  await page.getByRole("button", { name: "Delete Jury notes" }).click();
  await page.waitForFunction(() => document.querySelectorAll("#chat-list li").length === 1);
  expect(await page.locator("#log li").count()).toBe(0);
  await page.reload();
  await page.locator("#chat-list li").first().waitFor();
  expect(await page.locator("#chat-list .title").allTextContents()).toEqual(["About the county"]);
  await context.close();
});

test("the page's IndexedDB calls (serve/page/idb.js) reject when their transaction fails or is aborted", async () => {
  const { page, context } = await openPage();
  const said = await page.evaluate(async () => {
    const { objectStore } = await import("/page/idb.js");
    const run = objectStore("ferry-idb-test", "things", { keyPath: "id" });
    // What a call came to, or "pending" when it had not settled after 5 s (a call that never would).
    const settled = (p: Promise<unknown>) =>
      Promise.race([
        p.then((v) => `resolved ${JSON.stringify(v)}`, (e) => `rejected ${e?.name}: ${e instanceof Error}`),
        new Promise((r) => setTimeout(() => r("pending"), 5000)),
      ]);
    type Store = IDBObjectStore;
    return {
      put: await settled(run("readwrite", (s: Store) => s.put({ id: 1 }))),
      get: await settled(run("readonly", (s: Store) => s.get(1))),
      // A request that fails (the key is taken) aborts its transaction with the request's error.
      failed: await settled(run("readwrite", (s: Store) => s.add({ id: 1 }))),
      // Aborted after its request succeeded: no error event, only the abort (as when the browser's quota
      // runs out at commit).
      aborted: await settled(run("readwrite", (s: Store) => {
        const req = s.put({ id: 2 });
        req.onsuccess = () => s.transaction.abort();
        return req;
      })),
      count: await settled(run("readonly", (s: Store) => s.count())),
    };
  });
  expect(said).toEqual({
    put: "resolved 1",
    get: 'resolved {"id":1}',
    failed: "rejected ConstraintError: true",
    aborted: "rejected AbortError: true",
    count: "resolved 1", // nothing of the aborted transaction was kept
  });
  await context.close();
});

test("phone: the Chats button opens the conversation list, Escape closes it, a title opens its chat", async () => {
  const { page, context } = await openPage({ width: 390, height: 844 });
  answer = () => "Sure.";
  await send(page, "First chat", 1);
  await page.locator("#toggle-chats").click(); // New chat is in the list's panel
  await page.locator("#new").click();
  await send(page, "Second chat", 1);
  await page.waitForFunction(() => document.querySelectorAll("#chat-list li").length === 2);
  expect(await page.locator("#chats").isVisible()).toBe(false);
  await page.locator("#toggle-chats").click();
  expect(await page.locator("#chats").isVisible()).toBe(true);
  expect(await page.getAttribute("#toggle-chats", "aria-expanded")).toBe("true");
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Second chat");
  await page.keyboard.press("Escape");
  expect(await page.locator("#chats").isVisible()).toBe(false);
  await page.locator("#toggle-chats").click();
  await page.locator("#chat-list .title", { hasText: "First chat" }).click();
  expect(await page.locator("#chats").isVisible()).toBe(false);
  expect(await texts(page, "#log li.user .content")).toEqual(["First chat"]);
  await context.close();
});

test("settings go out with each turn; the seed the server reports is shown and can be reused", async () => {
  const { page, context } = await openPage();
  answer = () => "Seeded.";
  await page.locator("#settings summary").click();
  await page.fill("#system", "Answer briefly.");
  await page.fill("#top-k", "7");
  await page.fill("#top-p", "0.5");
  const sent: Record<string, unknown>[] = [];
  let reported = ""; // the fresh random seed the server reports for an unseeded request
  await page.route("**/v1/chat/completions", async (route) => {
    sent.push(route.request().postDataJSON());
    const res = await route.fetch();
    const body = await res.text();
    reported ||= /"seed":(\d+)/.exec(body)?.[1] ?? "";
    await route.fulfill({ response: res, body });
  });
  await send(page, "Hi", 1);
  expect(sent[0]).toMatchObject({
    top_k: 7,
    top_p: 0.5,
    messages: [{ role: "system", content: "Answer briefly." }, { role: "user", content: "Hi" }],
  });
  expect(sent[0].seed).toBeUndefined(); // the box is empty: a random seed
  expect(reported).toMatch(/^\d+$/);
  expect(prompts.at(-1)).toBe("System: Answer briefly.\nUser: Hi\nAssistant: ");
  expect(await page.locator("#log li.assistant .meta").textContent()).toContain(`seed ${reported}`);
  await page.getByRole("button", { name: `Use seed ${reported}` }).click();
  expect(await page.inputValue("#seed")).toBe(reported);
  await page.reload(); // settings are kept
  expect(await page.inputValue("#top-k")).toBe("7");
  expect(await page.inputValue("#system")).toBe("Answer briefly.");
  await context.close();
});

test("keyboard: Shift+Enter is a new line, Enter sends, Escape stops", async () => {
  const { page, context } = await openPage();
  answer = () => "y".repeat(300);
  await page.focus("#prompt");
  await page.keyboard.type("line one");
  await page.keyboard.press("Shift+Enter");
  await page.keyboard.type("line two");
  expect(await page.inputValue("#prompt")).toBe("line one\nline two");
  expect(await page.locator("#log li").count()).toBe(0);
  engine.delayMs = 20;
  await page.keyboard.press("Enter");
  await streamed(page, 5);
  await page.keyboard.press("Escape");
  await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
  engine.delayMs = 0;
  expect(await page.locator("#stats").textContent()).toContain("stopped");
  expect(await page.locator("#log li.user .content").textContent()).toBe("line one\nline two");
  expect(await page.evaluate(() => document.activeElement?.id)).toBe("prompt");
  await context.close();
});

test("a user already in Settings while the page starts keeps the focus there (the prompt does not take it)", async () => {
  const { page, context } = await openPage();
  // Hold /v1/models until Settings is open and focused, so the page's start ends after the user acted.
  let release = () => {};
  const held = new Promise<void>((resolve) => release = resolve);
  await page.route("**/v1/models", async (route) => {
    await held;
    await route.continue();
  });
  await page.reload({ waitUntil: "domcontentloaded" });
  await page.locator("#settings summary").press("Enter");
  await page.focus("#max-tokens");
  release();
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
  await page.evaluate(() => new Promise((r) => setTimeout(r, 100))); // start() ends after the model line
  expect(await page.evaluate(() => document.activeElement?.id)).toBe("max-tokens");
  expect(await page.evaluate(() => (document.getElementById("settings") as HTMLDetailsElement).open)).toBe(
    true,
  );
  // With nobody in the page the prompt has the focus after a start, as before.
  await page.unroute("**/v1/models");
  await page.reload();
  await page.waitForFunction(() => document.activeElement?.id === "prompt");
  await context.close();
});

test("a server that answers 501 for sessions gets the whole history instead, and nothing alarming is shown", async () => {
  const { page, context } = await openPage();
  // Claim sessions, as a server whose store went away would, so the page asks for one and gets a 501.
  await page.route("**/v1/models", async (route) => {
    const res = await route.fetch();
    const body = await res.json();
    body.data[0].sessions = true;
    await route.fulfill({ response: res, json: body });
  });
  await page.reload();
  await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
  const statuses: number[] = [];
  page.on("response", (r) => r.url().endsWith("/v1/chat/completions") && statuses.push(r.status()));
  answer = () => "Fine without sessions.";
  await send(page, "One", 1);
  await send(page, "Two", 2);
  expect(statuses).toEqual([501, 200, 200]); // once refused, the page stops asking
  expect(await texts(page, "#log li.assistant .content")).toEqual([
    "Fine without sessions.",
    "Fine without sessions.",
  ]);
  expect(await page.locator("#log .error").count()).toBe(0);
  expect(await page.locator("#stats").textContent()).not.toContain("error");
  expect(prompts.at(-1)).toBe("User: One\nAssistant: Fine without sessions.\nUser: Two\nAssistant: ");
  await context.close();
});

test("with --api-key the page asks for the key in Settings, sends it with every call, and a reload keeps it", async () => {
  const keyed = await serveChat({ engine, apiKey: "s3cret" });
  const context = await browser.newContext({ viewport: { width: 1366, height: 768 } });
  try {
    const page = await context.newPage();
    page.on("pageerror", (e) => pageErrors.push(e.message));
    await page.goto(keyed.url);
    // Refused at once (/v1/models): Settings open at the key field, marked, with a message.
    await page.waitForFunction(() => !document.getElementById("api-key-note")!.hidden);
    expect(await page.textContent("#api-key-note")).toContain("needs its API key");
    expect(await page.getAttribute("#api-key", "aria-invalid")).toBe("true");
    expect(await page.evaluate(() => (document.getElementById("settings") as HTMLDetailsElement).open)).toBe(
      true,
    );
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("api-key");
    expect(await page.textContent("#model")).toContain("API key");

    // A message sent without the key leaves no reply bubble: the text is back in the box, the key asked for.
    await page.focus("#prompt");
    await page.keyboard.type("Hello?");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("stats")!.textContent!.includes("API key"));
    expect(await page.locator("#log li").count()).toBe(0);
    expect(await page.inputValue("#prompt")).toBe("Hello?");
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("api-key");

    // A wrong key is refused, saying so.
    await page.fill("#api-key", "wrong");
    await page.press("#api-key", "Enter");
    await page.waitForFunction(() =>
      document.getElementById("api-key-note")!.textContent!.includes("refused this API key")
    );

    // The right one: the model is read, the mark goes, and a reply streams with the key on every call.
    const auth = new Set<string>();
    page.on("request", (r) => {
      if (!r.url().includes("/page/")) auth.add(`${new URL(r.url()).pathname} ${r.headers().authorization}`);
    });
    await page.fill("#api-key", "s3cret");
    await page.press("#api-key", "Enter");
    await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
    expect(await page.locator("#api-key-note").isHidden()).toBe(true);
    expect(await page.getAttribute("#api-key", "aria-invalid")).toBeNull();
    expect(await page.evaluate(() => document.activeElement?.id)).toBe("prompt");
    answer = () => "A reply for the key holder.";
    engine.delayMs = 10;
    await page.keyboard.press("Enter"); // the message put back in the box
    await streamed(page, 3);
    engine.delayMs = 0;
    await page.waitForFunction(() => !document.querySelector("#log li.streaming"));
    expect(await texts(page, "#log li.assistant .content")).toEqual(["A reply for the key holder."]);
    expect([...auth].filter((a) => !a.endsWith("Bearer s3cret"))).toEqual([]);
    expect([...auth].map((a) => a.split(" ")[0])).toContain("/v1/chat/completions");

    // The other calls carry it too: token counting, session upload and download (501 from this engine,
    // which keeps no sessions: past the key check).
    const calls = await page.evaluate(async () => {
      const api = await import("/page/api.js");
      const out: unknown[] = [await api.countTokens([{ role: "user", content: "Hi" }])];
      for (
        const call of [
          () => api.uploadSession(new Blob([new Uint8Array(3)])),
          () => api.sessionUrl("0".repeat(32)),
        ]
      ) {
        out.push(await call().then(() => "ok", (e: { status: number }) => e.status));
      }
      return out;
    });
    expect(typeof calls[0]).toBe("number");
    expect(calls.slice(1)).toEqual([501, 501]);

    // A reload keeps the key (this tab's sessionStorage, not localStorage): no prompt, the model read.
    await page.reload();
    await page.waitForFunction(() => document.getElementById("model")!.textContent!.includes("engine"));
    expect(await page.inputValue("#api-key")).toBe("s3cret");
    expect(await page.locator("#api-key-note").isHidden()).toBe(true);
    expect(await page.evaluate(() => JSON.stringify(localStorage))).not.toContain("s3cret");
  } finally {
    await context.close();
    await keyed.close();
  }
});

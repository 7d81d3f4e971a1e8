/**
 * A chat typed into the page, as a user holds one: `scripts/chat.ts MODEL` is started (Bun or Deno), the
 * page is opened in Chromium, and each round holds two fresh multi-turn chats, one with the page's
 * sampling defaults and one greedy (temperature 0), in alternating order, thinking off where the
 * template has the switch. Each turn is timed from Send to the first word of the reply, and its decode
 * rate is the one the page prints under the reply (tokens after the first ÷ the time since it). With
 * `--tab`, the same chats then run in the browser tab itself, on the model the server hands out.
 * Prints, per place, the median sampled and greedy decode rates and their ratio, and each turn's time
 * to the first token.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-page-chat.ts /tmp/q06.lut4 --tab --turns 3 --tokens 48 --rounds 2
 * // bun scripts/tools/bench-page-chat.ts /tmp/q06.q4_0.gguf --runtime deno
 * ```
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import process from "node:process";
import { cli, failUsage, run } from "../cli.ts";
import { chromiumLaunch, DEFAULT_CHROMIUM, PLAYWRIGHT } from "./bench-tab.ts";

const HELP = `
A multi-turn chat typed into the page, sampled (the page's defaults) against greedy, on the server and,
with --tab, in the browser tab: decode rates as the page prints them and each turn's first-token time.

Usage: bun scripts/tools/bench-page-chat.ts MODEL [options]

Options:
  --runtime R       the server's runtime: bun or deno (default bun)
  --parallel N      the server's slots (default 1)
  --threads N       the tab's threads (default: the page's choice, up to 4)
  --turns N         turns in each chat (default 3)
  --tokens N        max tokens of each reply (default 48)
  --rounds N        rounds, each a sampled and a greedy chat in alternating order (default 2)
  --temperature T   the sampled chats' temperature (default: the page's)
  --tab             also hold the chats in the browser tab
  --chromium PATH   the Chromium to drive (default $FERRY_CHROMIUM, else ${DEFAULT_CHROMIUM})
  --json            print the figures as JSON
  -h, --help        this text
`;

/** What each turn asks: short questions, so a turn's prompt is mostly the history. */
const QUESTIONS = [
  "Where did the jury meet, and what did it say about the election?",
  "Why did it say that?",
  "Tell me more about the city.",
  "And what happened next?",
  "Summarize it in one line.",
];

/** A real model's replies take minutes in a tab, not Playwright's default 30 s. */
const PAGE_TIMEOUT_MS = 15 * 60_000;

/** One reply's figures, as the page shows them. */
interface Turn {
  firstTokenMs: number;
  tokens: number;
  tps: number;
}

type Mode = "sampled" | "greedy";

if (import.meta.main) await run(main);

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    runtime: { type: "string", default: "bun" },
    parallel: { type: "string", default: "1" },
    threads: { type: "string" },
    turns: { type: "string", default: "3" },
    tokens: { type: "string", default: "48" },
    rounds: { type: "string", default: "2" },
    temperature: { type: "string" },
    tab: { type: "boolean" },
    chromium: { type: "string", default: process.env.FERRY_CHROMIUM || DEFAULT_CHROMIUM },
    json: { type: "boolean" },
  });
  const model = positionals[0];
  if (!model) failUsage("expected the model file to serve", HELP);
  if (values.runtime !== "bun" && values.runtime !== "deno") {
    failUsage(`--runtime ${values.runtime}: expected bun or deno`, HELP);
  }
  const whole = (flag: string, v: string, max: number) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1 || n > max) failUsage(`--${flag} ${v}: expected 1 to ${max}`, HELP);
    return n;
  };
  const turns = whole("turns", values.turns, QUESTIONS.length), tokens = whole("tokens", values.tokens, 4096);
  const rounds = whole("rounds", values.rounds, 100), parallel = whole("parallel", values.parallel, 16);
  if (!existsSync(values.chromium)) {
    throw new Error(`no Chromium at ${values.chromium}: give --chromium PATH or set FERRY_CHROMIUM`);
  }
  const server = await startChat(values.runtime, model, parallel);
  // deno-lint-ignore no-explicit-any
  const { chromium } = (await import(PLAYWRIGHT)) as { chromium: any };
  const browser = await chromium.launch({
    executablePath: values.chromium,
    ...chromiumLaunch(values.chromium),
  });
  try {
    const page = await (await browser.newContext()).newPage();
    page.setDefaultTimeout(PAGE_TIMEOUT_MS);
    await page.goto(server.url);
    // What the page runs is given as text: this file is checked without the DOM's types.
    await page.waitForFunction(`document.getElementById("model").textContent.includes("engine")`);
    const places: Record<string, Record<Mode, Turn[][]>> = {};
    places[`server (${values.runtime}, ${parallel} slot${parallel > 1 ? "s" : ""})`] = await chats(
      page,
      rounds,
      turns,
      tokens,
      values.temperature,
    );
    if (values.tab) {
      await page.selectOption("#where", "tab");
      await page.waitForFunction(`!document.getElementById("tab-panel").hidden`);
      await page.click("#tab-load-server");
      await page.waitForFunction(
        `/ (kept in this browser|downloaded from the server|read from disk);/` +
          `.test(document.getElementById("tab-status").textContent)`,
      );
      const status = (await page.textContent("#tab-status")) ?? "";
      places[`tab (${status.split("; ").at(-1)})`] = await chats(
        page,
        rounds,
        turns,
        tokens,
        values.temperature,
      );
    }
    report(places, { model, turns, tokens, rounds }, values.json === true);
  } finally {
    await browser.close();
    server.stop();
  }
}

/** `scripts/chat.ts MODEL` on a free port, once it says where it listens. */
async function startChat(runtime: string, model: string, parallel: number) {
  const script = new URL("../chat.ts", import.meta.url).pathname;
  const args = runtime === "bun" ? [script] : ["run", "-A", script];
  const child = spawn(runtime, [...args, model, "--port", "0", "--parallel", `${parallel}`], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const seen = (chunk: Buffer) => {
      out += chunk.toString();
      const m = /ferry chat: (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1].endsWith("/") ? m[1] : `${m[1]}/`);
    };
    child.stdout.on("data", seen);
    child.stderr.on("data", seen);
    child.on("exit", (code) => reject(new Error(`chat.ts exited with ${code} before listening:\n${out}`)));
  });
  return { url, stop: () => child.kill() };
}

/** `rounds` rounds of a sampled and a greedy chat, alternating which goes first. */
// deno-lint-ignore no-explicit-any
async function chats(page: any, rounds: number, turns: number, tokens: number, temperature?: string) {
  const byMode: Record<Mode, Turn[][]> = { sampled: [], greedy: [] };
  await page.evaluate(`document.getElementById("settings").open = true`); // where the sampling is set
  const sampled = temperature ?? await page.inputValue("#temperature");
  for (let r = 0; r < rounds; r++) {
    const order: Mode[] = r % 2 === 0 ? ["sampled", "greedy"] : ["greedy", "sampled"];
    for (const mode of order) {
      await page.click("#new");
      await page.fill("#max-tokens", `${tokens}`);
      await page.fill("#temperature", mode === "greedy" ? "0" : sampled);
      await page.fill("#seed", `${r + 1}`);
      if (await page.isVisible("#thinking")) await page.setChecked("#thinking", false);
      const chat: Turn[] = [];
      for (let t = 0; t < turns; t++) chat.push(await turn(page, QUESTIONS[t]));
      byMode[mode].push(chat);
    }
  }
  return byMode;
}

/** Sends one question and waits for the whole reply; its first-token time and the page's figures. */
// deno-lint-ignore no-explicit-any
async function turn(page: any, question: string): Promise<Turn> {
  const before = await page.locator("#log li.message.assistant").count();
  await page.fill("#prompt", question);
  const sent = performance.now();
  await page.click("#send");
  await page.waitForFunction(`(() => {
    const li = document.querySelectorAll("#log li.message.assistant")[${before}];
    return li && (li.querySelector(".content").textContent !== "" || !li.classList.contains("streaming"));
  })()`);
  const firstTokenMs = performance.now() - sent;
  await page.waitForFunction(`!document.querySelector("#log li.streaming")`);
  const meta = await page.locator("#log li.message.assistant").nth(before).locator(".meta").textContent();
  const m = /(\d+) tokens(?: · ([\d.]+) tok\/s)?/.exec(meta ?? "");
  if (!m) throw new Error(`no figures under the reply: ${meta}`);
  return { firstTokenMs, tokens: Number(m[1]), tps: Number(m[2] ?? NaN) };
}

function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length === 0
    ? NaN
    : s.length % 2
    ? s[(s.length - 1) / 2]
    : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function report(
  places: Record<string, Record<Mode, Turn[][]>>,
  setup: { model: string; turns: number; tokens: number; rounds: number },
  json: boolean,
): void {
  const rows = Object.entries(places).map(([place, byMode]) => {
    const rate = (mode: Mode) => median(byMode[mode].flat().map((t) => t.tps));
    const firstToken = (mode: Mode) =>
      Array.from({ length: setup.turns }, (_, t) => median(byMode[mode].map((c) => c[t].firstTokenMs)));
    const tokens = (mode: Mode) => median(byMode[mode].flat().map((t) => t.tokens));
    return {
      place,
      sampledTps: rate("sampled"),
      greedyTps: rate("greedy"),
      ratio: rate("sampled") / rate("greedy"),
      sampledTokens: tokens("sampled"),
      greedyTokens: tokens("greedy"),
      sampledFirstTokenMs: firstToken("sampled"),
      greedyFirstTokenMs: firstToken("greedy"),
    };
  });
  if (json) {
    console.log(JSON.stringify({ ...setup, rows }, null, 2));
    return;
  }
  console.log(
    `${setup.model}: ${setup.rounds} round(s) of a sampled and a greedy ${setup.turns}-turn chat, ` +
      `${setup.tokens} tokens at most a reply; medians`,
  );
  for (const r of rows) {
    const s = (ms: number[]) => ms.map((x) => `${(x / 1000).toFixed(1)} s`).join(" / ");
    console.log(`${r.place}:`);
    console.log(
      `  decode: sampled ${r.sampledTps.toFixed(1)} tok/s, greedy ${r.greedyTps.toFixed(1)} tok/s: ` +
        `${r.ratio.toFixed(3)}× (replies of ${r.sampledTokens} and ${r.greedyTokens} tokens)`,
    );
    console.log(
      `  first token by turn: sampled ${s(r.sampledFirstTokenMs)}; greedy ${s(r.greedyFirstTokenMs)}`,
    );
  }
}

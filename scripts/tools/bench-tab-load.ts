/**
 * How long the browser tab takes to load a lut4 file: `scripts/chat.ts MODEL` serves the page, Chromium
 * loads the server's model into the tab, asks it for a first reply at once (while the browser keeps
 * the file), waits until the browser keeps it, and reloads. Each load is timed on the page's own status
 * line: the download from the click to "checking the file", then from "checking the file" to ready
 * (after the download, and from IndexedDB), the first reply from
 * its request to its end, and the reload from its start to ready (reading the file back included). With
 * `--against`, the page of each other checkout is timed the same way, the checkouts alternated in
 * every round, the order turned from one round to the next; medians.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-tab-load.ts /tmp/q06/m.lut4 --against .bench/before --rounds 2
 * ```
 * @module
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { chromiumLaunch, DEFAULT_CHROMIUM, PLAYWRIGHT } from "./bench-tab.ts";

// deno-lint-ignore no-explicit-any -- playwright-core is a test-only package, imported by name (bench-tab.ts)
type Page = any;

const HELP = `
Time the browser tab's load of a lut4 file: after the download, from IndexedDB, and a whole reload;
and the first reply asked for as soon as the downloaded model is ready (24 tokens, greedy).

Usage: bun scripts/tools/bench-tab-load.ts MODEL [--against DIR,...] [--rounds N] [--chromium PATH] [--json]

MODEL is a lut4 file; the page of each checkout serves it with scripts/chat.ts.

Options:
  --against DIR,...  also time these checkouts' pages (folders holding other commits of ferry, e.g.
                     from git archive), alternated with this one in every round
  --rounds N         rounds (default 3)
  --chromium PATH    the Chromium to drive (default $FERRY_CHROMIUM, else ${DEFAULT_CHROMIUM});
                     \`bun tests/helpers/chromium.ts\` prints the pinned headless Chromium's path
  --json             print the figures as JSON
  -h, --help         this text
`;

/** The longest a step may take: a 0.6B-parameter model's load and keep take tens of seconds. */
const STEP_MS = 300_000;

/** One load into the tab, its first reply, and one reload, in milliseconds. */
interface Timing {
  /** From the click to "checking the file": the download (and, from this version on, its copy into the worker's memory). */
  download: number;
  afterDownload: number;
  firstReply: number;
  fromStore: number;
  reload: number;
}

/** The first reply's request: a user's first message the moment the model is ready. */
const FIRST = {
  messages: [{ role: "user", content: "Where is the jury?" }],
  sampling: { max_tokens: 24, temperature: 0 },
};

/** `scripts/chat.ts MODEL` of the checkout in `dir`, on a free port; resolves once it listens. */
async function server(dir: string, model: string): Promise<{ url: string; close: () => void }> {
  const child = spawn("bun", ["scripts/chat.ts", model, "--port", "0", "--parallel", "1"], {
    cwd: dir,
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  const url = await new Promise<string>((ok, no) => {
    child.stdout.on("data", (d) => {
      out += d;
      const m = /ferry chat: (\S+)/.exec(out);
      if (m) ok(m[1]);
    });
    child.on("close", (code) => no(new Error(`${dir}: scripts/chat.ts exited ${code} before listening`)));
  });
  return { url, close: () => child.kill() };
}

/**
 * Waits for the status line to match `done`; returns when it first said "loading the model…" (the click),
 * when it started "checking the file" and when it matched.
 */
async function statusTimes(page: Page, done: RegExp): Promise<{ start: number; check: number; end: number }> {
  await page.waitForFunction(`${done}.test(document.getElementById("tab-status").textContent)`);
  const seen: Array<[number, string]> = await page.evaluate("globalThis.seen ?? []");
  const check = seen.find(([, t]) => t.includes("checking the file"))?.[0];
  const end = seen.find(([, t]) => done.test(t))?.[0];
  if (check === undefined || end === undefined) throw new Error(`the status line never said ${done}`);
  const start = seen.find(([, t]) => t === "loading the model…")?.[0] ?? check;
  return { start, check, end };
}

/** One round on one checkout's page: a load from the server, then a reload from IndexedDB. */
// deno-lint-ignore no-explicit-any
async function timeTab(browser: any, url: string): Promise<Timing> {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    // Every text of the status line with its time since the document started.
    await page.addInitScript(`(() => {
      const seen = (globalThis.seen = []);
      const watch = () => {
        const el = document.getElementById("tab-status");
        if (!el) return void setTimeout(watch, 20);
        new MutationObserver(() => seen.push([performance.now(), el.textContent ?? ""]))
          .observe(el, { childList: true, characterData: true, subtree: true });
      };
      watch();
    })()`);
    await page.goto(url);
    await page.waitForFunction('document.getElementById("model").textContent !== "connecting…"');
    await page.selectOption("#where", "tab");
    await page.waitForFunction('!document.getElementById("tab-panel").hidden');
    await page.click("#tab-load-server");
    const first = await statusTimes(page, /downloaded from the server/);
    // Through the tab's own backend, as the page's chat sends a message.
    const firstReply = await page.evaluate(async (request: typeof FIRST) => {
      const api = await import("/page/tab.js");
      const t = performance.now();
      await api.complete(request, () => {});
      return performance.now() - t;
    }, FIRST);
    // Kept only after the load answers: a reload before that would find nothing kept.
    await page.waitForFunction('/browser keeps/.test(document.getElementById("tab-status").textContent)');
    await page.reload();
    const again = await statusTimes(page, /kept in this browser/);
    return {
      download: first.check - first.start,
      afterDownload: first.end - first.check,
      firstReply,
      fromStore: again.end - again.check,
      reload: again.end,
    };
  } finally {
    await context.close();
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    against: { type: "string" },
    rounds: { type: "string", default: "3" },
    chromium: { type: "string", default: process.env.FERRY_CHROMIUM || DEFAULT_CHROMIUM },
    json: { type: "boolean", default: false },
  });
  const model = positionals[0];
  if (model === undefined) fail("no MODEL: give a lut4 file (see --help)", EXIT_USAGE);
  const rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) {
    fail(`--rounds ${values.rounds}: expected an integer >= 1`, EXIT_USAGE);
  }
  const dirs = [".", ...(values.against?.split(",") ?? [])];
  for (const dir of dirs) {
    if (!existsSync(resolve(dir, "scripts/chat.ts"))) {
      fail(`--against ${dir}: no scripts/chat.ts there`, EXIT_USAGE);
    }
  }
  if (!existsSync(values.chromium)) {
    fail(
      `no Chromium at ${values.chromium}: give --chromium PATH (\`bun tests/helpers/chromium.ts\` prints one)`,
    );
  }
  const { chromium } = await import(PLAYWRIGHT);
  const launch = chromiumLaunch(values.chromium);
  const browser = await chromium.launch({
    executablePath: values.chromium,
    args: launch.args,
    env: launch.env,
  });
  const times = dirs.map(() => [] as Timing[]);
  try {
    for (let r = 0; r < rounds; r++) {
      // The order turns each round: the checkout timed first in a round measured slower, whichever it was.
      for (let k = 0; k < dirs.length; k++) {
        const i = (k + r) % dirs.length, dir = dirs[i];
        const s = await server(resolve(dir), resolve(model));
        try {
          const t = await timeTab(browser, s.url);
          times[i].push(t);
          // Progress on stderr: a round of a 0.6B-shape file takes about half a minute.
          console.error(`round ${r + 1}/${rounds} ${dir}: ${JSON.stringify(t)}`);
        } finally {
          s.close();
        }
      }
    }
  } finally {
    await browser.close();
  }
  const rows = dirs.map((dir, i) => ({
    checkout: dir,
    download_ms: Math.round(median(times[i].map((t) => t.download))),
    after_download_ms: Math.round(median(times[i].map((t) => t.afterDownload))),
    first_reply_ms: Math.round(median(times[i].map((t) => t.firstReply))),
    from_indexeddb_ms: Math.round(median(times[i].map((t) => t.fromStore))),
    reload_ms: Math.round(median(times[i].map((t) => t.reload))),
    runs: times[i],
  }));
  if (values.json) return console.log(JSON.stringify({ model, rounds, rows }));
  console.log(
    `${model} in the tab, ${rounds} rounds, medians (ms): the click to "checking the file" (the ` +
      `download); "checking the file" to ready; the first reply, asked for at once; reload to ready`,
  );
  console.log(
    `  ${"checkout".padEnd(28)} download   after download   first reply   from IndexedDB   whole reload`,
  );
  for (const r of rows) {
    const cells = [[r.download_ms, 8], [r.after_download_ms, 14], [r.first_reply_ms, 13], [
      r.from_indexeddb_ms,
      16,
    ], [r.reload_ms, 14]];
    console.log(`  ${r.checkout.padEnd(28)} ${cells.map(([v, w]) => String(v).padStart(w)).join(" ")}`);
  }
}

if (import.meta.main) await run(main);

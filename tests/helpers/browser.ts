// What the page tests share: a headless Chromium (tests/helpers/chromium.ts) driven by playwright-core, a
// chat server on loopback, and a scripted engine whose greedy output the test chooses, so a test can ask
// for a reply with Markdown, a script tag or a given length without depending on what the trained model
// happens to write.
import process from "node:process";
import { type Browser, chromium } from "playwright-core";
import { type ChatAppOptions, createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { chromiumBuild } from "./chromium.ts";

// The scripted engine lives on its own so a Deno child can import it without playwright-core.
export { type ScriptedEngine, scriptedEngine } from "./scripted-engine.ts";

/** A headless Chromium; one per test file. */
export async function launchBrowser(): Promise<Browser> {
  const build = chromiumBuild();
  return await chromium.launch({
    executablePath: build.executablePath,
    args: build.args,
    env: { ...process.env, ...build.env },
  });
}

/** The chat app on 127.0.0.1 at a free port. */
export function serveChat(opts: ChatAppOptions): Promise<Listening> {
  return listen(createApp(opts).fetch, { hostname: "127.0.0.1", port: 0 });
}

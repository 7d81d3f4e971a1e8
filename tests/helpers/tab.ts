// What the tab tests share: a chat server on the shipped model's lut4 export with sessions (the
// integer engine, as `ferry chat` serves a lut4 file), counting the downloads of its model file; a
// plain static file server (node:http, not ferry's) for the folder scripts/page.ts writes; and the
// page driven into tab mode.
import { createServer } from "node:http";
import { readFile, stat } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import type { Page } from "playwright-core";
import { loadIntEngine } from "../../engines/int/engine.ts";
import type { Engine } from "../../model/engine.ts";
import { createApp } from "../../serve/app.ts";
import { listen, type Listening } from "../../serve/listen.ts";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { scratchDir, smallLut4 } from "./lut4-fixture.ts";

/** The tab server: its address, its engine, the lut4 file and how often the file was downloaded. */
export interface TabServer extends Listening {
  engine: Engine;
  lut4: string;
  downloads: () => number;
}

/** The shipped model's lut4 export served on 127.0.0.1 with a session store. */
export async function serveTabChat(): Promise<TabServer> {
  const lut4 = await smallLut4();
  const engine = await loadIntEngine(lut4);
  const app = createApp({ engine, sessions: await createSessionStore(join(scratchDir(), "sessions")) });
  let downloads = 0;
  const server = await listen((req: Request) => {
    if (new URL(req.url).pathname.startsWith("/page/model/")) downloads++;
    return app.fetch(req);
  }, { hostname: "127.0.0.1", port: 0 });
  return { ...server, engine, lut4, downloads: () => downloads };
}

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
};

/** A plain static file server for `dir` on 127.0.0.1 (GET only, no listing, nothing outside `dir`). */
export function serveStatic(dir: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url!, "http://x").pathname));
    const file = join(dir, path.endsWith("/") ? path + "index.html" : path);
    if (!file.startsWith(dir) || !(await stat(file).catch(() => null))?.isFile()) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "Content-Type": TYPES[extname(file)] ?? "application/octet-stream" });
    res.end(await readFile(file));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${port}/`, close: () => new Promise((r) => server.close(() => r())) });
    })
  );
}

/** Switches the page to "run in this tab" and waits for the header to name the tab's engine, if `loaded`. */
export async function switchToTab(page: Page): Promise<void> {
  await page.selectOption("#where", "tab");
  await page.waitForFunction(() => !document.getElementById("tab-panel")!.hidden);
}

/** Waits until the tab's model is loaded (the header names the engine in this tab) or refused. */
export async function tabModelSettled(page: Page): Promise<string> {
  await page.waitForFunction(
    () => {
      const status = document.getElementById("tab-status")!.textContent ?? "";
      return status.startsWith("refused") ||
        / (kept in this browser|downloaded from the server|read from disk);/.test(status);
    },
    undefined,
    { timeout: 30_000 },
  );
  return (await page.textContent("#tab-status"))!;
}

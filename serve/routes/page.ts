/**
 * The chat page: `GET /` and its stylesheet and script under `/page/`, the files in `serve/page/`
 * served as they are (read once, when the routes are made; `no-cache`, so an edit shows on reload).
 *
 * @example
 * ```ts
 * app.route("/", pageRoutes());
 * (await app.request("/")).headers.get("content-type"); // "text/html; charset=utf-8"
 * ```
 * @module
 */
import { Hono } from "hono";
import { readFileSync } from "node:fs";

/** Route -> file in serve/page/ and its content type. */
const PAGE_FILES: Record<string, [string, string]> = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/page/style.css": ["style.css", "text/css; charset=utf-8"],
  "/page/chat.js": ["chat.js", "text/javascript; charset=utf-8"],
};

/** The page routes. */
export function pageRoutes(): Hono {
  const app = new Hono();
  for (const [route, [file, type]] of Object.entries(PAGE_FILES)) {
    const body = readFileSync(new URL(`../page/${file}`, import.meta.url));
    app.get(route, (c) => c.body(body, 200, { "Content-Type": type, "Cache-Control": "no-cache" }));
  }
  return app;
}

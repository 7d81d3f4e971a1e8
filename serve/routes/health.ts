/**
 * `GET /health`, llama.cpp's readiness check: `{"status":"ok"}` once the app exists (it is built with a
 * loaded engine; while `scripts/chat.ts` is still loading, serve/loading.ts answers 503 instead), and
 * `GET /favicon.ico` answered with 204, so a browser's automatic request is not an error.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { healthRoutes } from "./health.ts";
 * const app = new Hono();
 * app.route("/", healthRoutes());
 * await (await app.request("/health")).json(); // { status: "ok" }
 * ```
 * @module
 */
import { Hono } from "hono";
import { ROUTES } from "./table.ts";

const { health, favicon } = ROUTES;

/** The health and icon routes. */
export function healthRoutes(): Hono {
  return new Hono()
    .on(health.methods, health.path, (c) => c.json({ status: "ok" }))
    .on(favicon.methods, favicon.path, (c) => c.body(null, 204, { "Cache-Control": "max-age=86400" }));
}

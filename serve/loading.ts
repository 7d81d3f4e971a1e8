/**
 * What the server answers while its engine is still loading: `GET /health` is 503
 * `{"status":"loading"}` (llama.cpp's answer), every other route 503 with `Retry-After: 1`. It passes
 * the same guard as the app (Host, Origin, API key), so listening early opens nothing. `scripts/chat.ts`
 * listens with this, loads the engine and warms its slots (serve/slots/slots.ts `warm`), then swaps in the
 * app built by serve/app.ts.
 *
 * @example
 * ```ts
 * import { loadingApp } from "./loading.ts";
 * import { createApp } from "./app.ts";
 * import { listen } from "./listen.ts";
 * import { loadEngine } from "../engines/mod.ts";
 * const address = { hostname: "127.0.0.1", port: 8080 }, path = "out/ferry.q4.lut4";
 * let handler = loadingApp({ address });
 * const server = await listen((r) => handler.fetch(r), address);
 * handler = createApp({ engine: await loadEngine(path), address });
 * ```
 * @module
 */
import type { Hono } from "hono";
import { guarded } from "./app.ts";
import { ApiError } from "./errors.ts";
import type { GuardOptions } from "./guard.ts";
import { ROUTES } from "./routes/table.ts";

const { health } = ROUTES;

/** The app answering while the engine loads. */
export function loadingApp(opts: GuardOptions): Hono {
  return guarded(opts)
    .on(health.methods, health.path, (c) => c.json({ status: "loading" }, 503, { "Retry-After": "1" }))
    .all("*", () => {
      throw new ApiError(503, "the model is still loading; retry shortly", null, "loading", {
        "Retry-After": "1",
      });
    });
}

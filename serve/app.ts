/**
 * The chat server: a Hono app handed its engine from outside. It speaks the OpenAI endpoints local
 * clients expect (`GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`, streamed as
 * server-sent events or answered as one JSON body), stores and restores sessions, and serves the chat
 * page at `/`. Each group of routes is its own module under `routes/`, handed one shared context
 * (context.ts); this module only composes them and holds `onError`, the one place a refusal (an
 * `ApiError`, thrown anywhere) becomes OpenAI's error shape.
 *
 * It uses nothing of an engine but `model/engine.ts`, so the integer, float and WebGPU engines serve
 * the same way; `scripts/chat.ts` picks one and starts the listener.
 *
 * @example
 * ```ts
 * const app = createApp({ engine: await loadEngine("out/ferry.q4.lut4"), sessions: await createSessionStore("out/sessions") });
 * Deno.serve({ hostname: "127.0.0.1", port: 8080 }, app.fetch);
 * const res = await app.request("/v1/models");
 * ```
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import { type ChatAppOptions, createServerContext } from "./context.ts";
import { ApiError, errorBody } from "./errors.ts";
import { completionRoutes } from "./routes/completions.ts";
import { modelRoutes } from "./routes/models.ts";
import { pageRoutes } from "./routes/page.ts";
import { sessionRoutes } from "./routes/sessions.ts";

export type { ChatAppOptions } from "./context.ts";

/** Builds the app around `opts.engine`. Serve it with `Deno.serve(app.fetch)` or `Bun.serve({ fetch: app.fetch })`. */
export function createApp(opts: ChatAppOptions): Hono {
  const ctx = createServerContext(opts);
  return new Hono()
    .onError(errorResponse)
    .notFound((c) => c.json(errorBody(404, `no route ${c.req.method} ${c.req.path}`), 404))
    .route("/", pageRoutes())
    .route("/v1", modelRoutes(ctx))
    .route("/v1", sessionRoutes(ctx))
    .route("/v1", completionRoutes(ctx));
}

/** Every refusal and failure as OpenAI's error body: an `ApiError` as it says, anything else a 500. */
function errorResponse(err: Error, c: Context): Response {
  if (err instanceof ApiError) {
    for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
    return c.json(errorBody(err.status, err.message, err.param, err.code), err.status as 400);
  }
  if (err instanceof HTTPException) return c.json(errorBody(err.status, err.message), err.status);
  console.error(err);
  return c.json(errorBody(500, "internal error: " + (err.message || String(err))), 500);
}

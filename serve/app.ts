/**
 * The chat server: a Hono app handed its engine from outside. It speaks the OpenAI endpoints local
 * clients expect (`GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`, streamed as
 * server-sent events or answered as one JSON body), stores and restores sessions, and serves the chat
 * page at `/`, plus llama.cpp's `/health`, `/tokenize`, `/detokenize`, `/apply-template` and a
 * Prometheus `/metrics`. Every request first passes the guard (guard.ts: header size, Host, Origin and
 * CORS, the API key). Each group of routes is its own module under `routes/`, handed one shared context
 * (context.ts), its paths and methods taken from the one route table (routes/table.ts, which also
 * gives `/metrics` its labels and the guard its open routes); this module only composes them and
 * holds `onError`, the one place a refusal (an `ApiError`, thrown anywhere) becomes OpenAI's error
 * shape.
 *
 * It uses nothing of an engine but `model/engine.ts`, so the integer, float and WebGPU engines serve
 * the same way; `scripts/chat.ts` picks one and starts the listener.
 *
 * @example
 * ```ts
 * import { createApp } from "./app.ts";
 * import { loadEngine } from "../engines/mod.ts";
 * import { createSessionStore } from "./sessions/session-store.ts";
 * const app = createApp({ engine: await loadEngine("out/ferry.q4.lut4"), sessions: await createSessionStore("out/sessions") });
 * Deno.serve({ hostname: "127.0.0.1", port: 8080 }, app.fetch);
 * const res = await app.request("/v1/models");
 * ```
 * @module
 */
import { Hono } from "hono";
import type { Context, MiddlewareHandler } from "hono";
import { HTTPException } from "hono/http-exception";
import { type ChatAppOptions, createServerContext } from "./context.ts";
import { chatTemplateOf } from "../model/chat-template.ts";
import { ApiError, errorBody } from "./errors.ts";
import { guard, type GuardOptions } from "./guard.ts";
import type { Metrics } from "./metrics.ts";
import { completionRoutes } from "./routes/completions.ts";
import { healthRoutes } from "./routes/health.ts";
import { metricsRoutes } from "./routes/metrics.ts";
import { modelRoutes } from "./routes/models.ts";
import { pageRoutes } from "./routes/page.ts";
import { sessionRoutes } from "./routes/sessions.ts";
import { API, routeLabel } from "./routes/table.ts";
import { tokenRoutes } from "./routes/tokens.ts";

export type { ChatAppOptions } from "./context.ts";

/** Builds the app around `opts.engine`. Serve it with `Deno.serve(app.fetch)` or `Bun.serve({ fetch: app.fetch })`. */
export function createApp(opts: ChatAppOptions): Hono {
  // The model's own chat template, parsed once: one that does not parse is refused here (a FormatError
  // naming its file and field), before anything is served.
  const source = opts.engine.source;
  const where = source.endsWith("/") ? source : `${source}/`;
  const ctx = createServerContext(opts, chatTemplateOf(opts.engine.tokenizer?.files, where));
  return guarded(opts, ctx.metrics)
    .route("/", healthRoutes())
    .route("/", pageRoutes({ model: ctx.engine.source }))
    .route("/", tokenRoutes(ctx))
    .route("/", metricsRoutes(ctx))
    .route(API, modelRoutes(ctx))
    .route(API, sessionRoutes(ctx))
    .route(API, completionRoutes(ctx));
}

/**
 * A Hono app with the error handlers, the request count, HEAD answered like GET, and the guard: what
 * every app of the server starts from (also the one serve/loading.ts answers with while loading).
 */
export function guarded(opts: GuardOptions, metrics?: Metrics): Hono {
  const app = new Hono()
    .onError(errorResponse)
    .notFound((c) => c.json(errorBody(404, `no route ${c.req.method} ${c.req.path}`), 404));
  if (metrics) {
    app.use(async (c, next) => {
      await next();
      metrics.request(routeLabel(c.req.path), c.res.status); // ids folded, unknown paths one label
    });
  }
  app.use(headLength);
  for (const check of guard(opts)) app.use(check);
  return app;
}

/**
 * HEAD: Hono runs the GET route and drops the body, and the runtime then says `content-length: 0`; the
 * length of the body GET would send is put back (a stream's length is not known: none is sent).
 */
const headLength: MiddlewareHandler = async (c, next) => {
  await next();
  if (c.req.raw.method !== "HEAD" || !c.res.body || c.res.headers.has("content-length")) return;
  if (c.res.headers.get("content-type")?.startsWith("text/event-stream")) return;
  const bytes = await c.res.arrayBuffer();
  const headers = new Headers(c.res.headers);
  headers.set("Content-Length", String(bytes.byteLength));
  c.res = new Response(null, { status: c.res.status, headers });
};

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

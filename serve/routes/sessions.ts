/**
 * The session routes (a ferry extension): `POST /v1/sessions` uploads a saved session file (checked by
 * restoring it on the engine before it is stored) and answers its id, token count and transcript;
 * `GET /v1/sessions/:id` downloads one. Without a store, or on an engine that cannot restore, both
 * answer 501.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { sessionRoutes } from "./sessions.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext, bytes: Uint8Array<ArrayBuffer>; // bytes: a session file
 * const app = new Hono();
 * app.route("/v1", sessionRoutes(ctx));
 * const { id } = await (await app.request("/v1/sessions", { method: "POST", body: bytes })).json();
 * ```
 * @module
 */
import { Hono } from "hono";
import { limitBody } from "../body.ts";
import { restoreBytes, type ServerContext, sessionsOf, storedBytes } from "../context.ts";
import { parseTranscript } from "../chat/transcript.ts";
import { ROUTES } from "./table.ts";

const { sessions, sessionFile } = ROUTES;

/** The session routes, relative to `/v1`. */
export function sessionRoutes(ctx: ServerContext): Hono {
  const app = new Hono();

  app.on(sessions.methods, sessions.path, limitBody(ctx.maxSessionBytes, "session file"), async (c) => {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    const store = sessionsOf(ctx);
    const session = restoreBytes(ctx, bytes, "uploaded session");
    const id = await store.put(bytes);
    // A templated model's text keeps its special tokens (`<|im_start|>`): its turns are read from them
    // by the page, not parsed here; a byte model's transcript is parsed into messages.
    const text = ctx.tokenizer.decode(session.tokens, { specials: true });
    const messages = ctx.template ? [] : parseTranscript(text);
    return c.json({ id, object: "session", tokens: session.position, text, messages }, 201);
  });

  app.on(sessionFile.methods, sessionFile.path, async (c) => {
    const id = c.req.param("id")!; // the path's `:id` (a string path: Hono cannot tell it is there)
    const bytes = await storedBytes(ctx, id);
    return c.body(bytes, 200, {
      "Content-Type": "application/octet-stream",
      "Content-Disposition": `attachment; filename="ferry-${id}.session"`,
    });
  });

  return app;
}

/**
 * Request bodies the server will read: Hono's `bodyLimit` refusing an oversize body with a 413 in the
 * server's error shape, and a JSON body parsed or refused with a 400 naming `body`.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { limitBody, readJson } from "./body.ts";
 * declare function read(body: unknown): Response; // the route's own handling of the parsed body
 * const app = new Hono();
 * app.post("/completions", limitBody(4096, "request body"), async (c) => read(await readJson(c)));
 * ```
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { ApiError } from "./errors.ts";

/** Middleware refusing a body over `maxSize` bytes with 413 `"<what> is larger than N bytes"`. */
export function limitBody(maxSize: number, what: string): MiddlewareHandler {
  return bodyLimit({
    maxSize,
    onError: () => {
      throw new ApiError(413, `${what} is larger than ${maxSize} bytes`, null, "body_too_large");
    },
  });
}

/** The request's body parsed as JSON, or a 400 naming `body`. */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new ApiError(400, `body: not valid JSON (${(e as Error).message})`, "body", "invalid_json");
  }
}

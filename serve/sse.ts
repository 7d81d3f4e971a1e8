/**
 * OpenAI-style server-sent events on top of Hono's `streamSSE`: one `data: {json}` event per chunk,
 * `data: [DONE]` at the end, an error after the headers went out sent as one last `data: {"error": ...}`
 * event (OpenAI clients raise it), and a client that goes away turned into an aborted signal.
 *
 * @example
 * ```ts
 * return openAIStream(c, c.req.raw.signal, async (send, signal) => {
 *   await send({ choices: [{ index: 0, text: "Hi", finish_reason: null }] });
 * });
 * ```
 * @module
 */
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { ApiError, errorBody } from "./errors.ts";

/**
 * Writes a chunk may run ahead of the socket. A write resolves only once the runtime has taken the
 * bytes, a round trip per token that cost a quarter of the streamed speed; up to this many are queued
 * (in order) instead, and `send` waits only beyond that, so a slow reader still holds generation back.
 */
const WRITES_AHEAD = 32;

/** Sends one chunk as a `data:` event. */
export type SendChunk = (chunk: unknown) => Promise<void>;

/**
 * Streams the chunks `produce` sends. `signal` aborts when the request's own signal does or when the
 * client stops reading the response (either can come first, depending on the runtime).
 */
export function openAIStream(
  c: Context,
  requestSignal: AbortSignal,
  produce: (send: SendChunk, signal: AbortSignal) => Promise<void>,
): Response {
  const gone = new AbortController();
  const onGone = () => gone.abort(new Error("client disconnected"));
  requestSignal.addEventListener("abort", onGone, { once: true });
  return streamSSE(c, async (stream) => {
    stream.onAbort(onGone);
    let queued = Promise.resolve(), ahead = 0;
    const write = (data: string) => {
      ahead++;
      queued = queued.then(() => stream.writeSSE({ data })).finally(() => ahead--);
      return ahead > WRITES_AHEAD ? queued : Promise.resolve();
    };
    const send: SendChunk = async (chunk) => {
      if (!gone.signal.aborted) await write(JSON.stringify(chunk));
    };
    try {
      await produce(send, gone.signal);
      if (!gone.signal.aborted) await write("[DONE]");
      await queued;
    } catch (e) {
      const status = e instanceof ApiError ? e.status : 500;
      if (!(e instanceof ApiError)) console.error(e);
      await send(errorBody(status, (e as Error).message ?? String(e)));
    } finally {
      requestSignal.removeEventListener("abort", onGone);
    }
  });
}

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
 * Bytes of events that may wait for the socket. A write resolves only once the runtime has taken the
 * bytes, a round trip that cost a quarter of the streamed speed when paid per token; so events that
 * arrive while a write is under way are joined and written together, and `send` waits only once this
 * much is waiting, so a slow reader still holds generation back.
 */
const BYTES_AHEAD = 64 * 1024;

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
    // One event is `data: JSON\n\n` (JSON.stringify never emits a raw newline, so one data line).
    let waiting = "", writing: Promise<void> | undefined, failed: unknown;
    const drain = async () => {
      try {
        while (waiting) {
          const text = waiting;
          waiting = "";
          await stream.write(text);
        }
      } catch (e) {
        failed ??= e; // a closed socket: the next write (or the end) says so
      } finally {
        writing = undefined;
      }
    };
    const written = async () => {
      while (writing) await writing;
      if (failed) throw failed;
    };
    const write = (data: string): Promise<void> => {
      if (failed) return Promise.reject(failed);
      waiting += `data: ${data}\n\n`;
      writing ??= drain();
      return waiting.length > BYTES_AHEAD ? written() : Promise.resolve();
    };
    const send: SendChunk = async (chunk) => {
      if (!gone.signal.aborted) await write(JSON.stringify(chunk));
    };
    try {
      await produce(send, gone.signal);
      if (!gone.signal.aborted) await write("[DONE]");
      await written();
    } catch (e) {
      const status = e instanceof ApiError ? e.status : 500;
      if (!(e instanceof ApiError)) console.error(e);
      await send(errorBody(status, (e as Error).message ?? String(e)));
    } finally {
      requestSignal.removeEventListener("abort", onGone);
    }
  });
}

/**
 * OpenAI-style server-sent events: one `data: {json}` event per chunk, `data: [DONE]` at the end, an
 * error after the headers went out sent as one last `data: {"error": ...}` event (OpenAI clients raise
 * it), and a client that goes away turned into an aborted signal.
 *
 * Written by hand on a plain `ReadableStream` rather than Hono's `streamSSE`, which passes every write
 * through a writer, a `TransformStream` and a second stream, a chain of promises per write: here the
 * events of one turn are one `enqueue`.
 *
 * @example
 * ```ts
 * import type { Context } from "hono";
 * import { openAIStream } from "./sse.ts";
 * declare const c: Context; // a request that asked for a stream
 * const response = openAIStream(c, c.req.raw.signal, async (send, signal) => {
 *   await send({ choices: [{ index: 0, text: "Hi", finish_reason: null }] });
 * });
 * ```
 * @module
 */
import type { Context } from "hono";
import { ApiError, errorBody } from "../errors.ts";
import { nextTurn } from "../slots/next-turn.ts";

/**
 * Bytes of events that may wait for the client before `send` waits for it to read them, so a slow
 * reader holds generation back.
 *
 * Events are not written one by one: each write is a trip through the runtime's socket layer, paid
 * per token otherwise. Events sent during one turn of the event loop are joined and handed over on the
 * next turn (next-turn.ts), which comes within the ~4 ms a reply's loop runs between its pauses; each
 * event is still its own `data:` line.
 */
const BYTES_AHEAD = 64 * 1024;

/** The headers of an event stream. */
const SSE_HEADERS = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache",
  "Connection": "keep-alive",
} as const;

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
  const out = eventQueue(onGone);
  const send: SendChunk = async (chunk) => {
    // One event is `data: JSON\n\n` (JSON.stringify never emits a raw newline, so one data line).
    if (!gone.signal.aborted) await out.write(`data: ${JSON.stringify(chunk)}\n\n`);
  };
  (async () => {
    try {
      await produce(send, gone.signal);
      if (!gone.signal.aborted) await out.write("data: [DONE]\n\n");
    } catch (e) {
      const status = e instanceof ApiError ? e.status : 500;
      if (!(e instanceof ApiError)) console.error(e);
      await send(errorBody(status, (e as Error).message ?? String(e)));
    } finally {
      requestSignal.removeEventListener("abort", onGone);
      out.close();
    }
  })();
  return c.body(out.body, 200, SSE_HEADERS);
}

/** The response body and how text gets into it. */
interface EventQueue {
  body: ReadableStream<Uint8Array>;
  /** Queues text for the next turn; waits while more than `BYTES_AHEAD` is unread. */
  write(text: string): Promise<void>;
  /** Hands over what is queued and ends the body. */
  close(): void;
}

/** A byte stream fed by `write`, joined per turn; `onCancel` when the client stops reading. */
function eventQueue(onCancel: () => void): EventQueue {
  const encoder = new TextEncoder();
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  let waiting = "", turn: Promise<void> | undefined, cancelled = false, closed = false;
  let room: PromiseWithResolvers<void> | undefined; // settled when the reader wants more
  const letGo = () => {
    room?.resolve();
    room = undefined;
  };
  const body = new ReadableStream<Uint8Array>({
    start: (c) => {
      controller = c;
    },
    pull: letGo,
    cancel: () => {
      cancelled = true;
      letGo();
      onCancel();
    },
  }, new ByteLengthQueuingStrategy({ highWaterMark: BYTES_AHEAD }));
  const handOver = () => {
    if (cancelled || !waiting) return;
    controller.enqueue(encoder.encode(waiting));
    waiting = "";
  };
  return {
    body,
    async write(text) {
      if (cancelled || closed) return;
      waiting += text;
      turn ??= nextTurn().then(() => {
        turn = undefined;
        handOver();
      });
      if (waiting.length < BYTES_AHEAD && (controller.desiredSize ?? 0) > 0) return;
      await turn;
      while (!cancelled && (controller.desiredSize ?? 0) <= 0) {
        room ??= Promise.withResolvers<void>();
        await room.promise;
      }
    },
    close() {
      if (closed) return;
      closed = true;
      handOver();
      if (!cancelled) controller.close();
    },
  };
}

/**
 * One turn of the event loop without a timer where the runtime allows, for code that runs long chains
 * of microtasks (a reply's generation loop, an event stream joining what one turn sent) and must let the
 * runtime's own work in between: messages, sockets, new requests, disconnects. `setTimeout(0)` costs
 * about 1 ms on Bun and 2.2 ms on Deno, about a token of the default model (1.1–1.6 ms).
 *
 * - Bun: `setImmediate`, whose turn runs timers, flushes sockets and delivers a worker's messages (Bun's
 *   message turns do none of these: a stream reached the browser only at its end, and a slot worker
 *   never heard its abort).
 * - A worker under Deno and the browser (the tab's worker, the chat server's slot workers): a message
 *   posted to ourselves on a `MessageChannel`; the worker's own messages (an abort) are delivered in it.
 * - Deno's main thread: `setTimeout(0)`. Deno learns which sockets are ready only while its thread waits,
 *   and a message turn never waits. The chat server generates in its slot workers, so its thread only
 *   joins a stream's events here; an engine run on the server's thread (`createSlots` with one slot, as
 *   a library user may) pays the timer's 2 ms a turn, about one turn per 4 ms of work.
 *
 * Callers that ask while a turn is pending share it.
 *
 * @example
 * ```ts
 * import { nextTurn } from "./next-turn.ts";
 * declare const work: Array<() => void>; // a long job, in steps
 * for (const step of work) {
 *   step();
 *   await nextTurn();
 * }
 * ```
 * @module
 */

const isBun = "Bun" in globalThis;
/** Deno's main thread: Deno, and no worker scope (a Deno worker's global is a `WorkerGlobalScope`). */
const denoMain = "Deno" in globalThis &&
  typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope ===
    "undefined";

let pending: Promise<void> | undefined;

/** Resolves on the next turn of the event loop, after the runtime's pending I/O has had its go. */
export function nextTurn(): Promise<void> {
  if (isBun) return new Promise((resolve) => setImmediate(resolve));
  if (pending) return pending;
  const turn = denoMain ? new Promise<void>((resolve) => setTimeout(resolve, 0)) : postToSelf();
  return pending = turn.finally(() => (pending = undefined));
}

let channel: MessageChannel | undefined;
let woken: (() => void) | undefined;

/** The browser's turn: a message posted to ourselves. */
function postToSelf(): Promise<void> {
  if (!channel) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => woken?.();
  }
  return new Promise((resolve) => {
    woken = resolve;
    channel!.port2.postMessage(null);
  });
}

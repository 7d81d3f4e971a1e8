/**
 * At most `width` generations at a time (one per slot), with a bounded line of waiters. `enter` resolves
 * to a `leave` function when it is the caller's turn, returns `undefined` at once when the line is full
 * (the server answers 429), and drops a waiter whose signal aborts (a client that went away frees its
 * place). With `width` 1 (the default) it is one generation at a time, as the server always had.
 *
 * Hand-written: Hono has no such gate, and a general-purpose queue library would still need the
 * abort handling and the bound, which are the whole of it.
 *
 * @example
 * ```ts
 * import { createQueue } from "./queue.ts";
 * declare function generate(): Promise<Response>;
 * declare function tooBusy(): Response; // a 429
 * const q = createQueue(8, 2);
 * async function handle(request: Request): Promise<Response> {
 *   const leave = await q.enter(request.signal);
 *   if (!leave) return tooBusy();
 *   try { return await generate(); } finally { leave(); }
 * }
 * ```
 * @module
 */

/** A gate for `width` generations at once with `limit` waiting places. */
export interface GenerationQueue {
  /** Waits for the turn; `undefined` when the line is full; rejects with the signal's reason on abort. */
  enter(signal?: AbortSignal): Promise<(() => void) | undefined>;
  /** Whether every place is taken. */
  readonly busy: boolean;
  /** How many generations are running. */
  readonly active: number;
  /** How many are waiting behind them. */
  readonly waiting: number;
}

/** A queue running at most `width` at once, with at most `limit` waiters behind them. */
export function createQueue(limit: number, width = 1): GenerationQueue {
  let active = 0;
  const line: Array<() => void> = [];
  const leave = () => {
    const next = line.shift();
    if (next) next(); // the place passes straight on; active stays the same
    else active--;
  };
  return {
    get busy() {
      return active >= width;
    },
    get active() {
      return active;
    },
    get waiting() {
      return line.length;
    },
    enter(signal) {
      signal?.throwIfAborted();
      if (active < width) {
        active++;
        return Promise.resolve(once(leave));
      }
      if (line.length >= limit) return Promise.resolve(undefined);
      return new Promise((resolve, reject) => {
        const turn = () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(once(leave));
        };
        const onAbort = () => {
          const i = line.indexOf(turn);
          if (i >= 0) line.splice(i, 1);
          reject(signal!.reason);
        };
        signal?.addEventListener("abort", onAbort, { once: true });
        line.push(turn);
      });
    },
  };
}

function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (!done) (done = true), f();
  };
}

/**
 * One generation at a time per engine, with a bounded line of waiters. `enter` resolves to a `leave`
 * function when it is the caller's turn, returns `undefined` at once when the line is full (the server
 * answers 429), and drops a waiter whose signal aborts (a client that went away frees its place).
 *
 * Hand-written: Hono has no such gate, and a general-purpose queue library would still need the
 * abort handling and the bound, which are the whole of it.
 *
 * @example
 * ```ts
 * const q = createQueue(8);
 * const leave = await q.enter(request.signal);
 * if (!leave) return tooBusy();
 * try { await generate(); } finally { leave(); }
 * ```
 * @module
 */

/** A one-at-a-time gate with `limit` waiting places. */
export interface GenerationQueue {
  /** Waits for the turn; `undefined` when the line is full; rejects with the signal's reason on abort. */
  enter(signal?: AbortSignal): Promise<(() => void) | undefined>;
  /** Whether a generation is running. */
  readonly busy: boolean;
  /** How many are waiting behind it. */
  readonly waiting: number;
}

/** A queue with at most `limit` waiters behind the running generation. */
export function createQueue(limit: number): GenerationQueue {
  let busy = false;
  const line: Array<() => void> = [];
  const leave = () => {
    const next = line.shift();
    if (next) next(); // the turn passes straight on; busy stays true
    else busy = false;
  };
  return {
    get busy() {
      return busy;
    },
    get waiting() {
      return line.length;
    },
    enter(signal) {
      signal?.throwIfAborted();
      if (!busy) {
        busy = true;
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

/**
 * Whose turn it is on the engine's slots, in HTTP terms: the generation queue (queue.ts) with its refusals.
 * A full line is refused at once with 429 and a `Retry-After` estimated from a running average of
 * reply times; a client that leaves while waiting is 499.
 *
 * @example
 * ```ts
 * import type { Context } from "hono";
 * import { createTurns } from "./turns.ts";
 * declare const c: Context;
 * declare function generate(): Promise<void>;
 * const turns = createTurns(8);
 * const leave = await turns.wait(c.req.raw.signal); // or throws ApiError 429 / 499
 * const t0 = performance.now();
 * try { await generate(); } finally { turns.took(performance.now() - t0); leave(); }
 * ```
 * @module
 */
import { ApiError } from "../errors.ts";
import { createQueue } from "./queue.ts";

/** The engine's turns. */
export interface Turns {
  /** Generations running and requests waiting, for `/metrics`. */
  load(): { active: number; waiting: number };
  /** Waits for the engine and resolves to the function that gives the turn back. */
  wait(signal: AbortSignal): Promise<() => void>;
  /** Records how long one reply took, for the next `Retry-After`. */
  took(ms: number): void;
}

/** Turns for `width` generations at once, with at most `limit` requests waiting behind them. */
export function createTurns(limit: number, width = 1): Turns {
  const queue = createQueue(limit, width);
  let replyMs = 2000; // a guess until the first reply is timed
  return {
    load: () => ({ active: queue.active, waiting: queue.waiting }),
    async wait(signal) {
      let leave: (() => void) | undefined;
      try {
        leave = await queue.enter(signal);
      } catch {
        throw new ApiError(499, "client closed the request", null, "client_closed");
      }
      if (leave) return leave;
      const wait = Math.max(1, Math.ceil(((queue.waiting + 1) * replyMs) / width / 1000));
      throw new ApiError(
        429,
        `the engine is busy and ${queue.waiting} requests are waiting; retry later`,
        null,
        "queue_full",
        { "Retry-After": String(wait) },
      );
    },
    took(ms) {
      replyMs = 0.8 * replyMs + 0.2 * ms;
    },
  };
}

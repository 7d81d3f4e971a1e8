/**
 * How many saved sessions a store keeps, for the server's store on disk (serve/sessions/session-store.ts) and the
 * tab's in its worker (serve/page/worker.js): the newest, within a count and a byte bound.
 *
 * @example
 * ```ts
 * import { DEFAULT_SESSION_LIMITS, overLimits } from "./session-limits.ts";
 * declare const saved: { name: string; time: number; bytes: number }[]; // the store's files
 * overLimits(saved, DEFAULT_SESSION_LIMITS); // the sessions to delete, oldest first
 * ```
 * @module
 */

/** How much a store keeps: the newest sessions, at most `sessions` of them and `bytes` in all. */
export interface SessionStoreLimits {
  sessions: number;
  bytes: number;
}

/** 256 sessions and 1 GiB, whichever comes first (the newest session is kept whatever its size). */
export const DEFAULT_SESSION_LIMITS: SessionStoreLimits = { sessions: 256, bytes: 1 << 30 };

/**
 * The sessions to delete, oldest first: all but the longest run of newest ones within `limits` (the
 * newest one is always kept). `saved` is in any order.
 *
 * @example
 * ```ts
 * import { overLimits } from "./session-limits.ts";
 * const saved = [{ name: "a", time: 1, bytes: 600 }, { name: "b", time: 2, bytes: 600 }];
 * overLimits(saved, { sessions: 10, bytes: 1000 }); // [saved[0]]: "a"
 * ```
 */
export function overLimits<T extends { time: number; bytes: number }>(
  saved: readonly T[],
  limits: SessionStoreLimits,
): T[] {
  const newestFirst = [...saved].sort((a, b) => b.time - a.time);
  // Kept: the longest run of newest sessions within the limits (at least the newest one).
  let kept = 1, bytes = newestFirst[0]?.bytes ?? 0;
  while (
    kept < newestFirst.length && kept < limits.sessions && bytes + newestFirst[kept].bytes <= limits.bytes
  ) {
    bytes += newestFirst[kept++].bytes;
  }
  return newestFirst.slice(kept).reverse();
}

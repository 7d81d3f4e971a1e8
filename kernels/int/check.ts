/**
 * The integer engine's checked mode. Off when serving; the tests switch it on, and then every bound the
 * kernels rely on (written beside each kernel) is asserted, and any saturation throws instead of
 * clamping silently. A bound that holds in checked mode on the held-out windows holds for those inputs;
 * a saturation in normal mode is still defined (the value clamps to the int32 range).
 *
 * @example
 * ```ts
 * import { checked } from "./check.ts";
 * checked.on = true;   // tests only
 * ```
 * @module
 */

/** Checked mode's switch and its counters (plain data, so the hot loops read one property). */
export const checked = { on: false, asserts: 0 };

/** Counts one asserted bound and returns whether it holds: `if (check && !holds(x < B)) assertBound(false, …)`. */
export function holds(ok: boolean): boolean {
  checked.asserts = checked.asserts + 1;
  return ok;
}

/** Throws `what` when `ok` is false. Call only in checked mode (the message is built by the caller). */
export function assertBound(ok: boolean, what: string): void {
  if (!ok) throw new RangeError(`integer engine bound violated: ${what}`);
}

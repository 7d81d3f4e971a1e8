/**
 * Stop strings over streamed text. Text is handed out as soon as it cannot be the start of a stop
 * string; a possible start is held back until the next piece settles it, so a client never sees part
 * of a stop string.
 *
 * @example
 * ```ts
 * import { createStopMatcher } from "./stop.ts";
 * const m = createStopMatcher(["\nUser:"]);
 * m.push("Yes.\nUs"); // { text: "Yes.", stopped: false } ("\nUs" held back)
 * m.push("er:");      // { text: "", stopped: true }
 * ```
 * @module
 */

/** What `push` returns: the text now safe to show, and whether a stop string was reached. */
export interface StopStep {
  text: string;
  stopped: boolean;
}

/** A stop matcher; `flush` hands out what was held back once generation ends without a stop. */
export interface StopMatcher {
  push(piece: string): StopStep;
  flush(): string;
}

/** A matcher for `stops` (empty strings are ignored). */
export function createStopMatcher(stops: readonly string[]): StopMatcher {
  const live = stops.filter((s) => s.length > 0);
  let held = "";
  return {
    push(piece) {
      held += piece;
      let first = -1;
      for (const s of live) {
        const at = held.indexOf(s);
        if (at >= 0 && (first < 0 || at < first)) first = at;
      }
      if (first >= 0) {
        const text = held.slice(0, first);
        held = "";
        return { text, stopped: true };
      }
      // Hold back the longest tail of `held` that begins some stop string.
      let keep = 0;
      for (const s of live) {
        for (let k = Math.min(s.length - 1, held.length); k > keep; k--) {
          if (held.endsWith(s.slice(0, k))) {
            keep = k;
            break;
          }
        }
      }
      const text = held.slice(0, held.length - keep);
      held = held.slice(held.length - keep);
      return { text, stopped: false };
    },
    flush() {
      const text = held;
      held = "";
      return text;
    },
  };
}

/**
 * The prompt cache: saved session bytes keyed by the tokens they hold, so a request whose prompt shares
 * a beginning with an earlier conversation (the page's next turn, an API client resending the history)
 * restores that state, drops what follows the shared part, and feeds only what is new. `longest` finds
 * the entry with the longest common prefix with a new prompt, as llama.cpp's server matches its slots'
 * caches (`cache_prompt`): the earlier state need not be a prefix of the new prompt. That matters for
 * Qwen3, whose template drops the earlier reply's empty think block, so the state after a reply is never
 * a prefix of the next turn's prompt, yet shares all of the earlier prompt but that block with it.
 *
 * Kept centrally, in the server's thread, as session bytes (`EngineSession.save`): any slot can restore
 * any entry (a conversation's next turn may land on another slot), there is one memory bound for the
 * whole server, and the bytes are the same ones the session store keeps. The cost is a save per reply
 * and a restore per hit, both copies of the KV cache; a slot's own last state is matched first
 * (serve/slots.ts), which costs neither.
 *
 * Bounded by the bytes it holds (`maxBytes`); the least recently used entry goes first, and an entry
 * whose tokens begin a new entry's goes when that one is put (the new one serves every prompt it did).
 * Lookup scans the entries, each compared token by token only while it matches: a few hundred at a
 * modest bound, so a trie would buy nothing measurable here.
 *
 * @example
 * ```ts
 * const cache = createPromptCache(256 << 20);
 * cache.put(session.tokens, session.save());
 * const hit = cache.longest(nextPrompt); // { length, bytes }: restore, rewind to length, feed the rest
 * ```
 * @module
 */

/** A cached state: how many leading tokens of the prompt it shares, and its session bytes. */
export interface CacheHit {
  /** Tokens the entry and the prompt have in common from the start (at least 1). */
  length: number;
  /** The entry's session bytes. */
  bytes: Uint8Array;
  /** Tokens the entry holds: `length` or more (then it is rewound to `length` before use). */
  holds: number;
}

/** A bounded LRU of session states keyed by their tokens. */
export interface PromptCache {
  /**
   * The entry sharing the longest common prefix with `tokens` (the shortest such entry on a tie: the
   * least to restore), marked as just used; undefined when none shares even the first token.
   */
  longest(tokens: readonly number[]): CacheHit | undefined;
  /** Keeps `bytes` as the state after `tokens`; evicts least recently used entries past the bound. */
  put(tokens: readonly number[], bytes: Uint8Array): void;
  /** Entries and bytes held. */
  readonly size: { entries: number; bytes: number };
}

interface Entry {
  tokens: readonly number[];
  bytes: Uint8Array;
}

/** A cache holding at most `maxBytes` of session bytes (0: a cache that keeps nothing). */
export function createPromptCache(maxBytes: number): PromptCache {
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const entries = new Map<string, Entry>();
  let held = 0;
  const touch = (key: string, e: Entry) => {
    entries.delete(key);
    entries.set(key, e);
  };
  const drop = (key: string, e: Entry) => {
    entries.delete(key);
    held -= e.bytes.length;
  };
  return {
    longest(tokens) {
      let best: [string, Entry] | undefined, bestLength = 0;
      for (const [key, e] of entries) {
        const n = commonPrefix(e.tokens, tokens);
        if (n > bestLength || (n === bestLength && n > 0 && e.tokens.length < best![1].tokens.length)) {
          best = [key, e];
          bestLength = n;
        }
      }
      if (!best) return undefined;
      touch(...best);
      return { length: bestLength, bytes: best[1].bytes, holds: best[1].tokens.length };
    },
    put(tokens, bytes) {
      if (tokens.length === 0 || bytes.length > maxBytes) return;
      const key = tokens.join(",");
      for (const [k, e] of entries) {
        if (k === key || commonPrefix(e.tokens, tokens) === e.tokens.length) drop(k, e);
      }
      touch(key, { tokens: [...tokens], bytes });
      held += bytes.length;
      for (const [k, e] of entries) {
        if (held <= maxBytes) break;
        drop(k, e);
      }
    },
    get size() {
      return { entries: entries.size, bytes: held };
    },
  };
}

/**
 * How many leading tokens `a` and `b` have in common.
 *
 * @example
 * ```ts
 * commonPrefix([1, 2, 3], [1, 2, 4, 5]); // 2
 * ```
 */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

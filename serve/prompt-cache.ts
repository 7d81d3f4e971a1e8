/**
 * The prompt cache: saved session bytes keyed by the tokens they hold, so a request whose prompt
 * extends an earlier conversation (the page's next turn, an API client resending the history) restores
 * that state and feeds only what is new. Entries are put at turn boundaries — after a prompt is fed and
 * after its reply — and `longest` finds the longest entry that is a prefix of a new prompt.
 *
 * Kept centrally, in the server's thread, as session bytes (`EngineSession.save`): any slot can restore
 * any entry (a conversation's next turn may land on another slot), there is one memory bound for the
 * whole server, and the bytes are the same ones the session store keeps. The cost is a save per turn
 * boundary and a restore per hit, both copies of the KV cache.
 *
 * Bounded by the bytes it holds (`maxBytes`); the least recently used entry goes first. Lookup scans
 * the entries: a few hundred at a modest bound, each compared token by token only while it matches, so
 * a trie would buy nothing measurable here.
 *
 * @example
 * ```ts
 * const cache = createPromptCache(32 << 20);
 * cache.put(session.tokens, session.save());
 * const hit = cache.longest(nextPrompt); // { length, bytes } or undefined
 * ```
 * @module
 */

/** A cached state: how many leading tokens of the prompt it holds, and its session bytes. */
export interface CacheHit {
  length: number;
  bytes: Uint8Array;
}

/** A bounded LRU of session states keyed by their tokens. */
export interface PromptCache {
  /** The longest entry whose tokens begin `tokens` (at most all of them), marked as just used. */
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
  return {
    longest(tokens) {
      let best: [string, Entry] | undefined;
      for (const [key, e] of entries) {
        if (e.tokens.length > tokens.length || (best && e.tokens.length <= best[1].tokens.length)) continue;
        if (isPrefix(e.tokens, tokens)) best = [key, e];
      }
      if (!best) return undefined;
      touch(...best);
      return { length: best[1].tokens.length, bytes: best[1].bytes };
    },
    put(tokens, bytes) {
      if (tokens.length === 0 || bytes.length > maxBytes) return;
      const key = tokens.join(",");
      const had = entries.get(key);
      if (had) held -= had.bytes.length;
      touch(key, { tokens: [...tokens], bytes });
      held += bytes.length;
      for (const [k, e] of entries) {
        if (held <= maxBytes) break;
        entries.delete(k);
        held -= e.bytes.length;
      }
    },
    get size() {
      return { entries: entries.size, bytes: held };
    },
  };
}

function isPrefix(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

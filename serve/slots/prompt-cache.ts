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
 * (serve/slots/slots.ts), which costs neither.
 *
 * Bounded by the bytes it holds (`maxBytes`); the least recently used entry goes first, and an entry
 * whose tokens begin a new entry's goes when that one is put (the new one serves every prompt it did).
 * Lookup scans the entries, each compared token by token only while it matches: a few hundred at a
 * modest bound, so a trie would buy nothing measurable here.
 *
 * @example
 * ```ts
 * import { createPromptCache } from "./prompt-cache.ts";
 * import type { EngineSession } from "../../model/engine.ts";
 * declare const session: EngineSession, nextPrompt: number[]; // a reply's session; the next request's ids
 * const cache = createPromptCache(256 << 20);
 * cache.put(session.tokens, session.save!());
 * const hit = cache.longest(nextPrompt); // { length, bytes }: restore, rewind to length, feed the rest
 * ```
 * @module
 */

import type { Engine } from "../../model/engine.ts";
import { floatSessionBytes, sessionBytes } from "../../formats/session/session.ts";

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
 * import { commonPrefix } from "./prompt-cache.ts";
 * commonPrefix([1, 2, 3], [1, 2, 4, 5]); // 2
 * ```
 */
export function commonPrefix(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * The bytes a saved state of `positions` positions costs on `engine` (its session format: 12-bit
 * integers with an exponent per head on the integer engine, f32 on the float and WebGPU engines).
 *
 * @example
 * ```ts
 * import { stateBytes } from "./prompt-cache.ts";
 * import type { Engine } from "../../model/engine.ts";
 * declare const engine: Engine;
 * stateBytes(engine, 1) - stateBytes(engine, 0); // a token's KV: about 115 KB at Qwen3-0.6B's shape, integer
 * ```
 */
export function stateBytes(engine: Pick<Engine, "kind" | "config">, positions: number): number {
  const c = engine.config;
  const shape = {
    sha256: "",
    vocab: c.vocab_size,
    layers: c.num_hidden_layers,
    kvHeads: c.num_key_value_heads,
    headDim: c.head_dim,
    maxPositions: c.max_position_embeddings,
  };
  return engine.kind === "int" ? sessionBytes(shape, positions) : floatSessionBytes(shape, positions);
}

/** Whole-context states the default cache has room for. */
export const CACHE_STATES = 4;
/** The share of the machine's memory the default cache may take at most. */
export const CACHE_MEMORY_SHARE = 1 / 8;
/** The least default (a tiny model's states are small; a few MiB buys nothing). */
export const CACHE_FLOOR = 32 << 20;

/**
 * The prompt cache's default bound: room for `CACHE_STATES` states of the whole context (`fullState`
 * bytes each), at most `CACHE_MEMORY_SHARE` of `memory` (the machine's), at least 32 MiB. A bound, not
 * an allocation: the cache holds what replies put, each state the positions it used. A fixed 32 MiB
 * held one state at Qwen3-0.6B's shape (115 KB a token), so the state after a reply was evicted before
 * the next turn came.
 *
 * @example
 * ```ts
 * import os from "node:os";
 * import { defaultCacheBytes, stateBytes } from "./prompt-cache.ts";
 * import type { Engine } from "../../model/engine.ts";
 * declare const engine: Engine;
 * defaultCacheBytes(stateBytes(engine, engine.context ?? 4096), os.totalmem()); // 1.9 GB at 0.6B, integer
 * ```
 */
export function defaultCacheBytes(fullState: number, memory: number): number {
  return Math.floor(Math.max(CACHE_FLOOR, Math.min(CACHE_STATES * fullState, memory * CACHE_MEMORY_SHARE)));
}

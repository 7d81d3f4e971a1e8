/**
 * Log-probabilities of the tokens a reply picks, for OpenAI's `logprobs` and llama.cpp's
 * `completion_probabilities`. `recordLogprobs` wraps an engine session so that every `pick` also records
 * the picked token's log-probability and the `top` most likely tokens of the same distribution: the
 * engine's own `EngineSession.logprobs` when it has one, else a log-softmax of the float logits `feed`
 * returns (so any engine answers). The shapes below turn the records into each API's JSON.
 *
 * @example
 * ```ts
 * import { chatLogprobs, recordLogprobs, type TokenLogprob } from "./logprobs.ts";
 * import type { Engine } from "../../model/engine.ts";
 * import { encode } from "../../model/tokenizer.ts";
 * declare const engine: Engine;
 * const picks: TokenLogprob[] = [];
 * const s = recordLogprobs(engine.start(), engine.config.vocab_size, 5, picks);
 * await s.feed(encode("The", { bos: true })); s.pick({ temperature: 0 });
 * chatLogprobs(picks, engine.tokenizer); // { content: [{ token: " ", logprob: -0.4, bytes: [32], top_logprobs: [...] }] }
 * ```
 * @module
 */
import type { EngineSession, TokenLogprobs } from "../../model/engine.ts";
import { byteTokenizer } from "../../model/tokenizer.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";

/** One picked token: its log-probability and the most likely alternatives, most likely first. */
export interface TokenLogprob {
  id: number;
  logprob: number;
  top: Array<{ id: number; logprob: number }>;
}

/** The most alternatives a request may ask for (OpenAI's `top_logprobs` limit). */
export const MAX_TOP_LOGPROBS = 20;

/**
 * Natural-log probabilities from float logits (temperature 1, no filter): `ids`' values and the `top`
 * most likely tokens, the lower id first on a tie. The fallback for engines without `logprobs`.
 */
export function logSoftmax(logits: Float32Array, ids: readonly number[], top: number): TokenLogprobs {
  let max = -Infinity;
  for (const x of logits) if (x > max) max = x;
  let sum = 0;
  for (const x of logits) sum += Math.exp(x - max);
  const lse = max + Math.log(sum);
  const order = top > 0 ? [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b) : [];
  return {
    of: ids.map((id) => logits[id] - lse),
    top: order.slice(0, top).map((id) => ({ id, logprob: logits[id] - lse })),
  };
}

/**
 * `session`, recording into `out` one `TokenLogprob` per `pick` (with `top` alternatives). Everything
 * else is the session's own; without `logprobs` on the engine, `feed` asks for the last logits so the
 * record can be computed from them (the caller still gets what it asked for).
 */
export function recordLogprobs(
  session: EngineSession,
  vocab: number,
  top: number,
  out: TokenLogprob[],
): EngineSession {
  const own = typeof session.logprobs === "function";
  let pending = new Float32Array(0);
  const logprobs = (ids: readonly number[], n: number): TokenLogprobs =>
    own ? session.logprobs!(ids, n) : logSoftmax(pending, ids, n);
  return {
    get position() {
      return session.position;
    },
    get tokens() {
      return session.tokens;
    },
    async feed(tokens, wanted = "last") {
      if (own) return await session.feed(tokens, wanted);
      const logits = await session.feed(tokens, wanted === "all" ? "all" : "last");
      pending = logits.slice(logits.length - vocab);
      return wanted === "none" ? new Float32Array(0) : logits;
    },
    pick(options) {
      const id = session.pick(options);
      const r = logprobs([id], top);
      out.push({ id, logprob: r.of[0], top: r.top });
      return id;
    },
    seed: (seed) => session.seed(seed),
    logprobs,
    ...(session.save ? { save: () => session.save!() } : {}),
  };
}

/** A token's bytes as the APIs list them: none for a special token (BOS, EOS, `<|im_end|>`). */
export function tokenBytes(id: number, tokenizer: Tokenizer = byteTokenizer): number[] {
  return tokenizer.specials.includes(id) ? [] : [...tokenizer.tokenBytes(id)];
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * A token as text: a special's name, the token's own text when its bytes are whole UTF-8 characters,
 * else `bytes:\xNN...` (OpenAI's spelling for a token that splits a character).
 */
export function tokenText(id: number, tokenizer: Tokenizer = byteTokenizer): string {
  if (tokenizer.specials.includes(id)) return tokenizer.tokenText(id);
  const bytes = tokenizer.tokenBytes(id);
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return "bytes:" + [...bytes].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
  }
}

/** Chat completions' `logprobs`: `{ content: [{ token, logprob, bytes, top_logprobs }] }`. */
export function chatLogprobs(picks: readonly TokenLogprob[], tokenizer: Tokenizer = byteTokenizer) {
  const one = (id: number, logprob: number) => ({
    token: tokenText(id, tokenizer),
    logprob,
    bytes: tokenBytes(id, tokenizer),
  });
  return {
    content: picks.map((p) => ({
      ...one(p.id, p.logprob),
      top_logprobs: p.top.map((t) => one(t.id, t.logprob)),
    })),
  };
}

/**
 * Legacy completions' `logprobs`: parallel arrays, `top_logprobs` as `{ token: logprob }` maps and
 * `text_offset` each token's character offset, counted from `offset` (the prompt's length).
 */
export function completionLogprobs(
  picks: readonly TokenLogprob[],
  offset: number,
  tokenizer: Tokenizer = byteTokenizer,
) {
  const text_offset: number[] = [];
  for (const p of picks) text_offset.push(offset), (offset += utf16Units(tokenBytes(p.id, tokenizer)));
  const text = (id: number) => tokenText(id, tokenizer);
  return {
    tokens: picks.map((p) => text(p.id)),
    token_logprobs: picks.map((p) => p.logprob),
    top_logprobs: picks.map((p) => Object.fromEntries(p.top.map((t) => [text(t.id), t.logprob]))),
    text_offset,
  };
}

/**
 * How many UTF-16 units of text a token's bytes start: 1 for each ASCII byte and 2- or 3-byte lead, 2
 * for each 4-byte lead (a character is counted where its first byte is).
 */
function utf16Units(bytes: readonly number[]): number {
  let n = 0;
  for (const b of bytes) n += b < 0x80 || (b >= 0xc0 && b < 0xf0) ? 1 : b >= 0xf0 ? 2 : 0;
  return n;
}

/** llama.cpp's `completion_probabilities` (its `n_probs`): each pick with its id and top list. */
export function completionProbabilities(
  picks: readonly TokenLogprob[],
  tokenizer: Tokenizer = byteTokenizer,
) {
  const one = (id: number, logprob: number) => ({
    id,
    token: tokenText(id, tokenizer),
    bytes: tokenBytes(id, tokenizer),
    logprob,
  });
  return picks.map((p) => ({
    ...one(p.id, p.logprob),
    top_logprobs: p.top.map((t) => one(t.id, t.logprob)),
  }));
}

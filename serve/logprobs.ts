/**
 * Log-probabilities of the tokens a reply picks, for OpenAI's `logprobs` and llama.cpp's
 * `completion_probabilities`. `recordLogprobs` wraps an engine session so that every `pick` also records
 * the picked token's log-probability and the `top` most likely tokens of the same distribution: the
 * engine's own `EngineSession.logprobs` when it has one, else a log-softmax of the float logits `feed`
 * returns (so any engine answers). The shapes below turn the records into each API's JSON.
 *
 * @example
 * ```ts
 * const picks: TokenLogprob[] = [];
 * const s = recordLogprobs(engine.start(), engine.config.vocab_size, 5, picks);
 * await s.feed(encode("The", { bos: true })); s.pick({ temperature: 0 });
 * chatLogprobs(picks); // { content: [{ token: " ", logprob: -0.4, bytes: [32], top_logprobs: [...] }] }
 * ```
 * @module
 */
import type { EngineSession, TokenLogprobs } from "../model/engine.ts";
import { BOS, BOS_TOKEN, EOS, EOS_TOKEN } from "../model/tokenizer.ts";

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

/** A token's bytes (none for BOS and EOS). */
export function tokenBytes(id: number): number[] {
  return id < 256 ? [id] : [];
}

/** A token as text: its character, a special's name, or `bytes:\xNN` for a byte that is not one on its own. */
export function tokenText(id: number): string {
  if (id === BOS) return BOS_TOKEN;
  if (id === EOS) return EOS_TOKEN;
  if (id < 0x80) return String.fromCharCode(id);
  return `bytes:\\x${id.toString(16).padStart(2, "0")}`;
}

/** Chat completions' `logprobs`: `{ content: [{ token, logprob, bytes, top_logprobs }] }`. */
export function chatLogprobs(picks: readonly TokenLogprob[]) {
  const one = (id: number, logprob: number) => ({ token: tokenText(id), logprob, bytes: tokenBytes(id) });
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
export function completionLogprobs(picks: readonly TokenLogprob[], offset: number) {
  const text_offset: number[] = [];
  for (const p of picks) text_offset.push(offset), (offset += utf16Units(p.id));
  return {
    tokens: picks.map((p) => tokenText(p.id)),
    token_logprobs: picks.map((p) => p.logprob),
    top_logprobs: picks.map((p) => Object.fromEntries(p.top.map((t) => [tokenText(t.id), t.logprob]))),
    text_offset,
  };
}

/** How many UTF-16 units of text a byte starts: 1 for ASCII and a 2- or 3-byte lead, 2 for a 4-byte lead. */
function utf16Units(id: number): number {
  if (id < 0x80 || (id >= 0xc0 && id < 0xf0)) return 1;
  return id >= 0xf0 && id < 256 ? 2 : 0;
}

/** llama.cpp's `completion_probabilities` (its `n_probs`): each pick with its id and top list. */
export function completionProbabilities(picks: readonly TokenLogprob[]) {
  const one = (id: number, logprob: number) => ({ id, token: tokenText(id), bytes: tokenBytes(id), logprob });
  return picks.map((p) => ({
    ...one(p.id, p.logprob),
    top_logprobs: p.top.map((t) => one(t.id, t.logprob)),
  }));
}

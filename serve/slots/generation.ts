/**
 * One reply on one engine session: feed the prompt, then pick, show and feed tokens until EOS, a stop
 * string, the token budget, or the caller's abort signal. Every generated token except a final EOS is
 * fed back, so the session afterwards holds the whole exchange and continues exactly where it stopped.
 *
 * Between tokens the loop yields to the event loop, so an abort (a slot worker's message, or a
 * disconnect where the engine runs on the caller's thread) and the stream's own writes are served while
 * a long reply runs: after the first token, then once ~4 ms of work has passed, one turn (next-turn.ts),
 * not a turn per token.
 *
 * @example
 * ```ts
 * import { generateReply } from "./generation.ts";
 * import type { Engine } from "../../model/engine.ts";
 * declare const engine: Engine;
 * const out: string[] = [];
 * const s = engine.start();
 * const r = await generateReply(engine, s, engine.tokenizer.encode("The jury", { bos: true }), { maxTokens: 32, sampling: {} }, (t) => {
 *   out.push(t);
 * });
 * r.finishReason; // "stop" | "length" | "abort"
 * ```
 * @module
 */
import type { Engine, EngineSession, SamplingOptions } from "../../model/engine.ts";
import { generateTokens } from "../../model/generate.ts";
import { recordLogprobs, type TokenLogprob } from "../openai/logprobs.ts";
import { nextTurn } from "./next-turn.ts";
import { createStopMatcher } from "./stop.ts";

/** How one reply is generated. */
export interface ReplyOptions {
  maxTokens: number;
  sampling: SamplingOptions;
  /** Reseed the session's sampler first; absent keeps its state (a continued session's stream). */
  seed?: number;
  stop?: readonly string[];
  signal?: AbortSignal;
  /** Record each shown token's log-probability with this many alternatives (absent: none recorded). */
  logprobs?: number;
  /** Called as each token is generated (for timing). */
  onToken?: () => void;
  /** Told how far the prompt has been read, after each piece of it (`PROMPT_PIECE`). */
  onPrompt?: (progress: PromptProgress) => void;
  /** Prompt tokens fed between two looks at the signal (default `PROMPT_PIECE`). */
  promptPiece?: number;
}

/**
 * How far a prompt has been read, as llama.cpp's server streams it (`prompt_progress`): `total` prompt
 * tokens, `cache` of them reused from a held state, `processed` read so far (the cached ones included).
 */
export interface PromptProgress {
  total: number;
  cache: number;
  processed: number;
}

/**
 * Prompt tokens fed between two looks at the abort signal and the event loop: a stop during a long
 * prompt is heard within one piece (at Qwen3-0.6B's shape on the integer engine, about 3 s of 300 tokens'
 * 25 s), where it used to wait for the whole prompt. A multiple of the engines' prefill batch (16).
 */
export const PROMPT_PIECE = 64;

/** How a reply went. */
export interface ReplyResult {
  text: string;
  completionTokens: number;
  /** The reply's tokens as generated (each fed back; EOS is not). */
  ids: number[];
  /** `stop`: EOS or a stop string; `length`: the budget; `abort`: the caller went away. */
  finishReason: "stop" | "length" | "abort";
  /** The shown tokens' log-probabilities, when asked for. */
  logprobs?: TokenLogprob[];
}

/**
 * How much work may pass between yields: short enough that aborts and other requests do not wait
 * noticeably, long enough that the turns (and the stream's joined writes, serve/openai/sse.ts) stay a small
 * part of a fast model's reply (docs/chat-server.md, "Speed": 4 ms did no worse than 2 on Deno).
 */
const YIELD_EVERY_MS = 4;

/**
 * A pause for the event loop, taken after the first token (so it reaches the client at once) and then
 * once `YIELD_EVERY_MS` of work has passed since the last.
 */
function pacer(): () => Promise<void> {
  let last = -Infinity;
  return async () => {
    if (performance.now() - last < YIELD_EVERY_MS) return;
    await nextTurn();
    last = performance.now();
  };
}

/**
 * Feeds `prompt` to `session` (the prompt may be empty when a restored session continues) and generates
 * up to `maxTokens` tokens with the shared loop (model/generate.ts), calling `onText` with each piece
 * of text as soon as it is settled (and the log-probabilities of the tokens it completes, when asked).
 * The caller makes sure the context has room for all of them.
 */
export async function generateReply(
  engine: Engine,
  session: EngineSession,
  prompt: readonly number[],
  opts: ReplyOptions,
  onText?: (text: string, logprobs: TokenLogprob[]) => void | Promise<void>,
): Promise<ReplyResult> {
  const decode = engine.tokenizer.streamDecoder();
  const stops = createStopMatcher(opts.stop ?? []);
  const picks: TokenLogprob[] = [], before: number[] = [], shownPicks: TokenLogprob[] = [];
  const ids: number[] = [];
  let text = "", decoded = 0, count = 0, stopped = false;
  const pause = pacer();
  let finishReason: ReplyResult["finishReason"] = "stop"; // the loop ending early means EOS
  const show = async (piece: string) => {
    if (piece === "") return;
    text += piece;
    // A pick is shown once text past where its own text begins is (a character's bytes go together).
    const released: TokenLogprob[] = [];
    while (shownPicks.length < before.length && before[shownPicks.length] < text.length) {
      released.push(picks[shownPicks.length]);
      shownPicks.push(picks[shownPicks.length]);
    }
    await onText?.(piece, released);
  };
  const generating = opts.logprobs === undefined
    ? session
    : recordLogprobs(session, engine.config.vocab_size, opts.logprobs, picks);
  const tokens = generateTokens(engine, prompt, {
    ...opts.sampling,
    maxTokens: opts.maxTokens,
    seed: opts.seed,
    session: generating,
    promptPiece: opts.promptPiece ?? PROMPT_PIECE,
    onPrompt: async (fed, total) => {
      opts.onPrompt?.({ total, cache: 0, processed: fed });
      await pause();
    },
    signal: opts.signal,
  });
  for await (const id of tokens) {
    count++;
    ids.push(id);
    opts.onToken?.();
    const piece = decode(id);
    if (opts.logprobs !== undefined) before.push(decoded);
    decoded += piece.length;
    const step = stops.push(piece);
    await show(step.text);
    if (step.stopped) {
      stopped = true;
      break;
    }
    if (count === opts.maxTokens) {
      finishReason = "length";
      break;
    }
    await pause();
    if (opts.signal?.aborted) {
      finishReason = "abort";
      break;
    }
  }
  // Stopped while the prompt was read: no token came.
  if (count === 0 && opts.signal?.aborted) finishReason = "abort";
  if (!stopped) await show(stops.flush()); // EOS or the budget: what was held back for a stop is text
  return {
    text,
    completionTokens: count,
    ids,
    finishReason,
    ...(opts.logprobs === undefined ? {} : { logprobs: shownPicks }),
  };
}

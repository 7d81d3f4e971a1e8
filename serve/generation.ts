/**
 * One reply on one engine session: feed the prompt, then pick, show and feed tokens until EOS, a stop
 * string, the token budget, or the caller's abort signal. Every generated token except a final EOS is
 * fed back, so the session afterwards holds the whole exchange and continues exactly where it stopped.
 *
 * Between tokens the loop yields to the event loop, so other requests, disconnects and the stream's own
 * writes are served while a long reply runs: once ~2 ms of work has passed, one macrotask turn without
 * a timer (`setImmediate` on Bun, a `MessageChannel` message on Deno: microseconds each), not
 * `setTimeout(0)` per token (about 1 ms on Bun, 2.3 ms on Deno and more under load: slower than a token
 * of the default model).
 *
 * @example
 * ```ts
 * const s = engine.start();
 * const r = await generateReply(engine, s, engine.tokenizer.encode("The jury", { bos: true }), { maxTokens: 32, sampling: {} }, (t) => out.push(t));
 * r.finishReason; // "stop" | "length" | "abort"
 * ```
 * @module
 */
import type { Engine, EngineSession, SamplingOptions } from "../model/engine.ts";
import { generateTokens } from "../model/generate.ts";
import { recordLogprobs, type TokenLogprob } from "./logprobs.ts";
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
}

/** How a reply went. */
export interface ReplyResult {
  text: string;
  completionTokens: number;
  /** `stop`: EOS or a stop string; `length`: the budget; `abort`: the caller went away. */
  finishReason: "stop" | "length" | "abort";
  /** The shown tokens' log-probabilities, when asked for. */
  logprobs?: TokenLogprob[];
}

/**
 * A macrotask turn without a timer. On Bun, `setImmediate`: its turn runs timers and flushes sockets,
 * which Bun's message turns do not (a stream reached the browser only at its end). On Deno, a message
 * posted to ourselves on a `MessageChannel`: `setImmediate` there does not let the HTTP layer run
 * (streaming ran at half speed), a message turn does, timers included. The port holds the process open
 * only while a reply is generating (`ref`/`unref` once per reply: per token it cost Deno a third).
 */
let channel: MessageChannel | undefined;
const pending: Array<() => void> = [];
let replies = 0;
type Port = MessagePort & { ref?(): void; unref?(): void };
function port(): Port {
  if (!channel) {
    channel = new MessageChannel();
    channel.port1.onmessage = () => pending.shift()?.();
    (channel.port1 as Port).unref?.();
  }
  return channel.port1 as Port;
}
/** Holds the port open for one reply; the returned function lets it go. */
function holdPort(): () => void {
  if (replies++ === 0) port().ref?.();
  return () => {
    if (--replies === 0) port().unref?.();
  };
}
/** Bun: `setImmediate`, whose turn runs timers and flushes sockets (its message turns do neither). */
const isBun = "Bun" in globalThis;
function macrotask(): Promise<void> {
  if (isBun) return new Promise((resolve) => setImmediate(resolve));
  port();
  return new Promise((resolve) => {
    pending.push(resolve);
    channel!.port2.postMessage(null);
  });
}
/** How much work may pass between yields: short enough for aborts and other requests not to wait. */
const YIELD_EVERY_MS = 2;

/** A pause for the event loop, taken only once `YIELD_EVERY_MS` of work has passed since the last. */
function pacer(): () => Promise<void> {
  let last = performance.now();
  return async () => {
    if (performance.now() - last < YIELD_EVERY_MS) return;
    await macrotask();
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
  });
  const release = holdPort();
  try {
    for await (const id of tokens) {
      count++;
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
  } finally {
    release();
  }
  if (!stopped) await show(stops.flush()); // EOS or the budget: what was held back for a stop is text
  return {
    text,
    completionTokens: count,
    finishReason,
    ...(opts.logprobs === undefined ? {} : { logprobs: shownPicks }),
  };
}

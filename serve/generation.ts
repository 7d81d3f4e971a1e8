/**
 * One reply on one engine session: feed the prompt, then pick, show and feed tokens until EOS, a stop
 * string, the token budget, or the caller's abort signal. Every generated token except a final EOS is
 * fed back, so the session afterwards holds the whole exchange and continues exactly where it stopped.
 *
 * Between tokens the loop yields to the event loop (one macrotask), so other requests, disconnects and
 * the stream's own writes are served while a long reply runs.
 *
 * @example
 * ```ts
 * const s = engine.start();
 * const r = await generateReply(s, encode("The jury", { bos: true }), { maxTokens: 32, sampling: {} }, (t) => out.push(t));
 * r.finishReason; // "stop" | "length" | "abort"
 * ```
 * @module
 */
import type { EngineSession, SamplingOptions } from "../model/engine.ts";
import { createStreamDecoder, EOS } from "../model/tokenizer.ts";
import { createStopMatcher } from "./stop.ts";

/** How one reply is generated. */
export interface ReplyOptions {
  maxTokens: number;
  sampling: SamplingOptions;
  /** Reseed the session's sampler first; absent keeps its state (a continued session's stream). */
  seed?: number;
  stop?: readonly string[];
  signal?: AbortSignal;
}

/** How a reply went. */
export interface ReplyResult {
  text: string;
  completionTokens: number;
  /** `stop`: EOS or a stop string; `length`: the budget; `abort`: the caller went away. */
  finishReason: "stop" | "length" | "abort";
  /** Milliseconds from the start to the first token picked (prefill included). */
  firstTokenMs: number;
}

const nextTick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Feeds `prompt` (which may be empty when a restored session continues) and generates up to
 * `maxTokens` tokens, calling `onText` with each piece of shown text as soon as it is settled.
 * The caller makes sure the context has room: position + prompt + maxTokens <= context.
 */
export async function generateReply(
  session: EngineSession,
  prompt: readonly number[],
  opts: ReplyOptions,
  onText?: (text: string) => void | Promise<void>,
): Promise<ReplyResult> {
  const t0 = performance.now();
  if (opts.seed !== undefined) session.seed(opts.seed);
  if (prompt.length > 0) await session.feed(prompt);
  const decode = createStreamDecoder();
  const stops = createStopMatcher(opts.stop ?? []);
  let text = "", count = 0, firstTokenMs = 0;
  let finishReason: ReplyResult["finishReason"] = "length";
  const show = async (piece: string) => {
    if (piece === "") return;
    text += piece;
    await onText?.(piece);
  };
  while (count < opts.maxTokens) {
    if (opts.signal?.aborted) {
      finishReason = "abort";
      break;
    }
    const id = session.pick(opts.sampling);
    if (count === 0) firstTokenMs = performance.now() - t0;
    if (id === EOS) {
      finishReason = "stop";
      break;
    }
    count++;
    await session.feed([id]);
    const step = stops.push(decode(id));
    await show(step.text);
    if (step.stopped) {
      finishReason = "stop";
      break;
    }
    await nextTick();
  }
  if (finishReason !== "stop") await show(stops.flush());
  return { text, completionTokens: count, finishReason, firstTokenMs };
}

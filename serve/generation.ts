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
 * const r = await generateReply(engine, s, encode("The jury", { bos: true }), { maxTokens: 32, sampling: {} }, (t) => out.push(t));
 * r.finishReason; // "stop" | "length" | "abort"
 * ```
 * @module
 */
import type { Engine, EngineSession, SamplingOptions } from "../model/engine.ts";
import { generateTokens } from "../model/generate.ts";
import { createStreamDecoder } from "../model/tokenizer.ts";
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
}

const nextTick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Feeds `prompt` to `session` (the prompt may be empty when a restored session continues) and generates
 * up to `maxTokens` tokens with the shared loop (model/generate.ts), calling `onText` with each piece
 * of text as soon as it is settled. The caller makes sure the context has room for all of them.
 */
export async function generateReply(
  engine: Engine,
  session: EngineSession,
  prompt: readonly number[],
  opts: ReplyOptions,
  onText?: (text: string) => void | Promise<void>,
): Promise<ReplyResult> {
  const decode = createStreamDecoder();
  const stops = createStopMatcher(opts.stop ?? []);
  let text = "", count = 0;
  let finishReason: ReplyResult["finishReason"] = "stop"; // the loop ending early means EOS
  const show = async (piece: string) => {
    if (piece === "") return;
    text += piece;
    await onText?.(piece);
  };
  const tokens = generateTokens(engine, prompt, {
    ...opts.sampling,
    maxTokens: opts.maxTokens,
    seed: opts.seed,
    session,
  });
  for await (const id of tokens) {
    count++;
    const step = stops.push(decode(id));
    await show(step.text);
    if (step.stopped) break;
    if (count === opts.maxTokens) {
      finishReason = "length";
      break;
    }
    await nextTick();
    if (opts.signal?.aborted) {
      finishReason = "abort";
      break;
    }
  }
  if (finishReason !== "stop") await show(stops.flush());
  return { text, completionTokens: count, finishReason };
}

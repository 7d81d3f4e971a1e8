/**
 * One job on one slot, the same in the server's thread (`--parallel 1`) and in a slot worker: feed the
 * prompt, keep the state there for the prompt cache when asked, generate the reply with
 * serve/generation.ts, and keep the final state (for the cache and for `save_session`). Everything in
 * and out is plain data, so a job crosses to a worker and its result comes back by message.
 *
 * @example
 * ```ts
 * const r = await runJob(engine, engine.start(), { prompt, maxTokens: 16, sampling: {}, stop: ["\n"], keep: true, saveEnd: false }, signal, onText);
 * r.promptState; // { tokens, bytes }: the state after the prompt, for the cache
 * ```
 * @module
 */
import type { Engine, EngineSession } from "../model/engine.ts";
import { generateReply, type ReplyOptions, type ReplyResult } from "./generation.ts";
import type { TokenLogprob } from "./logprobs.ts";

/** Where a reply's text goes as it is generated, with its tokens' log-probabilities when asked. */
export type OnText = (piece: string, picks: TokenLogprob[]) => void | Promise<void>;

/** What one slot is asked to do. */
// Callbacks stay on the caller's side: a job crosses to a worker as plain data.
export interface SlotJob extends Omit<ReplyOptions, "signal" | "onToken"> {
  /** The new tokens to feed the session before generating. */
  prompt: number[];
  /** Return the states after the prompt and after the reply, for the prompt cache. */
  keep: boolean;
  /** Return the state after the reply (for `save_session`), unless the reply was aborted. */
  saveEnd: boolean;
}

/** A session state: the tokens it holds and its bytes. */
export interface SlotState {
  tokens: number[];
  bytes: Uint8Array;
}

/** How a job went: the reply, and the states asked for. */
export interface SlotResult extends ReplyResult {
  /** The state once the prompt was fed (with `keep`, when there was a prompt). */
  promptState?: SlotState;
  /** The state after the reply (with `keep` or `saveEnd`, unless aborted). */
  endState?: SlotState;
}

/** Runs `job` on `session` (fresh, restored, or a cached state); the session holds the exchange after. */
export async function runJob(
  engine: Engine,
  session: EngineSession,
  job: SlotJob,
  signal: AbortSignal | undefined,
  onText?: OnText,
): Promise<SlotResult> {
  const canSave = typeof session.save === "function";
  const state = (): SlotState => ({ tokens: [...session.tokens], bytes: session.save!() });
  let promptState: SlotState | undefined;
  let prompt = job.prompt;
  if (job.keep && canSave && prompt.length > 0) {
    // Fed here rather than by generateTokens so the state between prompt and reply can be kept; the
    // caller has checked the room, so generateTokens would have fed exactly these tokens first.
    await session.feed(prompt, "none");
    promptState = state();
    prompt = [];
  }
  const r = await generateReply(engine, session, prompt, { ...job, signal }, onText);
  const wantEnd = (job.keep || job.saveEnd) && canSave && r.finishReason !== "abort";
  return { ...r, promptState, endState: wantEnd ? state() : undefined };
}

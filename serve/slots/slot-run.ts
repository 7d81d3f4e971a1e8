/**
 * One job on one slot, the same in the server's thread (`--parallel 1`) and in a slot worker: cut the
 * session back to what the caller keeps of it, feed the prompt and generate the reply with
 * serve/slots/generation.ts, and keep the final state for the prompt cache and for `save_session`. Everything
 * in and out is plain data, so a job crosses to a worker and its result comes back by message.
 *
 * @example
 * ```ts
 * import { type OnText, runJob } from "./slot-run.ts";
 * import type { Engine, EngineSession } from "../../model/engine.ts";
 * declare const engine: Engine, session: EngineSession, prompt: number[];
 * declare const signal: AbortSignal, onText: OnText;
 * const r = await runJob(engine, session, { prompt, rewind: 12, maxTokens: 16, sampling: {}, stop: ["\n"], keep: true, saveEnd: false }, signal, onText);
 * r.endState; // { tokens, bytes }: the state after the reply, for the cache
 * r.held;     // the tokens the session holds now (the slot keeps it for the next job)
 * ```
 * @module
 */
import type { Engine, EngineSession } from "../../model/engine.ts";
import { generateReply, type ReplyOptions, type ReplyResult } from "./generation.ts";
import type { TokenLogprob } from "../openai/logprobs.ts";

/** Where a reply's text goes as it is generated, with its tokens' log-probabilities when asked. */
export type OnText = (piece: string, picks: TokenLogprob[]) => void | Promise<void>;

/** What one slot is asked to do. */
// Callbacks stay on the caller's side: a job crosses to a worker as plain data.
export interface SlotJob extends Omit<ReplyOptions, "signal" | "onToken" | "onPrompt"> {
  /**
   * Keep only the session's first `rewind` tokens before feeding (`EngineSession.rewind`); the prompt
   * then holds at least one token, unless `rewind` is the session's whole length. Absent: keep it all.
   */
  rewind?: number;
  /** The new tokens to feed the session before generating. */
  prompt: number[];
  /** Return the state after the reply, for the prompt cache (an aborted reply's too: it is as valid). */
  keep: boolean;
  /** Return the state after the reply (for `save_session`), unless the reply was aborted. */
  saveEnd: boolean;
}

/** A session state: the tokens it holds and its bytes. */
export interface SlotState {
  tokens: number[];
  bytes: Uint8Array;
}

/** How a job went: the reply, the state asked for, and what the session holds now. */
export interface SlotResult extends ReplyResult {
  /** The state after the reply (with `keep`, or with `saveEnd` unless aborted). */
  endState?: SlotState;
  /**
   * Every token the session holds after the job, for matching the slot's next prompt; none when its
   * sessions cannot be rewound (then the slot starts each conversation afresh).
   */
  held: number[];
  /** Whether the engine's sessions can be rewound (`EngineSession.rewind`). */
  rewinds: boolean;
}

/** Runs `job` on `session` (fresh, restored, a cached state or the slot's last); the session holds the exchange after. */
export async function runJob(
  engine: Engine,
  session: EngineSession,
  job: SlotJob,
  signal: AbortSignal | undefined,
  onText?: OnText,
  onPrompt?: ReplyOptions["onPrompt"],
): Promise<SlotResult> {
  if (job.rewind !== undefined && job.rewind !== session.position) {
    if (!session.rewind) throw new Error(`the ${engine.kind} engine's sessions cannot be rewound`);
    session.rewind(job.rewind);
  }
  const r = await generateReply(engine, session, job.prompt, { ...job, signal, onPrompt }, onText);
  const canSave = typeof session.save === "function" && session.position > 0;
  const wantEnd = canSave && (job.keep || (job.saveEnd && r.finishReason !== "abort"));
  const endState = wantEnd ? { tokens: [...session.tokens], bytes: session.save!() } : undefined;
  const rewinds = typeof session.rewind === "function";
  return { ...r, endState, held: rewinds ? [...session.tokens] : [], rewinds };
}

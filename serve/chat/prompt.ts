/**
 * What a completion request feeds the engine, checked against the model's context: `precheck` refuses
 * what can be refused before waiting for the engine (limits that do not depend on a session), `prepare`
 * finds the session to generate on (a fresh one, or a stored one the request continues) and the new
 * tokens to feed it (through the model's tokenizer: serve/chat/chat-prompt.ts `promptIds`), and caps
 * `max_tokens` by the room left.
 *
 * @example
 * ```ts
 * import { precheck, prepare } from "./prompt.ts";
 * import type { ServerContext } from "../context.ts";
 * import { generateReply } from "../slots/generation.ts";
 * import type { CompletionRequest } from "../openai/requests.ts";
 * declare const ctx: ServerContext, req: CompletionRequest, text: string; // text: the request's prompt
 * precheck(ctx, req, text, "prompt", false);         // before the queue
 * const p = await prepare(ctx, req, text, "prompt", false); // on the engine's turn
 * generateReply(ctx.engine, p.session ?? ctx.engine.start(), p.prompt, { maxTokens: p.maxTokens, sampling: req.sampling });
 * ```
 * @module
 */
import type { EngineSession } from "../../model/engine.ts";
import { promptIds } from "./chat-prompt.ts";
import { type ServerContext, sessionsOf, storedSession } from "../context.ts";
import { ApiError } from "../errors.ts";
import type { GenerationFields } from "../openai/requests.ts";

/** A generation ready to run: the session, the tokens to feed it, and the token budget. */
export interface Prepared {
  /**
   * The stored session a request continues; absent for a fresh conversation, which whoever runs it
   * starts (a slot worker its own session, a prompt-cache hit a restored one): starting one here only to
   * drop it cost each request a KV state's allocation (0.3–0.5 ms under Deno).
   */
  session?: EngineSession;
  prompt: number[];
  maxTokens: number;
}

function refuseLength(ctx: ServerContext, field: string, tokens: number): never {
  throw new ApiError(
    400,
    `${field}: ${tokens} tokens leave no room in the model's context of ${ctx.contextLength}`,
    field,
    "context_length_exceeded",
  );
}

/** Refuses, before the queue, a request that cannot fit or asks for sessions a server lacks. */
export function precheck(
  ctx: ServerContext,
  req: GenerationFields,
  text: string,
  field: string,
  chat: boolean,
  replies: readonly string[] = [],
): void {
  if (req.maxTokens !== undefined && req.maxTokens > ctx.contextLength) {
    throw new ApiError(
      400,
      `max_tokens: ${req.maxTokens} is more than the model's context of ${ctx.contextLength}`,
      "max_tokens",
      "invalid_value",
    );
  }
  const tokens = promptIds(ctx, text, chat ? "chat" : "completion", replies).length;
  if (req.session === undefined && tokens >= ctx.contextLength) refuseLength(ctx, field, tokens);
  if (req.saveSession || req.session !== undefined) sessionsOf(ctx);
}

/**
 * The tokens a chat adds to a stored session: the chat is rendered whole, and the session must be
 * exactly its beginning.
 */
function chatContinuation(
  ctx: ServerContext,
  session: EngineSession,
  text: string,
  id: string,
  replies: readonly string[],
): number[] {
  const full = promptIds(ctx, text, "chat", replies);
  const had = session.tokens;
  if (had.length > full.length || had.some((t, i) => t !== full[i])) {
    throw new ApiError(
      400,
      `messages: the conversation does not continue session ${id} (${
        JSON.stringify(ctx.tokenizer.decode(had, { specials: true }).slice(-40))
      } ...)`,
      "messages",
      "session_mismatch",
    );
  }
  return full.slice(had.length);
}

/** The session to generate on and the new tokens to feed it, checked against the context. */
export async function prepare(
  ctx: ServerContext,
  req: GenerationFields,
  text: string,
  field: string,
  chat: boolean,
  replies: readonly string[] = [],
): Promise<Prepared> {
  let session: EngineSession | undefined, prompt: number[];
  if (req.session !== undefined) {
    session = await storedSession(ctx, req.session);
    prompt = chat
      ? chatContinuation(ctx, session, text, req.session, replies)
      : promptIds(ctx, text, "continuation");
  } else {
    prompt = promptIds(ctx, text, chat ? "chat" : "completion", replies);
  }
  const position = session?.position ?? 0;
  const room = ctx.contextLength - position - prompt.length;
  if (room < 1) refuseLength(ctx, field, position + prompt.length);
  return { session, prompt, maxTokens: Math.min(req.maxTokens ?? ctx.defaultMaxTokens, room) };
}

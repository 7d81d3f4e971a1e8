/**
 * What every route module is handed: the engine, the session store, the generation slots and the
 * server's limits, in one small object built once by `createApp`. Also here, because the session
 * routes and the completion routes both need them: the gate that answers 501 when sessions are not
 * available, and restoring a session with its refusals.
 *
 * @example
 * ```ts
 * import { createServerContext, sessionsOf, storedSession } from "./context.ts";
 * import type { Engine } from "../model/engine.ts";
 * import type { SessionStore } from "./sessions/session-store.ts";
 * declare const engine: Engine, sessions: SessionStore, id: string; // id: a stored session's
 * const ctx = createServerContext({ engine, sessions });
 * const store = sessionsOf(ctx);                 // or throws ApiError 501
 * const session = await storedSession(ctx, id);  // or throws 404 / 400
 * ```
 * @module
 */
import { contextLength, type Engine, type EngineSession } from "../model/engine.ts";
import type { ChatTemplate } from "../model/chat-template.ts";
import { byteTokenizer } from "../model/tokenizer.ts";
import type { Tokenizer } from "../model/tokenizer-types.ts";
import { ApiError } from "./errors.ts";
import { createMetrics, type Load, type Metrics } from "./metrics.ts";
import type { SessionStore } from "./sessions/session-store.ts";
import { createSlots, type Slots } from "./slots/slots.ts";
import { createReplyTokens, type ReplyTokens } from "./chat/reply-tokens.ts";
import type { GuardOptions } from "./guard.ts";

/** What the app is handed; the Host, Origin, CORS and API key options are serve/guard.ts's. */
export interface ChatAppOptions extends GuardOptions {
  engine: Engine;
  /** Where sessions are saved; without it the session endpoints answer 501. */
  sessions?: SessionStore;
  /** Requests that may wait behind the running generation before new ones get 429 (default 8). */
  queueLimit?: number;
  /** The generation slots (serve/slots/slots.ts); default: one, on this thread, with `queueLimit`. */
  slots?: Slots;
  /** Largest JSON request body in bytes (default 256 KiB). */
  maxBodyBytes?: number;
  /** Largest uploaded session file in bytes (default 64 MiB). */
  maxSessionBytes?: number;
  /** `max_tokens` when a request gives none (default 256, always capped by the room left in the context). */
  defaultMaxTokens?: number;
}

/** The shared state of one app. */
export interface ServerContext {
  readonly engine: Engine;
  /** The model's tokenizer (`engine.tokenizer`): every prompt, token list and logprob goes through it. */
  readonly tokenizer: Tokenizer;
  /** The model's own chat template, when its tokenizer files carry one; else chats are transcripts. */
  readonly template?: ChatTemplate;
  /** The store, when there is one and the engine can restore sessions. */
  readonly sessions?: SessionStore;
  /** Where replies run: the slots, their queue and the prompt cache. */
  readonly slots: Slots;
  /** The model's name in `/v1/models` and in every reply: the export's file name. */
  readonly modelId: string;
  /** The model's context length in tokens. */
  readonly contextLength: number;
  readonly defaultMaxTokens: number;
  readonly maxBodyBytes: number;
  readonly maxSessionBytes: number;
  readonly metrics: Metrics;
  /** Recent chat replies' tokens as generated, spliced back into the prompts that resend them. */
  readonly replies: ReplyTokens;
  /** Requests generating now and requests waiting for their turn (for `/metrics`). */
  load(): Load;
}

/**
 * The context for `opts`, every default filled in, with the model's parsed chat template (serve/app.ts
 * parses it; this module imports no template engine, so the browser tab's worker can load it).
 */
export function createServerContext(opts: ChatAppOptions, template?: ChatTemplate): ServerContext {
  const { engine } = opts;
  const tokenizer = engine.tokenizer ?? byteTokenizer;
  const canRestore = typeof engine.restore === "function";
  const slots = opts.slots ?? createSlots(engine, { queueLimit: opts.queueLimit ?? 8 });
  return {
    engine,
    tokenizer,
    template,
    sessions: canRestore ? opts.sessions : undefined,
    slots,
    load: () => slots.load(),
    metrics: createMetrics(),
    replies: createReplyTokens(),
    modelId: engine.source.split(/[\\/]/).filter(Boolean).at(-1) ?? engine.source,
    contextLength: contextLength(engine),
    defaultMaxTokens: opts.defaultMaxTokens ?? 256,
    maxBodyBytes: opts.maxBodyBytes ?? 256 * 1024,
    maxSessionBytes: opts.maxSessionBytes ?? 64 << 20,
  };
}

/** The session store, or a 501 when this server has none (or its engine cannot restore sessions). */
export function sessionsOf(ctx: ServerContext): SessionStore {
  if (!ctx.sessions) {
    throw new ApiError(
      501,
      `sessions are not available on this server (engine ${ctx.engine.kind})`,
      "session",
      "sessions_unavailable",
    );
  }
  return ctx.sessions;
}

/** The stored bytes of session `id`, or a 404. */
export async function storedBytes(ctx: ServerContext, id: string): Promise<Uint8Array<ArrayBuffer>> {
  const bytes = await sessionsOf(ctx).get(id);
  if (!bytes) {
    throw new ApiError(404, `session: no session ${JSON.stringify(id)}`, "session", "session_not_found");
  }
  return bytes;
}

/** Session bytes restored on the engine; bytes it refuses are a 400 naming `session`. */
export function restoreBytes(ctx: ServerContext, bytes: Uint8Array, where: string): EngineSession {
  try {
    return ctx.engine.restore!(bytes, where);
  } catch (e) {
    throw new ApiError(400, `session: ${(e as Error).message}`, "session", "invalid_session");
  }
}

/** Stored session `id`, restored on the engine. */
export async function storedSession(ctx: ServerContext, id: string): Promise<EngineSession> {
  return restoreBytes(ctx, await storedBytes(ctx, id), `session ${id}`);
}

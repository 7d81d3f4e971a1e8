/**
 * The chat server: a Hono app handed its engine from outside. It speaks the OpenAI endpoints local
 * clients expect (`GET /v1/models`, `POST /v1/completions`, `POST /v1/chat/completions`, streamed as
 * server-sent events or answered as one JSON body), stores and restores sessions, and serves the chat
 * page at `/`. Every refusal is an `ApiError` mapped to OpenAI's error shape in `onError`, the one
 * place errors become responses.
 *
 * It uses nothing of an engine but `model/engine.ts`, so the integer, float and WebGPU engines serve
 * the same way; `scripts/chat.ts` picks one and starts the listener.
 *
 * @example
 * ```ts
 * const app = createApp({ engine: await loadEngine("out/ferry.q4.lut4"), sessions: await createSessionStore("out/sessions") });
 * Deno.serve({ hostname: "127.0.0.1", port: 8080 }, app.fetch);
 * const res = await app.request("/v1/models");
 * ```
 * @module
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import type { Context } from "hono";
import { readFileSync } from "node:fs";
import type { Engine, EngineSession } from "../model/engine.ts";
import { decode, encode } from "../model/tokenizer.ts";
import { ApiError, errorBody } from "./errors.ts";
import { generateReply, type ReplyResult } from "./generation.ts";
import { createQueue } from "./queue.ts";
import {
  type ChatRequest,
  type CompletionRequest,
  type GenerationFields,
  readChatRequest,
  readCompletionRequest,
} from "./requests.ts";
import type { SessionStore } from "./session-store.ts";
import { openAIStream } from "./sse.ts";
import { CHAT_STOP, parseTranscript, renderChat } from "./transcript.ts";

/** What the app is handed. */
export interface ChatAppOptions {
  engine: Engine;
  /** Where sessions are saved; without it the session endpoints answer 501. */
  sessions?: SessionStore;
  /** Requests that may wait behind the running generation before new ones get 429 (default 8). */
  queueLimit?: number;
  /** Largest JSON request body in bytes (default 256 KiB). */
  maxBodyBytes?: number;
  /** Largest uploaded session file in bytes (default 64 MiB). */
  maxSessionBytes?: number;
  /** `max_tokens` when a request gives none (default 256, always capped by the room left in the context). */
  defaultMaxTokens?: number;
}

interface Prepared {
  session: EngineSession;
  prompt: number[];
  maxTokens: number;
}

const PAGE_FILES: Record<string, [string, string]> = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/page/style.css": ["style.css", "text/css; charset=utf-8"],
  "/page/chat.js": ["chat.js", "text/javascript; charset=utf-8"],
};

/** Builds the app around `engine`. Serve it with `Deno.serve(app.fetch)` or `Bun.serve({ fetch: app.fetch })`. */
export function createApp(opts: ChatAppOptions): Hono {
  const { engine, sessions } = opts;
  const context = engine.config.max_position_embeddings;
  const defaultMaxTokens = opts.defaultMaxTokens ?? 256;
  const queue = createQueue(opts.queueLimit ?? 8);
  const modelId = engine.source.split(/[\\/]/).filter(Boolean).at(-1) ?? engine.source;
  const canSave = typeof engine.restore === "function";
  const pages = Object.fromEntries(
    Object.entries(PAGE_FILES).map(([route, [file, type]]) => [
      route,
      { body: readFileSync(new URL(`./page/${file}`, import.meta.url)), type },
    ]),
  );
  // A running average of reply time, for the Retry-After a full queue sends.
  let replyMs = 2000;

  const app = new Hono();

  app.onError((err, c) => {
    if (err instanceof ApiError) {
      for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
      return c.json(errorBody(err.status, err.message, err.param, err.code), err.status as 400);
    }
    if (err instanceof HTTPException) return c.json(errorBody(err.status, err.message), err.status);
    console.error(err);
    return c.json(errorBody(500, "internal error: " + (err.message || String(err))), 500);
  });
  app.notFound((c) => c.json(errorBody(404, `no route ${c.req.method} ${c.req.path}`), 404));

  const jsonLimit = bodyLimit({
    maxSize: opts.maxBodyBytes ?? 256 * 1024,
    onError: () => {
      throw new ApiError(
        413,
        `request body is larger than ${opts.maxBodyBytes ?? 256 * 1024} bytes`,
        null,
        "body_too_large",
      );
    },
  });
  const sessionLimit = bodyLimit({
    maxSize: opts.maxSessionBytes ?? 64 << 20,
    onError: () => {
      throw new ApiError(
        413,
        `session file is larger than ${opts.maxSessionBytes ?? 64 << 20} bytes`,
        null,
        "body_too_large",
      );
    },
  });

  for (const [route, page] of Object.entries(pages)) {
    app.get(route, (c) => c.body(page.body, 200, { "Content-Type": page.type, "Cache-Control": "no-cache" }));
  }

  app.get("/v1/models", (c) =>
    c.json({
      object: "list",
      data: [{
        id: modelId,
        object: "model",
        created: 0,
        owned_by: "ferry",
        // ferry's own fields: what serves the model and how much context it has.
        engine: engine.kind,
        context_length: context,
        sessions: canSave && sessions !== undefined,
      }],
    }));

  // --- sessions -------------------------------------------------------------------------------------

  const store = (): SessionStore => {
    if (!sessions || !canSave) {
      throw new ApiError(
        501,
        `sessions are not available on this server (engine ${engine.kind})`,
        "session",
        "sessions_unavailable",
      );
    }
    return sessions;
  };

  const restore = async (id: string): Promise<EngineSession> => {
    const bytes = await store().get(id);
    if (!bytes) {
      throw new ApiError(404, `session: no session ${JSON.stringify(id)}`, "session", "session_not_found");
    }
    return restoreBytes(bytes, `session ${id}`);
  };

  const restoreBytes = (bytes: Uint8Array, where: string): EngineSession => {
    try {
      return engine.restore!(bytes, where);
    } catch (e) {
      throw new ApiError(400, `session: ${(e as Error).message}`, "session", "invalid_session");
    }
  };

  app.post("/v1/sessions", sessionLimit, async (c) => {
    const bytes = new Uint8Array(await c.req.arrayBuffer());
    const s = store();
    const session = restoreBytes(bytes, "uploaded session");
    const id = await s.put(bytes);
    const text = decode(session.tokens);
    return c.json(
      { id, object: "session", tokens: session.position, text, messages: parseTranscript(text) },
      201,
    );
  });

  app.get("/v1/sessions/:id", async (c) => {
    const id = c.req.param("id");
    const bytes = await store().get(id);
    if (!bytes) {
      throw new ApiError(404, `session: no session ${JSON.stringify(id)}`, "session", "session_not_found");
    }
    return c.body(bytes, 200, {
      "Content-Type": "application/octet-stream",
      "Content-Disposition": `attachment; filename="ferry-${id}.session"`,
    });
  });

  // --- generation -----------------------------------------------------------------------------------

  const readJson = async (c: Context): Promise<unknown> => {
    const text = await c.req.text();
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new ApiError(400, `body: not valid JSON (${(e as Error).message})`, "body", "invalid_json");
    }
  };

  const refuseLength = (field: string, tokens: number): never => {
    throw new ApiError(
      400,
      `${field}: ${tokens} tokens leave no room in the model's context of ${context}`,
      field,
      "context_length_exceeded",
    );
  };

  /** What can be refused before waiting for the engine: limits that do not depend on a session. */
  const precheck = (req: GenerationFields, text: string, field: string) => {
    if (req.maxTokens !== undefined && req.maxTokens > context) {
      throw new ApiError(
        400,
        `max_tokens: ${req.maxTokens} is more than the model's context of ${context}`,
        "max_tokens",
        "invalid_value",
      );
    }
    const tokens = encode(text, { bos: true }).length;
    if (req.session === undefined && tokens >= context) refuseLength(field, tokens);
    if (req.saveSession || req.session !== undefined) store();
  };

  /** The session to generate on and the new tokens to feed it, checked against the context. */
  const prepare = async (
    req: GenerationFields,
    text: string,
    field: string,
    chat: boolean,
  ): Promise<Prepared> => {
    let session: EngineSession, prompt: number[];
    if (req.session !== undefined) {
      session = await restore(req.session);
      if (chat) {
        // The chat is rendered whole; a stored session must be exactly its beginning.
        const full = encode(text, { bos: true });
        const had = session.tokens;
        if (had.length > full.length || had.some((t, i) => t !== full[i])) {
          throw new ApiError(
            400,
            `messages: the conversation does not continue session ${req.session} (${
              JSON.stringify(decode(had).slice(-40))
            } ...)`,
            "messages",
            "session_mismatch",
          );
        }
        prompt = full.slice(had.length);
      } else prompt = encode(text);
    } else {
      session = engine.start();
      prompt = encode(text, { bos: true });
    }
    const room = context - session.position - prompt.length;
    if (room < 1) refuseLength(field, session.position + prompt.length);
    return { session, prompt, maxTokens: Math.min(req.maxTokens ?? defaultMaxTokens, room) };
  };

  /** Waits for the engine, or refuses at once with 429 when the line is full. */
  const turn = async (signal: AbortSignal): Promise<() => void> => {
    let leave: (() => void) | undefined;
    try {
      leave = await queue.enter(signal);
    } catch {
      throw new ApiError(499, "client closed the request", null, "client_closed");
    }
    if (!leave) {
      const wait = Math.max(1, Math.ceil(((queue.waiting + 1) * replyMs) / 1000));
      throw new ApiError(
        429,
        `the engine is busy and ${queue.waiting} requests are waiting; retry later`,
        null,
        "queue_full",
        {
          "Retry-After": String(wait),
        },
      );
    }
    return leave;
  };

  const run = async (
    req: GenerationFields,
    p: Prepared,
    stop: string[],
    signal: AbortSignal,
    onText?: (t: string) => Promise<void>,
  ): Promise<ReplyResult & { sessionId?: string }> => {
    const t0 = performance.now();
    const r = await generateReply(engine, p.session, p.prompt, {
      maxTokens: p.maxTokens,
      sampling: req.sampling,
      seed: req.seed,
      stop,
      signal,
    }, onText);
    replyMs = 0.8 * replyMs + 0.2 * (performance.now() - t0);
    let sessionId: string | undefined;
    if (req.saveSession && r.finishReason !== "abort") sessionId = await store().put(p.session.save!());
    return { ...r, sessionId };
  };

  const usage = (p: Prepared, r: ReplyResult) => ({
    prompt_tokens: p.prompt.length,
    completion_tokens: r.completionTokens,
    total_tokens: p.prompt.length + r.completionTokens,
  });

  const finish = (r: ReplyResult) => (r.finishReason === "length" ? "length" : "stop");

  /** The shared body of both endpoints: queue, prepare, then stream or answer once. */
  const serve = async (
    c: Context,
    kind: "text_completion" | "chat.completion",
    req: CompletionRequest | ChatRequest,
    text: string,
    field: string,
    stop: string[],
  ): Promise<Response> => {
    const signal = c.req.raw.signal;
    precheck(req, text, field);
    const leave = await turn(signal);
    let streaming = false;
    try {
      const p = await prepare(req, text, field, kind === "chat.completion");
      const id = (kind === "chat.completion" ? "chatcmpl-" : "cmpl-") +
        crypto.randomUUID().replaceAll("-", "").slice(0, 24);
      const created = Math.floor(Date.now() / 1000);
      const head = {
        id,
        object: kind === "chat.completion" ? "chat.completion.chunk" : "text_completion",
        created,
        model: modelId,
      };
      const choice = (piece: string, finishReason: string | null) =>
        kind === "chat.completion"
          ? {
            index: 0,
            delta: piece === "" && finishReason ? {} : { content: piece },
            logprobs: null,
            finish_reason: finishReason,
          }
          : { index: 0, text: piece, logprobs: null, finish_reason: finishReason };

      if (req.stream) {
        streaming = true;
        return openAIStream(c, signal, async (send, gone) => {
          try {
            if (kind === "chat.completion") {
              await send({
                ...head,
                choices: [{
                  index: 0,
                  delta: { role: "assistant", content: "" },
                  logprobs: null,
                  finish_reason: null,
                }],
              });
            }
            const r = await run(
              req,
              p,
              stop,
              gone,
              (piece) => send({ ...head, choices: [choice(piece, null)] }),
            );
            if (r.finishReason === "abort") return;
            await send({
              ...head,
              choices: [choice("", finish(r))],
              ...(r.sessionId ? { session: r.sessionId } : {}),
            });
            if (req.includeUsage) await send({ ...head, choices: [], usage: usage(p, r) });
          } finally {
            leave();
          }
        });
      }

      const r = await run(req, p, stop, signal);
      const body = kind === "chat.completion"
        ? {
          index: 0,
          message: { role: "assistant", content: r.text },
          logprobs: null,
          finish_reason: finish(r),
        }
        : { index: 0, text: r.text, logprobs: null, finish_reason: finish(r) };
      return c.json({
        id,
        object: kind,
        created,
        model: modelId,
        choices: [body],
        usage: usage(p, r),
        ...(r.sessionId ? { session: r.sessionId } : {}),
      });
    } finally {
      if (!streaming) leave();
    }
  };

  app.post("/v1/completions", jsonLimit, async (c) => {
    const req = readCompletionRequest(await readJson(c));
    return serve(c, "text_completion", req, req.prompt, "prompt", req.stop);
  });

  app.post("/v1/chat/completions", jsonLimit, async (c) => {
    const req = readChatRequest(await readJson(c));
    return serve(c, "chat.completion", req, renderChat(req.messages), "messages", [CHAT_STOP, ...req.stop]);
  });

  return app;
}

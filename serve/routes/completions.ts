/**
 * `POST /v1/completions` and `POST /v1/chat/completions`: read and check the body, refuse what cannot
 * fit, wait for the engine's turn, then answer as server-sent events (`stream: true`) or as one JSON
 * body. Both endpoints share every step; what differs is their `Endpoint` (serve/shapes.ts), the text
 * they feed and the field a too-long input is blamed on.
 *
 * @example
 * ```ts
 * app.route("/v1", completionRoutes(ctx));
 * await app.request("/v1/completions", { method: "POST", body: JSON.stringify({ prompt: "The", max_tokens: 8 }) });
 * ```
 * @module
 */
import { Hono } from "hono";
import type { Context } from "hono";
import { limitBody, readJson } from "../body.ts";
import type { ServerContext } from "../context.ts";
import { sessionsOf } from "../context.ts";
import { precheck, prepare, type Prepared } from "../prompt.ts";
import { type GenerationFields, readChatRequest, readCompletionRequest } from "../requests.ts";
import { CHAT_COMPLETION, type Endpoint, finishReason, TEXT_COMPLETION, usage } from "../shapes.ts";
import type { Lease, LeaseReply } from "../slots.ts";
import { openAIStream } from "../sse.ts";
import { CHAT_STOP, renderChat } from "../transcript.ts";

/** One request to answer: the endpoint, its checked fields, the text to feed and its stop strings. */
interface Job {
  endpoint: Endpoint;
  req: GenerationFields;
  text: string;
  /** The request field blamed when the text does not fit the context. */
  field: string;
  stop: string[];
}

/** The two generation routes, relative to `/v1`. */
export function completionRoutes(ctx: ServerContext): Hono {
  const app = new Hono();
  const limit = limitBody(ctx.maxBodyBytes, "request body");
  app.post("/completions", limit, async (c) => {
    const req = readCompletionRequest(await readJson(c));
    return answer(c, ctx, {
      endpoint: TEXT_COMPLETION,
      req,
      text: req.prompt,
      field: "prompt",
      stop: req.stop,
    });
  });
  app.post("/chat/completions", limit, async (c) => {
    const req = readChatRequest(await readJson(c));
    const text = renderChat(req.messages);
    return answer(c, ctx, {
      endpoint: CHAT_COMPLETION,
      req,
      text,
      field: "messages",
      stop: [CHAT_STOP, ...req.stop],
    });
  });
  return app;
}

/** Precheck, wait for the turn, prepare, then stream or answer once; the turn is given back when done. */
async function answer(c: Context, ctx: ServerContext, job: Job): Promise<Response> {
  const signal = c.req.raw.signal;
  precheck(ctx, job.req, job.text, job.field);
  const lease = await ctx.slots.acquire(signal);
  const leave = lease.release;
  let streaming = false;
  try {
    const p = await prepare(ctx, job.req, job.text, job.field, job.endpoint.chat);
    const head = {
      id: job.endpoint.idPrefix + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
      created: Math.floor(Date.now() / 1000),
      model: ctx.modelId,
    };
    if (job.req.stream) {
      streaming = true; // the stream gives the turn back when it ends
      return stream(c, ctx, job, p, head, lease);
    }
    const r = await generate(ctx, lease, job, p, signal);
    return c.json({
      id: head.id,
      object: job.endpoint.object,
      created: head.created,
      model: head.model,
      choices: [job.endpoint.whole(r.text, finishReason(r))],
      usage: usage(p.prompt.length, r),
      ...(r.sessionId ? { session: r.sessionId } : {}),
    });
  } finally {
    if (!streaming) leave();
  }
}

/** The reply as server-sent events: the opening choice, a chunk per piece, the finish, usage if asked. */
function stream(
  c: Context,
  ctx: ServerContext,
  job: Job,
  p: Prepared,
  head: { id: string; created: number; model: string },
  lease: Lease,
): Response {
  const { endpoint, req } = job;
  const chunk = { id: head.id, object: endpoint.chunkObject, created: head.created, model: head.model };
  return openAIStream(c, c.req.raw.signal, async (send, gone) => {
    try {
      if (endpoint.opening) await send({ ...chunk, choices: [endpoint.opening] });
      const r = await generate(
        ctx,
        lease,
        job,
        p,
        gone,
        (piece) => send({ ...chunk, choices: [endpoint.chunk(piece, null)] }),
      );
      if (r.finishReason === "abort") return;
      await send({
        ...chunk,
        choices: [endpoint.chunk("", finishReason(r))],
        ...(r.sessionId ? { session: r.sessionId } : {}),
      });
      if (req.includeUsage) await send({ ...chunk, choices: [], usage: usage(p.prompt.length, r) });
    } finally {
      lease.release();
    }
  });
}

/** Runs the reply on the lease's slot, and stores the session afterwards when asked. */
async function generate(
  ctx: ServerContext,
  lease: Lease,
  job: Job,
  p: Prepared,
  signal: AbortSignal,
  onText?: (piece: string) => Promise<void>,
): Promise<LeaseReply & { sessionId?: string }> {
  const { req } = job;
  const r = await lease.reply(p.session, p.prompt, {
    maxTokens: p.maxTokens,
    sampling: req.sampling,
    seed: req.seed,
    stop: job.stop,
    signal,
    saveEnd: req.saveSession,
  }, onText);
  if (!req.saveSession || !r.saved) return r;
  return { ...r, sessionId: await sessionsOf(ctx).put(r.saved) };
}

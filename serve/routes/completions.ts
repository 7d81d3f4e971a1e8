/**
 * `POST /v1/completions` and `POST /v1/chat/completions`: read and check the body, refuse what cannot
 * fit, wait for the engine's turn, then answer as server-sent events (`stream: true`) or as one JSON
 * body. Both endpoints share every step; what differs is their `Endpoint` (serve/openai/shapes.ts), the text
 * they feed and the field a too-long input is blamed on.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { completionRoutes } from "./completions.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext;
 * const app = new Hono();
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
import { completionProbabilities, type TokenLogprob } from "../openai/logprobs.ts";
import { precheck, prepare, type Prepared } from "../chat/prompt.ts";
import { type GenerationFields, readChatRequest, readCompletionRequest } from "../openai/requests.ts";
import { randomSeed } from "../openai/sampling.ts";
import { CHAT_COMPLETION, type Endpoint, finishReason, TEXT_COMPLETION, usage } from "../openai/shapes.ts";
import type { Lease, LeaseReply } from "../slots/slots.ts";
import { openAIStream } from "../openai/sse.ts";
import { chatStops, chatText, nextPromptStart, repliesOf } from "../chat/chat-prompt.ts";
import type { ChatMessage } from "../openai/requests.ts";
import { createReasoningSplitter, splitReasoning } from "../openai/reasoning.ts";
import { ROUTES } from "./table.ts";
import type { PromptProgress } from "../slots/generation.ts";

const { completions, chatCompletions } = ROUTES;

/** One request to answer: the endpoint, its checked fields, the text to feed and its stop strings. */
interface Job {
  endpoint: Endpoint;
  req: GenerationFields;
  text: string;
  /** The request field blamed when the text does not fit the context. */
  field: string;
  stop: string[];
  /** llama.cpp's `n_probs`: `completion_probabilities` with this many alternatives. */
  nProbs?: number;
  /** When the request arrived (`performance.now()`), for the time to the first token. */
  arrived: number;
  /**
   * A chat on a model with its own template: a think block the reply opens is `reasoning_content`
   * (`"inside"`: the prompt itself opened it). Absent: all text is content.
   */
  reasoning?: "start" | "inside";
  /** A chat's assistant contents, for the prompt's tokens (serve/chat/reply-tokens.ts); none for a completion. */
  replies: string[];
  /** A chat's messages and template arguments, for reading its next turn ahead; none for a completion. */
  chat?: { messages: ChatMessage[]; kwargs: Record<string, unknown> };
}

/** What every response and chunk of one reply carries at its top level. */
interface Head {
  id: string;
  created: number;
  model: string;
  /**
   * The seed the reply was sampled with: the request's, or a fresh random one when it gave none, so the
   * reply can be reproduced. `null` when a continued session keeps its own random stream.
   */
  seed: number | null;
}

/** The two generation routes, relative to `/v1`. */
export function completionRoutes(ctx: ServerContext): Hono {
  const app = new Hono();
  const limit = limitBody(ctx.maxBodyBytes, "request body");
  app.on(completions.methods, completions.path, limit, async (c) => {
    const arrived = performance.now();
    const req = readCompletionRequest(await readJson(c));
    return answer(c, ctx, {
      endpoint: TEXT_COMPLETION,
      req,
      text: req.prompt,
      field: "prompt",
      stop: req.stop,
      nProbs: req.nProbs,
      arrived,
      replies: [],
    });
  });
  app.on(chatCompletions.methods, chatCompletions.path, limit, async (c) => {
    const arrived = performance.now();
    const req = readChatRequest(await readJson(c));
    const text = chatText(ctx, req.messages, req.templateKwargs);
    return answer(c, ctx, {
      endpoint: CHAT_COMPLETION,
      req,
      text,
      field: "messages",
      stop: [...chatStops(ctx), ...req.stop],
      arrived,
      replies: repliesOf(req.messages),
      chat: { messages: req.messages, kwargs: req.templateKwargs },
      reasoning: !ctx.template || req.reasoningFormat === "none"
        ? undefined
        : /<think>\s*$/.test(text)
        ? "inside"
        : "start",
    });
  });
  return app;
}

/** Precheck, wait for the turn, prepare, then stream or answer once; the turn is given back when done. */
async function answer(c: Context, ctx: ServerContext, job: Job): Promise<Response> {
  const signal = c.req.raw.signal;
  precheck(ctx, job.req, job.text, job.field, job.endpoint.chat, job.replies);
  // No seed: a fresh one, reported; a continued session without one keeps its stream (sessions docs).
  const seed = job.req.seed ?? (job.req.session === undefined ? randomSeed() : undefined);
  const lease = await ctx.slots.acquire(signal);
  const leave = lease.release;
  let streaming = false;
  try {
    const p = await prepare(ctx, job.req, job.text, job.field, job.endpoint.chat, job.replies);
    const head: Head = {
      id: job.endpoint.idPrefix + crypto.randomUUID().replaceAll("-", "").slice(0, 24),
      created: Math.floor(Date.now() / 1000),
      model: ctx.modelId,
      seed: seed ?? null,
    };
    if (job.req.stream) {
      streaming = true; // the stream gives the turn back when it ends
      return stream(c, ctx, job, p, head, lease);
    }
    const r = await generate(ctx, lease, job, p, seed, signal);
    const { reasoning, content } = job.reasoning
      ? splitReasoning(r.text, job.reasoning === "inside")
      : { reasoning: undefined, content: r.text };
    return c.json({
      id: head.id,
      object: job.endpoint.object,
      created: head.created,
      model: head.model,
      seed: head.seed,
      choices: [job.endpoint.whole(content, finishReason(r), logprobsOf(ctx, job, r.logprobs), reasoning)],
      usage: usage(p.prompt.length, r, r.cachedTokens),
      ...probabilities(ctx, job, r.logprobs),
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
  head: Head,
  lease: Lease,
): Response {
  const { endpoint, req } = job;
  const chunk = { id: head.id, object: endpoint.chunkObject, created: head.created, model: head.model };
  let first = true; // the first chunk carries the seed (and so does the last)
  const seeded = () => (first ? ((first = false), { seed: head.seed }) : {});
  let offset = 0; // where the next piece starts in the reply, for text_offset
  const split = job.reasoning ? createReasoningSplitter(job.reasoning === "inside") : undefined;
  let held: TokenLogprob[] = []; // picks of text the splitter holds back, sent with the next part
  const sendPart = async (send: (data: unknown) => Promise<void>, text: string, reasoning: boolean) => {
    const picks = held;
    held = [];
    const lp = logprobsOf(ctx, job, picks, offset);
    offset += text.length;
    await send({
      ...chunk,
      ...seeded(),
      choices: [endpoint.chunk(text, null, lp, reasoning)],
      ...probabilities(ctx, job, picks),
    });
  };
  return openAIStream(c, c.req.raw.signal, async (send, gone) => {
    try {
      if (endpoint.opening) await send({ ...chunk, ...seeded(), choices: [endpoint.opening] });
      const started = performance.now();
      // Sent in order with the text (one writer); a client gone meanwhile is the generation's to notice.
      const progress = req.returnProgress
        ? (pp: PromptProgress) =>
          void send({
            ...chunk,
            ...seeded(),
            choices: [],
            prompt_progress: { ...pp, time_ms: Math.round(performance.now() - started) },
          }).catch(() => {})
        : undefined;
      const r = await generate(ctx, lease, job, p, head.seed ?? undefined, gone, async (piece, picks) => {
        held.push(...picks);
        if (!split) return await sendPart(send, piece, false);
        for (const part of split.push(piece)) await sendPart(send, part.text, part.kind === "reasoning");
      }, progress);
      if (r.finishReason === "abort") return;
      for (const part of split?.flush() ?? []) await sendPart(send, part.text, part.kind === "reasoning");
      await send({
        ...chunk,
        seed: head.seed,
        choices: [endpoint.chunk("", finishReason(r))],
        ...(r.sessionId ? { session: r.sessionId } : {}),
      });
      if (req.includeUsage) {
        await send({
          ...chunk,
          seed: head.seed,
          choices: [],
          usage: usage(p.prompt.length, r, r.cachedTokens),
        });
      }
    } finally {
      lease.release();
    }
  });
}

/** The choice's `logprobs` in the endpoint's shape, or `null` when the request did not ask. */
function logprobsOf(ctx: ServerContext, job: Job, picks: TokenLogprob[] | undefined, offset = 0): unknown {
  const n = job.req.logprobs;
  if (n === undefined || !picks) return null;
  return job.endpoint.logprobs(
    picks.map((q) => ({ ...q, top: q.top.slice(0, n) })),
    job.text.length + offset,
    ctx.tokenizer,
  );
}

/** llama.cpp's `completion_probabilities` when the request gave `n_probs`. */
function probabilities(ctx: ServerContext, job: Job, picks: TokenLogprob[] | undefined) {
  if (job.nProbs === undefined || !picks) return {};
  const n = job.nProbs;
  const top = picks.map((q) => ({ ...q, top: q.top.slice(0, n) }));
  return { completion_probabilities: completionProbabilities(top, ctx.tokenizer) };
}

/** Runs the reply on the lease's slot, timing it for the metrics, and stores the session afterwards when asked. */
async function generate(
  ctx: ServerContext,
  lease: Lease,
  job: Job,
  p: Prepared,
  seed: number | undefined,
  signal: AbortSignal,
  onText?: (piece: string, picks: TokenLogprob[]) => Promise<void>,
  onPrompt?: (progress: PromptProgress) => void,
): Promise<LeaseReply & { sessionId?: string }> {
  const { req } = job;
  // Timed where the text arrives (on this thread, whichever slot generates it).
  let last = 0;
  const timed = (piece: string, picks: TokenLogprob[]) => {
    const now = performance.now();
    if (last === 0) ctx.metrics.firstToken((now - job.arrived) / 1000);
    else ctx.metrics.betweenTokens((now - last) / 1000);
    last = now;
    return onText?.(piece, picks);
  };
  const top = req.logprobs === undefined && job.nProbs === undefined
    ? undefined
    : Math.max(req.logprobs ?? 0, job.nProbs ?? 0);
  const r = await lease.reply(p.session, p.prompt, {
    maxTokens: p.maxTokens,
    sampling: req.sampling,
    seed,
    stop: job.stop,
    signal,
    logprobs: top,
    saveEnd: req.saveSession,
    onPrompt,
  }, timed);
  ctx.metrics.tokens(p.prompt.length, r.completionTokens);
  const { content } = job.reasoning
    ? splitReasoning(r.text, job.reasoning === "inside")
    : { content: r.text };
  // A templated chat's reply as the client will resend it, in the tokens it was generated as.
  if (job.endpoint.chat && ctx.template) ctx.replies.remember(ctx.tokenizer, r.ids, content);
  // The next turn's prompt begins with this exchange: read it while the user types (a stored session's
  // next turn continues that session instead).
  if (job.chat && ctx.slots.cache && !p.session && r.finishReason !== "abort") {
    lease.prime(nextPromptStart(ctx, job.chat.messages, content, job.chat.kwargs));
  }
  if (!req.saveSession || !r.saved) return r;
  return { ...r, sessionId: await sessionsOf(ctx).put(r.saved) };
}

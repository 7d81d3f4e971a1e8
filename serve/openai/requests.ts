/**
 * Reads the OpenAI-style request bodies the server accepts, field by field: a field of the wrong type or
 * out of range is refused with a 400 that names it. The sampling fields are read by serve/openai/sampling.ts,
 * against the one sampling contract. Fields OpenAI clients send that a byte-level continuer has no use
 * for (`presence_penalty`, `user`, ...) are accepted and ignored.
 *
 * @example
 * ```ts
 * import type { Context } from "hono";
 * import { readCompletionRequest } from "./requests.ts";
 * declare const c: Context; // a POST /v1/completions
 * const req = readCompletionRequest(await c.req.json());
 * req.maxTokens; // a positive integer, or undefined when the client did not say
 * ```
 * @module
 */
import { ApiError, invalidValue } from "../errors.ts";
import { MAX_TOP_LOGPROBS } from "./logprobs.ts";
import { type RequestSampling, samplingFromBody } from "./sampling.ts";

/** One chat message; an assistant's may carry its thinking (`reasoning_content`) for the template. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
  reasoning_content?: string;
}

/** What both endpoints share; `sampling` and `seed` are in the sampling contract's terms. */
export interface GenerationFields extends RequestSampling {
  stream: boolean;
  /** Send a last chunk with `usage` (OpenAI's `stream_options.include_usage`). */
  includeUsage: boolean;
  /** Stream `prompt_progress` chunks while the prompt is read (llama.cpp's `return_progress`). */
  returnProgress: boolean;
  maxTokens?: number;
  stop: string[];
  /** Continue from this stored session (ferry extension). */
  session?: string;
  /** Store the state after the reply and report its id (ferry extension). */
  saveSession: boolean;
  /** Report each token's log-probability with this many alternatives (absent: `logprobs: null`). */
  logprobs?: number;
}

/** A `/v1/completions` body. */
export interface CompletionRequest extends GenerationFields {
  prompt: string;
  /** llama.cpp's `n_probs`: report `completion_probabilities` with this many alternatives. */
  nProbs?: number;
}

/** A `/v1/chat/completions` body. */
export interface ChatRequest extends GenerationFields {
  messages: ChatMessage[];
  /**
   * `chat_template_kwargs`: further variables for the model's chat template (llama.cpp's field), e.g.
   * `{ enable_thinking: false }`; empty when absent. A byte model's transcript has none to use.
   */
  templateKwargs: Record<string, unknown>;
  /**
   * llama.cpp's `reasoning_format`: `"none"` leaves a think block in `content`; `"auto"` (the default)
   * and `"deepseek"` return it as `reasoning_content`.
   */
  reasoningFormat: "none" | "auto" | "deepseek";
}

/** The most stop strings a request may give (OpenAI's limit). */
export const MAX_STOPS = 4;

function refuse(field: string, expected: string, got: unknown): never {
  throw invalidValue(field, expected, got);
}

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) refuse("body", "a JSON object", body);
  return body as Record<string, unknown>;
}

function optNumber(o: Record<string, unknown>, field: string, ok: (x: number) => boolean, expected: string) {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || !ok(v)) refuse(field, expected, v);
  return v;
}

function optBoolean(o: Record<string, unknown>, field: string): boolean | undefined {
  const v = o[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") refuse(field, "true or false", v);
  return v;
}

/** `stop`: one string or at most `MAX_STOPS` of them; empty strings dropped. */
function stopStrings(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  if (typeof stop === "string") return stop === "" ? [] : [stop];
  if (!Array.isArray(stop)) refuse("stop", "a string or an array of strings", stop);
  if (stop.length > MAX_STOPS || !stop.every((s) => typeof s === "string")) {
    refuse("stop", `a string or an array of at most ${MAX_STOPS} strings`, stop);
  }
  return stop.filter((s) => s !== "");
}

/** `stream_options.include_usage`, false when absent. */
function includeUsage(so: unknown): boolean {
  if (so === undefined || so === null) return false;
  if (typeof so !== "object" || Array.isArray(so)) refuse("stream_options", "an object", so);
  return optBoolean(so as Record<string, unknown>, "include_usage") ?? false;
}

const positive = (x: number) => Number.isInteger(x) && x >= 1;
const topCount = (x: number) => Number.isInteger(x) && x >= 0 && x <= MAX_TOP_LOGPROBS;
const TOP_EXPECTED = `an integer in [0, ${MAX_TOP_LOGPROBS}]`;

/** Fields that ask for what this server cannot do are refused, not ignored: a reply would mislead. */
const UNSUPPORTED = ["tools", "tool_choice", "functions", "function_call"];

function refuseUnsupported(o: Record<string, unknown>): void {
  for (const field of UNSUPPORTED) {
    const v = o[field];
    if (v === undefined || v === null || (Array.isArray(v) && v.length === 0)) continue;
    throw new ApiError(
      400,
      `${field}: not supported (the served model is a plain text continuer with no tool calling)`,
      field,
      "unsupported_field",
    );
  }
}

function generationFields(o: Record<string, unknown>): GenerationFields {
  refuseUnsupported(o);
  if (o.model !== undefined && typeof o.model !== "string") refuse("model", "a string", o.model);
  optNumber(o, "n", (x) => x === 1, "1 (one choice per request)"); // n = 1 is the default
  const session = o.session;
  if (session !== undefined && session !== null && typeof session !== "string") {
    refuse("session", "a session id string", session);
  }
  return {
    stream: optBoolean(o, "stream") ?? false,
    includeUsage: includeUsage(o.stream_options),
    returnProgress: optBoolean(o, "return_progress") ?? false,
    maxTokens: optNumber(o, "max_tokens", positive, "an integer >= 1") ??
      optNumber(o, "max_completion_tokens", positive, "an integer >= 1"),
    ...samplingFromBody(o),
    stop: stopStrings(o.stop),
    session: (session ?? undefined) as string | undefined,
    saveSession: optBoolean(o, "save_session") ?? false,
  };
}

/** Reads a `/v1/completions` body; `prompt` is one string. */
export function readCompletionRequest(body: unknown): CompletionRequest {
  const o = object(body);
  if (typeof o.prompt !== "string") refuse("prompt", "a string", o.prompt);
  return {
    ...generationFields(o),
    prompt: o.prompt as string,
    logprobs: optNumber(o, "logprobs", topCount, TOP_EXPECTED),
    nProbs: optNumber(o, "n_probs", topCount, TOP_EXPECTED) || undefined,
  };
}

const ROLES = ["system", "user", "assistant"];
const REASONING_FORMATS = ["none", "auto", "deepseek"] as const;

/** `reasoning_format`, `auto` when absent. */
function reasoningFormat(v: unknown): ChatRequest["reasoningFormat"] {
  if (v === undefined || v === null) return "auto";
  if (!REASONING_FORMATS.includes(v as ChatRequest["reasoningFormat"])) {
    refuse("reasoning_format", `one of ${REASONING_FORMATS.join(", ")}`, v);
  }
  return v as ChatRequest["reasoningFormat"];
}

/** Reads a `/v1/chat/completions` body; content may be a string or OpenAI's array of text parts. */
export function readChatRequest(body: unknown): ChatRequest {
  const o = object(body);
  if (!Array.isArray(o.messages) || o.messages.length === 0) {
    refuse("messages", "a non-empty array", o.messages);
  }
  const messages = (o.messages as unknown[]).map((m, i): ChatMessage => {
    const field = `messages[${i}]`;
    if (typeof m !== "object" || m === null || Array.isArray(m)) refuse(field, "an object", m);
    const { role, content, reasoning_content } = m as Record<string, unknown>;
    if (typeof role !== "string" || !ROLES.includes(role)) {
      refuse(`${field}.role`, `one of ${ROLES.join(", ")}`, role);
    }
    if (
      reasoning_content !== undefined && reasoning_content !== null && typeof reasoning_content !== "string"
    ) {
      refuse(`${field}.reasoning_content`, "a string", reasoning_content);
    }
    const thinking = typeof reasoning_content === "string" ? { reasoning_content } : {};
    if (typeof content === "string") return { role: role as ChatMessage["role"], content, ...thinking };
    if (Array.isArray(content) && content.every((p) => p?.type === "text" && typeof p.text === "string")) {
      return { role: role as ChatMessage["role"], content: content.map((p) => p.text).join(""), ...thinking };
    }
    refuse(`${field}.content`, "a string or an array of text parts", content);
  });
  const kwargs = o.chat_template_kwargs ?? {};
  if (typeof kwargs !== "object" || kwargs === null || Array.isArray(kwargs)) {
    refuse("chat_template_kwargs", "an object of template variables", kwargs);
  }
  const top = optNumber(o, "top_logprobs", topCount, TOP_EXPECTED);
  const logprobs = optBoolean(o, "logprobs") ?? false;
  if (top !== undefined && !logprobs) refuse("top_logprobs", "to come with logprobs: true", top);
  return {
    ...generationFields(o),
    messages,
    logprobs: logprobs ? top ?? 0 : undefined,
    templateKwargs: kwargs as Record<string, unknown>,
    reasoningFormat: reasoningFormat(o.reasoning_format),
  };
}

/**
 * OpenAI's response objects for the two generation endpoints, as data: what differs between
 * `/v1/completions` and `/v1/chat/completions` (the object names, the id prefix, how a choice carries
 * text) is one `Endpoint` each, so the code that answers is shared.
 *
 * @example
 * ```ts
 * import { CHAT_COMPLETION, TEXT_COMPLETION } from "./shapes.ts";
 * CHAT_COMPLETION.chunk("Hi", null);   // { index: 0, delta: { content: "Hi" }, logprobs: null, finish_reason: null }
 * TEXT_COMPLETION.whole("Hi", "stop"); // { index: 0, text: "Hi", logprobs: null, finish_reason: "stop" }
 * ```
 * @module
 */
import type { ReplyResult } from "../slots/generation.ts";
import { chatLogprobs, completionLogprobs, type TokenLogprob } from "./logprobs.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";

/** One entry of a response's `choices`. */
export type Choice = Record<string, unknown>;

/** How one endpoint shapes its answers. */
export interface Endpoint {
  /** A whole reply's `object`. */
  object: "text_completion" | "chat.completion";
  /** A streamed chunk's `object`. */
  chunkObject: "text_completion" | "chat.completion.chunk";
  /** What a reply's `id` starts with. */
  idPrefix: string;
  /** A chat is rendered whole, so a stored session must be its beginning; a prompt continues one. */
  chat: boolean;
  /** The choice streamed before any text, if the endpoint sends one. */
  opening?: Choice;
  /**
   * A streamed choice carrying `piece` (and its tokens' `logprobs`), or the last one with its finish
   * reason. A chat's piece of thinking goes in `delta.reasoning_content` (`reasoning` set).
   */
  chunk(piece: string, finishReason: string | null, logprobs?: unknown, reasoning?: boolean): Choice;
  /** The one choice of a whole reply; a chat's thinking, when it had a think block, as `reasoning_content`. */
  whole(text: string, finishReason: string, logprobs?: unknown, reasoning?: string): Choice;
  /**
   * The endpoint's `logprobs` shape for picked tokens, the first at character `offset` of the text, the
   * tokens' text and bytes from `tokenizer`.
   */
  logprobs(picks: readonly TokenLogprob[], offset: number, tokenizer: Tokenizer): unknown;
}

/** `/v1/completions`: text in `text`. */
export const TEXT_COMPLETION: Endpoint = {
  object: "text_completion",
  chunkObject: "text_completion",
  idPrefix: "cmpl-",
  chat: false,
  chunk: (piece, finishReason, logprobs = null) => ({
    index: 0,
    text: piece,
    logprobs,
    finish_reason: finishReason,
  }),
  whole: (text, finishReason, logprobs = null) => ({ index: 0, text, logprobs, finish_reason: finishReason }),
  logprobs: completionLogprobs,
};

/** `/v1/chat/completions`: a role announced first, then text in `delta.content` or `message.content`. */
export const CHAT_COMPLETION: Endpoint = {
  object: "chat.completion",
  chunkObject: "chat.completion.chunk",
  idPrefix: "chatcmpl-",
  chat: true,
  opening: { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
  chunk: (piece, finishReason, logprobs = null, reasoning = false) => ({
    index: 0,
    delta: piece === "" && finishReason ? {} : reasoning ? { reasoning_content: piece } : { content: piece },
    logprobs,
    finish_reason: finishReason,
  }),
  whole: (text, finishReason, logprobs = null, reasoning?: string) => ({
    index: 0,
    message: {
      role: "assistant",
      content: text,
      ...(reasoning === undefined ? {} : { reasoning_content: reasoning }),
    },
    logprobs,
    finish_reason: finishReason,
  }),
  logprobs: (picks, _offset, tokenizer) => chatLogprobs(picks, tokenizer),
};

/** OpenAI's finish reason for a reply that was not aborted. */
export function finishReason(r: ReplyResult): "length" | "stop" {
  return r.finishReason === "length" ? "length" : "stop";
}

/**
 * OpenAI's `usage` for a reply to `promptTokens` new prompt tokens; `cachedTokens` of them came from a
 * prompt cache (none yet: 0).
 */
export function usage(promptTokens: number, r: ReplyResult, cachedTokens = 0) {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: r.completionTokens,
    total_tokens: promptTokens + r.completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/**
 * How a request becomes prompt tokens, for either kind of model. A byte model (no tokenizer files, no
 * template) is prompted with the plain transcript of serve/chat/transcript.ts after BOS, and its reply ends
 * at a newline; a model with its own tokenizer and chat template (Qwen3) is prompted with the template
 * rendered (`chat_template_kwargs` passed through), its special-token strings parsed, and its reply
 * ends at the tokenizer's EOS set. Raw completions are encoded with the tokenizer's BOS, special-token
 * strings parsed (as llama.cpp's server does).
 *
 * @example
 * ```ts
 * import { chatStops, chatText, promptIds } from "./chat-prompt.ts";
 * import type { ServerContext } from "../context.ts";
 * import type { ChatRequest } from "../openai/requests.ts";
 * declare const ctx: ServerContext, req: ChatRequest;
 * const text = chatText(ctx, req.messages, req.templateKwargs);
 * const ids = promptIds(ctx, text, "chat");  // [256, ...] on a byte model, [151644, ...] on Qwen3
 * chatStops(ctx);                            // ["\n"] on a byte model, [] with a template
 * ```
 * @module
 */
import type { ServerContext } from "../context.ts";
import { ApiError } from "../errors.ts";
import { FormatError } from "../../model/error.ts";
import type { ChatMessage } from "../openai/requests.ts";
import { CHAT_STOP, renderChat } from "./transcript.ts";
import { chatPromptIds } from "./reply-tokens.ts";
import { commonPrefix } from "../slots/prompt-cache.ts";

/**
 * The prompt text of a chat: the model's template rendered with `kwargs`, or the transcript. A template
 * that fails on these messages is a 400 naming `messages` (the refusal names the template's file).
 */
export function chatText(
  ctx: ServerContext,
  messages: readonly ChatMessage[],
  kwargs: Readonly<Record<string, unknown>> = {},
): string {
  if (!ctx.template) return renderChat(messages);
  try {
    return ctx.template.render(messages, { kwargs });
  } catch (e) {
    if (!(e instanceof FormatError)) throw e;
    throw new ApiError(400, `messages: ${e.message}`, "messages", "invalid_value");
  }
}

/**
 * The tokens of a prompt: `chat` text (from `chatText`), `completion` text (a fresh prompt), or
 * `continuation` text (a completion prompt added to a stored session: no BOS). A templated chat's
 * `replies` (the assistant contents it resends) come back in the tokens they were generated as, where
 * the server still has them (serve/chat/reply-tokens.ts).
 */
export function promptIds(
  ctx: ServerContext,
  text: string,
  kind: "chat" | "completion" | "continuation",
  replies: readonly string[] = [],
): number[] {
  if (kind === "chat" && ctx.template) return chatPromptIds(ctx.tokenizer, text, replies, ctx.replies);
  const bos = kind === "completion" || kind === "chat";
  return ctx.tokenizer.encode(text, { bos, specials: true });
}

/**
 * The tokens every next turn's prompt of a chat begins with once `reply` has answered `messages`: the
 * conversation as the template renders it in the history, which may differ from the reply's own prompt
 * (Qwen3's drops the reply's empty think block). Found as what two renderings with different
 * follow-ups share, so it holds for any template; the server reads it ahead while the user types
 * (serve/slots/slots.ts `Lease.prime`).
 *
 * @example
 * ```ts
 * import { nextPromptStart } from "./chat-prompt.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext; // a Qwen3 model's
 * const messages = [{ role: "user" as const, content: "Hi" }];
 * nextPromptStart(ctx, messages, "Hello!", {}); // ...<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n
 * ```
 */
export function nextPromptStart(
  ctx: ServerContext,
  messages: readonly ChatMessage[],
  reply: string,
  kwargs: Readonly<Record<string, unknown>> = {},
): number[] {
  const history: ChatMessage[] = [...messages, { role: "assistant", content: reply }];
  const replies = repliesOf(history);
  const [a, b] = ["A", "B"].map((content) => {
    const text = chatText(ctx, [...history, { role: "user", content }], kwargs);
    return promptIds(ctx, text, "chat", replies);
  });
  return a.slice(0, commonPrefix(a, b));
}

/** The assistant contents a chat resends, in order: what `promptIds` looks up. */
export function repliesOf(messages: readonly ChatMessage[]): string[] {
  return messages.filter((m) => m.role === "assistant").map((m) => m.content);
}

/** The stop strings a chat reply ends at besides the tokenizer's EOS: the transcript's newline, or none. */
export function chatStops(ctx: ServerContext): string[] {
  return ctx.template ? [] : [CHAT_STOP];
}

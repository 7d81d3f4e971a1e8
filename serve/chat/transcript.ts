/**
 * How a chat becomes text for a model that only continues bytes. The served model has no chat
 * template and no special tokens beyond BOS/EOS, so a conversation is written as a plain transcript,
 * one `Role: content` line per message, and the prompt ends with `Assistant: ` for the model to
 * continue:
 *
 * ```text
 * System: Answer briefly.
 * User: Where is the jury?
 * Assistant:
 * ```
 *
 * The reply ends at the first newline (the model starting a new line would be writing the next turn),
 * at EOS, at a caller's `stop` string, or at `max_tokens`. Because a reply never holds the newline that
 * ended it, rendering the conversation again with that reply appended reproduces exactly the bytes the
 * model saw and wrote — which is what lets a stored session continue a chat without re-reading it.
 *
 * @example
 * ```ts
 * import { renderChat } from "./transcript.ts";
 * renderChat([{ role: "user", content: "Hello" }]); // "User: Hello\nAssistant: "
 * ```
 * @module
 */
import type { ChatMessage } from "../openai/requests.ts";

/** Where a chat reply ends, besides EOS and the caller's stop strings. */
export const CHAT_STOP = "\n";

const LABEL: Record<ChatMessage["role"], string> = { system: "System", user: "User", assistant: "Assistant" };

/**
 * The transcript of `messages`, ending with `Assistant: ` so the model writes the next reply. When the
 * last message is the assistant's own, it is left open so the model continues it.
 */
export function renderChat(messages: readonly ChatMessage[]): string {
  let text = "";
  messages.forEach((m, i) => {
    const open = i === messages.length - 1 && m.role === "assistant";
    text += `${LABEL[m.role]}: ${m.content}${open ? "" : "\n"}`;
  });
  if (messages.at(-1)?.role !== "assistant") text += "Assistant: ";
  return text;
}

/**
 * Reads a transcript back into messages (a restored session's text, for showing it): each line that
 * starts with a role label begins a message; other lines continue the one before. A trailing empty
 * `Assistant: ` (a prompt with no reply yet) is dropped.
 */
export function parseTranscript(text: string): ChatMessage[] {
  const out: ChatMessage[] = [];
  const labels = Object.entries(LABEL) as [ChatMessage["role"], string][];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop(); // the newline that ended the last reply ends its line, nothing more
  for (const line of lines) {
    const hit = labels.find(([, label]) => line.startsWith(label + ": "));
    if (hit) out.push({ role: hit[0], content: line.slice(hit[1].length + 2) });
    else if (out.length > 0) out[out.length - 1].content += "\n" + line;
    else if (line !== "") out.push({ role: "system", content: line });
  }
  const last = out.at(-1);
  if (last?.role === "assistant" && last.content === "") out.pop();
  return out;
}

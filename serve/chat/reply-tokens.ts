/**
 * The tokens of recent replies as they were generated, so that a chat resending a reply gets it back
 * in those tokens rather than re-tokenized. A sampled reply is a valid but rarely the canonical
 * tokenization of its text (48 generated tokens came back as 40 in one Qwen3 chat), and the state the
 * prompt cache and the slot hold has the generated ones: re-tokenized, the next turn's prompt would
 * part from that state at the reply's first difference. With them spliced in, it matches through the
 * reply wherever the template keeps the reply's text after the prompt that produced it.
 *
 * Keyed by the text the client gets (a chat reply's `content`, its think block split off); bounded by
 * entries, least recently used first. Every prompt a server renders goes through the same splice, with
 * or without the cache, so a conversation's prompts are the same tokens either way.
 *
 * @example
 * ```ts
 * import { chatPromptIds, createReplyTokens } from "./reply-tokens.ts";
 * import type { ReplyResult } from "../slots/generation.ts";
 * import type { Tokenizer } from "../../model/tokenizer-types.ts";
 * declare const tokenizer: Tokenizer, r: ReplyResult, content: string; // content: r's text as shown
 * declare const text: string; // the next request's rendered chat
 * const replies = createReplyTokens();
 * replies.remember(tokenizer, r.ids, content);       // after a chat reply
 * chatPromptIds(tokenizer, text, ["Hello there"], replies); // that content in its generated tokens
 * ```
 * @module
 */
import type { Tokenizer } from "../../model/tokenizer-types.ts";

/** A bounded memory of reply texts and their generated tokens. */
export interface ReplyTokens {
  /**
   * Keeps `text`'s tokens among `ids` (a reply's generated tokens, whose decoded text holds `text`
   * exactly on token boundaries); does nothing when they do not.
   */
  remember(tokenizer: Tokenizer, ids: readonly number[], text: string): void;
  /** The generated tokens of `text`, marked as just used; undefined when none are kept. */
  get(text: string): readonly number[] | undefined;
  /** Entries held. */
  readonly size: number;
}

/** Replies kept by default: a few conversations' worth of turns. */
export const REPLY_TOKENS_KEPT = 256;

/** A memory of at most `limit` replies. */
export function createReplyTokens(limit = REPLY_TOKENS_KEPT): ReplyTokens {
  const kept = new Map<string, readonly number[]>();
  return {
    remember(tokenizer, ids, text) {
      if (text === "" || limit <= 0) return;
      const span = tokensOf(tokenizer, ids, text);
      if (!span) return;
      kept.delete(text);
      kept.set(text, span);
      for (const k of kept.keys()) {
        if (kept.size <= limit) break;
        kept.delete(k);
      }
    },
    get(text) {
      const ids = kept.get(text);
      if (ids) kept.delete(text), kept.set(text, ids);
      return ids;
    },
    get size() {
      return kept.size;
    },
  };
}

/**
 * The run of `ids` that decodes to exactly `text`, starting and ending on token boundaries; undefined
 * when there is none (a reply whose text was cut inside a token by a stop string, say).
 */
function tokensOf(tokenizer: Tokenizer, ids: readonly number[], text: string): number[] | undefined {
  // ends[i]: the decoded length after ids[0..i] (a character split across tokens lands on its last).
  const decode = tokenizer.streamDecoder();
  const ends: number[] = [];
  let full = "";
  for (const id of ids) ends.push((full += decode(id)).length);
  for (let at = full.indexOf(text); at >= 0; at = full.indexOf(text, at + 1)) {
    const from = at === 0 ? 0 : ends.indexOf(at) + 1;
    const to = ends.indexOf(at + text.length) + 1;
    if ((at > 0 && from === 0) || to === 0) continue;
    const span = ids.slice(from, to);
    if (tokenizer.decode(span, { specials: true }) === text) return span;
  }
  return undefined;
}

/**
 * A chat prompt's tokens: `text` (the rendered template) encoded with its special-token strings parsed,
 * except that each of `replies` (the assistant contents the request resends, in order) found in it, in
 * order, whose generated tokens `memory` keeps, is those tokens.
 *
 * @example
 * ```ts
 * import { chatPromptIds, type ReplyTokens } from "./reply-tokens.ts";
 * import type { Tokenizer } from "../../model/tokenizer-types.ts";
 * declare const tokenizer: Tokenizer, memory: ReplyTokens; // a Qwen3 tokenizer; the replies kept
 * chatPromptIds(tokenizer, "<|im_start|>assistant\nHi<|im_end|>", ["Hi"], memory);
 * ```
 */
export function chatPromptIds(
  tokenizer: Tokenizer,
  text: string,
  replies: readonly string[],
  memory: ReplyTokens | undefined,
): number[] {
  const encode = (part: string) => tokenizer.encode(part, { bos: false, specials: true });
  const out: number[] = [];
  let from = 0;
  for (const reply of replies) {
    const ids = reply === "" ? undefined : memory?.get(reply);
    const at = ids ? text.indexOf(reply, from) : -1;
    if (at < 0) continue;
    out.push(...encode(text.slice(from, at)), ...ids!);
    from = at + reply.length;
  }
  if (from === 0) return encode(text);
  out.push(...encode(text.slice(from)));
  return out;
}

/**
 * Two turns of a Qwen3 chat on the server app (serve/app.ts, one slot): without the prompt cache, with
 * it and no reading ahead, and with it reading the next turn ahead (`Lease.prime`, waited for as a
 * user's pause would be). What turn 2 reports as cached, the common prefix of the two turns' prompts
 * (rendered by the model's template, in its tokens), the tokens of turn 2's new message, and both turns'
 * replies. Run in-process by Bun and, through `deno eval`, by Deno (tests/serve/prompt-cache-qwen3.test.ts).
 *
 * @example
 * ```ts
 * const { on, off, primed } = await twoTurns(engine, false);
 * on.cached === on.common; // the whole common prefix of the two prompts was reused
 * primed.cached === primed.prompt2 - primed.tail; // all but the new message was read ahead
 * ```
 * @module
 */
import type { Engine } from "../../model/engine.ts";
import { createApp } from "../../serve/app.ts";
import { commonPrefix } from "../../serve/slots/prompt-cache.ts";
import { createSlots, type SlotsOptions } from "../../serve/slots/slots.ts";

/** One server's two turns. */
export interface TwoTurns {
  /** Turn 2's `cached_tokens`. */
  cached: number;
  /** Tokens the two turns' prompts have in common from the start. */
  common: number;
  /** The two prompts' lengths in tokens (rendered and encoded as text: turn 1's reply re-tokenized). */
  prompts: [number, number];
  /** Turn 1's reply in tokens, as generated. */
  reply: number;
  /** Turn 2's prompt in tokens, as the server read it (turn 1's reply in its generated tokens). */
  prompt2: number;
  /** The tokens of turn 2's prompt from its new message on (the message, its end, the reply's opening). */
  tail: number;
  /** Each turn's reasoning and content. */
  replies: string[];
}

/**
 * Turn 1 and turn 2 (which resends turn 1's reply) with `enable_thinking` = `thinking`: cache off, on
 * without reading ahead, and on with it.
 */
export async function twoTurns(
  engine: Engine,
  thinking: boolean,
): Promise<{ on: TwoTurns; off: TwoTurns; primed: TwoTurns }> {
  const on = await converse(engine, thinking, { prime: false });
  const off = await converse(engine, thinking, { cacheBytes: 0 });
  const primed = await converse(engine, thinking, { prime: true });
  return { on, off, primed };
}

async function converse(engine: Engine, thinking: boolean, opts: SlotsOptions): Promise<TwoTurns> {
  const slots = createSlots(engine, { parallel: 1, ...opts });
  const app = createApp({ engine, slots });
  const kwargs = { enable_thinking: thinking };
  const post = async (path: string, body: unknown) => {
    const res = await app.request(path, { method: "POST", body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return await res.json() as any;
  };
  const ask = (messages: unknown[]) =>
    post("/v1/chat/completions", {
      messages,
      max_tokens: 12,
      temperature: 0.8,
      seed: 7,
      chat_template_kwargs: kwargs,
    });
  const promptOf = async (messages: unknown[]) => {
    const { prompt } = await post("/apply-template", { messages, chat_template_kwargs: kwargs });
    return engine.tokenizer.encode(prompt, { specials: true });
  };
  try {
    const first = [{ role: "user", content: "Hello, who are you?" }];
    const a = await ask(first);
    await slots.idle(); // the user reads the reply and types: the next turn is read ahead meanwhile
    const second = [
      ...first,
      { role: "assistant", content: a.choices[0].message.content },
      { role: "user", content: "And then?" },
    ];
    const b = await ask(second);
    const [p1, p2] = [await promptOf(first), await promptOf(second)];
    const { prompt: text2 } = await post("/apply-template", {
      messages: second,
      chat_template_kwargs: kwargs,
    });
    const tail = engine.tokenizer.encode(text2.slice(text2.lastIndexOf("And then?")), { specials: true });
    const reply = (r: any) =>
      `${r.choices[0].message.reasoning_content ?? ""}|${r.choices[0].message.content}`;
    return {
      cached: b.usage.prompt_tokens_details.cached_tokens,
      common: commonPrefix(p1, p2),
      prompts: [p1.length, p2.length],
      reply: a.usage.completion_tokens,
      prompt2: b.usage.prompt_tokens,
      tail: tail.length,
      replies: [reply(a), reply(b)],
    };
  } finally {
    slots.close();
  }
}

/**
 * A reply's thinking, apart from its answer: Qwen3 opens its reply with `<think>\n...\n</think>\n\n`
 * when thinking is on, and the API returns that block as `reasoning_content` beside `content` (as
 * llama.cpp's server and vLLM do). `createReasoningSplitter` does it piece by piece for a stream,
 * holding back only what could still be the start of a tag; `splitReasoning` is the same for a whole
 * reply, so a streamed reply's parts concatenate to the whole one's.
 *
 * A reply that does not start with `<think>` (after any whitespace) is all content; one cut off inside
 * the block (the token budget) is all reasoning. The newlines just inside the tags and the whitespace
 * between `</think>` and the answer belong to neither.
 *
 * @example
 * ```ts
 * import { createReasoningSplitter, splitReasoning } from "./reasoning.ts";
 * splitReasoning("<think>\nhm\n</think>\n\nHi"); // { reasoning: "hm", content: "Hi" }
 * const split = createReasoningSplitter();
 * [...split.push("<thi"), ...split.push("nk>\nhm</think>Hi"), ...split.flush()];
 * // [{ kind: "reasoning", text: "hm" }, { kind: "content", text: "Hi" }]
 * ```
 * @module
 */

/** One piece of a reply, as thinking or as the answer. */
export interface ReplyPart {
  kind: "reasoning" | "content";
  text: string;
}

/** A streaming splitter: `push` each piece of text, `flush` at the end. */
export interface ReasoningSplitter {
  push(piece: string): ReplyPart[];
  flush(): ReplyPart[];
}

const OPEN = "<think>", CLOSE = "</think>";

/** How many characters at the end of `text` could begin `tag` (held back until the next piece). */
function partialTail(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) {
    if (tag.startsWith(text.slice(text.length - n))) return n;
  }
  return 0;
}

/**
 * A splitter for one reply. `inside`: the prompt already opened the block (a template that ends its
 * generation prompt with `<think>`), so the reply starts as reasoning.
 */
export function createReasoningSplitter(inside = false): ReasoningSplitter {
  let state: "start" | "reasoning" | "between" | "content" = inside ? "reasoning" : "start";
  let held = "", freshReasoning = true;
  const run = (end: boolean): ReplyPart[] => {
    const out: ReplyPart[] = [];
    const emit = (kind: ReplyPart["kind"], text: string) => {
      if (text !== "") out.push({ kind, text });
    };
    for (;;) {
      if (state === "start") {
        const t = held.trimStart();
        if (t.startsWith(OPEN)) {
          state = "reasoning";
          held = t.slice(OPEN.length);
          continue;
        }
        if (!end && OPEN.startsWith(t)) return out; // whitespace, or the tag not yet complete
        state = "content";
        continue;
      }
      if (state === "reasoning") {
        if (freshReasoning) {
          held = held.replace(/^\n+/, "");
          if (held === "" && !end) return out;
          freshReasoning = false;
        }
        const close = held.indexOf(CLOSE);
        if (close >= 0) {
          emit("reasoning", held.slice(0, close).replace(/\n+$/, ""));
          held = held.slice(close + CLOSE.length);
          state = "between";
          continue;
        }
        // Newlines at the end may be the ones before </think>: held until more text follows them.
        const tag = end ? 0 : partialTail(held, CLOSE);
        const before = held.slice(0, held.length - tag);
        const keep = end ? 0 : tag + before.length - before.replace(/\n+$/, "").length;
        emit("reasoning", end ? held.replace(/\n+$/, "") : held.slice(0, held.length - keep));
        held = held.slice(held.length - keep);
        return out;
      }
      if (state === "between") {
        held = held.trimStart();
        if (held === "") return out;
        state = "content";
        continue;
      }
      emit("content", held);
      held = "";
      return out;
    }
  };
  return {
    push(piece) {
      held += piece;
      return run(false);
    },
    flush: () => run(true),
  };
}

/**
 * A whole reply split into its reasoning (undefined when it has no think block) and its content.
 *
 * @example
 * ```ts
 * import { splitReasoning } from "./reasoning.ts";
 * splitReasoning("Hello"); // { reasoning: undefined, content: "Hello" }
 * ```
 */
export function splitReasoning(text: string, inside = false): { reasoning?: string; content: string } {
  const split = createReasoningSplitter(inside);
  const parts = [...split.push(text), ...split.flush()];
  const of = (kind: ReplyPart["kind"]) => parts.filter((p) => p.kind === kind).map((p) => p.text).join("");
  const thought = inside || text.trimStart().startsWith(OPEN);
  return { reasoning: thought ? of("reasoning") : undefined, content: of("content") };
}

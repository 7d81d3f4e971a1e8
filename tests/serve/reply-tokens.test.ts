// serve/chat/reply-tokens.ts: a reply's tokens as generated come back in the prompt that resends it, with
// Qwen3's real tokenizer: a tokenization that is not the canonical one is kept and spliced in where
// the reply's text stands; a text not on the tokens' boundaries, or not remembered, is encoded as usual.
import { expect, test } from "bun:test";
import { hfTokenizer } from "../../model/hf-tokenizer.ts";
import { chatPromptIds, createReplyTokens } from "../../serve/chat/reply-tokens.ts";
import { qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";

const tok = hfTokenizer(qwen3TokenizerFiles(), "qwen3");
const enc = (s: string) => tok.encode(s, { specials: true });

test("a reply generated as other tokens than its text's own comes back as generated", () => {
  const reply = "Hello there, jury";
  // As a sampler may produce it: the same text in more, shorter tokens.
  const generated = [...enc("Hel"), ...enc("lo"), ...enc(" there"), ...enc(","), ...enc(" jury")];
  expect(tok.decode(generated)).toBe(reply);
  expect(generated).not.toEqual(enc(reply)); // the check can fail
  const memory = createReplyTokens();
  memory.remember(tok, [...generated, ...enc("<|im_end|>")], reply);
  expect(memory.size).toBe(1);
  const text =
    `<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n${reply}<|im_end|>\n<|im_start|>user\nMore<|im_end|>\n`;
  const ids = chatPromptIds(tok, text, [reply], memory);
  const at = enc("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n").length;
  expect(ids.slice(at, at + generated.length)).toEqual(generated);
  expect(tok.decode(ids, { specials: true })).toBe(text);
  // Without the memory, or for another reply, the text's own tokens.
  expect(chatPromptIds(tok, text, [reply], undefined)).toEqual(enc(text));
  expect(chatPromptIds(tok, text, ["Bye"], memory)).toEqual(enc(text));
});

test("a text that does not fall on the tokens' boundaries is not kept; the bound holds", () => {
  const memory = createReplyTokens(2);
  const ids = enc("Hello there");
  memory.remember(tok, ids, "Hello the"); // "there" is one token: "the" ends inside it
  memory.remember(tok, ids, "");
  expect(memory.size).toBe(0);
  memory.remember(tok, ids, "Hello");
  memory.remember(tok, ids, " there");
  memory.remember(tok, ids, "Hello there");
  expect(memory.size).toBe(2);
  expect(memory.get("Hello")).toBeUndefined(); // the least recently used went
  expect(memory.get(" there")).toEqual(ids.slice(1));
});

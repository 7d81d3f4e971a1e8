// model/token-table.ts on the real Qwen3 tokenizer (151,669 ids): the table decodes every id, every stream
// and every special-token choice exactly as the tokenizer it came from, crosses a worker boundary whole
// (structured clone), refuses to encode, and costs a few MB, not the tokenizer's hundreds.
import { expect, test } from "bun:test";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { tableTokenizer, tokenTable } from "../../model/token-table.ts";
import { qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";

const tokenizer = loadTokenizer(qwen3TokenizerFiles(), "qwen3/");
const table = structuredClone(tokenTable(tokenizer)); // as a slot worker receives it
const decoding = tableTokenizer(table, "qwen3/");

test("every id's bytes and text, and the special ids, are the tokenizer's", () => {
  expect([decoding.kind, decoding.size, decoding.bos, decoding.pad]).toEqual([
    tokenizer.kind,
    tokenizer.size,
    tokenizer.bos,
    tokenizer.pad,
  ]);
  expect(decoding.eos).toEqual([...tokenizer.eos]);
  expect(decoding.specials).toEqual([...tokenizer.specials]);
  for (let id = 0; id < tokenizer.size; id++) {
    const [a, b] = [decoding.tokenBytes(id), tokenizer.tokenBytes(id)];
    if (
      a.length !== b.length || a.some((x, i) => x !== b[i]) ||
      decoding.tokenText(id) !== tokenizer.tokenText(id)
    ) {
      throw new Error(`id ${id} differs`);
    }
  }
  expect(() => decoding.tokenBytes(tokenizer.size)).toThrow(RangeError);
});

test("decoding and streaming a chat with specials, multi-byte characters split across ids, as the tokenizer", () => {
  const text = "<|im_start|>user\nNaïve café — 日本語の文章 🙂 ok<|im_end|>\n<think>\n\n</think>";
  const ids = tokenizer.encode(text, { specials: true });
  for (const specials of [false, true]) {
    expect(decoding.decode(ids, { specials })).toBe(tokenizer.decode(ids, { specials }));
  }
  const [mine, theirs] = [decoding.streamDecoder(), tokenizer.streamDecoder()];
  expect(ids.map(mine)).toEqual(ids.map(theirs));
});

test("it only decodes, and is small", () => {
  expect(() => decoding.encode("hi")).toThrow(/only decodes/);
  const bytes = table.bytes.length + table.texts.length +
    4 * (table.bytesEnds.length + table.textsEnds.length);
  expect(bytes).toBeLessThan(4 << 20);
});

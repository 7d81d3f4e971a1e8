import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { parseJsonOnce, rememberLast } from "../../model/remember.ts";

test("an equal key gives the remembered result; a new key computes; the oldest is forgotten past the size", () => {
  let calls = 0;
  const parsed = rememberLast<{ n: number }>(2);
  const compute = (n: number) => () => (calls++, { n });
  const a = parsed(["a", 1], compute(1));
  expect(parsed(["a", 1], compute(99))).toBe(a); // same key: not computed again
  expect("ab".slice(0, 1)).toBe("a"); // an equal string made elsewhere is the same key
  expect(parsed(["ab".slice(0, 1), 1], compute(99))).toBe(a);
  expect(calls).toBe(1);
  parsed(["b", 1], compute(2));
  parsed(["c", 1], compute(3)); // "a" is now the oldest of three: forgotten
  expect(parsed(["a", 1], compute(4)).n).toBe(4);
  expect(calls).toBe(4);
  expect(parsed(["a", 2], compute(5)).n).toBe(5); // every part of the key counts
});

test("a throw is not remembered: the next call computes again", () => {
  const checked = rememberLast<number>(2);
  expect(() =>
    checked(["x"], () => {
      throw new Error("bad");
    })
  ).toThrow("bad");
  expect(checked(["x"], () => 7)).toBe(7);
});

test("parseJsonOnce: one object per text; the tokenizer it is shared with leaves it as parsed", () => {
  const dir = "tests/fixtures/qwen3-tokenizer";
  const files = {
    "tokenizer.json": readFileSync(`${dir}/tokenizer.json`, "utf8"),
    "tokenizer_config.json": readFileSync(`${dir}/tokenizer_config.json`, "utf8"),
  };
  const parsed = parseJsonOnce(files["tokenizer.json"]);
  expect(parseJsonOnce(files["tokenizer.json"].slice(0))).toBe(parsed);
  const before = JSON.stringify(parsed);
  // The build and a round trip read the shared object (model/hf-tokenizer.ts parses through the memo).
  const tokenizer = loadTokenizer(files, `${dir}/remember-test`);
  expect(tokenizer.decode(tokenizer.encode("The jury <|im_start|> said"))).toBe("The jury <|im_start|> said");
  expect(parseJsonOnce(files["tokenizer.json"])).toBe(parsed);
  expect(JSON.stringify(parsed)).toBe(before);
  expect(() => parseJsonOnce("{")).toThrow(SyntaxError);
});

/**
 * A pure function's results for the last few distinct inputs, compared exactly (`===` on each part of
 * the key: strings by content, objects by identity). For checks and builds over large texts that one
 * load asks for more than once: a Qwen3 tokenizer.json is 11 MB, and parsing and checking it took a
 * third of a lut4 load, done three times. Nothing is hashed, so no crafted input can pass for another;
 * a throw is not remembered.
 *
 * @example
 * ```ts
 * import { rememberLast } from "./remember.ts";
 * const parsed = rememberLast<unknown>(2);
 * const text = '{"a": 1}';
 * const a = parsed([text], () => JSON.parse(text));
 * const b = parsed([text], () => JSON.parse(text)); // the same object as `a`, not parsed again
 * ```
 * @module
 */

/** Returns `(key, compute)`: the result remembered for an equal key, else `compute()`'s, remembered. */
export function rememberLast<V>(size: number): (key: readonly unknown[], compute: () => V) => V {
  const entries: Array<{ key: readonly unknown[]; value: V }> = [];
  const same = (a: readonly unknown[], b: readonly unknown[]) =>
    a.length === b.length && a.every((part, i) => part === b[i]);
  return (key, compute) => {
    const at = entries.findIndex((e) => same(e.key, key));
    if (at >= 0) {
      const [hit] = entries.splice(at, 1);
      entries.unshift(hit);
      return hit.value;
    }
    const value = compute();
    entries.unshift({ key: [...key], value });
    if (entries.length > size) entries.length = size;
    return value;
  };
}

/**
 * `JSON.parse(text)`, the same object for the same text as the last four parsed (a tokenizer's files): a
 * tokenizer.json (11 MB at Qwen3's size) is parsed once per load by its reader's checks and the
 * tokenizer's build alike.
 * The object is shared, so no caller may change it (the tokenizer library only reads it:
 * tests/model/remember.test.ts). A text that is not JSON throws `JSON.parse`'s error each time.
 *
 * @example
 * ```ts
 * import { parseJsonOnce } from "./remember.ts";
 * const text = '{"model": {"type": "BPE"}}';
 * parseJsonOnce(text) === parseJsonOnce(text); // true: parsed once
 * ```
 */
export function parseJsonOnce(text: string): unknown {
  return parsedTexts([text], () => JSON.parse(text));
}

const parsedTexts = rememberLast<unknown>(4);

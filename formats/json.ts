/**
 * A strict JSON scanner: RFC 8259 read the way serde_json reads it, numbers kept as their source text.
 * safetensors headers, Hugging Face config files, lut4 headers and checkpoint headers all go through
 * it; `JSON.parse` would silently keep the last of two duplicate keys, turn `4.0` into `4`, and accept
 * arrays nested 100,000 deep that every recursive walk of the value after it (printing it, comparing
 * it) dies on. Nesting is bounded by `MAX_JSON_DEPTH`.
 *
 * @example
 * ```ts
 * const v = parseStrictJson('{"a": [4.0]}');
 * isJsonObject(v) && (v.a as JsonNumber[])[0].text; // "4.0"
 * ```
 * @module
 */
import { FormatError, type RefusalDetail } from "../model/error.ts";

/** A JSON number kept as its source text, so a caller can tell `4` from `4.0` and see past 2^53. */
export class JsonNumber {
  constructor(readonly text: string) {}
  /** The number's value as a JS number (rounded like `JSON.parse` would). */
  get value(): number {
    return Number(this.text);
  }
}

/** A JSON value as `parseStrictJson` returns it; objects have a null prototype. */
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
/** A JSON object: own keys only, in source order. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/**
 * How deep a JSON value ferry reads may nest: 64 levels of objects and arrays. No file ferry reads needs
 * more than 4, and a value within the limit can be walked recursively on every runtime.
 */
export const MAX_JSON_DEPTH = 64;

/** A JSON syntax error, a duplicate key or nesting past the limit; `at` is the path of the value being read. */
export class StrictJsonError extends FormatError {
  constructor(
    readonly code: "InvalidJson" | "DuplicateKey",
    readonly at: string,
    readonly offset: number,
    message: string,
    detail?: RefusalDetail,
  ) {
    // The scanner sees text, not a file: callers rethrow this under their own error, naming the file.
    super("<json>", at || "(top level)", `${at || "(top level)"}: ${message} at character ${offset}`, detail);
    this.name = "StrictJsonError";
  }
}

/** True when `v` is a JSON object (not an array, not null). */
export function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof JsonNumber);
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// JSON forbids raw control characters in strings, so the plain run stops at them too.
// deno-lint-ignore no-control-regex
const PLAIN_CHARS = /[^"\\\u0000-\u001f]*/y;
const ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

/**
 * Parses RFC 8259 JSON strictly, the way serde_json does: a duplicate key, a lone surrogate escape,
 * nesting deeper than `maxDepth` (default `MAX_JSON_DEPTH`) or anything but whitespace after the value
 * is an error. The error names the path of the value and the character offset where it was found.
 * Hand-written because `JSON.parse` silently keeps the last of duplicate keys and turns `4.0` into `4`.
 *
 * @example
 * ```ts
 * parseStrictJson('{"a": [4.0]}'); // { a: [JsonNumber { text: "4.0" }] }
 * parseStrictJson('{"a": 1, "a": 2}'); // throws StrictJsonError, code "DuplicateKey"
 * parseStrictJson('{"a": ' + "[".repeat(100)); // throws: a[0][0]…: nested deeper than 64 levels (the limit)
 * ```
 */
export function parseStrictJson(text: string, maxDepth = MAX_JSON_DEPTH): JsonValue {
  let i = 0;
  const path: Array<string | number> = [];
  // The path of the value being read (`a.b[2]`); past 12 steps (a value nested too deep) its start and "…".
  const where = () =>
    path.slice(0, 12).map((p, k) => typeof p === "number" ? `[${p}]` : k === 0 ? p : `.${p}`).join("") +
    (path.length > 12 ? "…" : "");
  const fail = (
    detail: string,
    code: "InvalidJson" | "DuplicateKey" = "InvalidJson",
    refusal?: RefusalDetail,
  ): never => {
    throw new StrictJsonError(code, where(), i, detail, refusal);
  };
  const skipSpace = () => {
    for (
      let c = text.charCodeAt(i);
      c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
      c = text.charCodeAt(++i)
    );
  };
  const hex4 = (): number => {
    const h = text.slice(i, i + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(h)) fail("bad \\u escape");
    i += 4;
    return parseInt(h, 16);
  };
  const readString = (): string => {
    i++; // the opening quote
    let out = "";
    for (;;) {
      PLAIN_CHARS.lastIndex = i;
      PLAIN_CHARS.test(text);
      out += text.slice(i, PLAIN_CHARS.lastIndex);
      i = PLAIN_CHARS.lastIndex;
      const c = text[i];
      if (c === '"') return i++, out;
      if (c === undefined) fail("unterminated string");
      if (c !== "\\") fail("control character in string (must be escaped)");
      const e = text[++i];
      i++;
      if (e in ESCAPES) {
        out += ESCAPES[e];
        continue;
      }
      if (e !== "u") i--, fail(`unknown escape \\${e ?? ""}`);
      const u = hex4();
      if (u >= 0xdc00 && u <= 0xdfff) i -= 6, fail("lone trailing surrogate in \\u escape");
      if (u >= 0xd800 && u <= 0xdbff) {
        if (text.slice(i, i + 2) !== "\\u") fail("lone leading surrogate in \\u escape");
        i += 2;
        const lo = hex4();
        if (lo < 0xdc00 || lo > 0xdfff) i -= 6, fail("lone leading surrogate in \\u escape");
        out += String.fromCharCode(u, lo);
      } else out += String.fromCharCode(u);
    }
  };
  const readValue = (depth: number): JsonValue => {
    skipSpace();
    const c = text[i];
    if (c === "{" || c === "[") {
      if (depth >= maxDepth) {
        fail(`nested deeper than ${maxDepth} levels (the limit)`, "InvalidJson", {
          expected: `at most ${maxDepth} levels of nested arrays and objects`,
          found: `a level ${maxDepth + 1} at character ${i}`,
        });
      }
      i++;
      skipSpace();
      const close = c === "{" ? "}" : "]";
      const obj: JsonObject = Object.create(null);
      const arr: JsonValue[] = [];
      if (text[i] === close) return i++, c === "{" ? obj : arr;
      for (;;) {
        skipSpace();
        if (c === "{") {
          if (text[i] !== '"') fail("expected a string key");
          const key = readString();
          skipSpace();
          if (text[i] !== ":") fail("expected ':' after a key");
          i++;
          path.push(key);
          if (Object.hasOwn(obj, key)) fail(`key ${JSON.stringify(key)} appears twice`, "DuplicateKey");
          obj[key] = readValue(depth + 1);
        } else {
          path.push(arr.length);
          arr.push(readValue(depth + 1));
        }
        path.pop();
        skipSpace();
        if (text[i] === ",") i++;
        else if (text[i] === close) return i++, c === "{" ? obj : arr;
        else fail(`expected ',' or '${close}'`);
      }
    }
    if (c === '"') return readString();
    for (const [word, v] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, i)) return i += word.length, v;
    }
    NUMBER.lastIndex = i;
    if (NUMBER.test(text)) {
      const n = new JsonNumber(text.slice(i, NUMBER.lastIndex));
      i = NUMBER.lastIndex;
      return n;
    }
    return fail(c === undefined ? "unexpected end of input" : `unexpected character ${JSON.stringify(c)}`);
  };
  const value = readValue(0);
  skipSpace();
  if (i !== text.length) fail("trailing characters after the JSON value");
  return value;
}

/**
 * A strict parse's value as `JSON.parse` would have given it: numbers as JS numbers, objects as plain
 * objects (a `"__proto__"` key stays an own property, as with `JSON.parse`). For readers whose checks are
 * written against plain values but who want the strict scanner's refusals: duplicate keys, lone
 * surrogates, nesting past `MAX_JSON_DEPTH`.
 *
 * @example
 * ```ts
 * plainJson(parseStrictJson('{"a": [4.0]}')); // { a: [4] }
 * ```
 */
export function plainJson(v: JsonValue): unknown {
  if (v instanceof JsonNumber) return v.value;
  if (Array.isArray(v)) return v.map(plainJson);
  if (isJsonObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainJson(x)]));
  return v;
}

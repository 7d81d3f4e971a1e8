/**
 * A strict JSON scanner: RFC 8259 read the way serde_json reads it, numbers kept as their source text.
 * safetensors headers and Hugging Face config files both go through it; `JSON.parse` would silently keep
 * the last of two duplicate keys and turn `4.0` into `4`.
 *
 * @example
 * ```ts
 * const v = parseStrictJson('{"a": [4.0]}');
 * isJsonObject(v) && (v.a as JsonNumber[])[0].text; // "4.0"
 * ```
 * @module
 */
import { FormatError } from "../model/error.ts";

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

/** A JSON syntax error or a duplicate key; `at` is the path of the value being read. */
export class StrictJsonError extends FormatError {
  constructor(
    readonly code: "InvalidJson" | "DuplicateKey",
    readonly at: string,
    readonly offset: number,
    message: string,
  ) {
    // The scanner sees text, not a file: callers rethrow this under their own error, naming the file.
    super("<json>", at || "(top level)", `${at || "(top level)"}: ${message} at character ${offset}`);
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
 * nesting deeper than `maxDepth` or anything but whitespace after the value is an error.
 * Hand-written because `JSON.parse` silently keeps the last of duplicate keys and turns `4.0` into `4`.
 *
 * @example
 * ```ts
 * parseStrictJson('{"a": [4.0]}'); // { a: [JsonNumber { text: "4.0" }] }
 * parseStrictJson('{"a": 1, "a": 2}'); // throws StrictJsonError, code "DuplicateKey"
 * ```
 */
export function parseStrictJson(text: string, maxDepth = 128): JsonValue {
  let i = 0;
  const path: Array<string | number> = [];
  const where = () => path.map((p, k) => typeof p === "number" ? `[${p}]` : k === 0 ? p : `.${p}`).join("");
  const fail = (detail: string, code: "InvalidJson" | "DuplicateKey" = "InvalidJson"): never => {
    throw new StrictJsonError(code, where(), i, detail);
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
      if (depth >= maxDepth) fail(`nested deeper than ${maxDepth} levels`);
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

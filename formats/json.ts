/**
 * A strict JSON scanner: RFC 8259 read the way serde_json reads it, numbers kept as their source text.
 * safetensors headers, Hugging Face config files, lut4 headers and checkpoint headers all go through
 * it; `JSON.parse` would silently keep the last of two duplicate keys, turn `4.0` into `4`, and accept
 * arrays nested 100,000 deep that every recursive walk of the value after it (printing it, comparing
 * it) dies on. Nesting is bounded by `MAX_JSON_DEPTH`.
 *
 * @example
 * ```ts
 * import { isJsonObject, JsonNumber, parseStrictJson } from "./json.ts";
 * const v = parseStrictJson('{"a": [4.0]}');
 * isJsonObject(v) && (v.a as JsonNumber[])[0].text; // "4.0"
 * ```
 * @module
 */
import { formatErrorClass, messageWithoutCode, type RefusalDetail } from "../model/error.ts";

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

/**
 * The scanner's two refusals: `InvalidJson` (a syntax error, nesting past the limit) and `DuplicateKey`,
 * a row of each table of a format that reads JSON, which rethrows them in its own class, with the same code.
 */
export const JSON_REFUSALS = ["InvalidJson", "DuplicateKey"] as const;
/** A code of `JSON_REFUSALS`. */
export type JsonRefusal = typeof JSON_REFUSALS[number];

/** A JSON syntax error, a duplicate key or nesting past the limit; `at` is the path of the value being read. */
export class StrictJsonError extends formatErrorClass([JSON_REFUSALS], (_json, at, why) => `${at}: ${why}`) {
  constructor(
    code: JsonRefusal,
    readonly at: string,
    readonly offset: number,
    message: string,
    detail?: RefusalDetail,
  ) {
    // The scanner sees text, not a file: callers rethrow this under their own error, naming the file.
    super("<json>", code, at || "(top level)", `${message} at character ${offset}`, detail);
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
 * import { parseStrictJson } from "./json.ts";
 * parseStrictJson('{"a": [4.0]}'); // { a: [JsonNumber { text: "4.0" }] }
 * parseStrictJson('{"a": 1, "a": 2}'); // throws StrictJsonError, code "DuplicateKey"
 * parseStrictJson('{"a": ' + "[".repeat(100)); // throws: a[0][0]…: nested deeper than 64 levels (the limit)
 * ```
 */
export function parseStrictJson(text: string, maxDepth = MAX_JSON_DEPTH): JsonValue {
  const s: Scan = { text, i: 0, path: [], maxDepth };
  const value = readValue(s, 0);
  skipSpace(s);
  if (s.i !== text.length) fail(s, "trailing characters after the JSON value");
  return value;
}

/** The scanner's state: the text, the offset, the path of the value being read, the depth limit. */
interface Scan {
  readonly text: string;
  i: number;
  readonly path: Array<string | number>;
  readonly maxDepth: number;
}

// The path of the value being read (`a.b[2]`); past 12 steps (a value nested too deep) its start and "…".
function where(s: Scan): string {
  const steps = s.path.slice(0, 12).map((p, k) => typeof p === "number" ? `[${p}]` : k === 0 ? p : `.${p}`);
  return steps.join("") + (s.path.length > 12 ? "…" : "");
}

function fail(
  s: Scan,
  detail: string,
  code: JsonRefusal = "InvalidJson",
  refusal?: RefusalDetail,
): never {
  throw new StrictJsonError(code, where(s), s.i, detail, refusal);
}

function skipSpace(s: Scan): void {
  for (let c = s.text.charCodeAt(s.i); c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;) {
    c = s.text.charCodeAt(++s.i);
  }
}

/** One value: an object or array (counted against the depth limit), a string, a literal or a number. */
function readValue(s: Scan, depth: number): JsonValue {
  skipSpace(s);
  const c = s.text[s.i];
  if (c === "{" || c === "[") return readContainer(s, c, depth);
  if (c === '"') return readString(s);
  for (const [word, v] of [["true", true], ["false", false], ["null", null]] as const) {
    if (s.text.startsWith(word, s.i)) return s.i += word.length, v;
  }
  NUMBER.lastIndex = s.i;
  if (NUMBER.test(s.text)) {
    const n = new JsonNumber(s.text.slice(s.i, NUMBER.lastIndex));
    s.i = NUMBER.lastIndex;
    return n;
  }
  return fail(s, c === undefined ? "unexpected end of input" : `unexpected character ${JSON.stringify(c)}`);
}

/** An object or an array, its members read one level deeper; a key seen twice is refused. */
function readContainer(s: Scan, open: "{" | "[", depth: number): JsonValue {
  if (depth >= s.maxDepth) {
    fail(s, `nested deeper than ${s.maxDepth} levels (the limit)`, "InvalidJson", {
      expected: `at most ${s.maxDepth} levels of nested arrays and objects`,
      found: `a level ${s.maxDepth + 1} at character ${s.i}`,
    });
  }
  s.i++;
  skipSpace(s);
  const close = open === "{" ? "}" : "]";
  const obj: JsonObject = Object.create(null);
  const arr: JsonValue[] = [];
  if (s.text[s.i] === close) return s.i++, open === "{" ? obj : arr;
  for (;;) {
    skipSpace(s);
    if (open === "{") {
      const key = readKey(s);
      s.path.push(key);
      if (Object.hasOwn(obj, key)) fail(s, `key ${JSON.stringify(key)} appears twice`, "DuplicateKey");
      obj[key] = readValue(s, depth + 1);
    } else {
      s.path.push(arr.length);
      arr.push(readValue(s, depth + 1));
    }
    s.path.pop();
    skipSpace(s);
    if (s.text[s.i] === ",") s.i++;
    else if (s.text[s.i] === close) return s.i++, open === "{" ? obj : arr;
    else fail(s, `expected ',' or '${close}'`);
  }
}

/** An object's key and the colon after it. */
function readKey(s: Scan): string {
  if (s.text[s.i] !== '"') fail(s, "expected a string key");
  const key = readString(s);
  skipSpace(s);
  if (s.text[s.i] !== ":") fail(s, "expected ':' after a key");
  s.i++;
  return key;
}

/** A string from its opening quote: plain runs copied whole, escapes decoded, lone surrogates refused. */
function readString(s: Scan): string {
  s.i++; // the opening quote
  let out = "";
  for (;;) {
    PLAIN_CHARS.lastIndex = s.i;
    PLAIN_CHARS.test(s.text);
    out += s.text.slice(s.i, PLAIN_CHARS.lastIndex);
    s.i = PLAIN_CHARS.lastIndex;
    const c = s.text[s.i];
    if (c === '"') return s.i++, out;
    if (c === undefined) fail(s, "unterminated string");
    if (c !== "\\") fail(s, "control character in string (must be escaped)");
    out += readEscape(s);
  }
}

/** One escape after its backslash (at `s.i`): a named one, or a `\u` escape (a surrogate pair kept whole). */
function readEscape(s: Scan): string {
  const e = s.text[++s.i];
  s.i++;
  if (e in ESCAPES) return ESCAPES[e];
  if (e !== "u") s.i--, fail(s, `unknown escape \\${e ?? ""}`);
  const u = hex4(s);
  if (u >= 0xdc00 && u <= 0xdfff) s.i -= 6, fail(s, "lone trailing surrogate in \\u escape");
  if (u < 0xd800 || u > 0xdbff) return String.fromCharCode(u);
  if (s.text.slice(s.i, s.i + 2) !== "\\u") fail(s, "lone leading surrogate in \\u escape");
  s.i += 2;
  const lo = hex4(s);
  if (lo < 0xdc00 || lo > 0xdfff) s.i -= 6, fail(s, "lone leading surrogate in \\u escape");
  return String.fromCharCode(u, lo);
}

function hex4(s: Scan): number {
  const h = s.text.slice(s.i, s.i + 4);
  if (!/^[0-9a-fA-F]{4}$/.test(h)) fail(s, "bad \\u escape");
  s.i += 4;
  return parseInt(h, 16);
}

/**
 * A strict parse's value as `JSON.parse` would have given it: numbers as JS numbers, objects as plain
 * objects (a `"__proto__"` key stays an own property, as with `JSON.parse`). For readers whose checks are
 * written against plain values but who want the strict scanner's refusals: duplicate keys, lone
 * surrogates, nesting past `MAX_JSON_DEPTH`.
 *
 * @example
 * ```ts
 * import { parseStrictJson, plainJson } from "./json.ts";
 * plainJson(parseStrictJson('{"a": [4.0]}')); // { a: [4] }
 * ```
 */
export function plainJson(v: JsonValue): unknown {
  if (v instanceof JsonNumber) return v.value;
  if (Array.isArray(v)) return v.map(plainJson);
  if (isJsonObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainJson(x)]));
  return v;
}

/**
 * `decoder.decode(bytes)`, also where `bytes` lie in shared memory (a file placed in the integer engine's
 * WebAssembly memory before it is read): browsers refuse to decode those, and are given a copy. Deno and
 * Bun decode them as they are, so they copy nothing. Throws what the decoder throws (invalid UTF-8 for
 * a fatal one).
 *
 * @example
 * ```ts
 * import { decodeShared } from "./json.ts";
 * const text = decodeShared(new TextDecoder(), new Uint8Array(new SharedArrayBuffer(8))); // 8 NULs
 * ```
 */
export function decodeShared(decoder: TextDecoder, bytes: Uint8Array): string {
  try {
    return decoder.decode(bytes);
  } catch (e) {
    const shared = typeof SharedArrayBuffer !== "undefined" && bytes.buffer instanceof SharedArrayBuffer;
    if (!shared) throw e;
    return decoder.decode(bytes.slice());
  }
}

/**
 * A binary file's length-prefixed JSON header, read strictly: UTF-8 (invalid bytes refused), no leading
 * byte-order mark (a plain decoder would drop it silently), then `parseStrictJson` and `plainJson`. Every
 * refusal goes through `refuse`, which throws the format's own error for its header field, so each
 * format keeps its class and codes (formats/checkpoint/checkpoint.ts and formats/lut4/lut4.ts read their headers so).
 *
 * @example
 * ```ts
 * import { jsonHeader } from "./json.ts";
 * import { Lut4Error } from "./lut4/lut4.ts";
 * declare const bytes: Uint8Array, path: string; // a lut4 file's header, and the file's path
 * const raw = jsonHeader(bytes, (code, why, detail) => {
 *   throw new Lut4Error(path, code, "header", why, detail);
 * });
 * ```
 */
export function jsonHeader(
  bytes: Uint8Array,
  refuse: (code: "InvalidUtf8" | JsonRefusal, why: string, detail: RefusalDetail) => never,
): unknown {
  let text: string;
  try {
    // ignoreBOM keeps a leading byte-order mark in the text, to be refused below (a plain decoder drops it).
    text = decodeShared(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }), bytes);
  } catch {
    return refuse("InvalidUtf8", "not valid UTF-8", { expected: "UTF-8 text" });
  }
  if (text.startsWith("\uFEFF")) {
    return refuse("InvalidJson", "starts with a UTF-8 byte-order mark; the header is strict JSON", {
      expected: 'a JSON object, its first byte "{"',
      found: "a byte-order mark (EF BB BF)",
    });
  }
  try {
    return plainJson(parseStrictJson(text));
  } catch (e) {
    if (!(e instanceof StrictJsonError)) throw e;
    const why = `${e.code === "DuplicateKey" ? "duplicate key" : "not valid JSON"}: ${messageWithoutCode(e)}`;
    return refuse(e.code, why, e);
  }
}

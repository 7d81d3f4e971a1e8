/**
 * f64lines: named float64 arrays as text, one line each, bit-exact both ways and parsed strictly,
 * all or nothing. The spec is formats/f64lines.md; readers/f64lines.ts is a 40-line reader of it.
 *
 * Hand-written because no npm package writes float64 values as exact `<m>p<e>` tokens and refuses
 * every non-canonical spelling. Values are moved by integer digit arithmetic and exact power-of-two
 * scaling only, so no decimal rounding ever touches one.
 *
 * @example
 * ```ts
 * const text = weightsToF64Lines(["w"], [new Float64Array([0.5, -0, 0.1])]);
 * // "v1|w|3|1p-1,-0,3602879701896397p-55\n#fnv1a32=…\n"
 * const { names, arrays } = parseF64Lines(text, "w.f64lines");
 * await writeF64Lines("out/model.f64lines", tensors);
 * const back = await readF64Lines("out/model.f64lines", paramShapes(config)); // f32, bit-exact
 * ```
 * @module
 */
import { type FileHandle, open, readFile, stat } from "node:fs/promises";
import { openAtomic, readExact, writeAtomic } from "./io.ts";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import {
  checkTensors,
  ConfigError,
  configToToml,
  type ModelConfig,
  type ParamShape,
  paramShapes,
  validateConfig,
} from "../model/config.ts";
import { numel, type Tensor } from "../model/tensor.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../model/tokenizer-types.ts";
import { checkTokenizerFiles, tokenizerInfo } from "./huggingface-tokenizer.ts";
import type { ExportOrigin, FormatDescriptor } from "./format.ts";
import { FormatError, type RefusalDetail } from "../model/error.ts";

/** Every way a text can fail to be f64lines, or a call can fail to make or use one. */
export type F64LinesErrorKind =
  | "utf8" // a name whose bytes are not UTF-8 (any other bad byte breaks another rule)
  | "unterminated" // the last line has no `\n`
  | "version" // a line that is not blank, `v1|…` or the checksum line
  | "fields" // a `v1` line without exactly four `|`-separated fields
  | "name" // a name holding `\r`, which a writer never leaves
  | "length-field" // the declared length is not canonical decimal digits
  | "length" // the declared length disagrees with the values
  | "token" // a value token outside the grammar
  | "domain" // a token in the grammar whose value is not a float64, or outside its form's range
  | "noncanonical" // a float64 spelled otherwise than its one canonical way
  | "checksum-missing" // no `#fnv1a32=` line
  | "checksum-format" // a `#fnv1a32=` line without exactly 8 lowercase hex digits
  | "checksum" // the checksum does not match the lines
  | "after-checksum" // a non-blank line after the checksum line
  | "mismatch" // writing: names and arrays differ in count
  | "f32" // reading tensors: a value that does not narrow to f32 exactly
  | "shape" // reading tensors: names or lengths differ from the expected shapes
  | "tokenizer" // reading a model: a `ferry.tokenizer/<file>` record that is not a tokenizer file's bytes
  | "file"; // the file (or the config beside it) cannot be read

/**
 * The one error of the format: `where` names the file (or `<string>`), `line` and `column` (both
 * from 1; 0 when no line applies) point at the offending line and token, `kind` names the rule.
 *
 * @example
 * ```ts
 * try { parseF64Lines(text, "w.f64lines"); } catch (e) { if (e instanceof F64LinesError) e.kind; }
 * ```
 */
export class F64LinesError extends FormatError {
  constructor(
    readonly where: string,
    readonly kind: F64LinesErrorKind,
    readonly line: number,
    readonly column: number,
    message: string,
    detail?: RefusalDetail,
  ) {
    // The field of a line-oriented text is its line (the rule is `kind`); a whole-file rule names the file.
    super(
      where,
      line > 0 ? `line ${line}` : "file",
      `${where}${line > 0 ? `:${line}:${column}` : ""}: ${kind}: ${message}`,
      detail,
    );
    this.name = "F64LinesError";
  }
}

/** What a parse gives back: parallel names and arrays, each array's line, and the file's checksum. */
export interface F64Lines {
  names: string[];
  arrays: Float64Array[];
  /** The line (from 1) each array was read from. */
  lines: number[];
  /** The verified `#fnv1a32=` value, an integer in [0, 2^32). */
  checksum: number;
}

// ---------------------------------------------------------------------------------------------
// Checksum: FNV-1a 64 (Noll) on two 32-bit halves. The low half's product is Math.imul; its carry
// into the high half is the top of an exact double product, so every step is exact arithmetic.

let fnvHi = 0, fnvLo = 0;
const fnvReset = () => (fnvHi = 0xcbf29ce4 | 0, fnvLo = 0x84222325 | 0);
const fold32 = () => (fnvHi ^ fnvLo) >>> 0;
const ENC = new TextEncoder();

// h = (h ^ byte) * (2^40 + 0x1b3) mod 2^64, where 2^40 moves the low half 8 bits into the high one.
// No default parameters: JavaScriptCore runs this loop several times slower once called without them.
function fnvBytes(bytes: Uint8Array, start: number, end: number): void {
  let hi = fnvHi, lo = fnvLo;
  for (let i = start; i < end; i++) {
    lo ^= bytes[i];
    const carry = ((lo >>> 0) * 435 * 2.3283064365386963e-10) | 0; // (lo * 0x1b3) >> 32, below 2^9
    hi = (Math.imul(hi, 435) + carry + (lo << 8)) | 0;
    lo = Math.imul(lo, 435);
  }
  fnvHi = hi, fnvLo = lo;
}

const hex8 = (x: number) => (x >>> 0).toString(16).padStart(8, "0");

/**
 * FNV-1a 64 of the bytes, as 16 lowercase hex digits (the form Noll publishes test vectors in).
 *
 * @example
 * ```ts
 * fnv1a64Hex(new TextEncoder().encode("a")); // "af63dc4c8601ec8c"
 * ```
 */
export function fnv1a64Hex(bytes: Uint8Array): string {
  fnvReset();
  fnvBytes(bytes, 0, bytes.length);
  return hex8(fnvHi) + hex8(fnvLo);
}

/**
 * FNV-1a 64 of the string's UTF-8 bytes, xor-folded to 32 bits: an integer in [0, 2^32).
 *
 * @example
 * ```ts
 * stringChecksum(""); // 0x4fd0bfc1 = 0xcbf29ce4 ^ 0x84222325
 * ```
 */
export function stringChecksum(s: string): number {
  const bytes = ENC.encode(s);
  fnvReset();
  fnvBytes(bytes, 0, bytes.length);
  return fold32();
}

// ---------------------------------------------------------------------------------------------
// Writing

const TWO32 = 4294967296;
const TWO53 = 9007199254740992;
// POW2[e + 1074] = 2^e for e in [-1074, 1023], built by doubling so every entry is exact.
const POW2 = new Float64Array(2098);
POW2[0] = 5e-324;
for (let i = 1; i < POW2.length; i++) POW2[i] = POW2[i - 1] * 2;
/** The longest token, `-9007199254740991p-1074`, with its comma. */
const MAX_TOKEN = 24;
// QUADS[x]: the four ASCII digits of x in [0, 10000), zero-padded, as a little-endian u32, so
// digits go out four at a time through a DataView (which allows unaligned stores).
const QUADS = new Uint32Array(10000);
for (let x = 0; x < 10000; x++) {
  const d = String(x).padStart(4, "0");
  QUADS[x] = d.charCodeAt(0) | d.charCodeAt(1) << 8 | d.charCodeAt(2) << 16 | d.charCodeAt(3) << 24;
}

// The n digits of u < 10^4 at p: all four bytes are stored, and the unused top ones (zeros) are
// overwritten by whatever comes next. Every buffer keeps MAX_TOKEN bytes of slack for that.
function putSmall(dv: DataView, p: number, u: number): number {
  const n = u < 10 ? 1 : u < 100 ? 2 : u < 1000 ? 3 : 4;
  dv.setUint32(p, QUADS[u] >>> (32 - 8 * n), true);
  return p + n;
}

// The decimal digits of the integer u, 0 <= u < 2^53, at p; returns the end. Scaling by 1e-4
// then truncating is the exact quotient below 2^31: 1e-4 rounds up, by far less than 1/10^4.
function putUint(dv: DataView, p: number, u: number): number {
  if (u < 1e4) return putSmall(dv, p, u);
  if (u < 1e8) {
    const h = (u * 0.0001) | 0;
    p = putSmall(dv, p, h);
    dv.setUint32(p, QUADS[u - h * 10000], true);
    return p + 4;
  }
  let q = Math.floor(u / 1e8), r = u - q * 1e8; // q * 1e8 is exact (a multiple of 2^8 below 2^61)
  if (r < 0) q--, r += 1e8; // u / 1e8 may round up to the next integer
  p = putUint(dv, p, q);
  const h = (r * 0.0001) | 0;
  dv.setUint32(p, QUADS[h], true);
  dv.setUint32(p + 4, QUADS[r - h * 10000], true);
  return p + 8;
}

// The canonical token of the value m * 2^e (m > 0 odd, below 2^53) at p, after any sign.
function putFinite(dv: DataView, p: number, m: number, e: number): number {
  if (e >= 0) {
    const bits = m < TWO32 ? 32 - Math.clz32(m) : 64 - Math.clz32(m / TWO32);
    if (e + bits <= 53) return putUint(dv, p, m * POW2[e + 1074]); // an integer below 2^53
    if (e + bits <= 62) {
      // Integers in [2^53, 2^62) are rare in weights; BigInt prints their exact digits simply.
      const s = (BigInt(m) << BigInt(e)).toString();
      for (let k = 0; k < s.length; k++) dv.setUint8(p++, s.charCodeAt(k));
      return p;
    }
  }
  p = putUint(dv, p, m);
  dv.setUint8(p++, 112); // p
  if (e < 0) dv.setUint8(p++, 45), e = -e;
  return putUint(dv, p, e);
}

const NAN = 0x6e616e, INF = 0x666e69; // "nan", "inf" as little-endian bytes

// The canonical token of the float64 with words lo, hi (as a Uint32Array gives them) at p.
function putF64(dv: DataView, p: number, lo: number, hi: number): number {
  const biased = (hi >>> 20) & 0x7ff;
  let top = hi & 0xfffff;
  if (biased === 0x7ff && (top | lo) !== 0) return dv.setUint32(p, NAN, true), p + 3; // sign, payload dropped
  if (hi >>> 31) dv.setUint8(p++, 45);
  if (biased === 0x7ff) return dv.setUint32(p, INF, true), p + 3;
  if (biased === 0 && (top | lo) === 0) return dv.setUint8(p, 48), p + 1;
  if (biased !== 0) top |= 0x100000;
  // Strip the trailing zero bits, counted from the lowest set bit, so m is odd; both parts exact.
  let m: number, tz: number;
  if (lo !== 0) tz = 31 - Math.clz32(lo & -lo), m = top * POW2[1074 + 32 - tz] + (lo >>> tz);
  else tz = 63 - Math.clz32(top & -top), m = top >>> (tz - 32);
  return putFinite(dv, p, m, (biased === 0 ? -1074 : biased - 1075) + tz);
}

// The same for a float32's bits: the token is that of the widened value, with int32 steps only.
function putF32(dv: DataView, p: number, bits: number): number {
  const biased = (bits >>> 23) & 0xff;
  let m = bits & 0x7fffff;
  if (biased === 0xff && m !== 0) return dv.setUint32(p, NAN, true), p + 3;
  if (bits >>> 31) dv.setUint8(p++, 45);
  if (biased === 0xff) return dv.setUint32(p, INF, true), p + 3;
  if (biased === 0 && m === 0) return dv.setUint8(p, 48), p + 1;
  if (biased !== 0) m |= 0x800000;
  const tz = 31 - Math.clz32(m & -m);
  return putFinite(dv, p, m >>> tz, (biased === 0 ? -149 : biased - 150) + tz);
}

// The tokens of one array, comma-separated, at p. Typed arrays are read as their bits.
function putValues(dv: DataView, p: number, a: ArrayLike<number>): number {
  const n = a.length;
  if (n === 0) return p;
  if (a instanceof Float32Array) {
    const w = new Uint32Array(a.buffer, a.byteOffset, n);
    p = putF32(dv, p, w[0]);
    for (let i = 1; i < n; i++) dv.setUint8(p++, 44), p = putF32(dv, p, w[i]);
  } else if (a instanceof Float64Array) {
    const w = new Uint32Array(a.buffer, a.byteOffset, 2 * n);
    p = putF64(dv, p, w[0], w[1]);
    for (let i = 1; i < n; i++) dv.setUint8(p++, 44), p = putF64(dv, p, w[2 * i], w[2 * i + 1]);
  } else {
    for (let i = 0; i < n; i++) {
      if (i > 0) dv.setUint8(p++, 44);
      BITS[0] = a[i];
      p = putF64(dv, p, WORDS[0], WORDS[1]);
    }
  }
  return p;
}

const BITS = new Float64Array(1);
const WORDS = new Uint32Array(BITS.buffer); // [low word, high word]: ferry hosts are little-endian
const TOKEN = new Uint8Array(MAX_TOKEN + 4);
const TOKEN_VIEW = new DataView(TOKEN.buffer);
const LATIN1 = new TextDecoder("latin1");
const UTF8 = new TextDecoder();

/**
 * The canonical token of one float64: `0`, `-0`, `inf`, `-inf`, `nan`, digits for integers below
 * 2^62 in magnitude, otherwise `<m>p<e>` with m odd and below 2^53. Every NaN is `nan`.
 *
 * @example
 * ```ts
 * encodeF64Token(0.1); // "3602879701896397p-55"
 * encodeF64Token(2 ** 61); // "2305843009213693952"
 * ```
 */
export function encodeF64Token(x: number): string {
  BITS[0] = x;
  return LATIN1.decode(TOKEN.subarray(0, putF64(TOKEN_VIEW, 0, WORDS[0], WORDS[1])));
}

const sanitize = (name: string) => /[|\n\r]/.test(name) ? name.replace(/[|\n\r]/g, "_") : name;

/**
 * Named arrays as f64lines bytes (UTF-8): one `v1|name|len|tokens` line each, then the checksum
 * line. Deterministic; `|`, `\n` and `\r` in names become `_`; Float32Array values widen exactly.
 * A count mismatch between names and arrays throws (kind `mismatch`) and writes nothing.
 *
 * @example
 * ```ts
 * const bytes = weightsToF64LinesBytes(["w"], [new Float32Array([0.5])]); // "v1|w|1|1p-1\n#fnv1a32=…\n"
 * ```
 */
export function weightsToF64LinesBytes(
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
  where = "<string>",
): Uint8Array {
  if (names.length !== arrays.length) {
    const why = `${names.length} names but ${arrays.length} arrays: nothing written`;
    throw new F64LinesError(where, "mismatch", 0, 0, why);
  }
  const clean = names.map(sanitize);
  let size = 18; // the checksum line
  for (let k = 0; k < clean.length; k++) size += 24 + 3 * clean[k].length + MAX_TOKEN * arrays[k].length;
  const buf = new Uint8Array(size), dv = new DataView(buf.buffer);
  let p = 0;
  for (let k = 0; k < clean.length; k++) {
    const a = arrays[k];
    buf[p] = 118, buf[p + 1] = 49, buf[p + 2] = 124; // v1|
    p += 3 + ENC.encodeInto(clean[k], buf.subarray(p + 3)).written;
    buf[p++] = 124;
    p = putUint(dv, p, a.length);
    buf[p++] = 124;
    p = putValues(dv, p, a);
    buf[p++] = 10;
  }
  fnvReset();
  fnvBytes(buf, 0, p);
  p += ENC.encodeInto(`#fnv1a32=${hex8(fold32())}\n`, buf.subarray(p)).written;
  return buf.subarray(0, p);
}

/**
 * Named arrays as f64lines text; see `weightsToF64LinesBytes`.
 *
 * @example
 * ```ts
 * weightsToF64Lines(["a"], [[0.5, 2 ** 62]]); // "v1|a|2|1p-1,1p62\n#fnv1a32=…\n"
 * ```
 */
export function weightsToF64Lines(
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
  where = "<string>",
): string {
  return UTF8.decode(weightsToF64LinesBytes(names, arrays, where));
}

// ---------------------------------------------------------------------------------------------
// Reading

const FAILS: ReadonlyArray<readonly [F64LinesErrorKind, string]> = [
  ["token", ""],
  ["token", "not a value token (0, -0, inf, -inf, nan, digits or <m>p<e>)"],
  ["token", "the exponent after 'p' has no digits"],
  ["noncanonical", "a leading zero"],
  ["noncanonical", "the exponent has a leading zero or is -0"],
  ["noncanonical", "an integer below 2^62 is written in digits"],
  ["domain", "the significand is 2^53 or more"],
  ["domain", "the significand is even (canonical m is odd; zero is 0 or -0)"],
  ["domain", "below 2^-1074, the smallest float64 step"],
  ["domain", "2^1024 or more, beyond the largest float64"],
  ["domain", "digits are for integers below 2^62"],
  ["domain", "not a float64 (the integer falls between two of them)"],
  ["token", "a token ends at ',' or at the end of the line"],
  ["length", "more values than the declared length"],
  ["fields", "a fifth field: values cannot hold '|'"],
];
const TOO_MANY = 13, PIPE = 14;

// Where scanValues failed; written only on failure, so the per-value path touches no shared state.
let failAt = 0;
const bad = (at: number, code: number) => (failAt = at, -code);

// 16 to 19 digits: the exact integer decides, and this is the rare path, so BigInt is fine.
function bigDigits(b: Uint8Array, ds: number, de: number): number {
  if (de - ds > 19) return -10;
  const big = BigInt(String.fromCharCode(...b.subarray(ds, de)));
  if (big >= 4611686018427387904n) return -10;
  const v = Number(big);
  return BigInt(v) === big ? v : -11;
}

/**
 * Parses the comma-separated tokens of b[i, end) into out, where b[end] ends the line. Returns how
 * many there were, or -code (an index in FAILS) with failAt at the offending token. One pass, one
 * byte at a time, no allocation.
 */
function scanValues(b: Uint8Array, i: number, end: number, out: Float64Array): number {
  const len = out.length;
  let k = 0;
  if (i === end) return 0;
  for (;;) {
    if (k === len) return bad(i, TOO_MANY);
    const ts = i;
    let c = b[i], neg = false, v: number;
    if (c === 45) neg = true, c = b[++i];
    if (c > 48 && c <= 57) {
      const ds = i;
      let m = c - 48;
      // Exact while m < 2^53; past that rounding is monotone, so `m >= 2^53` is still decided right.
      while ((c = b[++i]) >= 48 && c <= 57) m = m * 10 + (c - 48);
      if (c === 112) {
        c = b[++i];
        let eneg = false;
        if (c === 45) eneg = true, c = b[++i];
        if (!(c >= 48 && c <= 57)) return bad(ts, 2);
        const es = i;
        let e = c - 48;
        while ((c = b[++i]) >= 48 && c <= 57) e = e * 10 + (c - 48);
        if (b[es] === 48 && (i - es > 1 || eneg)) return bad(ts, 4);
        if (eneg) e = -e;
        if (m >= TWO53) return bad(ts, 6);
        if ((m & 1) === 0) return bad(ts, 7); // ToInt32 keeps the low bits, so the parity too
        const bits = m < TWO32 ? 32 - Math.clz32(m) : 64 - Math.clz32(m / TWO32);
        if (e < -1074) return bad(ts, 8);
        if (e + bits > 1024) return bad(ts, 9);
        if (e >= 0 && e + bits <= 62) return bad(ts, 5);
        v = m * POW2[e + 1074]; // exact: 2^e is exact and the product is a float64
      } else if (i - ds < 16) {
        v = m;
      } else {
        v = bigDigits(b, ds, i);
        if (v < 0) return bad(ts, -v);
      }
    } else if (c === 48) {
      c = b[++i];
      if (c >= 48 && c <= 57) return bad(ts, 3);
      if (c === 112) return bad(ts, 7);
      v = 0;
    } else if (c === 105 && b[i + 1] === 110 && b[i + 2] === 102) {
      i += 3, v = Infinity;
    } else if (c === 110 && !neg && b[i + 1] === 97 && b[i + 2] === 110) {
      i += 3, v = NaN;
    } else {
      return bad(ts, 1);
    }
    out[k++] = neg ? -v : v;
    if (i === end) return k;
    c = b[i];
    if (c !== 44) return c === 124 ? bad(i, PIPE) : bad(ts, 12);
    i++;
  }
}

const NAME = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const LOOSE = new TextDecoder("utf-8", { ignoreBOM: true });
const NEWLINE = new Uint8Array([10]);

// How many leading bytes are valid UTF-8: a prefix decodes in streaming mode unless it holds a bad
// sequence, so bisect. For messages only.
function utf8Prefix(b: Uint8Array): number {
  let ok = 0, no = b.length;
  while (no - ok > 1) {
    const mid = (ok + no) >>> 1;
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(b.subarray(0, mid), { stream: true }), ok = mid;
    } catch {
      no = mid;
    }
  }
  return ok;
}

// For messages: the column (in characters, from 1) of byte `at` on the line starting at byte `start`.
const columnOf = (b: Uint8Array, start: number, at: number) => LOOSE.decode(b.subarray(start, at)).length + 1;

/**
 * Parses f64lines strictly, from text or from a file's bytes: any broken rule anywhere throws
 * F64LinesError with the line and column, and nothing is returned. Blank lines and CRLF endings
 * are tolerated. Every array is a fresh Float64Array.
 *
 * @example
 * ```ts
 * const { names, arrays, checksum } = parseF64Lines(text, "weights.f64lines");
 * ```
 */
export function parseF64Lines(input: string | Uint8Array, where = "<string>"): F64Lines {
  const b = typeof input === "string" ? ENC.encode(input) : input;
  const names: string[] = [], arrays: Float64Array[] = [], lines: number[] = [];
  let pos = 0, lineNo = 0, sum = -1, sumLine = 0;
  const n = b.length;
  fnvReset();
  while (pos < n) {
    lineNo++;
    const nl = b.indexOf(10, pos);
    const lineStart = pos;
    const fail = (kind: F64LinesErrorKind, at: number, why: string): never => {
      throw new F64LinesError(where, kind, lineNo, columnOf(b, lineStart, at), why);
    };
    if (nl < 0) fail("unterminated", n, "the last line has no \\n");
    const end = nl > pos && b[nl - 1] === 13 ? nl - 1 : nl;
    if (end === pos) {
      pos = nl + 1;
      continue;
    }
    if (sum >= 0) fail("after-checksum", pos, "the checksum line must be the last non-blank line");
    if (b[pos] === 118 && b[pos + 1] === 49 && b[pos + 2] === 124) { // v1|
      const p2 = b.indexOf(124, pos + 3), p3 = p2 < 0 ? -1 : b.indexOf(124, p2 + 1);
      if (p3 < 0 || p3 >= end) fail("fields", end, "a v1 line is v1|<name>|<len>|<values>");
      let name = "";
      try {
        name = NAME.decode(b.subarray(pos + 3, p2));
      } catch {
        fail("utf8", pos + 3 + utf8Prefix(b.subarray(pos + 3, p2)), "the name is not valid UTF-8");
      }
      if (name.includes("\r")) fail("name", pos + 3, "the name holds \\r (a writer makes it _)");
      const ls = p2 + 1, field = LOOSE.decode(b.subarray(ls, p3));
      if (!/^(0|[1-9][0-9]{0,14})$/.test(field)) {
        fail("length-field", ls, `'${field}' is not a canonical length`);
      }
      const len = +field, vs = p3 + 1;
      const declared = () => `declares ${len} values but holds ${countValues(b, vs, end)}`;
      // n values need at least n - 1 commas: refuse a lying length before allocating for it.
      if (len > end - vs + 1) fail("length", ls, declared());
      const arr = new Float64Array(len);
      const k = scanValues(b, vs, end, arr);
      if (k < 0) {
        const [kind, why] = FAILS[-k];
        if (-k === TOO_MANY) fail(kind, ls, declared());
        let te = failAt;
        while (te < end && b[te] !== 44 && b[te] !== 124) te++;
        fail(kind, failAt, -k === PIPE ? why : `'${LOOSE.decode(b.subarray(failAt, te))}': ${why}`);
      }
      if (k !== len) fail("length", ls, declared());
      names.push(name), arrays.push(arr), lines.push(lineNo);
      fnvBytes(b, pos, end);
      fnvBytes(NEWLINE, 0, 1);
    } else if (LOOSE.decode(b.subarray(pos, Math.min(end, pos + 9))) === "#fnv1a32=") {
      const h = LOOSE.decode(b.subarray(pos + 9, end));
      if (!/^[0-9a-f]{8}$/.test(h)) fail("checksum-format", pos + 9, `'${h}' is not 8 lowercase hex digits`);
      sum = parseInt(h, 16), sumLine = lineNo;
    } else {
      const bar = b.indexOf(124, pos);
      const tag = LOOSE.decode(b.subarray(pos, bar < 0 || bar > end ? end : bar));
      if (tag === "v1") fail("fields", end, "a v1 line is v1|<name>|<len>|<values>");
      fail("version", pos, `unknown version tag '${tag.slice(0, 40)}' (this reader knows v1)`);
    }
    pos = nl + 1;
  }
  if (sum < 0) throw new F64LinesError(where, "checksum-missing", lineNo + 1, 1, "no #fnv1a32= line");
  if (fold32() !== sum) {
    const why = `the lines hash to ${hex8(fold32())}: the file is corrupt`;
    throw new F64LinesError(where, "checksum", sumLine, 10, why);
  }
  return { names, arrays, lines, checksum: sum };
}

// For messages only: how many comma-separated values a field holds.
function countValues(b: Uint8Array, vs: number, end: number): number {
  let count = end > vs ? 1 : 0;
  for (let i = vs; i < end; i++) if (b[i] === 44) count++;
  return count;
}

/**
 * The float64 of one token, refusing every token a writer would not produce.
 *
 * @example
 * ```ts
 * decodeF64Token("1p-1074"); // 5e-324
 * decodeF64Token("2p-2"); // throws F64LinesError (domain: even significand)
 * ```
 */
export function decodeF64Token(token: string): number {
  const out = new Float64Array(1);
  const k = token.includes(",") ? -12 : scanValues(ENC.encode(token + "\n"), 0, token.length, out);
  if (k === 1) return out[0];
  const [kind, why] = FAILS[k === 0 ? 1 : -k];
  throw new F64LinesError("<token>", kind, 1, 1, `'${token}': ${why}`);
}

// ---------------------------------------------------------------------------------------------
// Model level and files

/**
 * A model's tensors as f64lines text; each f32 value widens to float64 exactly. Dims are not in
 * the format: the reader takes them from the model config (`paramShapes`).
 *
 * @example
 * ```ts
 * const text = tensorsToF64Lines(initParams(PRESETS.tiny, 1));
 * ```
 */
export function tensorsToF64Lines(tensors: readonly Tensor[]): string {
  return weightsToF64Lines(tensors.map((t) => t.name), tensors.map((t) => t.data));
}

/**
 * Parses f64lines (text or file bytes) into f32 tensors, refusing (kind `f32`) any value that
 * does not narrow to f32 exactly (float64-only precision, subnormals or magnitudes); NaN narrows
 * to NaN. With `shapes` (e.g. `paramShapes(config)`), names, order and sizes must match (kind
 * `shape`) and the dims come from there; without, each tensor is one-dimensional.
 *
 * @example
 * ```ts
 * const tensors = f64LinesToTensors(text, "model.f64lines", paramShapes(PRESETS.tiny));
 * ```
 */
export function f64LinesToTensors(
  input: string | Uint8Array,
  where = "<string>",
  shapes?: readonly ParamShape[],
): Tensor[] {
  return parsedToTensors(parseF64Lines(input, where), input, where, shapes);
}

/**
 * A model's f64lines file: its tensors (as `f64LinesToTensors` with `shapes`) and the tokenizer files
 * its trailing `ferry.tokenizer/<file>` records carry, each record's values the file's UTF-8 bytes,
 * checked as every format checks a tokenizer (against `vocabSize`). No records: a byte model.
 *
 * @example
 * ```ts
 * const { tensors, tokenizer } = f64LinesModel(bytes, "m.f64lines", paramShapes(config), config.vocab_size);
 * ```
 */
export function f64LinesModel(
  input: Uint8Array,
  where: string,
  shapes: readonly ParamShape[],
  vocabSize: number,
): { tensors: Tensor[]; tokenizer?: TokenizerFiles } {
  const parsed = parseF64Lines(input, where);
  const first = parsed.names.findIndex((n) => n.startsWith(TOKENIZER_RECORD_PREFIX));
  if (first < 0) return { tensors: parsedToTensors(parsed, input, where, shapes) };
  const cut = (a: F64Lines) => ({ ...a, names: a.names.slice(0, first), arrays: a.arrays.slice(0, first) });
  const tensors = parsedToTensors(
    { ...cut(parsed), lines: parsed.lines.slice(0, first) },
    input,
    where,
    shapes,
  );
  const files: Record<string, string> = {};
  for (let k = first; k < parsed.names.length; k++) {
    const name = parsed.names[k], file = name.slice(TOKENIZER_RECORD_PREFIX.length);
    const bad = (why: string) => new F64LinesError(where, "tokenizer", parsed.lines[k], 4, `${name}: ${why}`);
    if (!name.startsWith(TOKENIZER_RECORD_PREFIX)) throw bad("a tensor after the tokenizer records");
    if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(file) || Object.hasOwn(files, file)) {
      throw bad(`not a tokenizer file name (${TOKENIZER_FILE_NAMES.join(", ")}) or a repeat`);
    }
    const values = parsed.arrays[k], bytes = new Uint8Array(values.length);
    for (let i = 0; i < values.length; i++) {
      if (!(values[i] >= 0 && values[i] <= 255 && Number.isInteger(values[i]))) {
        throw bad(`value ${i} is ${values[i]}, not a byte (an integer 0 to 255)`);
      }
      bytes[i] = values[i];
    }
    try {
      files[file] = TEXT.decode(bytes);
    } catch {
      throw bad("the bytes are not valid UTF-8");
    }
  }
  if (files["tokenizer.json"] === undefined) {
    throw new F64LinesError(
      where,
      "tokenizer",
      0,
      0,
      `the tokenizer records have no ${TOKENIZER_RECORD_PREFIX}tokenizer.json`,
    );
  }
  const tokenizer = files as TokenizerFiles;
  try {
    checkTokenizerFiles(tokenizer, vocabSize, { dir: where, config: f64linesConfigPath(where) });
  } catch (e) {
    // The shared check's refusal, as this format's error (it names the record's file and field).
    if (!(e instanceof FormatError)) throw e;
    throw new F64LinesError(where, "tokenizer", parsed.lines[first], 4, e.message);
  }
  return { tensors, tokenizer };
}

const TEXT = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Bytes read at a time by `readF64LinesModel`; a value token is at most 24 bytes, a line header 1 MiB. */
const STREAM_CHUNK = 4 << 20;
const MAX_LINE_HEAD = 1 << 20;

/**
 * `f64LinesModel` for a file on disk, streamed: the file is read 4 MiB at a time and each line's values
 * are parsed, narrowed to f32 and checked as they arrive, so memory holds the tensors being built and one
 * chunk, never the file's text or a line's float64 array. The same rules and the same refusals (kind,
 * line) as `parseF64Lines` and `f64LinesModel`, the model's own rules only once the checksum has been
 * verified, with one difference of order: a declared length is weighed against the bytes left in the
 * file, not the line's (which are not known in advance), so a broken line may be refused for the first
 * bad token it holds rather than for its length. A line's `v1|name|len|` must fit in 1 MiB.
 *
 * @example
 * ```ts
 * const { tensors, tokenizer } = await readF64LinesModel("m.f64lines", paramShapes(config), config.vocab_size);
 * ```
 */
export async function readF64LinesModel(
  path: string,
  shapes: readonly ParamShape[],
  vocabSize: number,
  opts: { chunkBytes?: number } = {},
): Promise<{ tensors: Tensor[]; tokenizer?: TokenizerFiles }> {
  const fh = await open(path, "r");
  try {
    const chunk = Math.max(64, opts.chunkBytes ?? STREAM_CHUNK); // tests make it tiny to cross every boundary
    return await streamModel(fh, (await fh.stat()).size, path, shapes, vocabSize, chunk);
  } finally {
    await fh.close();
  }
}

async function streamModel(
  fh: FileHandle,
  size: number,
  where: string,
  shapes: readonly ParamShape[],
  vocabSize: number,
  chunk: number,
): Promise<{ tensors: Tensor[]; tokenizer?: TokenizerFiles }> {
  const window = fileWindow(fh, size, where, chunk);
  // The running FNV state, kept here across the reads (another f64lines call may run meanwhile).
  let hi = 0xcbf29ce4 | 0, lo = 0x84222325 | 0;
  const hash = (b: Uint8Array, from: number, to: number) => {
    fnvHi = hi, fnvLo = lo;
    fnvBytes(b, from, to);
    hi = fnvHi, lo = fnvLo;
  };
  const model: ModelLines = { shapes, tensors: [], files: {}, firstRecord: 0 };
  let lineNo = 0, sum = -1, sumLine = 0;
  await window.fill();
  while (!window.done()) {
    lineNo++;
    const fail = (kind: F64LinesErrorKind, column: number, why: string): never => {
      throw new F64LinesError(where, kind, lineNo, column, why);
    };
    const nl = await window.findLine(MAX_LINE_HEAD);
    const { buf, pos } = window;
    if (buf[pos] === 10 || (buf[pos] === 13 && buf[pos + 1] === 10)) { // a blank line
      window.pos += buf[pos] === 10 ? 1 : 2;
      continue;
    }
    if (sum >= 0) fail("after-checksum", 1, "the checksum line must be the last non-blank line");
    if (buf[pos] === 118 && buf[pos + 1] === 49 && buf[pos + 2] === 124) { // v1|
      await dataLine(window, model, lineNo, nl, where, hash);
      continue;
    }
    if (nl < 0) {
      fail(window.eof ? "unterminated" : "version", 1, window.eof ? "the last line has no \\n" : "no v1|");
    }
    const end = buf[nl - 1] === 13 ? nl - 1 : nl;
    const text = LOOSE.decode(buf.subarray(pos, end));
    if (!text.startsWith("#fnv1a32=")) {
      const tag = text.split("|")[0];
      if (tag === "v1") fail("fields", text.length + 1, "a v1 line is v1|<name>|<len>|<values>");
      fail("version", 1, `unknown version tag '${tag.slice(0, 40)}' (this reader knows v1)`);
    }
    const h = text.slice(9);
    if (!/^[0-9a-f]{8}$/.test(h)) fail("checksum-format", 10, `'${h}' is not 8 lowercase hex digits`);
    sum = parseInt(h, 16), sumLine = lineNo, window.pos = nl + 1;
  }
  if (sum < 0) throw new F64LinesError(where, "checksum-missing", lineNo + 1, 1, "no #fnv1a32= line");
  if (((hi ^ lo) >>> 0) !== sum) {
    const why = `the lines hash to ${hex8((hi ^ lo) >>> 0)}: the file is corrupt`;
    throw new F64LinesError(where, "checksum", sumLine, 10, why);
  }
  // Only now, with the checksum verified, the model's own rules, as parseF64Lines' callers apply them.
  if (model.deferred) throw model.deferred;
  const { tensors, files, firstRecord } = model;
  if (tensors.length !== shapes.length) {
    const why = `holds ${tensors.length} arrays where ${shapes.length} are expected`;
    throw new F64LinesError(where, "shape", 0, 0, why);
  }
  const bad = checkTensors(shapes, tensors);
  if (bad) throw new F64LinesError(where, "shape", 0, 0, bad.message, bad);
  if (firstRecord === 0) return { tensors };
  if (files["tokenizer.json"] === undefined) {
    const why = `the tokenizer records have no ${TOKENIZER_RECORD_PREFIX}tokenizer.json`;
    throw new F64LinesError(where, "tokenizer", 0, 0, why);
  }
  const tokenizer = files as TokenizerFiles;
  try {
    checkTokenizerFiles(tokenizer, vocabSize, { dir: where, config: f64linesConfigPath(where) });
  } catch (e) {
    if (!(e instanceof FormatError)) throw e;
    throw new F64LinesError(where, "tokenizer", firstRecord, 4, e.message);
  }
  return { tensors, tokenizer };
}

// What the data lines of a model file build: its tensors in order, then its tokenizer records' files,
// and the first refusal of the model's own rules (thrown only once the checksum has been verified).
interface ModelLines {
  shapes: readonly ParamShape[];
  tensors: Tensor[];
  files: Record<string, string>;
  firstRecord: number;
  deferred?: F64LinesError;
}

// A window over a file read a chunk at a time: buf[pos..len) are the bytes not yet consumed.
function fileWindow(fh: FileHandle, size: number, where: string, chunk: number) {
  const w = {
    chunk,
    buf: new Uint8Array(chunk + MAX_LINE_HEAD),
    len: 0,
    pos: 0,
    base: 0, // the file offset of buf[0]
    size,
    eof: size === 0,
    done: () => w.eof && w.pos >= w.len,
    async fill() {
      if (w.eof) return;
      if (w.pos > 0) w.buf.copyWithin(0, w.pos, w.len), w.len -= w.pos, w.base += w.pos, w.pos = 0;
      if (w.len + chunk > w.buf.length) {
        const bigger = new Uint8Array(w.len + chunk);
        bigger.set(w.buf.subarray(0, w.len));
        w.buf = bigger;
      }
      const want = Math.min(chunk, size - w.base - w.len), at = w.base + w.len;
      const changed = () => new F64LinesError(where, "file", 0, 0, "the file changed while being read");
      await readExact(fh, w.buf.subarray(w.len, w.len + want), at, changed);
      w.len += want;
      w.eof = w.base + w.len >= size;
    },
    /** The index in buf of the next newline, reading on while fewer than `ahead` bytes are there; -1 if none. */
    async findLine(ahead: number): Promise<number> {
      let at = w.buf.subarray(w.pos, w.len).indexOf(10);
      while (at < 0 && !w.eof && w.len - w.pos < ahead) {
        await w.fill(), at = w.buf.subarray(w.pos, w.len).indexOf(10);
      }
      return at < 0 ? -1 : w.pos + at;
    },
  };
  return w;
}

// One `v1|name|len|values` line, streamed: its head checked, then its values a window at a time, each
// window cut after its last comma (a token never spans two), parsed, narrowed and stored as they come.
async function dataLine(
  w: ReturnType<typeof fileWindow>,
  model: ModelLines,
  lineNo: number,
  nl: number,
  where: string,
  hash: (b: Uint8Array, from: number, to: number) => void,
): Promise<void> {
  const fail = (kind: F64LinesErrorKind, column: number, why: string): never => {
    throw new F64LinesError(where, kind, lineNo, column, why);
  };
  const later = (kind: F64LinesErrorKind, column: number, why: string) => {
    model.deferred ??= new F64LinesError(where, kind, lineNo, column, why);
  };
  const head = w.buf.subarray(w.pos, nl < 0 ? w.len : nl);
  const p2 = head.indexOf(124, 3), p3 = p2 < 0 ? -1 : head.indexOf(124, p2 + 1);
  if (p3 < 0) {
    if (nl < 0 && w.eof) fail("unterminated", 1, "the last line has no \\n");
    fail("fields", 1, "a v1 line is v1|<name>|<len>|<values> (with v1|<name>|<len>| within 1 MiB)");
  }
  let name = "";
  try {
    name = NAME.decode(head.subarray(3, p2));
  } catch {
    fail("utf8", 4 + utf8Prefix(head.subarray(3, p2)), "the name is not valid UTF-8");
  }
  if (name.includes("\r")) fail("name", 4, "the name holds \\r (a writer makes it _)");
  const field = LOOSE.decode(head.subarray(p2 + 1, p3));
  const headChars = LOOSE.decode(head.subarray(0, p3 + 1)).length, lenColumn = headChars - field.length;
  if (!/^(0|[1-9][0-9]{0,14})$/.test(field)) {
    fail("length-field", lenColumn, `'${field}' is not a canonical length`);
  }
  const count = +field;
  // n values need at least n - 1 commas: refuse a lying length before allocating for it.
  const left = w.size - (w.base + w.pos + p3 + 1);
  if (count > left + 1) fail("length", lenColumn, `declares ${count} values, more than the file holds`);
  const sink = lineSink(model, name, count, lineNo, later);
  hash(w.buf, w.pos, w.pos + p3 + 1);
  w.pos += p3 + 1;
  let got = 0, column = headChars + 1, scratch = new Float64Array(0);
  for (let ended = false; !ended;) {
    const at = await w.findLine(w.chunk);
    let stop: number;
    if (at >= 0) {
      ended = true, stop = at > w.pos && w.buf[at - 1] === 13 ? at - 1 : at;
    } else if (w.eof) {
      return fail("unterminated", column, "the last line has no \\n");
    } else {
      stop = w.buf.subarray(w.pos, w.len).lastIndexOf(44) + w.pos;
      if (stop < w.pos) fail("token", column, "a value token longer than the read window");
    }
    const n = stop - w.pos;
    if (n === 0 && !(ended && column === headChars + 1)) {
      fail("token", column, "an empty value: a token ends at ',' or at the end of the line");
    }
    if (n > 0) {
      const room = Math.min(count - got, (n >> 1) + 1);
      if (scratch.length < room) scratch = new Float64Array(Math.max(room, 1 << 16));
      const r = scanValues(w.buf, w.pos, stop, scratch.subarray(0, room));
      if (r < 0) {
        if (-r === TOO_MANY) fail("length", lenColumn, `declares ${count} values but holds more`);
        const [kind, why] = FAILS[-r];
        let te = failAt;
        while (te < stop && w.buf[te] !== 44 && w.buf[te] !== 124) te++;
        const col = column + LOOSE.decode(w.buf.subarray(w.pos, failAt)).length;
        fail(kind, col, -r === PIPE ? why : `'${LOOSE.decode(w.buf.subarray(failAt, te))}': ${why}`);
      }
      sink(scratch, r, got, column);
      got += r;
    }
    const next = ended ? stop : stop + 1; // past the comma that ended the window
    hash(w.buf, w.pos, next);
    column += next - w.pos;
    w.pos = ended ? at + 1 : next;
  }
  if (got !== count) fail("length", lenColumn, `declares ${count} values but holds ${got}`);
  hash(NEWLINE, 0, 1);
  sink(undefined, 0, got, column);
}

// Where a line's values go: a tensor's f32 data (the next shape the config implies), or a tokenizer
// record's bytes; a line that breaks the model's rules is read on (for the checksum) into nothing.
// Called with no values at the end of the line.
function lineSink(
  model: ModelLines,
  name: string,
  count: number,
  lineNo: number,
  later: (kind: F64LinesErrorKind, column: number, why: string) => void,
): (values: Float64Array | undefined, n: number, at: number, column: number) => void {
  const k = model.tensors.length;
  const discard = () => {};
  if (!name.startsWith(TOKENIZER_RECORD_PREFIX)) {
    const s = model.shapes[k];
    if (model.firstRecord > 0) {
      return later("tokenizer", 4, `${name}: a tensor after the tokenizer records`), discard;
    }
    if (!s) return later("shape", 0, `holds more arrays than the ${model.shapes.length} expected`), discard;
    if (s.name !== name || numel(s.dims) !== count) {
      return later("shape", 4, `${name} holds ${count} values where ${s.name} [${s.dims}] is expected`),
        discard;
    }
    const data = new Float32Array(count);
    model.tensors.push({ name, dims: [...s.dims], data });
    return (values, n, at, column) => {
      for (let i = 0; i < n; i++) {
        const v = values![i], f = Math.fround(v);
        if (f !== v && v === v) {
          later("f32", column, `${name}[${at + i}] = ${encodeF64Token(v)} is not an f32 value`);
        }
        data[at + i] = f;
      }
    };
  }
  if (k !== model.shapes.length) {
    return later("shape", 0, `holds ${k} arrays where ${model.shapes.length} are expected`), discard;
  }
  model.firstRecord ||= lineNo;
  const file = name.slice(TOKENIZER_RECORD_PREFIX.length);
  if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(file) || Object.hasOwn(model.files, file)) {
    return later(
      "tokenizer",
      4,
      `${name}: not a tokenizer file name (${TOKENIZER_FILE_NAMES.join(", ")}) or a repeat`,
    ),
      discard;
  }
  const bytes = new Uint8Array(count);
  return (values, n, at) => {
    if (!values) {
      try {
        model.files[file] = TEXT.decode(bytes);
      } catch {
        later("tokenizer", 4, `${name}: the bytes are not valid UTF-8`);
      }
      return;
    }
    for (let i = 0; i < n; i++) {
      const v = values[i];
      if (!(v >= 0 && v <= 255 && Number.isInteger(v))) {
        later("tokenizer", 4, `${name}: value ${at + i} is ${v}, not a byte (an integer 0 to 255)`);
      }
      bytes[at + i] = v;
    }
  };
}

function parsedToTensors(
  parsed: F64Lines,
  input: string | Uint8Array,
  where: string,
  shapes?: readonly ParamShape[],
): Tensor[] {
  const { names, arrays, lines } = parsed;
  if (shapes && shapes.length !== names.length) {
    const why = `holds ${names.length} arrays where ${shapes.length} are expected`;
    throw new F64LinesError(where, "shape", 0, 0, why);
  }
  const tensors = names.map((name, k) => {
    const wide = arrays[k];
    let dims = [wide.length];
    if (shapes) {
      const s = shapes[k], size = s.dims.reduce((a, b) => a * b, 1);
      if (s.name !== name || size !== wide.length) {
        const why = `${name} holds ${wide.length} values where ${s.name} [${s.dims}] is expected`;
        throw new F64LinesError(where, "shape", lines[k], 4, why);
      }
      dims = [...s.dims];
    }
    const data = new Float32Array(wide);
    for (let i = 0; i < wide.length; i++) {
      if (data[i] !== wide[i] && wide[i] === wide[i]) {
        const why = `${name}[${i}] = ${encodeF64Token(wide[i])} is not an f32 value`;
        throw new F64LinesError(where, "f32", lines[k], tokenColumn(input, lines[k], i), why);
      }
    }
    return { name, dims, data };
  });
  // The line-by-line match above is f64lines' own rule (its order is canonical); the shared check
  // below is the one every reader ends with.
  const bad = shapes && checkTensors(shapes, tensors);
  if (bad) throw new F64LinesError(where, "shape", 0, 0, bad.message, bad);
  return tensors;
}

// For messages only: the column of value `index` on line `lineNo`.
function tokenColumn(input: string | Uint8Array, lineNo: number, index: number): number {
  const b = typeof input === "string" ? ENC.encode(input) : input;
  let start = 0;
  for (let l = 1; l < lineNo; l++) start = b.indexOf(10, start) + 1;
  let i = b.indexOf(124, b.indexOf(124, b.indexOf(124, start) + 1) + 1) + 1;
  for (let k = 0; k < index; k++) i = b.indexOf(44, i) + 1;
  return columnOf(b, start, i);
}

/**
 * Writes a model's tensors to `path` as f64lines, atomically (complete or absent).
 *
 * @example
 * ```ts
 * await writeF64Lines("out/tiny.f64lines", initParams(PRESETS.tiny, 1));
 * ```
 */
export async function writeF64Lines(path: string, tensors: readonly Tensor[]): Promise<void> {
  await writeAtomic(path, [
    weightsToF64LinesBytes(tensors.map((t) => t.name), tensors.map((t) => t.data), path),
  ]);
}

/** One line a streaming write puts out: a name, its value count, and the values a chunk at a time. */
export interface F64LinesRecord {
  name: string;
  length: number;
  /** The values, in order, in chunks that add up to `length`. */
  chunks(): AsyncIterable<ArrayLike<number>> | Iterable<ArrayLike<number>>;
}

/**
 * Writes records to `path` as f64lines, atomically and a chunk at a time: the bytes of one chunk of
 * values are all that is ever in memory, whatever the size of a line. The same bytes as
 * `weightsToF64LinesBytes` would give for the whole arrays.
 *
 * @example
 * ```ts
 * await writeF64LinesStreaming("out/w.f64lines", [{ name: "w", length: 2, chunks: () => [[0.5], [2]] }]);
 * ```
 */
export async function writeF64LinesStreaming(path: string, records: Iterable<F64LinesRecord>): Promise<void> {
  const w = await openAtomic(path);
  // The hash state lives here between chunks: another f64lines call may run while this one awaits.
  let hi = 0xcbf29ce4 | 0, lo = 0x84222325 | 0;
  const put = async (bytes: Uint8Array) => {
    fnvHi = hi, fnvLo = lo;
    fnvBytes(bytes, 0, bytes.length);
    hi = fnvHi, lo = fnvLo;
    await w.write(bytes);
  };
  try {
    for (const r of records) {
      await put(ENC.encode(`v1|${sanitize(r.name)}|${r.length}|`));
      let written = 0;
      for await (const chunk of r.chunks()) {
        if (chunk.length === 0) continue;
        const buf = new Uint8Array(1 + MAX_TOKEN * chunk.length + MAX_TOKEN), dv = new DataView(buf.buffer);
        let p = 0;
        if (written > 0) buf[p++] = 44;
        p = putValues(dv, p, chunk);
        written += chunk.length;
        await put(buf.subarray(0, p));
      }
      if (written !== r.length) {
        throw new F64LinesError(
          path,
          "mismatch",
          0,
          0,
          `${r.name}: ${written} values where ${r.length} were declared`,
        );
      }
      await put(NEWLINE);
    }
    await w.write(ENC.encode(`#fnv1a32=${hex8((hi ^ lo) >>> 0)}\n`));
  } catch (e) {
    await w.abort();
    throw e;
  }
  await w.commit();
}

/** The name prefix of the records that carry a model's tokenizer files (formats/f64lines.md). */
export const TOKENIZER_RECORD_PREFIX = "ferry.tokenizer/";

/**
 * A tokenizer file as an f64lines record: its UTF-8 bytes, one integer value (0 to 255) each, named
 * `ferry.tokenizer/<file name>`.
 *
 * @example
 * ```ts
 * tokenizerRecord("tokenizer.json", "{}").name; // "ferry.tokenizer/tokenizer.json"
 * ```
 */
export function tokenizerRecord(file: string, text: string): F64LinesRecord {
  const bytes = ENC.encode(text);
  const step = 1 << 20;
  return {
    name: TOKENIZER_RECORD_PREFIX + file,
    length: bytes.length,
    *chunks() {
      for (let at = 0; at < bytes.length; at += step) yield bytes.subarray(at, at + step);
    },
  };
}

/**
 * Reads an f64lines file as f32 tensors (see `f64LinesToTensors`); errors name the file.
 *
 * @example
 * ```ts
 * const tensors = await readF64Lines("out/tiny.f64lines", paramShapes(PRESETS.tiny));
 * ```
 */
export async function readF64Lines(path: string, shapes?: readonly ParamShape[]): Promise<Tensor[]> {
  return f64LinesToTensors(new Uint8Array(await readFile(path)), path, shapes);
}

/**
 * Writes named float64 arrays to `path` as f64lines, atomically; a count mismatch writes nothing.
 *
 * @example
 * ```ts
 * await writeF64LinesArrays("out/w.f64lines", ["w"], [new Float64Array([0.1])]);
 * ```
 */
export async function writeF64LinesArrays(
  path: string,
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
): Promise<void> {
  await writeAtomic(path, [weightsToF64LinesBytes(names, arrays, path)]);
}

/**
 * Reads an f64lines file as float64 arrays, strictly; errors name the file.
 *
 * @example
 * ```ts
 * const { names, arrays, checksum } = await readF64LinesArrays("out/w.f64lines");
 * ```
 */
export async function readF64LinesArrays(path: string): Promise<F64Lines> {
  return parseF64Lines(new Uint8Array(await readFile(path)), path);
}

/** `a.f64lines` → `a.config.toml`: f64lines holds named arrays only, so an export's shape lives there. */
export function f64linesConfigPath(path: string): string {
  return path.replace(/\.f64lines$/, "") + ".config.toml";
}

/**
 * The text of `NAME.config.toml` beside an f64lines export: the model config, then, when anything of
 * the weights' origin is known, an `[origin]` table (`name`, `step`, `source`; formats/f64lines.md).
 *
 * @example
 * ```ts
 * f64linesConfigToml(config, { name: "ferry", step: 12 }); // "vocab_size = 258\n…\n[origin]\nname = \"ferry\"\nstep = 12\n"
 * ```
 */
export function f64linesConfigToml(config: ModelConfig, origin: ExportOrigin = {}): string {
  const table = Object.fromEntries(Object.entries(origin).filter(([, v]) => v !== undefined));
  return configToToml(config) + (Object.keys(table).length ? "\n" + stringifyToml({ origin: table }) : "");
}

const ORIGIN_TYPES = { name: "string", step: "number", source: "string" } as const;

/**
 * Reads the config beside an f64lines export (`f64linesConfigPath`): the model config, checked as any
 * config is, and its `[origin]` table when it has one (each key optional: `name` and `source` strings,
 * `step` a non-negative integer; no other key). Refusals are `ConfigError`s naming the file and field.
 *
 * @example
 * ```ts
 * const { config, origin } = await readF64linesConfig("out/ferry.f64.config.toml");
 * ```
 */
export async function readF64linesConfig(
  path: string,
): Promise<{ config: ModelConfig; origin: ExportOrigin }> {
  const text = await readFile(path, "utf8");
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(text) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(path, "(toml)", `not valid TOML: ${(e as Error).message.split("\n")[0]}`);
  }
  const { origin, ...fields } = raw;
  return { config: validateConfig(fields, path), origin: originTable(origin, path) };
}

function originTable(table: unknown, path: string): ExportOrigin {
  if (table === undefined) return {};
  if (typeof table !== "object" || table === null || Array.isArray(table)) {
    throw new ConfigError(path, "origin", "expected a table of name, step and source", {
      expected: "a table",
      found: typeof table,
    });
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(table)) {
    const want = ORIGIN_TYPES[k as keyof typeof ORIGIN_TYPES];
    if (!want) {
      throw new ConfigError(path, `origin.${k}`, "unknown key (expected name, step, source)", {
        expected: "name, step or source",
        found: k,
      });
    }
    if (typeof v !== want || (k === "step" && (!Number.isSafeInteger(v) || (v as number) < 0))) {
      const expected = k === "step" ? "a non-negative integer" : "a string";
      throw new ConfigError(path, `origin.${k}`, `expected ${expected}, got ${JSON.stringify(v)}`, {
        expected,
        found: String(JSON.stringify(v)),
      });
    }
    out[k] = v;
  }
  return out as ExportOrigin;
}

/**
 * f64lines in the registry (formats/mod.ts): the tensors as text, with `NAME.config.toml` beside the
 * file for the shape. Reading needs both.
 *
 * @example
 * ```ts
 * const { config, tensors } = await f64linesFormat.read("out/ferry.f64.f64lines");
 * ```
 */
export const f64linesFormat: FormatDescriptor<"f64"> = {
  name: "f64lines",
  summary: "plain text, one tensor per line, every value as its exact float64 spelling; config beside it",
  extension: ".f64lines",
  recognises: (path) => path.endsWith(".f64lines"),
  dtypes: ["f64"],
  defaultDtype: "f64",
  weights: "float",
  lossy: () => Promise.resolve(undefined), // every dtype widens back exactly
  async write(path, input) {
    // Tensor by tensor, a chunk at a time, then the tokenizer's records: memory stays a chunk.
    const records: F64LinesRecord[] = input.tensors.map((src) => ({
      name: src.name,
      length: numel(src.dims),
      async *chunks() {
        const count = numel(src.dims), step = 1 << 18, scratch = new Float32Array(Math.min(step, count));
        for (let at = 0; at < count; at += step) {
          yield await src.read(at, Math.min(step, count - at), scratch);
        }
      },
    }));
    for (const [file, text] of Object.entries(input.tokenizer ?? {})) {
      records.push(tokenizerRecord(file, text));
    }
    await writeF64LinesStreaming(path, records);
    const config = f64linesConfigPath(path);
    const origin = { name: input.name, step: input.step, source: input.source };
    await writeAtomic(config, [new TextEncoder().encode(f64linesConfigToml(input.config, origin))]);
    const params = input.tensors.reduce((n, t) => n + numel(t.dims), 0);
    return { file: path, bytes: (await stat(path)).size, params, tensors: input.tensors.length, config };
  },
  async read(path) {
    const { config, origin } = await readF64linesConfig(f64linesConfigPath(path)).catch((e) => {
      throw missing(e, f64linesConfigPath(path));
    });
    // Streamed: memory holds the tensors being built and a 4 MiB window, not the file's text.
    const { tensors, tokenizer } = await readF64LinesModel(path, paramShapes(config), config.vocab_size)
      .catch((e) => {
        throw missing(e, path);
      });
    return { config, tensors, origin, ...(tokenizer ? { tokenizer } : {}) };
  },
  // The records are at the file's end, under its one checksum: the whole file is read and checked.
  readTokenizer: async (path) => (await f64linesFormat.read(path)).tokenizer,
  async inspect(path) {
    const bytes = await readFile(path).catch((e) => {
      throw missing(e, path);
    });
    const { names, arrays, checksum } = parseF64Lines(new Uint8Array(bytes), path);
    return {
      file: path,
      bytes: bytes.length,
      checksum: `fnv1a32=${
        (checksum >>> 0).toString(16).padStart(8, "0")
      }: ok, every data line is as written`,
      config: f64linesConfigPath(path),
      arrays: names.map((name, i) => ({ name, length: arrays[i].length })),
      tokenizer: await f64linesTokenizerInfo(path, bytes),
    };
  },
  spec: "formats/f64lines.md",
  minimalReader: "readers/f64lines.ts",
  fuzzHook: "formats/f64lines-fuzz.ts",
};

// `info`'s tokenizer summary: the records' files checked against the config beside the file.
async function f64linesTokenizerInfo(path: string, bytes: Uint8Array): Promise<Record<string, unknown>> {
  const { config } = await readF64linesConfig(f64linesConfigPath(path)).catch((e) => {
    throw missing(e, f64linesConfigPath(path));
  });
  const { tokenizer } = f64LinesModel(bytes, path, paramShapes(config), config.vocab_size);
  const size = Object.values(tokenizer ?? {}).reduce((n, t) => n + new TextEncoder().encode(t).length, 0);
  return { record_bytes: size, ...tokenizerInfo(tokenizer, config.vocab_size, path) };
}

// A file that cannot be read is a refusal like any other, in this format's error.
function missing(e: unknown, path: string): unknown {
  if (e instanceof FormatError) return e;
  const code = (e as { code?: string }).code;
  return new F64LinesError(
    path,
    "file",
    0,
    0,
    code === "ENOENT" ? "no such file" : `cannot be read: ${(e as Error).message}`,
  );
}

/**
 * Reading f64lines value tokens (formats/f64lines/f64lines.md, "Tokens"): a run of comma-separated tokens
 * scanned into a Float64Array one byte at a time, refusing every token a writer would not produce.
 *
 * @example
 * ```ts
 * import { decodeF64Token, scanValues } from "./f64lines-scan.ts";
 * const out = new Float64Array(2);
 * scanValues(new TextEncoder().encode("1p-1,3\n"), 0, 6, out); // 2, out = [0.5, 3]
 * decodeF64Token("1p-1074"); // 5e-324
 * ```
 * @module
 */
import { POW2, TWO32, TWO53 } from "./f64lines-encode.ts";
import { F64LinesError, type F64LinesErrorCode } from "./f64lines-error.ts";

/** Why a scan stopped, by index (`ScanFailure.code`): the refusal's code and its reason. */
export const FAILS: ReadonlyArray<readonly [F64LinesErrorCode, string]> = [
  ["InvalidToken", ""],
  ["InvalidToken", "not a value token (0, -0, inf, -inf, nan, digits or <m>p<e>)"],
  ["InvalidToken", "the exponent after 'p' has no digits"],
  ["NonCanonical", "a leading zero"],
  ["NonCanonical", "the exponent has a leading zero or is -0"],
  ["NonCanonical", "an integer below 2^62 is written in digits"],
  ["OutOfRange", "the significand is 2^53 or more"],
  ["OutOfRange", "the significand is even (canonical m is odd; zero is 0 or -0)"],
  ["OutOfRange", "below 2^-1074, the smallest float64 step"],
  ["OutOfRange", "2^1024 or more, beyond the largest float64"],
  ["OutOfRange", "digits are for integers below 2^62"],
  ["OutOfRange", "not a float64 (the integer falls between two of them)"],
  ["InvalidToken", "a token ends at ',' or at the end of the line"],
  ["LengthMismatch", "more values than the declared length"],
  ["WrongFieldCount", "a fifth field: values cannot hold '|'"],
];
/** The codes a caller words itself: not a token at all (an empty one), one value too many, a `|`. */
export const NOT_A_TOKEN = 1, TOO_MANY = 13, PIPE = 14;

/** Where a scan stopped: `code` indexes FAILS, `at` is the offending token's first byte (a `|`'s own). */
export interface ScanFailure {
  code: number;
  at: number;
}

const bad = (at: number, code: number): ScanFailure => ({ code, at });

// 16 to 19 digits: the exact integer decides, and this is the rare path, so BigInt is fine.
function bigDigits(b: Uint8Array, ds: number, de: number): number {
  if (de - ds > 19) return -10;
  const big = BigInt(String.fromCharCode(...b.subarray(ds, de)));
  if (big >= 4611686018427387904n) return -10;
  const v = Number(big);
  return BigInt(v) === big ? v : -11;
}

/**
 * Parses the comma-separated tokens of b[i, end) into out, where b[end] ends the run (a line's end, or
 * the comma after its last token). Returns how many there were, or where and why it stopped: more
 * tokens than out holds is TOO_MANY. One pass, one byte at a time, no allocation but on failure.
 */
export function scanValues(b: Uint8Array, i: number, end: number, out: Float64Array): number | ScanFailure {
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

const LOOSE = new TextDecoder("utf-8", { ignoreBOM: true });

/**
 * A failed scan of b[.., end) as a refusal's code and reason, quoting the offending token (up to the
 * next `,` or `|`). TOO_MANY is worded by the caller, who knows the declared length.
 */
export function scanRefusal(b: Uint8Array, f: ScanFailure, end: number): [F64LinesErrorCode, string] {
  const [code, why] = FAILS[f.code];
  if (f.code === PIPE) return [code, why];
  let te = f.at;
  while (te < end && b[te] !== 44 && b[te] !== 124) te++;
  return [code, `'${LOOSE.decode(b.subarray(f.at, te))}': ${why}`];
}

const ENC = new TextEncoder();

/**
 * The float64 of one token, refusing every token a writer would not produce.
 *
 * @example
 * ```ts
 * import { decodeF64Token } from "./f64lines-scan.ts";
 * decodeF64Token("1p-1074"); // 5e-324
 * decodeF64Token("2p-2"); // throws F64LinesError (domain: even significand)
 * ```
 */
export function decodeF64Token(token: string): number {
  const out = new Float64Array(1);
  const r = token.includes(",") ? bad(0, 12) : scanValues(ENC.encode(token + "\n"), 0, token.length, out);
  if (r === 1) return out[0];
  const [code, why] = FAILS[typeof r === "number" ? NOT_A_TOKEN : r.code];
  throw new F64LinesError("<token>", code, 1, 1, `'${token}': ${why}`);
}

/**
 * Writing f64lines value tokens (formats/f64lines/f64lines.md, "Tokens"): each float64, or float32 widened, as
 * its one canonical spelling, put straight into a byte buffer. Values are moved by integer digit
 * arithmetic and exact power-of-two scaling only, so no decimal rounding ever touches one.
 *
 * @example
 * ```ts
 * import { encodeF64Token, putValues } from "./f64lines-encode.ts";
 * const buf = new Uint8Array(64);
 * encodeF64Token(0.1); // "3602879701896397p-55"
 * const p = putValues(new DataView(buf.buffer), 0, new Float32Array([0.5, 2])); // "1p-1,2" at buf[0, p)
 * ```
 * @module
 */

export const TWO32 = 4294967296;
export const TWO53 = 9007199254740992;
// POW2[e + 1074] = 2^e for e in [-1074, 1023], built by doubling so every entry is exact.
export const POW2 = new Float64Array(2098);
POW2[0] = 5e-324;
for (let i = 1; i < POW2.length; i++) POW2[i] = POW2[i - 1] * 2;
/** The longest token, `-9007199254740991p-1074`, with its comma. */
export const MAX_TOKEN = 24;
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

/**
 * The decimal digits of the integer u, 0 <= u < 2^53, at p; returns the end. Scaling by 1e-4 then
 * truncating is the exact quotient below 2^31: 1e-4 rounds up, by far less than 1/10^4.
 */
export function putUint(dv: DataView, p: number, u: number): number {
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

/**
 * The tokens of one array, comma-separated, at p; returns the end. Typed arrays are read as their bits.
 * The buffer needs MAX_TOKEN bytes a value, and MAX_TOKEN of slack.
 */
export function putValues(dv: DataView, p: number, a: ArrayLike<number>): number {
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

/**
 * The canonical token of one float64: `0`, `-0`, `inf`, `-inf`, `nan`, digits for integers below
 * 2^62 in magnitude, otherwise `<m>p<e>` with m odd and below 2^53. Every NaN is `nan`.
 *
 * @example
 * ```ts
 * import { encodeF64Token } from "./f64lines-encode.ts";
 * encodeF64Token(0.1); // "3602879701896397p-55"
 * encodeF64Token(2 ** 61); // "2305843009213693952"
 * ```
 */
export function encodeF64Token(x: number): string {
  BITS[0] = x;
  return LATIN1.decode(TOKEN.subarray(0, putF64(TOKEN_VIEW, 0, WORDS[0], WORDS[1])));
}

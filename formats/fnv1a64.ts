/**
 * FNV-1a 64 (Noll) as a small hasher object: create one, update it with bytes or with a line, read its
 * digest. Whoever hashes owns the state, so reads and writes that await between updates never share it.
 * f64lines' `#fnv1a32=` checksum is the digest xor-folded to 32 bits (formats/f64lines/f64lines.md, "Checksum").
 *
 * The 64-bit state is two 32-bit halves. The low half's product is Math.imul; its carry into the high
 * half is the top of an exact double product, so every step is exact arithmetic.
 *
 * @example
 * ```ts
 * import { fnv1a64 } from "./fnv1a64.ts";
 * const h = fnv1a64();
 * h.line(new TextEncoder().encode("v1|w|1|1p-1"), 0, 11); // the bytes, then "\n"
 * h.digest32(); // the folded checksum of "v1|w|1|1p-1\n"
 * ```
 * @module
 */

const ENC = new TextEncoder();
const NEWLINE = new Uint8Array([10]);

/** A 32-bit value as 8 lowercase hex digits, the form of f64lines' `#fnv1a32=` checksum. */
export const hex8 = (x: number): string => (x >>> 0).toString(16).padStart(8, "0");

/** A running FNV-1a 64 hash. */
export class Fnv1a64 {
  private hi = 0xcbf29ce4 | 0;
  private lo = 0x84222325 | 0;

  /**
   * Hashes bytes[start, end). h = (h ^ byte) * (2^40 + 0x1b3) mod 2^64, where 2^40 moves the low half
   * 8 bits into the high one. No default parameters: JavaScriptCore runs this loop several times slower
   * once called without them. The loop runs over a view to its length, so V8 drops its bounds checks
   * (a third faster, called a window at a time).
   */
  update(bytes: Uint8Array, start: number, end: number): this {
    const v = bytes.subarray(start, end);
    let hi = this.hi, lo = this.lo;
    for (let i = 0; i < v.length; i++) {
      lo ^= v[i];
      const carry = ((lo >>> 0) * 435 * 2.3283064365386963e-10) | 0; // (lo * 0x1b3) >> 32, below 2^9
      hi = (Math.imul(hi, 435) + carry + (lo << 8)) | 0;
      lo = Math.imul(lo, 435);
    }
    this.hi = hi, this.lo = lo;
    return this;
  }

  /** Hashes one line: bytes[start, end), then `\n` (the canonical line of f64lines' checksum). */
  line(bytes: Uint8Array, start: number, end: number): this {
    return this.update(bytes, start, end).update(NEWLINE, 0, 1);
  }

  /** The digest xor-folded to 32 bits (high ^ low): an integer in [0, 2^32). */
  digest32(): number {
    return (this.hi ^ this.lo) >>> 0;
  }

  /** The digest as 16 lowercase hex digits (the form Noll publishes test vectors in). */
  hex(): string {
    return hex8(this.hi) + hex8(this.lo);
  }
}

/** A fresh FNV-1a 64 hasher, at the offset basis. */
export const fnv1a64 = (): Fnv1a64 => new Fnv1a64();

/**
 * FNV-1a 64 of the bytes, as 16 lowercase hex digits.
 *
 * @example
 * ```ts
 * import { fnv1a64Hex } from "./fnv1a64.ts";
 * fnv1a64Hex(new TextEncoder().encode("a")); // "af63dc4c8601ec8c"
 * ```
 */
export function fnv1a64Hex(bytes: Uint8Array): string {
  return fnv1a64().update(bytes, 0, bytes.length).hex();
}

/**
 * FNV-1a 64 of the string's UTF-8 bytes, xor-folded to 32 bits: an integer in [0, 2^32).
 *
 * @example
 * ```ts
 * import { stringChecksum } from "./fnv1a64.ts";
 * stringChecksum(""); // 0x4fd0bfc1 = 0xcbf29ce4 ^ 0x84222325
 * ```
 */
export function stringChecksum(s: string): number {
  const bytes = ENC.encode(s);
  return fnv1a64().update(bytes, 0, bytes.length).digest32();
}

/**
 * ferry's whole-file digest for the formats whose own design has no checksum (GGUF, safetensors): a
 * SHA-256 of every byte of the file, stored inside the file's own metadata under `ferry.sha256` as 64
 * lowercase hex digits. While it is computed, those 64 digits are read as `0`s, so the file can hold
 * its own digest. Readers elsewhere see one more metadata string and ignore it; ferry's readers verify
 * it when it is present, and read a file without it (anyone else's) as before.
 *
 * @example
 * ```ts
 * import { digestOffset, fileDigest } from "./digest.ts";
 * declare const header: Uint8Array, data: Uint8Array, needle: Uint8Array; // needle: the key, as encoded
 * const found = digestOffset(header, needle);    // where the 64 digits are
 * if (found && "at" in found) {
 *   const hex = fileDigest([header, data], found.at); // the digest, with those digits as zeros
 * }
 * ```
 * @module
 */
import { createHash } from "node:crypto";

/** The metadata key (GGUF) or `__metadata__` key (safetensors) of the digest. */
export const DIGEST_KEY = "ferry.sha256";
/** The value a writer puts in first, and the bytes the digest reads in place of the stored value. */
export const DIGEST_PLACEHOLDER = "0".repeat(64);
const ZEROS = new TextEncoder().encode(DIGEST_PLACEHOLDER);
const HEX64 = /^[0-9a-f]{64}$/;

/**
 * Where the 64 digits sit: the single place in `bytes[0, end)` where `needle` (the key as the format
 * encodes it, up to the value's first byte) is followed by 64 lowercase hex digits. Undefined when
 * there is no such place; `count` tells how many there are when there are several.
 */
export function digestOffset(
  bytes: Uint8Array,
  needle: Uint8Array,
  end = bytes.length,
): { at: number; value: string } | { count: number } | undefined {
  const hits: number[] = [];
  const first = needle[0];
  for (
    let i = bytes.indexOf(first);
    i >= 0 && i + needle.length + 64 <= end;
    i = bytes.indexOf(first, i + 1)
  ) {
    let k = 1;
    while (k < needle.length && bytes[i + k] === needle[k]) k++;
    if (k < needle.length) continue;
    const value = new TextDecoder().decode(bytes.subarray(i + needle.length, i + needle.length + 64));
    if (HEX64.test(value)) hits.push(i + needle.length);
  }
  if (hits.length === 0) return undefined;
  if (hits.length > 1) return { count: hits.length };
  return { at: hits[0], value: new TextDecoder().decode(bytes.subarray(hits[0], hits[0] + 64)) };
}

/**
 * The digest of a file given as consecutive chunks, reading the 64 bytes at file offset `at` as the
 * placeholder's zeros.
 */
export function fileDigest(chunks: Iterable<Uint8Array>, at: number): string {
  const h = createHash("sha256");
  let pos = 0;
  for (const c of chunks) {
    const from = Math.max(at, pos), to = Math.min(at + 64, pos + c.length);
    if (from < to) {
      h.update(c.subarray(0, from - pos));
      h.update(ZEROS.subarray(from - at, to - at));
      h.update(c.subarray(to - pos));
    } else h.update(c);
    pos += c.length;
  }
  return h.digest("hex");
}

/** A running digest over chunks written in order (`fileDigest`, for writers that stream). */
export function digestStream(at: number): { update(c: Uint8Array): void; hex(): string } {
  const h = createHash("sha256");
  let pos = 0;
  return {
    update(c) {
      const from = Math.max(at, pos), to = Math.min(at + 64, pos + c.length);
      if (from < to) {
        h.update(c.subarray(0, from - pos));
        h.update(ZEROS.subarray(from - at, to - at));
        h.update(c.subarray(to - pos));
      } else h.update(c);
      pos += c.length;
    },
    hex: () => h.digest("hex"),
  };
}

/** Whether a metadata value is a well-formed digest. */
export function isDigest(v: unknown): v is string {
  return typeof v === "string" && HEX64.test(v);
}

/**
 * The file with its digest recomputed and stored (for a writer that has the whole file in memory, and
 * for tests that forge a changed file); unchanged when the digest's place is not found exactly once.
 */
export function sealDigest(bytes: Uint8Array, needle: Uint8Array, end = bytes.length): Uint8Array {
  const found = digestOffset(bytes, needle, end);
  if (!found || !("at" in found)) return bytes;
  const out = bytes.slice();
  out.set(new TextEncoder().encode(fileDigest([bytes], found.at)), found.at);
  return out;
}

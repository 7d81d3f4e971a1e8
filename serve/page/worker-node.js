// What the tab's worker gets for the `node:` built-ins the engine's modules import (serve/browser-modules.ts
// rewrites each `node:` specifier to this file). Only the load and session paths use any of it: the
// SHA-256 that names a model (formats/lut4/lut4.ts, formats/session/session.ts) and the CRC-32 that guards a file's
// data. Nothing per token comes here. File system calls have no meaning in a tab: they throw, naming
// the call, so a path the tab should never take says so instead of doing something else.

// ---- SHA-256 (FIPS 180-4), synchronous, as node:crypto's createHash("sha256") is. ----

const K = new Uint32Array([
  0x428a2f98,
  0x71374491,
  0xb5c0fbcf,
  0xe9b5dba5,
  0x3956c25b,
  0x59f111f1,
  0x923f82a4,
  0xab1c5ed5,
  0xd807aa98,
  0x12835b01,
  0x243185be,
  0x550c7dc3,
  0x72be5d74,
  0x80deb1fe,
  0x9bdc06a7,
  0xc19bf174,
  0xe49b69c1,
  0xefbe4786,
  0x0fc19dc6,
  0x240ca1cc,
  0x2de92c6f,
  0x4a7484aa,
  0x5cb0a9dc,
  0x76f988da,
  0x983e5152,
  0xa831c66d,
  0xb00327c8,
  0xbf597fc7,
  0xc6e00bf3,
  0xd5a79147,
  0x06ca6351,
  0x14292967,
  0x27b70a85,
  0x2e1b2138,
  0x4d2c6dfc,
  0x53380d13,
  0x650a7354,
  0x766a0abb,
  0x81c2c92e,
  0x92722c85,
  0xa2bfe8a1,
  0xa81a664b,
  0xc24b8b70,
  0xc76c51a3,
  0xd192e819,
  0xd6990624,
  0xf40e3585,
  0x106aa070,
  0x19a4c116,
  0x1e376c08,
  0x2748774c,
  0x34b0bcb5,
  0x391c0cb3,
  0x4ed8aa4a,
  0x5b9cca4f,
  0x682e6ff3,
  0x748f82ee,
  0x78a5636f,
  0x84c87814,
  0x8cc70208,
  0x90befffa,
  0xa4506ceb,
  0xbef9a3f7,
  0xc67178f2,
]);

/** Mixes one 64-byte block of `bytes` at `at` into the eight words of `h`; `w` is scratch. */
function compress(h, w, bytes, at) {
  for (let i = 0; i < 16; i++) {
    const j = at + 4 * i;
    w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
  }
  for (let i = 16; i < 64; i++) {
    const a = w[i - 15], b = w[i - 2];
    const s0 = ((a >>> 7) | (a << 25)) ^ ((a >>> 18) | (a << 14)) ^ (a >>> 3);
    const s1 = ((b >>> 17) | (b << 15)) ^ ((b >>> 19) | (b << 13)) ^ (b >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    k = g, g = f, f = e, e = (d + t1) | 0, d = c, c = b, b = a, a = (t1 + t2) | 0;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

/** 32 digest bytes as `digest(encoding)` gives them. */
function encoded(out, encoding) {
  return encoding === "hex" ? [...out].map((b) => b.toString(16).padStart(2, "0")).join("") : out;
}

/**
 * A streaming SHA-256: `update` as often as needed, then `digest("hex")` once. The tab's worker hashes a
 * file with Web Crypto where it can (serve/page/worker.js `webCryptoDigest`, twice as fast and on another
 * thread); this is what hashes everything else, and a file where Web Crypto is missing.
 */
function sha256() {
  const h = new Uint32Array([
    0x6a09e667,
    0xbb67ae85,
    0x3c6ef372,
    0xa54ff53a,
    0x510e527f,
    0x9b05688c,
    0x1f83d9ab,
    0x5be0cd19,
  ]);
  const w = new Int32Array(64), tail = new Uint8Array(64);
  let held = 0, total = 0;
  const feed = (bytes) => {
    total += bytes.length;
    let at = 0;
    if (held > 0) {
      const take = Math.min(64 - held, bytes.length);
      tail.set(bytes.subarray(0, take), held);
      held += take, at = take;
      if (held < 64) return;
      compress(h, w, tail, 0);
      held = 0;
    }
    for (; at + 64 <= bytes.length; at += 64) compress(h, w, bytes, at);
    tail.set(bytes.subarray(at), 0);
    held = bytes.length - at;
  };
  const hash = {
    update(data) {
      const bytes = typeof data === "string"
        ? new TextEncoder().encode(data)
        : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      feed(bytes);
      return hash;
    },
    digest(encoding) {
      // The padding: a 1 bit, zeros, and the message length in bits as 64 big-endian bits.
      const pad = new Uint8Array(held < 56 ? 64 - held : 128 - held);
      pad[0] = 0x80;
      const bits = total * 8;
      const view = new DataView(pad.buffer);
      view.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
      view.setUint32(pad.length - 4, bits >>> 0);
      feed(pad);
      const out = new Uint8Array(32);
      for (let i = 0; i < 8; i++) new DataView(out.buffer).setUint32(4 * i, h[i]);
      return encoded(out, encoding);
    },
  };
  return hash;
}

/** node:crypto's `createHash`, for the one hash ferry's readers ask for. */
export function createHash(algorithm) {
  if (algorithm !== "sha256") throw new Error(`createHash: only sha256 runs in the tab, not ${algorithm}`);
  return sha256();
}

// ---- CRC-32 (the zlib polynomial), as node:zlib's `crc32(data, start)`. ----

// The browser has no CRC-32, so it is here. Slicing by 8: table k holds the CRC of a byte followed by k
// zero bytes, so eight bytes take one step (a 328 MB file: 0.77 s byte at a time in V8, about a fifth now).
const CRC = (() => {
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let at = 256; at < t.length; at++) t[at] = (t[at - 256] >>> 8) ^ t[t[at - 256] & 0xff];
  return t;
})();

/** node:zlib's `crc32`: the CRC-32 of `data`, continuing from `start`. */
export function crc32(data, start = 0) {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  const t = CRC, n = bytes.length;
  let c = ~start >>> 0, i = 0;
  for (; i + 8 <= n; i += 8) {
    const lo = c ^ (bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24));
    const hi = bytes[i + 4] | (bytes[i + 5] << 8) | (bytes[i + 6] << 16) | (bytes[i + 7] << 24);
    c = t[1792 + (lo & 0xff)] ^ t[1536 + ((lo >>> 8) & 0xff)] ^ t[1280 + ((lo >>> 16) & 0xff)] ^
      t[1024 + (lo >>> 24)] ^ t[768 + (hi & 0xff)] ^ t[512 + ((hi >>> 8) & 0xff)] ^
      t[256 + ((hi >>> 16) & 0xff)] ^ t[hi >>> 24];
  }
  for (; i < n; i++) c = t[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

// ---- Paths: plain string work, as node:path's POSIX functions. ----

/** node:path's `join`. */
export function join(...parts) {
  return parts.filter((p) => p !== "").join("/").replace(/\/+/g, "/");
}

/** node:path's `dirname`. */
export function dirname(path) {
  const at = path.lastIndexOf("/");
  return at < 0 ? "." : at === 0 ? "/" : path.slice(0, at);
}

/** node:path's `basename`. */
export function basename(path) {
  return path.slice(path.lastIndexOf("/") + 1);
}

// ---- The file system and the process: nothing to reach from a tab. ----

function absent(name) {
  return () => {
    throw new Error(`${name}: there is no file system in the browser tab`);
  };
}

export const readFile = absent("readFile"), writeFile = absent("writeFile"), open = absent("open");
export const readdir = absent("readdir"), rename = absent("rename"), rm = absent("rm");
export const mkdtemp = absent("mkdtemp"), mkdir = absent("mkdir"), stat = absent("stat");
export const rmSync = absent("rmSync"), statSync = absent("statSync"), tmpdir = absent("tmpdir");
export const createReadStream = absent("createReadStream"), homedir = absent("homedir");
/** node:path's `resolve` needs a working directory, which a tab has not. */
export const resolve = absent("resolve");

/** node:os's memory figure: a tab has none (serve/slots/slots.ts sizes a cache the tab never makes with it). */
export const totalmem = () => 0;

/** node:process's default export, as far as a tab has one. */
export default { env: {}, platform: "browser", pid: 0, on() {}, off() {} };

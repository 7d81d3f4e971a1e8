/**
 * ferry's session file (spec: formats/session.md): everything needed to continue a conversation on the
 * integer engine — the model's SHA-256, position, tokens, the sampler's RNG state, the pending logits
 * and the 12-bit KV cache — in little-endian binary with a trailing CRC-32. Decoding checks every field
 * against the model and against each other before anything is handed out.
 *
 * @example
 * ```ts
 * const bytes = encodeSession(data);
 * await writeSessionFile("chat.session", bytes);        // atomic
 * const back = decodeSession(bytes, expect, "chat.session");
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { writeAtomic } from "./io.ts";
import { FormatError } from "../model/error.ts";

/** The 8 magic bytes. */
export const SESSION_MAGIC = "FERRYSES";
/** The only version. */
export const SESSION_VERSION = 1;
/** Bytes before the tokens. */
export const SESSION_PREFIX = 80;
/** Largest magnitude of a cached key or value (12-bit cache). */
export const CACHE_MAX = 2047;

/** The shape a session must match: the model's identity and sizes. */
export interface SessionShape {
  sha256: string;
  vocab: number;
  layers: number;
  kvHeads: number;
  headDim: number;
  maxPositions: number;
}

/** A session's contents. Cache arrays hold exactly `position` rows. */
export interface SessionData {
  shape: SessionShape;
  position: number;
  tokens: number[];
  /** xorshift64 state: high and low 32-bit halves (as int32). */
  rngHi: number;
  rngLo: number;
  /** Pending logits (vocab int32 at 2^-16 nats) when position > 0; empty otherwise. */
  logits: Int32Array;
  keys: Int16Array[];
  keyExp: Int16Array[];
  values: Int16Array[];
  valueExp: Int16Array[];
}

/** A refused session file: names the file and the field. */
export class SessionError extends FormatError {
  constructor(path: string, field: string, message: string) {
    super(path, field, `${path}: ${field}: ${message}`);
    this.name = "SessionError";
  }
}

function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function bytesToHex(b: Uint8Array): string {
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** The byte length of a session with this shape at this position. */
export function sessionBytes(shape: SessionShape, position: number): number {
  const kvDim = shape.kvHeads * shape.headDim;
  const perLayer = 2 * (position * kvDim * 2) + 2 * (position * shape.kvHeads * 2);
  return SESSION_PREFIX + position * 4 + (position > 0 ? shape.vocab * 4 : 0) + shape.layers * perLayer + 4;
}

/** Encodes a session; the same data gives the same bytes on every runtime. */
export function encodeSession(d: SessionData): Uint8Array {
  const s = d.shape;
  const out = new Uint8Array(sessionBytes(s, d.position));
  const dv = new DataView(out.buffer);
  out.set(new TextEncoder().encode(SESSION_MAGIC), 0);
  dv.setUint32(8, SESSION_VERSION, true);
  out.set(hexToBytes(s.sha256), 12);
  dv.setUint32(44, s.vocab, true);
  dv.setUint32(48, s.layers, true);
  dv.setUint32(52, s.kvHeads, true);
  dv.setUint32(56, s.headDim, true);
  dv.setUint32(60, s.maxPositions, true);
  dv.setUint32(64, d.position, true);
  dv.setInt32(68, d.rngHi, true);
  dv.setInt32(72, d.rngLo, true);
  dv.setUint32(76, d.position > 0 ? 1 : 0, true);
  let at = SESSION_PREFIX;
  for (const t of d.tokens) dv.setUint32(at, t, true), at += 4;
  if (d.position > 0) { for (const v of d.logits) dv.setInt32(at, v, true), at += 4; }
  const kvDim = s.kvHeads * s.headDim;
  for (let l = 0; l < s.layers; l++) {
    for (
      const [arr, n] of [[d.keys[l], d.position * kvDim], [d.keyExp[l], d.position * s.kvHeads], [
        d.values[l],
        d.position * kvDim,
      ], [d.valueExp[l], d.position * s.kvHeads]] as const
    ) {
      for (let i = 0; i < n; i++) dv.setInt16(at, arr[i], true), at += 2;
    }
  }
  dv.setUint32(at, crc32(out.subarray(0, at)) >>> 0, true);
  return out;
}

/**
 * Decodes and checks a session against the model it must continue: framing, CRC, the model's
 * SHA-256, every size, token ids, the flag that says logits are present, the RNG state, and the
 * cache's 12-bit bound. Throws `SessionError` on the first problem; returns fresh arrays.
 */
export function decodeSession(bytes: Uint8Array, want: SessionShape, path = "session"): SessionData {
  const b = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < SESSION_PREFIX + 4) {
    throw new SessionError(path, "length", `${b.length} bytes is too short for a session`);
  }
  if (new TextDecoder().decode(b.subarray(0, 8)) !== SESSION_MAGIC) {
    throw new SessionError(path, "magic", `expected ${SESSION_MAGIC}`);
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const version = dv.getUint32(8, true);
  if (version !== SESSION_VERSION) {
    throw new SessionError(path, "version", `expected ${SESSION_VERSION}, got ${version}`);
  }
  const crc = dv.getUint32(b.length - 4, true);
  if ((crc32(b.subarray(0, b.length - 4)) >>> 0) !== crc) {
    throw new SessionError(path, "crc32", "checksum mismatch: the file is truncated or altered");
  }
  const sha = bytesToHex(b.subarray(12, 44));
  if (sha !== want.sha256) {
    throw new SessionError(
      path,
      "model_sha256",
      `the session is for model ${sha.slice(0, 16)}…, this model is ${want.sha256.slice(0, 16)}…`,
    );
  }
  const fields: [string, number, number][] = [
    ["vocab", dv.getUint32(44, true), want.vocab],
    ["layers", dv.getUint32(48, true), want.layers],
    ["kv_heads", dv.getUint32(52, true), want.kvHeads],
    ["head_dim", dv.getUint32(56, true), want.headDim],
    ["max_positions", dv.getUint32(60, true), want.maxPositions],
  ];
  for (const [name, got, exp] of fields) {
    if (got !== exp) throw new SessionError(path, name, `expected ${exp}, got ${got}`);
  }
  const position = dv.getUint32(64, true);
  if (position > want.maxPositions) {
    throw new SessionError(path, "position", `${position} exceeds max_positions ${want.maxPositions}`);
  }
  const expect = sessionBytes(want, position);
  if (b.length !== expect) {
    throw new SessionError(
      path,
      "length",
      `position ${position} implies ${expect} bytes, the file has ${b.length}`,
    );
  }
  const rngHi = dv.getInt32(68, true), rngLo = dv.getInt32(72, true);
  if (rngHi === 0 && rngLo === 0) {
    throw new SessionError(path, "rng", "the xorshift state is zero (it never is)");
  }
  const flags = dv.getUint32(76, true);
  if (flags !== (position > 0 ? 1 : 0)) {
    throw new SessionError(
      path,
      "flags",
      `expected ${position > 0 ? 1 : 0} at position ${position}, got ${flags}`,
    );
  }
  let at = SESSION_PREFIX;
  const tokens: number[] = [];
  for (let i = 0; i < position; i++) {
    const t = dv.getUint32(at, true);
    if (t >= want.vocab) {
      throw new SessionError(path, `tokens[${i}]`, `${t} is outside the vocabulary (${want.vocab})`);
    }
    tokens.push(t);
    at += 4;
  }
  const logits = new Int32Array(position > 0 ? want.vocab : 0);
  for (let i = 0; i < logits.length; i++) logits[i] = dv.getInt32(at, true), at += 4;
  const kvDim = want.kvHeads * want.headDim;
  const read16 = (n: number, field: string, max: number) => {
    const a = new Int16Array(n);
    for (let i = 0; i < n; i++) {
      const v = dv.getInt16(at, true);
      if (v > max || v < -max) throw new SessionError(path, field, `value ${v} outside ±${max}`);
      a[i] = v;
      at += 2;
    }
    return a;
  };
  const keys: Int16Array[] = [],
    keyExp: Int16Array[] = [],
    values: Int16Array[] = [],
    valueExp: Int16Array[] = [];
  for (let l = 0; l < want.layers; l++) {
    keys.push(read16(position * kvDim, `layers[${l}].keys`, CACHE_MAX));
    keyExp.push(read16(position * want.kvHeads, `layers[${l}].key_exp`, 1024));
    values.push(read16(position * kvDim, `layers[${l}].values`, CACHE_MAX));
    valueExp.push(read16(position * want.kvHeads, `layers[${l}].value_exp`, 1024));
  }
  return { shape: { ...want }, position, tokens, rngHi, rngLo, logits, keys, keyExp, values, valueExp };
}

/** Writes session bytes atomically (temporary file, fsync, rename). */
export async function writeSessionFile(path: string, bytes: Uint8Array): Promise<void> {
  await writeAtomic(path, [bytes]);
}

/**
 * ferry's session file (spec: formats/session/session.md): everything needed to continue a conversation —
 * the model's digest, position, tokens, the sampler's RNG state, the pending logits and the KV cache —
 * in little-endian binary with a trailing CRC-32. Version 1 is the integer engine's (12-bit cache,
 * fixed-point logits), version 2 the float engines' (f32 cache and logits; the float and WebGPU
 * engines). Decoding checks every field against the model and against each other before anything is
 * handed out.
 *
 * @example
 * ```ts
 * import { decodeFloatSession, decodeSession, encodeSession, writeSessionFile } from "./session.ts";
 * import type { SessionData, SessionShape } from "./session.ts";
 * declare const data: SessionData, expect: SessionShape, floatBytes: Uint8Array;
 * const bytes = encodeSession(data);
 * await writeSessionFile("chat.session", bytes);        // atomic
 * const back = decodeSession(bytes, expect, "chat.session");
 * const float = decodeFloatSession(floatBytes, expect, "float", "chat.session");
 * ```
 * @module
 */
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";
import { writeAtomic } from "../io.ts";
import { CONFIG_FIELDS, type ModelConfig } from "../../model/config.ts";
import { formatErrorClass } from "../../model/error.ts";
import type { Tensor } from "../../model/tensor.ts";

/** The 8 magic bytes. */
export const SESSION_MAGIC = "FERRYSES";
/** The integer engine's version. */
export const SESSION_VERSION = 1;
/** The float engines' version (f32 cache). */
export const FLOAT_SESSION_VERSION = 2;
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

/** Every rule a session can break; formats/session/session.md ("Refusals") says what each means. */
export const SESSION_REFUSALS = [
  ["Truncated", "BadMagic", "UnsupportedVersion", "ChecksumMismatch", "SizeMismatch"],
  ["ModelMismatch", "InvalidValue", "VocabMismatch", "NotFinite"],
] as const;

/** A refused session file: names the file, the field and the rule. */
export class SessionError extends formatErrorClass(SESSION_REFUSALS) {}

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
    throw new SessionError(path, "Truncated", "length", `${b.length} bytes is too short for a session`);
  }
  if (new TextDecoder().decode(b.subarray(0, 8)) !== SESSION_MAGIC) {
    throw new SessionError(path, "BadMagic", "magic", `expected ${SESSION_MAGIC}`);
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const position = checkHeader(b, want, SESSION_VERSION, path);
  const expect = sessionBytes(want, position);
  if (b.length !== expect) {
    throw new SessionError(
      path,
      "SizeMismatch",
      "length",
      `position ${position} implies ${expect} bytes, the file has ${b.length}`,
    );
  }
  const rngHi = dv.getInt32(68, true), rngLo = dv.getInt32(72, true);
  if (rngHi === 0 && rngLo === 0) {
    throw new SessionError(path, "InvalidValue", "rng", "the xorshift state is zero (it never is)");
  }
  const flags = dv.getUint32(76, true);
  if (flags !== (position > 0 ? 1 : 0)) {
    throw new SessionError(
      path,
      "InvalidValue",
      "flags",
      `expected ${position > 0 ? 1 : 0} at position ${position}, got ${flags}`,
    );
  }
  let at = SESSION_PREFIX;
  const tokens: number[] = [];
  for (let i = 0; i < position; i++) {
    const t = dv.getUint32(at, true);
    if (t >= want.vocab) {
      throw new SessionError(
        path,
        "VocabMismatch",
        `tokens[${i}]`,
        `${t} is outside the vocabulary (${want.vocab})`,
      );
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
      if (v > max || v < -max) {
        throw new SessionError(path, "InvalidValue", field, `value ${v} outside ±${max}`);
      }
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

/** What each version holds, for refusing one engine's session on another. */
const VERSION_HOLDS: Record<number, string> = {
  [SESSION_VERSION]: "an integer-engine session",
  [FLOAT_SESSION_VERSION]: "a float-engine session",
};

/**
 * Checks what both versions share — magic (by the caller), version, CRC-32, the model's digest, the
 * five sizes and the position's bound — and returns the position.
 */
function checkHeader(b: Uint8Array, want: SessionShape, version: number, path: string): number {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const got = dv.getUint32(8, true);
  if (got !== version) {
    const holds = (v: number) => VERSION_HOLDS[v] ? ` (${VERSION_HOLDS[v]})` : "";
    throw new SessionError(
      path,
      "UnsupportedVersion",
      "version",
      `expected ${version}${holds(version)}, got ${got}${holds(got)}`,
    );
  }
  const crc = dv.getUint32(b.length - 4, true);
  if ((crc32(b.subarray(0, b.length - 4)) >>> 0) !== crc) {
    throw new SessionError(
      path,
      "ChecksumMismatch",
      "crc32",
      "checksum mismatch: the file is truncated or altered",
    );
  }
  const sha = bytesToHex(b.subarray(12, 44));
  if (sha !== want.sha256) {
    throw new SessionError(
      path,
      "ModelMismatch",
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
  for (const [name, found, exp] of fields) {
    if (found !== exp) throw new SessionError(path, "ModelMismatch", name, `expected ${exp}, got ${found}`);
  }
  const position = dv.getUint32(64, true);
  if (position > want.maxPositions) {
    throw new SessionError(
      path,
      "InvalidValue",
      "position",
      `${position} exceeds max_positions ${want.maxPositions}`,
    );
  }
  return position;
}

/** Bytes of a float session before the tokens. */
export const FLOAT_SESSION_PREFIX = 92;
/** The engines that write float sessions, by the code stored at offset 84. */
export const FLOAT_SESSION_ENGINES = { float: 1, webgpu: 2 } as const;
/** An engine that writes float sessions. */
export type FloatSessionEngine = keyof typeof FLOAT_SESSION_ENGINES;

/** A float engine's session. Cache arrays hold exactly `position` rows (kv_heads · head_dim f32 each). */
export interface FloatSessionData {
  shape: SessionShape;
  /** The engine that wrote it: a session continues bit for bit only on the same kind of engine. */
  engine: FloatSessionEngine;
  position: number;
  tokens: number[];
  /** The sampler's xoshiro128** state (model/random.ts `Rng.state()`): four u32, never all zero. */
  rng: number[];
  /** Pending logits (vocab f32) when position > 0; empty otherwise. */
  logits: Float32Array;
  keys: Float32Array[];
  values: Float32Array[];
}

/** The byte length of a float session with this shape at this position. */
export function floatSessionBytes(shape: SessionShape, position: number): number {
  const kvDim = shape.kvHeads * shape.headDim;
  return FLOAT_SESSION_PREFIX + position * 4 + (position > 0 ? shape.vocab * 4 : 0) +
    shape.layers * 2 * position * kvDim * 4 + 4;
}

/** Encodes a float session; the same data gives the same bytes on every runtime. */
export function encodeFloatSession(d: FloatSessionData): Uint8Array {
  const s = d.shape, n = d.position, kvDim = s.kvHeads * s.headDim;
  const out = new Uint8Array(floatSessionBytes(s, n));
  const dv = new DataView(out.buffer);
  out.set(new TextEncoder().encode(SESSION_MAGIC), 0);
  dv.setUint32(8, FLOAT_SESSION_VERSION, true);
  out.set(hexToBytes(s.sha256), 12);
  [s.vocab, s.layers, s.kvHeads, s.headDim, s.maxPositions, n].forEach((v, i) =>
    dv.setUint32(44 + 4 * i, v, true)
  );
  d.rng.forEach((w, i) => dv.setUint32(68 + 4 * i, w >>> 0, true));
  dv.setUint32(84, FLOAT_SESSION_ENGINES[d.engine], true);
  dv.setUint32(88, n > 0 ? 1 : 0, true);
  let at = FLOAT_SESSION_PREFIX;
  for (const t of d.tokens) dv.setUint32(at, t, true), at += 4;
  const f32s = (a: Float32Array, count: number) => {
    for (let i = 0; i < count; i++) dv.setFloat32(at, a[i], true), at += 4;
  };
  if (n > 0) f32s(d.logits, s.vocab);
  for (let l = 0; l < s.layers; l++) f32s(d.keys[l], n * kvDim), f32s(d.values[l], n * kvDim);
  dv.setUint32(at, crc32(out.subarray(0, at)) >>> 0, true);
  return out;
}

/**
 * Decodes and checks a float session against the model and the engine that must continue it: framing,
 * version, CRC, the model's digest, every size, the length the position implies, the sampler state,
 * the engine, the flag, token ids, and every logit and cached value finite. Throws `SessionError` on
 * the first problem; returns fresh arrays.
 */
export function decodeFloatSession(
  bytes: Uint8Array,
  want: SessionShape,
  engine: FloatSessionEngine,
  path = "session",
): FloatSessionData {
  const b = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < 12 || new TextDecoder().decode(b.subarray(0, 8)) !== SESSION_MAGIC) {
    throw new SessionError(path, "BadMagic", "magic", `expected ${SESSION_MAGIC}`);
  }
  // The version first: an integer session may be shorter than a float one's prefix.
  const version = new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(8, true);
  if (version !== FLOAT_SESSION_VERSION) checkHeader(b, want, FLOAT_SESSION_VERSION, path);
  if (b.length < FLOAT_SESSION_PREFIX + 4) {
    throw new SessionError(path, "Truncated", "length", `${b.length} bytes is too short for a float session`);
  }
  const position = checkHeader(b, want, FLOAT_SESSION_VERSION, path);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const expect = floatSessionBytes(want, position);
  if (b.length !== expect) {
    throw new SessionError(
      path,
      "SizeMismatch",
      "length",
      `position ${position} implies ${expect} bytes, the file has ${b.length}`,
    );
  }
  const rng = [0, 1, 2, 3].map((i) => dv.getUint32(68 + 4 * i, true));
  if (rng.every((w) => w === 0)) {
    throw new SessionError(path, "InvalidValue", "rng", "the xoshiro128** state is zero (it never is)");
  }
  const code = dv.getUint32(84, true);
  if (code !== FLOAT_SESSION_ENGINES[engine]) {
    const wrote = Object.entries(FLOAT_SESSION_ENGINES).find(([, c]) => c === code)?.[0];
    throw new SessionError(
      path,
      "ModelMismatch",
      "engine",
      `expected ${FLOAT_SESSION_ENGINES[engine]} (${engine}), got ${code}${
        wrote
          ? ` (${wrote}: ` +
            "a session continues bit for bit only on the engine that saved it)"
          : ""
      }`,
    );
  }
  const flags = dv.getUint32(88, true);
  if (flags !== (position > 0 ? 1 : 0)) {
    throw new SessionError(
      path,
      "InvalidValue",
      "flags",
      `expected ${position > 0 ? 1 : 0} at position ${position}, got ${flags}`,
    );
  }
  let at = FLOAT_SESSION_PREFIX;
  const tokens: number[] = [];
  for (let i = 0; i < position; i++, at += 4) {
    const t = dv.getUint32(at, true);
    if (t >= want.vocab) {
      throw new SessionError(
        path,
        "VocabMismatch",
        `tokens[${i}]`,
        `${t} is outside the vocabulary (${want.vocab})`,
      );
    }
    tokens.push(t);
  }
  const readF32 = (count: number, field: string) => {
    const a = new Float32Array(count);
    for (let i = 0; i < count; i++, at += 4) {
      a[i] = dv.getFloat32(at, true);
      if (!Number.isFinite(a[i])) {
        throw new SessionError(path, "NotFinite", field, `value ${a[i]} is not finite`);
      }
    }
    return a;
  };
  const logits = readF32(position > 0 ? want.vocab : 0, "logits");
  const kvDim = want.kvHeads * want.headDim, keys: Float32Array[] = [], values: Float32Array[] = [];
  for (let l = 0; l < want.layers; l++) {
    keys.push(readF32(position * kvDim, `layers[${l}].keys`));
    values.push(readF32(position * kvDim, `layers[${l}].values`));
  }
  return { shape: { ...want }, engine, position, tokens, rng, logits, keys, values };
}

/**
 * A float model's identity for its sessions: the SHA-256 of its config (every field, in
 * `CONFIG_FIELDS` order) and its tensors (sorted by name: name, dims, then the f32 data in
 * little-endian), so the same weights read from any export name the same model.
 *
 * @example
 * ```ts
 * import { floatModelDigest } from "./session.ts";
 * import { readCheckpoint } from "../checkpoint/checkpoint.ts";
 * const run = await readCheckpoint("runs/a.ckpt", { sections: ["model"] });
 * floatModelDigest(run.config, run.model); // "3f1a…" (64 hex digits)
 * ```
 */
export function floatModelDigest(config: ModelConfig, tensors: readonly DigestTensor[]): string {
  const h = createHash("sha256");
  h.update(JSON.stringify(CONFIG_FIELDS.map(([k]) => [k, config[k]])));
  for (const t of [...tensors].sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) {
    h.update(JSON.stringify([t.name, t.dims]));
    if ("rows" in t) {
      // A row at a time into one buffer: the same bytes, and no copy of the matrix.
      const row = new Float32Array(t.dims[1]);
      for (let n = 0; n < t.dims[0]; n++) t.rows(n, row), h.update(littleEndianBytes(row));
      continue;
    }
    const data = t.data; // read once: an engine may hand out a tensor whose data is unpacked on each read
    h.update(littleEndianBytes(data));
  }
  return h.digest("hex");
}

/**
 * A tensor as the digest reads it: in memory, or a matrix `[rows, cols]` read a row at a time into the
 * caller's buffer (an engine's packed weights, which it would otherwise unpack whole).
 */
export type DigestTensor = Tensor | {
  name: string;
  dims: number[];
  rows(n: number, out: Float32Array): void;
};

/** Whether this machine stores numbers little-endian (then an f32 array's bytes are already the digest's). */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** `data`'s values as little-endian bytes: a view of them where the machine is little-endian, else a copy. */
function littleEndianBytes(data: Float32Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const le = new Uint8Array(data.length * 4);
  const dv = new DataView(le.buffer);
  for (let i = 0; i < data.length; i++) dv.setFloat32(i * 4, data[i], true);
  return le;
}

/** The session shape of a float model: its digest (`floatModelDigest`) and sizes. */
export function floatSessionShape(config: ModelConfig, tensors: readonly DigestTensor[]): SessionShape {
  return {
    sha256: floatModelDigest(config, tensors),
    vocab: config.vocab_size,
    layers: config.num_hidden_layers,
    kvHeads: config.num_key_value_heads,
    headDim: config.head_dim,
    maxPositions: config.max_position_embeddings,
  };
}

/** Writes session bytes atomically (temporary file, fsync, rename). */
export async function writeSessionFile(path: string, bytes: Uint8Array): Promise<void> {
  await writeAtomic(path, [bytes]);
}

/**
 * The shape a session's header names (the model's digest and sizes), read without checking the rest:
 * the bytes of a fresh session name the model of the engine that made them, so a process that holds no
 * weights (the chat server's thread, whose model lives in its slot workers) learns the shape its
 * sessions must match from them. Too short or not a session: a `SessionError`.
 *
 * @example
 * ```ts
 * import { checkEngineSession, sessionShapeOf } from "./session.ts";
 * import type { Engine } from "../../model/engine.ts";
 * declare const engine: Engine, bytes: Uint8Array;
 * const shape = sessionShapeOf(engine.start().save!());
 * checkEngineSession("int", bytes, shape, "uploaded session").position;
 * ```
 */
export function sessionShapeOf(bytes: Uint8Array, path = "session"): SessionShape {
  const b = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length < SESSION_PREFIX + 4 || new TextDecoder().decode(b.subarray(0, 8)) !== SESSION_MAGIC) {
    throw new SessionError(
      path,
      "BadMagic",
      "magic",
      `expected a session (${SESSION_MAGIC}, at least ${SESSION_PREFIX + 4} bytes)`,
    );
  }
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    sha256: bytesToHex(b.subarray(12, 44)),
    vocab: dv.getUint32(44, true),
    layers: dv.getUint32(48, true),
    kvHeads: dv.getUint32(52, true),
    headDim: dv.getUint32(56, true),
    maxPositions: dv.getUint32(60, true),
  };
}

/**
 * A session of the engine `kind` (`int`, or a float engine of `FLOAT_SESSION_ENGINES`) checked whole
 * against `want`, as that engine's `restore` checks it: its position and tokens. Throws `SessionError`.
 */
export function checkEngineSession(
  kind: string,
  bytes: Uint8Array,
  want: SessionShape,
  path = "session",
): { position: number; tokens: number[] } {
  if (kind === "int") return decodeSession(bytes, want, path);
  if (Object.hasOwn(FLOAT_SESSION_ENGINES, kind)) {
    return decodeFloatSession(bytes, want, kind as FloatSessionEngine, path);
  }
  throw new SessionError(path, "UnsupportedVersion", "engine", `no session format for the ${kind} engine`);
}

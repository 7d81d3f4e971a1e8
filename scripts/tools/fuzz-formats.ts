/**
 * The formats scripts/tools/fuzz.ts attacks, one entry each: how to make a small valid file, the byte map of
 * that file, its text header and format-specific edits (with the format's own checksum recomputed, the
 * way an attacker who knows the format would), the full readers to feed and the error type each may
 * refuse with, and the minimal reader in readers/.
 *
 * Adding a format is one more entry in `FUZZ_FORMATS` (as lut4 and session files were): `make`, `map`,
 * `readers`, `refusal`, and optionally `text`, `edits`, `reseal`, `explain` and `minimal`.
 *
 * @module
 */
import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { crc32 } from "node:zlib";
import {
  type ByteMap,
  concat,
  type Mutation,
  type MutationSpec,
  type NumField,
  type Region,
  type Rng,
} from "./fuzz-mutate.ts";
import {
  CheckpointError,
  openCheckpointModel,
  readCheckpoint,
  writeCheckpoint,
} from "../../formats/checkpoint.ts";
import { DmexpError, readDmexp, sealHeader, writeDmexp } from "../../formats/dmexp.ts";
import {
  readSafetensors,
  SAFETENSORS_DIGEST_NEEDLE,
  SafetensorsError,
  writeSafetensors,
} from "../../formats/safetensors.ts";
import { GGUF_DIGEST_NEEDLE, GgufError, readGguf, writeGguf } from "../../formats/gguf.ts";
import { digestOffset, sealDigest } from "../../formats/digest.ts";
import { exportHuggingFace, HuggingFaceError, importHuggingFace } from "../../formats/huggingface.ts";
import { F64LinesError, readF64Lines, stringChecksum, writeF64Lines } from "../../formats/f64lines.ts";
import { Lut4Error, lut4Format, readLut4 } from "../../formats/lut4.ts";
import { decodeSession, SessionError, writeSessionFile } from "../../formats/session.ts";
import { loadIntEngine, sessionShape } from "../../engines/int/engine.ts";
import type { Engine } from "../../model/engine.ts";
import { configToToml, type ModelConfig, paramShapes } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { materialize, tensorSource } from "../../model/tensor.ts";

/** The model every fuzzed file holds: the smallest shape every format accepts (byte vocab, one layer). */
export const FUZZ_CONFIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 8,
  intermediate_size: 8,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 4,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
};

/** A valid file made for a campaign: `file` is the one mutated, `target` what the readers are given. */
export interface FuzzSeed {
  file: string;
  target: string;
}

/** One format under attack. */
export interface FuzzFormat extends Omit<MutationSpec, "map"> {
  name: string;
  /** Writes the valid file (and anything beside it that the readers need) into `dir`. */
  make(dir: string): Promise<FuzzSeed>;
  /** The byte map of the valid file. */
  map(file: Uint8Array): ByteMap;
  /** The full readers, by name: each returns what it read (compared with what it read from the valid file). */
  readers: Record<string, (target: string) => Promise<unknown>>;
  /** Whether an exception is a refusal with this format's typed error. */
  refusal(e: unknown): boolean;
  /** Recomputes the checksums ferry adds of its own, as a forger would (applied to half the cases). */
  reseal?: (file: Uint8Array) => Uint8Array;
  /** The minimal reader (path from the repository root), given the file and every tensor name. */
  minimal?: string;
  /**
   * Why a mutation that a reader accepted with a different result could pass: what no checksum of the
   * format covers (or that the mutation forged the checksums). Undefined means it should not have passed.
   */
  explain?: (m: Mutation) => string | undefined;
}

const FORGED = "forged: every checksum the file carries was recomputed after the edit";
// Whether a mutated file still carries ferry's own checksum (found exactly once where the format puts it).
const sealed = (bytes: Uint8Array, needle: Uint8Array) => {
  const found = digestOffset(bytes, needle);
  return found !== undefined && "at" in found;
};

const tensors = () => initParams(FUZZ_CONFIG, 7);
const names = () => paramShapes(FUZZ_CONFIG).map((p) => p.name);
const enc = new TextEncoder(), dec = new TextDecoder();
const dv = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);

// ---- dmexp ----

function dmexpParts(f: Uint8Array) {
  const h = dv(f).getUint32(8, true);
  return { prefix: f.subarray(0, 24), header: f.subarray(24, 24 + h), payload: f.subarray(24 + h) };
}

function dmexpJoin(prefix: Uint8Array, header: Uint8Array, payload: Uint8Array): Uint8Array {
  const out = concat(prefix, header, payload);
  dv(out).setUint32(8, header.length, true);
  dv(out).setBigUint64(12, BigInt(payload.length), true);
  dv(out).setUint32(20, crc32(payload) >>> 0, true);
  return out;
}

// Swaps two `[[tensors]]` tables of the TOML header: the payload is then sliced in the other order.
function swapTables(text: string, rng: Rng): string | undefined {
  const parts = text.split(/(?=^\[\[tensors\]\]$)/m);
  if (parts.length < 3) return undefined;
  const i = 1 + rng.int(parts.length - 1), j = 1 + rng.int(parts.length - 1);
  if (i === j) return undefined;
  const a = parts[i].endsWith("\n") ? parts[i] : parts[i] + "\n",
    b = parts[j].endsWith("\n") ? parts[j] : parts[j] + "\n";
  [parts[i], parts[j]] = [b, a];
  return parts.join("");
}

const dmexp: FuzzFormat = {
  name: "dmexp",
  async make(dir) {
    const file = join(dir, "m.dmexp");
    await writeDmexp(file, tensors(), FUZZ_CONFIG, { dtype: "bf16", source: "fuzz@step1", step: 1 });
    return { file, target: file };
  },
  map(f) {
    const h = dv(f).getUint32(8, true);
    return {
      regions: [
        { name: "magic", start: 0, end: 8 },
        { name: "header_length", start: 8, end: 12 },
        { name: "payload_length", start: 12, end: 20 },
        { name: "crc32", start: 20, end: 24 },
        { name: "header", start: 24, end: 24 + h },
        { name: "payload", start: 24 + h, end: f.length },
        ...tableRegions(dec.decode(f.subarray(24, 24 + h)), 24),
      ],
      fields: [{ name: "header_length", offset: 8, width: 4 }, {
        name: "payload_length",
        offset: 12,
        width: 8,
      }],
    };
  },
  text: {
    get: (f) => dec.decode(dmexpParts(f).header),
    set: (f, t) => {
      const p = dmexpParts(f);
      return dmexpJoin(p.prefix, enc.encode(t), p.payload);
    },
  },
  edits: {
    "swap tables": (f, rng) => {
      const p = dmexpParts(f);
      const t = swapTables(dec.decode(p.header), rng);
      return t === undefined ? undefined : dmexpJoin(p.prefix, enc.encode(t), p.payload);
    },
    "dtype": (f, rng) => {
      const p = dmexpParts(f);
      const t = dec.decode(p.header).replace(
        /^dtype = "\w+"/m,
        `dtype = "${rng.pick(["f16", "f32", "bf16"])}"`,
      );
      return dmexpJoin(p.prefix, enc.encode(t), p.payload);
    },
    "non-finite": (f, rng) => {
      const p = dmexpParts(f);
      const payload = p.payload.slice();
      const at = 2 * rng.int(payload.length / 2);
      dv(payload).setUint16(at, rng.pick([0x7f80, 0xff80, 0x7fc0, 0x7c00]), true); // bf16 ±inf, NaN; f16 inf
      return dmexpJoin(p.prefix, p.header, payload);
    },
  },
  readers: { readDmexp: (p) => readDmexp(p) },
  refusal: (e) => e instanceof DmexpError,
  reseal: (f) => {
    if (f.length < 24) return f;
    const p = dmexpParts(f);
    return concat(p.prefix, sealHeader(p.prefix, p.header), p.payload);
  },
  minimal: "readers/dmexp.ts",
  explain: (m) =>
    m.kind.endsWith("+resealed") ? FORGED : m.bytes.length >= 24 &&
        !/^header_crc32 = "[0-9a-f]{8}"$/m.test(dec.decode(dmexpParts(m.bytes).header))
      ? "header_crc32 removed: the file reads as a reference-style file, whose header no checksum covers"
      : undefined,
};

// Where each `[[tensors]]` table starts and ends in the header (section boundaries for truncation).
function tableRegions(text: string, base: number): Region[] {
  const out: Region[] = [];
  const starts = [...text.matchAll(/^\[\[tensors\]\]$/gm)].map((m) =>
    enc.encode(text.slice(0, m.index)).length
  );
  starts.forEach((s, i) =>
    out.push({
      name: `tensors[${i}]`,
      start: base + s,
      end: base + (starts[i + 1] ?? enc.encode(text).length),
    })
  );
  return out;
}

// ---- checkpoint ----

function ckptJoin(header: Uint8Array, payload: Uint8Array, magic: Uint8Array): Uint8Array {
  const out = concat(magic, new Uint8Array(16), header, payload);
  dv(out).setUint32(8, header.length, true);
  dv(out).setBigUint64(12, BigInt(payload.length), true);
  dv(out).setUint32(20, crc32(payload, crc32(header)) >>> 0, true);
  return out;
}

function ckptParts(f: Uint8Array) {
  const h = dv(f).getUint32(8, true);
  return { magic: f.subarray(0, 8), header: f.subarray(24, 24 + h), payload: f.subarray(24 + h) };
}

const checkpoint: FuzzFormat = {
  name: "checkpoint",
  async make(dir) {
    const file = join(dir, "run.ckpt");
    const model = tensors();
    await writeCheckpoint(file, FUZZ_CONFIG, {
      step: 3,
      model,
      ema: initParams(FUZZ_CONFIG, 8),
      trainer: { lr: 0.001 },
    });
    return { file, target: file };
  },
  map(f) {
    const h = dv(f).getUint32(8, true);
    return {
      regions: [
        { name: "magic", start: 0, end: 8 },
        { name: "header_length", start: 8, end: 12 },
        { name: "payload_length", start: 12, end: 20 },
        { name: "crc32", start: 20, end: 24 },
        { name: "header", start: 24, end: 24 + h },
        { name: "payload", start: 24 + h, end: f.length },
      ],
      fields: [{ name: "header_length", offset: 8, width: 4 }, {
        name: "payload_length",
        offset: 12,
        width: 8,
      }],
    };
  },
  text: {
    get: (f) => dec.decode(ckptParts(f).header),
    set: (f, t) => {
      const p = ckptParts(f);
      return ckptJoin(enc.encode(t), p.payload, p.magic);
    },
  },
  readers: {
    readCheckpoint: (p) => readCheckpoint(p),
    "readCheckpoint model": (p) => readCheckpoint(p, { sections: ["model"] }),
    openCheckpointModel: async (p) => {
      const run = await openCheckpointModel(p);
      try {
        return {
          step: run.step,
          config: run.config,
          tensors: await Promise.all(run.tensors.map(materialize)),
        };
      } finally {
        await run.close();
      }
    },
  },
  refusal: (e) => e instanceof CheckpointError,
  explain: (m) => (m.kind.startsWith("text") ? "forged: the header edit recomputed the CRC-32" : undefined),
};

// ---- safetensors ----

function stParts(f: Uint8Array) {
  const n = Number(dv(f).getBigUint64(0, true));
  return { header: f.subarray(8, 8 + n), data: f.subarray(8 + n) };
}

function stJoin(header: Uint8Array, data: Uint8Array): Uint8Array {
  const out = concat(new Uint8Array(8), header, data);
  dv(out).setBigUint64(0, BigInt(header.length), true);
  return out;
}

const safetensors: FuzzFormat = {
  name: "safetensors",
  async make(dir) {
    const file = join(dir, "model.safetensors");
    await writeSafetensors(file, tensors(), { dtype: "F16" });
    return { file, target: file };
  },
  map(f) {
    const n = Number(dv(f).getBigUint64(0, true));
    return {
      regions: [
        { name: "header_length", start: 0, end: 8 },
        { name: "header", start: 8, end: 8 + n },
        { name: "data", start: 8 + n, end: f.length },
      ],
      fields: [{ name: "header_length", offset: 0, width: 8 }],
    };
  },
  text: {
    get: (f) => dec.decode(stParts(f).header),
    set: (f, t) => stJoin(enc.encode(t), stParts(f).data),
  },
  edits: {
    "dtype": (f, rng) => {
      const p = stParts(f);
      const t = dec.decode(p.header);
      const at = [...t.matchAll(/"dtype":"(\w+)"/g)];
      if (!at.length) return undefined;
      const m = rng.pick(at);
      const repl = `"dtype":"${rng.pick(["F16", "BF16", "F32", "I16", "U8", "F64", "I64"])}"`;
      return stJoin(enc.encode(t.slice(0, m.index) + repl + t.slice(m.index! + m[0].length)), p.data);
    },
  },
  readers: { readSafetensors: (p) => readSafetensors(p) },
  refusal: (e) => e instanceof SafetensorsError,
  reseal: (f) => sealDigest(f, SAFETENSORS_DIGEST_NEEDLE),
  explain: (m) =>
    m.kind.endsWith("+resealed")
      ? FORGED
      : !sealed(m.bytes, SAFETENSORS_DIGEST_NEEDLE)
      ? "ferry.sha256 removed or damaged: the file reads as one not written by ferry, which no checksum covers"
      : undefined,
  minimal: "readers/safetensors.ts",
};

// ---- Hugging Face folder (config.json; model.safetensors is the safetensors entry's) ----

const hf: FuzzFormat = {
  name: "hf",
  async make(dir) {
    const folder = join(dir, "m.hf");
    await exportHuggingFace(folder, tensors(), FUZZ_CONFIG, { dtype: "bf16" });
    return { file: join(folder, "config.json"), target: folder };
  },
  map: (f) => ({ regions: [{ name: "config.json", start: 0, end: f.length }], fields: [] }),
  text: { get: (f) => dec.decode(f), set: (_f, t) => enc.encode(t) },
  readers: { importHuggingFace: (p) => importHuggingFace(p) },
  refusal: (e) => e instanceof HuggingFaceError || e instanceof SafetensorsError,
  explain: () => "config.json is Hugging Face's plain JSON: no checksum covers it",
};

// ---- f64lines (its config beside it is not attacked) ----

function f64Reseal(text: string): string {
  const lines = text.split("\n").filter((l) => !l.startsWith("#fnv1a32="));
  const body = lines.filter((l) => l.length > 0).map((l) => l + "\n").join("");
  return body + `#fnv1a32=${stringChecksum(body).toString(16).padStart(8, "0")}\n`;
}

const f64lines: FuzzFormat = {
  name: "f64lines",
  async make(dir) {
    const file = join(dir, "m.f64lines");
    await writeF64Lines(file, tensors());
    await writeFile(join(dir, "m.config.toml"), configToToml(FUZZ_CONFIG));
    return { file, target: file };
  },
  map(f) {
    const regions: Region[] = [];
    let start = 0;
    for (let i = 0; i < f.length; i++) {
      if (f[i] === 0x0a) {
        regions.push({ name: `line ${regions.length + 1}`, start, end: i + 1 }), start = i + 1;
      }
    }
    return { regions, fields: [] };
  },
  text: { get: (f) => dec.decode(f), set: (_f, t) => enc.encode(f64Reseal(t)) },
  readers: { readF64Lines: (p) => readF64Lines(p, paramShapes(FUZZ_CONFIG)) },
  refusal: (e) => e instanceof F64LinesError,
  explain: (
    m,
  ) => (m.kind.startsWith("text") ? "forged: the edit recomputed the fnv1a32 checksum line" : undefined),
  minimal: "readers/f64lines.ts",
};

// ---- GGUF ----

interface GgufKv {
  key: string;
  type: number;
  raw: Uint8Array;
}
interface GgufInfo {
  name: string;
  ne: bigint[];
  type: number;
  offset: bigint;
}

const SCALAR = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8];

// Walks a valid (ferry-written) GGUF file: the byte map, and its parts for edits that re-encode it.
function walkGguf(f: Uint8Array) {
  const d = dv(f);
  const regions: Region[] = [{ name: "magic", start: 0, end: 4 }, { name: "version", start: 4, end: 8 }];
  const fields: NumField[] = [
    { name: "version", offset: 4, width: 4 },
    { name: "tensor_count", offset: 8, width: 8 },
    { name: "kv_count", offset: 16, width: 8 },
  ];
  let p = 24;
  const str = (what: string) => {
    fields.push({ name: `${what}.length`, offset: p, width: 8 });
    const n = Number(d.getBigUint64(p, true));
    const s = dec.decode(f.subarray(p + 8, p + 8 + n));
    p += 8 + n;
    return s;
  };
  const value = (t: number, what: string): void => {
    if (t === 8) str(what);
    else if (t === 9) {
      const e = d.getUint32(p, true);
      fields.push({ name: `${what}.count`, offset: p + 4, width: 8 });
      const n = Number(d.getBigUint64(p + 4, true));
      p += 12;
      for (let i = 0; i < n; i++) value(e, `${what}[]`);
    } else {
      if (t === 4) fields.push({ name: what, offset: p, width: 4 });
      p += SCALAR[t];
    }
  };
  const kvs: GgufKv[] = [];
  const nT = Number(d.getBigUint64(8, true)), nKv = Number(d.getBigUint64(16, true));
  for (let i = 0; i < nKv; i++) {
    const start = p;
    const key = str(`kv[${i}].key`);
    const type = d.getUint32(p, true);
    fields.push({ name: `${key}.type`, offset: p, width: 4 });
    p += 4;
    const vstart = p;
    value(type, key);
    kvs.push({ key, type, raw: f.slice(vstart, p) });
    regions.push({ name: key, start, end: p });
  }
  const infos: GgufInfo[] = [];
  for (let i = 0; i < nT; i++) {
    const start = p;
    const name = str(`tensor[${i}].name`);
    fields.push({ name: `${name}.n_dims`, offset: p, width: 4 });
    const nd = d.getUint32(p, true);
    p += 4;
    const ne: bigint[] = [];
    for (let j = 0; j < nd; j++) {
      fields.push({ name: `${name}.ne[${j}]`, offset: p, width: 8 }),
        ne.push(d.getBigUint64(p, true)),
        p += 8;
    }
    fields.push({ name: `${name}.type`, offset: p, width: 4 });
    const type = d.getUint32(p, true);
    fields.push({ name: `${name}.offset`, offset: p + 4, width: 8 });
    const offset = d.getBigUint64(p + 4, true);
    p += 12;
    infos.push({ name, ne, type, offset });
    regions.push({ name: `tensor info ${name}`, start, end: p });
  }
  const dataStart = Math.ceil(p / 32) * 32;
  regions.push({ name: "padding", start: p, end: dataStart }, {
    name: "data",
    start: dataStart,
    end: f.length,
  });
  return { map: { regions, fields }, kvs, infos, dataStart };
}

// Re-encodes a GGUF file from parts (the data section is kept as it is).
function ggufJoin(kvs: GgufKv[], infos: GgufInfo[], data: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  const u32 = (x: number) => {
    const b = new Uint8Array(4);
    dv(b).setUint32(0, x, true);
    parts.push(b);
  };
  const u64 = (x: bigint) => {
    const b = new Uint8Array(8);
    dv(b).setBigUint64(0, x, true);
    parts.push(b);
  };
  const str = (s: string) => {
    const b = enc.encode(s);
    u64(BigInt(b.length));
    parts.push(b);
  };
  parts.push(enc.encode("GGUF"));
  u32(3);
  u64(BigInt(infos.length));
  u64(BigInt(kvs.length));
  for (const kv of kvs) str(kv.key), u32(kv.type), parts.push(kv.raw);
  for (const t of infos) {
    str(t.name), u32(t.ne.length);
    for (const n of t.ne) u64(n);
    u32(t.type), u64(t.offset);
  }
  const head = concat(...parts);
  return concat(head, new Uint8Array(Math.ceil(head.length / 32) * 32 - head.length), data);
}

function ggufEdit(f: Uint8Array, edit: (kvs: GgufKv[], infos: GgufInfo[]) => boolean) {
  const w = walkGguf(f);
  return edit(w.kvs, w.infos) ? ggufJoin(w.kvs, w.infos, f.subarray(w.dataStart)) : undefined;
}

const gguf: FuzzFormat = {
  name: "gguf",
  async make(dir) {
    const file = join(dir, "m.gguf");
    await writeGguf(file, tensors(), FUZZ_CONFIG, { type: "f16" });
    return { file, target: file };
  },
  map: (f) => walkGguf(f).map,
  edits: {
    "swap names": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        const a = rng.pick(infos), b = rng.pick(infos);
        [a.name, b.name] = [b.name, a.name];
        return a !== b;
      }),
    "type": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        rng.pick(infos).type = rng.pick([0, 1, 30, 8, 2, 99]); // F32, F16, BF16, Q8_0, Q4_0, unknown
        return true;
      }),
    "hparam": (f, rng) =>
      ggufEdit(f, (kvs) => {
        const u32s = kvs.filter((k) => k.type === 4 || k.type === 6);
        const kv = rng.pick(u32s);
        const b = new Uint8Array(4);
        const v = rng.pick([0, 1, 2 ** 31, 2 ** 32 - 1, 99999, 3]);
        if (kv.type === 6) dv(b).setFloat32(0, rng.pick([NaN, Infinity, 0, -1, 1e-30, 1e30]), true);
        else dv(b).setUint32(0, v, true);
        kv.raw = b;
        return true;
      }),
    "duplicate kv": (f, rng) =>
      ggufEdit(f, (kvs) => {
        kvs.splice(rng.int(kvs.length), 0, rng.pick(kvs));
        return true;
      }),
    "drop kv": (f, rng) => ggufEdit(f, (kvs) => (kvs.splice(rng.int(kvs.length), 1), true)),
    "swap kvs": (f, rng) =>
      ggufEdit(f, (kvs) => {
        const i = rng.int(kvs.length), j = rng.int(kvs.length);
        [kvs[i], kvs[j]] = [kvs[j], kvs[i]];
        return i !== j;
      }),
    "swap infos": (f, rng) =>
      ggufEdit(f, (_kvs, infos) => {
        const i = rng.int(infos.length), j = rng.int(infos.length);
        [infos[i], infos[j]] = [infos[j], infos[i]];
        return i !== j;
      }),
    "non-finite": (f, rng) => {
      const w = walkGguf(f);
      const out = f.slice();
      const at = w.dataStart + 2 * rng.int((f.length - w.dataStart) / 2);
      dv(out).setUint16(at, rng.pick([0x7c00, 0xfc00, 0x7e00]), true);
      return out;
    },
  },
  readers: { readGguf: (p) => readGguf(p) },
  refusal: (e) => e instanceof GgufError,
  reseal: (f) => sealDigest(f, GGUF_DIGEST_NEEDLE),
  explain: (m) =>
    m.kind.endsWith("+resealed")
      ? FORGED
      : !sealed(m.bytes, GGUF_DIGEST_NEEDLE)
      ? "ferry.sha256 removed or damaged: the file reads as one not written by ferry, which no checksum covers"
      : undefined,
  minimal: "readers/gguf.ts",
};

// ---- lut4 ----

/** The model of every fuzzed lut4 file and session: the smallest shape the integer engine takes. */
export const FUZZ_LUT4_CONFIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 32,
  intermediate_size: 32,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 16,
  tie_word_embeddings: true,
};

async function makeLut4(file: string): Promise<void> {
  await lut4Format.write(file, {
    config: FUZZ_LUT4_CONFIG,
    tensors: initParams(FUZZ_LUT4_CONFIG, 7).map(tensorSource),
    source: "fuzz@step1",
    step: 1,
    name: "fuzz",
  }, { dtype: "q4" });
}

function lut4Parts(f: Uint8Array) {
  const h = f.length < 16 ? 0 : Number(dv(f).getBigUint64(8, true));
  return { header: f.subarray(16, 16 + h), data: f.subarray(16 + h) };
}

// Frames a header text and a data section as a lut4 file, padding the header with spaces as the writer does.
function lut4Join(text: string, data: Uint8Array): Uint8Array {
  const head = enc.encode(text + " ".repeat((64 - ((16 + enc.encode(text).length) % 64)) % 64));
  const out = concat(enc.encode("UORLUT01"), new Uint8Array(8), head, data);
  dv(out).setBigUint64(8, BigInt(head.length), true);
  return out;
}

type Lut4Json = {
  matrices: {
    name: string;
    rows: number;
    cols: number;
    exp_base: number;
    nibbles: { offset: number };
    scales: { offset: number };
  }[];
  tables: {
    name: string;
    kind: string;
    length: number;
    exp: number;
    span: { offset: number; bytes: number };
  }[];
  [k: string]: unknown;
};

// Edits the header object of a valid lut4 file (the data section and its CRC-32 stay as they are).
function lut4Edit(f: Uint8Array, edit: (h: Lut4Json) => boolean): Uint8Array | undefined {
  const p = lut4Parts(f);
  const h = JSON.parse(dec.decode(p.header)) as Lut4Json;
  return edit(h) ? lut4Join(JSON.stringify(h), p.data) : undefined;
}

// Rewrites bytes of a valid lut4 file's data section and recomputes `data_crc32`, as a forger would.
function lut4Forge(f: Uint8Array, edit: (h: Lut4Json, data: Uint8Array) => boolean): Uint8Array | undefined {
  const p = lut4Parts(f);
  const h = JSON.parse(dec.decode(p.header)) as Lut4Json;
  const data = p.data.slice();
  if (!edit(h, data)) return undefined;
  h.data_crc32 = crc32(data) >>> 0;
  return lut4Join(JSON.stringify(h), data);
}

// Whether a (mutated) lut4 file's data section still has the CRC-32 its header states.
function lut4DataIntact(f: Uint8Array): boolean {
  try {
    const p = lut4Parts(f);
    const h = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(p.header));
    return h?.data_crc32 === crc32(p.data) >>> 0;
  } catch {
    return false;
  }
}

const LUT4_HEADER_OPEN =
  "data section intact by its CRC-32; the lut4 header has no checksum (formats/lut4.md): a header value that " +
  "passes its check is read as written, and the file's SHA-256 (its identity for sessions) changes";

const lut4: FuzzFormat = {
  name: "lut4",
  async make(dir) {
    const file = join(dir, "m.lut4");
    await makeLut4(file);
    return { file, target: file };
  },
  map(f) {
    const h = Number(dv(f).getBigUint64(8, true)), start = 16 + h;
    const head = JSON.parse(dec.decode(f.subarray(16, start))) as Lut4Json;
    const spans: Region[] = [];
    const at = (name: string, s: { offset: number; bytes?: number }, bytes: number) =>
      spans.push({ name, start: start + s.offset, end: start + s.offset + bytes });
    for (const m of head.matrices) {
      at(`${m.name}.nibbles`, m.nibbles, (m.rows * m.cols) / 2),
        at(`${m.name}.scales`, m.scales, (m.rows * m.cols) / 32);
    }
    for (const t of head.tables) at(t.name, t.span, t.span.bytes);
    return {
      regions: [
        { name: "magic", start: 0, end: 8 },
        { name: "header_length", start: 8, end: 16 },
        { name: "header", start: 16, end: start },
        { name: "data", start, end: f.length },
        ...spans,
      ],
      fields: [{ name: "header_length", offset: 8, width: 8 }],
    };
  },
  text: {
    get: (f) => dec.decode(lut4Parts(f).header),
    set: (f, t) => lut4Join(t.trimEnd(), lut4Parts(f).data),
  },
  edits: {
    // Spans must rise through the data section: two same-shape matrices cannot trade places in the header.
    "swap spans": (f, rng) =>
      lut4Edit(f, (h) => {
        const [a, b] = rng.pick([["layers.0.k", "layers.0.v"], ["layers.0.gate", "layers.0.up"]]);
        const x = h.matrices.find((m) => m.name === a)!, y = h.matrices.find((m) => m.name === b)!;
        [x.nibbles, y.nibbles, x.scales, y.scales] = [y.nibbles, x.nibbles, y.scales, x.scales];
        return true;
      }),
    "swap names": (f, rng) =>
      lut4Edit(f, (h) => {
        const x = rng.pick(h.matrices), y = rng.pick(h.matrices);
        [x.name, y.name] = [y.name, x.name];
        return x !== y;
      }),
    "exp_base": (f, rng) =>
      lut4Edit(f, (h) => {
        rng.pick(h.matrices).exp_base = rng.pick([-101, -100, -20, 0, 60, 61, 2 ** 31, 0.5]);
        return true;
      }),
    "table exp": (f, rng) =>
      lut4Edit(f, (h) => {
        rng.pick(h.tables).exp = rng.pick([-101, -100, -30, -14, 0, 60, 61, 1e308]);
        return true;
      }),
    "table length": (f, rng) =>
      lut4Edit(f, (h) => {
        const t = rng.pick(h.tables);
        t.length = rng.pick([0, 1, t.length + 1, 2 ** 31, 2 ** 53]);
        if (rng.next() < 0.5) t.span.bytes = t.length * 4;
        return true;
      }),
    "shape": (f, rng) =>
      lut4Edit(f, (h) => {
        const shape = h.shape as Record<string, number>;
        const k = rng.pick(Object.keys(shape));
        shape[k] = rng.pick([0, 1, 2, 32, 64, 1 << 14, 2 ** 31, 2 ** 53, shape[k] * 2, shape[k] - 1]);
        return true;
      }),
    // Data edits with data_crc32 recomputed: the table checks are all that stands in their way.
    "forged table entry": (f, rng) =>
      lut4Forge(f, (h, data) => {
        const t = rng.pick(h.tables);
        const d = new DataView(data.buffer, data.byteOffset, data.byteLength);
        const i16 = t.kind === "i16";
        const at = t.span.offset + rng.int(t.span.bytes / (i16 ? 2 : 4)) * (i16 ? 2 : 4);
        const v = rng.pick([-32768, -16385, 16385, 32767, 0, -1]);
        if (i16) d.setInt16(at, v, true);
        else d.setInt32(at, rng.pick([v, 2 ** 30 + 1, -(2 ** 31), 2 ** 31 - 1, (1 << 22) + 1]), true);
        return true;
      }),
    "forged padding": (f, rng) =>
      lut4Forge(f, (h, data) => {
        const s = rng.pick(h.tables).span;
        const end = s.offset + s.bytes;
        if (end % 64 === 0) return false;
        data[end + rng.int(64 - (end % 64))] = 1 + rng.int(255);
        return true;
      }),
  },
  readers: {
    readLut4: (p) => readLut4(p),
    "lut4Format.read": (p) => lut4Format.read(p),
    // The integer engine's loader, and one forward pass on what it loaded.
    loadIntEngine: async (p) => {
      const engine = await loadIntEngine(p);
      const s = engine.start();
      return { config: engine.config, logits: await s.feed([1, 2, 3], "last"), next: s.pick() };
    },
  },
  refusal: (e) => e instanceof Lut4Error,
  reseal: (f) => {
    try {
      const p = lut4Parts(f);
      const h = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(p.header));
      if (typeof h !== "object" || h === null || Array.isArray(h)) return f;
      h.data_crc32 = crc32(p.data) >>> 0;
      return lut4Join(JSON.stringify(h), p.data);
    } catch {
      return f;
    }
  },
  minimal: "readers/lut4.ts",
  explain: (m) =>
    m.kind.endsWith("+resealed") || m.kind.startsWith("edit forged")
      ? FORGED
      : lut4DataIntact(m.bytes)
      ? LUT4_HEADER_OPEN
      : undefined,
};

// ---- session (the integer engine's saved conversation, restored onto the fuzz lut4 model) ----

const engines = new Map<string, Promise<Engine>>();
// One engine per lut4 file per process: the model file beside the session is never mutated.
const engineFor = (session: string) => {
  const lut = join(dirname(session), "m.lut4");
  if (!engines.has(lut)) engines.set(lut, loadIntEngine(lut));
  return engines.get(lut)!;
};
const shapes = new Map<string, ReturnType<typeof sessionShape>>();
const shapeFor = async (session: string) => {
  const lut = join(dirname(session), "m.lut4");
  if (!shapes.has(lut)) shapes.set(lut, sessionShape(await readLut4(lut)));
  return shapes.get(lut)!;
};

function sessionMap(f: Uint8Array): ByteMap {
  const d = dv(f);
  const V = d.getUint32(44, true),
    L = d.getUint32(48, true),
    K = d.getUint32(52, true),
    D = d.getUint32(56, true),
    n = d.getUint32(64, true);
  const regions: Region[] = [
    { name: "magic", start: 0, end: 8 },
    { name: "version", start: 8, end: 12 },
    { name: "model_sha256", start: 12, end: 44 },
    { name: "shape", start: 44, end: 64 },
    { name: "position", start: 64, end: 68 },
    { name: "rng", start: 68, end: 76 },
    { name: "flags", start: 76, end: 80 },
  ];
  let at = 80;
  const put = (
    name: string,
    bytes: number,
  ) => (regions.push({ name, start: at, end: at + bytes }), at += bytes);
  put("tokens", 4 * n);
  put("logits", n > 0 ? 4 * V : 0);
  for (let l = 0; l < L; l++) {
    put(`layers[${l}].keys`, 2 * n * K * D), put(`layers[${l}].key_exp`, 2 * n * K);
    put(`layers[${l}].values`, 2 * n * K * D), put(`layers[${l}].value_exp`, 2 * n * K);
  }
  regions.push({ name: "crc32", start: at, end: at + 4 });
  const u32 = (name: string, offset: number): NumField => ({ name, offset, width: 4 });
  return {
    regions,
    fields: [
      u32("version", 8),
      u32("vocab", 44),
      u32("layers", 48),
      u32("kv_heads", 52),
      u32("head_dim", 56),
      u32("max_positions", 60),
      u32("position", 64),
      u32("flags", 76),
    ],
  };
}

// The trailing CRC-32 recomputed over every byte before it, as a forger would.
function sessionReseal(f: Uint8Array): Uint8Array {
  if (f.length < 4) return f;
  const out = f.slice();
  dv(out).setUint32(out.length - 4, crc32(out.subarray(0, out.length - 4)) >>> 0, true);
  return out;
}

// Edits a valid session's field or value and recomputes the CRC-32.
function sessionForge(f: Uint8Array, edit: (out: Uint8Array, map: ByteMap) => void): Uint8Array {
  const out = f.slice();
  edit(out, sessionMap(f));
  return sessionReseal(out);
}

const regionOf = (map: ByteMap, name: string) => map.regions.find((r) => r.name === name)!;

const session: FuzzFormat = {
  name: "session",
  async make(dir) {
    const lut = join(dir, "m.lut4"), file = join(dir, "s.session");
    await makeLut4(lut);
    const s = (await loadIntEngine(lut)).start();
    s.seed(5);
    await s.feed([10, 20, 30, 40], "none");
    s.pick({ temperature: 1 });
    await writeSessionFile(file, s.save!());
    return { file, target: file };
  },
  map: sessionMap,
  edits: {
    "forged token": (f, rng) =>
      sessionForge(f, (out, map) => {
        const r = regionOf(map, "tokens");
        dv(out).setUint32(
          r.start + 4 * rng.int((r.end - r.start) / 4),
          rng.pick([257, 258, 2 ** 32 - 1]),
          true,
        );
      }),
    "forged cache": (f, rng) =>
      sessionForge(f, (out, map) => {
        const r = rng.pick(map.regions.filter((x) => x.name.startsWith("layers[")));
        const v = rng.pick([2047, 2048, -2048, -32768, 1024, 1025, -1025]);
        dv(out).setInt16(r.start + 2 * rng.int((r.end - r.start) / 2), v, true);
      }),
    "forged rng": (f) => sessionForge(f, (out) => out.fill(0, 68, 76)),
    "forged flags": (f, rng) => sessionForge(f, (out) => dv(out).setUint32(76, rng.pick([0, 2, 3]), true)),
    "forged model": (f, rng) => sessionForge(f, (out) => void (out[12 + rng.int(32)] ^= 1 << rng.int(8))),
    // A shorter session, consistent in every field: it reads as the conversation one token earlier would not.
    "forged position": (f, rng) =>
      sessionForge(f, (out) => dv(out).setUint32(64, rng.pick([0, 1, 3, 5, 16, 17, 2 ** 31]), true)),
  },
  readers: {
    decodeSession: async (p) => decodeSession(new Uint8Array(readFileSync(p)), await shapeFor(p), p),
    // restore, then what the restored session does: its saved bytes, one more step and a sampled token.
    restore: async (p) => {
      const engine = await engineFor(p);
      const s = engine.restore!(new Uint8Array(readFileSync(p)), p);
      const saved = s.save!();
      const next = s.position > 0 ? s.pick({ temperature: 1 }) : -1;
      const logits = s.position < FUZZ_LUT4_CONFIG.max_position_embeddings ? await s.feed([7], "last") : null;
      return { saved, position: s.position, tokens: [...s.tokens], next, logits };
    },
  },
  refusal: (e) => e instanceof SessionError,
  reseal: sessionReseal,
  explain: (m) => m.kind.endsWith("+resealed") || m.kind.startsWith("edit forged") ? FORGED : undefined, // the CRC-32 covers every byte: an unforged change must be refused
};

/** Every format the campaign attacks, by name. */
export const FUZZ_FORMATS: Record<string, FuzzFormat> = {
  dmexp,
  checkpoint,
  safetensors,
  hf,
  f64lines,
  gguf,
  lut4,
  session,
};

/** The tensor names the minimal readers are asked to print (every tensor of `FUZZ_CONFIG`). */
export const FUZZ_TENSOR_NAMES = names;

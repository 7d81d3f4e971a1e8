/**
 * The fuzz hook of session files (formats/session/session.md): the integer engine's saved conversation
 * (version 1), made by the engine on the campaign's lut4 model and restored onto it, and the float
 * engine's (version 2, `float-session`), made and restored on the campaign's float model. Not an export
 * format, and made and read by the engines (engines/ lies outside formats/), so it lives beside the
 * fuzzer among its other file kinds (scripts/tools/fuzz-formats.ts).
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../../formats/fuzz-kit.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook("scripts/tools/fuzz-session.ts"); // [session, float-session]
 * ```
 * @module
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { crc32 } from "node:zlib";
import {
  type ByteMap,
  FORGED,
  FUZZ_CONFIG,
  FUZZ_LUT4_CONFIG,
  type FuzzTarget,
  fuzzTensors,
  type NumField,
  type Region,
  view,
} from "../../formats/fuzz-kit.ts";
import { makeLut4 } from "../../formats/lut4/lut4-fuzz.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import {
  decodeFloatSession,
  decodeSession,
  FLOAT_SESSION_PREFIX,
  floatSessionShape,
  SessionError,
  writeSessionFile,
} from "../../formats/session/session.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { loadIntEngine, sessionShape } from "../../engines/int/engine.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";

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
  const d = view(f);
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
  view(out).setUint32(out.length - 4, crc32(out.subarray(0, out.length - 4)) >>> 0, true);
  return out;
}

// Edits a valid session's field or value and recomputes the CRC-32.
function sessionForge(f: Uint8Array, edit: (out: Uint8Array, map: ByteMap) => void): Uint8Array {
  const out = f.slice();
  edit(out, sessionMap(f));
  return sessionReseal(out);
}

const regionOf = (map: ByteMap, name: string) => map.regions.find((r) => r.name === name)!;

/** The seed file of both session targets: four tokens fed and one drawn, then saved. */
async function writeSeedSession(s: EngineSession, file: string): Promise<{ file: string; target: string }> {
  s.seed(5);
  await s.feed([10, 20, 30, 40], "none");
  s.pick({ temperature: 1 });
  await writeSessionFile(file, s.save!());
  return { file, target: file };
}

const session: FuzzTarget = {
  name: "session",
  async make(dir) {
    const lut = join(dir, "m.lut4"), file = join(dir, "s.session");
    await makeLut4(lut);
    return writeSeedSession((await loadIntEngine(lut)).start(), file);
  },
  map: sessionMap,
  edits: {
    "forged token": (f, rng) =>
      sessionForge(f, (out, map) => {
        const r = regionOf(map, "tokens");
        view(out).setUint32(
          r.start + 4 * rng.int((r.end - r.start) / 4),
          rng.pick([257, 258, 2 ** 32 - 1]),
          true,
        );
      }),
    "forged cache": (f, rng) =>
      sessionForge(f, (out, map) => {
        const r = rng.pick(map.regions.filter((x) => x.name.startsWith("layers[")));
        const v = rng.pick([2047, 2048, -2048, -32768, 1024, 1025, -1025]);
        view(out).setInt16(r.start + 2 * rng.int((r.end - r.start) / 2), v, true);
      }),
    "forged rng": (f) => sessionForge(f, (out) => out.fill(0, 68, 76)),
    "forged flags": (f, rng) => sessionForge(f, (out) => view(out).setUint32(76, rng.pick([0, 2, 3]), true)),
    "forged model": (f, rng) => sessionForge(f, (out) => void (out[12 + rng.int(32)] ^= 1 << rng.int(8))),
    // A shorter session, consistent in every field: it reads as the conversation one token earlier would not.
    "forged position": (f, rng) =>
      sessionForge(f, (out) => view(out).setUint32(64, rng.pick([0, 1, 3, 5, 16, 17, 2 ** 31]), true)),
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

// The float engine on the campaign's float model, made in memory (the same seeded tensors every run).
let floatEngine: Engine | undefined;
const floatEngineOnce = () => floatEngine ??= createFloatEngine(FUZZ_CONFIG, fuzzTensors(), "fuzz model");
const floatShape = floatSessionShape(FUZZ_CONFIG, fuzzTensors());

function floatSessionMap(f: Uint8Array): ByteMap {
  const d = view(f);
  const V = d.getUint32(44, true), L = d.getUint32(48, true), n = d.getUint32(64, true);
  const kvDim = d.getUint32(52, true) * d.getUint32(56, true);
  const regions: Region[] = [
    { name: "magic", start: 0, end: 8 },
    { name: "version", start: 8, end: 12 },
    { name: "model_sha256", start: 12, end: 44 },
    { name: "shape", start: 44, end: 64 },
    { name: "position", start: 64, end: 68 },
    { name: "rng", start: 68, end: 84 },
    { name: "engine", start: 84, end: 88 },
    { name: "flags", start: 88, end: 92 },
  ];
  let at = FLOAT_SESSION_PREFIX;
  const put = (
    name: string,
    bytes: number,
  ) => (regions.push({ name, start: at, end: at + bytes }), at += bytes);
  put("tokens", 4 * n);
  put("logits", n > 0 ? 4 * V : 0);
  for (let l = 0; l < L; l++) {
    put(`layers[${l}].keys`, 4 * n * kvDim), put(`layers[${l}].values`, 4 * n * kvDim);
  }
  regions.push({ name: "crc32", start: at, end: at + 4 });
  const u32 = (name: string, offset: number): NumField => ({ name, offset, width: 4 });
  const names = ["vocab", "layers", "kv_heads", "head_dim", "max_positions", "position"];
  return {
    regions,
    fields: [
      u32("version", 8),
      ...names.map((name, i) => u32(name, 44 + 4 * i)),
      u32("engine", 84),
      u32("flags", 88),
    ],
  };
}

function floatForge(f: Uint8Array, edit: (out: Uint8Array, map: ByteMap) => void): Uint8Array {
  const out = f.slice();
  edit(out, floatSessionMap(f));
  return sessionReseal(out);
}

const floatSession: FuzzTarget = {
  name: "float-session",
  make(dir) {
    return writeSeedSession(floatEngineOnce().start(), join(dir, "f.session"));
  },
  map: floatSessionMap,
  edits: {
    "forged token": (f, rng) =>
      floatForge(f, (out, map) => {
        const r = regionOf(map, "tokens");
        view(out).setUint32(r.start + 4 * rng.int((r.end - r.start) / 4), rng.pick([258, 2 ** 32 - 1]), true);
      }),
    "forged value": (f, rng) =>
      floatForge(f, (out, map) => {
        const r = rng.pick(map.regions.filter((x) => x.name.startsWith("layers[") || x.name === "logits"));
        const v = rng.pick([NaN, Infinity, -Infinity, 3e38, -0, 1e-45]);
        view(out).setFloat32(r.start + 4 * rng.int((r.end - r.start) / 4), v, true);
      }),
    "forged rng": (f) => floatForge(f, (out) => out.fill(0, 68, 84)),
    "forged engine": (f, rng) => floatForge(f, (out) => view(out).setUint32(84, rng.pick([0, 2, 3]), true)),
    "forged flags": (f, rng) => floatForge(f, (out) => view(out).setUint32(88, rng.pick([0, 2, 3]), true)),
    "forged model": (f, rng) => floatForge(f, (out) => void (out[12 + rng.int(32)] ^= 1 << rng.int(8))),
    "forged version": (f) => floatForge(f, (out) => view(out).setUint32(8, 1, true)),
    "forged position": (f, rng) =>
      floatForge(f, (out) => view(out).setUint32(64, rng.pick([0, 1, 3, 5, 64, 65, 2 ** 31]), true)),
  },
  readers: {
    decodeFloatSession: (p) =>
      Promise.resolve().then(() =>
        decodeFloatSession(new Uint8Array(readFileSync(p)), floatShape, "float", p)
      ),
    // restore, then what the restored session does: its saved bytes, one more step and a sampled token.
    restore: async (p) => {
      const s = floatEngineOnce().restore!(new Uint8Array(readFileSync(p)), p);
      const saved = s.save!();
      const next = s.position > 0 ? s.pick({ temperature: 1 }) : -1;
      const logits = s.position < FUZZ_CONFIG.max_position_embeddings ? await s.feed([7], "last") : null;
      return { saved, position: s.position, tokens: [...s.tokens], next, logits };
    },
  },
  refusal: (e) => e instanceof SessionError,
  reseal: sessionReseal,
  explain: (m) => m.kind.endsWith("+resealed") || m.kind.startsWith("edit forged") ? FORGED : undefined, // the CRC-32 covers every byte
};

/**
 * What scripts/tools/fuzz.ts attacks: an integer session beside the lut4 file it was saved on, and a
 * float session of the campaign's float model.
 */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [session, floatSession];

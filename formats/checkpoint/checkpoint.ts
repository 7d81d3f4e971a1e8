/**
 * The training checkpoint: a run, not a model. One file holds the model weights, the EMA copy of
 * them and the AdamW state; `<name>.config.toml` beside it holds the config the run trained under.
 * Exporters convert it; generate and serve refuse it. The spec is formats/checkpoint/checkpoint.md.
 *
 * @example
 * ```ts
 * import { readCheckpoint, writeCheckpoint } from "./checkpoint.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const config: ModelConfig, model: Tensor[], ema: Tensor[], m: Tensor[], v: Tensor[];
 * await writeCheckpoint("runs/a.ckpt", config, { step: 100, model, ema, adam: { m, v }, trainer: {} });
 * const run = await readCheckpoint("runs/a.ckpt", { sections: ["model"] });
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { open, readFile } from "node:fs/promises";
import { chunksAt, f32Bytes, readExact, writeAtomic } from "../io.ts";
import { JSON_REFUSALS, jsonHeader } from "../json.ts";
import {
  checkTensors,
  configToToml,
  type ModelConfig,
  paramShapes,
  readConfigFile,
} from "../../model/config.ts";
import { numel, type Tensor, type TensorSource } from "../../model/tensor.ts";
import { formatErrorClass, TENSOR_REFUSALS } from "../../model/error.ts";

/** `FERRYCK` then the format version byte. */
export const CHECKPOINT_MAGIC = new Uint8Array([0x46, 0x45, 0x52, 0x52, 0x59, 0x43, 0x4b, 0x01]);
const FIXED = 24;

/** The sections of a run file, in payload order. */
export const SECTIONS = ["model", "ema", "adam_m", "adam_v"] as const;
export type Section = typeof SECTIONS[number];

/** What a training run saves. */
export interface Checkpoint {
  step: number;
  model: Tensor[];
  ema?: Tensor[];
  adam?: { m: Tensor[]; v: Tensor[] };
  /** Free-form trainer state (data cursor, random state, hyperparameters, log). */
  trainer?: Record<string, unknown>;
}

/** Every rule a training checkpoint can break; formats/checkpoint/checkpoint.md ("Refusals") explains each. */
export const CHECKPOINT_REFUSALS = [
  ["Unreadable", "Truncated", "TrailingBytes", "BadMagic", "UnsupportedVersion", "ChecksumMismatch"],
  ["InvalidUtf8", "WrongType", "UnknownField", "MissingField", "InvalidValue"],
  ["InvalidName", "InvalidShape", "SizeMismatch", "MissingConfig", "NotAnExport"],
  JSON_REFUSALS,
  TENSOR_REFUSALS,
] as const;

/** A checkpoint that cannot be read: names the file, what is wrong and the rule. */
export class CheckpointError extends formatErrorClass(CHECKPOINT_REFUSALS) {}

/** The config snapshot path for a checkpoint: `a.ckpt` → `a.config.toml`. */
export function configPathFor(ckptPath: string): string {
  return ckptPath.replace(/\.ckpt$/, "") + ".config.toml";
}

/** True when the bytes start with a training checkpoint's magic (any version). */
export function isCheckpoint(head: Uint8Array): boolean {
  return head.length >= 7 && CHECKPOINT_MAGIC.subarray(0, 7).every((b, i) => head[i] === b);
}

/**
 * True when `path` is a file that starts with a training checkpoint's magic: the one sniff every
 * command uses to say "this is a run, not an export" (a missing or unreadable path is just false).
 */
export async function isCheckpointFile(path: string): Promise<boolean> {
  const fh = await open(path, "r").catch(() => undefined);
  if (!fh) return false;
  try {
    const head = new Uint8Array(8);
    const { bytesRead } = await fh.read(head, 0, 8, 0).catch(() => ({ bytesRead: 0 }));
    return isCheckpoint(head.subarray(0, bytesRead));
  } finally {
    await fh.close();
  }
}

/** Writes the checkpoint and its config snapshot, each to a temporary name renamed when complete. */
export async function writeCheckpoint(path: string, config: ModelConfig, ckpt: Checkpoint): Promise<void> {
  const parts: Array<[Section, Tensor[] | undefined]> = [
    ["model", ckpt.model],
    ["ema", ckpt.ema],
    ["adam_m", ckpt.adam?.m],
    ["adam_v", ckpt.adam?.v],
  ];
  const sections: Record<string, Array<{ name: string; dims: number[] }>> = {};
  const chunks: Uint8Array[] = [];
  let payloadLength = 0;
  for (const [section, tensors] of parts) {
    if (!tensors) continue;
    sections[section] = tensors.map((t) => ({ name: t.name, dims: t.dims }));
    for (const t of tensors) {
      const bytes = f32Bytes(t.data);
      chunks.push(bytes);
      payloadLength += bytes.length;
    }
  }
  const header = new TextEncoder().encode(JSON.stringify({
    format: 1,
    step: ckpt.step,
    sections,
    trainer: ckpt.trainer ?? {},
  }));
  let crc = crc32(header);
  for (const c of chunks) crc = crc32(c, crc);
  const fixed = new Uint8Array(FIXED);
  const dv = new DataView(fixed.buffer);
  fixed.set(CHECKPOINT_MAGIC);
  dv.setUint32(8, header.length, true);
  dv.setBigUint64(12, BigInt(payloadLength), true);
  dv.setUint32(20, crc >>> 0, true);
  await writeAtomic(path, [fixed, header, ...chunks]);
  await writeAtomic(configPathFor(path), [new TextEncoder().encode(configToToml(config))]);
}

/** What `readCheckpoint` gives back: the requested sections and the header. */
export interface LoadedCheckpoint {
  config: ModelConfig;
  step: number;
  model: Tensor[];
  ema?: Tensor[];
  adam?: { m: Tensor[]; v: Tensor[] };
  trainer: Record<string, unknown>;
}

/**
 * Reads a checkpoint after verifying its checksum, with the config from the snapshot beside it
 * (or `opts.config` when the caller already has one). Only the requested sections are decoded;
 * the default is every section.
 */
export async function readCheckpoint(
  path: string,
  opts: { sections?: Section[]; config?: ModelConfig } = {},
): Promise<LoadedCheckpoint> {
  const want = new Set(opts.sections ?? SECTIONS);
  const file = new Uint8Array(await readFile(path));
  const prefix = parsePrefix(file, file.length, path);
  const body = file.subarray(FIXED);
  checkCrc(crc32(body), prefix, path);
  const header = parseHeader(body.subarray(0, prefix.headerLength), path);
  const layout = sectionLayout(header, prefix, path);
  const config = opts.config ?? await readSnapshot(path);
  for (const section of SECTIONS) {
    if (layout[section]) checkSection(layout[section]!, section, config, configPathFor(path), path);
  }
  const decoded: Partial<Record<Section, Tensor[]>> = {};
  for (const section of SECTIONS) {
    if (!layout[section] || !want.has(section)) continue;
    decoded[section] = layout[section]!.map(({ name, dims, offset }) => {
      const data = new Float32Array(numel(dims));
      new Uint8Array(data.buffer).set(file.subarray(offset, offset + data.byteLength));
      return { name, dims, data };
    });
  }
  const out: LoadedCheckpoint = {
    config,
    step: header.step,
    model: decoded.model ?? [],
    trainer: header.trainer ?? {},
  };
  if (decoded.ema) out.ema = decoded.ema;
  if (decoded.adam_m && decoded.adam_v) out.adam = { m: decoded.adam_m, v: decoded.adam_v };
  return out;
}

/** A checkpoint's model section opened for streaming: tensors are read from the file on demand. */
export interface CheckpointModel {
  path: string;
  step: number;
  config: ModelConfig;
  /** The model's tensors in the config's canonical order. */
  tensors: TensorSource[];
  close(): Promise<void>;
}

/**
 * Opens a checkpoint's model section without loading the file: checks the prefix, verifies the
 * whole-file CRC a chunk at a time, and checks the model section against the shapes `config` implies
 * (default: the snapshot beside the file). The EMA copy and the optimizer state go through the
 * checksum and nowhere else, so memory does not grow with the model.
 *
 * @example
 * ```ts
 * import { openCheckpointModel } from "./checkpoint.ts";
 * const run = await openCheckpointModel("runs/a.ckpt");
 * try { for (const t of run.tensors) console.log(t.name, t.dims); } finally { await run.close(); }
 * ```
 */
export async function openCheckpointModel(
  path: string,
  opts: { config?: ModelConfig; configFrom?: string; onProgress?: (done: number, total: number) => void } =
    {},
): Promise<CheckpointModel> {
  const fh = await open(path, "r");
  const short = () =>
    new CheckpointError(path, "Unreadable", "size", "the file ended early (it changed while being read)");
  try {
    const size = (await fh.stat()).size;
    const prefix = parsePrefix(
      await readExact(fh, new Uint8Array(Math.min(size, FIXED)), 0, short),
      size,
      path,
    );
    const header = parseHeader(await readExact(fh, new Uint8Array(prefix.headerLength), FIXED, short), path);
    const config = opts.config ?? await readSnapshot(path);
    const configFrom = opts.configFrom ?? configPathFor(path);
    let crc = 0;
    for await (const chunk of chunksAt(fh, FIXED, size - FIXED, short, { onProgress: opts.onProgress })) {
      crc = crc32(chunk, crc);
    }
    checkCrc(crc, prefix, path);
    const model = sectionLayout(header, prefix, path).model!;
    checkSection(model, "model", config, configFrom, path);
    const found = new Map(model.map((e) => [e.name, e]));
    const tensors: TensorSource[] = paramShapes(config).map(({ name, dims }) => {
      const e = found.get(name)!;
      return {
        name,
        dims,
        read: async (start, count, scratch) => {
          const view = scratch.subarray(0, count);
          await readExact(
            fh,
            new Uint8Array(view.buffer, view.byteOffset, count * 4),
            e.offset + start * 4,
            short,
          );
          return view;
        },
      };
    });
    return { path, step: header.step, config, tensors, close: () => fh.close() };
  } catch (e) {
    await fh.close();
    throw e;
  }
}

// ---- the one parser both readers share ----

interface Prefix {
  headerLength: number;
  payloadLength: number;
  crc: number;
}

interface Header {
  format: number;
  step: number;
  sections: Partial<Record<Section, Array<{ name: string; dims: number[] }>>>;
  trainer: Record<string, unknown>;
}

function parsePrefix(b: Uint8Array, size: number, path: string): Prefix {
  if (size < FIXED) {
    throw new CheckpointError(path, "Truncated", "size", `${size} bytes is shorter than the 24-byte prefix`);
  }
  if (!isCheckpoint(b)) {
    throw new CheckpointError(path, "BadMagic", "magic", "not a ferry training checkpoint (magic FERRYCK)");
  }
  if (b[7] !== CHECKPOINT_MAGIC[7]) {
    throw new CheckpointError(
      path,
      "UnsupportedVersion",
      "version",
      `version ${b[7]} is not supported (expected ${CHECKPOINT_MAGIC[7]})`,
    );
  }
  const dv = new DataView(b.buffer, b.byteOffset, FIXED);
  const headerLength = dv.getUint32(8, true), payloadLength = dv.getBigUint64(12, true);
  if (BigInt(FIXED + headerLength) + payloadLength !== BigInt(size)) {
    throw new CheckpointError(
      path,
      BigInt(FIXED + headerLength) + payloadLength > BigInt(size) ? "Truncated" : "TrailingBytes",
      "length",
      `24 + header ${headerLength} + payload ${payloadLength} != file size ${size} (truncated or padded)`,
    );
  }
  return { headerLength, payloadLength: Number(payloadLength), crc: dv.getUint32(20, true) };
}

function checkCrc(computed: number, p: Prefix, path: string): void {
  if ((computed >>> 0) !== p.crc) {
    throw new CheckpointError(path, "ChecksumMismatch", "crc32", "checksum mismatch: the file is corrupt");
  }
}

// The header is JSON anyone can write with the CRC recomputed, so every field is checked for its type
// and range before it is used: no value from it reaches an allocation or a loop unchecked.
function parseHeader(bytes: Uint8Array, path: string): Header {
  const raw = jsonHeader(bytes, (code, why, detail) => {
    throw new CheckpointError(path, code, "header", why, detail);
  });
  if (!isPlainObject(raw)) {
    throw new CheckpointError(path, "WrongType", "header", `expected a JSON object, got ${show(raw)}`);
  }
  if (raw.format !== 1) {
    throw new CheckpointError(path, "UnsupportedVersion", "format", `expected 1, got ${show(raw.format)}`);
  }
  const step = raw.step;
  if (typeof step !== "number" || !Number.isSafeInteger(step) || step < 0) {
    throw new CheckpointError(
      path,
      "InvalidValue",
      "step",
      `expected a non-negative integer, got ${show(step)}`,
    );
  }
  const trainer = raw.trainer ?? {};
  if (!isPlainObject(trainer)) {
    throw new CheckpointError(path, "WrongType", "trainer", `expected an object, got ${show(trainer)}`);
  }
  const sections = raw.sections;
  if (!isPlainObject(sections)) {
    throw new CheckpointError(path, "WrongType", "sections", `expected an object, got ${show(sections)}`);
  }
  const out: Header["sections"] = {};
  for (const [key, list] of Object.entries(sections)) {
    if (!(SECTIONS as readonly string[]).includes(key)) {
      throw new CheckpointError(
        path,
        "UnknownField",
        `sections.${key}`,
        `unknown section (expected ${SECTIONS.join(", ")})`,
      );
    }
    if (!Array.isArray(list)) {
      throw new CheckpointError(path, "WrongType", `sections.${key}`, `expected a list, got ${show(list)}`);
    }
    const names = new Set<string>();
    out[key as Section] = list.map((entry, i) => {
      const where = `sections.${key}[${i}]`;
      if (!isPlainObject(entry)) {
        throw new CheckpointError(path, "WrongType", where, `expected {name, dims}, got ${show(entry)}`);
      }
      const { name, dims } = entry;
      if (typeof name !== "string" || name === "") {
        throw new CheckpointError(
          path,
          "InvalidName",
          `${where}.name`,
          `expected a non-empty string, got ${show(name)}`,
        );
      }
      if (names.has(name)) {
        throw new CheckpointError(path, "DuplicateTensor", `${where}.name`, `${name} appears twice`);
      }
      names.add(name);
      if (
        !Array.isArray(dims) || dims.length > MAX_DIMS ||
        !dims.every((d) => typeof d === "number" && Number.isSafeInteger(d) && d >= 0)
      ) {
        throw new CheckpointError(
          path,
          "InvalidShape",
          `${where}.dims`,
          `expected a list of at most ${MAX_DIMS} non-negative integers, got ${show(dims)}`,
        );
      }
      return { name, dims: dims as number[] };
    });
  }
  if (!out.model) throw new CheckpointError(path, "MissingField", "sections.model", "missing");
  return { format: 1, step, sections: out, trainer };
}

/** The most dims a checkpoint tensor has (every Qwen3 tensor has 1 or 2). */
const MAX_DIMS = 8;

/**
 * Where each section's tensors start in the file. Each tensor must fit in what is left of the payload
 * before the next is placed, so sizes cannot be shifted between tensors (one huge, one negative) to
 * keep the total right; the sections must then cover the payload exactly.
 */
function sectionLayout(h: Header, p: Prefix, path: string) {
  const out: Partial<Record<Section, Array<{ name: string; dims: number[]; offset: number }>>> = {};
  const end = FIXED + p.headerLength + p.payloadLength;
  let off = FIXED + p.headerLength;
  for (const section of SECTIONS) {
    const list = h.sections[section];
    if (!list) continue;
    out[section] = list.map(({ name, dims }, i) => {
      const bytes = dims.reduce((n, d) => n * d, 4);
      if (bytes > end - off) {
        throw new CheckpointError(
          path,
          "SizeMismatch",
          `sections.${section}[${i}].dims`,
          `[${dims}] takes ${bytes} bytes but only ${end - off} of the payload are left`,
        );
      }
      const e = { name, dims, offset: off };
      off += bytes;
      return e;
    });
  }
  if (off !== end) {
    throw new CheckpointError(
      path,
      "SizeMismatch",
      "payload",
      `the sections cover ${off - FIXED - p.headerLength} of ${p.payloadLength} payload bytes`,
    );
  }
  return out;
}

/** Checks one section against the shapes the config implies: the same names, each with the same dims. */
function checkSection(
  list: ReadonlyArray<{ name: string; dims: number[] }>,
  section: Section,
  config: ModelConfig,
  configFrom: string,
  path: string,
): void {
  const bad = checkTensors(config, list);
  if (!bad) return;
  const why = bad.kind === "dims"
    ? `${bad.found}, but ${configFrom} implies ${bad.expected}`
    : bad.kind === "missing"
    ? `missing; ${configFrom} implies it with ${bad.expected}`
    : bad.kind === "unknown"
    ? `unknown: ${configFrom} implies no tensor of this name`
    : bad.problem;
  throw new CheckpointError(path, bad.code, `${section}.${bad.tensor}`, why, bad);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function show(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? s.slice(0, 60) + "…" : s;
}

async function readSnapshot(path: string): Promise<ModelConfig> {
  try {
    return await readConfigFile(configPathFor(path));
  } catch (e) {
    if ((e as { code?: string }).code === "ENOENT") {
      throw new CheckpointError(
        path,
        "MissingConfig",
        "config",
        `the config snapshot ${configPathFor(path)} is missing`,
      );
    }
    throw e;
  }
}

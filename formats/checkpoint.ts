/**
 * The training checkpoint: a run, not a model. One file holds the model weights, the EMA copy of
 * them and the AdamW state; `<name>.config.toml` beside it holds the config the run trained under.
 * Exporters convert it; generate and serve refuse it. The spec is formats/checkpoint.md.
 *
 * @example
 * ```ts
 * await writeCheckpoint("runs/a.ckpt", { config, step: 100, model, ema, adam: { m, v }, trainer: {} });
 * const run = await readCheckpoint("runs/a.ckpt", { sections: ["model"] });
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { readFile } from "node:fs/promises";
import { f32Bytes, writeAtomic } from "./io.ts";
import { configToToml, type ModelConfig, readConfigFile } from "../model/config.ts";
import { numel, type Tensor } from "../model/tensor.ts";

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

/** A checkpoint that cannot be read: names the file and what is wrong. */
export class CheckpointError extends Error {
  constructor(readonly path: string, readonly field: string, message: string) {
    super(`${path}: ${field}: ${message}`);
    this.name = "CheckpointError";
  }
}

/** The config snapshot path for a checkpoint: `a.ckpt` → `a.config.toml`. */
export function configPathFor(ckptPath: string): string {
  return ckptPath.replace(/\.ckpt$/, "") + ".config.toml";
}

/** True when the bytes start with a training checkpoint's magic (any version). */
export function isCheckpoint(head: Uint8Array): boolean {
  return head.length >= 7 && CHECKPOINT_MAGIC.subarray(0, 7).every((b, i) => head[i] === b);
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
  if (file.length < FIXED) throw new CheckpointError(path, "size", `${file.length} bytes is shorter than the 24-byte prefix`);
  if (!isCheckpoint(file)) throw new CheckpointError(path, "magic", "not a ferry training checkpoint (magic FERRYCK)");
  if (file[7] !== 1) throw new CheckpointError(path, "version", `version ${file[7]} is not supported (expected 1)`);
  const dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
  const headerLength = dv.getUint32(8, true);
  const payloadLength = Number(dv.getBigUint64(12, true));
  if (FIXED + headerLength + payloadLength !== file.length) {
    throw new CheckpointError(
      path,
      "length",
      `24 + header ${headerLength} + payload ${payloadLength} != file size ${file.length} (truncated or padded)`,
    );
  }
  const body = file.subarray(FIXED);
  if ((crc32(body) >>> 0) !== dv.getUint32(20, true)) {
    throw new CheckpointError(path, "crc32", "checksum mismatch: the file is corrupt");
  }
  let header: { format: number; step: number; sections: Record<string, Array<{ name: string; dims: number[] }>>; trainer: Record<string, unknown> };
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body.subarray(0, headerLength)));
  } catch (e) {
    throw new CheckpointError(path, "header", `not valid UTF-8 JSON: ${(e as Error).message}`);
  }
  const config = opts.config ?? await readConfigFile(configPathFor(path)).catch((e) => {
    if ((e as { code?: string }).code === "ENOENT") {
      throw new CheckpointError(path, "config", `the config snapshot ${configPathFor(path)} is missing`);
    }
    throw e;
  });
  const out: LoadedCheckpoint = { config, step: header.step, model: [], trainer: header.trainer ?? {} };
  let off = FIXED + headerLength;
  const decoded: Partial<Record<Section, Tensor[]>> = {};
  for (const section of SECTIONS) {
    const list = header.sections[section];
    if (!list) continue;
    const tensors: Tensor[] = [];
    for (const { name, dims } of list) {
      const bytes = numel(dims) * 4;
      if (off + bytes > file.length) throw new CheckpointError(path, `${section}.${name}`, "runs past the payload");
      if (want.has(section)) {
        const data = new Float32Array(numel(dims));
        new Uint8Array(data.buffer).set(file.subarray(off, off + bytes));
        tensors.push({ name, dims, data });
      }
      off += bytes;
    }
    if (want.has(section)) decoded[section] = tensors;
  }
  if (off !== file.length) throw new CheckpointError(path, "payload", "tensors do not cover the payload exactly");
  if (!header.sections.model) throw new CheckpointError(path, "sections.model", "missing");
  out.model = decoded.model ?? [];
  if (decoded.ema) out.ema = decoded.ema;
  if (decoded.adam_m && decoded.adam_v) out.adam = { m: decoded.adam_m, v: decoded.adam_v };
  return out;
}

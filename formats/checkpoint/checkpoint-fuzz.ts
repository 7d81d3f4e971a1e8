/**
 * The fuzz hook of training checkpoints (formats/checkpoint/checkpoint.md; not an export format, so listed among
 * the fuzzer's other file kinds): a small valid checkpoint with every section, its byte map, its JSON
 * header as text with the lengths and the CRC-32 recomputed, and its three readers.
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook("formats/checkpoint/checkpoint-fuzz.ts"); // [the checkpoint target]
 * ```
 * @module
 */
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { concat, framedMap, FUZZ_CONFIG, type FuzzTarget, fuzzTensors, view } from "../fuzz-kit.ts";
import { CheckpointError, openCheckpointModel, readCheckpoint, writeCheckpoint } from "./checkpoint.ts";
import { initParams } from "../../model/init.ts";
import { materialize } from "../../model/tensor.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

function ckptJoin(header: Uint8Array, payload: Uint8Array, magic: Uint8Array): Uint8Array {
  const out = concat(magic, new Uint8Array(16), header, payload);
  view(out).setUint32(8, header.length, true);
  view(out).setBigUint64(12, BigInt(payload.length), true);
  view(out).setUint32(20, crc32(payload, crc32(header)) >>> 0, true);
  return out;
}

function ckptParts(f: Uint8Array) {
  const h = view(f).getUint32(8, true);
  return { magic: f.subarray(0, 8), header: f.subarray(24, 24 + h), payload: f.subarray(24 + h) };
}

const checkpoint: FuzzTarget = {
  name: "checkpoint",
  async make(dir) {
    const file = join(dir, "run.ckpt");
    const model = fuzzTensors();
    await writeCheckpoint(file, FUZZ_CONFIG, {
      step: 3,
      model,
      ema: initParams(FUZZ_CONFIG, 8),
      trainer: { lr: 0.001 },
    });
    return { file, target: file };
  },
  map: (f) => framedMap(f),
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

/** What scripts/tools/fuzz.ts attacks: one checkpoint file. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [checkpoint];

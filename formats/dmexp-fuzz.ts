/**
 * The fuzz hook of dmexp (formats/dmexp.md) for scripts/tools/fuzz.ts: a small valid file, its byte map
 * (prefix fields, header, payload, each `[[tensors]]` table), its TOML header as text with the lengths
 * and the payload CRC kept consistent, edits a forger would make (swapped tables, another dtype,
 * non-finite values), and the reseal of ferry's `header_crc32`.
 *
 * @example
 * ```ts
 * const { FUZZ_TARGETS } = await loadFuzzHook(dmexpFormat.fuzzHook); // [the dmexp target]
 * ```
 * @module
 */
import { join } from "node:path";
import { crc32 } from "node:zlib";
import {
  concat,
  FORGED,
  framedMap,
  FUZZ_CONFIG,
  type FuzzTarget,
  fuzzTensors,
  type Region,
  type Rng,
  view,
} from "./fuzz-kit.ts";
import { DmexpError, readDmexp, sealHeader, writeDmexp } from "./dmexp.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

function dmexpParts(f: Uint8Array) {
  const h = view(f).getUint32(8, true);
  return { prefix: f.subarray(0, 24), header: f.subarray(24, 24 + h), payload: f.subarray(24 + h) };
}

function dmexpJoin(prefix: Uint8Array, header: Uint8Array, payload: Uint8Array): Uint8Array {
  const out = concat(prefix, header, payload);
  view(out).setUint32(8, header.length, true);
  view(out).setBigUint64(12, BigInt(payload.length), true);
  view(out).setUint32(20, crc32(payload) >>> 0, true);
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

const dmexp: FuzzTarget = {
  name: "dmexp",
  async make(dir) {
    const file = join(dir, "m.dmexp");
    await writeDmexp(file, fuzzTensors(), FUZZ_CONFIG, { dtype: "bf16", source: "fuzz@step1", step: 1 });
    return { file, target: file };
  },
  map: (f) => framedMap(f, tableRegions),
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
      view(payload).setUint16(at, rng.pick([0x7f80, 0xff80, 0x7fc0, 0x7c00]), true); // bf16 ±inf, NaN; f16 inf
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

/** What scripts/tools/fuzz.ts attacks: one dmexp file. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [dmexp];

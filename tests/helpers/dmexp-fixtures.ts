// Shared by the dmexp tests: temporary folders, and dmexp files assembled by hand, byte by byte, with
// none of formats/dmexp/dmexp.ts, so the format's layout is checked against the spec and not against itself.
import { mkdtempSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32 } from "node:zlib";

/** The repository root, where the scripts run from. */
export const ROOT = new URL("../..", import.meta.url).pathname;

/** A fresh temporary folder and a function that removes it. */
export function tempDir(): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "ferry-dmexp-"));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A dmexp file from its parts, per formats/dmexp/dmexp.md: prefix, header text, payload. A header that carries
 * ferry's `header_crc32 = "…"` line gets it recomputed (as a forger would), unless `seal` is false.
 */
export function assemble(
  header: string | Uint8Array,
  payload: Uint8Array,
  opts: { version?: number; crc?: number; seal?: boolean } = {},
): Uint8Array {
  const h = typeof header === "string" ? new TextEncoder().encode(header) : header;
  const out = new Uint8Array(24 + h.length + payload.length);
  const dv = new DataView(out.buffer);
  out.set([0x44, 0x4d, 0x45, 0x58, 0x50, 0x52, 0x54, opts.version ?? 1]); // "DMEXPRT" + version
  dv.setUint32(8, h.length, true);
  dv.setBigUint64(12, BigInt(payload.length), true);
  dv.setUint32(20, opts.crc ?? crc32(payload) >>> 0, true);
  out.set(h, 24);
  out.set(payload, 24 + h.length);
  if (opts.seal !== false) sealByHand(out, h.length);
  return out;
}

// The spec's header checksum, computed here without formats/dmexp/dmexp.ts: CRC-32 of the prefix and the
// header with the checksum's 8 hex digits written as zeros, stored in place of those digits.
function sealByHand(file: Uint8Array, headerLength: number): void {
  const text = new TextDecoder().decode(file.subarray(24, 24 + headerLength));
  const m = /^header_crc32 = "[0-9a-f]{8}"$/m.exec(text);
  if (!m) return;
  const at = 24 + new TextEncoder().encode(text.slice(0, m.index + m[0].length - 9)).length;
  file.fill(0x30, at, at + 8);
  const crc = (crc32(file.subarray(0, 24 + headerLength)) >>> 0).toString(16).padStart(8, "0");
  file.set(new TextEncoder().encode(crc), at);
}

/** The parts of a file on disk. */
export async function disassemble(
  path: string,
): Promise<{ file: Uint8Array; header: string; payload: Uint8Array }> {
  const file = new Uint8Array(await readFile(path));
  const hLen = new DataView(file.buffer, file.byteOffset).getUint32(8, true);
  return {
    file,
    header: new TextDecoder().decode(file.subarray(24, 24 + hLen)),
    payload: file.subarray(24 + hLen),
  };
}

/** Writes a copy of `from` whose header text went through `edit`; the payload and its CRC are untouched. */
export async function withHeader(from: string, to: string, edit: (header: string) => string): Promise<void> {
  const { header, payload } = await disassemble(from);
  const edited = edit(header);
  if (edited === header) throw new Error("the edit changed nothing");
  await writeFile(to, assemble(edited, payload));
}

/**
 * A file as another implementation might write it: its own config (not a ferry config) in a
 * multi-line literal string, arrays spread over lines, integers for the dims, bf16 values.
 * Two tensors: `embed.weight` [3, 2] and `norm.weight` [2].
 */
export function foreignFile(): { bytes: Uint8Array; values: Record<string, number[]>; config: string } {
  const config = [
    "d_model = 2",
    "n_layers = 0",
    "vocab = 3",
    'arm = "engram"',
    "",
  ].join("\n");
  const header = `format = 1
dtype = "bf16"
source = "checkpoints/run7.ckpt@step20"
step = 20
num_params = 8
num_tensors = 2
flushed = 0
max_abs = 2.5
min_nonzero_abs = 0.125
config = '''
${config}'''

[[tensors]]
name = "embed.weight"
dims = [
    3,
    2,
]
overflowed = 0

[[tensors]]
name = "norm.weight"
dims = [2]
overflowed = 0
`;
  const values = { "embed.weight": [1, -2.5, 0.125, 0, 2, -1], "norm.weight": [1, 1] };
  const bits = new Uint16Array([...values["embed.weight"], ...values["norm.weight"]].map((x) => {
    const u = new Uint32Array(new Float32Array([x]).buffer)[0];
    return u >>> 16; // every value above is exact in bf16
  }));
  return { bytes: assemble(header, new Uint8Array(bits.buffer)), values, config };
}

// A minimal GGUF v3 reader, runtime built-ins only (spec: formats/gguf.md; the full reader: formats/gguf.ts).
// deno run -A readers/gguf.ts FILE [TENSOR...] (or bun): lists name<TAB>type<TAB>[dims], or TENSORs' values
import { readFileSync } from "node:fs";
const [file, ...wanted] = process.argv.slice(2);
if (!file) console.error("usage: readers/gguf.ts FILE [TENSOR...]");
if (!file) process.exit(2);
process.exitCode = 1; // a refusal until the last line; any error, ours or the runtime's, ends as one line:
process.on("uncaughtException", (e) => console.error(`${file}: ${String(e?.message).replace(/\s+/g, " ")}`));
const bytes = readFileSync(file);
let at = 0; // the read cursor: the header, the metadata and the tensor infos come in this order
function take(n: number): Buffer { // the next n bytes, never past the end of the file
  if (!(at + n <= bytes.length)) throw new Error(`cannot read ${n} bytes at offset ${at} of ${bytes.length}`);
  at += n;
  return bytes.subarray(at - n, at);
}
const u32 = () => take(4).readUInt32LE(0);
const u64 = () => Number(take(8).readBigUInt64LE(0)); // exact below 2^53; above that, far past any end
const str = () => new TextDecoder("utf-8", { fatal: true }).decode(take(u64())); // u64 length, then UTF-8
if (take(8).toString("latin1") !== "GGUF\x03\x00\x00\x00") throw new Error("not a GGUF version 3 file");
const [tensorCount, keyCount] = [u64(), u64()]; // each tensor and each key takes at least a byte of the file
if (tensorCount + keyCount > bytes.length) throw new Error("more tensors and keys than the file has bytes");
const SIZE = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8]; // bytes of metadata value types 0-12 (8: a string)
const skip = (type: number): unknown => (type === 9 ? items(u32()) : take(type === 8 ? u64() : SIZE[type]));
const items = (type: number) => Array.from({ length: Math.min(u64(), bytes.length) }, () => skip(type));
for (let i = 0; i < keyCount; i++) skip(u32(str())); // a key, its value's type and the value; alignment: 32
const f16 = (at: number) => new Float16Array(Uint8Array.of(bytes[at], bytes[at + 1]).buffer)[0];
const bf16 = (at: number) => Buffer.from([0, 0, bytes[at], bytes[at + 1]]).readFloatLE(0); // an f32's top half
const TYPES = new Map<number, [string, number, number, (at: number, j: number) => number]>([ // ggml id: name,
  [0, ["F32", 1, 4, (at) => bytes.readFloatLE(at)]], [1, ["F16", 1, 2, f16]], [30, ["BF16", 1, 2, bf16]],
  [8, ["Q8_0", 32, 34, (at, j) => f16(at) * bytes.readInt8(at + 2 + j)]], // values and bytes per block, value j
  [2, ["Q4_0", 32, 18, (at, j) => f16(at) * (((bytes[at + 2 + (j % 16)] >> (j < 16 ? 0 : 4)) & 15) - 8)]]]);
const dims = () => Array.from({ length: Math.min(u32(), 5) }, u64); // ne, innermost first; over 4 is refused
const infos = Array.from({ length: tensorCount }, () => ({ name: str(), ne: dims(), type: TYPES.get(u32()), at: u64() }));
const base = Math.ceil(at / 32) * 32; // the data begins at the next multiple of the alignment
process.exitCode = 0;

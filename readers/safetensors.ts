// A minimal safetensors reader on runtime built-ins only, to check ferry's full reader against and to
// show how small the format is. It trusts the file: formats/safetensors.ts is the one that validates.
// Usage: deno run -A readers/safetensors.ts FILE [TENSOR...]   (or: bun readers/safetensors.ts ...)
// Without TENSOR: one line per tensor, "name<TAB>dtype<TAB>[dims]". With TENSOR: that line, then the
// tensor's values on one line, space-separated, in row-major order.
import { readFileSync } from "node:fs";
import process from "node:process";

const [file, ...names] = process.argv.slice(2);
if (!file) console.error("usage: safetensors.ts FILE [TENSOR...]"), process.exit(2);
const bytes = readFileSync(file);
const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
const n = Number(view.getBigUint64(0, true)); // u64 LE header length, then the JSON header, then data
const header = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
const f16 = (h: number) => (h >> 15 ? -1 : 1) * ((h >> 10 & 31) === 31 ? (h & 1023 ? NaN : Infinity)
  : (h >> 10 & 31) === 0 ? (h & 1023) * 2 ** -24 : (1 + (h & 1023) / 1024) * 2 ** ((h >> 10 & 31) - 15));
const bf16 = (h: number) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]; // top half of an f32
// Element size in bytes and how to read one little-endian element at a byte offset.
const DTYPES: Record<string, [number, (o: number) => number | bigint]> = {
  F64: [8, (o) => view.getFloat64(o, true)], F32: [4, (o) => view.getFloat32(o, true)],
  F16: [2, (o) => f16(view.getUint16(o, true))], BF16: [2, (o) => bf16(view.getUint16(o, true))],
  I64: [8, (o) => view.getBigInt64(o, true)], I32: [4, (o) => view.getInt32(o, true)],
  I16: [2, (o) => view.getInt16(o, true)], I8: [1, (o) => view.getInt8(o)],
  U8: [1, (o) => view.getUint8(o)], BOOL: [1, (o) => view.getUint8(o)],
};
const entries = Object.entries(header).filter(([k]) => k !== "__metadata__") as [string, any][];
entries.sort((a, b) => a[1].data_offsets[0] - b[1].data_offsets[0]); // file order
const line = (name: string, e: any) => `${name}\t${e.dtype}\t[${e.shape.join(",")}]`;
if (names.length === 0) for (const [name, e] of entries) console.log(line(name, e));
for (const name of names) {
  const e = header[name];
  if (!e || name === "__metadata__") console.error(`${file}: no tensor named ${name}`), process.exit(1);
  const [size, get] = DTYPES[e.dtype] ?? (console.error(`${file}: ${name}: unknown dtype ${e.dtype}`), process.exit(1));
  const values: string[] = [];
  for (let o = 8 + n + e.data_offsets[0]; o < 8 + n + e.data_offsets[1]; o += size) values.push(String(get(o)));
  console.log(line(name, e) + "\n" + values.join(" "));
}

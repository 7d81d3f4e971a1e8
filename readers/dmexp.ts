// A dmexp reader that needs only the runtime (spec: formats/dmexp.md): checks the prefix and CRC, lists
// tensors and dims, prints named tensors as f32. deno run -A | bun readers/dmexp.ts FILE [TENSOR...]
import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import process from "node:process";
const [path, ...wanted] = process.argv.slice(2);
const die = (why: string): never => (console.error(`${path ?? "dmexp"}: ${why}`), process.exit(path ? 1 : 2));
if (!path) die("usage: readers/dmexp.ts FILE [TENSOR...]");
const file = readFileSync(path), dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
if (file.length < 24 || String.fromCharCode(...file.subarray(0, 7)) !== "DMEXPRT") die("not a dmexp file");
if (file[7] !== 1) die(`format version ${file[7]}, this reader knows 1`);
const start = 24 + dv.getUint32(8, true), payload = Number(dv.getBigUint64(12, true));
if (start + payload !== file.length) die(`truncated or padded: ${file.length} bytes, not ${start + payload}`);
if (crc32(file.subarray(start)) >>> 0 !== dv.getUint32(20, true)) die("CRC-32 mismatch: corrupt payload");
// The header is TOML; the dtype and each [[tensors]] table's name and dims are plain lines in it.
const header = new TextDecoder("utf-8", { fatal: true }).decode(file.subarray(24, start));
const dtype = /^dtype\s*=\s*"(\w+)"/m.exec(header)?.[1] ?? die("no dtype in the header");
const size = ({ f32: 4, f16: 2, bf16: 2 } as Record<string, number>)[dtype] ?? die(`unknown dtype ${dtype}`);
let at = start;
const tensors = header.split(/^\[\[tensors\]\]\s*$/m).slice(1).map((table) => {
  const name = /^name\s*=\s*"([^"]*)"/m.exec(table)?.[1] ?? die("a tensor without a name");
  const list = /^dims\s*=\s*\[([^\]]*)\]/m.exec(table)?.[1] ?? die(`${name} has no dims`);
  const dims = list.split(",").filter((d) => d.trim()).map(Number), count = dims.reduce((a, b) => a * b, 1);
  return { name, dims, count, from: file.byteOffset + (at += count * size) - count * size };
});
if (at !== file.length) die(`the tensors take ${at - start} bytes, the payload has ${payload}`);
// Widening is exact: f32 as stored, bf16 as the top half of an f32, f16 by its definition.
const f16 = (h: number, e = (h >> 10) & 31, m = h & 0x3ff, s = h & 0x8000 ? -1 : 1) =>
  e === 31 ? (m ? NaN : s * Infinity) : s * (e ? 1024 + m : 2 * m) * 2 ** (e - 25);
const widen: Record<string, (raw: ArrayBuffer) => Float32Array> = {
  f32: (raw) => new Float32Array(raw),
  f16: (raw) => Float32Array.from(new Uint16Array(raw), (h) => f16(h)),
  bf16: (raw) => new Float32Array(Uint32Array.from(new Uint16Array(raw), (b) => b << 16).buffer),
};
console.log(`${path}: dmexp 1, ${dtype}, ${tensors.length} tensors, ${payload / size} values, crc32 ok`);
for (const t of tensors) console.log(`${t.name} [${t.dims.join(", ")}]`);
for (const name of wanted) {
  const t = tensors.find((x) => x.name === name) ?? die(`no tensor named ${name}`);
  console.log(`${name} = [${widen[dtype](file.buffer.slice(t.from, t.from + t.count * size))}]`); // an aligned copy
}

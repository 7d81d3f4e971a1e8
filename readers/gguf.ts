// Minimal GGUF v3 reader, built-ins only, trusting the file (formats/gguf.ts validates): deno run -A readers/gguf.ts
// FILE [TENSOR...] (or bun). Lists "name<TAB>type<TAB>[dims]" (outermost first); per TENSOR also its f32 values.
import { readFileSync } from "node:fs";
import process from "node:process";
const [file, ...names] = process.argv.slice(2);
if (!file) console.error("usage: gguf.ts FILE [TENSOR...]"), process.exit(2);
const die = (msg: string): never => (console.error(`${file}: ${msg}`), process.exit(1));
const buf = readFileSync(file), dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
let p = 0, align = 32;
const u32 = () => (p += 4, dv.getUint32(p - 4, true)), u64 = () => (p += 8, Number(dv.getBigUint64(p - 8, true)));
const str = () => new TextDecoder().decode(buf.subarray(p + 8, (p += 8 + Number(dv.getBigUint64(p, true)))));
const SIZE = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8]; // bytes of value types 0..12 (8 string, 9 array)
function value(t: number): number { // skips a metadata value; returns it when it is a u32 (general.alignment)
  if (t === 8) str();
  else if (t === 9) for (let e = u32(), n = u64(); n > 0; n--) value(e);
  else if (t in SIZE) return t === 4 ? u32() : (p += SIZE[t], 0);
  else die(`unknown metadata value type ${t}`);
  return 0;
}
if (u32() !== 0x46554747 || u32() !== 3) die("not a GGUF v3 file");
const nTensors = u64(), nKv = u64();
for (let i = 0; i < nKv; i++) if (str() === "general.alignment") align = value(u32()); else value(u32());
const TYPES: Record<number, [string, number, number]> = { // ggml id: name, block elements, block bytes
  0: ["F32", 1, 4], 1: ["F16", 1, 2], 30: ["BF16", 1, 2], 8: ["Q8_0", 32, 34], 2: ["Q4_0", 32, 18] };
const infos = Array.from({ length: nTensors }, () => ({ name: str(), ne: Array.from({ length: u32() }, u64), type: u32(), off: u64() }));
const base = Math.ceil(p / align) * align, bf16 = (o: number) => new Float32Array(new Uint32Array([dv.getUint16(o, true) << 16]).buffer)[0];
const line = (t: typeof infos[0]) => `${t.name}\t${TYPES[t.type]?.[0] ?? `type ${t.type}`}\t[${[...t.ne].reverse()}]`;
if (names.length === 0) for (const t of infos) console.log(line(t));
for (const name of names) {
  const t = infos.find((x) => x.name === name) ?? die(`no tensor named ${name}`);
  const [type, bs, bb] = TYPES[t.type] ?? die(`${name}: ggml type ${t.type} is not decoded here`);
  const o = base + t.off, out = new Float32Array(t.ne.reduce((a, b) => a * b, 1));
  for (let i = 0; i < out.length; i++) {
    const blk = o + Math.floor(i / bs) * bb, j = i % bs, d = bs > 1 ? dv.getFloat16(blk, true) : 0;
    out[i] = type === "F32" ? dv.getFloat32(o + 4 * i, true) : type === "F16" ? dv.getFloat16(o + 2 * i, true)
      : type === "BF16" ? bf16(o + 2 * i) : type === "Q8_0" ? dv.getInt8(blk + 2 + j) * d
      : (((dv.getUint8(blk + 2 + (j % 16)) >> (j < 16 ? 0 : 4)) & 15) - 8) * d; // Q4_0: low nibbles first
  }
  console.log(`${line(t)}\n${[...out].map((x) => (Object.is(x, -0) ? "-0" : x)).join(" ")}`); // -0 kept visible
}

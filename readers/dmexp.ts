// A minimal dmexp reader on built-ins (formats/dmexp/dmexp.md): lists name<TAB>dtype<TAB>[dims], or values
import { readFileSync, statSync } from "node:fs";
import { crc32 } from "node:zlib";
const [file, ...wanted] = process.argv.slice(2);
if (!file || file.startsWith("-")) console.error("usage: readers/dmexp.ts FILE [TENSOR...]"); // --help too
if (!file || file.startsWith("-")) process.exit(2);
process.exitCode = 1; // a refusal until the last line; any error, ours or the runtime's, ends as one line:
process.on("uncaughtException", (e) => console.error(`${file}: ${String(e?.message).replace(/\s+/g, " ")}`));
if (statSync(file).isDirectory()) throw new Error("is a folder, expected a file");
const bytes = readFileSync(file);
const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
const version = bytes.length < 24 || bytes.toString("latin1", 0, 7) !== "DMEXPRT" ? 0 : bytes[7]; // 1 or 2
if (version !== 1 && version !== 2) throw new Error("not dmexp version 1 or 2");
const start = 24 + view.getUint32(8, true); // the 24-byte prefix, H bytes of TOML header, then the payload
const end = start + Number(view.getBigUint64(12, true)); // v2: a tokenizer section (16+ bytes) follows
const section = bytes.length - end; // this reader skips the section: it holds no tensor
if (version === 1 ? section !== 0 : section < 16) throw new Error("size is not 24 + H + P (+ a section)");
if (crc32(bytes.subarray(start, end)) !== bytes.readUInt32LE(20)) throw new Error("payload CRC-32 mismatch");
const header = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(24, start));
const dtype = /^dtype\s*=\s*"(f32|f16|bf16)"/m.exec(header)?.[1]; // the header is TOML; one line of it
if (!dtype) throw new Error('the header has no line dtype = "f32", "f16" or "bf16"');
const size = dtype === "f32" ? 4 : 2; // bytes per value; a bf16 is the top half of an f32
const read = (at: number) => dtype === "f32" ? view.getFloat32(at, true) : dtype === "f16"
  ? view.getFloat16(at, true) : Buffer.from([0, 0, bytes[at], bytes[at + 1]]).readFloatLE(0);
const TABLE = /^\[\[tensors\]\]\s*^name\s*=\s*"([^"\n]*)"\s*^dims\s*=\s*\[([\d\s,]*)\]/gm; // one per tensor
const tensors = [...header.matchAll(TABLE)].map(([, name, list]) => {
  const dims = list.split(",").filter((d) => d.trim() !== "").map(Number);
  return { line: `${name}\t${dtype}\t[${dims.join(",")}]`, name, count: dims.reduce((n, d) => n * d, 1) };
});
const before = (i: number) => tensors.slice(0, i).reduce((sum, t) => sum + t.count, 0); // values before i
if (start + before(tensors.length) * size !== end) throw new Error("the dims do not add up to P");
for (const w of wanted) if (!tensors.some((t) => t.name === w)) throw new Error(`no tensor named ${w}`);
if (wanted.length === 0) for (const t of tensors) console.log(t.line);
if (wanted.length === 0 && section > 0) console.log(`${file}: ${section} bytes of tokenizer`);  // v2 only
for (const t of tensors.filter((t) => wanted.includes(t.name))) { // in file order, like the listing
  const begin = start + before(tensors.indexOf(t)) * size; // the values follow one another in header order
  const values = Array.from({ length: t.count }, (_, j) => read(begin + j * size));
  console.log(`${t.line}\n${values.map((x) => (Object.is(x, -0) ? "-0" : x)).join(" ")}`);
}
process.exitCode = 0;

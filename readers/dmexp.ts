// A minimal dmexp reader, runtime built-ins only (spec: formats/dmexp.md; the full reader: formats/dmexp.ts).
// deno run -A readers/dmexp.ts FILE [TENSOR...] (or bun): lists name<TAB>dtype<TAB>[dims], or TENSORs' values
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
if (bytes.length < 24 || bytes.toString("latin1", 0, 8) !== "DMEXPRT\x01") throw new Error("not dmexp v1");
const start = 24 + view.getUint32(8, true); // the 24-byte prefix, H bytes of TOML header, then the payload
if (start + Number(view.getBigUint64(12, true)) !== bytes.length) throw new Error("size is not 24 + H + P");
if (crc32(bytes.subarray(start)) !== view.getUint32(20, true)) throw new Error("payload CRC-32 mismatch");
const header = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(24, start));
const DTYPES = new Map<string, [number, (at: number) => number]>([ // bytes per value, and how to read one
  ["f32", [4, (at) => view.getFloat32(at, true)]],
  ["f16", [2, (at) => view.getFloat16(at, true)]],
  ["bf16", [2, (at) => Buffer.from([0, 0, bytes[at], bytes[at + 1]]).readFloatLE(0)]], // an f32's top half
]);
const dtype = /^dtype\s*=\s*"(f32|f16|bf16)"/m.exec(header)?.[1]; // the header is TOML; one line of it
if (!dtype) throw new Error('the header has no line dtype = "f32", "f16" or "bf16"');
const [size, read] = DTYPES.get(dtype)!;
const TABLE = /^\[\[tensors\]\]\s*^name\s*=\s*"([^"\n]*)"\s*^dims\s*=\s*\[([\d\s,]*)\]/gm; // one per tensor
const tensors = [...header.matchAll(TABLE)].map(([, name, list]) => {
  const dims = list.split(",").filter((d) => d.trim() !== "").map(Number);
  return { line: `${name}\t${dtype}\t[${dims.join(",")}]`, name, count: dims.reduce((n, d) => n * d, 1) };
});
const before = (i: number) => tensors.slice(0, i).reduce((sum, t) => sum + t.count, 0); // values before i
if (start + before(tensors.length) * size !== bytes.length) throw new Error("the dims do not add up to P");
for (const w of wanted) if (!tensors.some((t) => t.name === w)) throw new Error(`no tensor named ${w}`);
if (wanted.length === 0) for (const t of tensors) console.log(t.line);
for (const t of tensors.filter((t) => wanted.includes(t.name))) { // in file order, like the listing
  const begin = start + before(tensors.indexOf(t)) * size; // the values follow one another in header order
  const values = Array.from({ length: t.count }, (_, j) => read(begin + j * size));
  console.log(`${t.line}\n${values.map((x) => (Object.is(x, -0) ? "-0" : x)).join(" ")}`);
}
process.exitCode = 0;

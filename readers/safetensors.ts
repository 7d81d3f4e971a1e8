// A minimal safetensors reader on built-ins, as strict as the full one (formats/safetensors/safetensors.md).
// deno run -A readers/safetensors.ts FILE [TENSOR...] (or bun): lists name<TAB>dtype<TAB>[dims], or values
import { readFileSync, statSync } from "node:fs";
const [file, ...wanted] = process.argv.slice(2);
if (!file || file.startsWith("-")) console.error("usage: readers/safetensors.ts FILE [TENSOR...]"); // --help
if (!file || file.startsWith("-")) process.exit(2);
process.exitCode = 1; // a refusal until the last line; any error, ours or the runtime's, ends as one line:
process.on("uncaughtException", (e) => console.error(`${file}: ${String(e?.message).replace(/\s+/g, " ")}`));
const path = statSync(file).isDirectory() ? `${file}/model.safetensors` : file; // a Hugging Face folder
const bytes = new Uint8Array(readFileSync(path)); // a copy, at offset 0 of its own buffer
const view = new DataView(bytes.buffer);
const n = bytes.length < 8 ? Infinity : Number(view.getBigUint64(0, true)); // the header length, u64 LE
if (8 + n > bytes.length) throw new Error("the header length (the first 8 bytes) runs past the end");
const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes.subarray(8, 8 + n));
const header = JSON.parse(text); // a byte-order mark is kept, so refused, as by the full reader
if (typeof header !== "object" || !header || Array.isArray(header)) throw new Error("header: not an object");
delete header.__metadata__; // an optional string-to-string map, not a tensor
const DTYPES = new Map<string, [number, (at: number) => number]>([ // bytes per value, and how to read one
  ["F32", [4, (at) => view.getFloat32(at, true)]],
  ["F16", [2, (at) => view.getFloat16(at, true)]],
  ["BF16", [2, (at) => new Float32Array(Uint32Array.of(view.getUint16(at, true) << 16).buffer)[0]]],
]);
const naturals = (list: any) => Array.isArray(list) && list.every((x) => Number.isSafeInteger(x) && x >= 0);
const tensors = Object.entries(header).map(([name, t]: [string, any]) => {
  const [size, read] = DTYPES.get(t?.dtype) ?? [0, Number];
  if (!size) throw new Error(`${name}: the dtype is not F32, F16 or BF16`);
  if (!naturals(t.shape) || !naturals(t.data_offsets)) throw new Error(`${name}: bad shape or offsets`);
  const [begin, end] = t.data_offsets.map((offset: number) => 8 + n + offset); // from the data's start
  const count = t.shape.reduce((a: number, b: number) => a * b, 1);
  if (begin + count * size !== end || end > bytes.length) throw new Error(`${name}: bad data_offsets`);
  return { line: `${name}\t${t.dtype}\t[${t.shape.join(",")}]`, name, begin, count, size, read };
}).sort((a, b) => a.begin - b.begin); // in file order
const missing = wanted.find((name) => !tensors.some((t) => t.name === name)); // checked before any output
if (missing !== undefined) throw new Error(`no tensor named ${missing}`);
if (wanted.length === 0) for (const t of tensors) console.log(t.line);
for (const t of tensors.filter((t) => wanted.includes(t.name))) { // in file order, like the listing
  const values = Array.from({ length: t.count }, (_, i) => t.read(t.begin + i * t.size));
  console.log(`${t.line}\n${values.map((x) => (Object.is(x, -0) ? "-0" : x)).join(" ")}`);
}
process.exitCode = 0;

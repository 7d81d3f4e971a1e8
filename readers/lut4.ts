import { readFileSync, statSync } from "node:fs"; // a lut4 reader on built-ins only (formats/lut4/lut4.md)
import { crc32 } from "node:zlib";
const [path, ...wanted] = process.argv.slice(2);
function die(why: string, code = 1): never { // a refusal names the file; a usage error (code 2) does not
  console.error(code === 2 ? why : `${path}: ${why}`);
  process.exit(code);
}
if (!path || path.startsWith("-")) die("usage: readers/lut4.ts FILE [TENSOR...]", 2); // --help too
process.on("uncaughtException", (e) => die(e.message)); // an unreadable file or bad JSON is a refusal too
const file = statSync(path).isDirectory() ? die("is a folder, expected a file") : readFileSync(path);
if (file.length < 16 || file.toString("latin1", 0, 8) !== "UORLUT01") die("not a UORLUT01 file");
const start = 16 + Number(file.readBigUInt64LE(8));
const header = JSON.parse(file.toString("utf8", 16, start)); // checked: framing, data CRC-32, spans
if (!/^ferry\.lut-qwen3\/[12]$/.test(header.schema)) die(`unknown schema ${header.schema}`);
const data = file.subarray(start, file.length - (header.tokenizer?.bytes ?? 0)); // then /2: the tokenizer
const crcOk = data.length === header.data_bytes && crc32(data) >>> 0 === header.data_crc32;
if (start % 64 || !crcOk) die("the data section is misaligned, truncated or fails its CRC-32");
function bytesOf(s: { offset: number; bytes: number }, n: number): Buffer {
  if (s.bytes !== n || s.offset % 64 !== 0 || s.offset < 0 || s.offset + n > data.length) die("bad span");
  return data.subarray(s.offset, s.offset + n);
}
const list: { name: string; kind: string; dims: number[]; count: number; value(k: number): number }[] = [];
for (const m of header.matrices) { // w = (u - 8) * (16 + m) * 2^(exp_base + de - 4); scale = de m
  const [nib, sc] = [bytesOf(m.nibbles, (m.rows * m.cols) / 2), bytesOf(m.scales, (m.rows * m.cols) / 32)];
  const q = (k: number) => ((nib[k >> 1] >> (4 * (k & 1))) & 15) - 8;
  const value = (k: number) => q(k) * (16 + (sc[k >> 5] & 15)) * 2 ** (m.exp_base + (sc[k >> 5] >> 4) - 4);
  list.push({ name: m.name, kind: "q4", dims: [m.rows, m.cols], count: 2 * nib.length, value });
}
for (const t of header.tables) { // an entry is a little-endian i16 or i32 meaning entry * 2^exp
  const size = ({ i16: 2, i32: 4 } as Record<string, number>)[t.kind]; // another kind: NaN, a bad span
  const raw = bytesOf(t.span, t.length * size);
  const value = (k: number) => (size === 2 ? raw.readInt16LE(2 * k) : raw.readInt32LE(4 * k)) * 2 ** t.exp;
  list.push({ name: t.name, kind: t.kind, dims: [t.length], count: t.length, value });
}
for (const name of wanted.length ? wanted : list.map((t) => t.name)) { // -0 never occurs: q = 0 gives +0
  const t = list.find((x) => x.name === name) ?? die(`no matrix or table named ${name}`);
  console.log(`${t.name}\t${t.kind}\t[${t.dims.join(", ")}]`);
  if (wanted.length) console.log(Array.from({ length: t.count }, (_, k) => t.value(k)).join(" "));
}
if (!wanted.length && header.tokenizer) console.log(`${path}: ${header.tokenizer.bytes} bytes of tokenizer`);

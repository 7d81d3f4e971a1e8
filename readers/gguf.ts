import { readFileSync, statSync } from "node:fs"; // a minimal GGUF v3 reader (formats/gguf/gguf.md)
const [file, ...wanted] = process.argv.slice(2); // deno run -A readers/gguf.ts FILE [TENSOR...], or bun
if (!file || file.startsWith("-")) console.error("usage: readers/gguf.ts FILE [TENSOR...]"); // --help too
if (!file || file.startsWith("-")) process.exit(2);
process.exitCode = 1; // a refusal until the last line; any error, ours or the runtime's, ends as one line:
process.on("uncaughtException", (e) => console.error(`${file}: ${String(e?.message).replace(/\s+/g, " ")}`));
if (statSync(file).isDirectory()) throw new Error("is a folder, expected a file");
const bytes = readFileSync(file); // its read methods refuse offsets past the end ("out of range")
let at = 0; // the read cursor: the header, the metadata, the tensor infos; then the data, 32-byte aligned
const take = (n: number): Buffer => bytes.subarray(at, (at += n)); // the next n bytes; the cursor moves past
const u32 = () => take(4).readUInt32LE(0), u64 = () => Number(take(8).readBigUInt64LE(0));
const str = () => new TextDecoder("utf-8", { fatal: true }).decode(take(u64())); // u64 length, then UTF-8
if (take(8).toString("latin1") !== "GGUF\x03\x00\x00\x00") throw new Error("not a GGUF version 3 file");
const n = Math.min(u64(), bytes.length); // tensors (u64s are exact below 2^53; no count can pass the size)
const SIZE = [1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8]; // bytes of metadata value types 0-12 (8: a string)
const skip = (type: number): unknown => (type === 9 ? items(u32()) : take(type === 8 ? u64() : SIZE[type]));
const items = (type: number) => Array.from({ length: Math.min(u64(), bytes.length) }, () => skip(type));
Array.from({ length: Math.min(u64(), bytes.length) }, () => [str(), skip(u32())]); // keys, each with a value
const f16 = (at: number) => new Float16Array(Uint8Array.of(bytes[at], bytes[at + 1]).buffer)[0];
const bf16 = (at: number) => Buffer.from([0, 0, bytes[at], bytes[at + 1]]).readFloatLE(0); // f32's top half
const unread = (type: string) => (): number => { throw new Error(`${type} is read by formats/gguf/`); };
const TYPES = new Map<number, [string, number, number, (at: number, j: number) => number]>([ // ggml id: name,
  [0, ["F32", 1, 4, (at) => bytes.readFloatLE(at)]], [1, ["F16", 1, 2, f16]], [30, ["BF16", 1, 2, bf16]],
  [8, ["Q8_0", 32, 34, (at, j) => f16(at) * bytes.readInt8(at + 2 + j)]], // values and bytes per block, value
  [2, ["Q4_0", 32, 18, (at, j) => f16(at) * (((bytes[at + 2 + (j % 16)] >> (j < 16 ? 0 : 4)) & 15) - 8)]],
  [6, ["Q5_0", 32, 22, unread("Q5_0")]], [20, ["IQ4_NL", 32, 18, unread("IQ4_NL")]], // these four: listed,
  [12, ["Q4_K", 256, 144, unread("Q4_K")]], [14, ["Q6_K", 256, 210, unread("Q6_K")]]]); // dims and type only
const dims = () => Array.from({ length: Math.min(u32(), 5) }, u64); // ne, innermost first; a fifth is refused
const raw = Array.from({ length: n }, () => ({ name: str(), ne: dims(), type: TYPES.get(u32()), at: u64() }));
const list = raw.map(({ name, ne, type: [type, per, size, read] = ["?", NaN, NaN, f16], at: offset }) => ({
  line: `${name}\t${type}\t[${ne.toReversed().join(",")}]`, name, per, read, // j of the block at `at`
  count: ne.length > 4 || ne[0] % per ? NaN : ne.reduce((a, b) => a * b, 1), // NaN: refused below
  pos: (i: number) => Math.ceil(at / 32) * 32 + offset + Math.floor(i / per) * size })); // value i's block
for (const t of list) if (!(t.pos(t.count) <= bytes.length)) throw new Error(`${t.name}: bad type/dims/data`);
for (const name of wanted) if (!list.some((t) => t.name === name)) throw new Error(`no tensor named ${name}`);
const show = (x: number) => (Object.is(x, -0) ? "-0" : String(x)); // String(-0) is "0"
const values = (t: typeof list[0]) => Array.from({ length: t.count }, (_, i) => t.read(t.pos(i), i % t.per));
if (wanted.length === 0) for (const t of list) console.log(t.line);
for (const t of list) if (wanted.includes(t.name)) console.log(`${t.line}\n${values(t).map(show).join(" ")}`);
process.exitCode = 0;

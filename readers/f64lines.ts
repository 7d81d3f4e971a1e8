// A minimal f64lines reader on runtime built-ins, as strict as the full one (formats/f64lines/f64lines.md).
// deno run -A readers/f64lines.ts FILE [TENSOR...] (or bun): lists name<TAB>f64<TAB>[length], or the values
import { readFileSync, statSync } from "node:fs";
const [file, ...wanted] = process.argv.slice(2);
if (!file || file.startsWith("-")) console.error("usage: readers/f64lines.ts FILE [TENSOR...]"); // --help too
if (!file || file.startsWith("-")) process.exit(2);
process.exitCode = 1; // a refusal until the last line; any error, ours or the runtime's, ends as one line:
process.on("uncaughtException", (e) => console.error(`${file}: ${String(e?.message).replace(/\s+/g, " ")}`));
const TOKEN = /^(-(?!nan))?(?:(0|inf|nan)|([1-9]\d{0,18})(?:p(-?[1-9]\d{0,3}))?)$/; // see the spec's Tokens
function value(token: string): string { // one spelling per value; near misses (1p0, 007, 2p1) are refused
  const [, minus, word, digits, exp] = TOKEN.exec(token) ?? [];
  const m = Number(digits ?? 0);
  const x = m * 2 ** Number(exp ?? 0); // exact whenever m < 2^53 and the result is a float64
  const integer = digits !== undefined && !exp && x < 2 ** 62 && BigInt(x) === BigInt(digits);
  const pow = exp && m % 2 === 1 && m < 2 ** 53 && x > 0 && x < Infinity && (exp[0] === "-" || x >= 2 ** 62);
  if (!word && !integer && !pow) throw new Error(`bad value '${token.slice(0, 40)}'`);
  return (minus ? "-" : "") + String(word === "nan" ? NaN : word === "inf" ? Infinity : x); // -0 prints "-0"
}
function fnv1a32(text: string): number { // FNV-1a 64 of the text's UTF-8, folded to 32 bits as high ^ low
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(text)) h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  return Number((h >> 32n) ^ (h & 0xffffffffn));
}
if (statSync(file).isDirectory()) throw new Error("is a folder, expected a file");
const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(readFileSync(file));
const found = /^((?:[^\n]*\n)*)#fnv1a32=([0-9a-f]{8})\r?\n(?:\r?\n)*$/.exec(text); // data lines, the checksum
if (!found) throw new Error("the last line that is not blank is not #fnv1a32=<8 hex digits> ending in \\n");
const lines = found[1].split("\n").map((line) => line.replace(/\r$/, "")).filter((line) => line !== "");
if (fnv1a32(lines.map((l) => `${l}\n`).join("")) !== parseInt(found[2], 16)) throw new Error("bad checksum");
const arrays = lines.map((line) => {
  const [, name, length, field] = /^v1\|([^|\r]*)\|(0|[1-9]\d{0,14})\|([^|]*)$/.exec(line) ?? [];
  if (name === undefined) throw new Error(`not "v1|name|length|values": ${line.slice(0, 40)}`);
  const values = field === "" ? [] : field.split(",").map(value);
  if (values.length !== Number(length)) throw new Error(`${name}: ${values.length} values, not ${length}`);
  return { line: `${name}\tf64\t[${length}]`, name, values: values.join(" ") };
});
for (const w of wanted) if (!arrays.some((a) => a.name === w)) throw new Error(`no tensor named ${w}`);
if (wanted.length === 0) for (const a of arrays) console.log(a.line);
for (const a of arrays) if (wanted.includes(a.name)) console.log(`${a.line}\n${a.values}`); // in file order
process.exitCode = 0;

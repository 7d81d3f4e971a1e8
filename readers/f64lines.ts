// Minimal f64lines reader (formats/f64lines.md), built-ins only: bun readers/f64lines.ts FILE, or deno run -A
import assert from "node:assert";
import { readFileSync } from "node:fs";
function fnv32(bytes: Uint8Array, h = 0xcbf29ce4, l = 0x84222325): number { // FNV-1a 64 as two exact halves
  for (const b of bytes) {
    h = (h * 435 + (((l ^= b) >>> 0) * 435 / 2 ** 32 | 0) + (l << 8)) >>> 0, l = Math.imul(l, 435);
  }
  return (h ^ l) >>> 0; // the prime is 2^40 + 435; the result is xor-folded to 32 bits
}
function value(t: string, at: string): number { // nan is unsigned; digits below 2^62, else m odd below 2^53
  const [, sg, sp, d, x] = /^(-(?!nan))?(?:(0|inf|nan)|([1-9]\d*)(?:p(-?[1-9]\d*))?)$/.exec(t) ?? [];
  const m = BigInt(d ?? 0), bits = m.toString(2).length, e = Number(x ?? 0), s = sg ? -1 : 1;
  const ok = (sp || d) && (x ? m % 2n === 1n && m < 2n ** 53n : m < 2n ** 62n && BigInt(Number(m)) === m);
  assert(ok && e >= -1074 && e + bits <= 1024 && (e < 0 || e + bits > 62 || !x), `${at}bad token '${t}'`);
  return sp ? (sp === "nan" ? NaN : s * (sp === "0" ? 0 : Infinity)) : s * Number(m) * 2 ** e;
}
/** Parses an f64lines file's bytes into names, float64 arrays and the verified checksum, or throws. */
export function parse(bytes: Uint8Array): { names: string[]; arrays: Float64Array[]; checksum: number } {
  const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  const c = /^((?:[^\n]*\n)*)#fnv1a32=([0-9a-f]{8})\r?\n(?:\r?\n)*$/.exec(text) ?? assert.fail("no checksum");
  const names: string[] = [], arrays: Float64Array[] = [], body: string[] = [];
  for (const [i, raw] of c[1].split("\n").slice(0, -1).entries()) {
    const l = raw.replace(/\r$/, ""), at = `line ${i + 1}: `;
    if (l === "") continue;
    const [, name, len, field] = /^v1\|([^|\r]*)\|(0|[1-9]\d{0,14})\|([^|]*)$/.exec(l) ?? assert.fail(at + l);
    arrays.push(Float64Array.from(field ? field.split(",") : [], (t) => value(t, at))), names.push(name);
    assert(arrays[arrays.length - 1].length === +len, `${at}the length is not ${len}`), body.push(l + "\n");
  }
  assert(fnv32(new TextEncoder().encode(body.join(""))) === parseInt(c[2], 16), "checksum mismatch");
  return { names, arrays, checksum: parseInt(c[2], 16) };
}
if (import.meta.main) {
  try {
    const { names, arrays, checksum } = parse(readFileSync(process.argv[2]));
    names.forEach((name, i) => console.log(`${name}\t${arrays[i].length}`));
    console.log(`fnv1a32=${checksum.toString(16).padStart(8, "0")}`);
  } catch (e) {
    console.error(`f64lines: ${process.argv[2]}: ${(e as Error).message}`), process.exit(1);
  }
}

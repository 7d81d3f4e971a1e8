/**
 * The mutation engine of scripts/tools/fuzz.ts: deterministic, format-agnostic mutators over a file's bytes,
 * steered by the byte map each format's fuzz hook gives of its valid file (regions and the integer fields
 * that hold lengths and counts), plus text mutators for headers that are JSON or TOML. Case `i` of seed
 * `s` is always the same file, so any finding is replayed with `--seed s --case i`. The vocabulary the
 * hooks share with it (byte maps, mutations, the generator's type) is formats/fuzz-kit.ts.
 *
 * @module
 */
import { concat, type Mutation, type MutationSpec, type Region, type Rng } from "../../formats/fuzz-kit.ts";

export type {
  ByteMap,
  Mutation,
  MutationSpec,
  NumField,
  Region,
  Rng,
  TextHeader,
} from "../../formats/fuzz-kit.ts";
export { concat };

/** The generator for case `index` of campaign `seed`. */
export function caseRng(seed: number, index: number): Rng {
  let a = (Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35)) >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: (xs) => xs[int(xs.length)] };
}

/** The values a length or count field is set to, besides 0 and the file size ± 1. */
export const INTERESTING_COUNTS: readonly bigint[] = [
  0n,
  1n,
  2n ** 31n - 1n,
  2n ** 31n,
  2n ** 32n - 1n,
  2n ** 32n,
  2n ** 53n,
  2n ** 53n + 1n,
  2n ** 63n,
  2n ** 64n - 1n,
];

/** Numbers written into text headers in place of a number the file holds. */
export const INTERESTING_NUMBER_TEXT = [
  "0",
  "-1",
  "1",
  "-96",
  "2147483648",
  "2147508224",
  "4294967296",
  "9007199254740992",
  "18446744073709551615",
  "99999999999",
  "1e308",
  "1.5",
  "-0",
  "1e-400",
  "nan",
  "inf",
];

/** Values written into text headers in place of a value (a string, a list, a table). */
export const INTERESTING_VALUE_TEXT = ['""', "null", "true", "5", "[]", "{}", "[-96,-256]", "[[1]]", '"x"'];

/**
 * Mutates `file` for case `rng`: one of bit flips, byte overwrites in a region, truncation at a region
 * boundary, a length or count field set to an interesting value, a text header edit with lengths and
 * checksum recomputed, a format-specific edit, or junk.
 */
export function mutate(file: Uint8Array, spec: MutationSpec, rng: Rng): Mutation {
  const kinds: Array<[string, number]> = [
    ["bitflip", 3],
    ["overwrite", 3],
    ["truncate", 2],
    ["field", 3],
    ["text", spec.text ? 5 : 0],
    ["edit", spec.edits && Object.keys(spec.edits).length ? 3 : 0],
    ["junk", 1],
  ];
  const total = kinds.reduce((n, [, w]) => n + w, 0);
  for (let attempt = 0; attempt < 8; attempt++) {
    let r = rng.int(total), kind = kinds[0][0];
    for (const [k, w] of kinds) {
      if (r < w) {
        kind = k;
        break;
      }
      r -= w;
    }
    const m = mutateAs(kind, file, spec, rng);
    if (m) return m;
  }
  return { kind: "bitflip", bytes: bitflip(file, rng) };
}

function mutateAs(kind: string, file: Uint8Array, spec: MutationSpec, rng: Rng): Mutation | undefined {
  const { regions, fields } = spec.map;
  switch (kind) {
    case "bitflip":
      return { kind, bytes: bitflip(file, rng, rng.next() < 0.5 ? rng.pick(regions) : undefined) };
    case "overwrite": {
      const region = rng.pick(regions);
      const out = file.slice();
      const len = Math.max(0, region.end - region.start);
      if (len === 0) return undefined;
      const n = 1 + rng.int(Math.min(16, len));
      const at = region.start + rng.int(len - n + 1);
      const palette = [0x00, 0xff, 0x7f, 0x80, 0x22, 0x7b, 0x5b, 0x2c, 0x30, 0x39, 0x2d, 0x0a, 0x5c];
      for (let i = 0; i < n; i++) out[at + i] = rng.next() < 0.5 ? rng.pick(palette) : rng.int(256);
      return { kind: `overwrite ${region.name}`, bytes: out };
    }
    case "truncate": {
      const cuts = [...new Set(regions.flatMap((r) => [r.start, r.end]))].filter((c) => c < file.length);
      const base = rng.next() < 0.8 && cuts.length ? rng.pick(cuts) : rng.int(file.length);
      const at = Math.max(0, Math.min(file.length - 1, base + rng.pick([0, 0, -1, 1])));
      return { kind: "truncate", bytes: file.slice(0, at) };
    }
    case "field": {
      if (fields.length === 0) return undefined;
      const f = rng.pick(fields);
      const dv = new DataView(file.buffer, file.byteOffset, file.byteLength);
      const old = f.width === 8 ? dv.getBigUint64(f.offset, true) : BigInt(dv.getUint32(f.offset, true));
      const size = BigInt(file.length);
      const v = rng.pick([...INTERESTING_COUNTS, size - 1n, size, size + 1n, old + 1n, old - 1n, old * 2n]);
      const out = file.slice();
      const ov = new DataView(out.buffer);
      const mask = f.width === 8 ? 2n ** 64n - 1n : 2n ** 32n - 1n;
      const x = ((v % (mask + 1n)) + mask + 1n) & mask;
      if (f.width === 8) ov.setBigUint64(f.offset, x, true);
      else ov.setUint32(f.offset, Number(x), true);
      return { kind: `field ${f.name}`, bytes: out };
    }
    case "text": {
      if (!spec.text) return undefined;
      const text = spec.text.get(file);
      const edited = editText(text, rng);
      if (!edited || edited.text === text) return undefined;
      return { kind: `text ${edited.kind}`, bytes: spec.text.set(file, edited.text) };
    }
    case "edit": {
      const names = Object.keys(spec.edits ?? {});
      const name = rng.pick(names);
      const out = spec.edits![name](file, rng);
      return out ? { kind: `edit ${name}`, bytes: out } : undefined;
    }
    case "junk": {
      const junk = new Uint8Array(1 + rng.int(64)).map(() => rng.int(256));
      const how = rng.int(4);
      if (how === 0) return { kind: "junk append", bytes: concat(file, junk) };
      if (how === 1) {
        const at = rng.int(file.length);
        return { kind: "junk insert", bytes: concat(file.subarray(0, at), junk, file.subarray(at)) };
      }
      if (how === 2) return { kind: "junk whole", bytes: junk };
      return { kind: "junk empty", bytes: new Uint8Array(0) };
    }
  }
  return undefined;
}

function bitflip(file: Uint8Array, rng: Rng, region?: Region): Uint8Array {
  const out = file.slice();
  if (out.length === 0) return out;
  const start = region ? region.start : 0,
    end = region && region.end > region.start ? region.end : out.length;
  const n = 1 + rng.int(rng.next() < 0.7 ? 1 : 8);
  for (let i = 0; i < n; i++) out[start + rng.int(end - start)] ^= 1 << rng.int(8);
  return out;
}

// ---- text headers (JSON, TOML, key=value lines) ----

const NUMBER = /-?\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b/g;
const STRING = /"(?:[^"\\\n]|\\.)*"/g;

/** One edit of a text header: a number, a string or a value replaced, a line or list item duplicated, two swapped. */
export function editText(text: string, rng: Rng): { kind: string; text: string } | undefined {
  const which = rng.int(7);
  if (which === 0) {
    const m = tokens(text, NUMBER);
    if (!m.length) return undefined;
    const t = rng.pick(m);
    return { kind: "number", text: splice(text, t, rng.pick(INTERESTING_NUMBER_TEXT)) };
  }
  if (which === 1) {
    const m = tokens(text, STRING);
    if (m.length < 2) return undefined;
    const a = rng.pick(m), b = rng.pick(m);
    if (a.start === b.start) return undefined;
    return { kind: "swap strings", text: swap(text, a, b) };
  }
  if (which === 2) {
    const m = tokens(text, STRING);
    if (!m.length) return undefined;
    const t = rng.pick(m);
    const repl = rng.next() < 0.5 ? rng.pick(m).text : rng.pick(INTERESTING_VALUE_TEXT);
    return { kind: "string", text: splice(text, t, repl) };
  }
  if (which === 3) {
    const v = rng.pick(brackets(text));
    if (!v) return undefined;
    const how = rng.int(3);
    if (how === 0) return { kind: "value", text: splice(text, v, rng.pick(INTERESTING_VALUE_TEXT)) };
    if (how === 1) return { kind: "duplicate value", text: splice(text, v, `${v.text},${v.text}`) };
    return { kind: "empty value", text: splice(text, v, v.text[0] + v.text.at(-1)) };
  }
  const lines = text.split("\n");
  if (lines.length < 3) {
    // One-line JSON: work on the items of the object or list that holds the most commas.
    const items = listItems(text);
    if (items.length < 2) return undefined;
    const a = rng.pick(items), b = rng.pick(items);
    if (which === 4) return { kind: "drop item", text: dropItem(text, a) };
    if (which === 5) return { kind: "duplicate item", text: splice(text, a, `${a.text},${a.text}`) };
    if (a.start === b.start) return undefined;
    return { kind: "swap items", text: swap(text, a, b) };
  }
  const i = rng.int(lines.length), j = rng.int(lines.length);
  if (which === 4) lines.splice(i, 1);
  else if (which === 5) lines.splice(i, 0, lines[i]);
  else if (i !== j) [lines[i], lines[j]] = [lines[j], lines[i]];
  else return undefined;
  return { kind: ["drop line", "duplicate line", "swap lines"][which - 4], text: lines.join("\n") };
}

interface Span {
  start: number;
  end: number;
  text: string;
}

function tokens(text: string, re: RegExp): Span[] {
  const out: Span[] = [];
  for (const m of text.matchAll(re)) out.push({ start: m.index!, end: m.index! + m[0].length, text: m[0] });
  return out.length > 4096 ? out.filter((_, i) => i % Math.ceil(out.length / 4096) === 0) : out;
}

function splice(text: string, s: { start: number; end: number }, repl: string): string {
  return text.slice(0, s.start) + repl + text.slice(s.end);
}

function swap(text: string, a: Span, b: Span): string {
  const [x, y] = a.start < b.start ? [a, b] : [b, a];
  if (x.end > y.start) return text;
  return text.slice(0, x.start) + y.text + text.slice(x.end, y.start) + x.text + text.slice(y.end);
}

function dropItem(text: string, a: Span): string {
  if (text[a.end] === ",") return text.slice(0, a.start) + text.slice(a.end + 1);
  if (text[a.start - 1] === ",") return text.slice(0, a.start - 1) + text.slice(a.end);
  return splice(text, a, "");
}

// Balanced {...} and [...] spans, skipping strings (at most 4096 of them, evenly spread).
function brackets(text: string): Span[] {
  const out: Span[] = [], stack: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
    } else if (c === "{" || c === "[") stack.push(i);
    else if ((c === "}" || c === "]") && stack.length) {
      const s = stack.pop()!;
      out.push({ start: s, end: i + 1, text: text.slice(s, i + 1) });
    }
  }
  return out.length > 4096 ? out.filter((_, i) => i % Math.ceil(out.length / 4096) === 0) : out;
}

// The comma-separated items at one nesting level of a one-line JSON text: those of a random container
// would need a full parse, so take the items directly inside each bracket span and pick among them.
function listItems(text: string): Span[] {
  const out: Span[] = [];
  for (const b of brackets(text)) {
    let depth = 0, start = b.start + 1;
    for (let i = b.start + 1; i < b.end - 1; i++) {
      const c = text[i];
      if (c === '"') {
        for (i++; i < b.end && text[i] !== '"'; i++) if (text[i] === "\\") i++;
      } else if (c === "{" || c === "[") depth++;
      else if (c === "}" || c === "]") depth--;
      else if (c === "," && depth === 0) {
        out.push({ start, end: i, text: text.slice(start, i) });
        start = i + 1;
      }
    }
    if (start < b.end - 1) out.push({ start, end: b.end - 1, text: text.slice(start, b.end - 1) });
  }
  return out.length > 4096 ? out.filter((_, i) => i % Math.ceil(out.length / 4096) === 0) : out;
}

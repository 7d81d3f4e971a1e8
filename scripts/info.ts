/**
 * Says everything an export says about itself, and whether its checks hold, without building a model:
 * the answer to "someone handed me one file on a machine that has never seen this repository". The
 * format is recognised from the path (formats/mod.ts) and its `inspect` does the work; this command
 * lays every format's answer out the same way:
 *
 *   file, format, bytes    what the file is (byte counts with thousands separators)
 *   checks                 each checksum as hex (8 digits for a 32-bit one) with its verdict, ok or MISMATCH
 *   header fields          one per line; nested ones as an indented group
 *   config                 the model's shape, `key = value`
 *   tensors                name, [dims], values, and what the format stores per tensor
 *
 * A dmexp file whose config is not a ferry config (one written by another implementation) is still
 * shown. Nothing here recurses: a header nested 100,000 deep prints (cut short) instead of overflowing
 * the stack, and `--json` writes it in full.
 *
 * Exit codes: 0 the file is intact, 1 refused (not an export, corrupt, or its header disagrees with its
 * own config), 2 usage.
 *
 * @example
 * ```ts
 * // deno run -A scripts/info.ts out/ferry.bf16.dmexp
 * // deno run -A scripts/info.ts out/ferry.bf16.dmexp --json | jq .header.max_abs
 * ```
 * @module
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import process from "node:process";
import {
  checkpointRefusal,
  cli,
  EXIT_REFUSED,
  fail,
  failUsage,
  type Progress,
  progress,
  run,
} from "./cli.ts";
import { formatOf, FORMATS } from "../formats/mod.ts";
import { isCheckpointFile } from "../formats/checkpoint/checkpoint.ts";
import { F16_MAX, F16_MIN_NORMAL } from "../quantize/float16.ts";

const HELP = `
Print every header field of an export and verify it, without building a model.

Usage: deno run -A scripts/info.ts FILE [--json]

FILE is any export: ${FORMATS.map((f) => `${f.extension} (${f.name})`).join(", ")}. Every
format is shown in one layout: the file, its checks (each checksum with ok or MISMATCH), the header
fields, the config and the tensors. A dmexp file's checksum is reported even when it fails.

Options:
  --json      print the result as JSON
  -h, --help  this text

Exit codes: 0 intact, 1 refused (not an export, checksum mismatch, header disagrees with its config), 2 usage.
`;

/** One verdict: what was checked, the value it stands on (a checksum), and what the verdict means. */
interface Check {
  name: string;
  value: string;
  /** true ok, false failed (exit 1), null neither (no checksum to check, a config ferry cannot build). */
  ok: boolean | null;
  note: string;
}

/** An inspection in the one layout: each part in the order it is printed. */
interface Report {
  identity: Array<[string, string]>;
  checks: Check[];
  fields: Array<[string, string]>;
  groups: Array<{ name: string; rows: Array<[string, string]> }>;
  config: string[];
  tensors: Array<{ name: string; dims: number[]; details: string[] }>;
}

// What a passing or failing checksum means, where the format says what it covers.
const CHECK_NOTES: Record<string, [ok: string, failed: string]> = {
  crc32: ["the payload is intact", "the payload is corrupt"],
  header_crc32: ["the header is as written", "the header was changed"],
};

// Lists of per-tensor entries, under the names formats give them.
const TENSOR_LISTS = ["tensors", "arrays", "matrices", "tables"];

/** An integer with thousands separators: 941277 -> "941,277". */
const count = (x: number) => x.toLocaleString("en-US");

/** A 32-bit checksum as 8 hex digits, from a number or a hex string (`0x` or not). */
function hex8(v: unknown): string {
  if (typeof v === "number") return (v >>> 0).toString(16).padStart(8, "0");
  return String(v).replace(/^0x/, "").padStart(8, "0");
}

// A field's value as text: byte counts and parameter counts with separators, 32-bit checksums in hex,
// strings as they are, anything else as one line of JSON (cut short).
function fieldText(key: string, v: unknown): string {
  if (typeof v === "number" && Number.isInteger(v)) {
    if (/crc32|fnv1a32/.test(key)) return hex8(v);
    if (/(^|_)(bytes|length|params)$/.test(key)) return count(v);
  }
  return typeof v === "string" ? v : jsonText(v, { limit: 200 });
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The verdicts one key of an inspection holds, if any: a `{ stored, computed, ok }` checksum (dmexp's
 * crc32), dmexp's `model` verdict, lut4's `checks` list, a sentence `HASH: ok, what it covers` (hf,
 * gguf, f64lines), or a checksum key the file lacks (null).
 */
function checksIn(key: string, v: unknown, info: Record<string, unknown>): Check[] {
  if (isRecord(v) && typeof v.ok === "boolean" && "stored" in v) return [storedCheck(key, v)];
  if (key === "model" && isRecord(v) && typeof v.ok === "boolean") return [modelCheck(v)];
  if (key === "checks" && isRecord(v)) {
    return Object.entries(v).map(([name, verdict]) => {
      // The checksum a listed check stands on, where the inspection gives it (lut4's data_crc32).
      const stands = /crc32|sha256|fnv1a32/.test(name) && info[name] !== undefined;
      const value = stands ? fieldText(name, info[name]) : "";
      return { name, value, ok: verdict === "ok", note: verdict === "ok" ? "" : String(verdict) };
    });
  }
  if (/crc32$/.test(key) && v === null) {
    return [{ name: key, value: "", ok: null, note: `none (no ${key} key: a file written without it)` }];
  }
  const sentence = typeof v === "string" ? sentenceCheck(key, v) : undefined;
  return sentence ? [sentence] : [];
}

// A `{ stored, computed, ok }` verdict, its checksum as 8 hex digits.
function storedCheck(name: string, v: Record<string, unknown>): Check {
  const [good, bad] = CHECK_NOTES[name] ?? ["", ""];
  const stored = hex8(v.stored);
  return v.ok
    ? { name, value: stored, ok: true, note: good }
    : { name, value: stored, ok: false, note: `computed ${hex8(v.computed)}${bad ? `: ${bad}` : ""}` };
}

// A sentence `[NAME=]HASH: ok, what it covers`, or `none (why)`.
function sentenceCheck(name: string, text: string): Check | undefined {
  const m = /^(?:(\w+)=)?([0-9a-f]{8,}): (ok|MISMATCH)\b,? ?(.*)$/.exec(text);
  if (m) return { name: m[1] ?? name, value: m[2], ok: m[3] === "ok", note: m[4] };
  if (text.startsWith("none")) return { name, value: "", ok: null, note: text };
  return undefined;
}

// dmexp's `model` verdict: whether ferry can build a model from the file.
function modelCheck(v: Record<string, unknown>): Check {
  const check = (ok: boolean | null, note: string): Check => ({ name: "model", value: "", ok, note });
  if (v.ok) {
    return check(
      true,
      "ferry can load it: the config is a ferry config and every tensor has the shape it implies",
    );
  }
  if (v.field === "config") {
    return check(
      null,
      "ferry cannot build a model from this config (not a ferry config); the container itself is intact",
    );
  }
  return check(false, `REFUSED: ${v.reason}`);
}

/**
 * Lays an inspection out: walks its keys once (and a `header` object's, one level down: dmexp keeps
 * its header fields there), sorting each into identity, checks, fields, groups, config and tensors.
 */
function report(formatName: string, info: Record<string, unknown>, path: string): Report {
  const r: Report = { identity: [], checks: [], fields: [], groups: [], config: [], tensors: [] };
  const header = isRecord(info.header) ? info.header : {};
  const entries = [...Object.entries(info).filter(([k]) => k !== "header"), ...Object.entries(header)];
  const version = info.version ?? header.version;
  r.identity.push(["file", String(info.file ?? info.folder ?? path)]);
  r.identity.push(["format", version === undefined ? formatName : `${formatName}, version ${version}`]);
  r.identity.push(["bytes", bytesText(info, path)]);
  const known = new Set(["file", "folder", "version", "bytes", "header_length", "payload_length"]);
  if (header.format === version) known.add("format"); // dmexp's `format` key repeats the version
  for (const [key, v] of entries) {
    if (known.has(key)) continue;
    const checks = checksIn(key, v, info);
    if (checks.length > 0) r.checks.push(...checks);
    else if (key === "config") r.config.push(...configLines(v));
    else if (TENSOR_LISTS.includes(key) && Array.isArray(v) && v.every(isRecord)) {
      r.tensors.push(...v.map(tensorRow));
    } else if (isRecord(v)) {
      r.groups.push({ name: key, rows: Object.entries(v).map(([k, x]) => [k, fieldText(k, x)]) });
    } else r.fields.push([key, fieldNote(key, v)]);
  }
  const { max_abs: max, min_nonzero_abs: min } = header;
  if (typeof max === "number" && typeof min === "number") {
    const at = r.fields.findIndex(([k]) => k === "min_nonzero_abs");
    r.fields.splice(at + 1, 0, ["f16 range", f16Fit(max, min)]);
  }
  // A value a check stands on is shown there, not again as a field (dmexp's header_crc32, lut4's data_crc32).
  const checked = new Set(r.checks.map((c) => c.name));
  r.fields = r.fields.filter(([k]) => !checked.has(k));
  return r;
}

// The file's size, with dmexp's split into its prefix, header and payload; the folder's for hf.
function bytesText(info: Record<string, unknown>, path: string): string {
  const bytes = typeof info.bytes === "number" ? info.bytes : sizeOnDisk(path);
  const { header_length: h, payload_length: p } = info;
  // dmexp version 2 ends with its tokenizer section.
  const t = isRecord(info.tokenizer) && typeof info.tokenizer.section_bytes === "number"
    ? info.tokenizer.section_bytes
    : 0;
  if (typeof h === "number" && typeof p === "number") {
    const section = t > 0 ? ` + ${count(t)} tokenizer section` : "";
    return `${count(bytes)} = ${count(bytes - h - p - t)} prefix + ${count(h)} header + ${
      count(p)
    } payload${section}`;
  }
  return count(bytes);
}

// A file's size, or the sum of a folder's files (a Hugging Face export is one folder of files).
function sizeOnDisk(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((n, f) => n + statSync(join(path, f)).size, 0);
}

// A field with what its number means, where ferry can say it in words.
function fieldNote(key: string, v: unknown): string {
  if (key === "flushed" && typeof v === "number") {
    return `${count(v)} non-zero weights became zero when narrowed`;
  }
  return fieldText(key, v);
}

// The config as `key = value` lines: dmexp's is TOML text already, the others' an object.
function configLines(v: unknown): string[] {
  if (typeof v === "string" && v.includes("\n")) return v.trimEnd().split("\n");
  if (isRecord(v)) return Object.entries(v).map(([k, x]) => `${k} = ${fieldText(k, x)}`);
  return [`in ${fieldText("config", v)}`]; // a path: f64lines keeps its config in a file beside it
}

// One tensor: its dims outermost first (GGUF's ne is innermost first), then what the format says of it.
function tensorRow(t: Record<string, unknown>) {
  const { name, dims, ne, rows, cols, length, ...rest } = t;
  const shape = Array.isArray(dims)
    ? dims
    : Array.isArray(ne)
    ? [...ne].reverse()
    : rows !== undefined
    ? [rows, cols]
    : [length];
  const numbers = shape.map(Number);
  const details = [`${count(numbers.reduce((a, b) => a * b, 1))} values`];
  for (const [k, v] of Object.entries(rest)) details.push(`${k} ${fieldText(k, v)}`);
  return { name: String(name), dims: numbers, details };
}

// The ADR's decision rule, stated for the file at hand: compare the range with f16's.
function f16Fit(maxAbs: number, minNonzero: number): string {
  if (maxAbs > F16_MAX) return `max_abs ${maxAbs} > ${F16_MAX}: f16 cannot hold this model; bf16 can`;
  const low = minNonzero > 0 && minNonzero < F16_MIN_NORMAL
    ? `; weights below ${
      F16_MIN_NORMAL.toExponential(1)
    } (f16's smallest normal) lose precision in f16 and may flush to zero`
    : "";
  return `max_abs <= ${F16_MAX}: every weight fits f16${low}`;
}

/** The report as text: every format in the same order of sections, the same column widths. */
function reportText(r: Report): string {
  const line = (k: string, v: string) => `${k.padEnd(16)} ${v}`;
  const lines = r.identity.map(([k, v]) => line(k, v));
  if (r.checks.length > 0) {
    const width = Math.max(14, ...r.checks.map((c) => c.name.length)); // values in the fields' column
    const valueWidth = Math.max(...r.checks.map((c) => c.value.length));
    lines.push("checks");
    for (const c of r.checks) {
      const verdict = c.ok === true
        ? "ok"
        : c.ok === false && !c.note.startsWith("REFUSED")
        ? "MISMATCH"
        : "";
      const said = [verdict, c.note].filter((s) => s !== "").join(", ");
      lines.push(`  ${c.name.padEnd(width)}  ${c.value.padEnd(valueWidth)}  ${said}`.replace(/ +$/, ""));
    }
  }
  lines.push(...r.fields.map(([k, v]) => line(k, v)));
  for (const g of r.groups) {
    const width = Math.max(0, ...g.rows.map(([k]) => k.length));
    lines.push(g.name, ...g.rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`));
  }
  if (r.config.length > 0) lines.push("config", ...r.config.map((l) => `  ${l}`));
  if (r.tensors.length > 0) {
    const width = Math.max(...r.tensors.map((t) => t.name.length));
    lines.push("tensors");
    for (const t of r.tensors) {
      lines.push(`  ${t.name.padEnd(width)}  [${t.dims.join(", ")}]  ${t.details.join("  ")}`);
    }
  }
  return lines.join("\n");
}

/** How deep `jsonText` indents; deeper levels are written on one line (a deep file stays linear in size). */
const INDENT_DEPTH = 32;

/**
 * `value` as JSON, written by an explicit stack instead of recursion (JSON.stringify overflows the
 * stack on a value nested 100,000 deep): indented by `indent` spaces as `JSON.stringify(v, null, 2)`
 * does down to INDENT_DEPTH levels, on one line below; cut at `limit` characters with an ellipsis.
 *
 * @example
 * ```ts
 * import { jsonText } from "./info.ts";
 * jsonText({ a: [1, 2] }, { indent: 2 }); // the same text as JSON.stringify({ a: [1, 2] }, null, 2)
 * ```
 */
export function jsonText(value: unknown, opts: { indent?: number; limit?: number } = {}): string {
  const indent = opts.indent ?? 0, limit = opts.limit ?? Infinity;
  const out: string[] = [];
  let length = 0;
  // What is left to write, last first: a value at a depth, or text (a key, a comma, a closing bracket).
  const todo: Array<string | { value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (todo.length > 0 && length <= limit) {
    const next = todo.pop()!;
    let text: string;
    if (typeof next === "string") text = next;
    else if (next.value === null || typeof next.value !== "object") {
      text = JSON.stringify(next.value) ?? "null"; // undefined, a function: null, as in an array
    } else {
      const list = Array.isArray(next.value);
      const items: Array<[string | undefined, unknown]> = list
        ? (next.value as unknown[]).map((x) => [undefined, x])
        : Object.entries(next.value).filter(([, x]) => x !== undefined && typeof x !== "function");
      const [open, close] = list ? ["[", "]"] : ["{", "}"];
      if (items.length === 0) text = open + close;
      else {
        const pretty = indent > 0 && next.depth < INDENT_DEPTH;
        const newline = (depth: number) => pretty ? "\n" + " ".repeat(indent * depth) : "";
        const parts: Array<string | { value: unknown; depth: number }> = [open];
        items.forEach(([key, x], i) => {
          const name = key === undefined ? "" : `${JSON.stringify(key)}:${pretty ? " " : ""}`;
          parts.push(`${i > 0 ? "," : ""}${newline(next.depth + 1)}${name}`, {
            value: x,
            depth: next.depth + 1,
          });
        });
        parts.push(newline(next.depth) + close);
        for (let i = parts.length - 1; i >= 0; i--) todo.push(parts[i]);
        continue;
      }
    }
    out.push(text);
    length += text.length;
  }
  const all = out.join("");
  return all.length > limit ? all.slice(0, limit) + "…" : all;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, { json: { type: "boolean" } });
  if (positionals.length !== 1) {
    failUsage(`expected one FILE, got ${positionals.length}`, HELP);
  }
  const path = positionals[0];
  if (await isCheckpointFile(path)) fail(checkpointRefusal(path), EXIT_REFUSED);
  const format = formatOf(path);
  let bar: Progress | undefined, shown = 0;
  const info = await format.inspect(path, {
    onProgress: (done, total) => {
      if (total < 64 << 20) return;
      bar ??= progress("verify", Math.ceil(total / (1 << 20)), { unit: "MiB" });
      const now = Math.floor(done / (1 << 20));
      if (now > shown) bar.tick(now - shown), shown = now;
      if (done === total) bar.done();
    },
  });
  const r = report(format.name, info, path);
  console.log(values.json ? jsonText(info, { indent: 2 }) : reportText(r));
  // A file is shown even when its checks fail; the verdict is the exit code.
  if (r.checks.some((c) => c.ok === false)) process.exitCode = EXIT_REFUSED;
}

if (import.meta.main) await run(main);

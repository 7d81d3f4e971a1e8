// Every refusal carries a code from its class's one table (issue 31), and each table is explained once, in
// the page that specifies what it refuses: a format's spec ("Refusals"), or docs/hostile-input.md for the
// tables no one format owns. Each class `formatErrorClass` makes is listed here; an unlisted one fails.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { FormatError } from "../../model/error.ts";
import { ConfigError } from "../../model/config.ts";
import { StrictJsonError } from "../../formats/json.ts";
import { GgufError } from "../../formats/gguf/gguf.ts";
import { DmexpError } from "../../formats/dmexp/dmexp.ts";
import { Lut4Error } from "../../formats/lut4/lut4.ts";
import { SafetensorsError } from "../../formats/safetensors/safetensors.ts";
import { HuggingFaceError } from "../../formats/huggingface/huggingface.ts";
import { F64LinesError } from "../../formats/f64lines/f64lines.ts";
import { CheckpointError } from "../../formats/checkpoint/checkpoint.ts";
import { SessionError } from "../../formats/session/session.ts";

const ROOT = join(import.meta.dir, "../..");

/** Each error class, the page that explains its codes, and the heading of the section that does. */
const TABLES: [typeof FormatError, string, string][] = [
  [FormatError, "docs/hostile-input.md", "`FormatError`"],
  [ConfigError, "docs/hostile-input.md", "`ConfigError`"],
  [StrictJsonError, "docs/hostile-input.md", "`StrictJsonError`"],
  [GgufError, "formats/gguf/gguf.md", "Refusals"],
  [DmexpError, "formats/dmexp/dmexp.md", "Refusals"],
  [Lut4Error, "formats/lut4/lut4.md", "Refusals"],
  [SafetensorsError, "formats/safetensors/safetensors.md", "Refusals"],
  [HuggingFaceError, "formats/huggingface/huggingface.md", "Refusals"],
  [F64LinesError, "formats/f64lines/f64lines.md", "Refusals"],
  [CheckpointError, "formats/checkpoint/checkpoint.md", "Refusals"],
  [SessionError, "formats/session/session.md", "Refusals"],
];

/** The codes a page's section documents: the first cell of each table row, `` | `Code` | ``. */
function documented(page: string, heading: string): string[] {
  const lines = readFileSync(join(ROOT, page), "utf8").split("\n");
  const start = lines.findIndex((l) => /^#+ /.test(l) && l.includes(heading));
  if (start < 0) return [`no section "${heading}" in ${page}`];
  const level = lines[start].indexOf(" ");
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && l.indexOf(" ") <= level);
  return lines.slice(start, end < 0 ? undefined : end).flatMap((l) =>
    /^\| `([A-Za-z0-9]+)` +\|/.exec(l)?.[1] ?? []
  );
}

test("every code of every table is a PascalCase name, once", () => {
  for (const [type] of TABLES) {
    const codes = [...type.codes];
    expect({ class: type.name, bad: codes.filter((c) => !/^[A-Z][A-Za-z0-9]*$/.test(c)) })
      .toEqual({ class: type.name, bad: [] });
    expect({ class: type.name, repeated: codes.filter((c, i) => codes.indexOf(c) !== i) })
      .toEqual({ class: type.name, repeated: [] });
  }
});

test("each table is its page's table: every code explained, and nothing explained that is not a code", () => {
  for (const [type, page, heading] of TABLES) {
    expect({ class: type.name, page, codes: documented(page, heading).sort() })
      .toEqual({ class: type.name, page, codes: [...type.codes].sort() });
  }
});

test("every class made by formatErrorClass is listed above, so its table is checked against its page", () => {
  const made: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (path.endsWith(".ts")) {
        const text = readFileSync(join(ROOT, path), "utf8");
        for (const m of text.matchAll(/^export class (\w+)\s+extends formatErrorClass\(/gm)) made.push(m[1]);
      }
    }
  };
  for (const dir of ["model", "formats", "engines", "measure", "serve", "scripts"]) walk(dir);
  expect(made.sort()).toEqual(TABLES.map(([type]) => type.name).filter((n) => n !== "FormatError").sort());
});

test("a refusal carries its code as a field and at the end of its message; its class's table holds it", () => {
  const e = new GgufError("m.gguf", "BadMagic", "header.magic", 'expected "GGUF"');
  expect([e.code, e.message, e.name]).toEqual([
    "BadMagic",
    'm.gguf: header.magic: expected "GGUF" (BadMagic)',
    "GgufError",
  ]);
  expect(e).toBeInstanceOf(FormatError);
  expect(GgufError.codes).toContain(e.code);
});

/**
 * The format registry: every export format ferry writes and reads, in the order `export` writes them.
 * export, load, generate, info, measure and the fuzzer iterate `FORMATS`; a new format is one folder
 * (`formats/NAME/`: `NAME.ts` exporting a `FormatDescriptor`, its spec `NAME.md`, its fuzz hook
 * `NAME-fuzz.ts`), its minimal reader `readers/NAME.ts`, and one line in the list below. tests/formats/registry.test.ts refuses a
 * registration that lacks any of them. `FORMATS`, `formatOf`, `formatNamed` and `readExport` are the
 * formats' public API (re-exported by the top-level mod.ts).
 *
 * @example
 * ```ts
 * import { formatOf, readExport } from "./mod.ts";
 * formatOf("out/ferry.bf16.dmexp").name;                        // "dmexp"
 * const { format, config, tensors } = await readExport("out/ferry.f16.gguf");
 * ```
 * @module
 */
import { FormatError } from "../model/error.ts";
import type { FormatDescriptor, ReadResult } from "./format.ts";
import { dmexpFormat } from "./dmexp/dmexp.ts";
import { hfFormat } from "./huggingface/huggingface.ts";
import { ggufFormat } from "./gguf/gguf.ts";
import { f64linesFormat } from "./f64lines/f64lines.ts";
import { lut4Format } from "./lut4/lut4.ts";
import { requireInput } from "./io.ts";

export type { ExportInput, ExportOrigin, FormatDescriptor, ReadResult, WriteResult } from "./format.ts";

/** Every format, in the order `export --format all` writes them. */
export const FORMATS: readonly FormatDescriptor[] = [
  dmexpFormat,
  hfFormat,
  ggufFormat,
  f64linesFormat,
  lut4Format,
];

/** A format by its `--format` name, or undefined. */
export function formatNamed(name: string): FormatDescriptor | undefined {
  return FORMATS.find((f) => f.name === name);
}

/** What a format refusal says a path should look like: `.dmexp, .hf (a folder), .gguf, .f64lines`. */
export function knownFormats(): string {
  return FORMATS.map((f) => `${f.extension} (${f.name})`).join(", ");
}

/** The formats whose exports are folders; every other format's export is one file. */
const FOLDER_FORMATS: readonly FormatDescriptor[] = [hfFormat];

/**
 * The format a path is in, by its extension or folder shape. A path no format recognises is refused
 * with a `FormatError` that names the formats ferry knows; one it recognises but that is missing, or a
 * folder where the format has a file (or the reverse), with io.ts's one sentence (`PATH: no such file`).
 *
 * @example
 * ```ts
 * import { formatOf } from "./mod.ts";
 * formatOf("out/ferry.f32.hf").name; // "hf"
 * formatOf("notes.txt");             // throws: notes.txt: format: not a ferry export (expected one of ...)
 * ```
 */
export function formatOf(path: string): FormatDescriptor {
  const format = FORMATS.find((f) => f.recognises(path));
  if (format) requireInput(path, FOLDER_FORMATS.includes(format) ? "folder" : "file");
  if (format) return format;
  throw new FormatError(
    path,
    "UnknownFormat",
    "format",
    `${path}: format: not a ferry export (expected one of: ${knownFormats()})`,
    { expected: knownFormats(), found: path },
  );
}

/**
 * Refuses a lossy export (`LossyInput`) where only a checkpoint or a lossless export will do: `cannot`
 * finishes the sentence `PATH: a lossy FORMAT export (WHAT) ...` with what it cannot be, and why.
 *
 * @example
 * ```ts
 * import { formatOf, refuseLossy } from "./mod.ts";
 * declare const path: string;
 * await refuseLossy(path, formatOf(path), "cannot be measured: its rounding would be rounded again");
 * ```
 */
export async function refuseLossy(path: string, format: FormatDescriptor, cannot: string): Promise<void> {
  const lossy = await format.lossy(path);
  if (!lossy) return;
  throw new FormatError(
    path,
    "LossyInput",
    "format",
    `${path}: a lossy ${format.name} export (${lossy}) ${cannot}`,
    {
      expected: "a training checkpoint or a lossless export",
      found: `a ${format.name} export with ${lossy}`,
    },
  );
}

/** An export read back, and the format it was read as. */
export interface ReadExport extends ReadResult {
  format: FormatDescriptor;
}

/**
 * Reads any export through its format's full reader: the config and the named f32 tensors, checked
 * before they are handed out.
 *
 * @example
 * ```ts
 * import { readExport } from "./mod.ts";
 * const { format, config, tensors } = await readExport("out/ferry.f64.f64lines");
 * ```
 */
export async function readExport(
  path: string,
  options?: { onProgress?: (done: number, total: number) => void },
): Promise<ReadExport> {
  const format = formatOf(path);
  return { format, ...await format.read(path, options) };
}

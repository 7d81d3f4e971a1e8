/**
 * The fuzz hook of f64lines (formats/f64lines/f64lines.md) for scripts/tools/fuzz.ts: a small valid file (the
 * config beside it is written, not attacked), one region per line, the text with its `#fnv1a32=` line
 * recomputed after a text edit, and the minimal reader `readers/f64lines.ts`. A second target is a model
 * file that ends with the `ferry.tokenizer/<file>` records of a tokenizer, read as a model with its tokenizer.
 *
 * @example
 * ```ts
 * import { loadFuzzHook } from "../fuzz-kit.ts";
 * import { f64linesFormat } from "./f64lines.ts";
 * const { FUZZ_TARGETS } = await loadFuzzHook(f64linesFormat.fuzzHook); // [the f64lines target]
 * ```
 * @module
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { FUZZ_CONFIG, FUZZ_TOKENIZER, type FuzzTarget, fuzzTensors, type Region } from "../fuzz-kit.ts";
import { F64LinesError, f64linesFormat, readF64Lines, stringChecksum, writeF64Lines } from "./f64lines.ts";
import { tensorSource } from "../../model/tensor.ts";
import { configToToml, paramShapes } from "../../model/config.ts";

const enc = new TextEncoder(), dec = new TextDecoder();

function f64Reseal(text: string): string {
  const lines = text.split("\n").filter((l) => !l.startsWith("#fnv1a32="));
  const body = lines.filter((l) => l.length > 0).map((l) => l + "\n").join("");
  return body + `#fnv1a32=${stringChecksum(body).toString(16).padStart(8, "0")}\n`;
}

const f64lines: FuzzTarget = {
  name: "f64lines",
  async make(dir) {
    const file = join(dir, "m.f64lines");
    await writeF64Lines(file, fuzzTensors());
    await writeFile(join(dir, "m.config.toml"), configToToml(FUZZ_CONFIG));
    return { file, target: file };
  },
  map(f) {
    const regions: Region[] = [];
    let start = 0;
    for (let i = 0; i < f.length; i++) {
      if (f[i] === 0x0a) {
        regions.push({ name: `line ${regions.length + 1}`, start, end: i + 1 }), start = i + 1;
      }
    }
    return { regions, fields: [] };
  },
  text: { get: (f) => dec.decode(f), set: (_f, t) => enc.encode(f64Reseal(t)) },
  readers: { readF64Lines: (p) => readF64Lines(p, paramShapes(FUZZ_CONFIG)) },
  refusal: (e) => e instanceof F64LinesError,
  explain: (
    m,
  ) => (m.kind.startsWith("text") ? "forged: the edit recomputed the fnv1a32 checksum line" : undefined),
  minimal: "readers/f64lines.ts",
};

const f64linesTokenizer: FuzzTarget = {
  ...f64lines,
  name: "f64lines-tokenizer",
  async make(dir) {
    const file = join(dir, "t.f64lines");
    const input = {
      config: FUZZ_CONFIG,
      tensors: fuzzTensors().map(tensorSource),
      source: "fuzz@step1",
      step: 1,
    };
    await f64linesFormat.write(file, { ...input, name: "fuzz", tokenizer: FUZZ_TOKENIZER }, { dtype: "f64" });
    return { file, target: file };
  },
  readers: { "f64linesFormat.read": (p) => f64linesFormat.read(p) },
};

/** What scripts/tools/fuzz.ts attacks: an f64lines file, and a model's with its tokenizer's records. */
export const FUZZ_TARGETS: readonly FuzzTarget[] = [f64lines, f64linesTokenizer];

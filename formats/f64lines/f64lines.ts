/**
 * f64lines: named float64 arrays as text, one line each, bit-exact both ways and parsed strictly,
 * all or nothing. The spec is formats/f64lines/f64lines.md; readers/f64lines.ts is a 40-line reader of it.
 *
 * Hand-written because no npm package writes float64 values as exact `<m>p<e>` tokens and refuses
 * every non-canonical spelling. Values are moved by integer digit arithmetic and exact power-of-two
 * scaling only, so no decimal rounding ever touches one. The module group, one step each:
 * f64lines-encode.ts and f64lines-scan.ts write and read value tokens; f64lines-write.ts writes lines,
 * whole or streamed; f64lines-parse.ts is the one parser, over a window (f64lines-window.ts) of bytes
 * in memory or of a file read a chunk at a time; f64lines-model.ts makes a model of the lines;
 * f64lines-config.ts reads and writes the config beside an export; fnv1a64.ts is the checksum's hasher.
 *
 * Every reader here is that parser and what it does with each line's values: the arrays of
 * `parseF64Lines`, the f32 tensors of `f64LinesToTensors`, a model's tensors and tokenizer. Over bytes
 * in memory or from a file (`readF64Lines*`, streamed), the same steps and the same refusals.
 *
 * @example
 * ```ts
 * import { parseF64Lines, readF64Lines, weightsToF64Lines, writeF64Lines } from "./f64lines.ts";
 * import { type ModelConfig, paramShapes } from "../../model/config.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const config: ModelConfig, tensors: Tensor[];
 * const text = weightsToF64Lines(["w"], [new Float64Array([0.5, -0, 0.1])]);
 * // "v1|w|3|1p-1,-0,3602879701896397p-55\n#fnv1a32=…\n"
 * const { names, arrays } = parseF64Lines(text, "w.f64lines");
 * await writeF64Lines("out/model.f64lines", tensors);
 * const back = await readF64Lines("out/model.f64lines", paramShapes(config)); // f32, bit-exact
 * ```
 * @module
 */
import { stat } from "node:fs/promises";
import { writeAtomic } from "../io.ts";
import { type ParamShape, paramShapes } from "../../model/config.ts";
import { numel, type Tensor } from "../../model/tensor.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { tokenizerInfo } from "../huggingface/huggingface-tokenizer.ts";
import type { FormatDescriptor } from "../format.ts";
import { FormatError } from "../../model/error.ts";
import { hex8 } from "../fnv1a64.ts";
import { F64LinesError } from "./f64lines-error.ts";
import { type LinesSink, parseLines, type ValuesSink } from "./f64lines-parse.ts";
import { memoryWindow, runInMemory, runOnFile, STREAM_CHUNK } from "./f64lines-window.ts";
import { type ModelRules, ModelSink, tokenizerRecord } from "./f64lines-model.ts";
import { type F64LinesRecord, writeF64LinesStreaming } from "./f64lines-write.ts";
import { f64linesConfigPath, f64linesConfigToml, readF64linesConfig } from "./f64lines-config.ts";

export { fnv1a64Hex, stringChecksum } from "../fnv1a64.ts";
export { F64LinesError, type F64LinesErrorCode } from "./f64lines-error.ts";
export { encodeF64Token } from "./f64lines-encode.ts";
export { decodeF64Token } from "./f64lines-scan.ts";
export {
  type F64LinesRecord,
  tensorsToF64Lines,
  weightsToF64Lines,
  weightsToF64LinesBytes,
  writeF64Lines,
  writeF64LinesArrays,
  writeF64LinesStreaming,
} from "./f64lines-write.ts";
export { TOKENIZER_RECORD_PREFIX, tokenizerRecord } from "./f64lines-model.ts";
export { f64linesConfigPath, f64linesConfigToml, readF64linesConfig } from "./f64lines-config.ts";

/** What a parse gives back: parallel names and arrays, each array's line, and the file's checksum. */
export interface F64Lines {
  names: string[];
  arrays: Float64Array[];
  /** The line (from 1) each array was read from. */
  lines: number[];
  /** The verified `#fnv1a32=` value, an integer in [0, 2^32). */
  checksum: number;
}

const ENC = new TextEncoder();
const bytesOf = (input: string | Uint8Array) => typeof input === "string" ? ENC.encode(input) : input;

// Each line's values as a fresh Float64Array, scanned straight into it.
function arraysSink(): LinesSink & Omit<F64Lines, "checksum"> {
  const names: string[] = [], arrays: Float64Array[] = [], lines: number[] = [];
  const line = (name: string, count: number, lineNo: number): ValuesSink => {
    const a = new Float64Array(count);
    names.push(name), arrays.push(a), lines.push(lineNo);
    return { room: (at, n) => a.subarray(at, at + n), took() {}, end() {} };
  };
  return { names, arrays, lines, line };
}

/**
 * Parses f64lines strictly, from text or from a file's bytes: any broken rule anywhere throws
 * F64LinesError with the line and column, and nothing is returned. Blank lines and CRLF endings
 * are tolerated. Every array is a fresh Float64Array.
 *
 * @example
 * ```ts
 * import { parseF64Lines } from "./f64lines.ts";
 * declare const text: string;
 * const { names, arrays, checksum } = parseF64Lines(text, "weights.f64lines");
 * ```
 */
export function parseF64Lines(input: string | Uint8Array, where = "<string>"): F64Lines {
  const sink = arraysSink();
  const checksum = runInMemory(parseLines(memoryWindow(bytesOf(input)), where, sink));
  return { names: sink.names, arrays: sink.arrays, lines: sink.lines, checksum };
}

/**
 * Reads an f64lines file as float64 arrays, strictly, as `parseF64Lines` (streamed: memory holds the
 * arrays and a 4 MiB window, not the file's text); errors name the file.
 *
 * @example
 * ```ts
 * import { readF64LinesArrays } from "./f64lines.ts";
 * const { names, arrays, checksum } = await readF64LinesArrays("out/w.f64lines");
 * ```
 */
export async function readF64LinesArrays(path: string): Promise<F64Lines> {
  const sink = arraysSink();
  const checksum = await runOnFile(path, STREAM_CHUNK, (w) => parseLines(w, path, sink));
  return { names: sink.names, arrays: sink.arrays, lines: sink.lines, checksum };
}

// A model's lines parsed in memory, then the model's rules: what `rules` makes of them.
function modelOf(input: string | Uint8Array, where: string, rules: ModelRules) {
  const sink = new ModelSink(where, rules);
  runInMemory(parseLines(memoryWindow(bytesOf(input)), where, sink));
  return sink.finish();
}

// The same, a file's lines streamed a chunk at a time.
async function modelOnFile(path: string, rules: ModelRules, chunk = STREAM_CHUNK) {
  const sink = new ModelSink(path, rules);
  await runOnFile(path, chunk, (w) => parseLines(w, path, sink));
  return sink.finish();
}

/**
 * Parses f64lines (text or file bytes) into f32 tensors, refusing (kind `f32`) any value that
 * does not narrow to f32 exactly (float64-only precision, subnormals or magnitudes); NaN narrows
 * to NaN. With `shapes` (e.g. `paramShapes(config)`), names, order and sizes must match (kind
 * `shape`) and the dims come from there; without, each tensor is one-dimensional.
 *
 * @example
 * ```ts
 * import { f64LinesToTensors } from "./f64lines.ts";
 * import { paramShapes, PRESETS } from "../../model/config.ts";
 * declare const text: string;
 * const tensors = f64LinesToTensors(text, "model.f64lines", paramShapes(PRESETS.tiny));
 * ```
 */
export function f64LinesToTensors(
  input: string | Uint8Array,
  where = "<string>",
  shapes?: readonly ParamShape[],
): Tensor[] {
  return modelOf(input, where, { shapes }).tensors;
}

/**
 * Reads an f64lines file as f32 tensors (see `f64LinesToTensors`), streamed; errors name the file.
 *
 * @example
 * ```ts
 * import { readF64Lines } from "./f64lines.ts";
 * import { paramShapes, PRESETS } from "../../model/config.ts";
 * const tensors = await readF64Lines("out/tiny.f64lines", paramShapes(PRESETS.tiny));
 * ```
 */
export async function readF64Lines(path: string, shapes?: readonly ParamShape[]): Promise<Tensor[]> {
  return (await modelOnFile(path, { shapes })).tensors;
}

/**
 * A model's f64lines file: its tensors (as `f64LinesToTensors` with `shapes`) and the tokenizer files
 * its trailing `ferry.tokenizer/<file>` records carry, each record's values the file's UTF-8 bytes,
 * checked as every format checks a tokenizer (against `vocabSize`). No records: a byte model.
 *
 * @example
 * ```ts
 * import { f64LinesModel } from "./f64lines.ts";
 * import { type ModelConfig, paramShapes } from "../../model/config.ts";
 * declare const bytes: Uint8Array, config: ModelConfig;
 * const { tensors, tokenizer } = f64LinesModel(bytes, "m.f64lines", paramShapes(config), config.vocab_size);
 * ```
 */
export function f64LinesModel(
  input: Uint8Array,
  where: string,
  shapes: readonly ParamShape[],
  vocabSize: number,
): { tensors: Tensor[]; tokenizer?: TokenizerFiles } {
  return modelOf(input, where, { shapes, records: { vocabSize } });
}

/**
 * `f64LinesModel` for a file on disk, streamed: the file is read 4 MiB at a time and each line's values
 * are parsed, narrowed to f32 and checked as they arrive, so memory holds the tensors being built and one
 * chunk, never the file's text or a line's float64 array. The same parse, the same rules and the same
 * refusals as `f64LinesModel`, the model's own rules only once the checksum has been verified, but for a
 * line longer than the window: its declared length is weighed against the bytes left in the file (its
 * end is not yet in view), so it may be refused for the first bad token it holds rather than for its
 * length or its missing end. A line's `v1|name|len|` must fit in 1 MiB.
 *
 * @example
 * ```ts
 * import { readF64LinesModel } from "./f64lines.ts";
 * import { type ModelConfig, paramShapes } from "../../model/config.ts";
 * declare const config: ModelConfig;
 * const { tensors, tokenizer } = await readF64LinesModel("m.f64lines", paramShapes(config), config.vocab_size);
 * ```
 */
export async function readF64LinesModel(
  path: string,
  shapes: readonly ParamShape[],
  vocabSize: number,
  opts: { chunkBytes?: number } = {},
): Promise<{ tensors: Tensor[]; tokenizer?: TokenizerFiles }> {
  return await modelOnFile(path, { shapes, records: { vocabSize } }, opts.chunkBytes);
}

export const f64linesFormat: FormatDescriptor<"f64"> = {
  name: "f64lines",
  summary: "plain text, one tensor per line, every value as its exact float64 spelling; config beside it",
  extension: ".f64lines",
  recognises: (path) => path.endsWith(".f64lines"),
  dtypes: ["f64"],
  defaultDtype: "f64",
  weights: "float",
  lossy: () => Promise.resolve(undefined), // every dtype widens back exactly
  async write(path, input) {
    // Tensor by tensor, a chunk at a time, then the tokenizer's records: memory stays a chunk.
    const records: F64LinesRecord[] = input.tensors.map((src) => ({
      name: src.name,
      length: numel(src.dims),
      async *chunks() {
        const count = numel(src.dims), step = 1 << 18, scratch = new Float32Array(Math.min(step, count));
        for (let at = 0; at < count; at += step) {
          yield await src.read(at, Math.min(step, count - at), scratch);
        }
      },
    }));
    for (const [file, text] of Object.entries(input.tokenizer ?? {})) {
      records.push(tokenizerRecord(file, text));
    }
    await writeF64LinesStreaming(path, records);
    const config = f64linesConfigPath(path);
    const origin = { name: input.name, step: input.step, source: input.source };
    await writeAtomic(config, [new TextEncoder().encode(f64linesConfigToml(input.config, origin))]);
    const params = input.tensors.reduce((n, t) => n + numel(t.dims), 0);
    return { file: path, bytes: (await stat(path)).size, params, tensors: input.tensors.length, config };
  },
  async read(path) {
    const { config, origin } = await readF64linesConfig(f64linesConfigPath(path)).catch((e) => {
      throw missing(e, f64linesConfigPath(path));
    });
    // Streamed: memory holds the tensors being built and a 4 MiB window, not the file's text.
    const { tensors, tokenizer } = await readF64LinesModel(path, paramShapes(config), config.vocab_size)
      .catch((e) => {
        throw missing(e, path);
      });
    return { config, tensors, origin, ...(tokenizer ? { tokenizer } : {}) };
  },
  // The records are at the file's end, under its one checksum: the whole file is read and checked.
  readTokenizer: async (path) => (await f64linesFormat.read(path)).tokenizer,
  async inspect(path) {
    const configPath = f64linesConfigPath(path);
    // The config is read first, for the model's rules, but its refusal waits: a corrupt file is refused first.
    const beside = await readF64linesConfig(configPath).then(
      ({ config }) => ({ config }),
      (e) => ({ refusal: missing(e, configPath) }),
    );
    const rules: ModelRules = "config" in beside
      ? { shapes: paramShapes(beside.config), records: { vocabSize: beside.config.vocab_size }, keep: false }
      : { keep: false };
    const sink = new ModelSink(path, rules);
    let bytes = 0;
    const checksum = await runOnFile(path, STREAM_CHUNK, (w) => (bytes = w.size, parseLines(w, path, sink)))
      .catch((e) => {
        throw missing(e, path);
      });
    if (!("config" in beside)) throw beside.refusal;
    const { tokenizer } = sink.finish(); // every value checked, none kept
    const recordBytes = Object.values(tokenizer ?? {}).reduce((n, t) => n + ENC.encode(t).length, 0);
    return {
      file: path,
      bytes,
      checksum: `fnv1a32=${hex8(checksum)}: ok, every data line is as written`,
      config: configPath,
      arrays: sink.listing,
      tokenizer: { record_bytes: recordBytes, ...tokenizerInfo(tokenizer, beside.config.vocab_size, path) },
    };
  },
  spec: "formats/f64lines/f64lines.md",
  minimalReader: "readers/f64lines.ts",
  fuzzHook: "formats/f64lines/f64lines-fuzz.ts",
};

// A file that cannot be read is a refusal like any other, in this format's error.
function missing(e: unknown, path: string): unknown {
  if (e instanceof FormatError) return e;
  const code = (e as { code?: string }).code;
  return new F64LinesError(
    path,
    "Unreadable",
    0,
    0,
    code === "ENOENT" ? "no such file" : `cannot be read: ${(e as Error).message}`,
  );
}

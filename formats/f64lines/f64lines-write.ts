/**
 * Writing f64lines (formats/f64lines/f64lines.md): named arrays as `v1|name|len|tokens` lines and the checksum
 * line, whole in memory or streamed to a file a chunk of values at a time; both give the same bytes.
 *
 * @example
 * ```ts
 * import { weightsToF64Lines, writeF64Lines } from "./f64lines-write.ts";
 * import type { Tensor } from "../../model/tensor.ts";
 * declare const tensors: Tensor[];
 * weightsToF64Lines(["w"], [new Float64Array([0.5, -0, 0.1])]); // "v1|w|3|1p-1,-0,3602879701896397p-55\n#fnv1a32=…\n"
 * await writeF64Lines("out/model.f64lines", tensors);
 * ```
 * @module
 */
import { openAtomic, writeAtomic } from "../io.ts";
import type { Tensor } from "../../model/tensor.ts";
import { type Fnv1a64, fnv1a64, hex8 } from "../fnv1a64.ts";
import { MAX_TOKEN, putUint, putValues } from "./f64lines-encode.ts";
import { F64LinesError } from "./f64lines-error.ts";

const ENC = new TextEncoder();
const UTF8 = new TextDecoder();
const NEWLINE = new Uint8Array([10]);

const sanitize = (name: string) => /[|\n\r]/.test(name) ? name.replace(/[|\n\r]/g, "_") : name;
const checksumLine = (hash: Fnv1a64) => `#fnv1a32=${hex8(hash.digest32())}\n`;

/**
 * Named arrays as f64lines bytes (UTF-8): one `v1|name|len|tokens` line each, then the checksum
 * line. Deterministic; `|`, `\n` and `\r` in names become `_`; Float32Array values widen exactly.
 * A count mismatch between names and arrays throws (kind `mismatch`) and writes nothing.
 *
 * @example
 * ```ts
 * import { weightsToF64LinesBytes } from "./f64lines-write.ts";
 * const bytes = weightsToF64LinesBytes(["w"], [new Float32Array([0.5])]); // "v1|w|1|1p-1\n#fnv1a32=…\n"
 * ```
 */
export function weightsToF64LinesBytes(
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
  where = "<string>",
): Uint8Array {
  if (names.length !== arrays.length) {
    const why = `${names.length} names but ${arrays.length} arrays: nothing written`;
    throw new F64LinesError(where, "CountMismatch", 0, 0, why);
  }
  const clean = names.map(sanitize);
  let size = 18; // the checksum line
  for (let k = 0; k < clean.length; k++) size += 24 + 3 * clean[k].length + MAX_TOKEN * arrays[k].length;
  const buf = new Uint8Array(size), dv = new DataView(buf.buffer);
  let p = 0;
  for (let k = 0; k < clean.length; k++) {
    const a = arrays[k];
    buf[p] = 118, buf[p + 1] = 49, buf[p + 2] = 124; // v1|
    p += 3 + ENC.encodeInto(clean[k], buf.subarray(p + 3)).written;
    buf[p++] = 124;
    p = putUint(dv, p, a.length);
    buf[p++] = 124;
    p = putValues(dv, p, a);
    buf[p++] = 10;
  }
  const hash = fnv1a64().update(buf, 0, p);
  p += ENC.encodeInto(checksumLine(hash), buf.subarray(p)).written;
  return buf.subarray(0, p);
}

/**
 * Named arrays as f64lines text; see `weightsToF64LinesBytes`.
 *
 * @example
 * ```ts
 * import { weightsToF64Lines } from "./f64lines-write.ts";
 * weightsToF64Lines(["a"], [[0.5, 2 ** 62]]); // "v1|a|2|1p-1,1p62\n#fnv1a32=…\n"
 * ```
 */
export function weightsToF64Lines(
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
  where = "<string>",
): string {
  return UTF8.decode(weightsToF64LinesBytes(names, arrays, where));
}

/**
 * A model's tensors as f64lines text; each f32 value widens to float64 exactly. Dims are not in
 * the format: the reader takes them from the model config (`paramShapes`).
 *
 * @example
 * ```ts
 * import { tensorsToF64Lines } from "./f64lines-write.ts";
 * import { PRESETS } from "../../model/config.ts";
 * import { initParams } from "../../model/init.ts";
 * const text = tensorsToF64Lines(initParams(PRESETS.tiny, 1));
 * ```
 */
export function tensorsToF64Lines(tensors: readonly Tensor[]): string {
  return weightsToF64Lines(tensors.map((t) => t.name), tensors.map((t) => t.data));
}

/**
 * Writes a model's tensors to `path` as f64lines, atomically (complete or absent).
 *
 * @example
 * ```ts
 * import { writeF64Lines } from "./f64lines-write.ts";
 * import { PRESETS } from "../../model/config.ts";
 * import { initParams } from "../../model/init.ts";
 * await writeF64Lines("out/tiny.f64lines", initParams(PRESETS.tiny, 1));
 * ```
 */
export async function writeF64Lines(path: string, tensors: readonly Tensor[]): Promise<void> {
  await writeAtomic(path, [
    weightsToF64LinesBytes(tensors.map((t) => t.name), tensors.map((t) => t.data), path),
  ]);
}

/**
 * Writes named float64 arrays to `path` as f64lines, atomically; a count mismatch writes nothing.
 *
 * @example
 * ```ts
 * import { writeF64LinesArrays } from "./f64lines-write.ts";
 * await writeF64LinesArrays("out/w.f64lines", ["w"], [new Float64Array([0.1])]);
 * ```
 */
export async function writeF64LinesArrays(
  path: string,
  names: readonly string[],
  arrays: readonly ArrayLike<number>[],
): Promise<void> {
  await writeAtomic(path, [weightsToF64LinesBytes(names, arrays, path)]);
}

/** One line a streaming write puts out: a name, its value count, and the values a chunk at a time. */
export interface F64LinesRecord {
  name: string;
  length: number;
  /** The values, in order, in chunks that add up to `length`. */
  chunks(): AsyncIterable<ArrayLike<number>> | Iterable<ArrayLike<number>>;
}

/**
 * Writes records to `path` as f64lines, atomically and a chunk at a time: the bytes of one chunk of
 * values are all that is ever in memory, whatever the size of a line. The same bytes as
 * `weightsToF64LinesBytes` would give for the whole arrays.
 *
 * @example
 * ```ts
 * import { writeF64LinesStreaming } from "./f64lines-write.ts";
 * await writeF64LinesStreaming("out/w.f64lines", [{ name: "w", length: 2, chunks: () => [[0.5], [2]] }]);
 * ```
 */
export async function writeF64LinesStreaming(path: string, records: Iterable<F64LinesRecord>): Promise<void> {
  const w = await openAtomic(path);
  const hash = fnv1a64(); // this write's own: another f64lines call may run while this one awaits
  const put = async (bytes: Uint8Array) => {
    hash.update(bytes, 0, bytes.length);
    await w.write(bytes);
  };
  try {
    for (const r of records) {
      await put(ENC.encode(`v1|${sanitize(r.name)}|${r.length}|`));
      let written = 0;
      for await (const chunk of r.chunks()) {
        if (chunk.length === 0) continue;
        const buf = new Uint8Array(1 + MAX_TOKEN * chunk.length + MAX_TOKEN), dv = new DataView(buf.buffer);
        let p = 0;
        if (written > 0) buf[p++] = 44;
        p = putValues(dv, p, chunk);
        written += chunk.length;
        await put(buf.subarray(0, p));
      }
      if (written !== r.length) {
        const why = `${r.name}: ${written} values where ${r.length} were declared`;
        throw new F64LinesError(path, "CountMismatch", 0, 0, why);
      }
      await put(NEWLINE);
    }
    await w.write(ENC.encode(checksumLine(hash)));
  } catch (e) {
    await w.abort();
    throw e;
  }
  await w.commit();
}

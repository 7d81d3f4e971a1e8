/**
 * Covariances kept on disk rather than in memory: a calibration pass at Qwen3-0.6B's widths makes
 * 3.4 GB of them (f64, 123 MB a layer), and GPTQ needs one at a time, in the order the pass made them.
 * Each is written once to a file in the temporary folder (`TMPDIR`), which is unlinked as soon as it is
 * open, so nothing is left behind however the process ends; the map reads one back on `get`. The
 * entry read last is kept, so names that share an input (q, k and v; gate and up) get the same array,
 * which GPTQ takes as one factor. Every read-back lands in one reused buffer (a fresh view of it each
 * time, so identity still tells covariances apart): an array from `get` holds its values only until
 * another covariance is read. The quantizers use each one before asking for the next; 123 MB a layer
 * at Qwen3-0.6B's widths is not left for the collector.
 *
 * Hand-written because no library offers a disk-backed map of typed arrays with synchronous reads, and
 * the quantizers read the covariances through a `ReadonlyMap`.
 *
 * @example
 * ```ts
 * import { createCovarianceFile } from "./covariance-file.ts";
 * const file = createCovarianceFile();
 * file.put(["q", "k"], new Float64Array([1, 0, 0, 1]));
 * await file.written();
 * file.covariances.get("k"); // Float64Array [1, 0, 0, 1], read back from the file
 * file.covariances.get("q") === file.covariances.get("k"); // true: the entry read last is kept
 * file.close();
 * ```
 * @module
 */
import { closeSync, mkdtempSync, openSync, readSync, rmdirSync, unlinkSync, write } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A covariance map whose arrays live in an unlinked temporary file. */
export interface CovarianceFile {
  /**
   * Writes `data` once, under every name in `names`, in the background: until it is on file, `get`
   * hands out `data` itself (so the caller does not wait for the disk, and must not change `data`).
   */
  put(names: readonly string[], data: Float64Array): void;
  /** Resolves once everything put is on file (rejects if a write failed). */
  written(): Promise<void>;
  /** The covariances written so far, each read back on `get`. */
  readonly covariances: ReadonlyMap<string, Float64Array>;
  /** Bytes written. */
  readonly bytes: () => number;
  /** Closes the file once its writes end (its space is freed); a later `get` or `put` throws. */
  close(): void;
}

const closeLater = new FinalizationRegistry<{ fd?: number }>((held) => {
  if (held.fd !== undefined) closeSync(held.fd);
});

/** Where one covariance lies in the file. */
interface Extent {
  offset: number;
  length: number;
}

/**
 * A new covariance file in `dir` (default: the temporary folder). See the module's example.
 */
export function createCovarianceFile(dir = tmpdir()): CovarianceFile {
  const folder = mkdtempSync(join(dir, "ferry-covariance-"));
  const path = join(folder, "covariances.f64");
  const fd = openSync(path, "w+");
  let linked = true;
  // Unlinked at once where the system allows it (not Windows): the space is freed when the file closes.
  try {
    unlinkSync(path);
    rmdirSync(folder);
    linked = false;
  } catch { /* removed on close */ }
  // Closed when the map is collected, if nobody closed it (a calibration kept by a long-lived process).
  const held: { fd?: number } = { fd };
  const extents = new Map<string, Extent>();
  let end = 0, last: { extent: Extent; data: Float64Array } | undefined;
  // The buffer every read-back lands in, grown to the largest read so far.
  let spare = new ArrayBuffer(0);
  // Covariances still being written, and who waits for the writes to end.
  const writing = new Map<Extent, Float64Array>();
  let failure: Error | undefined, closed = false;
  const waiting: Array<() => void> = [];
  const open = () => {
    if (failure) throw failure;
    if (closed || held.fd === undefined) throw new Error(`covariance file ${path}: used after close`);
    return held.fd;
  };
  const settle = () => {
    if (writing.size > 0 && !failure) return;
    for (const wake of waiting.splice(0)) wake();
    if (closed && writing.size === 0 && held.fd !== undefined) {
      closeSync(held.fd);
      held.fd = undefined;
      if (linked) unlinkSync(path), rmdirSync(folder);
    }
  };
  const read = (extent: Extent): Float64Array => {
    open();
    const pending = writing.get(extent);
    if (pending) return pending;
    if (last?.extent === extent) return last.data;
    if (spare.byteLength < extent.length * 8) spare = new ArrayBuffer(extent.length * 8);
    const data = new Float64Array(spare, 0, extent.length);
    const bytes = new Uint8Array(spare, 0, extent.length * 8);
    for (let done = 0; done < bytes.length;) {
      const n = readSync(open(), bytes, done, bytes.length - done, extent.offset + done);
      if (n <= 0) throw new Error(`covariance file ${path}: short read at byte ${extent.offset + done}`);
      done += n;
    }
    last = { extent, data };
    return data;
  };
  const covariances: ReadonlyMap<string, Float64Array> = {
    get: (name) => {
      const extent = extents.get(name);
      return extent && read(extent);
    },
    has: (name) => extents.has(name),
    get size() {
      return extents.size;
    },
    keys: () => extents.keys(),
    // A generator stands in for a map's iterator: each covariance is read only when reached.
    values: function* () {
      for (const extent of extents.values()) yield read(extent);
    } as () => MapIterator<Float64Array>,
    entries: function* () {
      for (const [name, extent] of extents) yield [name, read(extent)] as [string, Float64Array];
    } as () => MapIterator<[string, Float64Array]>,
    [Symbol.iterator]: () => covariances.entries(),
    forEach(f, self) {
      for (const [name, data] of covariances) f.call(self, data, name, covariances);
    },
  };
  closeLater.register(covariances, held, held);
  return {
    put(names, data) {
      const fd = open(), extent = { offset: end, length: data.length };
      const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      end += bytes.length;
      for (const name of names) extents.set(name, extent);
      writing.set(extent, data);
      const from = (done: number) => {
        if (done === bytes.length) return writing.delete(extent), settle();
        write(fd, bytes, done, bytes.length - done, extent.offset + done, (err, n) => {
          if (!err) return from(done + n);
          failure ??= new Error(`covariance file ${path}: cannot write (${err.message})`);
          writing.delete(extent);
          settle();
        });
      };
      from(0);
    },
    written: () =>
      new Promise<void>((resolve, reject) => {
        const done = () => (failure ? reject(failure) : resolve());
        if (writing.size === 0 || failure) done();
        else waiting.push(done);
      }),
    covariances,
    bytes: () => end,
    close() {
      if (closed) return;
      closed = true;
      closeLater.unregister(held);
      last = undefined, spare = new ArrayBuffer(0);
      settle();
    },
  };
}

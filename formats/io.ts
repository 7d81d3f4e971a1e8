/**
 * File helpers every format shares: nothing half-written ever looks valid, because each file is
 * written under a temporary name and renamed into place only when complete.
 *
 * @example
 * ```ts
 * import { openAtomic, writeAtomic } from "./io.ts";
 * declare const prefix: Uint8Array, header: Uint8Array, payload: Uint8Array, chunk: Uint8Array;
 * await writeAtomic("out/model.dmexp", [prefix, header, payload]);
 * const w = await openAtomic("out/big.bin");
 * await w.write(chunk); await w.commit(); // or w.abort()
 * ```
 *
 * A path that cannot be opened for reading is refused here, in one sentence for every format and
 * command: `out/nope.gguf: no such file`, `out/ferry.f32.hf: is a folder, expected a file`.
 *
 * A temporary never outlives its writer for long: it is removed on every exit the process can see
 * (an error, `process.exit`, SIGINT, SIGTERM, SIGHUP), and one left by a writer that was killed
 * outright (SIGKILL) is removed by the next write to the same target.
 * @module
 */
import { type FileHandle, open, readdir, rename, rm } from "node:fs/promises";
import { rmSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import process from "node:process";
import { FormatError } from "../model/error.ts";

/** A file being written under a temporary name. */
export interface AtomicWriter {
  /** Appends bytes. */
  write(bytes: Uint8Array): Promise<void>;
  /** Overwrites bytes already written, at `position` (a header field known only at the end). */
  patch(position: number, bytes: Uint8Array): Promise<void>;
  /** Flushes, closes and renames the file into place. */
  commit(): Promise<void>;
  /** Closes and deletes the temporary file. */
  abort(): Promise<void>;
}

/**
 * Opens `path` for an atomic write: the data goes to `path.<pid>.tmp` until `commit`. Temporaries
 * that a killed writer left beside `path` (its pid no longer running) are removed first, and this
 * one is removed on every exit the process sees: an error, `process.exit`, SIGINT, SIGTERM, SIGHUP.
 */
export async function openAtomic(path: string): Promise<AtomicWriter> {
  await removeStaleTemporaries(path);
  const tmp = `${path}.${process.pid}.tmp`;
  track(tmp);
  let fh: FileHandle;
  try {
    fh = await open(tmp, "w");
  } catch (e) {
    untrack(tmp);
    throw e;
  }
  let closed = false;
  const close = async () => {
    if (!closed) closed = true, await fh.close();
  };
  return {
    async write(bytes) {
      let off = 0;
      while (off < bytes.length) {
        const { bytesWritten } = await fh.write(bytes, off, bytes.length - off);
        off += bytesWritten;
      }
    },
    async patch(position, bytes) {
      let off = 0;
      while (off < bytes.length) {
        const { bytesWritten } = await fh.write(bytes, off, bytes.length - off, position + off);
        off += bytesWritten;
      }
    },
    async commit() {
      await fh.sync();
      await close();
      await rename(tmp, path);
      untrack(tmp);
    },
    async abort() {
      await close().catch(() => {});
      await rm(tmp, { force: true });
      untrack(tmp);
    },
  };
}

/** `NAME.<pid>.tmp`: the temporary name of an atomic write of NAME by process `pid`. */
const TEMP_NAME = /^(.*)\.(\d+)\.tmp$/;

/**
 * Removes the temporaries of `path` (`path.<pid>.tmp`) whose writer is gone: a process that was
 * killed with SIGKILL, or lost its machine, could not remove its own. A temporary of a process that
 * is still running is left alone. Returns the paths removed.
 *
 * @example
 * ```ts
 * import { removeStaleTemporaries } from "./io.ts";
 * await removeStaleTemporaries("out/ferry.bf16.dmexp"); // ["out/ferry.bf16.dmexp.4242.tmp"]
 * ```
 */
export async function removeStaleTemporaries(path: string): Promise<string[]> {
  const dir = dirname(path), name = basename(path);
  let entries: string[];
  try {
    entries = await readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const entry of entries) {
    const m = TEMP_NAME.exec(entry);
    if (!m || m[1] !== name) continue;
    const pid = Number(m[2]);
    if (pid === process.pid || isRunning(pid)) continue;
    await rm(join(dir, entry), { force: true });
    removed.push(join(dir, entry));
  }
  return removed;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as { code?: string }).code === "EPERM"; // alive, but someone else's
  }
}

// The temporaries this process has open, removed by the exit and signal handlers below. The handlers
// are installed only while a write is in flight, so a process that writes nothing keeps its defaults.
const inFlight = new Set<string>();
const SIGNALS = [["SIGINT", 130], ["SIGTERM", 143], ["SIGHUP", 129]] as const;
const onSignal: Record<string, () => void> = {};
for (const [signal, code] of SIGNALS) {
  onSignal[signal] = () => {
    removeInFlight();
    process.exit(code);
  };
}

function removeInFlight(): void {
  for (const tmp of inFlight) rmSync(tmp, { force: true });
  inFlight.clear();
}

function track(tmp: string): void {
  if (inFlight.size === 0) {
    process.on("exit", removeInFlight);
    for (const [signal] of SIGNALS) {
      try {
        process.on(signal, onSignal[signal]);
      } catch { /* a runtime without this signal (Windows has no SIGHUP) */ }
    }
  }
  inFlight.add(tmp);
}

function untrack(tmp: string): void {
  inFlight.delete(tmp);
  if (inFlight.size === 0) {
    process.off("exit", removeInFlight);
    for (const [signal] of SIGNALS) process.off(signal, onSignal[signal]);
  }
}

/** Writes the chunks, in order, to `path` atomically. */
export async function writeAtomic(path: string, chunks: Uint8Array[]): Promise<void> {
  const w = await openAtomic(path);
  try {
    for (const c of chunks) await w.write(c);
  } catch (e) {
    await w.abort();
    throw e;
  }
  await w.commit();
}

/** What a reader expects to find at a path: a file, a folder (a Hugging Face export), or either. */
export type InputKind = "file" | "folder" | "either";

/**
 * The refusal of a path the runtime could not open, as a `FormatError` (field `file`): the one
 * sentence every command prints for it. `e` is the runtime's error (its `code` decides the words).
 *
 * @example
 * ```ts
 * import { unreadable } from "./io.ts";
 * unreadable("out/nope.gguf", { code: "ENOENT" }).message; // "out/nope.gguf: no such file (Unreadable)"
 * ```
 */
export function unreadable(path: string, e: unknown): FormatError {
  const code = (e as { code?: string }).code;
  const why = code === "ENOENT"
    ? "no such file"
    : code === "EISDIR"
    ? "is a folder, expected a file"
    : code === "ENOTDIR"
    ? "a part of this path is a file, not a folder"
    : code === "EACCES" || code === "EPERM"
    ? "permission denied"
    : `cannot be read (${(e as Error).message})`;
  return new FormatError(path, "Unreadable", "file", `${path}: ${why}`, {
    expected: "a readable file",
    found: why,
  });
}

/**
 * Refuses, with the sentence of `unreadable`, a path that does not exist or is not the kind the reader
 * expects: `PATH: no such file`, `PATH: is a folder, expected a file`, `PATH: is a file, expected a
 * folder`. Every command checks its input through here (formats/mod.ts's `formatOf` does) before any
 * reader opens it.
 *
 * @example
 * ```ts
 * import { requireInput } from "./io.ts";
 * requireInput("out/ferry.f16.gguf", "file");
 * requireInput("out/nope.gguf", "file"); // throws FormatError: out/nope.gguf: no such file
 * ```
 */
export function requireInput(path: string, kind: InputKind = "either"): void {
  let folder: boolean;
  try {
    folder = statSync(path).isDirectory();
  } catch (e) {
    throw unreadable(path, e);
  }
  if (folder && kind === "file") throw unreadable(path, { code: "EISDIR" });
  if (!folder && kind === "folder") {
    throw new FormatError(path, "Unreadable", "file", `${path}: is a file, expected a folder`, {
      expected: "a folder",
      found: "a file",
    });
  }
}

/** True on a little-endian host (every platform Deno and Bun ship for); formats store little-endian. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
// The one endianness check: every format imports this module, and views f32 arrays as file bytes
// without swapping, so a big-endian host is refused here, once, before any file is touched.
if (!LITTLE_ENDIAN) {
  throw new Error("ferry needs a little-endian host (file bytes are viewed as f32 arrays as they are)");
}

/** The bytes of an f32 array as stored on disk (little-endian), without copying. */
export function f32Bytes(data: Float32Array): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Fills `into` from `position`, looping over short reads. `onShort` makes the error for a file that
 * ends early, so each format reports it with its own error type.
 */
export async function readExact(
  fh: FileHandle,
  into: Uint8Array,
  position: number,
  onShort: () => Error,
): Promise<Uint8Array> {
  let got = 0;
  while (got < into.length) {
    const { bytesRead } = await fh.read(into, got, into.length - got, position + got);
    if (bytesRead === 0) throw onShort();
    got += bytesRead;
  }
  return into;
}

/**
 * `readExact` on a worker thread of the runtime on both runtimes, so that the caller's thread can work
 * while many such reads are in flight. Under Deno the piece is read through its own `Deno.FsFile` of
 * `path`: Deno's node:fs reads ran on its main thread (a read issued before a busy second on the main
 * thread made no progress during it), while `Deno.FsFile.read` runs on Deno's blocking pool.
 */
export async function readExactAside(
  fh: FileHandle,
  path: string,
  into: Uint8Array,
  position: number,
  onShort: () => Error,
): Promise<Uint8Array> {
  const deno = (globalThis as { Deno?: typeof Deno }).Deno;
  if (deno === undefined) return await readExact(fh, into, position, onShort);
  // Opened and positioned synchronously, so the first read is in flight before this returns, even if
  // the caller's thread then stays busy for a while.
  const file = deno.openSync(path, { read: true });
  try {
    file.seekSync(position, deno.SeekMode.Start);
    for (let got = 0; got < into.length;) {
      const n = await file.read(into.subarray(got));
      if (n === null || n === 0) throw onShort();
      got += n;
    }
    return into;
  } finally {
    file.close();
  }
}

/** Options of `chunksAt`. */
export interface ChunkOptions {
  /** Bytes per chunk (rounded down to a multiple of 8); default 4 MiB. */
  chunkBytes?: number;
  onProgress?: (done: number, total: number) => void;
}

/**
 * Reads `length` bytes from `start` in chunks, with the next read already in flight while the caller
 * works on the current chunk. Each yielded chunk is only valid until the next one is requested.
 */
export async function* chunksAt(
  fh: FileHandle,
  start: number,
  length: number,
  onShort: () => Error,
  opts: ChunkOptions = {},
): AsyncGenerator<Uint8Array> {
  const size = Math.max(8, Math.floor((opts.chunkBytes ?? 4 << 20) / 8) * 8); // whole values of every dtype
  const bufs = [new Uint8Array(Math.min(size, length)), new Uint8Array(Math.min(size, length))];
  let off = 0, k = 0;
  const fetch = () => {
    if (off >= length) return undefined;
    const n = Math.min(size, length - off);
    const p = readExact(fh, bufs[k++ & 1].subarray(0, n), start + off, onShort);
    off += n;
    p.catch(() => {}); // awaited below; this only stops an abandoned read from being reported as unhandled
    return p;
  };
  let next = fetch(), done = 0;
  while (next) {
    const chunk = await next;
    next = fetch();
    yield chunk;
    opts.onProgress?.(done += chunk.length, length);
  }
}

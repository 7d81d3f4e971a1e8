/**
 * File helpers every format shares: nothing half-written ever looks valid, because each file is
 * written under a temporary name and renamed into place only when complete.
 *
 * @example
 * ```ts
 * await writeAtomic("out/model.dmexp", [prefix, header, payload]);
 * const w = await openAtomic("out/big.bin");
 * await w.write(chunk); await w.commit(); // or w.abort()
 * ```
 * @module
 */
import { open, rename, rm } from "node:fs/promises";
import process from "node:process";

/** A file being written under a temporary name. */
export interface AtomicWriter {
  /** Appends bytes. */
  write(bytes: Uint8Array): Promise<void>;
  /** Flushes, closes and renames the file into place. */
  commit(): Promise<void>;
  /** Closes and deletes the temporary file. */
  abort(): Promise<void>;
}

/** Opens `path` for an atomic write: the data goes to `path.<pid>.tmp` until `commit`. */
export async function openAtomic(path: string): Promise<AtomicWriter> {
  const tmp = `${path}.${process.pid}.tmp`;
  const fh = await open(tmp, "w");
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
    async commit() {
      await fh.sync();
      await close();
      await rename(tmp, path);
    },
    async abort() {
      await close();
      await rm(tmp, { force: true });
    },
  };
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

/** True on a little-endian host (every platform Deno and Bun ship for); formats store little-endian. */
export const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The bytes of an f32 array as stored on disk (little-endian), without copying. */
export function f32Bytes(data: Float32Array): Uint8Array {
  if (!LITTLE_ENDIAN) throw new Error("ferry needs a little-endian host");
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

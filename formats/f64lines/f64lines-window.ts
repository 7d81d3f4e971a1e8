/**
 * What an f64lines parse (formats/f64lines/f64lines-parse.ts) reads from: a window over its input's bytes, either
 * all of them in memory or a file read a chunk at a time. The parse is a generator of steps that yields
 * whenever it needs more bytes than the window holds; a driver runs it, reading on at each yield (a
 * file) or never (bytes in memory, where the window is the whole input and no step yields).
 *
 * @example
 * ```ts
 * import { memoryWindow, runInMemory, runOnFile, STREAM_CHUNK } from "./f64lines-window.ts";
 * import { type LinesSink, parseLines } from "./f64lines-parse.ts";
 * declare const bytes: Uint8Array, sink: LinesSink; // bytes: the file
 * const sum = runInMemory(parseLines(memoryWindow(bytes), "m.f64lines", sink));
 * const same = await runOnFile("m.f64lines", STREAM_CHUNK, (w) => parseLines(w, "m.f64lines", sink));
 * ```
 * @module
 */
import { type FileHandle, open } from "node:fs/promises";
import { readExact } from "../io.ts";
import { F64LinesError } from "./f64lines-error.ts";

/** Bytes read at a time from a file, and the most of a line's values parsed at a time. */
export const STREAM_CHUNK = 4 << 20;
/** The most a file window holds beyond a chunk: a line's `v1|name|len|` must fit in it. */
export const MAX_LINE_HEAD = 1 << 20;

/** The input not yet parsed: buf[pos, len), which are the input's bytes from offset base + pos. */
export interface Window {
  buf: Uint8Array;
  pos: number;
  len: number;
  /** The input offset of buf[0]. */
  base: number;
  /** The input's size in bytes. */
  size: number;
  /** Whether the window holds the input's end: buf[len - 1] is its last byte. */
  eof: boolean;
  /** The most bytes of a line's values parsed at a time (and, from a file, read at a time). */
  chunk: number;
}

/** A parse's steps: each `yield` asks the driver for more bytes in the window. */
export type Steps<T> = Generator<void, T, void>;

/** A window over bytes in memory: all of the input, at once. */
export function memoryWindow(bytes: Uint8Array, chunk = STREAM_CHUNK): Window {
  return { buf: bytes, pos: 0, len: bytes.length, base: 0, size: bytes.length, eof: true, chunk };
}

/** Runs a parse over a memory window to its end: it never needs more bytes. */
export function runInMemory<T>(steps: Steps<T>): T {
  const r = steps.next();
  if (!r.done) throw new Error("f64lines: a parse of bytes in memory asked for more bytes");
  return r.value;
}

/**
 * Runs a parse over the file at `path`, read `chunk` bytes at a time (at least 64: tests make it tiny to
 * cross every boundary) whenever the parse asks for more.
 */
export async function runOnFile<T>(path: string, chunk: number, parse: (w: Window) => Steps<T>): Promise<T> {
  const fh = await open(path, "r");
  try {
    const w = fileWindow(fh, (await fh.stat()).size, path, Math.max(64, chunk));
    const steps = parse(w);
    for (let r = steps.next();; r = steps.next()) {
      if (r.done) return r.value;
      await w.fill();
    }
  } finally {
    await fh.close();
  }
}

// A window over a file: each fill moves the unparsed bytes to the front and reads the next chunk after them.
function fileWindow(
  fh: FileHandle,
  size: number,
  where: string,
  chunk: number,
): Window & { fill(): Promise<void> } {
  const w = {
    buf: new Uint8Array(chunk + MAX_LINE_HEAD),
    pos: 0,
    len: 0,
    base: 0,
    size,
    eof: size === 0,
    chunk,
    async fill() {
      if (w.eof) return;
      if (w.pos > 0) w.buf.copyWithin(0, w.pos, w.len), w.len -= w.pos, w.base += w.pos, w.pos = 0;
      if (w.len + chunk > w.buf.length) {
        const bigger = new Uint8Array(w.len + chunk);
        bigger.set(w.buf.subarray(0, w.len));
        w.buf = bigger;
      }
      const want = Math.min(chunk, size - w.base - w.len), at = w.base + w.len;
      const changed = () => new F64LinesError(where, "Unreadable", 0, 0, "the file changed while being read");
      await readExact(fh, w.buf.subarray(w.len, w.len + want), at, changed);
      w.len += want;
      w.eof = w.base + w.len >= size;
    },
  };
  return w;
}

/**
 * The step that finds the next line's end: the index in buf of the next newline, reading on while there
 * is none and fewer than `ahead` bytes are in; -1 when there is none in what was read. `clear` is an
 * input offset before which the caller already knows there is none, so no byte is searched twice.
 */
export function* findLine(w: Window, ahead: number, clear = 0): Steps<number> {
  for (;;) {
    const from = Math.max(w.pos, clear - w.base), at = w.buf.subarray(from, w.len).indexOf(10);
    if (at >= 0) return from + at;
    if (w.eof || w.len - w.pos >= ahead) return -1;
    clear = w.base + w.len;
    yield;
  }
}

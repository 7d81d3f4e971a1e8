/**
 * The one f64lines parser (formats/f64lines/f64lines.md): lines read from a window (formats/f64lines/f64lines-window.ts),
 * strictly and all or nothing, each data line's values handed to a sink a batch at a time as they are
 * scanned, the checksum kept running in a hasher of the parse's own. Every reader is this parse and a
 * sink: the arrays of `parseF64Lines`, the tensors and tokenizer of a model (formats/f64lines/f64lines-model.ts).
 *
 * Refusals name the line and the column (in characters) of the first broken rule. Over bytes in memory
 * every line is whole in the window; from a file, a line longer than the window is read a chunk at a
 * time, so its declared length is weighed against the bytes left in the file, and it may be refused for
 * a bad token before its length or its missing end is seen.
 *
 * @example
 * ```ts
 * import { discard, type LinesSink, parseLines } from "./f64lines-parse.ts";
 * import { memoryWindow, runInMemory } from "./f64lines-window.ts";
 * declare const bytes: Uint8Array; // the file
 * const names: string[] = [];
 * const sink: LinesSink = { line: (name) => (names.push(name), discard()) };
 * const checksum = runInMemory(parseLines(memoryWindow(bytes), "m.f64lines", sink));
 * ```
 * @module
 */
import { type Fnv1a64, fnv1a64, hex8 } from "../fnv1a64.ts";
import { F64LinesError, type F64LinesErrorCode } from "./f64lines-error.ts";
import { FAILS, NOT_A_TOKEN, type ScanFailure, scanRefusal, scanValues, TOO_MANY } from "./f64lines-scan.ts";
import { findLine, MAX_LINE_HEAD, type Steps, type Window } from "./f64lines-window.ts";

/** What a reader makes of the lines: where each data line's values go. */
export interface LinesSink {
  /** A data line whose head is read and checked (`count` is not yet): where its values go. */
  line(name: string, count: number, lineNo: number): ValuesSink;
}

/** Where one line's values go, a batch at a time. */
export interface ValuesSink {
  /** The array the next `n` values (the line's values at..at+n) are scanned into: exactly n long. */
  room(at: number, n: number): Float64Array;
  /** The first `n` of `values` are the line's values from `at`; `column(i)` is the i-th one's column. */
  took(values: Float64Array, n: number, at: number, column: (i: number) => number): void;
  /** Every value of the line is in. */
  end(): void;
}

/** A sink for values read only to be checked: scanned into a scratch array (kept by the caller), dropped. */
export function discard(scratch = { values: new Float64Array(0) }): ValuesSink {
  return {
    room(_at, n) {
      if (scratch.values.length < n) scratch.values = new Float64Array(Math.max(n, 1 << 16));
      return scratch.values.subarray(0, n);
    },
    took() {},
    end() {},
  };
}

type Fail = (code: F64LinesErrorCode, column: number, why: string) => never;

const NAME = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const LOOSE = new TextDecoder("utf-8", { ignoreBOM: true });
const CHECKSUM_TAG = new TextEncoder().encode("#fnv1a32=");

/**
 * Parses the window's input to its end: every line checked, every data line's values handed to `sink`,
 * the checksum verified last. Returns the checksum, an integer in [0, 2^32). Blank lines and CRLF
 * endings are tolerated.
 */
export function* parseLines(w: Window, where: string, sink: LinesSink): Steps<number> {
  const hash = fnv1a64();
  let lineNo = 0, sum = -1, sumLine = 0;
  while (!w.eof || w.pos < w.len) {
    lineNo++;
    const fail: Fail = (code, column, why) => {
      throw new F64LinesError(where, code, lineNo, column, why);
    };
    const nl = yield* findLine(w, MAX_LINE_HEAD);
    const { buf, pos } = w;
    if (nl < 0 && w.eof) fail("Unterminated", columnAt(buf, pos, w.len), "the last line has no \\n");
    if (nl === pos || (nl === pos + 1 && buf[pos] === 13)) { // a blank line
      w.pos = nl + 1;
      continue;
    }
    if (sum >= 0) fail("LineAfterChecksum", 1, "the checksum line must be the last non-blank line");
    if (buf[pos] === 118 && buf[pos + 1] === 49 && buf[pos + 2] === 124) { // v1|
      yield* dataLine(w, nl, lineNo, sink, hash, fail);
      continue;
    }
    // Not data: the checksum line, or a refusal (a line with no end in view is at least 1 MiB long).
    sum = checksumLine(buf, pos, nl < 0 ? w.len : lineEnd(buf, pos, nl), fail), sumLine = lineNo;
    w.pos = nl + 1;
  }
  if (sum < 0) throw new F64LinesError(where, "MissingChecksum", lineNo + 1, 1, "no #fnv1a32= line");
  if (hash.digest32() !== sum) {
    const why = `the lines hash to ${hex8(hash.digest32())}: the file is corrupt`;
    throw new F64LinesError(where, "ChecksumMismatch", sumLine, 10, why);
  }
  return sum;
}

// The end of the line from `pos` whose newline is at `nl`, before any `\r`.
const lineEnd = (buf: Uint8Array, pos: number, nl: number) => nl > pos && buf[nl - 1] === 13 ? nl - 1 : nl;

// For messages: the column (in characters, from 1) of byte `at` on the line starting at byte `start`. Every
// line's head is measured, so ASCII (a byte a character) is counted without decoding.
function columnAt(buf: Uint8Array, start: number, at: number): number {
  for (let i = start; i < at; i++) {
    if (buf[i] >= 0x80) return LOOSE.decode(buf.subarray(start, at)).length + 1;
  }
  return at - start + 1;
}

// A line buf[pos, end) that is not data: the checksum line's value, or the refusal of an unknown line.
function checksumLine(buf: Uint8Array, pos: number, end: number, fail: Fail): number {
  if (end - pos >= 9 && CHECKSUM_TAG.every((c, i) => buf[pos + i] === c)) {
    const h = LOOSE.decode(buf.subarray(pos + 9, end));
    if (!/^[0-9a-f]{8}$/.test(h)) fail("MalformedChecksum", 10, `'${h}' is not 8 lowercase hex digits`);
    return parseInt(h, 16);
  }
  const bar = buf.subarray(pos, end).indexOf(124);
  const tag = LOOSE.decode(buf.subarray(pos, bar < 0 ? end : pos + bar));
  if (tag === "v1") fail("WrongFieldCount", columnAt(buf, pos, end), "a v1 line is v1|<name>|<len>|<values>");
  return fail("UnsupportedVersion", 1, `unknown version tag '${tag.slice(0, 40)}' (this reader knows v1)`);
}

/** A data line's head `v1|name|len|`, read and checked. */
interface LineHead {
  name: string;
  count: number;
  /** The index in buf where the values start. */
  values: number;
  /** The columns of the length field and of the first value. */
  lenColumn: number;
  valuesColumn: number;
}

// One `v1|name|len|values` line: its head checked, then its values a batch at a time, each batch cut
// after its last comma (a token never spans two), scanned into the sink and hashed as they come.
function* dataLine(
  w: Window,
  nl: number,
  lineNo: number,
  sink: LinesSink,
  hash: Fnv1a64,
  fail: Fail,
): Steps<void> {
  const head = lineHead(w, nl, fail), { count, lenColumn } = head;
  const values = sink.line(head.name, count, lineNo);
  hash.update(w.buf, w.pos, head.values);
  w.pos = head.values;
  // Input offsets, valid as the window moves on: the newline's once it is in view, and before that, how
  // far there is none.
  let nlAt = nl < 0 ? -1 : w.base + nl, clear = w.base + w.len;
  let got = 0, column = head.valuesColumn;
  for (let ended = false; !ended;) {
    if (nlAt < 0) {
      const at = yield* findLine(w, w.chunk, clear);
      if (at < 0 && w.eof) {
        fail("Unterminated", column + columnAt(w.buf, w.pos, w.len) - 1, "the last line has no \\n");
      }
      nlAt = at < 0 ? -1 : w.base + at, clear = w.base + w.len;
    }
    const eol = nlAt < 0 ? -1 : lineEnd(w.buf, w.pos, nlAt - w.base), stop = batchEnd(w, eol);
    if (stop < 0) fail("InvalidToken", column, "a value token longer than the read window");
    ended = stop === eol;
    if (stop === w.pos && !(ended && column === head.valuesColumn)) {
      fail("InvalidToken", column, `'': ${FAILS[NOT_A_TOKEN][1]}`); // an empty token between two batches
    }
    if (stop > w.pos) {
      const into = values.room(got, Math.min(count - got, ((stop - w.pos) >> 1) + 1));
      const r = scanValues(w.buf, w.pos, stop, into);
      if (typeof r !== "number") return refuseValues(w, r, stop, eol, got, column, head, fail);
      const start = w.pos, at = column;
      values.took(into, r, got, (i) => at + tokenOffset(w.buf, start, i));
      got += r;
    }
    if (ended) hash.line(w.buf, w.pos, stop);
    else hash.update(w.buf, w.pos, stop + 1); // through the comma that ends the batch
    column += stop + 1 - w.pos;
    w.pos = ended ? nlAt - w.base + 1 : stop + 1;
  }
  if (got !== count) fail("LengthMismatch", lenColumn, `declares ${count} values but holds ${got}`);
  values.end();
}

// The head of the data line at w.pos, whose newline is at `nl` (-1: not in view, the window holds 1 MiB).
function lineHead(w: Window, nl: number, fail: Fail): LineHead {
  const { buf, pos } = w;
  const eol = nl < 0 ? -1 : lineEnd(buf, pos, nl), end = eol < 0 ? w.len : eol;
  const p2 = indexIn(buf, 124, pos + 3, end), p3 = p2 < 0 ? -1 : indexIn(buf, 124, p2 + 1, end);
  if (p3 < 0) {
    if (eol >= 0) fail("WrongFieldCount", columnAt(buf, pos, eol), "a v1 line is v1|<name>|<len>|<values>");
    fail("WrongFieldCount", 1, "a v1 line is v1|<name>|<len>|<values> (with v1|<name>|<len>| within 1 MiB)");
  }
  let name = "";
  try {
    name = NAME.decode(buf.subarray(pos + 3, p2));
  } catch {
    fail(
      "InvalidUtf8",
      columnAt(buf, pos, pos + 3 + utf8Prefix(buf.subarray(pos + 3, p2))),
      "the name is not valid UTF-8",
    );
  }
  if (name.includes("\r")) fail("InvalidName", 4, "the name holds \\r (a writer makes it _)");
  const field = LOOSE.decode(buf.subarray(p2 + 1, p3)), lenColumn = columnAt(buf, pos, p2 + 1);
  if (!/^(0|[1-9][0-9]{0,14})$/.test(field)) {
    fail("InvalidLength", lenColumn, `'${field}' is not a canonical length`);
  }
  const count = +field, values = p3 + 1;
  // n values need at least n - 1 commas: refuse a lying length before allocating for it, against the
  // line's bytes where its end is in view (always, in memory), else against the bytes left in the file.
  if (eol >= 0 && count > eol - values + 1) {
    fail("LengthMismatch", lenColumn, `declares ${count} values but holds ${countValues(buf, values, eol)}`);
  }
  if (eol < 0 && count > w.size - (w.base + values) + 1) {
    fail("LengthMismatch", lenColumn, `declares ${count} values, more than the file holds`);
  }
  return { name, count, values, lenColumn, valuesColumn: columnAt(buf, pos, values) };
}

// Where the batch of values from w.pos ends: the line's end (eol, -1 if not in view) when it is within a
// chunk, else just before the last comma within the chunk; a single token longer than a chunk runs to
// the line's end where that is in view. -1 when none of these is.
function batchEnd(w: Window, eol: number): number {
  if (eol >= 0 && eol - w.pos <= w.chunk) return eol;
  const comma = w.buf.subarray(w.pos, Math.min(w.pos + w.chunk, eol < 0 ? w.len : eol)).lastIndexOf(44);
  return comma >= 0 ? w.pos + comma : eol;
}

// Refuses a batch of values whose scan stopped at `r`, at the offending token's column.
function refuseValues(
  w: Window,
  r: ScanFailure,
  stop: number,
  eol: number,
  got: number,
  column: number,
  head: LineHead,
  fail: Fail,
): never {
  if (r.code === TOO_MANY) {
    const holds = eol < 0 ? "more" : got + countValues(w.buf, w.pos, eol);
    fail("LengthMismatch", head.lenColumn, `declares ${head.count} values but holds ${holds}`);
  }
  const [code, why] = scanRefusal(w.buf, r, stop);
  return fail(code, column + columnAt(w.buf, w.pos, r.at) - 1, why);
}

// The first index of byte c in buf[from, to), or -1.
function indexIn(buf: Uint8Array, c: number, from: number, to: number): number {
  const i = buf.subarray(from, to).indexOf(c);
  return i < 0 ? -1 : from + i;
}

// For messages only: the byte offset from `start` of the i-th comma-separated token there.
function tokenOffset(buf: Uint8Array, start: number, i: number): number {
  let p = start;
  for (let k = 0; k < i; k++) p = buf.indexOf(44, p) + 1;
  return p - start;
}

// For messages only: how many comma-separated values buf[vs, end) holds.
function countValues(buf: Uint8Array, vs: number, end: number): number {
  let count = end > vs ? 1 : 0;
  for (let i = vs; i < end; i++) if (buf[i] === 44) count++;
  return count;
}

// For messages only: how many leading bytes are valid UTF-8. A prefix decodes in streaming mode unless it
// holds a bad sequence, so bisect.
function utf8Prefix(b: Uint8Array): number {
  let ok = 0, no = b.length;
  while (no - ok > 1) {
    const mid = (ok + no) >>> 1;
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(b.subarray(0, mid), { stream: true }), ok = mid;
    } catch {
      no = mid;
    }
  }
  return ok;
}

/**
 * A model in f64lines (formats/f64lines/f64lines.md, "Model weights" and "The tokenizer records"): its tensors,
 * one line each in the config's order, then the tokenizer's `ferry.tokenizer/<file>` records. ModelSink
 * is what a reader makes of the parsed lines: each tensor's values narrowed to f32 as they arrive, each
 * record's bytes gathered. The model's own rules are enforced by `finish`, once the parse has verified the
 * checksum, in the order a reader of the whole file meets them: the number of tensors, each tensor's
 * name, size and values in turn, the shared tensor check, then the records.
 *
 * @example
 * ```ts
 * import { ModelSink } from "./f64lines-model.ts";
 * import { parseLines } from "./f64lines-parse.ts";
 * import { memoryWindow, runInMemory } from "./f64lines-window.ts";
 * import { paramShapes, PRESETS } from "../../model/config.ts";
 * const config = PRESETS.default;
 * declare const bytes: Uint8Array; // the file
 * const sink = new ModelSink("m.f64lines", { shapes: paramShapes(config), records: { vocabSize: 258 } });
 * runInMemory(parseLines(memoryWindow(bytes), "m.f64lines", sink));
 * const { tensors, tokenizer } = sink.finish();
 * ```
 * @module
 */
import { checkTensors, type ParamShape } from "../../model/config.ts";
import { FormatError, messageWithoutCode } from "../../model/error.ts";
import { numel, type Tensor } from "../../model/tensor.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../../model/tokenizer-types.ts";
import { checkTokenizerFiles } from "../huggingface/huggingface-tokenizer.ts";
import { f64linesConfigPath } from "./f64lines-config.ts";
import { encodeF64Token } from "./f64lines-encode.ts";
import { F64LinesError, type F64LinesErrorCode } from "./f64lines-error.ts";
import { discard, type LinesSink, type ValuesSink } from "./f64lines-parse.ts";
import type { F64LinesRecord } from "./f64lines-write.ts";

/** The name prefix of the records that carry a model's tokenizer files (formats/f64lines/f64lines.md). */
export const TOKENIZER_RECORD_PREFIX = "ferry.tokenizer/";

/**
 * A tokenizer file as an f64lines record: its UTF-8 bytes, one integer value (0 to 255) each, named
 * `ferry.tokenizer/<file name>`.
 *
 * @example
 * ```ts
 * import { tokenizerRecord } from "./f64lines-model.ts";
 * tokenizerRecord("tokenizer.json", "{}").name; // "ferry.tokenizer/tokenizer.json"
 * ```
 */
export function tokenizerRecord(file: string, text: string): F64LinesRecord {
  const bytes = new TextEncoder().encode(text);
  const step = 1 << 20;
  return {
    name: TOKENIZER_RECORD_PREFIX + file,
    length: bytes.length,
    *chunks() {
      for (let at = 0; at < bytes.length; at += step) yield bytes.subarray(at, at + step);
    },
  };
}

/** What the lines must be, for a ModelSink. */
export interface ModelRules {
  /** The tensors, in order (`paramShapes(config)`); absent, each line is a one-dimensional tensor. */
  shapes?: readonly ParamShape[];
  /** Present: a model, whose trailing `ferry.tokenizer/` lines are its tokenizer's records, checked
   * against `vocabSize`. Absent: every line is a tensor. */
  records?: { vocabSize: number };
  /** False: every value is checked and none kept (`info`); `tensors` stays empty. Default true. */
  keep?: boolean;
}

const TEXT = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The tensors (and tokenizer records) of a model's lines; see the module's doc. */
export class ModelSink implements LinesSink {
  /** The tensors, as they are read (their data filled in as the lines' values arrive). */
  readonly tensors: Tensor[] = [];
  /** Every line's name and value count, in order. */
  readonly listing: { name: string; length: number }[] = [];
  private readonly sized: { name: string; dims: number[]; data: { length: number } }[] = [];
  private readonly files: Record<string, string> = {};
  private readonly scratch = { values: new Float64Array(0) };
  private tensorLines = 0;
  private firstRecord = 0;
  // The first refusal of the tensors' own rules, and of the records', in line order.
  private tensorIssue?: F64LinesError;
  private recordIssue?: F64LinesError;

  constructor(private readonly where: string, private readonly rules: ModelRules) {}

  line(name: string, count: number, lineNo: number): ValuesSink {
    this.listing.push({ name, length: count });
    if (this.rules.records && name.startsWith(TOKENIZER_RECORD_PREFIX)) {
      return this.record(name, count, lineNo);
    }
    if (this.firstRecord === 0) return this.tensor(name, count, lineNo);
    const why = `${name}: a tensor after the tokenizer records`;
    this.recordIssue ??= this.refusal("InvalidTokenizer", lineNo, 4, why);
    return discard(this.scratch);
  }

  /**
   * The tensors, and the tokenizer when the lines carry one, once every line is read and the checksum
   * verified; or the first refusal of the model's rules.
   */
  finish(): { tensors: Tensor[]; tokenizer?: TokenizerFiles } {
    const { shapes, records } = this.rules, { tensors } = this;
    if (shapes && this.tensorLines !== shapes.length) {
      const why = `holds ${this.tensorLines} arrays where ${shapes.length} are expected`;
      throw this.refusal("ShapeMismatch", 0, 0, why);
    }
    if (this.tensorIssue) throw this.tensorIssue;
    // The line-by-line match is f64lines' own rule (its order is canonical); the shared check below is the
    // one every reader ends with.
    const bad = shapes && checkTensors(shapes, this.sized);
    if (bad) throw new F64LinesError(this.where, bad.code, 0, 0, bad.message, bad);
    if (!records || this.firstRecord === 0) return { tensors };
    return { tensors, tokenizer: this.tokenizer(records.vocabSize) };
  }

  // A tensor's line: its values narrowed into the tensor the next shape implies, or dropped when it is not
  // that tensor (the first such line is refused by `finish`, as is a line beyond the shapes, by count).
  private tensor(name: string, count: number, lineNo: number): ValuesSink {
    const { shapes, keep = true } = this.rules;
    const s = shapes?.[this.tensorLines++];
    if (shapes && !s) return discard(this.scratch);
    if (s && (s.name !== name || numel(s.dims) !== count)) {
      const why = `${name} holds ${count} values where ${s.name} [${s.dims}] is expected`;
      this.tensorIssue ??= this.refusal("ShapeMismatch", lineNo, 4, why);
      return discard(this.scratch);
    }
    const dims = s ? [...s.dims] : [count], data = keep ? new Float32Array(count) : undefined;
    this.sized.push({ name, dims, data: data ?? { length: count } });
    if (data) this.tensors.push({ name, dims, data });
    const { room } = discard(this.scratch);
    return {
      room,
      took: (values, n, at, column) => {
        if (data) data.set(values.subarray(0, n), at); // rounds to nearest, as Math.fround
        if (this.tensorIssue) return;
        for (let i = 0; i < n; i++) {
          const v = values[i];
          if (Math.fround(v) === v || v !== v) continue; // NaN narrows to NaN
          const why = `${name}[${at + i}] = ${encodeF64Token(v)} is not an f32 value`;
          this.tensorIssue = this.refusal("NotF32", lineNo, column(i), why);
          return;
        }
      },
      end() {},
    };
  }

  // A tokenizer record's line: its values, each a byte, gathered into the file's text.
  private record(name: string, count: number, lineNo: number): ValuesSink {
    this.firstRecord ||= lineNo;
    const file = name.slice(TOKENIZER_RECORD_PREFIX.length);
    const issue = (why: () => string) => {
      this.recordIssue ??= this.refusal("InvalidTokenizer", lineNo, 4, `${name}: ${why()}`);
    };
    if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(file) || Object.hasOwn(this.files, file)) {
      issue(() => `not a tokenizer file name (${TOKENIZER_FILE_NAMES.join(", ")}) or a repeat`);
      return discard(this.scratch);
    }
    const bytes = new Uint8Array(count), { room } = discard(this.scratch);
    return {
      room,
      took(values, n, at) {
        for (let i = 0; i < n; i++) {
          const v = values[i];
          if (!(v >= 0 && v <= 255 && Number.isInteger(v))) {
            issue(() => `value ${at + i} is ${v}, not a byte (an integer 0 to 255)`);
          }
          bytes[at + i] = v;
        }
      },
      end: () => {
        try {
          this.files[file] = TEXT.decode(bytes);
        } catch {
          issue(() => "the bytes are not valid UTF-8");
        }
      },
    };
  }

  // The records' files as a tokenizer, checked as every format checks one.
  private tokenizer(vocabSize: number): TokenizerFiles {
    if (this.recordIssue) throw this.recordIssue;
    if (this.files["tokenizer.json"] === undefined) {
      const why = `the tokenizer records have no ${TOKENIZER_RECORD_PREFIX}tokenizer.json`;
      throw this.refusal("InvalidTokenizer", 0, 0, why);
    }
    const tokenizer = this.files as TokenizerFiles, where = this.where;
    try {
      checkTokenizerFiles(tokenizer, vocabSize, { dir: where, config: f64linesConfigPath(where) });
    } catch (e) {
      // The shared check's refusal, as this format's error (it names the record's file and field).
      if (!(e instanceof FormatError)) throw e;
      throw this.refusal("InvalidTokenizer", this.firstRecord, 4, messageWithoutCode(e));
    }
    return tokenizer;
  }

  private refusal(code: F64LinesErrorCode, line: number, column: number, why: string): F64LinesError {
    return new F64LinesError(this.where, code, line, column, why);
  }
}

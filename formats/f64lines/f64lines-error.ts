/**
 * The one error of f64lines (formats/f64lines/f64lines.md) and its codes: every rule a text, a file or a call
 * can break names itself here, with the line and column where it broke.
 *
 * @example
 * ```ts
 * throw new F64LinesError("w.f64lines", "InvalidToken", 3, 12, "'1.5': not a value token");
 * ```
 * @module
 */
import { formatErrorClass, type RefusalDetail } from "../../model/error.ts";

/**
 * Every way a text can fail to be f64lines, or a call can fail to make or use one; formats/f64lines/f64lines.md
 * ("Refusals") says what each means.
 */
export const F64LINES_REFUSALS = [
  "InvalidUtf8", // a name whose bytes are not UTF-8 (any other bad byte breaks another rule)
  "Unterminated", // the last line has no `\n`
  "UnsupportedVersion", // a line that is not blank, `v1|…` or the checksum line
  "WrongFieldCount", // a `v1` line without exactly four `|`-separated fields
  "InvalidName", // a name holding `\r`, which a writer never leaves
  "InvalidLength", // the declared length is not canonical decimal digits
  "LengthMismatch", // the declared length disagrees with the values
  "InvalidToken", // a value token outside the grammar
  "OutOfRange", // a token in the grammar whose value is not a float64, or outside its form's range
  "NonCanonical", // a float64 spelled otherwise than its one canonical way
  "MissingChecksum", // no `#fnv1a32=` line
  "MalformedChecksum", // a `#fnv1a32=` line without exactly 8 lowercase hex digits
  "ChecksumMismatch", // the checksum does not match the lines
  "LineAfterChecksum", // a non-blank line after the checksum line
  "CountMismatch", // writing: names and arrays differ in count
  "NotF32", // reading tensors: a value that does not narrow to f32 exactly
  "ShapeMismatch", // reading tensors: names or lengths differ from the expected shapes
  "MissingTensor", // reading tensors: the shared check finds an expected tensor absent
  "UnknownTensor", // ... or a tensor the shapes do not name
  "DuplicateTensor", // ... or one twice
  "InvalidTokenizer", // reading a model: a `ferry.tokenizer/<file>` record that is not a tokenizer file's bytes
  "Unreadable", // the file (or the config beside it) cannot be read
] as const;
/** A code of `F64LINES_REFUSALS`. */
export type F64LinesErrorCode = typeof F64LINES_REFUSALS[number];

/**
 * The one error of the format: `where` names the file (or `<string>`), `line` and `column` (both
 * from 1; 0 when no line applies) point at the offending line and token, `code` names the rule.
 *
 * @example
 * ```ts
 * try { parseF64Lines(text, "w.f64lines"); } catch (e) { if (e instanceof F64LinesError) e.code; }
 * ```
 */
export class F64LinesError
  extends formatErrorClass(F64LINES_REFUSALS, (_where, _field, sentence) => sentence) {
  constructor(
    readonly where: string,
    code: F64LinesErrorCode,
    readonly line: number,
    readonly column: number,
    message: string,
    detail?: RefusalDetail,
  ) {
    // The field of a line-oriented text is its line (the rule is `code`); a whole-file rule names the file.
    super(
      where,
      code,
      line > 0 ? `line ${line}` : "file",
      `${where}${line > 0 ? `:${line}:${column}` : ""}: ${message}`,
      detail,
    );
  }
}

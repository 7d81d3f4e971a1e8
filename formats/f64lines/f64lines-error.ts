/**
 * The one error of f64lines (formats/f64lines/f64lines.md) and its codes: every rule a text, a file or a call
 * can break names itself here, with the line and column where it broke.
 *
 * @example
 * ```ts
 * import { F64LinesError } from "./f64lines-error.ts";
 * throw new F64LinesError("w.f64lines", "InvalidToken", 3, 12, "'1.5': not a value token");
 * ```
 * @module
 */
import { formatErrorClass, type RefusalDetail, TENSOR_REFUSALS } from "../../model/error.ts";

/**
 * Every way a text can fail to be f64lines, or a call can fail to make or use one; formats/f64lines/f64lines.md
 * ("Refusals") says what each means.
 */
export const F64LINES_REFUSALS = [
  ["InvalidUtf8", "Unterminated", "UnsupportedVersion", "WrongFieldCount", "InvalidName"], // a line
  ["InvalidLength", "LengthMismatch", "InvalidToken", "OutOfRange", "NonCanonical"], // its length and values
  ["MissingChecksum", "MalformedChecksum", "ChecksumMismatch", "LineAfterChecksum"], // the checksum line
  ["CountMismatch", "NotF32", "InvalidTokenizer", "Unreadable"], // writing, tensors, records, the file
  TENSOR_REFUSALS, // tensors: the shared check
] as const;
/** A code of `F64LINES_REFUSALS`. */
export type F64LinesErrorCode = typeof F64LINES_REFUSALS[number][number];

/**
 * The one error of the format: `where` names the file (or `<string>`), `line` and `column` (both
 * from 1; 0 when no line applies) point at the offending line and token, `code` names the rule.
 *
 * @example
 * ```ts
 * import { F64LinesError } from "./f64lines-error.ts";
 * import { parseF64Lines } from "./f64lines.ts";
 * declare const text: string;
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

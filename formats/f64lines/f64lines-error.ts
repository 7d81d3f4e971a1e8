/**
 * The one error of f64lines (formats/f64lines/f64lines.md) and its kinds: every rule a text, a file or a call
 * can break names itself here, with the line and column where it broke.
 *
 * @example
 * ```ts
 * import { F64LinesError } from "./f64lines-error.ts";
 * throw new F64LinesError("w.f64lines", "token", 3, 12, "'1.5': not a value token");
 * ```
 * @module
 */
import { FormatError, type RefusalDetail } from "../../model/error.ts";

/** Every way a text can fail to be f64lines, or a call can fail to make or use one. */
export type F64LinesErrorKind =
  | "utf8" // a name whose bytes are not UTF-8 (any other bad byte breaks another rule)
  | "unterminated" // the last line has no `\n`
  | "version" // a line that is not blank, `v1|…` or the checksum line
  | "fields" // a `v1` line without exactly four `|`-separated fields
  | "name" // a name holding `\r`, which a writer never leaves
  | "length-field" // the declared length is not canonical decimal digits
  | "length" // the declared length disagrees with the values
  | "token" // a value token outside the grammar
  | "domain" // a token in the grammar whose value is not a float64, or outside its form's range
  | "noncanonical" // a float64 spelled otherwise than its one canonical way
  | "checksum-missing" // no `#fnv1a32=` line
  | "checksum-format" // a `#fnv1a32=` line without exactly 8 lowercase hex digits
  | "checksum" // the checksum does not match the lines
  | "after-checksum" // a non-blank line after the checksum line
  | "mismatch" // writing: names and arrays differ in count
  | "f32" // reading tensors: a value that does not narrow to f32 exactly
  | "shape" // reading tensors: names or lengths differ from the expected shapes
  | "tokenizer" // reading a model: a `ferry.tokenizer/<file>` record that is not a tokenizer file's bytes
  | "file"; // the file (or the config beside it) cannot be read

/**
 * The one error of the format: `where` names the file (or `<string>`), `line` and `column` (both
 * from 1; 0 when no line applies) point at the offending line and token, `kind` names the rule.
 *
 * @example
 * ```ts
 * import { F64LinesError } from "./f64lines-error.ts";
 * import { parseF64Lines } from "./f64lines.ts";
 * declare const text: string;
 * try { parseF64Lines(text, "w.f64lines"); } catch (e) { if (e instanceof F64LinesError) e.kind; }
 * ```
 */
export class F64LinesError extends FormatError {
  constructor(
    readonly where: string,
    readonly kind: F64LinesErrorKind,
    readonly line: number,
    readonly column: number,
    message: string,
    detail?: RefusalDetail,
  ) {
    // The field of a line-oriented text is its line (the rule is `kind`); a whole-file rule names the file.
    super(
      where,
      line > 0 ? `line ${line}` : "file",
      `${where}${line > 0 ? `:${line}:${column}` : ""}: ${kind}: ${message}`,
      detail,
    );
    this.name = "F64LinesError";
  }
}

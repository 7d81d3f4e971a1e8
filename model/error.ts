/**
 * The one error shape. Every refusal of input, whatever the format, is a `FormatError`: the file it
 * refused (`path`), the place in it (`field`: a header key, a tensor name, a config field, a line), the
 * rule it broke (`code`, a short PascalCase name), and, where the check knows them, what it `expected` and
 * what it `found`. Each format's own error is made by `formatErrorClass` from the format's one table of
 * codes, the table its spec explains, so a caller that must map every refusal to one answer (the server,
 * a CLI's exit code 1) catches this one class, and a caller that cares about one format still catches
 * that format's class.
 *
 * It lives in model/ because model/ and formats/ both refuse input (a config file, a set of tensors)
 * and formats/ may import model/, never the reverse.
 *
 * @example
 * ```ts
 * import { FormatError } from "./error.ts";
 * import { formatOf } from "../formats/mod.ts";
 * const path = "out/ferry.bf16.dmexp";
 * try {
 *   await formatOf(path).read(path);
 * } catch (e) {
 *   if (e instanceof FormatError) console.error(e.path, e.field, e.expected, e.found);
 * }
 * ```
 * @module
 */

/** What a refusal can say besides its sentence: the value it wanted and the value it got. */
export interface RefusalDetail {
  /** What the check wanted, in words (`"a positive integer"`, `"dims [64, 258]"`). */
  expected?: string;
  /** What the input held instead, in words. */
  found?: string;
}

/**
 * The codes a class may throw, each the PascalCase name of one rule (`BadMagic`, `Truncated`), once.
 * A format writes them as a table in rows of related rules, a row shared where formats run one check
 * alike (`TENSOR_REFUSALS`); what each means is said once, in the spec's "Refusals" table.
 */
export type RefusalCodes = readonly string[];

/** The refusals of tensors that are not the ones a config implies (model/config.ts `checkTensors`). */
export const TENSOR_REFUSALS = [
  "MissingTensor",
  "UnknownTensor",
  "DuplicateTensor",
  "ShapeMismatch",
] as const;

/**
 * The refusals that belong to no one format, thrown as a plain `FormatError`: a file that cannot be
 * read, the tokenizer files every format carries and the tokenizer section dmexp and lut4 share, a model
 * an engine cannot run. docs/hostile-input.md ("Refusal codes") says what each means.
 */
export const FORMAT_REFUSALS = [
  ["Unreadable", "UnknownFormat", "LossyInput", "UnsupportedModel", "UnknownEngine", "DigestMismatch"],
  ["Truncated", "TrailingBytes", "BadMagic", "ChecksumMismatch", "InvalidUtf8", "InvalidJson"],
  ["InvalidTokenizer", "InvalidTemplate", "VocabMismatch", "NoTokens"],
  TENSOR_REFUSALS,
] as const;
/** A code of `FORMAT_REFUSALS`. */
export type FormatRefusal = typeof FORMAT_REFUSALS[number][number];

/**
 * A refusal of input: names the file, the field, the rule broken (`code`) and, where known, what was
 * expected and found. The message is the sentence with ` (Code)` at its end, so whoever prints it (a
 * command's one line, the server's error body) names the rule the spec explains.
 */
export class FormatError extends Error {
  /** The codes this class may carry; a format's class (`formatErrorClass`) has its own table here. */
  static readonly codes: RefusalCodes = FORMAT_REFUSALS.flat();
  /** The rule the input broke: one of its class's `codes`. */
  readonly code: string;
  /** What the check wanted; empty when the message alone says it. */
  readonly expected: string;
  /** What the input held; empty when the message alone says it. */
  readonly found: string;

  /** `message` is the whole sentence (a format's class words it its way, always naming path and field). */
  constructor(
    readonly path: string,
    code: FormatRefusal,
    readonly field: string,
    message: string,
    detail: RefusalDetail = {},
  ) {
    super(`${message} (${code})`);
    this.name = new.target.name;
    this.code = code;
    this.expected = detail.expected ?? "";
    this.found = detail.found ?? "";
  }
}

/** How a format's class words a refusal from its parts; the default is `PATH: FIELD: WHY`. */
export type Sentence = (path: string, field: string, why: string) => string;

/**
 * The error class of a format, from its table of codes (a `const` array of rows of codes): one line
 * per format, `export class GgufError extends formatErrorClass(GGUF_REFUSALS) {}`. Its constructor takes
 * `(path, code, field, why, detail?)`, where `code` can only be one of the table's; the message is
 * `sentence(path, field, why)` and the code, and the class's `codes` is the table's codes, so a test
 * can check every refusal against it and the spec.
 */
export function formatErrorClass<const Code extends string>(
  table: readonly (readonly Code[])[],
  sentence: Sentence = (path, field, why) => `${path}: ${field}: ${why}`,
) {
  return class extends FormatError {
    static override readonly codes: readonly Code[] = [...new Set(table.flat())];
    declare readonly code: Code;
    constructor(path: string, code: Code, field: string, why: string, detail?: RefusalDetail) {
      // FormatError's own constructor admits only its own table; this class's table bounds `code` instead.
      super(path, code as string as FormatRefusal, field, sentence(path, field, why), detail);
    }
  };
}

/** The table of codes the class of `e` may carry. */
export function codesOf(e: FormatError): RefusalCodes {
  return (e.constructor as typeof FormatError).codes;
}

/**
 * An error's message without a refusal's closing ` (Code)`: for a refusal that quotes another in its
 * own sentence (which ends with its own code), and for any other error, its message.
 */
export function messageWithoutCode(e: unknown): string {
  const message = (e as Error)?.message ?? String(e);
  const suffix = e instanceof FormatError ? ` (${e.code})` : undefined;
  return suffix && message.endsWith(suffix) ? message.slice(0, -suffix.length) : message;
}

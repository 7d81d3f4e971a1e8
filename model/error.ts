/**
 * The one error shape. Every refusal of input, whatever the format, is a `FormatError`: the file it
 * refused (`path`), the place in it (`field`: a header key, a tensor name, a config field, a line), and,
 * where the check knows them, what it `expected` and what it `found`. Each format's own error extends it,
 * so a caller that must map every refusal to one answer (the server, a CLI's exit code 1) catches this
 * one class, and a caller that cares about one format still catches that format's class.
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

/** A refusal of input: names the file, the field, and (where known) what was expected and found. */
export class FormatError extends Error {
  /** What the check wanted; empty when the message alone says it. */
  readonly expected: string;
  /** What the input held; empty when the message alone says it. */
  readonly found: string;

  /** `message` is the whole sentence (subclasses format it their way, always naming path and field). */
  constructor(readonly path: string, readonly field: string, message: string, detail: RefusalDetail = {}) {
    super(message);
    this.name = "FormatError";
    this.expected = detail.expected ?? "";
    this.found = detail.found ?? "";
  }
}

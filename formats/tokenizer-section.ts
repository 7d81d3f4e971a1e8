/**
 * The tokenizer section that dmexp (version 2) and lut4 (`ferry.lut-qwen3/2`) files end with: the
 * model's tokenizer files (`TokenizerFiles`), verbatim, behind a magic and a CRC-32 of their own. The
 * layout is in formats/dmexp/dmexp.md ("Tokenizer section"); both formats share it byte for byte.
 *
 * ```
 * [0..8)    magic "FERRYTOK"
 * [8..12)   u32 CRC-32 of bytes [12..T)
 * [12..16)  u32 N, the number of files (1 to 4)
 * N times:  u32 name length, the name (UTF-8), u32 text length, the text (UTF-8)
 * ```
 *
 * @example
 * ```ts
 * import { decodeTokenizerSection, encodeTokenizerSection } from "./tokenizer-section.ts";
 * import type { TokenizerFiles } from "../model/tokenizer-types.ts";
 * declare const files: TokenizerFiles;
 * const section = encodeTokenizerSection(files);
 * const back = decodeTokenizerSection(section, "m.dmexp", 151936); // the same files, checked
 * ```
 * @module
 */
import { crc32 } from "node:zlib";
import { FormatError, type FormatRefusal, messageWithoutCode, type RefusalDetail } from "../model/error.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../model/tokenizer-types.ts";
import { checkTokenizerFiles } from "./huggingface/huggingface-tokenizer.ts";
import { decodeShared } from "./json.ts";

/** The section's first 8 bytes. */
export const TOKENIZER_SECTION_MAGIC = "FERRYTOK";
/** Magic, CRC and file count. */
const FIXED_BYTES = 16;

/**
 * The codes a section's refusal carries: its framing's, and those of the tokenizer files' own checks,
 * which it passes on. Each container's table (dmexp's, lut4's) includes them all.
 */
export const TOKENIZER_SECTION_REFUSALS = [
  ["Truncated", "TrailingBytes", "BadMagic", "ChecksumMismatch", "InvalidUtf8"],
  ["InvalidJson", "InvalidTokenizer", "InvalidTemplate", "VocabMismatch"],
] as const satisfies readonly (readonly FormatRefusal[])[];
/** A code of `TOKENIZER_SECTION_REFUSALS`. */
export type TokenizerSectionRefusal = typeof TOKENIZER_SECTION_REFUSALS[number][number];

const ENC = new TextEncoder();
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/**
 * The section's bytes for these files, in `TOKENIZER_FILE_NAMES` order.
 *
 * @example
 * ```ts
 * import { encodeTokenizerSection } from "./tokenizer-section.ts";
 * import type { AtomicWriter } from "./io.ts";
 * declare const w: AtomicWriter, text: string; // text: tokenizer.json
 * await w.write(encodeTokenizerSection({ "tokenizer.json": text }));
 * ```
 */
export function encodeTokenizerSection(files: TokenizerFiles): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const name of TOKENIZER_FILE_NAMES) {
    const text = files[name];
    if (text === undefined) continue;
    const n = ENC.encode(name), t = ENC.encode(text);
    const head = new Uint8Array(4 + n.length + 4);
    const dv = new DataView(head.buffer);
    dv.setUint32(0, n.length, true);
    head.set(n, 4);
    dv.setUint32(4 + n.length, t.length, true);
    parts.push(head, t);
  }
  const size = FIXED_BYTES + parts.reduce((sum, p) => sum + p.length, 0);
  const out = new Uint8Array(size);
  out.set(ENC.encode(TOKENIZER_SECTION_MAGIC));
  const dv = new DataView(out.buffer);
  dv.setUint32(12, parts.length / 2, true);
  let at = FIXED_BYTES;
  for (const p of parts) out.set(p, at), at += p.length;
  dv.setUint32(8, crc32(out.subarray(12)) >>> 0, true);
  return out;
}

/**
 * Reads a section back, refusing (a `FormatError` naming `where` and the field `tokenizer.*`) a wrong
 * magic, a CRC mismatch (checked before anything inside is read), a framing that does not add up to
 * the section's length, a name that is not a tokenizer file or repeats, text that is not UTF-8, and
 * then files that `checkTokenizerFiles` refuses for a model of `vocabSize` rows (the field then names the
 * file: `tokenizer["tokenizer.json"].model.merges[7]`). `error` makes the container's own error type.
 *
 * @example
 * ```ts
 * import { decodeTokenizerSection } from "./tokenizer-section.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * declare const bytes: Uint8Array, config: ModelConfig;
 * const files = decodeTokenizerSection(bytes, "out/q.bf16.dmexp", config.vocab_size);
 * ```
 */
export function decodeTokenizerSection(
  bytes: Uint8Array,
  where: string,
  vocabSize: number,
  error: SectionErrorMaker = (code, field, why, detail) =>
    new FormatError(where, code, field, `${where}: ${field}: ${why}`, detail),
): TokenizerFiles {
  const refuse = (
    code: TokenizerSectionRefusal,
    field: string,
    why: string,
    expected: string,
    found: string,
  ) => error(code, `tokenizer.${field}`, why, { expected, found });
  if (bytes.length < FIXED_BYTES) {
    throw refuse(
      "Truncated",
      "size",
      `${bytes.length} bytes is shorter than the section's 16`,
      "at least 16 bytes",
      `${bytes.length}`,
    );
  }
  const magic = String.fromCharCode(...bytes.subarray(0, 8));
  if (magic !== TOKENIZER_SECTION_MAGIC) {
    throw refuse(
      "BadMagic",
      "magic",
      `expected "${TOKENIZER_SECTION_MAGIC}"`,
      TOKENIZER_SECTION_MAGIC,
      JSON.stringify(magic),
    );
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stored = dv.getUint32(8, true), computed = crc32(bytes.subarray(12)) >>> 0;
  if (stored !== computed) {
    throw refuse(
      "ChecksumMismatch",
      "crc32",
      `stored ${hex(stored)} but the section's CRC-32 is ${hex(computed)}`,
      hex(stored),
      hex(computed),
    );
  }
  const count = dv.getUint32(12, true);
  if (count < 1 || count > TOKENIZER_FILE_NAMES.length) {
    throw refuse(
      "InvalidTokenizer",
      "files",
      `${count} files; expected 1 to ${TOKENIZER_FILE_NAMES.length}`,
      "1 to 4",
      String(count),
    );
  }
  const files: Record<string, string> = {};
  let at = FIXED_BYTES;
  const take = (field: string) => {
    if (at + 4 > bytes.length) {
      throw refuse(
        "Truncated",
        field,
        "runs past the section's end",
        "a length inside the section",
        "truncated",
      );
    }
    const n = dv.getUint32(at, true);
    if (at + 4 + n > bytes.length) {
      throw refuse("Truncated", field, `${n} bytes run past the section's end`, "inside the section", `${n}`);
    }
    const text = decodeText(
      bytes.subarray(at + 4, at + 4 + n),
      () => refuse("InvalidUtf8", field, "not valid UTF-8", "UTF-8", "bytes"),
    );
    at += 4 + n;
    return text;
  };
  for (let k = 0; k < count; k++) {
    const name = take(`files[${k}].name`);
    if (!(TOKENIZER_FILE_NAMES as readonly string[]).includes(name) || Object.hasOwn(files, name)) {
      throw refuse(
        "InvalidTokenizer",
        `files[${k}].name`,
        `${JSON.stringify(name)} is not a tokenizer file or repeats`,
        TOKENIZER_FILE_NAMES.join(", "),
        name,
      );
    }
    files[name] = take(name);
  }
  if (at !== bytes.length) {
    throw refuse(
      "TrailingBytes",
      "size",
      `the files end at byte ${at} of ${bytes.length}`,
      `${at} bytes`,
      `${bytes.length} bytes`,
    );
  }
  if (files["tokenizer.json"] === undefined) {
    throw refuse(
      "InvalidTokenizer",
      "tokenizer.json",
      "missing",
      "tokenizer.json among the files",
      Object.keys(files).join(", "),
    );
  }
  const tokenizer = files as TokenizerFiles;
  try {
    checkTokenizerFiles(tokenizer, vocabSize, { dir: where, config: where });
  } catch (e) {
    if (!(e instanceof FormatError)) throw e;
    const said = messageWithoutCode(e), file = e.path.slice(where.length + 1);
    const why = said.slice(`${e.path}: ${e.field}: `.length);
    const field = e.field === "vocab_size" ? "vocab_size" : `tokenizer[${JSON.stringify(file)}].${e.field}`;
    // The files' checks throw only codes of the section's table; anything else is the files' fault all the same.
    const code = TOKENIZER_SECTION_REFUSALS.flat().find((c) => c === e.code) ?? "InvalidTokenizer";
    throw error(code, field, e.field === "vocab_size" ? said.slice(where.length + 2) : why, e);
  }
  return tokenizer;
}

/** Makes a container's refusal (`DmexpError`, `Lut4Error`) from a code, a field, the reason and what was expected. */
export type SectionErrorMaker = (
  code: TokenizerSectionRefusal,
  field: string,
  why: string,
  detail: RefusalDetail,
) => FormatError;

function decodeText(bytes: Uint8Array, onBad: () => Error): string {
  try {
    return decodeShared(UTF8, bytes);
  } catch {
    throw onBad();
  }
}

const hex = (x: number) => x.toString(16).padStart(8, "0");

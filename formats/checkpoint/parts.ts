/**
 * A checkpoint kept in the repository in parts: `FILE.part-aa`, `FILE.part-ab`, … (each under the
 * repository's 16 MB limit for a tracked file; the shipped model's f32 weights are 22.3 MB and compress to
 * no less than 18.7 MB) and `FILE.sha256`, the whole file's digest. `joinParts` writes FILE from them
 * once, when it is missing: the parts joined in name order, checked against the digest, then renamed into
 * place, so that a FILE that exists is whole. FILE itself is git-ignored.
 *
 * @example
 * ```ts
 * import { joinParts } from "./parts.ts";
 * joinParts("model/default/ferry.ckpt"); // true: written now; false: already there, or no parts
 * ```
 * @module
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";

/**
 * The shipped model's checkpoint as every command line and the library name it when given no input:
 * from the repository's root.
 */
export const DEFAULT_INPUT = "model/default/ferry.ckpt";
/** The shipped model's checkpoint, whatever the working directory. */
export const SHIPPED_CHECKPOINT = fileURLToPath(new URL(`../../${DEFAULT_INPUT}`, import.meta.url));

/**
 * Writes `file` from its parts and digest when it is missing; true when it did. A digest other than the
 * one recorded is refused with an error naming the parts, and nothing is written.
 */
export function joinParts(file: string): boolean {
  const digestFile = `${file}.sha256`;
  if (existsSync(file) || !existsSync(digestFile)) return false;
  const dir = dirname(file), prefix = `${basename(file)}.part-`;
  const names = readdirSync(dir).filter((n) => n.startsWith(prefix)).sort();
  const whole = Buffer.concat(names.map((n) => readFileSync(join(dir, n))));
  const want = readFileSync(digestFile, "utf8").trim().split(/\s+/)[0];
  const got = createHash("sha256").update(whole).digest("hex");
  if (got !== want) {
    throw new Error(
      `${file}: its ${names.length} parts (${prefix}*) join to SHA-256 ${got}, expected ${want} (${digestFile})`,
    );
  }
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, whole);
    renameSync(temporary, file);
  } finally {
    rmSync(temporary, { force: true });
  }
  return true;
}

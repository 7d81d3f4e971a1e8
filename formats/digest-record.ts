/**
 * A file's SHA-256 remembered between loads, trusted only while the file is provably the same one, as
 * git trusts its index: the same device and inode, size, modification time (to the millisecond) and
 * change time (to the second, all Deno reports). The change time is the check that matters: any write
 * moves it, and no user can set it back (`touch -r` moves it too). A digest is recorded only for a file
 * whose change time is at least two seconds older than the hashing, so a write landing within the same
 * second after the record cannot hide behind an unchanged change time ("racy git").
 *
 * Why: the digest is a lut4 model's identity (sessions name it), not its integrity check (CRC-32s are
 * checked on every read). Hashing 328 MB took 0.3–0.6 s of a 2 s load on two cores.
 *
 * Records are small JSON files, one per device and inode, in `$FERRY_DIGEST_DIR`, else
 * `$XDG_CACHE_HOME/ferry/digests`, else `~/.cache/ferry/digests`; `FERRY_DIGEST_DIR=off` turns them off.
 * A record that cannot be read or written is ignored: the digest is then computed, as without records.
 *
 * @example
 * ```ts
 * import { recordDigest, recordedDigest } from "./digest-record.ts";
 * import { stat } from "node:fs/promises";
 * declare function sha256Of(path: string): Promise<string>;
 * const seen = await stat("out/qwen3.q4.lut4"), started = Date.now();
 * const sha256 = await recordedDigest(seen) ?? await sha256Of("out/qwen3.q4.lut4");
 * await recordDigest("out/qwen3.q4.lut4", seen, sha256, started); // no-op where the record was found
 * ```
 * `fileSha256(path)` does all of that for a whole file.
 * @module
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readFile, stat } from "node:fs/promises";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import process from "node:process";
import { writeAtomic } from "./io.ts";

/** What of a file's `stat` a record keeps: the fields both runtimes report alike. */
export interface FileStamp {
  dev: number;
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}

/** The stored record. */
interface DigestRecord {
  /** Where the file was when recorded, for a reader of the folder (a hard link elsewhere matches too). */
  path: string;
  stamp: string;
  sha256: string;
}

const HEX64 = /^[0-9a-f]{64}$/;
/** A change time must be this much older than the hashing for its digest to be recorded. */
const SETTLED_MS = 2000;

/** The folder of the records, or undefined where they are turned off. */
export function digestRecordDir(): string | undefined {
  const env = process.env;
  if (env.FERRY_DIGEST_DIR === "off") return undefined;
  if (env.FERRY_DIGEST_DIR) return env.FERRY_DIGEST_DIR;
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "ferry", "digests");
}

/** The stamp a record must match: Deno gives change times in whole seconds, Bun to the nanosecond. */
function stampOf(s: FileStamp): string {
  return [s.dev, s.ino, s.size, Math.floor(s.mtimeMs), Math.floor(s.ctimeMs / 1000)].join(":");
}

function recordPath(dir: string, s: FileStamp): string {
  return join(dir, `${s.dev}-${s.ino}.json`);
}

/**
 * The recorded SHA-256 (hex) of the file whose `stat` is `seen` (taken before the caller reads it), when
 * a record matches it; undefined otherwise.
 */
export async function recordedDigest(seen: FileStamp): Promise<string | undefined> {
  const dir = digestRecordDir();
  if (!dir) return undefined;
  try {
    const r: DigestRecord = JSON.parse(await readFile(recordPath(dir, seen), "utf8"));
    return r.stamp === stampOf(seen) && HEX64.test(r.sha256) ? r.sha256 : undefined;
  } catch {
    return undefined; // none yet, or unreadable: the caller hashes
  }
}

/**
 * Records `sha256` for the file at `path`, hashed from `startedMs` (a `Date.now()`) on, when the file
 * was settled by then and its `stat` still matches `seen`. Best effort: resolves to whether it recorded.
 */
export async function recordDigest(
  path: string,
  seen: FileStamp,
  sha256: string,
  startedMs: number,
): Promise<boolean> {
  const dir = digestRecordDir();
  if (!dir || !HEX64.test(sha256)) return false;
  if (seen.ctimeMs > startedMs - SETTLED_MS || seen.mtimeMs > startedMs - SETTLED_MS) return false;
  try {
    if (stampOf(await stat(path)) !== stampOf(seen)) return false;
    await mkdir(dir, { recursive: true });
    const record: DigestRecord = { path: resolve(path), stamp: stampOf(seen), sha256 };
    await writeAtomic(recordPath(dir, seen), [new TextEncoder().encode(JSON.stringify(record) + "\n")]);
    return true;
  } catch {
    return false;
  }
}

/**
 * The SHA-256 (hex) of the file at `path`: its record's, or hashed in chunks (never whole: a real model
 * is large) and recorded.
 */
export async function fileSha256(path: string): Promise<string> {
  const seen = await stat(path), started = Date.now();
  const recorded = await recordedDigest(seen);
  if (recorded) return recorded;
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 })) hash.update(chunk);
  const sha256 = hash.digest("hex");
  await recordDigest(path, seen, sha256, started);
  return sha256;
}

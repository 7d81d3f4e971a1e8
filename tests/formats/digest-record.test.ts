// A recorded digest is trusted only for the very file it was taken of: same device, inode, size, times.
// A file written within the last two seconds is not recorded; a rewrite of the same size, a bad record,
// or records turned off all fall back to hashing; and readLut4 takes the record instead of hashing but
// still refuses a damaged file, whatever its record says.
import { afterEach, beforeEach, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { digestRecordDir, recordDigest, recordedDigest } from "../../formats/digest-record.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";

let dir = "", records = "";
const before = process.env.FERRY_DIGEST_DIR;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "ferry-digest-"));
  records = join(dir, "records");
  process.env.FERRY_DIGEST_DIR = records;
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  if (before === undefined) delete process.env.FERRY_DIGEST_DIR;
  else process.env.FERRY_DIGEST_DIR = before;
});

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");
/** A start of hashing late enough that the file counts as settled (a real one would be 2 s old). */
const settled = () => Date.now() + 5000;

test("a digest recorded for a settled file is found again, and only for that file", async () => {
  const a = join(dir, "a.bin"), b = join(dir, "b.bin");
  writeFileSync(a, "the model's bytes");
  writeFileSync(b, "other bytes");
  const seen = await stat(a), digest = sha256(a);
  expect(await recordedDigest(seen)).toBeUndefined();
  expect(await recordDigest(a, seen, digest, settled())).toBe(true);
  expect(await recordedDigest(await stat(a))).toBe(digest);
  expect(await recordedDigest(await stat(b))).toBeUndefined();
  expect(readdirSync(records)).toEqual([`${seen.dev}-${seen.ino}.json`]);
});

test("a file changed since its record, even to the same size, is hashed again", async () => {
  const a = join(dir, "a.bin");
  writeFileSync(a, "version one");
  const seen = await stat(a);
  expect(await recordDigest(a, seen, sha256(a), settled())).toBe(true);
  await Bun.sleep(20);
  writeFileSync(a, "version two");
  const now = await stat(a);
  expect(now.size).toBe(seen.size);
  expect(await recordedDigest(now)).toBeUndefined();
});

test("a file changed within two seconds of hashing, or changed meanwhile, is not recorded", async () => {
  const a = join(dir, "a.bin");
  writeFileSync(a, "just written");
  const seen = await stat(a);
  expect(await recordDigest(a, seen, sha256(a), Date.now())).toBe(false);
  await Bun.sleep(20);
  writeFileSync(a, "written again");
  expect(await recordDigest(a, seen, sha256(a), settled())).toBe(false);
  expect(await recordedDigest(await stat(a))).toBeUndefined();
});

test("a damaged record, a digest that is not one, or records turned off fall back to hashing", async () => {
  const a = join(dir, "a.bin");
  writeFileSync(a, "bytes");
  const seen = await stat(a);
  expect(await recordDigest(a, seen, "not a digest", settled())).toBe(false);
  expect(await recordDigest(a, seen, sha256(a), settled())).toBe(true);
  writeFileSync(join(records, `${seen.dev}-${seen.ino}.json`), "{ half a rec");
  expect(await recordedDigest(seen)).toBeUndefined();
  process.env.FERRY_DIGEST_DIR = "off";
  expect(digestRecordDir()).toBeUndefined();
  expect(await recordDigest(a, seen, sha256(a), settled())).toBe(false);
  expect(await recordedDigest(seen)).toBeUndefined();
});

test("readLut4 takes a file's record instead of hashing it, and records nothing for a fresh file", async () => {
  const path = join(dir, "m.lut4");
  copyFileSync(await smallLut4(), path);
  const truth = sha256(path);
  expect((await readLut4(path)).sha256).toBe(truth);
  expect(readdirSync(dir)).not.toContain("records"); // written just now: not recorded
  // A record that says otherwise is believed: proof that the file was not hashed.
  const told = "ab".repeat(32);
  expect(await recordDigest(path, await stat(path), told, settled())).toBe(true);
  expect((await readLut4(path)).sha256).toBe(told);
  expect((await readLut4(path, { onTokenizer: () => {} })).sha256).toBe(told);
});

test("a record does not pass a damaged lut4 file", async () => {
  const path = join(dir, "m.lut4");
  const bytes = readFileSync(await smallLut4());
  bytes[bytes.length >> 1] ^= 0x10;
  writeFileSync(path, bytes);
  expect(await recordDigest(path, await stat(path), sha256(path), settled())).toBe(true);
  await expect(readLut4(path)).rejects.toThrow(/crc32|CRC-32/);
});

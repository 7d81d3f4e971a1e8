// measure/covariance-file.ts: covariances written once and read back bit for bit, under every name they
// were put with; the entry read last is the same array; read-backs share one buffer; nothing is left in
// the folder; a closed file refuses to read.
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCovarianceFile } from "../../measure/covariance-file.ts";

test("a covariance file gives back what was put, names in order, and leaves nothing in its folder", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-cov-test-"));
  try {
    const file = createCovarianceFile(dir);
    // Unlinked as soon as it is open (on a POSIX system).
    if (process.platform !== "win32") expect(readdirSync(dir)).toEqual([]);
    const a = Float64Array.from({ length: 9 }, (_, i) => Math.sin(i) / 3);
    const b = Float64Array.from({ length: 4 }, (_, i) => -i - 0.5);
    file.put(["q", "k", "v"], a);
    file.put(["o"], b);
    // Until its bytes are on file, a covariance is the array put.
    expect(file.covariances.get("k")).toBe(a);
    await file.written();
    expect(file.bytes()).toBe(13 * 8);
    expect([...file.covariances.keys()]).toEqual(["q", "k", "v", "o"]);
    expect(file.covariances.size).toBe(4);
    expect(file.covariances.has("o")).toBe(true);
    expect(file.covariances.get("x")).toBeUndefined();
    expect(Array.from(file.covariances.get("k")!)).toEqual(Array.from(a));
    expect(file.covariances.get("k")).not.toBe(a);
    // Names of one input share the array GPTQ keys its factor by.
    expect(file.covariances.get("v")).toBe(file.covariances.get("q"));
    expect(Array.from(file.covariances.get("o")!)).toEqual(Array.from(b));
    // Each read-back is used before the next: they share one buffer, which the next read overwrites.
    const read = Array.from(file.covariances, ([name, data]) => [name, Array.from(data)]);
    expect(read).toEqual([["q", [...a]], ["k", [...a]], ["v", [...a]], ["o", [...b]]]);
    const q = file.covariances.get("q")!, o = file.covariances.get("o")!;
    expect(q).not.toBe(o); // told apart by identity, as GPTQ's factors are
    expect(Array.from(q.subarray(0, 4))).toEqual(Array.from(b)); // but q's values are gone
    file.close();
    expect(() => file.covariances.get("o")).toThrow(/used after close/);
    expect(() => file.put(["p"], b)).toThrow(/used after close/);
    expect(readdirSync(dir)).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a covariance file closed while writing finishes its writes first, then frees its folder", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-cov-test-"));
  try {
    const file = createCovarianceFile(dir);
    for (let i = 0; i < 8; i++) file.put([`m${i}`], new Float64Array(1 << 18).fill(i));
    file.close();
    await file.written();
    expect(readdirSync(dir)).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

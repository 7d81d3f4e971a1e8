// formats/checkpoint/parts.ts: a checkpoint kept in parts is joined once, whole and checked, and the
// shipped model's parts are within the repository's file limit and join to its recorded digest.
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { spawnSync } from "node:child_process";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { joinParts, SHIPPED_CHECKPOINT } from "../../formats/checkpoint/parts.ts";

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

test("parts join once into the file, in name order, checked against the digest", () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-parts-"));
  try {
    const file = join(dir, "m.ckpt"), a = Buffer.from("first part "), b = Buffer.from("second");
    writeFileSync(`${file}.part-ab`, b);
    writeFileSync(`${file}.part-aa`, a);
    writeFileSync(`${file}.sha256`, sha(Buffer.concat([a, b])) + "\n");
    expect(joinParts(file)).toBe(true);
    expect(readFileSync(file, "utf8")).toBe("first part second");
    expect(joinParts(file)).toBe(false); // already there: left as it is
    expect(joinParts(join(dir, "none.ckpt"))).toBe(false); // no digest: nothing to join
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a damaged part is refused naming the file and both digests, and nothing is written", () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-parts-"));
  try {
    const file = join(dir, "m.ckpt");
    writeFileSync(`${file}.part-aa`, "damaged");
    writeFileSync(`${file}.sha256`, sha(Buffer.from("intact!")));
    expect(() => joinParts(file)).toThrow(/m\.ckpt: its 1 parts .* expected [0-9a-f]{64}/);
    expect(existsSync(file)).toBe(false);
    expect(readdirSync(dir).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the shipped model: every part under 16 MB, and the checkpoint is what they join to", () => {
  const dir = dirname(SHIPPED_CHECKPOINT);
  const parts = readdirSync(dir).filter((n) => n.startsWith("ferry.ckpt.part-"));
  expect(parts.length).toBeGreaterThan(1);
  for (const p of parts) expect(statSync(join(dir, p)).size).toBeLessThan(16 * 2 ** 20);
  const recorded = readFileSync(`${SHIPPED_CHECKPOINT}.sha256`, "utf8").trim();
  expect(sha(readFileSync(SHIPPED_CHECKPOINT))).toBe(recorded);
});

test("the library's export of the default model joins the parts first, as a fresh clone needs", () => {
  // A folder holding the shipped model's files but not the joined checkpoint, as a fresh clone does.
  const dir = mkdtempSync(join(tmpdir(), "ferry-fresh-"));
  try {
    const shipped = dirname(SHIPPED_CHECKPOINT), here = join(dir, "model", "default");
    mkdirSync(here, { recursive: true });
    // Everything tracked there (the parts, the digest, the config snapshot), not the joined checkpoint.
    for (const n of readdirSync(shipped).filter((n) => n !== "ferry.ckpt")) {
      copyFileSync(join(shipped, n), join(here, n));
    }
    const exportTs = join(dirname(dirname(shipped)), "formats", "export.ts");
    const script = `const { exportCheckpoint } = await import(${JSON.stringify(exportTs)});
      const s = await exportCheckpoint({ format: "dmexp", output: "out/" });
      console.log(s.file);`;
    const r = spawnSync("bun", ["--eval", script], { cwd: dir, encoding: "utf8" });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
    expect(existsSync(join(dir, r.stdout.trim()))).toBe(true);
    expect(sha(readFileSync(join(here, "ferry.ckpt")))).toBe(sha(readFileSync(SHIPPED_CHECKPOINT)));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Killed writes leave nothing behind (issue 14, item 7): a real export is killed in the middle of its
// write, with SIGTERM, SIGINT and SIGKILL, and the folder is looked at afterwards.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { openAtomic, removeStaleTemporaries, writeAtomic } from "../../formats/io.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import { tensor } from "../../model/tensor.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
// About 8 M parameters: an f32 dmexp export of it takes long enough on two busy cores to be caught mid-write.
const BIG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 256,
  intermediate_size: 1024,
  num_hidden_layers: 8,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
};

let dir = "";
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "ferry-hostile-writes-"));
  const model = paramShapes(BIG).map(({ name, dims }) => tensor(name, dims));
  for (const t of model) for (let i = 0; i < t.data.length; i += 97) t.data[i] = (i % 13) / 64;
  await writeCheckpoint(join(dir, "big.ckpt"), BIG, { step: 1, model });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const temporaries = (folder: string) => readdirSync(folder).filter((f) => f.endsWith(".tmp"));

/**
 * Starts an export of the big checkpoint into `out`, waits until its temporary file appears, then
 * sends `signal`. Returns the exit code and signal, or undefined when the export finished first.
 */
async function killMidWrite(out: string, signal: NodeJS.Signals, runtime: string[] = [process.execPath]) {
  const target = join(out, "big.f32.dmexp");
  const child = spawn(
    runtime[0],
    [
      ...runtime.slice(1),
      "scripts/export.ts",
      "--input",
      join(dir, "big.ckpt"),
      "--format",
      "dmexp",
      "--dtype",
      "f32",
      "--output",
      target,
    ],
    { cwd: ROOT, stdio: "ignore" },
  );
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal }))
  );
  let sent = false;
  const deadline = performance.now() + 60_000;
  while (!sent && performance.now() < deadline && child.exitCode === null) {
    if (temporaries(out).length > 0) {
      child.kill(signal);
      sent = true;
    } else await new Promise((r) => setTimeout(r, 2));
  }
  const result = await exited;
  return { ...result, sent, target };
}

describe("a killed export", () => {
  for (const [signal, code] of [["SIGTERM", 143], ["SIGINT", 130]] as const) {
    crossProcessTest(
      `${signal} mid-write: the process removes its temporary and leaves no target`,
      async () => {
        const out = mkdtempSync(join(dir, "out-"));
        const r = await killMidWrite(out, signal);
        expect(r.sent).toBe(true);
        expect(r.code).toBe(code);
        expect(temporaries(out)).toEqual([]);
        expect(existsSync(r.target)).toBe(false);
      },
    );
  }

  crossProcessTest("SIGTERM mid-write under Deno: the same", async () => {
    const out = mkdtempSync(join(dir, "out-"));
    const r = await killMidWrite(out, "SIGTERM", ["deno", "run", "-A", "--quiet"]);
    expect(r.sent).toBe(true);
    expect(r.code).toBe(143);
    expect(temporaries(out)).toEqual([]);
    expect(existsSync(r.target)).toBe(false);
  });

  crossProcessTest("SIGKILL mid-write leaves a temporary, and the next export removes it", async () => {
    const out = mkdtempSync(join(dir, "out-"));
    const r = await killMidWrite(out, "SIGKILL");
    expect(r.sent).toBe(true);
    expect(r.signal).toBe("SIGKILL");
    expect(existsSync(r.target)).toBe(false);
    const left = temporaries(out);
    expect(left.length).toBe(1); // nothing can run on SIGKILL
    const again = spawn(
      process.execPath,
      [
        "scripts/export.ts",
        "--input",
        join(dir, "big.ckpt"),
        "--format",
        "dmexp",
        "--dtype",
        "bf16",
        "--output",
        r.target,
      ],
      { cwd: ROOT, stdio: "ignore" },
    );
    const code = await new Promise((resolve) => again.on("exit", resolve));
    expect(code).toBe(0);
    expect(existsSync(r.target)).toBe(true);
    expect(temporaries(out)).toEqual([]);
  });
});

describe("temporaries", () => {
  crossProcessTest(
    "a stale temporary of a dead writer is removed; a live writer's and other targets' are kept",
    async () => {
      const out = mkdtempSync(join(dir, "stale-"));
      const target = join(out, "m.dmexp");
      // A pid that is not running: a child that has exited.
      const dead = spawn(process.execPath, ["-e", "0"]);
      await new Promise((r) => dead.on("exit", r));
      writeFileSync(`${target}.${dead.pid}.tmp`, "half");
      writeFileSync(`${target}.${process.pid}.tmp`, "ours");
      writeFileSync(join(out, `other.dmexp.${dead.pid}.tmp`), "another target");
      expect(await removeStaleTemporaries(target)).toEqual([`${target}.${dead.pid}.tmp`]);
      expect(temporaries(out).sort()).toEqual(
        [`m.dmexp.${process.pid}.tmp`, `other.dmexp.${dead.pid}.tmp`].sort(),
      );
    },
  );

  test("an error during a write removes the temporary and leaves no target", async () => {
    const out = mkdtempSync(join(dir, "err-"));
    const target = join(out, "x.bin");
    const bad = { length: 3 } as unknown as Uint8Array; // not bytes: the write throws
    await expect(writeAtomic(target, [new Uint8Array(4), bad])).rejects.toThrow();
    expect(readdirSync(out)).toEqual([]);
    const w = await openAtomic(target);
    await w.write(new Uint8Array(8));
    await w.abort();
    expect(readdirSync(out)).toEqual([]);
  });
});

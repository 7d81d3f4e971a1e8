// A trained model exported to lut4 once per test process, in a temporary folder removed at exit. The
// model is tests/fixtures/small-model/: the default model until 2026-12-04 (468,256 parameters, the
// `small` preset, 1,400 steps on the Brown corpus), kept for the tests that need a trained model's
// behaviour (its greedy text, its sessions, its threads) but not the shipped model's figures, at a
// twelfth of the shipped model's cost a token. Tests of what the docs say of the shipped model read
// model/default/.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { lut4Format } from "../../formats/lut4/lut4.ts";
import { tensorSource } from "../../model/tensor.ts";

export const CHECKPOINT = join(import.meta.dir, "..", "fixtures", "small-model", "ferry.ckpt");
let made: Promise<string> | undefined;

/** A folder for this test file's outputs, removed when the process exits. */
export function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "ferry-lut4-test-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Path of the small test model exported as lut4 (head tied, the default; plain rounding). */
export function smallLut4(): Promise<string> {
  made ??= (async () => {
    const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
    const path = join(scratchDir(), "ferry.lut4");
    await lut4Format.write(path, {
      config: run.config,
      tensors: run.model!.map(tensorSource),
      source: "ferry.ckpt",
      step: run.step,
      name: "ferry",
    }, { dtype: "q4" });
    return path;
  })();
  return made;
}

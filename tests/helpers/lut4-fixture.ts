// The shipped model exported to lut4 once per test process, in a temporary folder removed at exit.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { lut4Format } from "../../formats/lut4/lut4.ts";
import { tensorSource } from "../../model/tensor.ts";

export const CHECKPOINT = join(import.meta.dir, "..", "..", "model", "default", "ferry.ckpt");
let made: Promise<string> | undefined;

/** A folder for this test file's outputs, removed when the process exits. */
export function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "ferry-lut4-test-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Path of the default model exported as lut4 (head tied, the default). */
export function defaultLut4(): Promise<string> {
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

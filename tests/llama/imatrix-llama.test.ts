// llama.cpp's importance matrix both ways, against llama.cpp's own tools built from the commit
// node-llama-cpp bundles (scripts/tools/build-llama.ts puts them in ~/.cache/ferry/llama.cpp-COMMIT/):
// llama-imatrix's file (GGUF and legacy .dat) is read by ferry and holds what ferry measures on the same
// text and chunks; ferry's file is accepted by llama-quantize --imatrix. Without the built tools the
// tests are reported skipped, saying why.
import { expect, setDefaultTimeout, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { exportCheckpoint, openInput } from "../../formats/export.ts";
import { imatrixImportance, parseImatrix } from "../../formats/imatrix/imatrix.ts";
import { importanceOf } from "../../formats/gguf/gguf.ts";
import { materialize, type Tensor } from "../../model/tensor.ts";
import { calibrateOnce, lut4Calibrator, writingImatrix } from "../../measure/calibrate.ts";

setDefaultTimeout(180_000);

/** The folder of built llama.cpp tools holding both, or undefined. */
function toolsDir(): string | undefined {
  const cache = join(homedir(), ".cache", "ferry");
  if (!existsSync(cache)) return undefined;
  const dirs = readdirSync(cache).filter((d) => d.startsWith("llama.cpp-")).map((d) => join(cache, d));
  return dirs.find((d) => existsSync(join(d, "llama-imatrix")) && existsSync(join(d, "llama-quantize")));
}
const tools = toolsDir();
if (!tools) {
  console.warn(
    "imatrix-llama skipped: no llama-imatrix and llama-quantize under ~/.cache/ferry/llama.cpp-*/ (scripts/tools/build-llama.ts builds them)",
  );
}

const dir = scratchDir(), text = join(dir, "calib.txt");
// Plain English-like lines; at 256 tokens a window, about 9 windows.
writeFileSync(
  text,
  Array.from(
    { length: 160 },
    (_, i) => `Line ${i}: the jury said that the city of Atlanta had ${i % 7} reasons to act.`,
  )
    .join("\n"),
);
const setup = (async () => {
  if (!tools) return undefined;
  const folder = await qwen3Folder({ peaked: true });
  const f32 = await exportCheckpoint({
    input: folder,
    output: join(dir, "m.f32.gguf"),
    format: "gguf",
    dtype: "f32",
  });
  return { folder, model: f32.file };
})();

test.skipIf(!tools)(
  "llama-imatrix's files (GGUF and .dat) read in ferry, and hold what ferry measures on the same chunks",
  async () => {
    const { folder, model } = (await setup)!;
    const run = (out: string, ...extra: string[]) =>
      execFileSync(join(tools!, "llama-imatrix"), [
        "-m",
        model,
        "-f",
        text,
        "-o",
        out,
        "-c",
        "256",
        "-t",
        "2",
        ...extra,
      ], {
        stdio: "pipe",
      });
    const gguf = join(dir, "llama.imatrix.gguf"), dat = join(dir, "llama.imatrix.dat");
    run(gguf), run(dat, "--output-format", "dat");
    const input = await openInput(folder);
    const tensors = await Promise.all(input.tensors.map(materialize)) as Tensor[];
    // ferry on the same text: all its windows, as llama-imatrix takes all its chunks.
    const cal = await lut4Calibrator({ file: text, windows: 1000 })(input.config, tensors, input.tokenizer);
    const ours = importanceOf(cal.covariance!);
    for (const file of [gguf, dat]) {
      const m = parseImatrix(readFileSync(file), file);
      expect(m.entries.size).toBe(7 * input.config.num_hidden_layers);
      expect(m.chunkCount).toBe(cal.record.windows);
      const theirs = imatrixImportance(m, input.config, file);
      for (const [name, v] of theirs) {
        let diff = 0, sum = 0;
        for (let i = 0; i < v.length; i++) diff += Math.abs(v[i] - ours[name][i]), sum += ours[name][i];
        // Measured: at most 1.0e-4 (f32 sums in a different order, llama.cpp's kernels against ferry's).
        expect(diff / sum).toBeLessThan(1e-3);
      }
    }
    await input.close();
  },
);

test.skipIf(!tools)(
  "ferry's imatrix files (GGUF and .dat) are accepted by llama-quantize --imatrix",
  async () => {
    const { folder, model } = (await setup)!;
    const gguf = join(dir, "ferry.imatrix.gguf"), dat = join(dir, "ferry.imatrix.dat");
    const measured = calibrateOnce(lut4Calibrator({ file: text, windows: 1000 }));
    await exportCheckpoint({
      input: folder,
      output: join(dir, "ferry.q4_k_m.gguf"),
      format: "gguf",
      dtype: "q4_k_m",
      calibrate: writingImatrix(writingImatrix(measured, gguf), dat),
    });
    for (const file of [gguf, dat]) {
      const log = execFileSync(
        join(tools!, "llama-quantize"),
        ["--imatrix", file, model, join(dir, "q.gguf"), "Q4_K_M", "2"],
        { stdio: "pipe", encoding: "utf8" },
      );
      expect(log).toContain(`loaded ${7 * 2} importance matrix entries from ${file}`);
    }
  },
);

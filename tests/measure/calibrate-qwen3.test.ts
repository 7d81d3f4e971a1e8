// Calibration of a model with its own BPE tokenizer (the reduced Qwen3 shape, the real tokenizer,
// --peaked weights): the calibrated lut4 and q4_k_m files record what they were calibrated on, their
// codes differ from plain rounding's, calibrated lut4 is closer to the source on held-out text, and
// Deno writes the same bits as Bun.
import { expect, setDefaultTimeout } from "bun:test";
import { crossProcessTest, slowTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import { parseGguf } from "../../formats/gguf/gguf.ts";
import { loadEngine } from "../../engines/mod.ts";
import { lut4Calibrator } from "../../measure/calibrate.ts";
import { compareLogits, scoredWindow } from "../../measure/metrics.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";

setDefaultTimeout(180_000);

// 64 windows, as export.ts calibrates by default: 16 moved the held-out KL by under 5%.
const WINDOWS = 64, SEED = 5, FEW = 4;
const out = scratchDir();
const exported = async (name: string, format: string, dtype: string, windows: number) => {
  const input = await qwen3Folder({ peaked: true });
  const calibrate = windows > 0 ? lut4Calibrator({ windows, seed: SEED }) : undefined;
  return exportCheckpoint({ input, output: join(out, name), format, dtype, calibrate });
};

slowTest(
  "a calibrated lut4 export of a BPE model records its calibration, and is closer to the source than plain rounding",
  async () => {
    const plain = await exported("plain.lut4", "lut4", "q4", 0);
    const cal = await exported("cal.lut4", "lut4", "q4", WINDOWS);
    const record = {
      source: "brown train split",
      windows: WINDOWS,
      window_tokens: 256,
      tokens: WINDOWS * 256,
      seed: SEED,
    };
    expect((await readLut4(cal.file)).header.calibration).toEqual(record);
    expect((await readLut4(plain.file)).header.calibration).toBeUndefined();
    expect(cal.calibration).toBe(
      `64 windows of 256 tokens (16,384 tokens) of the brown train split, seed ${SEED}`,
    );
    expect(cal.data_crc32).not.toBe(plain.data_crc32);
    // Held-out text through the model's own tokenizer, the source on the float engine, each export on
    // the integer engine (as scripts/measure.ts scores them).
    const source = await loadEngine(await qwen3Folder({ peaked: true }), "float");
    const windows = evalWindows((await loadBrown()).heldOut, 4).map((w) => scoredWindow(source.tokenizer, w));
    const V = source.config.vocab_size;
    const refs = await Promise.all(windows.map((w) => source.start().feed(w.inputs, "all")));
    const meanKl = async (file: string) => {
      const engine = await loadEngine(file);
      let kl = 0, n = 0;
      for (const [i, w] of windows.entries()) {
        const c = compareLogits(refs[i], await engine.start().feed(w.inputs, "all"), V);
        kl += c.meanKL * c.positions, n += c.positions;
      }
      engine.dispose?.();
      return kl / n;
    };
    const [klPlain, klCal] = [await meanKl(plain.file), await meanKl(cal.file)];
    console.log(`reduced Qwen3, peaked: mean KL plain ${klPlain.toFixed(4)}, calibrated ${klCal.toFixed(4)}`);
    expect(klCal).toBeLessThan(0.95 * klPlain);
  },
);

slowTest(
  "a calibrated q4_k_m GGUF of a BPE model records its calibration under llama.cpp's imatrix keys",
  async () => {
    const plain = await exported("plain.gguf", "gguf", "q4_k_m", 0);
    const cal = await exported("cal.gguf", "gguf", "q4_k_m", 4);
    const meta = (f: string) => parseGguf(readFileSync(f), f).metadata;
    const m = meta(cal.file);
    expect(m.get("quantize.imatrix.dataset")).toEqual({ type: "string", value: "brown train split" });
    expect(m.get("quantize.imatrix.chunks_count")).toEqual({ type: "i32", value: 4 });
    expect(m.get("ferry.calibration.window_tokens")).toEqual({ type: "u32", value: 256 });
    expect(m.get("ferry.calibration.tokens")).toEqual({ type: "u64", value: 1024n });
    expect(meta(plain.file).has("quantize.imatrix.dataset")).toBe(false);
    expect(cal.calibration).toBe(
      `4 windows of 256 tokens (1,024 tokens) of the brown train split, seed ${SEED}`,
    );
    // The importance-weighted scale search chose other scales: the files differ beyond their metadata.
    const data = (f: string) => {
      const bytes = readFileSync(f);
      return bytes.subarray(parseGguf(bytes, f).dataOffset).toString("base64");
    };
    expect(data(cal.file)).not.toBe(data(plain.file));
  },
);

crossProcessTest("Deno writes the same calibrated lut4 bits as Bun", async () => {
  // Few windows: the property is the runtimes' agreement, which any number of windows shows.
  const bun = await exported("bun-4.lut4", "lut4", "q4", FEW);
  const input = await qwen3Folder({ peaked: true }), file = join(out, "deno.lut4");
  const script = `
    import { exportCheckpoint } from ${
    JSON.stringify(fileURLToPath(new URL("../../formats/export.ts", import.meta.url)))
  };
    import { lut4Calibrator } from ${
    JSON.stringify(fileURLToPath(new URL("../../measure/calibrate.ts", import.meta.url)))
  };
    await exportCheckpoint({ input: ${JSON.stringify(input)}, output: ${JSON.stringify(file)}, format: "lut4",
      dtype: "q4", calibrate: lut4Calibrator({ windows: ${FEW}, seed: ${SEED} }) });`;
  const r = spawnSync("deno", ["eval", "--ext=ts", script], { encoding: "utf8" });
  expect(r.stderr.replace(/^Download .*\n/gm, "")).toBe("");
  expect(r.status).toBe(0);
  expect(readFileSync(file).equals(readFileSync(bun.file))).toBe(true);
});

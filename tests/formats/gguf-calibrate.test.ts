// GGUF exports calibrated as llama.cpp's imatrix is used: the quantizers that weigh their error by
// per-column importance (Q4_K, Q6_K, IQ4_NL, and Q5_0 inside those mixes) get the diagonal of the
// calibration's input covariance, and the file records what it was measured on. Other dtypes ignore it,
// and their summary says nothing of a calibration skipped.
import { expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { calibrationNeeds, exportCheckpoint } from "../../formats/export.ts";
import { ggufFormat, IMPORTANCE_DTYPES, importanceOf, parseGguf } from "../../formats/gguf/gguf.ts";
import { lut4Calibrator } from "../../measure/calibrate.ts";
import type { Lut4Calibrator } from "../../quantize/lut4-types.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";

const dir = scratchDir();
const write = async (dtype: string, sub: string, windows: number) => {
  const calibrate = windows > 0 ? lut4Calibrator({ windows, seed: 3 }) : undefined;
  const r = await exportCheckpoint({ output: join(dir, sub), format: "gguf", dtype, calibrate });
  return readFileSync(r.file);
};
const meta = (bytes: Uint8Array) => parseGguf(bytes, "x.gguf").metadata;

test("importanceOf takes each covariance's diagonal", () => {
  const cov = new Map([["m", Float64Array.from([4, 1, 1, 9])]]);
  expect([...importanceOf(cov).m]).toEqual([4, 9]);
});

test("a calibrated q4_k_m records the calibration under llama.cpp's imatrix keys and weighs its scales", async () => {
  const [plain, calibrated] = [await write("q4_k_m", "plain", 0), await write("q4_k_m", "cal", 2)];
  const m = meta(calibrated);
  expect(m.get("quantize.imatrix.dataset")).toEqual({ type: "string", value: "brown train split" });
  expect(m.get("quantize.imatrix.chunks_count")).toEqual({ type: "i32", value: 2 });
  // Every matrix: 6 layers × 7 and the tied head.
  expect(m.get("quantize.imatrix.entries_count")).toEqual({ type: "i32", value: 43 });
  expect(m.get("ferry.calibration.seed")).toEqual({ type: "i64", value: 3n });
  expect(meta(plain).has("quantize.imatrix.dataset")).toBe(false);
  // The weights differ: the weighted scale search chose other scales somewhere.
  const data = (b: Uint8Array) => {
    const f = parseGguf(b, "x.gguf");
    return Buffer.from(b.subarray(f.dataOffset)).toString("base64");
  };
  expect(data(calibrated)).not.toBe(data(plain));
});

test("dtypes whose quantizer takes no importance are written the same with or without calibration", async () => {
  expect(Buffer.compare(await write("q4_0", "p40", 0), await write("q4_0", "c40", 2))).toBe(0);
});

test(
  "only the formats and dtypes that calibrate ask the calibrator, and only they say anything of it",
  async () => {
    const src = await qwen3Folder({ peaked: true });
    let asked = 0;
    const calibrate: Lut4Calibrator = () => (asked++, Promise.reject(new Error("never asked here")));
    // GGUF q8_0 calibrates nothing, whatever the model: nothing asked, nothing to say.
    expect(ggufFormat.dtypes.filter((d) => ggufFormat.calibrates!(d))).toEqual([...IMPORTANCE_DTYPES]);
    expect(calibrationNeeds("lut4", "q4")).toBe("covariance");
    expect(calibrationNeeds("gguf", "q4_k_m")).toBe("importance");
    expect(calibrationNeeds("dmexp", "bf16")).toBeUndefined();
    const s = await exportCheckpoint({
      input: src,
      output: join(dir, "q-q8_0"),
      format: "gguf",
      dtype: "q8_0",
      calibrate,
    });
    expect(s.calibration).toBeUndefined();
    expect(asked).toBe(0);
  },
  60_000,
);

// Proof by a real client: llama.cpp (node-llama-cpp 3.21.1, prebuilt CPU binary, one thread) loads
// every GGUF ferry writes and computes what ferry computes. The model is the trained default model
// when model/default/ferry.ckpt exists, otherwise a random model of its shape (init std 0.5).
// `bun scripts/measure-gguf.ts` prints the same figures for the default model at a larger sample.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { writeGguf } from "../formats/gguf.ts";
import { evalWindows, loadBrown } from "../model/corpus.ts";
import { logSoftmax, windowInputs, windowLogits } from "../model/measure.ts";
import { buildModel } from "../model/qwen3.ts";
import { encode } from "../model/tokenizer.ts";
import { formatGgufTable, type GgufFigures, heldOutPrompts, measureGguf } from "../serve/measure-gguf.ts";
import { openLlamaGguf } from "../serve/llama-cpp.ts";
import { ALL_DTYPES, subjectModel, tempDir, testTensors } from "./helpers/gguf-fixtures.ts";

/**
 * Largest |p_llama.cpp − p_ferry| allowed for the F32 file, over every position and token.
 * Measured (KV cache F32): 1.0e-5 on the random default-shape model (seed 1, std 0.5, 16 windows x
 * 256 bytes), 1.1e-5 on the shipped default model (step 1400, `bun scripts/measure-gguf.ts`). The bound leaves room
 * for other CPUs' summation orders and is still far below what any real difference in the maths
 * gives: llama.cpp's own default F16 KV cache alone moves probabilities by 5.5e-3.
 */
const F32_PROB_BOUND = 1e-4;

/**
 * Mean KL(ferry on the file's own weights ‖ llama.cpp on the file) allowed per type: llama.cpp's
 * kernels round activations to f16 / bf16 / Q8_0 for those weight types, which costs this much at
 * most; a wrong block layout or nibble order costs KL ≈ 1. Measured on the random default-shape
 * model: f16 9.5e-6, bf16 7.0e-4, q8_0 4.9e-3, q4_0 7.0e-3; on the default model at step 200:
 * 3.3e-8, 2.2e-6, 2.8e-5, 3.5e-5.
 */
const SAME_WEIGHTS_KL: Record<string, number> = { f32: 1e-8, f16: 1e-4, bf16: 5e-3, q8_0: 2e-2, q4_0: 3e-2 };

let dir = "";
let rows: GgufFigures[] = [];
let source = "";
beforeAll(async () => {
  dir = await tempDir();
  const subject = await subjectModel();
  source = subject.source;
  const { heldOut } = await loadBrown();
  rows = await measureGguf(subject.model, {
    windows: evalWindows(heldOut, 4, 128),
    prompts: heldOutPrompts(heldOut, 8),
    tokens: 64,
    dir,
  });
  console.log(`GGUF in llama.cpp, ${source}:\n${formatGgufTable(rows)}`);
}, 120_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const row = (type: string) => rows.find((r) => r.type === type)!;

describe("llama.cpp on the default model's GGUF files", () => {
  test("every type ferry writes loads and is evaluated", () => {
    expect(rows.map((r) => r.type)).toEqual([...ALL_DTYPES]);
    for (const r of rows) expect(r.positions).toBe(4 * 128);
  });

  test("F32: greedy 64-token continuations equal ferry's float engine on all 8 prompts", () => {
    expect(row("f32").greedyPrompts).toBe(8);
    expect(row("f32").greedySame).toBe(8);
    expect(row("f32").greedyMeanPrefix).toBe(64);
  });

  test(`F32: every next-token probability within ${F32_PROB_BOUND} of ferry's`, () => {
    expect(row("f32").maxAbsDeltaP).toBeLessThanOrEqual(F32_PROB_BOUND);
    expect(row("f32").meanKL).toBeLessThan(1e-8);
    expect(row("f32").top1).toBe(1);
  });

  for (const type of ["f16", "bf16", "q8_0", "q4_0"]) {
    test(`${type}: llama.cpp computes what ferry computes from the same file`, () => {
      expect(row(type).sameWeightsMeanKL).toBeLessThan(SAME_WEIGHTS_KL[type]);
      expect(row(type).sameWeightsTop1).toBeGreaterThan(0.9);
    });

    test(`${type}: its cost against ferry's f32 logits is the file's rounding, no more`, () => {
      // KL(f32 ‖ llama.cpp) is the file's rounding (ferry's own measure of it) plus llama.cpp's kernel
      // noise; the test allows the noise bound above on top of 10% of the rounding.
      const r = row(type);
      expect(r.meanKL).toBeGreaterThan(0);
      expect(r.meanKL).toBeLessThan(1.1 * r.roundingMeanKL + SAME_WEIGHTS_KL[type]);
      expect(r.top1).toBeGreaterThan(0.3);
    });
  }

  test("the smaller the type, the larger the measured cost (f16 < q8_0 < q4_0)", () => {
    expect(row("f16").meanKL).toBeLessThan(row("q8_0").meanKL);
    expect(row("q8_0").meanKL).toBeLessThan(row("q4_0").meanKL);
  });
});

describe("llama.cpp on an untied model, and its tokenizer", () => {
  const { config, tensors } = testTensors(31, false);
  const model = buildModel(config, tensors);

  test("untied F32 and Q4_0 files load; F32 probabilities match ferry's within the bound", async () => {
    const dir2 = await tempDir();
    try {
      const { heldOut } = await loadBrown();
      const w = evalWindows(heldOut, 1, 100)[0];
      const lp = new Float64Array(258), ref = windowLogits(model, w);
      for (const type of ["f32", "q4_0"] as const) {
        const path = join(dir2, `untied.${type}.gguf`);
        await writeGguf(path, tensors, config, { type });
        const lm = await openLlamaGguf(path, { contextSize: 256 });
        try {
          expect(lm.vocab).toBe(258);
          const probs = await lm.nextTokenProbs(windowInputs(w));
          expect(probs.length).toBe(100);
          let maxDelta = 0;
          probs.forEach((p, t) => {
            logSoftmax(ref, t * 258, 258, lp);
            for (let v = 0; v < 258; v++) maxDelta = Math.max(maxDelta, Math.abs(p[v] - Math.exp(lp[v])));
          });
          if (type === "f32") expect(maxDelta).toBeLessThanOrEqual(F32_PROB_BOUND);
          else expect(maxDelta).toBeGreaterThan(F32_PROB_BOUND); // Q4_0 really is a different model
        } finally {
          await lm.close();
        }
      }
    } finally {
      await rm(dir2, { recursive: true, force: true });
    }
  }, 30_000);

  test("llama.cpp reads BOS/EOS as 256/257 and tokenizes text into ferry's byte ids", async () => {
    const dir2 = await tempDir();
    try {
      const path = join(dir2, "tok.gguf");
      await writeGguf(path, tensors, config, { type: "f32" });
      const lm = await openLlamaGguf(path, { contextSize: 256 });
      try {
        expect(lm.bos).toBe(256);
        expect(lm.eos).toBe(257);
        for (
          const text of [
            "Hello, world!\n",
            "The jury said it did find.",
            "  two  spaces\tand tab",
            "héllo ✓ 日本",
            "<|endoftext|>",
          ]
        ) {
          expect(lm.tokenize(text)).toEqual(encode(text));
          expect(lm.detokenize(encode(text))).toBe(text);
        }
        expect(lm.detokenize([72, 105, 256, 257])).toBe("Hi"); // specials render as nothing, as ferry's decode
      } finally {
        await lm.close();
      }
    } finally {
      await rm(dir2, { recursive: true, force: true });
    }
  }, 30_000);
});

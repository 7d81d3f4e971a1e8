// Proof by a real client on a Qwen3 model with the real tokenizer: the reduced shape (151,936-token
// vocabulary, 64 wide, 2 layers, peaked weights so greedy decoding is far from ties) as a Hugging Face
// folder and as ferry's GGUFs. Prompts are token ids from @huggingface/tokenizers, so no ferry tokenizer
// is involved. ferry's float engine continues each prompt greedily for 64 tokens from the folder and
// from the F32 GGUF exactly as llama.cpp does on that GGUF; on the BF16 file llama.cpp computes what
// ferry computes from it (F16 and Q8_0: tests/llama/gguf-qwen3-quants-llama.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { loadEngine } from "../../engines/mod.ts";
import { writeGguf } from "../../formats/gguf/gguf.ts";
import { openLlamaGguf } from "../../measure/llama-cpp.ts";
import { tempDir } from "../helpers/gguf-fixtures.ts";
import {
  type ReducedQwen3,
  reducedQwen3,
  SAME_FILE_BOUNDS,
  sameFileAgreement,
} from "../helpers/gguf-qwen3-llama.ts";

// One prompt per property: the agreement is numerical, and llama.cpp is given HF's ids, not text (its
// tokenizer is tests/llama/gguf-tokenizer-llama.test.ts's).
const PROMPTS = ["The jury said it did find that"];
const STEPS = 64;

let dir = "";
let m: ReducedQwen3;
beforeAll(async () => {
  dir = await tempDir();
  m = await reducedQwen3();
}, 120_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function ferryGreedy(path: string, prompts: number[][]): Promise<number[][]> {
  const engine = await loadEngine(path, "float");
  const runs: number[][] = [];
  for (const prompt of prompts) {
    const s = engine.start();
    await s.feed(prompt);
    const ids: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      ids.push(s.pick());
      await s.feed([ids[i]]);
    }
    runs.push(ids);
  }
  return runs;
}

describe("the reduced Qwen3 shape with the real tokenizer", () => {
  test("the folder has the real vocabulary's shape; prompts are HF's ids", () => {
    expect(m.config.vocab_size).toBe(151_936);
    expect(m.hf.encode(PROMPTS[0]).ids).toEqual([785, 21234, 1053, 432, 1521, 1477, 429]);
  });

  test(`greedy ${STEPS} tokens: ferry from the folder = ferry from the F32 GGUF = llama.cpp on it`, async () => {
    const path = join(dir, "qwen3.f32.gguf");
    await writeGguf(path, m.tensors, m.config, { type: "f32", tokenizer: m.tokenizer });
    const prompts = PROMPTS.map((p) => m.hf.encode(p).ids);
    const fromFolder = await ferryGreedy(m.folder, prompts);
    const fromGguf = await ferryGreedy(path, prompts);
    const lm = await openLlamaGguf(path, { contextSize: 256 });
    try {
      for (let i = 0; i < prompts.length; i++) {
        expect(fromGguf[i]).toEqual(fromFolder[i]);
        expect(await lm.greedy(prompts[i], STEPS)).toEqual(fromFolder[i]);
      }
    } finally {
      await lm.close();
    }
    // Varied continuations, not one repeated token: the comparison means something.
    for (const run of fromFolder) expect(new Set(run).size).toBeGreaterThan(8);
  });

  test("bf16: llama.cpp computes what ferry computes from the same file", async () => {
    const { kl, top1 } = await sameFileAgreement(m, "bf16", dir);
    console.log(`bf16: mean KL ${kl.toExponential(2)}, top-1 ${(100 * top1).toFixed(1)}%`);
    expect(kl).toBeGreaterThanOrEqual(0);
    expect(kl).toBeLessThan(SAME_FILE_BOUNDS.bf16.kl);
    expect(top1).toBeGreaterThanOrEqual(SAME_FILE_BOUNDS.bf16.top1);
  });
});

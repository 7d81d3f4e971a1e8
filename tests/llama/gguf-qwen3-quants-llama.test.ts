// The reduced Qwen3 shape with the real tokenizer (see tests/llama/gguf-qwen3-llama.test.ts) as ferry's F16
// and Q8_0 GGUFs: llama.cpp computes from each file what ferry's float engine computes from it, within
// the bounds measured for each type (tests/helpers/gguf-qwen3-llama.ts).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rm } from "node:fs/promises";
import { tempDir } from "../helpers/gguf-fixtures.ts";
import {
  type ReducedQwen3,
  reducedQwen3,
  SAME_FILE_BOUNDS,
  sameFileAgreement,
} from "../helpers/gguf-qwen3-llama.ts";

let dir = "";
let m: ReducedQwen3;
beforeAll(async () => {
  dir = await tempDir();
  m = await reducedQwen3();
}, 120_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

for (const type of ["f16", "q8_0"] as const) {
  test(`${type}: llama.cpp computes what ferry computes from the same file`, async () => {
    const { kl, top1 } = await sameFileAgreement(m, type, dir);
    console.log(`${type}: mean KL ${kl.toExponential(2)}, top-1 ${(100 * top1).toFixed(1)}%`);
    expect(kl).toBeGreaterThanOrEqual(0);
    expect(kl).toBeLessThan(SAME_FILE_BOUNDS[type].kl);
    expect(top1).toBeGreaterThanOrEqual(SAME_FILE_BOUNDS[type].top1);
  });
}

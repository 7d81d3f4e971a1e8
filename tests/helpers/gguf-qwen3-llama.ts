/**
 * What the two reduced-Qwen3 llama.cpp test files share: the model (the reduced shape with the real
 * tokenizer and peaked weights, tests/helpers/qwen3-folder.ts, read from its Hugging Face folder), the
 * agreement bounds and the check that llama.cpp computes from a GGUF what ferry's float engine computes
 * from the same file.
 *
 * @example
 * ```ts
 * const subject = await reducedQwen3();
 * const { kl, top1 } = await sameFileAgreement(subject, "q8_0", dir);
 * ```
 * @module
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { loadEngine } from "../../engines/mod.ts";
import { hfFormat } from "../../formats/huggingface/huggingface.ts";
import { type GgufDtype, writeGguf } from "../../formats/gguf/gguf.ts";
import { openLlamaGguf } from "../../measure/llama-cpp.ts";
import { logSoftmax } from "../../measure/metrics.ts";
import { brownDir, untag } from "../../model/corpus.ts";
import type { ModelConfig } from "../../model/config.ts";
import type { Tensor } from "../../model/tensor.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";
import { tokenizerFilesOf } from "./gguf-fixtures.ts";
import { qwen3Folder } from "./qwen3-folder.ts";

/** The reduced Qwen3 model as a folder, its tensors, its tokenizer files and HF's tokenizer of them. */
export interface ReducedQwen3 {
  folder: string;
  config: ModelConfig;
  tensors: Tensor[];
  tokenizer: TokenizerFiles;
  hf: Tokenizer;
}

/** The reduced shape with the real tokenizer and peaked weights (one folder per test process). */
export async function reducedQwen3(): Promise<ReducedQwen3> {
  const folder = await qwen3Folder({ peaked: true });
  const tokenizer = tokenizerFilesOf(folder);
  const hf = new Tokenizer(
    JSON.parse(tokenizer["tokenizer.json"]),
    JSON.parse(tokenizer["tokenizer_config.json"]!),
  );
  const { config, tensors } = await hfFormat.read(folder);
  return { folder, config, tensors, tokenizer, hf };
}

/**
 * Per type, over 32 teacher-forced positions of a Brown paragraph: the largest mean KL(ferry on the
 * file ‖ llama.cpp on the file) and the smallest top-1 agreement allowed. Measured (both sides are
 * deterministic; the machine was busy, which moves only the time) bf16 4.73e-4 / 100%, f16 6.68e-6 /
 * 100%, q8_0 4.86e-3 / 100% (96 positions: 94.8%). Bounds about 3× the KL, top-1 a few positions
 * below, so another CPU's summation order fits while a wrong layout (KL ≈ 1) does not. llama.cpp
 * rounds the activations to bf16 for BF16 weights and to 8 bits for Q8_0 ones before each product,
 * which the peaked weights amplify.
 */
export const SAME_FILE_BOUNDS: Readonly<Record<string, { kl: number; top1: number }>> = {
  bf16: { kl: 1.5e-3, top1: 0.9 },
  f16: { kl: 2e-5, top1: 0.95 },
  q8_0: { kl: 1.5e-2, top1: 0.85 },
};

/**
 * Writes the model as `type` with its tokenizer, then runs ferry's float engine and llama.cpp on that
 * file over 32 tokens of a Brown paragraph: mean KL(ferry ‖ llama.cpp) and top-1 agreement.
 */
export async function sameFileAgreement(
  m: ReducedQwen3,
  type: GgufDtype,
  dir: string,
): Promise<{ kl: number; top1: number }> {
  const path = join(dir, `qwen3.${type}.gguf`);
  await writeGguf(path, m.tensors, m.config, { type, tokenizer: m.tokenizer });
  const text = untag(readFileSync(join(brownDir(), "cb07"), "utf8"));
  const ids = m.hf.encode(text).ids.slice(0, 32);
  const engine = await loadEngine(path, "float");
  const logits = await engine.start().feed(ids, "all");
  const lm = await openLlamaGguf(path, { contextSize: 256 });
  try {
    return agreement(logits, await lm.nextTokenProbs(ids), m.config.vocab_size);
  } finally {
    await lm.close();
  }
}

/**
 * Mean KL(ferry ‖ llama.cpp) and top-1 agreement per position. llama.cpp's probabilities are f32 sums
 * over 151,936 values, off from 1 by about 3e-5; they are renormalized in f64 first.
 */
function agreement(logits: Float32Array, probs: Float64Array[], vocab: number): { kl: number; top1: number } {
  const lp = new Float64Array(vocab);
  let kl = 0, same = 0;
  probs.forEach((q, t) => {
    logSoftmax(logits, t * vocab, vocab, lp);
    const sum = q.reduce((a, b) => a + b, 0);
    let ours = 0, theirs = 0;
    for (let v = 0; v < vocab; v++) {
      const p = Math.exp(lp[v]);
      if (p > 0) kl += p * (lp[v] - Math.log(Math.max(q[v] / sum, 1e-300)));
      if (lp[v] > lp[ours]) ours = v;
      if (q[v] > q[theirs]) theirs = v;
    }
    if (ours === theirs) same++;
  });
  return { kl: kl / probs.length, top1: same / probs.length };
}

// engines/float.ts keeps a GGUF's quantized matrices as their blocks (kernels/wasm/blocks.ts) and
// dequantizes them in the products: on a small random Qwen3 whose widths are multiples of 256 (so every
// type ferry writes applies, the K-quants included), the engine loaded from a Q8_0, Q4_0, IQ4_NL, Q4_K,
// Q6_K and Q4_K_M file gives exactly the tokens, logits and session bytes of the same file packed as f32
// (`keep: "f32"`, the way every quantized file loaded before), on 1 and 2 threads, greedy and seeded, tied
// and untied, while holding the file's bytes of weights instead of f32's; two engines on one shared
// copy of the blocks give the same again; and Deno's workers give Bun's bits.
import { afterAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  attachFloatEngine,
  createFloatEngineFromSources,
  floatEngineMemory,
  type FloatEngineOptions,
} from "../../engines/float.ts";
import { type GgufDtype, openGgufSources, writeGguf } from "../../formats/gguf/gguf.ts";
import { type GgmlType, tensorBytes } from "../../quantize/quants.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import type { Engine, SamplingOptions } from "../../model/engine.ts";
import { initParams } from "../../model/init.ts";
import { bytesOf, expectSameBits } from "../helpers/bits.ts";
import { crossProcessTest } from "../helpers/fast.ts";

const ROOT = join(import.meta.dir, "../..");

/** Widths 256 and 512 (K-quant super-blocks), q_dim = heads · head_dim = 256, a 258-row vocabulary. */
const UNTIED: ModelConfig = {
  vocab_size: 258,
  hidden_size: 256,
  intermediate_size: 512,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 64,
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  max_position_embeddings: 256,
  tie_word_embeddings: false,
};
const TIED: ModelConfig = { ...UNTIED, tie_word_embeddings: true };

const DTYPES: GgufDtype[] = ["q8_0", "q4_0", "iq4_nl", "q4_k", "q6_k", "q4_k_m"];
const PROMPT = [1, 17, 42, 99, 5, 250, 7, 64, 128, 3];
const SAMPLINGS: SamplingOptions[] = [{}, { temperature: 0.9, topP: 0.95 }];
const STEPS = 16;

const dir = mkdtempSync(join(tmpdir(), "ferry-float-blocks-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A GGUF of `dtype` of a random model of `cfg` (norms near 1). */
async function ggufFile(cfg: ModelConfig, dtype: GgufDtype): Promise<string> {
  const tensors = initParams(cfg, 5, 0.3);
  for (const t of tensors) {
    if (t.dims.length === 1) t.data.forEach((_, i) => t.data[i] = 1 + 0.05 * Math.sin(i));
  }
  const path = join(dir, `${cfg.tie_word_embeddings ? "tied" : "untied"}.${dtype}.gguf`);
  await writeGguf(path, tensors, cfg, { type: dtype });
  return path;
}

/** Each matrix's stored block type. */
async function storedTypes(path: string): Promise<Map<string, GgmlType>> {
  const m = await openGgufSources(path);
  await m.close();
  return new Map(m.sources.filter((s) => s.blocks).map((s) => [s.name, s.blocks!.type as GgmlType]));
}

/** The float engine on a GGUF, loaded as engines/mod.ts loads it (streamed, frozen). */
async function load(path: string, options: FloatEngineOptions): Promise<Engine> {
  const m = await openGgufSources(path);
  try {
    return await createFloatEngineFromSources(m.config, m.sources, path, { frozen: true, ...options });
  } finally {
    await m.close();
  }
}

interface Trace {
  prefill: Float32Array;
  tokens: number[];
  logits: Float32Array[];
  saved: Uint8Array;
}

async function trace(engine: Engine, sampling: SamplingOptions): Promise<Trace> {
  const s = engine.start();
  s.seed(11);
  const t: Trace = { prefill: await s.feed(PROMPT, "all"), tokens: [], logits: [], saved: new Uint8Array() };
  for (let i = 0; i < STEPS; i++) {
    t.tokens.push(s.pick(sampling));
    t.logits.push(await s.feed([t.tokens[i]]));
  }
  t.saved = s.save!();
  return t;
}

function expectSameTrace(got: Trace, want: Trace, label: string): void {
  expectSameBits(got.prefill, want.prefill, `${label} prefill`);
  expect(`${label} ${got.tokens}`).toBe(`${label} ${want.tokens}`);
  got.logits.forEach((l, i) => expectSameBits(l, want.logits[i], `${label} step ${i}`));
  expectSameBits(got.saved, want.saved, `${label} session bytes`);
}

for (const cfg of [UNTIED, TIED]) {
  const tie = cfg.tie_word_embeddings ? "tied" : "untied";
  for (const dtype of DTYPES) {
    test(`${dtype}, ${tie}: the blocks kept as stored give the f32-packed engine's bits on 1 and 2 threads`, async () => {
      const path = await ggufFile(cfg, dtype);
      const f32 = await load(path, { threads: 1, keep: "f32" });
      const matrices = paramShapes(cfg).filter((p) => p.dims.length === 2);
      expect(floatEngineMemory(f32)!.matrices).toEqual({ f32: matrices.length });
      // What the file holds of each matrix, in its type (llama.cpp's mix for q4_k_m), is what is kept,
      // the last panel padded to 8 rows as every dtype's.
      const types = await storedTypes(path);
      const fileBytes = matrices.reduce(
        (s, { name, dims }) => s + tensorBytes(types.get(name)!, Math.ceil(dims[0] / 8) * 8 * dims[1]),
        0,
      );
      const vectors = floatEngineMemory(f32)!.vectorBytes;
      for (const threads of [1, 2]) {
        const engine = await load(path, { threads, splitBytes: 0 });
        const m = floatEngineMemory(engine)!;
        expect(Object.keys(m.matrices).every((d) => d !== "f32" && d !== "bf16")).toBe(true);
        expect(m.packedBytes).toBe(fileBytes);
        expect(engine.weightBytes).toBe(fileBytes + vectors);
        for (const sampling of SAMPLINGS) {
          const label = `${dtype} ${tie} ${threads} threads ${sampling.temperature ? "seeded" : "greedy"}`;
          expectSameTrace(await trace(engine, sampling), await trace(f32, sampling), label);
        }
      }
    });
  }
}

test("two engines on one shared copy of the blocks give the unshared engine's bits", async () => {
  const path = await ggufFile(TIED, "q4_k_m");
  const alone = await load(path, { threads: 1 });
  const first = await load(path, { threads: 2, splitBytes: 0, share: { count: 2, slot: 0 } });
  const second = attachFloatEngine(first.shareable, path, { threads: 1 });
  expect(floatEngineMemory(second)!.matrices).toEqual(floatEngineMemory(alone)!.matrices);
  for (const sampling of SAMPLINGS) {
    const want = await trace(alone, sampling);
    expectSameTrace(await trace(first, sampling), want, "first");
    expectSameTrace(await trace(second, sampling), want, "second");
  }
});

crossProcessTest("under Deno, the blocks give Bun's bits", async () => {
  const path = await ggufFile(UNTIED, "q4_k_m");
  const code = `
import { createHash } from "node:crypto";
import { createFloatEngineFromSources } from "${ROOT}/engines/float.ts";
import { openGgufSources } from "${ROOT}/formats/gguf/gguf.ts";
async function main() {
  const m = await openGgufSources(${JSON.stringify(path)});
  const engine = await createFloatEngineFromSources(m.config, m.sources, "m", { frozen: true, threads: 2, splitBytes: 0 });
  await m.close();
  const s = engine.start(), h = createHash("sha256"), tokens = [];
  h.update(new Uint8Array((await s.feed(${JSON.stringify(PROMPT)}, "all")).buffer));
  for (let i = 0; i < ${STEPS}; i++) { tokens.push(s.pick()); h.update(new Uint8Array((await s.feed([tokens[i]])).buffer)); }
  console.log(JSON.stringify({ digest: h.digest("hex"), tokens }));
}
main();
`;
  writeFileSync(join(dir, "run.ts"), code);
  const r = spawnSync("deno", ["run", "-A", "--config", join(ROOT, "deno.json"), join(dir, "run.ts")], {
    encoding: "utf8",
    cwd: ROOT,
  });
  if (r.status !== 0) throw new Error(`deno failed: ${r.stderr}`);
  const want = await trace(await load(path, { threads: 1 }), {});
  const h = createHash("sha256");
  h.update(bytesOf(want.prefill));
  want.logits.forEach((l) => h.update(bytesOf(l)));
  expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toEqual({
    digest: h.digest("hex"),
    tokens: want.tokens,
  });
});

// Run by tests/webgpu.test.ts under Deno: the WebGPU engine against the CPU reference on the default
// model. Prints one JSON line: the adapter, the largest logit difference, and both engines' greedy
// continuations, or `skip` with the reason when no adapter can be had at all.
import { readCheckpoint } from "../formats/checkpoint.ts";
import { argmax } from "../kernels/cpu.ts";
import { createFloatEngine } from "../model/float-engine.ts";
import { generateAll } from "../model/generate.ts";
import { GpuUnavailable, openGpu } from "../kernels/webgpu/device.ts";
import { createWebGpuEngine } from "../kernels/webgpu/engine.ts";
import { buildModel, createCache, forward } from "../model/qwen3.ts";
import { encode } from "../model/tokenizer.ts";

export const PROMPTS = [
  "The jury said",
  "It was a",
  "In the city of",
  "He did not",
  "The president",
  "She had been",
  "There is no",
  "When the",
];
const STEPS = 64;

let gpu;
try {
  gpu = await openGpu();
} catch (e) {
  if (!(e instanceof GpuUnavailable)) throw e;
  console.log(JSON.stringify({ skip: e.message }));
  Deno.exit(0);
}
const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
const model = buildModel(run.config, run.model);
const where = "model/default/ferry.ckpt";
const engine = await createWebGpuEngine(run.config, run.model, where, { gpu });
const greedyEngine = await createWebGpuEngine(run.config, run.model, where, { gpu, readback: "argmax" });
const floatEngine = createFloatEngine(run.config, run.model, where);
const V = run.config.vocab_size;

// Logits: every prompt position (the tiled product), then 8 one-token steps (the one-row product).
let maxDiff = 0, maxLogit = 0;
const compare = (a: Float32Array, b: Float32Array) => {
  if (a.length !== b.length) throw new Error(`logit counts differ: ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    maxLogit = Math.max(maxLogit, Math.abs(b[i]));
  }
};
const gpuTexts: number[][] = [], cpuTexts: number[][] = [];
for (const prompt of PROMPTS) {
  const ids = encode(prompt, { bos: true });
  const s = engine.start(), cache = createCache(model);
  compare(await s.feed(ids, "all"), forward(model, cache, ids));
  for (const id of [32, 116, 104, 101, 32, 111, 102, 32]) {
    compare(await s.feed([id]), forward(model, cache, [id]));
  }

  // Greedy through the shared generation loop; this engine reads back only its argmax each step.
  const gpuOut = await generateAll(greedyEngine, ids, { maxTokens: STEPS, stopAtEos: false });
  const cpuOut = await generateAll(floatEngine, ids, { maxTokens: STEPS, stopAtEos: false });
  gpuTexts.push(gpuOut);
  cpuTexts.push(cpuOut);
}
// Sampling (the default engine reads back the logits with the argmax): the same seeded draws.
const sampling = { maxTokens: 32, temperature: 0.8, topK: 40, topP: 0.95, seed: 5 };
const sampled = [
  await generateAll(engine, encode(PROMPTS[0], { bos: true }), sampling),
  await generateAll(floatEngine, encode(PROMPTS[0], { bos: true }), sampling),
];

// Refusals leave the session as it was.
const r = greedyEngine.start();
await r.feed([256, 84], "none");
const refusals: string[] = [];
for (const bad of [[1000], [65, -1], Array(run.config.max_position_embeddings).fill(65)]) {
  await r.feed(bad).catch((e) => refusals.push((e as Error).message));
}
try {
  r.pick({ temperature: 0.8 });
} catch (e) {
  refusals.push((e as Error).message);
}
const after = {
  position: r.position,
  next: r.pick(),
  cpuNext: argmax(forward(model, createCache(model), [256, 84]), V, V),
};
engine.dispose?.();
greedyEngine.dispose?.();
console.log(
  JSON.stringify({
    adapter: gpu.name,
    fallback: gpu.fallback,
    maxDiff,
    maxLogit,
    gpuTexts,
    cpuTexts,
    sampled,
    refusals,
    after,
  }),
);

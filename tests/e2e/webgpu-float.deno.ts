// Run by tests/e2e/webgpu.test.ts under Deno: the WebGPU engine against the CPU reference on the default
// model. Prints one JSON line: the adapter, the largest logit difference, and both engines' greedy
// continuations, or `skip` with the reason when no adapter can be had at all.
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { argmax } from "../../kernels/cpu.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { generateAll } from "../../model/generate.ts";
import { GpuUnavailable, openGpu } from "../../kernels/webgpu/device.ts";
import { createWebGpuEngine } from "../../engines/webgpu.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { encode } from "../../model/tokenizer.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";

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
// The test compares the first two prompts' continuations; `--prompts 8` (run by hand) compares all eight.
const promptsArg = Deno.args.indexOf("--prompts");
const COMPARED = PROMPTS.slice(0, promptsArg >= 0 ? Number(Deno.args[promptsArg + 1]) : 2);

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

// Logits: every prompt position (the tiled product), then 2 one-token steps (the one-row product).
let maxDiff = 0, maxLogit = 0;
const compare = (a: Float32Array, b: Float32Array) => {
  if (a.length !== b.length) throw new Error(`logit counts differ: ${a.length} vs ${b.length}`);
  for (let i = 0; i < a.length; i++) {
    maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]));
    maxLogit = Math.max(maxLogit, Math.abs(b[i]));
  }
};
const gpuTexts: number[][] = [], cpuTexts: number[][] = [];
for (const prompt of COMPARED) {
  const ids = encode(prompt, { bos: true });
  const s = engine.start(), cache = createCache(model);
  compare(await s.feed(ids, "all"), forward(model, cache, ids));
  for (const id of [32, 116]) {
    compare(await s.feed([id]), forward(model, cache, [id]));
  }

  // Greedy through the shared generation loop; this engine reads back only its argmax each step.
  const gpuOut = await generateAll(greedyEngine, ids, { maxTokens: STEPS, stopAtEos: false });
  const cpuOut = await generateAll(floatEngine, ids, { maxTokens: STEPS, stopAtEos: false });
  gpuTexts.push(gpuOut);
  cpuTexts.push(cpuOut);
}
// Sampling (the default engine reads back the logits with the argmax): the same seeded draws.
const sampling = { maxTokens: 16, temperature: 0.8, topK: 40, topP: 0.95, seed: 5 };
const sampled = [
  await generateAll(engine, encode(PROMPTS[0], { bos: true }), sampling),
  await generateAll(floatEngine, encode(PROMPTS[0], { bos: true }), sampling),
];

// A context longer than one attention tile (1024 scores): a small random model at 1031 positions,
// prefilled in 9 chunks with every position's logits, then one decode step, against the CPU.
const long = {
  ...PRESETS.tiny,
  hidden_size: 32,
  intermediate_size: 64,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  max_position_embeddings: 1040,
};
const longTensors = initParams(long, 3, 0.5);
const longGpu = await createWebGpuEngine(long, longTensors, "long", { gpu });
const longModel = buildModel(long, longTensors), longCache = createCache(longModel);
const longIds = Array.from({ length: 1030 }, (_, i) => 32 + ((i * 7919) % 90));
const ls = longGpu.start();
let longDiff = 0;
const pairs: [Float32Array, Float32Array][] = [
  [await ls.feed(longIds, "all"), forward(longModel, longCache, longIds)], // 9 chunks, every row read back
  [await ls.feed([65]), forward(longModel, longCache, [65])],
];
for (const [a, b] of pairs) {
  if (a.length !== b.length) throw new Error(`long context: ${a.length} logits vs the CPU's ${b.length}`);
  for (let i = 0; i < a.length; i++) longDiff = Math.max(longDiff, Math.abs(a[i] - b[i]));
}
longGpu.dispose?.();

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
// The one sampling contract (model/sampling.ts): out-of-range options and seeds, refused by name.
const attempts: [string, () => unknown][] = [
  ["temperature", () => r.pick({ temperature: -1 })],
  ["topP", () => r.pick({ topP: 0 })],
  ["seed", () => r.seed(0.5)],
];
for (const [, attempt] of attempts) {
  try {
    attempt();
  } catch (e) {
    refusals.push(`${(e as Error).name} ${(e as { field?: string }).field}`);
  }
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
    longDiff,
    refusals,
    after,
  }),
);

// Run by tests/e2e/webgpu-session.test.ts under Deno: WebGPU sessions saved and restored, forked, refused
// from another engine; the never-sampled mask on the GPU's argmax and in sampling; logprobs. Prints one
// JSON line of results, or `skip` with the reason when no adapter can be had at all.
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { createWebGpuEngine } from "../../engines/webgpu.ts";
import { GpuUnavailable, openGpu } from "../../kernels/webgpu/device.ts";
import type { EngineSession } from "../../model/engine.ts";
import { generateAll } from "../../model/generate.ts";
import { floatLogprobs } from "../../model/sample.ts";
import { FORCED_CONFIG, forcedBosTensors } from "../helpers/forced-bos.ts";

let gpu;
try {
  gpu = await openGpu();
} catch (e) {
  if (!(e instanceof GpuUnavailable)) throw e;
  console.log(JSON.stringify({ skip: e.message }));
  Deno.exit(0);
}
const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
const engine = await createWebGpuEngine(run.config, run.model!, "ferry.ckpt", { gpu });

/** What a session does next: sampled tokens and every step's logits (as a plain array). */
async function continueFor(s: EngineSession, steps: number) {
  const tokens: number[] = [], logits: number[] = [];
  for (let i = 0; i < steps; i++) {
    const id = s.pick({ temperature: 1.1, topP: 0.95 });
    tokens.push(id);
    logits.push(...await s.feed([id], "last"));
  }
  return { tokens, logits };
}

// Save, restore and fork mid-conversation, after a one-chunk and after a three-chunk prompt.
const continuations = [];
for (const length of [6, 300]) {
  const s = engine.start();
  s.seed(7);
  await s.feed(Array.from({ length }, (_, i) => i === 0 ? 256 : 32 + ((i * 37) % 90)), "none");
  await continueFor(s, 4);
  const bytes = s.save!();
  const restored = engine.restore!(bytes, "s"), fork = s.fork!();
  const whole = await continueFor(s, 10);
  continuations.push({
    position: restored.position,
    whole,
    restored: await continueFor(restored, 10),
    fork: await continueFor(fork, 10),
    resaved: Array.from(engine.restore!(bytes, "s").save!()).join() === Array.from(bytes).join(),
  });
}

// A float-engine session is refused by field; so is a tampered one (by its CRC-32).
const floatEngine = createFloatEngine(run.config, run.model!, "ferry.ckpt");
const fs = floatEngine.start();
await fs.feed([256, 65], "none");
const refusals: string[] = [];
for (const bytes of [fs.save!(), Uint8Array.from(engine.start().save!(), (b, i) => i === 20 ? b ^ 1 : b)]) {
  try {
    engine.restore!(bytes, "s");
  } catch (e) {
    refusals.push((e as Error).message);
  }
}

// Logprobs: the pending distribution's, equal to the f64 log-softmax of the logits fed back.
const ls = engine.start();
const logits = await ls.feed([256, 84, 104, 101], "last");
const lp = ls.logprobs([65, 257], 5);
const want = floatLogprobs(logits, 0, logits.length, [65, 257], 5);
let sum = 0;
for (const v of ls.logprobs([...logits.keys()], 0).of) sum += Math.exp(v);

// The never-sampled mask, on the GPU's argmax (argmax-only readback) and in sampling.
const forced = [];
for (const readback of ["argmax", "logits"] as const) {
  const e = await createWebGpuEngine(FORCED_CONFIG, forcedBosTensors(), "forced", { gpu, readback });
  const raw = await e.start().feed([65, 66], "last");
  forced.push({
    rawArgmax: raw.indexOf(Math.max(...raw)),
    greedy: await generateAll(e, [65], { maxTokens: 20, stopAtEos: false }),
    hot: readback === "logits"
      ? await generateAll(e, [65], { maxTokens: 40, temperature: 2, seed: 23, stopAtEos: false })
      : [],
  });
  e.dispose?.();
}
engine.dispose?.();
console.log(JSON.stringify({ continuations, refusals, logprobs: { got: lp, want, sum }, forced }));

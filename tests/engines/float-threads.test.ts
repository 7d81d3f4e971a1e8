// The frozen float engine (engines/float.ts over kernels/wasm/packed.ts): its logits and tokens are
// the unfrozen engine's bits on 1, 2 and 3 threads, on the small test model (tests/fixtures/small-model) and on a random model
// whose head_dim is not hidden / heads, with f32 and with bf16 weights; it keeps each matrix once (its
// retained bytes are one packed layout's size) and none of the tensors it was given; its KV cache holds
// the context asked for, and feeding past it is refused; Deno's workers give Bun's bits.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CHECKPOINT } from "../helpers/lut4-fixture.ts";
import { createFloatEngine, defaultContext, floatEngineMemory } from "../../engines/float.ts";
import { instantiatePacked, productShare } from "../../kernels/wasm/packed.ts";
import { wasmKernels } from "../../kernels/wasm/kernels.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import type { Engine } from "../../model/engine.ts";
import { createRng } from "../../model/random.ts";
import type { Tensor } from "../../model/tensor.ts";

const ROOT = join(import.meta.dir, "../..");
const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
const PROMPT = [256, 84, 104, 101, 32, 106, 117, 114, 121];

/** head_dim 20 with hidden 48 and 4 heads (48 / 4 = 12), untied, N and K not multiples of 8. */
const ODD: ModelConfig = {
  vocab_size: 258,
  hidden_size: 48,
  intermediate_size: 70,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 20,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 40960,
  tie_word_embeddings: false,
};

function randomTensors(cfg: ModelConfig, seed: number, bf16: boolean): Tensor[] {
  const rng = createRng(seed);
  return paramShapes(cfg).map(({ name, dims }) => {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    for (let i = 0; i < data.length; i++) {
      data[i] = dims.length === 1 ? 1 + rng.next() * 0.1 : rng.next() - 0.5;
    }
    if (bf16) {
      for (const [i, u] of new Uint32Array(data.buffer).entries()) {
        new Uint32Array(data.buffer)[i] = u & 0xffff0000;
      }
    }
    return { name, dims, data };
  });
}

/** Every row of a prefill, then 24 greedy tokens and each one's logits: one digest and the tokens. */
async function trace(engine: Engine): Promise<{ digest: string; tokens: number[] }> {
  const h = createHash("sha256"), s = engine.start(), tokens: number[] = [];
  h.update(new Uint8Array((await s.feed(PROMPT, "all")).buffer));
  for (let i = 0; i < 24; i++) {
    tokens.push(s.pick());
    h.update(new Uint8Array((await s.feed([tokens[i]])).buffer));
  }
  return { digest: h.digest("hex"), tokens };
}

for (
  const [name, cfg, make] of [
    ["the small test model", run.config, () => run.model!],
    ["a random model, head_dim != hidden / heads, f32", ODD, () => randomTensors(ODD, 5, false)],
    ["a random model, head_dim != hidden / heads, bf16", ODD, () => randomTensors(ODD, 6, true)],
  ] as const
) {
  test(`${name}: 1, 2 and 3 threads give the unfrozen engine's logits and tokens, bit for bit`, async () => {
    const tensors = make();
    const want = await trace(createFloatEngine(cfg, tensors, "plain"));
    for (const threads of [1, 2, 3]) {
      // splitBytes 0: every product split, however small (by default small ones run on one thread)
      const engine = createFloatEngine(cfg, tensors, "frozen", { frozen: true, threads, splitBytes: 0 });
      expect(floatEngineMemory(engine)!.threads).toBe(threads);
      expect(await trace(engine)).toEqual(want);
    }
  });
}

test("one copy: the retained weight bytes are one packed layout's, bf16 exactly when every value is", () => {
  const padded = (n: number) => Math.ceil(n / 8) * 8;
  const matrices = (cfg: ModelConfig) => paramShapes(cfg).filter((p) => p.dims.length === 2);
  for (const bf16 of [false, true]) {
    const engine = createFloatEngine(ODD, randomTensors(ODD, 7, bf16), "m", { frozen: true, threads: 1 });
    const m = floatEngineMemory(engine)!;
    const each = bf16 ? 2 : 4;
    expect(m.packedBytes).toBe(matrices(ODD).reduce((s, p) => s + padded(p.dims[0]) * p.dims[1] * each, 0));
    expect(m.matrices).toEqual({ [bf16 ? "bf16" : "f32"]: matrices(ODD).length });
    expect(m.vectorBytes).toBe(
      paramShapes(ODD).filter((p) => p.dims.length === 1).reduce((s, p) => s + p.dims[0] * 4, 0),
    );
  }
  // The small test model ties embed and lm_head: that matrix is kept once; `keep: "f32"` doubles nothing else.
  const tied = floatEngineMemory(
    createFloatEngine(run.config, run.model!, "m", { frozen: true, keep: "f32" }),
  )!;
  const shipped = matrices(run.config);
  expect(tied.matrices).toEqual({ f32: shipped.length });
  expect(tied.packedBytes).toBe(shipped.reduce((s, p) => s + padded(p.dims[0]) * p.dims[1] * 4, 0));
});

test("the engine keeps no reference to the tensors it packed: they are collected", async () => {
  const tensors = randomTensors(ODD, 8, true);
  const refs = tensors.map((t) => new WeakRef(t.data)); // matrices and norm vectors alike
  const engine = createFloatEngine(ODD, tensors, "m", { frozen: true, threads: 1 });
  tensors.length = 0;
  await new Promise((r) => setTimeout(r, 0));
  Bun.gc(true);
  await new Promise((r) => setTimeout(r, 0));
  Bun.gc(true);
  expect(refs.filter((r) => r.deref() !== undefined).length).toBe(0);
  expect((await engine.start().feed(PROMPT)).length).toBe(ODD.vocab_size); // and it still runs
});

test("a frozen engine's session restores on an unfrozen one: the digest hashes the unpacked weights", async () => {
  const frozen = createFloatEngine(run.config, run.model!, "m", { frozen: true, threads: 2, splitBytes: 0 });
  const s = frozen.start();
  await s.feed(PROMPT);
  const restored = createFloatEngine(run.config, run.model!, "m").restore!(s.save(), "s");
  expect(restored.pick()).toBe(s.pick());
  expect(await restored.feed([101])).toEqual(await s.feed([101]));
});

test("the KV cache holds the context asked for (default min(max_position_embeddings, 4096)); past it is refused", async () => {
  expect(defaultContext(ODD)).toBe(4096);
  expect(defaultContext(run.config)).toBe(Math.min(run.config.max_position_embeddings, 4096));
  const kvBytes = (n: number) => 2 * ODD.num_hidden_layers * n * ODD.num_key_value_heads * ODD.head_dim * 4;
  const tensors = randomTensors(ODD, 9, false);
  expect(floatEngineMemory(createFloatEngine(ODD, tensors, "m", { frozen: true, threads: 1 }))!.cacheBytes)
    .toBe(kvBytes(4096));
  for (const frozen of [true, false]) {
    const engine = createFloatEngine(ODD, tensors, "m", { frozen, threads: 1, context: 16 });
    if (frozen) expect(floatEngineMemory(engine)!.cacheBytes).toBe(kvBytes(16));
    const s = engine.start();
    await s.feed(Array(16).fill(65));
    await expect(s.feed([65])).rejects.toThrow(/context full: 16 \+ 1 positions exceed the cache's 16/);
    // A session longer than another engine's context is refused on restore, by what it holds.
    const small = createFloatEngine(ODD, tensors, "m", { frozen, threads: 1, context: 8 });
    expect(() => small.restore!(s.save(), "s.session")).toThrow(
      /holds 16 positions, more than this engine's context of 8/,
    );
  }
  expect(() => createFloatEngine(ODD, tensors, "m", { context: 40961 })).toThrow(
    /context must be an integer in \[1, 40960\]/,
  );
});

crossProcessTest("under Deno, the workers give Bun's bits", async () => {
  const code = `
import { createHash } from "node:crypto";
import { readCheckpoint } from "${ROOT}/formats/checkpoint/checkpoint.ts";
import { createFloatEngine } from "${ROOT}/engines/float.ts";
async function main() {
  const run = await readCheckpoint(${JSON.stringify(CHECKPOINT)}, { sections: ["model"] });
  const s = createFloatEngine(run.config, run.model, "m", { frozen: true, threads: 2, splitBytes: 0 }).start();
  const h = createHash("sha256");
  h.update(new Uint8Array((await s.feed(${JSON.stringify(PROMPT)}, "all")).buffer));
  const tokens = [];
  for (let i = 0; i < 24; i++) { tokens.push(s.pick()); h.update(new Uint8Array((await s.feed([tokens[i]])).buffer)); }
  console.log(JSON.stringify({ digest: h.digest("hex"), tokens }));
}
main();
`;
  // `deno run` of a file whose main is a promise, not a top-level await, as the CLIs run: Deno ends
  // a process whose only handles are unref'd, so the pool must hold its workers until they are up.
  const dir = mkdtempSync(join(tmpdir(), "ferry-float-threads-"));
  try {
    writeFileSync(join(dir, "run.ts"), code);
    const args = ["run", "-A", "--config", join(ROOT, "deno.json"), join(dir, "run.ts")];
    const r = spawnSync("deno", args, { encoding: "utf8", cwd: ROOT });
    if (r.status !== 0) throw new Error(`deno failed: ${r.stderr}`);
    expect(r.stdout.trim()).not.toBe("");
    expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toEqual(
      await trace(createFloatEngine(run.config, run.model!, "m")),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

crossProcessTest(
  "the WebGPU engine allocates its KV cache for the context asked for, and refuses past it (Deno)",
  () => {
    const code = `
import { readCheckpoint } from "${ROOT}/formats/checkpoint/checkpoint.ts";
import { GpuUnavailable, openGpu } from "${ROOT}/kernels/webgpu/device.ts";
import { createWebGpuEngine } from "${ROOT}/engines/webgpu.ts";
let gpu;
try { gpu = await openGpu(); } catch (e) {
  if (!(e instanceof GpuUnavailable)) throw e;
  console.log(JSON.stringify({ skip: e.message })); Deno.exit(0);
}
const run = await readCheckpoint(${JSON.stringify(CHECKPOINT)}, { sections: ["model"] });
const engine = await createWebGpuEngine(run.config, run.model, "m", { gpu, context: 16 });
const s = engine.start();
await s.feed(Array(16).fill(65), "none");
const refused = await s.feed([65]).then(() => "fed", (e) => e.message);
const fallback = (await createWebGpuEngine(run.config, run.model, "m", { gpu })).context;
console.log(JSON.stringify({ context: engine.context, refused, fallback }));
`;
    const r = spawnSync("deno", ["eval", "--ext=ts", "--unstable-webgpu", code], {
      encoding: "utf8",
      cwd: ROOT,
    });
    if (r.status !== 0) throw new Error(`deno failed: ${r.stderr}`);
    const got = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    if (got.skip) return console.log(`skipped: ${got.skip}`);
    expect(got.context).toBe(16);
    expect(got.refused).toMatch(/context full: 16 \+ 1 positions exceed the cache's 16/);
    expect(got.fallback).toBe(Math.min(run.config.max_position_embeddings, 4096));
  },
);

test("without shared memory (a page not cross-origin isolated) the packed module runs on a plain one", () => {
  const memory = new WebAssembly.Memory({ initial: 2, maximum: 16 });
  const ex = instantiatePacked(memory), heap = new Float32Array(memory.buffer);
  const [M, N, K] = [1, 12, 8], rng = createRng(3);
  const w = Float32Array.from({ length: N * K }, () => rng.next() - 0.5);
  const x = Float32Array.from({ length: K }, () => rng.next() - 0.5);
  heap.set(w, 4096), heap.set(x, 0);
  ex.pack_b(4096 * 4, K, 1, N, K, 8192 * 4);
  productShare(ex)(Int32Array.from([M, N, K, 0, 8192 * 4, 1024 * 4, 0, 16384 * 4, 0]), 0, 1);
  const want = new Float32Array(N);
  wasmKernels!.matmul(want, x, w, M, K, N);
  expect(heap.subarray(1024, 1024 + N)).toEqual(want);
});

test("inside a worker (a chat slot), a frozen engine's own workers run: the same bits", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-float-threads-"));
  try {
    const file = join(dir, "slot.ts");
    writeFileSync(
      file,
      `import { readCheckpoint } from "${ROOT}/formats/checkpoint/checkpoint.ts";
import { createFloatEngine } from "${ROOT}/engines/float.ts";
const run = await readCheckpoint(${JSON.stringify(CHECKPOINT)}, { sections: ["model"] });
const s = createFloatEngine(run.config, run.model, "m", { frozen: true, threads: 2, splitBytes: 0 }).start();
const logits = await s.feed(${JSON.stringify(PROMPT)});
self.postMessage(Array.from(logits));
`,
    );
    const w = new Worker(file, { type: "module" });
    const got = await new Promise<number[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("the slot's engine never answered")), 20_000);
      w.onmessage = (m) => (clearTimeout(timer), resolve(m.data));
      w.onerror = (e) => (clearTimeout(timer), reject(e));
    });
    w.terminate();
    const want = await createFloatEngine(run.config, run.model!, "m").start().feed(PROMPT);
    expect(Float32Array.from(got)).toEqual(want);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

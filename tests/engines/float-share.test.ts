// engines/float.ts serving from one copy of the weights (FloatEngineOptions.share, as a chat server's slots
// load it): an engine that attaches to another's packed matrices packs nothing, reads the first one's memory
// and norm vectors, and does its products in pages of that memory it grew itself. Two such engines, stepped
// a token at a time in turn (prefills of different lengths between them), give exactly an unshared engine's
// tokens, logits and session bytes, greedy and seeded, on an untied f32 model and a tied bf16 one, whose
// embedding is the packed lm_head.
import { expect, test } from "bun:test";
import {
  attachFloatEngine,
  createFloatEngine,
  floatEngineMemory,
  type FloatWeights,
} from "../../engines/float.ts";
import type { ModelConfig } from "../../model/config.ts";
import type { Engine, EngineSession, SamplingOptions } from "../../model/engine.ts";
import { initParams } from "../../model/init.ts";
import type { Tensor } from "../../model/tensor.ts";
import { bytesOf, expectSameBits } from "../helpers/bits.ts";

/** A small Qwen3 shape: head_dim != hidden / heads, N and K not multiples of 8. */
const UNTIED: ModelConfig = {
  vocab_size: 300,
  hidden_size: 48,
  intermediate_size: 70,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 20,
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  max_position_embeddings: 4096,
  tie_word_embeddings: false,
};
const TIED: ModelConfig = { ...UNTIED, tie_word_embeddings: true, hidden_size: 64, head_dim: 16 };

/** Random weights wide enough for varied logits; bf16: every value cut to a bfloat16 (packed as bf16). */
function weights(cfg: ModelConfig, seed: number, bf16: boolean): Tensor[] {
  const tensors = initParams(cfg, seed, 0.3);
  for (const t of tensors) {
    if (t.dims.length === 1) t.data.forEach((_, i) => t.data[i] = 1 + 0.05 * Math.sin(i + seed));
    if (bf16) {
      new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length).forEach((u, i, a) =>
        a[i] = u & 0xffff0000
      );
    }
  }
  return tensors;
}

const PROMPTS = [[1, 17, 42, 99, 5, 250, 7], [3, 141, 59, 26, 53, 58, 97, 93, 23, 84, 62, 64, 33]];
const SAMPLINGS: SamplingOptions[] = [{}, { temperature: 0.9, topP: 0.95 }];
const STEPS = 24;

/** One session's run: the prompt's every row, then each step's token, logits and (at the end) session bytes. */
interface Trace {
  prefill: Float32Array;
  tokens: number[];
  logits: Float32Array[];
  saved?: Uint8Array;
}

/** Starts each prompt on its engine, then steps the sessions a token at a time in turn. */
async function runInTurn(engines: Engine[], sampling: SamplingOptions): Promise<Trace[]> {
  const sessions: EngineSession[] = engines.map((e) => e.start());
  const traces: Trace[] = [];
  for (let e = 0; e < engines.length; e++) {
    sessions[e].seed(11 + e);
    traces.push({ prefill: await sessions[e].feed(PROMPTS[e], "all"), tokens: [], logits: [] });
  }
  for (let i = 0; i < STEPS; i++) {
    for (let e = 0; e < engines.length; e++) {
      const t = sessions[e].pick(sampling);
      traces[e].tokens.push(t);
      traces[e].logits.push(await sessions[e].feed([t]));
    }
  }
  sessions.forEach((s, e) => traces[e].saved = s.save!());
  return traces;
}

function expectSameTrace(got: Trace, want: Trace, label: string) {
  expectSameBits(got.prefill, want.prefill, `${label} prefill`);
  expect(got.tokens).toEqual(want.tokens);
  got.logits.forEach((l, i) => expectSameBits(l, want.logits[i], `${label} step ${i}`));
  expectSameBits(got.saved!, want.saved!, `${label} session bytes`);
}

for (
  const [name, cfg, bf16] of [
    ["an untied f32 model", UNTIED, false],
    ["a tied bf16 model", TIED, true],
  ] as const
) {
  test(`${name}: two engines on one copy, stepped in turn, give an unshared engine's tokens, logits and sessions`, async () => {
    const tensors = weights(cfg, bf16 ? 4 : 3, bf16);
    const alone = createFloatEngine(cfg, tensors, "m", { frozen: true, threads: 1 });
    expect(alone.shareable).toBeUndefined();
    const first = createFloatEngine(cfg, tensors, "m", {
      frozen: true,
      threads: 1,
      share: { count: 2, slot: 0 },
    });
    const second = attachFloatEngine(first.shareable, "m", { threads: 1 });
    expect(floatEngineMemory(first)!.matrices).toEqual({
      [bf16 ? "bf16" : "f32"]: cfg.num_hidden_layers * 7 + (cfg.tie_word_embeddings ? 1 : 2),
    });
    for (const sampling of SAMPLINGS) {
      // The unshared engine runs each prompt alone; the sharing pair runs them interleaved.
      const want = [
        (await runInTurn([alone], sampling))[0],
        (await runInTurn([alone, alone], sampling))[1],
      ];
      const got = await runInTurn([first, second], sampling);
      expectSameTrace(got[0], want[0], "first");
      expectSameTrace(got[1], want[1], "second");
      // A session moves between the engines: saved on one, continued on the other.
      const s = first.start();
      await s.feed(PROMPTS[1]);
      const moved = second.restore!(s.save!(), "s");
      expect(moved.pick()).toBe(s.pick());
      expectSameBits(await moved.feed([5]), await s.feed([5]), "moved");
    }
  });
}

test("the attached engine holds the first one's weights: one memory, one set of norm vectors, nothing packed again", () => {
  const tensors = weights(UNTIED, 5, false);
  const first = createFloatEngine(UNTIED, tensors, "m", {
    frozen: true,
    threads: 1,
    share: { count: 3, slot: 0 },
  });
  const offered = first.shareable as FloatWeights;
  expect(offered.packed.memory.buffer).toBeInstanceOf(SharedArrayBuffer);
  const vectors = offered.weights.map(([, w]) => w).filter((w) => w instanceof Float32Array);
  expect(vectors.length).toBe(2 * UNTIED.num_hidden_layers * 2 + 1); // 4 norms a layer, and the final one
  for (const v of vectors) expect(v.buffer).toBeInstanceOf(SharedArrayBuffer);
  expect(new Set(vectors.map((v) => v.buffer)).size).toBe(1);
  const before = offered.packed.memory.buffer.byteLength;
  const second = attachFloatEngine(first.shareable, "m", { threads: 1 });
  expect(second.shareable).toBe(first.shareable);
  expect(offered.packed.memory.buffer.byteLength).toBe(before); // attaching packs nothing
  // Honest bytes: the one copy, the same for both, and what the unshared engine holds.
  const alone = createFloatEngine(UNTIED, tensors, "m", { frozen: true, threads: 1 });
  const m = floatEngineMemory(alone)!;
  expect(first.weightBytes).toBe(m.packedBytes + m.vectorBytes);
  expect(second.weightBytes).toBe(first.weightBytes);
  expect([floatEngineMemory(first)!.shared, floatEngineMemory(second)!.shared, m.shared]).toEqual([
    true,
    true,
    false,
  ]);
  expect(floatEngineMemory(second)!.packedBytes).toBe(m.packedBytes);
});

test("a product on an attached engine works in pages of its own, past the memory the first one used", async () => {
  const first = createFloatEngine(UNTIED, weights(UNTIED, 6, false), "m", {
    frozen: true,
    threads: 1,
    share: { count: 2, slot: 0 },
  });
  const offered = first.shareable as FloatWeights;
  const before = offered.packed.memory.buffer.byteLength;
  const snapshot = bytesOf(new Uint8Array(offered.packed.memory.buffer, 0, before)).slice();
  const second = attachFloatEngine(offered, "m", { threads: 1 });
  await second.start().feed(PROMPTS[1], "all");
  // It grew the memory for its work area and wrote nothing below: the weights and the first one's area.
  expect(offered.packed.memory.buffer.byteLength).toBeGreaterThan(before);
  expectSameBits(new Uint8Array(offered.packed.memory.buffer, 0, before), snapshot, "memory below");
});

test("only a float engine's shareable weights are attached to", () => {
  expect(() => attachFloatEngine({ memory: new WebAssembly.Memory({ initial: 1 }) }, "m")).toThrow(
    /not a float engine's/,
  );
});

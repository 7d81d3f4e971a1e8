// engines/int/engine.ts serving from one copy of the matrices (EngineLoadOptions.share, as a chat server's
// slots do): an engine that attaches to another's shared memory lays out nothing and allocates no memory
// of its own, and the two engines, driven token by token in turn, give exactly the tokens of an engine
// that shares nothing, greedy and seeded: each has its own areas and KV cache in the one memory.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { statSync } from "node:fs";
import type { Engine } from "../../model/engine.ts";
import { loadEngine } from "../../engines/mod.ts";
import type { LutShared } from "../../kernels/wasm/int-lut.ts";
import { encode } from "../../model/tokenizer.ts";
import { exportChatModel } from "../helpers/chat-model.ts";

let model: Awaited<ReturnType<typeof exportChatModel>>;
let alone: Engine, first: Engine, second: Engine;

beforeAll(async () => {
  model = await exportChatModel();
  alone = await loadEngine(model.path, "int", { threads: 1 });
  first = await loadEngine(model.path, "int", { share: { count: 2, slot: 0 } });
  second = await loadEngine(model.path, "int", { share: { count: 2, slot: 1, weights: first.shareable } });
});
afterAll(() => model?.cleanup());

test("the second engine attaches to the first's memory: one buffer, shared", () => {
  const [a, b] = [first.shareable as LutShared, second.shareable as LutShared];
  expect(a.memory.buffer).toBeInstanceOf(SharedArrayBuffer);
  expect(b.memory).toBe(a.memory);
  expect(alone.shareable).toBeUndefined();
  // The first read the file into that memory and laid it out in place: its areas begin after the file,
  // and the second took the matrices' addresses as the first laid them out.
  expect(a.layout.areasBase).toBeGreaterThanOrEqual(statSync(model.path).size);
  expect(b.layout).toEqual(a.layout);
});

test("two sharing engines, stepped in turn, give the tokens of an engine that shares nothing", async () => {
  const prompts = [encode("The jury said", { bos: true }), encode("It was the best", { bos: true })];
  for (const sampling of [{}, { temperature: 0.9, topP: 0.95 }]) {
    const want: number[][] = [];
    for (const prompt of prompts) {
      const s = alone.start();
      s.seed(5);
      await s.feed(prompt, "none");
      const out: number[] = [];
      for (let i = 0; i < 40; i++) out.push(s.pick(sampling)), await s.feed([out[i]], "none");
      want.push(out);
    }
    // Each prompt on its own engine, the two advanced one token at a time in turn.
    const sessions = [first.start(), second.start()];
    const got: number[][] = [[], []];
    for (let e = 0; e < 2; e++) sessions[e].seed(5), await sessions[e].feed(prompts[e], "none");
    for (let i = 0; i < 40; i++) {
      for (let e = 0; e < 2; e++) {
        got[e].push(sessions[e].pick(sampling));
        await sessions[e].feed([got[e][i]], "none");
      }
    }
    expect(got).toEqual(want);
  }
});

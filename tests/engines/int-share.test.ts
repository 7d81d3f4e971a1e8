// engines/int/engine.ts serving from one copy of the matrices (EngineLoadOptions.share, as a chat server's
// slots do): an engine that attaches to another's shared memory lays out nothing and allocates no memory
// of its own, and the two engines, driven token by token in turn, give exactly the tokens of an engine
// that shares nothing, greedy and seeded: each has its own areas and KV cache in the one memory. The
// attaching engine never reads the file (the first hands it everything else), tied head or untied.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { closeSync, copyFileSync, openSync, statSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { Engine } from "../../model/engine.ts";
import { loadEngine } from "../../engines/mod.ts";
import type { IntShareable } from "../../engines/int/engine.ts";
import { readLut4, writeLut4 } from "../../formats/lut4/lut4.ts";
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
  const [a, b] = [first.shareable as IntShareable, second.shareable as IntShareable];
  expect(a.lut.memory.buffer).toBeInstanceOf(SharedArrayBuffer);
  expect(b.lut.memory).toBe(a.lut.memory);
  expect(alone.shareable).toBeUndefined();
  // The first read the file into that memory and laid it out in place: its areas begin after the file,
  // and the second took the matrices' addresses as the first laid them out.
  expect(a.lut.layout.areasBase).toBeGreaterThanOrEqual(statSync(model.path).size);
  expect(b.lut.layout).toEqual(a.lut.layout);
  // What the first hands on holds no codes (the memory has them) and no tokenizer.
  expect(a.file.weights.layers[0].q.nibbles.length).toBe(0);
  expect(a.file.tokenizer).toBeUndefined();
  expect(second.weightBytes).toBe(first.weightBytes);
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

/** Greedy tokens of `engine` after `prompt`, from a fresh session. */
async function greedy(engine: Engine, prompt: number[], n = 24): Promise<number[]> {
  const s = engine.start();
  await s.feed(prompt, "none");
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(s.pick()), await s.feed([out[i]], "none");
  return out;
}

test("an engine that attaches reads nothing of the file: it serves even after the file was damaged", async () => {
  const path = join(model.dir, "damaged.lut4");
  copyFileSync(model.path, path);
  const owner = await loadEngine(path, "int", { share: { count: 2, slot: 0 } });
  // A byte in the middle of the data section flipped: a read of the file now refuses it.
  const fd = openSync(path, "r+");
  writeSync(fd, Uint8Array.of(0x5a), 0, 1, Math.floor(statSync(path).size / 2));
  closeSync(fd);
  await expect(readLut4(path)).rejects.toThrow(path);
  const attached = await loadEngine(path, "int", { share: { count: 2, slot: 1, weights: owner.shareable } });
  const prompt = encode("The jury said", { bos: true });
  expect(await greedy(attached, prompt)).toEqual(await greedy(alone, prompt));
  owner.dispose?.(), attached.dispose?.();
});

test("with an untied head, the engine that attaches reads the embedding where the first placed it", async () => {
  const tied = await readLut4(model.path);
  const path = join(model.dir, "untied.lut4");
  const w = tied.weights;
  // The head is the embedding with each byte's two codes swapped, so the two differ (a separate head
  // has no final gain: the writer folds it in).
  const head = { ...w.embed, name: "head", nibbles: w.embed.nibbles.map((b) => (b >> 4) | ((b & 15) << 4)) };
  await writeLut4(path, { ...w, head, finalGain: null }, {
    source: "untied test",
    ropeTheta: tied.config.rope_theta,
    rmsNormEps: tied.config.rms_norm_eps,
  });
  const own = await loadEngine(path, "int", { threads: 1 });
  const owner = await loadEngine(path, "int", { share: { count: 2, slot: 0 } });
  const offered = owner.shareable as IntShareable;
  // A view of the shared memory (its buffer as it was before the memory grew for the areas), not a copy.
  const embed = offered.file.weights.embed.nibbles;
  expect(embed.buffer).toBeInstanceOf(SharedArrayBuffer);
  expect(new Uint8Array(offered.lut.memory.buffer, embed.byteOffset, embed.length)).toEqual(embed);
  const attached = await loadEngine(path, "int", { share: { count: 2, slot: 1, weights: offered } });
  const prompt = encode("It was the best", { bos: true });
  const want = await greedy(own, prompt);
  expect(want).not.toEqual(await greedy(alone, prompt));
  expect(await greedy(attached, prompt)).toEqual(want);
  expect(await greedy(owner, prompt)).toEqual(want);
  for (const e of [own, owner, attached]) e.dispose?.();
});

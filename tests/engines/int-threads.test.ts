// The integer engine's speed work, held to its integers: projections split across worker threads give
// the same logits, tokens and session bytes as one thread (every projection split, even the small test
// model's small ones, so that the split is exercised); batched prefill gives the same state as feeding
// one token at a time; picking and feeding on the generate path make no float; the KV cache is sized to
// the context asked for; and the same holds under Deno (a child process).
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { smallLut4 } from "../helpers/lut4-fixture.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";
import type { Engine, SamplingOptions } from "../../model/engine.ts";
import { encode } from "../../model/tokenizer.ts";
import { DEFAULT_CONTEXT, intEngineFromFile, openIntEngine } from "../../engines/int/engine.ts";

const PROMPT = "The jury said that the city had";
const SAMPLED: SamplingOptions = { temperature: 0.9, topK: 40, minP: 0.02 };

/** A prompt, then `n` tokens (greedy then sampled with seed 7), one feed each; tokens, logits and bytes. */
async function run(engine: Engine, n: number) {
  const s = engine.start();
  const last = await s.feed(encode(PROMPT, { bos: true }));
  const tokens: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i === n >> 1) s.seed(7);
    const id = s.pick(i < n >> 1 ? undefined : SAMPLED);
    tokens.push(id);
    await s.feed([id], "none");
  }
  return { tokens, first: Array.from(last), session: s.save!() };
}

test("1 and 2 threads (every projection split): the same logits, tokens and session bytes", async () => {
  const file = await readLut4(await smallLut4());
  const one = intEngineFromFile(file);
  const two = await openIntEngine(file, { threads: 2, splitWeights: 0 });
  const three = await openIntEngine(file, { threads: 3, splitWeights: 0 });
  try {
    expect(two.dispose).toBeDefined(); // a pool was started: the split really runs
    const a = await run(one, 48);
    const b = await run(two, 48);
    const c = await run(three, 48);
    expect(b.tokens).toEqual(a.tokens);
    expect(b.first).toEqual(a.first);
    expect(Buffer.from(b.session).equals(Buffer.from(a.session))).toBe(true);
    expect(c.tokens).toEqual(a.tokens);
    expect(Buffer.from(c.session).equals(Buffer.from(a.session))).toBe(true);
  } finally {
    two.dispose?.();
    three.dispose?.();
  }
});

test("batched prefill equals one token at a time: the same state, bytes and continuation", async () => {
  const file = await readLut4(await smallLut4());
  const ids = encode("It was the best of times, it was the worst of times; the age of wisdom.", {
    bos: true,
  });
  // After 5 ids, two full batches of 32 and a partial one: on two threads each thread takes a group of
  // 16 inputs of a full batch over every row; on three, each group's rows are shared out.
  expect(ids.length).toBeGreaterThan(5 + 64);
  const threaded = [2, 3].map((threads) => openIntEngine(file, { threads, splitWeights: 0 }));
  for (const engine of [intEngineFromFile(file), ...await Promise.all(threaded)]) {
    const batched = engine.start();
    await batched.feed(ids.slice(0, 5), "none");
    await batched.feed(ids.slice(5), "none");
    const single = engine.start();
    for (const id of ids) await single.feed([id], "none");
    expect(batched.position).toBe(ids.length);
    expect(batched.tokens).toEqual(ids);
    expect(Buffer.from(batched.save!()).equals(Buffer.from(single.save!()))).toBe(true);
    // The shared digit planes follow whichever state stepped last; both continue alike.
    const next = [batched.pick(), single.pick()];
    expect(next[0]).toBe(next[1]);
    await batched.feed([next[0], 65, 66], "none");
    await single.feed([next[1], 65, 66], "none");
    expect(Buffer.from(batched.save!()).equals(Buffer.from(single.save!()))).toBe(true);
    engine.dispose?.();
  }
  // The TypeScript kernels (no batching) reach the same bytes.
  const ts = intEngineFromFile(file, { simd: false }).start();
  await ts.feed(ids, "none");
  const simd = intEngineFromFile(file).start();
  await simd.feed(ids, "none");
  expect(Buffer.from(ts.save!()).equals(Buffer.from(simd.save!()))).toBe(true);
});

test("the generate path makes no float: feed(…, 'none') and pick with the request's options", async () => {
  const engine = intEngineFromFile(await readLut4(await smallLut4()));
  const s = engine.start();
  s.seed(3);
  await s.feed(encode(PROMPT, { bos: true }), "none");
  s.pick(SAMPLED); // the request's options, converted once
  const round = Math.round;
  const from = Float32Array.from;
  let floats = 0;
  Math.round = () => {
    floats++;
    return round(0);
  };
  Float32Array.from = ((...args: Parameters<typeof from>) => {
    floats++;
    return from.apply(Float32Array, args);
  }) as typeof from;
  try {
    for (let i = 0; i < 16; i++) {
      // The same object, then an equal copy (a server rebuilds it per token): neither converts again.
      const id = s.pick(i & 1 ? SAMPLED : { ...SAMPLED });
      const out = await s.feed([id], "none");
      expect(out.length).toBe(0);
    }
    s.pick();
  } finally {
    Math.round = round;
    Float32Array.from = from;
  }
  expect(floats).toBe(0);
  // A caller that asks for logits gets floats; other options convert anew.
  expect((await s.feed([65])).length).toBe(258);
  expect(() => s.pick({ temperature: 2, minP: 5 })).toThrow(/minP/);
});

test("the KV cache is sized to the context asked for; sessions move between contexts that hold them", async () => {
  const file = await readLut4(await smallLut4());
  expect(file.weights.shape.maxPositions).toBe(512);
  const full = intEngineFromFile(file);
  const small = intEngineFromFile(file, { context: 64 });
  const st = small.start();
  await st.feed(new Array(64).fill(65), "none");
  await expect(st.feed([65], "none")).rejects.toThrow(/context full/);
  expect(DEFAULT_CONTEXT).toBe(4096);
  // Over the file's max_positions is its max_positions.
  const big = intEngineFromFile(file, { context: 100000 }).start();
  await expect(big.feed(new Array(513).fill(65), "none")).rejects.toThrow(/context full/);
  // A session saved at 40 positions restores in the small context and continues as in the full one.
  const s = full.start();
  await s.feed(encode(PROMPT, { bos: true }), "none");
  const saved = s.save!();
  const back = small.restore!(saved);
  expect(back.pick()).toBe(s.pick());
  const long = full.start();
  await long.feed(new Array(100).fill(66), "none");
  expect(() => small.restore!(long.save!())).toThrow(/context of 64/);
  expect(() => intEngineFromFile(file, { context: 0 })).toThrow(/context/);
  await expect(openIntEngine(file, { threads: 0 })).rejects.toThrow(/threads/);
});

crossProcessTest(
  "under Deno: 2 threads give the same tokens as 1 (workers on node:worker_threads)",
  async () => {
    const lut = await smallLut4();
    const script = `
    import { readLut4 } from "./formats/lut4/lut4.ts";
    import { openIntEngine } from "./engines/int/engine.ts";
    import { encode } from "./model/tokenizer.ts";
    const file = await readLut4(${JSON.stringify(lut)});
    const out = [];
    for (const threads of [1, 2]) {
      const e = await openIntEngine(file, { threads, splitWeights: 0 });
      const s = e.start();
      await s.feed(encode(${JSON.stringify(PROMPT)}, { bos: true }), "none");
      const ids = [];
      for (let i = 0; i < 24; i++) { const id = s.pick(); ids.push(id); await s.feed([id], "none"); }
      out.push(ids.join(","));
    }
    console.log(JSON.stringify(out));`;
    const root = join(import.meta.dir, "../..");
    const r = spawnSync("deno", ["eval", "--ext=ts", script], {
      cwd: root,
      encoding: "utf8",
      timeout: 50_000,
    });
    expect(r.stderr).not.toMatch(/error/i);
    const [one, two] = JSON.parse(r.stdout.trim().split("\n").pop()!);
    expect(two).toBe(one);
    // The first half of `run` is greedy too: Deno's tokens are Bun's.
    const bun = await run(intEngineFromFile(await readLut4(lut)), 24);
    expect(one.split(",").slice(0, 12)).toEqual(bun.tokens.slice(0, 12).map(String));
  },
);

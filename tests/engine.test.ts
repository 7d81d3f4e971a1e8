// The format registry and the engine interface: every format recognised and read back through one
// list, the float engine giving the reference model's exact logits and text, its sampler's options,
// and the loader's refusals.
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatOf, FORMATS, readExport } from "../formats/mod.ts";
import { writeCheckpoint } from "../formats/checkpoint.ts";
import { FormatError } from "../model/error.ts";
import { PRESETS } from "../model/config.ts";
import { initParams } from "../model/init.ts";
import { tensorSource } from "../model/tensor.ts";
import { buildModel, createCache, forward } from "../model/qwen3.ts";
import { createFloatEngine } from "../engines/float.ts";
import { generateAll, generateTokens } from "../model/generate.ts";
import { generate } from "../model/sample.ts";
import { encode, EOS } from "../model/tokenizer.ts";
import { engineKinds, loadEngine } from "../engines/mod.ts";

setDefaultTimeout(60_000); // per file: Bun 1.4.5 applies a preload's default to the first test file only

const dir = mkdtempSync(join(tmpdir(), "ferry-engine-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const cfg = PRESETS.tiny;
const tensors = initParams(cfg, 7, 0.5); // a wide init, so sampling has real choices to make
const prompt = encode("The jury", { bos: true });

describe("the format registry", () => {
  test("every format writes, is recognised by its path, and reads back the same tensors", async () => {
    expect(FORMATS.map((f) => f.name)).toEqual(["dmexp", "hf", "gguf", "f64lines", "lut4"]);
    for (const format of FORMATS) {
      if (format.name === "lut4") continue; // 4-bit only, widths in multiples of 32: tests/lut4.test.ts
      expect(format.dtypes).toContain(format.defaultDtype);
      const dtype = format.dtypes.includes("f32") ? "f32" : format.defaultDtype; // lossless
      const path = join(dir, `m.${dtype}${format.extension}`);
      const input = {
        config: cfg,
        tensors: tensors.map(tensorSource),
        source: "t@step0",
        step: 0,
        name: "m",
      };
      const written = await format.write(path, input, { dtype });
      expect(written.file).toBe(path);
      expect(written.tensors).toBe(tensors.length);
      expect(formatOf(path)).toBe(format);
      const back = await readExport(path);
      expect(back.format).toBe(format);
      expect(back.config).toEqual(cfg);
      for (const t of tensors) {
        const got = back.tensors.find((b) => b.name === t.name)!;
        expect(`${format.name} ${t.name} ${got.data.every((v, i) => v === t.data[i])}`).toBe(
          `${format.name} ${t.name} true`,
        );
      }
      expect(typeof (await format.inspect(path))).toBe("object");
    }
  });

  test("a path no format recognises is refused, naming the known formats", () => {
    let err: unknown;
    try {
      formatOf(join(dir, "notes.txt"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FormatError);
    expect((err as FormatError).field).toBe("format");
    for (const f of FORMATS) expect((err as Error).message).toContain(f.extension);
  });
});

describe("the float engine", () => {
  const model = buildModel(cfg, tensors);
  const engine = createFloatEngine(cfg, tensors, "tiny");

  test("feeding gives the reference model's logits, bit for bit, in one call or token by token", async () => {
    const ref = forward(model, createCache(model), prompt);
    const s = engine.start();
    expect(await s.feed(prompt, "all")).toEqual(ref);
    const t = engine.start();
    let last = new Float32Array(0);
    for (const id of prompt) last = await t.feed([id]);
    expect(last).toEqual(ref.slice(ref.length - cfg.vocab_size));
    expect(t.position).toBe(prompt.length);
    expect(t.tokens).toEqual(prompt);
  });

  test("greedy generation equals the reference loop's; every yielded token is fed back", async () => {
    const want = generate(model, prompt, { maxTokens: 20, stopAtEos: false });
    const s = engine.start();
    const got = await generateAll(engine, prompt, { maxTokens: 20, stopAtEos: false, session: s });
    expect(got).toEqual(want);
    expect(s.tokens).toEqual([...prompt, ...want]);
  });

  test("seeded sampling equals the reference loop's, and top-k 1 or min-p 1 is greedy", async () => {
    const opts = { maxTokens: 24, temperature: 1.5, topP: 0.9, seed: 11, stopAtEos: false };
    expect(await generateAll(engine, prompt, opts)).toEqual(generate(model, prompt, opts));
    const greedy = generate(model, prompt, { maxTokens: 24, stopAtEos: false });
    const hot = { maxTokens: 24, temperature: 5, seed: 3, stopAtEos: false };
    expect(await generateAll(engine, prompt, { ...hot, topK: 1 })).toEqual(greedy);
    expect(await generateAll(engine, prompt, { ...hot, minP: 1 })).toEqual(greedy);
    expect(await generateAll(engine, prompt, hot)).not.toEqual(greedy);
  });

  test("top-k keeps only the k most likely tokens", async () => {
    const s = engine.start();
    const logits = await s.feed(prompt);
    const top3 = [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b).slice(0, 3);
    s.seed(5);
    const picks = new Set(Array.from({ length: 200 }, () => s.pick({ temperature: 50, topK: 3 })));
    expect([...picks].every((id) => top3.includes(id))).toBe(true);
    expect(picks.size).toBe(3);
  });

  test("generation stops at the context's end and, by default, at EOS", async () => {
    const ids: number[] = [];
    for await (const id of generateTokens(engine, prompt, { maxTokens: 10_000, stopAtEos: false })) {
      ids.push(id);
    }
    expect(ids.length).toBe(cfg.max_position_embeddings - prompt.length);
    const stopped = await generateAll(engine, prompt, { maxTokens: 10_000, temperature: 3, seed: 1 });
    expect(stopped.includes(EOS)).toBe(false);
  });

  test("a token outside the vocabulary rejects the feed", async () => {
    await expect(engine.start().feed([cfg.vocab_size])).rejects.toThrow(/outside/);
  });
});

describe("loadEngine", () => {
  test("loads any export on the format's natural engine, and refuses checkpoints, unknown paths and engines", async () => {
    expect(engineKinds()).toContain("float");
    const path = join(dir, "m.f32.dmexp");
    const engine = await loadEngine(path);
    expect(engine.kind).toBe("float");
    expect(engine.source).toBe(path);
    const ref = buildModel(cfg, tensors);
    expect(await engine.start().feed(prompt)).toEqual(
      forward(ref, createCache(ref), prompt).slice(-cfg.vocab_size),
    );
    await expect(loadEngine(path, "abacus")).rejects.toThrow(/unknown engine abacus \(known: float/);
    await expect(loadEngine(join(dir, "notes.txt"))).rejects.toBeInstanceOf(FormatError);
    const ckpt = join(dir, "run.ckpt");
    await writeCheckpoint(ckpt, cfg, { step: 1, model: tensors });
    await expect(loadEngine(ckpt)).rejects.toThrow(/training checkpoint/);
  });

  test("the loaded float engine (its weights frozen) gives an unfrozen engine's bits, prefill and decode", async () => {
    const frozen = (await loadEngine(join(dir, "m.f32.dmexp"))).start();
    const plain = createFloatEngine(cfg, tensors).start();
    let ids = prompt;
    for (let step = 0; step < 20; step++) {
      const [got, want] = [await frozen.feed(ids), await plain.feed(ids)];
      expect(new Uint8Array(got.buffer)).toEqual(new Uint8Array(want.buffer));
      ids = [plain.pick()];
    }
  });
});

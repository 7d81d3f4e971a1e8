// The registries and the engine interface: every format written and read back through one list, every
// engine of the table run on every export (formats × engines), the float engine giving the reference
// model's exact logits and text, the one sampling contract on every engine, the integer engine on a
// float export giving the lut4 export's bits, the loader's refusals, and every engine loading the
// trained model on every runtime it claims.
import { afterAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { formatOf, FORMATS, readExport } from "../../formats/mod.ts";
import type { FormatDescriptor } from "../../formats/format.ts";
import { lut4Format } from "../../formats/lut4/lut4.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { FormatError } from "../../model/error.ts";
import { type ModelConfig, PRESETS } from "../../model/config.ts";
import type { Engine } from "../../model/engine.ts";
import { initParams } from "../../model/init.ts";
import { createRng } from "../../model/random.ts";
import { neverSampled, pickToken } from "../../model/sample.ts";
import { checkSampling, SamplingError } from "../../model/sampling.ts";
import { type Tensor, tensorSource } from "../../model/tensor.ts";
import { buildModel, createCache, forward, type Model } from "../../model/qwen3.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { generateAll, type GenerateOptions, generateTokens } from "../../model/generate.ts";
import { encode, EOS } from "../../model/tokenizer.ts";
import { DEFAULT_ENGINE, engineKinds, ENGINES, loadEngine, type Runtime } from "../../engines/mod.ts";

const dir = mkdtempSync(join(tmpdir(), "ferry-engine-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RUNTIME: Runtime = "bun"; // bun test runs this file; Deno runs the shipped-model script below
const cfg = PRESETS.tiny; // widths lut4 cannot store (hidden_size 16)
const tensors = initParams(cfg, 7, 0.5); // a wide init, so sampling has real choices to make
/** A small shape every format can store (widths in multiples of 32), so every engine runs every export. */
const small: ModelConfig = {
  ...PRESETS.tiny,
  hidden_size: 32,
  intermediate_size: 64,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
};
const smallTensors = initParams(small, 9, 0.5);
const prompt = encode("The jury", { bos: true });

/** The dtype a format writes without loss (f32, f64), or its default where it has none (lut4). */
const losslessDtype = (f: FormatDescriptor) =>
  f.dtypes.find((d) => d === "f32" || d === "f64") ?? f.defaultDtype;

/** Writes `ts` in format `f` (its lossless dtype) as `<stem>.<dtype><ext>`; returns the path. */
async function writeAs(
  f: FormatDescriptor,
  stem: string,
  config: ModelConfig,
  ts: Tensor[],
): Promise<string> {
  const dtype = losslessDtype(f);
  const path = join(dir, `${stem}.${dtype}${f.extension}`);
  const input = { config, tensors: ts.map(tensorSource), source: `${stem}@step0`, step: 0, name: stem };
  await f.write(path, input, { dtype });
  return path;
}

/** The reference loop the engines must match: forward, pick from the last row (never a special but EOS), feed it back. */
function referenceLoop(model: Model, ids: number[], opts: GenerateOptions): number[] {
  const V = model.config.vocab_size, cache = createCache(model), rng = createRng(opts.seed ?? 0);
  const choice = checkSampling(opts), out: number[] = [], never = neverSampled(model.config);
  let logits = forward(model, cache, ids), off = (ids.length - 1) * V;
  const budget = Math.min(opts.maxTokens, model.config.max_position_embeddings - ids.length);
  for (let i = 0; i < budget; i++) {
    const id = pickToken(logits, off, V, choice, rng, never);
    if ((opts.stopAtEos ?? true) && id === EOS) break;
    out.push(id);
    if (i + 1 < budget) logits = forward(model, cache, [id]), off = 0;
  }
  return out;
}

describe("the format registry", () => {
  test("every format that can store the shape writes, is recognised by its path, and reads back the same tensors", async () => {
    expect(FORMATS.map((f) => f.name)).toEqual(["dmexp", "hf", "gguf", "f64lines", "lut4"]);
    for (const format of FORMATS) {
      expect(format.dtypes).toContain(format.defaultDtype);
      const why = format.cannotStore?.(cfg);
      if (why) {
        // lut4: one scale per 32 weights; its own round trip is tests/lut4.test.ts.
        expect(`${format.name} ${why.field}`).toBe("lut4 hidden_size");
        continue;
      }
      const path = await writeAs(format, "m", cfg, tensors);
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

  test("each format's default engine follows from what it stores, through the one table", () => {
    for (const f of FORMATS) expect(Object.hasOwn(ENGINES, DEFAULT_ENGINE[f.weights])).toBe(true);
    expect(FORMATS.filter((f) => f.weights === "lut4").map((f) => f.name)).toEqual(["lut4"]);
  });
});

describe("formats × engines", () => {
  const exports = (async () => {
    const paths = new Map<FormatDescriptor, string>();
    for (const f of FORMATS) paths.set(f, await writeAs(f, "small", small, smallTensors));
    return paths;
  })();
  const ref = buildModel(small, smallTensors);
  const want = forward(ref, createCache(ref), prompt);

  for (const [kind, entry] of Object.entries(ENGINES)) {
    const here = entry.runtimes.includes(RUNTIME);
    const title = `${kind}: loads every export and runs it` +
      (here ? "" : ` (skipped under Bun: ${entry.elsewhere}; the shipped-model test runs it under Deno)`);
    test.skipIf(!here)(title, async () => {
      const int = kind === "int" ? await loadEngine((await exports).get(lut4Format)!, "int") : undefined;
      const intLogits = int ? await int.start().feed(prompt, "all") : undefined;
      for (const [format, path] of await exports) {
        const notes: string[] = [];
        const engine = await loadEngine(path, kind, { onNote: (line) => notes.push(line) });
        expect(engine.kind).toBe(kind);
        const logits = await engine.start().feed(prompt, "all");
        expect(logits.length).toBe(prompt.length * small.vocab_size);
        const quantized = kind === "int" && format.weights === "float";
        expect(notes).toEqual(
          quantized ? [`quantized ${path} to lut4 on load (as export --format lut4 would)`] : [],
        );
        if (kind === "int") {
          // The integer engine on a lossless float export: the lut4 export's integers, bit for bit.
          expect(`${format.name} ${logits.every((v, i) => Object.is(v, intLogits![i]))}`).toBe(
            `${format.name} true`,
          );
        } else if (format.weights === "float") {
          // A lossless export on a float engine: the reference model's logits.
          const close = logits.every((v, i) => Math.abs(v - want[i]) <= (kind === "float" ? 0 : 1e-4));
          expect(`${format.name} ${close}`).toBe(`${format.name} true`);
        } else {
          const back = buildModel(small, (await readExport(path)).tensors);
          expect(logits).toEqual(forward(back, createCache(back), prompt)); // lut4 read as floats
        }
        engine.dispose?.();
      }
    });
  }

  test("the integer engine refuses a float export lut4 cannot store, with lut4's own reason", async () => {
    const path = await writeAs(FORMATS[0], "narrow", cfg, tensors);
    const why = lut4Format.cannotStore!(cfg)!;
    const err = await loadEngine(path, "int").catch((e) => e);
    expect(err).toBeInstanceOf(FormatError);
    expect([err.path, err.field, err.expected, err.found]).toEqual([
      path,
      why.field,
      why.expected,
      why.found,
    ]);
    expect(err.message).toContain("quantizes to lut4 on load");
  });
});

describe("the one sampling contract", () => {
  const bad: [Record<string, number>, string][] = [
    [{ temperature: -1 }, "temperature"],
    [{ temperature: 100.5 }, "temperature"],
    [{ temperature: NaN }, "temperature"],
    [{ topK: 1.5 }, "topK"],
    [{ topK: -1 }, "topK"],
    [{ topP: 0 }, "topP"],
    [{ topP: 1.01 }, "topP"],
    [{ minP: -0.1 }, "minP"],
    [{ minP: 2 }, "minP"],
  ];
  for (const [kind, entry] of Object.entries(ENGINES)) {
    test.skipIf(!entry.runtimes.includes(RUNTIME))(
      `${kind}: pick refuses what the contract refuses, by name; {} is greedy`,
      async () => {
        const engine: Engine = await loadEngine(
          await writeAs(lut4Format, "contract", small, smallTensors),
          kind,
        );
        const s = engine.start();
        const logits = await s.feed(prompt);
        for (const [options, field] of bad) {
          const err = (() => {
            try {
              s.pick(options);
            } catch (e) {
              return e;
            }
          })();
          expect(err).toBeInstanceOf(SamplingError);
          expect(`${JSON.stringify(options)} ${(err as SamplingError).field}`).toBe(
            `${JSON.stringify(options)} ${field}`,
          );
        }
        for (const seed of [1.5, 2 ** 53, NaN]) expect(() => s.seed(seed)).toThrow(SamplingError);
        s.seed(-3); // negative seeds are allowed
        const top = [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b)[0];
        expect([s.pick(), s.pick({}), s.pick({ temperature: 100, topK: 1 })]).toEqual([top, top, top]);
        // The loop checks before it feeds anything: the session is untouched.
        const fresh = engine.start();
        await expect(generateAll(engine, prompt, { maxTokens: 2, topP: 0, session: fresh })).rejects.toThrow(
          SamplingError,
        );
        expect(fresh.position).toBe(0);
      },
    );
  }
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
    const want = referenceLoop(model, prompt, { maxTokens: 20, stopAtEos: false });
    const s = engine.start();
    const got = await generateAll(engine, prompt, { maxTokens: 20, stopAtEos: false, session: s });
    expect(got).toEqual(want);
    expect(s.tokens).toEqual([...prompt, ...want]);
  });

  test("seeded sampling equals the reference loop's, and top-k 1 or min-p 1 is greedy", async () => {
    const opts = { maxTokens: 24, temperature: 1.5, topP: 0.9, seed: 11, stopAtEos: false };
    expect(await generateAll(engine, prompt, opts)).toEqual(referenceLoop(model, prompt, opts));
    const filtered = { ...opts, topK: 5, minP: 0.05, seed: 4 };
    expect(await generateAll(engine, prompt, filtered)).toEqual(referenceLoop(model, prompt, filtered));
    const greedy = referenceLoop(model, prompt, { maxTokens: 24, stopAtEos: false });
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
  test("loads any export on the format's default engine, and refuses checkpoints, unknown paths and engines", async () => {
    expect(engineKinds()).toEqual(Object.keys(ENGINES));
    const path = join(dir, "m.f32.dmexp");
    const engine = await loadEngine(path);
    expect(engine.kind).toBe("float");
    expect(engine.source).toBe(path);
    const ref = buildModel(cfg, tensors);
    expect(await engine.start().feed(prompt)).toEqual(
      forward(ref, createCache(ref), prompt).slice(-cfg.vocab_size),
    );
    expect((await loadEngine(await writeAs(lut4Format, "small", small, smallTensors))).kind).toBe("int");
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

// Every engine of the table, on every runtime it claims, loads a trained model's exports (dmexp f32
// and lut4: the small test model, tests/fixtures/small-model) and continues a prompt greedily. The integer engine gives the same tokens on the dmexp
// export (quantized on load) as on the lut4 export of the same checkpoint.
const SHIPPED = `
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ENGINES, loadEngine } from "./engines/mod.ts";
import { exportCheckpoint } from "./formats/export.ts";
import { generateAll } from "./model/generate.ts";
import { encode } from "./model/tokenizer.ts";
const runtime = "Deno" in globalThis ? "deno" : "bun";
const dir = mkdtempSync(join(tmpdir(), "ferry-shipped-"));
const input = "tests/fixtures/small-model/ferry.ckpt";
try {
  const files = {
    dmexp: (await exportCheckpoint({ input, format: "dmexp", dtype: "f32", output: dir })).file,
    lut4: (await exportCheckpoint({ input, format: "lut4", output: dir })).file,
  };
  const ids = encode("The jury said", { bos: true });
  for (const [kind, entry] of Object.entries(ENGINES)) {
    if (!entry.runtimes.includes(runtime)) continue;
    for (const [format, file] of Object.entries(files)) {
      try {
        const engine = await loadEngine(file, kind);
        const out = await generateAll(engine, ids, { maxTokens: 16, stopAtEos: false });
        engine.dispose?.();
        console.log(JSON.stringify({ runtime, kind, format, out }));
      } catch (e) {
        const skip = e.name === "GpuUnavailable" && /no adapter/.test(e.message);
        console.log(JSON.stringify({ runtime, kind, format, [skip ? "skip" : "error"]: String(e.message) }));
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
`;

crossProcessTest(
  "every engine of the table loads a trained model's exports on every runtime it claims",
  () => {
    const runs: Record<Runtime, string[]> = {
      deno: ["deno", "eval", "--ext=ts", SHIPPED],
      bun: ["bun", "--eval", SHIPPED],
    };
    const rows: {
      runtime: Runtime;
      kind: string;
      format: string;
      out?: number[];
      skip?: string;
      error?: string;
    }[] = [];
    for (const [runtime, [exe, ...args]] of Object.entries(runs)) {
      const r = spawnSync(exe, args, { encoding: "utf8", timeout: 240_000 });
      expect(`${runtime}: ${r.status} ${withoutDenoDownloads(r.stderr)}`).toBe(`${runtime}: 0 `);
      rows.push(...r.stdout.trim().split("\n").map((l) => JSON.parse(l)));
    }
    for (const [kind, entry] of Object.entries(ENGINES)) {
      for (const runtime of entry.runtimes) {
        for (const format of ["dmexp", "lut4"]) {
          const row = rows.find((r) => r.runtime === runtime && r.kind === kind && r.format === format);
          expect(row?.error).toBeUndefined();
          if (row?.skip) {
            console.warn(`${kind} on ${runtime} skipped: ${row.skip}`);
            continue;
          }
          expect(`${kind} ${runtime} ${format} ${row?.out?.length}`).toBe(`${kind} ${runtime} ${format} 16`);
        }
      }
    }
    const out = (kind: string, format: string, runtime: Runtime = "bun") =>
      rows.find((r) => r.runtime === runtime && r.kind === kind && r.format === format)!.out;
    expect(out("int", "dmexp")).toEqual(out("int", "lut4")); // quantized on load = the lut4 export
    expect(out("int", "dmexp", "deno")).toEqual(out("int", "dmexp"));
    // Read into the module's memory by each runtime's own reads (formats/io.ts `readExactAside`).
    expect(out("int", "lut4", "deno")).toEqual(out("int", "lut4"));
    expect(out("float", "dmexp", "deno")).toEqual(out("float", "dmexp"));
    const gpu = out("webgpu", "dmexp", "deno");
    if (gpu) expect(gpu).toEqual(out("float", "dmexp")); // where Deno has an adapter
  },
  300_000,
);

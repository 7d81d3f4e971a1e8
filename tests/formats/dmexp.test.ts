// The dmexp gate, in process: every claim of formats/dmexp/dmexp.md asserted on tiny models.
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  checkShapes,
  type DmexpDtype,
  DmexpError,
  HEADER_KEYS,
  inspectDmexp,
  readDmexp,
  type TensorSource,
  verifyDmexp,
  writeDmexp,
} from "../../formats/dmexp/dmexp.ts";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16, roundBf16, roundF16 } from "../../quantize/float16.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { paramShapes, parseConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel } from "../../model/qwen3.ts";
import { compareLogits, windowLogits } from "../../measure/metrics.ts";
import { cloneTensors, numel, type Tensor } from "../../model/tensor.ts";
import { assemble, disassemble, foreignFile, tempDir, withHeader } from "../helpers/dmexp-fixtures.ts";
import { expectSameTensors } from "../helpers/bits.ts";

// A file read back and built into the float model (formats no longer build models themselves).
const loadDmexpModel = async (path: string) => {
  const { config, tensors, header } = await readDmexp(path);
  return { model: buildModel(config, tensors, path), header };
};

const cfg = PRESETS.tiny;
const source = initParams(cfg, 1);
const { dir, cleanup } = tempDir();
afterAll(cleanup);
const at = (name: string) => join(dir, name);
const meta = (dtype: DmexpDtype) => ({ dtype, source: "init@step0", step: 0 });
const BPE = { f32: 4, f16: 2, bf16: 2 } as const;

// Logit tolerances for the 2-byte formats, from the measurement recorded in formats/dmexp/dmexp.md
// (this tiny random-init model, 16 held-out windows: f16 max 1.08e-4, bf16 max 9.47e-4), with ~4x room.
const TOLERANCE = { f16: 5e-4, bf16: 4e-3 };
// Fixed byte windows (ASCII text) so the test needs no corpus; the tiny model's context is 64.
const WINDOWS = [
  "The jury further said in term-end presentments that the City Executive",
  "It was the best of times, it was the worst of times, it was the age of",
  "Rain fell on the harbour all night; by morning the boats had drifted and",
].map((s) => new TextEncoder().encode(s.slice(0, 64)));

const written: Record<DmexpDtype, { path: string; bytes: number; headerLength: number }> = {} as never;
for (const dtype of ["f32", "f16", "bf16"] as const) {
  const path = at(`tiny.${dtype}.dmexp`);
  written[dtype] = await writeDmexp(path, source, cfg, meta(dtype));
}
const bytesOf = (d: Float32Array) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength);

async function refusal(p: Promise<unknown>): Promise<DmexpError> {
  try {
    const got = await p;
    throw new Error(`expected a refusal, got ${typeof got}`);
  } catch (e) {
    if (!(e instanceof DmexpError)) throw e;
    return e;
  }
}

describe("round trip", () => {
  test("f32 reproduces every tensor bit for bit and the source logits exactly (difference 0)", async () => {
    const { tensors } = await readDmexp(written.f32.path);
    expectSameTensors(tensors, source);
    const { model } = await loadDmexpModel(written.f32.path);
    const ref = buildModel(cfg, cloneTensors(source));
    for (const w of WINDOWS) {
      const c = compareLogits(windowLogits(ref, w), windowLogits(model, w), cfg.vocab_size);
      expect(c.maxAbsDelta).toBe(0);
      expect(c.top1Agreement).toBe(1);
    }
  });

  for (const dtype of ["f16", "bf16"] as const) {
    test(`${dtype} stores each weight rounded to nearest even, widens it exactly, and lands within ${TOLERANCE[dtype]} of the source logits`, async () => {
      const { tensors } = await readDmexp(written[dtype].path);
      expect(tensors.length).toBe(source.length);
      tensors.forEach((t, i) => {
        const want = dtype === "f16"
          ? f16ToF32(f32ToF16(source[i].data))
          : bf16ToF32(f32ToBf16(source[i].data));
        expect(bytesOf(t.data)).toEqual(bytesOf(want));
      });
      const { model } = await loadDmexpModel(written[dtype].path);
      expect(model.embed).toBeInstanceOf(Float32Array);
      const ref = buildModel(cfg, cloneTensors(source));
      let max = 0;
      for (const w of WINDOWS) {
        max = Math.max(
          max,
          compareLogits(windowLogits(ref, w), windowLogits(model, w), cfg.vocab_size).maxAbsDelta,
        );
      }
      expect(max).toBeGreaterThan(0); // the narrowing did something
      expect(max).toBeLessThan(TOLERANCE[dtype]);
    });
  }

  for (const dtype of ["f32", "f16", "bf16"] as const) {
    test(`${dtype}: the file is exactly 24 + header + ${BPE[dtype]} bytes per parameter`, () => {
      const params = source.reduce((n, t) => n + t.data.length, 0);
      expect(statSync(written[dtype].path).size).toBe(24 + written[dtype].headerLength + BPE[dtype] * params);
      expect(written[dtype].bytes).toBe(statSync(written[dtype].path).size);
    });
  }

  test("the header carries the config, every reference key in order, and every tensor's name, dims and count", async () => {
    const { header, tensors } = await readDmexp(written.bf16.path);
    expect(parseConfig(header.config, "header")).toEqual(cfg);
    const shapes = paramShapes(cfg);
    expect(header.tensors.map((t) => [t.name, t.dims])).toEqual(shapes.map((s) => [s.name, s.dims]));
    expect(tensors.map((t) => [t.name, t.dims, t.data.length])).toEqual(
      shapes.map((s) => [s.name, s.dims, numel(s.dims)]),
    );
    expect(header.num_tensors).toBe(shapes.length);
    expect(header.num_params).toBe(shapes.reduce((n, s) => n + numel(s.dims), 0));
    expect([header.source, header.step, header.dtype, header.format]).toEqual(["init@step0", 0, "bf16", 1]);
    expect(header.extra).toEqual({
      arch: "qwen3",
      tokenizer: "bytes",
      header_crc32: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    // Key order in the text: the reference's scalars, in its order, before the tensor tables.
    const { header: text } = await disassemble(written.bf16.path);
    const order = HEADER_KEYS.filter((k) => k !== "tensors").map((k) =>
      text.search(new RegExp(`^${k} = `, "m"))
    );
    expect(order.every((pos, i) => pos >= 0 && (i === 0 || pos > order[i - 1]))).toBe(true);
    expect(text.indexOf("[[tensors]]")).toBeGreaterThan(order[order.length - 1]);
    expect(text).toMatch(/^max_abs = 1\.0$/m); // a TOML float even when integral
  });

  test("max_abs, min_nonzero_abs and flushed describe the weights after narrowing", async () => {
    const tensors = cloneTensors(source);
    const e = tensors[0].data;
    e.set([1e-9, -2e-8, 2e-7, 0, -1234.5, 6e-5]);
    for (const dtype of ["f32", "f16", "bf16"] as const) {
      const r = await writeDmexp(at(`stats.${dtype}.dmexp`), tensors, cfg, meta(dtype));
      const round = dtype === "f32" ? Math.fround : dtype === "f16" ? roundF16 : roundBf16;
      let max = 0, min = Infinity, flushed = 0;
      for (const t of tensors) {
        for (const x of t.data) {
          const a = Math.abs(round(x));
          max = Math.max(max, a);
          if (a !== 0) min = Math.min(min, a);
          else if (x !== 0) flushed++;
        }
      }
      expect([r.header.max_abs, r.header.min_nonzero_abs, r.header.flushed]).toEqual([max, min, flushed]);
      const read = (await readDmexp(r.path)).header;
      expect([read.max_abs, read.min_nonzero_abs, read.flushed]).toEqual([max, min, flushed]);
    }
    // The f16 case flushes what bf16 keeps: 1e-9 and 2e-8 are below half of f16's smallest subnormal (2^-25).
    expect((await readDmexp(at("stats.f16.dmexp"))).header.flushed).toBe(2);
    expect((await readDmexp(at("stats.bf16.dmexp"))).header.flushed).toBe(0);
  });

  test("small chunks (tensors split over chunks, read chunks spanning tensors) give the same bytes and the same tensors", async () => {
    for (const dtype of ["f32", "f16", "bf16"] as const) {
      const path = at(`chunked.${dtype}.dmexp`);
      await writeDmexp(path, source, cfg, { ...meta(dtype), chunkBytes: 100 });
      expect((await disassemble(path)).file).toEqual((await disassemble(written[dtype].path)).file);
      const a = await readDmexp(path, { chunkBytes: 72 }), b = await readDmexp(path);
      expectSameTensors(a.tensors, b.tensors);
      let last = 0;
      await verifyDmexp(path, { chunkBytes: 40, onProgress: (done) => (last = done) });
      expect(last).toBe(statSync(path).size - 24 - written[dtype].headerLength);
    }
  });

  test("the writer streams from chunked sources and refuses one that changes between its two passes", async () => {
    const calls = new Map<string, number>();
    const sources: TensorSource[] = source.map((t) => ({
      name: t.name,
      dims: t.dims,
      read: (start, count, scratch) => {
        calls.set(t.name, (calls.get(t.name) ?? 0) + 1);
        const out = scratch.subarray(0, count);
        out.set(t.data.subarray(start, start + count));
        return Promise.resolve(out);
      },
    }));
    const ok = at("sourced.dmexp");
    await writeDmexp(ok, sources, cfg, { ...meta("bf16"), chunkBytes: 64 });
    expect((await disassemble(ok)).file).toEqual((await disassemble(written.bf16.path)).file);
    expect(Math.min(...calls.values())).toBeGreaterThanOrEqual(2);
    let reads = 0;
    const drifting = sources.map((s, i) =>
      i === 0
        ? {
          ...s,
          read: (start: number, count: number, scratch: Float32Array) => {
            const out = scratch.subarray(0, count);
            out.set(source[0].data.subarray(start, start + count));
            if (++reads > 1) out[0] += 1; // the second pass sees other values
            return out;
          },
        }
        : s
    );
    const path = at("drift.dmexp");
    const e = await refusal(writeDmexp(path, drifting, cfg, { ...meta("bf16"), chunkBytes: 1 << 20 }));
    expect(e.field).toBe("crc32");
    expect(readdirSync(dir).filter((f) => f.startsWith("drift"))).toEqual([]);
  });

  test("the writer refuses tensors that are not what the config implies", async () => {
    const missing = await refusal(writeDmexp(at("w1.dmexp"), source.slice(1), cfg, meta("f32")));
    expect(missing.field).toBe("tensors.model.embed_tokens.weight");
    const wrong = cloneTensors(source);
    wrong[0] = { ...wrong[0], dims: [16, 258] };
    expect((await refusal(writeDmexp(at("w2.dmexp"), wrong, cfg, meta("f32")))).field).toBe(
      "tensors.model.embed_tokens.weight.dims",
    );
    const extra = [...source, { name: "lm_head.bias", dims: [258], data: new Float32Array(258) }];
    expect((await refusal(writeDmexp(at("w3.dmexp"), extra, cfg, meta("f32")))).field).toBe(
      "tensors.lm_head.bias",
    );
  });
});

describe("narrowing refusals", () => {
  const big = cloneTensors(source);
  big[3].data[5] = 70000; // one weight beyond f16's 65504

  test("f16 export of a weight above 65504 is refused, naming the tensor and bf16, and leaves no file", async () => {
    const e = await refusal(writeDmexp(at("big.f16.dmexp"), big, cfg, meta("f16")));
    expect(e.field).toBe("dtype");
    expect(e.message).toContain(big[3].name);
    expect(e.message).toContain("70000");
    expect(e.message).toContain("--dtype bf16");
    expect(readdirSync(dir).filter((f) => f.startsWith("big.f16"))).toEqual([]);
  });

  test("bf16 accepts the same model and keeps the weight", async () => {
    const r = await writeDmexp(at("big.bf16.dmexp"), big, cfg, meta("bf16"));
    expect(r.header.max_abs).toBe(roundBf16(70000));
    const { tensors } = await readDmexp(r.path);
    expect(tensors[3].data[5]).toBe(70144); // 70000 to bf16's 8 significant bits
  });

  test("a non-finite weight is refused in every dtype, naming the tensor", async () => {
    const nan = cloneTensors(source);
    nan[2].data[0] = NaN;
    for (const dtype of ["f32", "f16", "bf16"] as const) {
      const e = await refusal(writeDmexp(at(`nan.${dtype}.dmexp`), nan, cfg, meta(dtype)));
      expect(e.field).toBe(`tensors.${nan[2].name}`);
    }
  });
});

describe("reading refuses, naming the field", () => {
  const good = () => written.bf16.path;
  const edit = async (name: string, f: (b: Uint8Array) => Uint8Array) => {
    const path = at(name);
    await writeFile(path, f(new Uint8Array((await disassemble(good())).file)));
    return path;
  };
  const header = async (name: string, f: (h: string) => string) => {
    const path = at(name);
    await withHeader(good(), path, f);
    return path;
  };
  const u32 = (
    b: Uint8Array,
    off: number,
    v: number,
  ) => (new DataView(b.buffer, b.byteOffset).setUint32(off, v, true), b);

  const cases: Array<[string, string, () => Promise<string>]> = [
    ["a missing file", "file", () => Promise.resolve(at("nope.dmexp"))],
    ["a file shorter than the prefix", "size", () => edit("short.dmexp", (b) => b.subarray(0, 20))],
    ["a wrong magic", "magic", () => edit("magic.dmexp", (b) => (b[0] = 0x58, b))],
    ["a wrong version byte", "version", () => edit("version.dmexp", (b) => (b[7] = 3, b))],
    ["a header length past the end", "header_length", () => edit("hlen.dmexp", (b) => u32(b, 8, b.length))],
    ["a truncated file", "payload_length", () => edit("trunc.dmexp", (b) => b.subarray(0, b.length - 1))],
    ["a padded file", "payload_length", () => edit("pad.dmexp", (b) => Uint8Array.from([...b, 0]))],
    ["a flipped payload bit", "crc32", () => edit("flip.dmexp", (b) => (b[b.length - 100] ^= 0x10, b))],
    ["a header that is not UTF-8", "header", () => edit("utf8.dmexp", (b) => (b[40] = 0xff, b))],
    [
      "a header that is not TOML",
      "header",
      () => header("toml.dmexp", (h) => h.replace("format = 1", "format = = 1")),
    ],
    [
      "a format key that disagrees with the version byte",
      "format",
      () => header("fmt.dmexp", (h) => h.replace("format = 1", "format = 2")),
    ],
    [
      "an unknown dtype",
      "dtype",
      () => header("dtype.dmexp", (h) => h.replace('dtype = "bf16"', 'dtype = "f8"')),
    ],
    [
      "a dtype whose size disagrees with the payload",
      "payload_length",
      () => header("dsize.dmexp", (h) => h.replace('dtype = "bf16"', 'dtype = "f32"')),
    ],
    [
      "a key of the wrong type",
      "step",
      () => header("type.dmexp", (h) => h.replace("step = 0", 'step = "0"')),
    ],
    [
      "num_tensors disagreeing with the list",
      "num_tensors",
      () => header("nt.dmexp", (h) => h.replace(/^num_tensors = \d+/m, "num_tensors = 3")),
    ],
    [
      "num_params disagreeing with the dims",
      "num_params",
      () => header("np.dmexp", (h) => h.replace(/^num_params = \d+/m, "num_params = 7")),
    ],
    [
      "a tensor marked overflowed",
      "tensors[0].overflowed",
      () => header("ovf.dmexp", (h) => h.replace("overflowed = 0", "overflowed = 1")),
    ],
    [
      "a tensor listed twice",
      "tensors[1].name",
      () =>
        header(
          "dup.dmexp",
          (h) => h.replace('"model.layers.0.input_layernorm.weight"', '"model.embed_tokens.weight"'),
        ),
    ],
    [
      "a config that is not a ferry config",
      "config",
      () => header("cfg.dmexp", (h) => h.replace("vocab_size = 258", "vocab = 258")),
    ],
    // The shape check: a header edited to disagree with its payload, CRC intact.
    [
      "a config edited to another width",
      "tensors.model.embed_tokens.weight.dims",
      () => header("width.dmexp", (h) => h.replace("hidden_size = 16", "hidden_size = 8")),
    ],
    [
      "dims edited to another shape of the same size",
      "tensors.model.embed_tokens.weight.dims",
      () => header("dims.dmexp", (h) => h.replace("dims = [ 258, 16 ]", "dims = [ 16, 258 ]")),
    ],
    [
      "a tensor renamed",
      "tensors.model.layers.0.mlp.gate.weight",
      () =>
        header(
          "name.dmexp",
          (h) => h.replace('"model.layers.0.mlp.gate_proj.weight"', '"model.layers.0.mlp.gate.weight"'),
        ),
    ],
  ];
  for (const key of HEADER_KEYS) {
    if (key === "format") continue; // its absence is "format"'s own case below
    cases.push([
      `a header without ${key}`,
      key,
      () =>
        header(
          `no-${key}.dmexp`,
          (h) =>
            key === "tensors"
              ? h.slice(0, h.indexOf("[[tensors]]"))
              : h.replace(new RegExp(`^${key} = .*$`, "m"), ""),
        ),
    ]);
  }
  cases.push([
    "a header without format",
    "format",
    () => header("no-format.dmexp", (h) => h.replace("format = 1\n", "")),
  ]);

  for (const [what, field, make] of cases) {
    test(`${what}: ${field}`, async () => {
      const path = await make();
      const e = await refusal(readDmexp(path));
      expect(e.field).toBe(field);
      expect(e.path).toBe(path);
      expect(e.message.startsWith(`${path}: ${field}: `)).toBe(true);
      expect((await refusal(loadDmexpModel(path))).field).toBe(field);
    });
  }

  test("a tampered header has an intact CRC, so it is the shape check that refuses it", async () => {
    const path = at("width.dmexp");
    const info = await inspectDmexp(path);
    expect(info.crc32.ok).toBe(true);
    expect(info.model.ok).toBe(false);
    expect(() => checkShapes(info.header, path)).toThrow(DmexpError);
  });

  test("a corrupt payload is reported before a broken header (the documented order)", async () => {
    const { header: h, payload } = await disassemble(good());
    const broken = payload.slice();
    broken[0] ^= 1;
    const path = at("both.dmexp");
    await writeFile(path, assemble(h.replace("format = 1", "format = = 1"), broken, { crc: 0 }));
    expect((await refusal(readDmexp(path))).field).toBe("crc32");
    expect((await refusal(inspectDmexp(path))).field).toBe("crc32");
  });

  test("a training checkpoint is refused as one, and the format gives no command-line advice", async () => {
    const ckpt = at("run.ckpt");
    await writeCheckpoint(ckpt, cfg, { step: 3, model: source });
    const e = await refusal(readDmexp(ckpt));
    expect(e.field).toBe("magic");
    expect(e.message).toContain("training checkpoint");
    expect(e.message).not.toContain("scripts/"); // the command is the CLI's to give (tests/e2e/cli-dmexp.test.ts)
  });

  test("inspect reports a flipped bit instead of throwing, and verify refuses it", async () => {
    const info = await inspectDmexp(at("flip.dmexp"));
    expect(info.crc32.ok).toBe(false);
    expect(info.crc32.stored).not.toBe(info.crc32.computed);
    expect(info.header.dtype).toBe("bf16");
    expect((await refusal(verifyDmexp(at("flip.dmexp")))).field).toBe("crc32");
  });
});

describe("files from elsewhere", () => {
  test("a foreign file (another implementation's config) is inspected in full, and the loader refuses it naming config", async () => {
    const { bytes, config } = foreignFile();
    const path = at("foreign.dmexp");
    await writeFile(path, bytes);
    const info = await inspectDmexp(path);
    expect(info.crc32.ok).toBe(true);
    expect(info.header.config).toBe(config);
    expect(info.header.tensors).toEqual([
      { name: "embed.weight", dims: [3, 2], overflowed: 0 },
      { name: "norm.weight", dims: [2], overflowed: 0 },
    ]);
    expect([info.header.source, info.header.step, info.header.max_abs, info.header.min_nonzero_abs]).toEqual([
      "checkpoints/run7.ckpt@step20",
      20,
      2.5,
      0.125,
    ]);
    expect(info.model.ok).toBe(false);
    if (!info.model.ok) expect(info.model.field).toBe("config");
    const e = await refusal(loadDmexpModel(path));
    expect(e.field).toBe("config");
    expect(e.message).toContain("not a ferry model config");
  });

  test("a ferry-shaped file assembled by hand from the spec reads back (the layout is the spec's, not the writer's)", async () => {
    const shapes = paramShapes(cfg);
    const values: Tensor[] = shapes.map((s, i) => ({
      name: s.name,
      dims: s.dims,
      data: Float32Array.from({ length: numel(s.dims) }, (_, j) => ((i * 7 + j) % 13) / 8 - 0.75),
    }));
    const all = new Float32Array(values.reduce((n, t) => n + t.data.length, 0));
    let off = 0;
    for (const t of values) all.set(t.data, off), off += t.data.length;
    const bits = f32ToF16(all); // every value here is exact in f16
    const header = [
      "format = 1",
      'dtype = "f16"',
      'source = "by hand"',
      "step = 5",
      `num_params = ${all.length}`,
      `num_tensors = ${shapes.length}`,
      "flushed = 0",
      "max_abs = 0.75",
      "min_nonzero_abs = 0.125",
      `config = """\n${(await import("../../model/config.ts")).configToToml(cfg)}"""`,
      "",
      ...shapes.flatMap((
        s,
      ) => ["[[tensors]]", `name = "${s.name}"`, `dims = [${s.dims.join(", ")}]`, "overflowed = 0", ""]),
    ].join("\n");
    const path = at("byhand.dmexp");
    await writeFile(path, assemble(header, new Uint8Array(bits.buffer)));
    const { tensors, header: h } = await readDmexp(path);
    expect(h.step).toBe(5);
    expectSameTensors(tensors, values);
  });
});

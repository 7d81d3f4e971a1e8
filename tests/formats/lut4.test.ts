// lut4 files: the writer and the full reader round-trip; the quantizer's scales are MSE-optimal on the
// grid; every refusal names the file and the field; the minimal reader agrees with the full reader on
// every matrix and table, under Bun and under Deno.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir, smallLut4 } from "../helpers/lut4-fixture.ts";
import { dequantizeLut4, lut4Format, parseLut4, readLut4, writeLut4 } from "../../formats/lut4/lut4.ts";
import { decodeShared } from "../../formats/json.ts";
import { dequantizeMatrix, epsFixed, quantizeMatrix, quantizeModel } from "../../quantize/lut4-quantize.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";

const ROOT = join(import.meta.dir, "../..");

test(
  "the small test model's lut4 file reads back: header, inventory, CRC, SHA-256, a float model",
  async () => {
    const path = await smallLut4();
    const file = await readLut4(path);
    expect(file.header.schema).toBe("ferry.lut-qwen3/1");
    expect(file.header.head).toBe("tied");
    expect(file.header.shape).toEqual({
      vocab: 258,
      width: 96,
      layers: 4,
      heads: 4,
      kv_heads: 2,
      head_dim: 32,
      ffn: 256,
      max_positions: 512,
    });
    expect(file.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(file.weights.layers[0].q.rows).toBe(128); // heads x head_dim != hidden
    const { config, tensors } = await lut4Format.read(path);
    const model = buildModel(config, tensors, path);
    expect(forward(model, createCache(model), [256, 84, 104]).every(Number.isFinite)).toBe(true);
    const info = await lut4Format.inspect(path);
    expect(info.sha256).toBe(file.sha256);
  },
  180_000,
);

test("the scale of each group minimises squared error over the grid, not max-abs", () => {
  let seed = 7;
  const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const rows = 16, cols = 64, w = new Float32Array(rows * cols);
  for (let i = 0; i < w.length; i++) w[i] = (rand() - 0.5) * (i % 7 === 0 ? 0.4 : 0.1);
  const { matrix, error } = quantizeMatrix("t", w, rows, cols);
  const deq = dequantizeMatrix(matrix);
  let sse = 0, sseMaxAbs = 0;
  for (let g = 0; g < (rows * cols) / 32; g++) {
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(w[g * 32 + i]));
    // The max-abs choice: the smallest grid scale with amax / s <= 8 (within the same exp_base).
    let s = Infinity;
    for (let e = matrix.expBase; e < matrix.expBase + 16; e++) {
      for (let m = 0; m < 16; m++) {
        const c = (16 + m) * 2 ** (e - 4);
        if (amax / c <= 7.5 && c < s) s = c;
      }
    }
    for (let i = 0; i < 32; i++) {
      const x = w[g * 32 + i];
      sse += (x - deq[g * 32 + i]) ** 2;
      sseMaxAbs += (x - Math.max(-8, Math.min(7, Math.round(x / s))) * s) ** 2;
    }
  }
  expect(sse).toBeLessThan(sseMaxAbs);
  expect(error.relRmse).toBeGreaterThan(0);
  expect(error.rmse).toBeCloseTo(Math.sqrt(sse / w.length), 6);
}, 180_000);

test("epsFixed: a mantissa in [2^15, 2^16) rounded to nearest, also next to a power of two", () => {
  const below = 2 ** -20 * (1 - 2 ** -20); // rounds up to 2^16 · 2^-36: carried to 2^15 · 2^-35
  expect(epsFixed(below)).toEqual({ mantissa: 2 ** 15, exp: -35 });
  expect(epsFixed(2 ** -20)).toEqual({ mantissa: 2 ** 15, exp: -35 });
  expect(epsFixed(1e-6)).toEqual({ mantissa: 34360, exp: -35 });
  for (let i = 0; i < 2000; i++) {
    const eps = 2 ** (-40 + 39 * (i / 2000)) * (1 + (i % 7) * 1e-9);
    const { mantissa, exp } = epsFixed(eps);
    expect(mantissa >= 2 ** 15 && mantissa < 2 ** 16 && Number.isInteger(mantissa)).toBe(true);
    expect(Math.abs(mantissa * 2 ** exp - eps)).toBeLessThanOrEqual(2 ** (exp - 1));
  }
});

crossProcessTest(
  "short, truncated, tampered, foreign-schema and non-lut4 files are refused by name",
  async () => {
    const good = readFileSync(await smallLut4());
    const dir = scratchDir();
    const cases: [string, Uint8Array, RegExp][] = [
      ["short", good.subarray(0, 10), /magic/],
      ["truncated", good.subarray(0, good.length - 64), /data_bytes/],
      [
        "tampered",
        (() => {
          const b = Uint8Array.from(good);
          b[b.length - 200] ^= 1;
          return b;
        })(),
        /data_crc32/,
      ],
      [
        "schema",
        (() => {
          const b = Uint8Array.from(good);
          const i = Buffer.from(b).indexOf("ferry.lut-qwen3/1");
          b[i] = 0x46;
          return b;
        })(),
        /schema/,
      ],
      [
        "magic",
        (() => {
          const b = Uint8Array.from(good);
          b[0] = 0x58;
          return b;
        })(),
        /magic/,
      ],
    ];
    for (const [name, bytes, field] of cases) {
      const p = join(dir, `${name}.lut4`);
      writeFileSync(p, bytes);
      expect(() => parseLut4(readFileSync(p), p)).toThrow(field);
      const r = spawnSync("bun", [join(ROOT, "readers/lut4.ts"), p], { encoding: "utf8" });
      expect(r.status).toBe(1);
      expect(r.stderr.startsWith(`${p}: `)).toBe(true);
      expect(r.stderr).not.toContain("    at ");
    }
    const usage = spawnSync("bun", [join(ROOT, "readers/lut4.ts")], { encoding: "utf8" });
    expect(usage.status).toBe(2);
    expect(usage.stderr).toContain("usage: readers/lut4.ts FILE [TENSOR...]");
  },
  180_000,
);

crossProcessTest(
  "the minimal reader agrees with the full reader on every matrix and table, under Bun and Deno",
  async () => {
    const path = await smallLut4();
    const file = await readLut4(path);
    const full = new Map<string, number[]>();
    for (
      const m of [
        file.weights.embed,
        ...file.weights.layers.flatMap((l) => [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]),
      ]
    ) {
      full.set(m.name, Array.from(dequantizeMatrix(m)));
    }
    for (const t of file.header.tables) {
      const w = file.weights;
      const arr: Int16Array | Int32Array = t.name === "exp"
        ? w.exp
        : t.name === "silu"
        ? w.silu
        : t.name === "rope_cos"
        ? w.ropeCos
        : t.name === "rope_sin"
        ? w.ropeSin
        : t.name === "final_gain"
        ? w.finalGain!.values
        : t.name.endsWith("q_gain")
        ? w.layers[Number(t.name.split(".")[1])].qGain.values
        : w.layers[Number(t.name.split(".")[1])].kGain.values;
      full.set(t.name, Array.from(arr, (v) => v * 2 ** t.exp));
    }
    const names = [...full.keys()];
    for (const runtime of [["bun"], ["deno", "run", "-A"]]) {
      const list = spawnSync(runtime[0], [...runtime.slice(1), join(ROOT, "readers/lut4.ts"), path], {
        encoding: "utf8",
      });
      expect(list.status).toBe(0);
      expect(list.stdout.trim().split("\n").map((l) => l.split("\t")[0])).toEqual(names);
      const r = spawnSync(runtime[0], [...runtime.slice(1), join(ROOT, "readers/lut4.ts"), path, ...names], {
        encoding: "utf8",
        maxBuffer: 64 << 20,
      });
      expect(r.status).toBe(0);
      const lines = r.stdout.trim().split("\n");
      expect(lines.length).toBe(2 * names.length);
      names.forEach((n, i) => {
        expect(lines[2 * i].split("\t")[0]).toBe(n);
        expect(lines[2 * i + 1].split(" ").map(Number)).toEqual(full.get(n)!);
      });
    }
    // dequantizeLut4 is what the float engine reads: the same numbers.
    const embed = dequantizeLut4(file).find((t) => t.name === "model.embed_tokens.weight")!;
    expect(Array.from(embed.data)).toEqual(full.get("embed")!);
  },
  180_000,
);

// A header that starts with a UTF-8 byte-order mark. A small schema /2 file (with a tokenizer section) is
// reframed twice, with and without the mark before its JSON: the header length and its space padding are
// recomputed, the data section (all that data_crc32 covers) is unchanged, so the mark is the one thing wrong.
const bomTokenizer = {
  "tokenizer.json": JSON.stringify({
    version: "1.0",
    added_tokens: [{ id: 3, content: "<|end|>", special: true }],
    model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: [["a", "b"]] },
  }),
};
let bomMade: Promise<{ plain: string; bom: string }> | undefined;
function bomFiles(): Promise<{ plain: string; bom: string }> {
  bomMade ??= (async () => {
    const cfg = {
      ...PRESETS.tiny,
      hidden_size: 32,
      intermediate_size: 64,
      head_dim: 16,
      num_attention_heads: 2,
    };
    const { weights } = quantizeModel(cfg, initParams(cfg, 9), { head: "tied" });
    const dir = scratchDir();
    const written = join(dir, "written.lut4");
    await writeLut4(written, weights, {
      source: "init@step0",
      ropeTheta: cfg.rope_theta,
      rmsNormEps: cfg.rms_norm_eps,
      tokenizer: bomTokenizer,
    });
    const file = readFileSync(written);
    const h = Number(file.readBigUInt64LE(8));
    const json = file.subarray(16, 16 + h).toString("utf8").trimEnd();
    const reframe = (lead: number[]) => {
      const text = Buffer.concat([Buffer.from(lead), Buffer.from(json)]);
      const header = Buffer.alloc(Math.ceil((16 + text.length) / 64) * 64 - 16, " ");
      text.copy(header);
      const length = Buffer.alloc(8);
      length.writeBigUInt64LE(BigInt(header.length));
      return Buffer.concat([file.subarray(0, 8), length, header, file.subarray(16 + h)]);
    };
    const [plain, bom] = [join(dir, "plain.lut4"), join(dir, "bom.lut4")];
    writeFileSync(plain, reframe([]));
    writeFileSync(bom, reframe([0xef, 0xbb, 0xbf]));
    return { plain, bom };
  })();
  return bomMade;
}

test("a header that starts with a byte-order mark is refused by every full reader, naming the header", async () => {
  const { plain, bom } = await bomFiles();
  expect((await readLut4(plain)).tokenizer).toEqual(bomTokenizer); // reframed without the mark: read as is
  expect(await lut4Format.readTokenizer!(plain)).toEqual(bomTokenizer);
  const readers: Record<string, () => Promise<unknown>> = {
    parseLut4: () => Promise.resolve().then(() => parseLut4(readFileSync(bom), bom)),
    readLut4: () => readLut4(bom),
    "lut4Format.read": () => lut4Format.read(bom),
    "lut4Format.readTokenizer": () => lut4Format.readTokenizer!(bom),
    "lut4Format.inspect": () => lut4Format.inspect(bom),
  };
  for (const [name, read] of Object.entries(readers)) {
    const e = await read().then(() => `${name} accepted it`, (e) => e);
    expect([name, e]).toEqual([
      name,
      expect.objectContaining({
        name: "Lut4Error",
        path: bom,
        field: "header",
        expected: 'a JSON object, its first byte "{"',
        found: "a byte-order mark (EF BB BF)",
      }),
    ]);
    expect(e.message).toStartWith(`${bom}: header: starts with a UTF-8 byte-order mark`);
  }
});

crossProcessTest(
  "the minimal reader refuses a header that starts with a byte-order mark, under Bun and Deno",
  async () => {
    const { plain, bom } = await bomFiles();
    for (const runtime of [["bun"], ["deno", "run", "-A"]]) {
      const reader = [...runtime.slice(1), join(ROOT, "readers/lut4.ts")];
      const ok = spawnSync(runtime[0], [...reader, plain], { encoding: "utf8" });
      expect([runtime[0], ok.status, ok.stderr]).toEqual([runtime[0], 0, ""]);
      const r = spawnSync(runtime[0], [...reader, bom], { encoding: "utf8" });
      expect([runtime[0], r.status, r.stdout]).toEqual([runtime[0], 1, ""]);
      expect(r.stderr.startsWith(`${bom}: `)).toBe(true);
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
    }
  },
  60_000,
);

// The tab's worker checks a downloaded file where it placed it, in shared memory, whose text a browser's
// TextDecoder refuses: the reader decodes a copy there, and reads the file as it reads plain bytes.
test("a lut4 file in shared memory reads as in plain memory, even where the decoder refuses shared bytes", async () => {
  const plain = new Uint8Array(readFileSync(await smallLut4()));
  const shared = new Uint8Array(new SharedArrayBuffer(plain.length));
  shared.set(plain);
  expect(parseLut4(shared, "s.lut4").header).toEqual(parseLut4(plain, "p.lut4").header);
  // A browser's decoder, as Chromium's refused shared views.
  const browserLike = {
    decode(b: Uint8Array) {
      if (b.buffer instanceof SharedArrayBuffer) throw new TypeError("shared buffers are not accepted");
      return new TextDecoder("utf-8", { fatal: true }).decode(b);
    },
  } as TextDecoder;
  const text = new TextEncoder().encode('{"a": "ĠĠ"}');
  const inShared = new Uint8Array(new SharedArrayBuffer(text.length));
  inShared.set(text);
  expect(decodeShared(browserLike, inShared)).toBe('{"a": "ĠĠ"}');
  inShared[6] = 0xff; // invalid UTF-8 is still refused
  expect(() => decodeShared(browserLike, inShared)).toThrow(TypeError);
  expect(() => decodeShared(new TextDecoder("utf-8", { fatal: true }), inShared)).toThrow(TypeError);
});

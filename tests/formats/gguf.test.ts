// GGUF format: block codecs against hand-derived vectors and against llama.cpp's own ggml code,
// container layout and round trips, the qwen3 mapping, every refusal, and @huggingface/gguf's reading.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readFile, rm, writeFile } from "node:fs/promises";
import { gguf as hfGguf } from "@huggingface/gguf";
import {
  decodeTensor,
  encodeGguf,
  encodeTensor,
  GGML_TYPES,
  type GgmlType,
  GGUF_DTYPE_TYPES,
  GgufError,
  ggufTensorName,
  ggufTensorType,
  type GgufValue,
  openGgufSources,
  parseGguf,
  quantizeQ4_0,
  quantizeQ8_0,
  qwen3FromGguf,
  qwen3Metadata,
  qwen3Tensors,
  readGguf,
  shortestF32Decimal,
  tensorToF32,
  writeGguf,
} from "../../formats/gguf/gguf.ts";
import { configToToml } from "../../model/config.ts";
import { BYTE_CHARS } from "../../model/tokenizer.ts";
import { initParams } from "../../model/init.ts";
import { createRng } from "../../model/random.ts";
import { ALL_DTYPES, tempDir, testTensors, writeAllTypes } from "../helpers/gguf-fixtures.ts";
import { expectSameBits } from "../helpers/bits.ts";
import { GGML_BLOCKS, GGML_TYPE_ID, openGgml } from "../helpers/ggml.ts";

let dir = "";
beforeAll(async () => {
  dir = await tempDir();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function randomRow(n: number, seed: number): Float32Array {
  const rng = createRng(seed), x = new Float32Array(n);
  // Magnitudes over 2^-10 .. 2^10 so blocks have very different scales.
  for (let i = 0; i < n; i++) x[i] = rng.normal() * 2 ** (rng.int(21) - 10);
  return x;
}

function expectGgufError(fn: () => unknown, field: string | RegExp, message: RegExp, path = "t.gguf"): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(GgufError);
  const g = err as GgufError;
  if (typeof field === "string") expect(g.field).toBe(field);
  else expect(g.field).toMatch(field);
  expect(g.path).toBe(path);
  expect(g.message).toMatch(message);
  expect(g.message.startsWith(`${path}: `)).toBe(true);
}

describe("block codecs: hand-derived vectors", () => {
  test("Q4_0 writes exactly the bytes llama.cpp's reference rule gives for a known row", () => {
    // Derivation (quantize_row_q4_0_ref): the first value of largest magnitude is x[3] = +4 (x[20] = -4
    // ties but comes later), so d = 4 / -8 = -0.5 (f16 0xB800, stored 00 B8) and 1/d = -2.
    // q[j] = min(15, trunc(x[j] * -2 + 8.5)); e.g. x = 0.25 -> 8.0 -> 8, x = -0.25 -> 9.0 -> 9,
    // x = 4 -> 0.5 -> 0, x = -3.75 -> 16 -> 15 (clipped), x = -4 -> 16.5 -> 15 (clipped).
    // deno-fmt-ignore
    const x = new Float32Array([
      0, 0.25, -0.25, 4, 1, -1, 0.75, -0.75, 3.5, -3.5, 2, -2, 0.125, -0.125, 3.75, -3.75,
      1.5, -1.5, 2.5, -2.5, -4, 0.5, -0.5, 3, -3, 1.25, -1.25, 2.25, -2.25, 0.375, -0.375, 1.75,
    ]);
    // q[0..15]  = 8 8 9 0 6 10 7 10 1 15 4 12 8 8 1 15
    // q[16..31] = 5 11 3 13 15 7 9 2 14 6 11 4 13 7 9 5
    // byte j = q[j] | q[j+16] << 4.
    // deno-fmt-ignore
    const expected = [
      0x00, 0xb8,
      0x58, 0xb8, 0x39, 0xd0, 0xf6, 0x7a, 0x97, 0x2a, 0xe1, 0x6f, 0xb4, 0x4c, 0xd8, 0x78, 0x91, 0x5f,
    ];
    expect([...quantizeQ4_0(x)]).toEqual(expected);
    expect([...encodeTensor("Q4_0", x)]).toEqual(expected);
    // Dequantized: (q - 8) * d, so the clipped -4 comes back as -3.5 and +4 exactly.
    // deno-fmt-ignore
    const q = [8, 8, 9, 0, 6, 10, 7, 10, 1, 15, 4, 12, 8, 8, 1, 15, 5, 11, 3, 13, 15, 7, 9, 2, 14, 6, 11, 4, 13, 7, 9, 5];
    const back = decodeTensor("Q4_0", new Uint8Array(expected), 32);
    expect([...back]).toEqual(q.map((v) => (v - 8) * -0.5));
    expect([back[3], back[20]]).toEqual([4, -3.5]);
  });

  test("Q4_0 of an all-zero block: d = 0 / -8 = -0 (f16 0x8000), every nibble 8", () => {
    expect([...quantizeQ4_0(new Float32Array(32))]).toEqual([0x00, 0x80, ...new Array(16).fill(0x88)]);
  });

  test("Q8_0 writes exactly the bytes of llama.cpp's rule: d = amax/127, q = roundf(x/d)", () => {
    // amax = 127 so d = 1 (f16 0x3C00, stored 00 3C) and q = roundf(x): halves go away from zero,
    // so -2.5 -> -3 and -0.5 -> -1 (where Math.round would give -2 and -0).
    const x = new Float32Array(32);
    x.set([127, -127, 2.5, -2.5, 0.5, -0.5, 1.25, -1.75, 0, 100.5, -100.5, 3.49]);
    for (let j = 12; j < 32; j++) x[j] = j - 16;
    const q = [127, -127, 3, -3, 1, -1, 1, -2, 0, 101, -101, 3];
    for (let j = 12; j < 32; j++) q.push(j - 16);
    const expected = [0x00, 0x3c, ...q.map((v) => v & 0xff)];
    expect([...quantizeQ8_0(x)]).toEqual(expected);
    expect([...decodeTensor("Q8_0", new Uint8Array(expected), 32)]).toEqual(q);
  });

  test("F16 and BF16 are little-endian 16-bit patterns", () => {
    expect([...encodeTensor("F16", new Float32Array([1, -2]))]).toEqual([0x00, 0x3c, 0x00, 0xc0]);
    expect([...encodeTensor("BF16", new Float32Array([1, -2]))]).toEqual([0x80, 0x3f, 0x00, 0xc0]);
    expect([...encodeTensor("F32", new Float32Array([1]))]).toEqual([0, 0, 0x80, 0x3f]);
  });

  test("a row that is not a whole number of 32-value blocks is refused", () => {
    expect(() => quantizeQ4_0(new Float32Array(48))).toThrow(
      /48 values are not a whole number of 32-value blocks/,
    );
    expect(() => quantizeQ8_0(new Float32Array(16))).toThrow(/not a whole number/);
  });
});

describe("block codecs: byte for byte against llama.cpp's ggml (libggml-base.so via bun:ffi)", () => {
  const ggml = openGgml();
  afterAll(() => ggml.close());

  // 2048 blocks of random rows, plus blocks built to sit on rounding boundaries: values k/16 of a
  // power-of-two maximum hit x/d + 8.5 exactly on integers, and the tiny offsets push them either way.
  const n = 32 * 2048;
  const x = randomRow(n, 11);
  for (let b = 0; b < 96; b++) {
    for (let j = 0; j < 32; j++) x[b * 32 + j] = ((j - 16) / 16) * 2 ** (b % 8) + ((b % 3) - 1) * 2 ** -20;
  }
  x.fill(0, 96 * 32, 97 * 32);
  x.fill(-3, 97 * 32, 98 * 32);

  for (const [type, blockBytes] of [["Q4_0", 18], ["Q8_0", 34]] as const) {
    test(`${type}: ferry's quantizer equals ggml_quantize_chunk (llama-quantize's path), and its dequantizer ggml's`, () => {
      expect(GGML_TYPES[type].id).toBe(GGML_TYPE_ID[type]);
      const { bytes: theirs, written } = ggml.quantize(type, x, 256);
      expect(theirs.length).toBe((n / 32) * blockBytes);
      expect(written).toBe(theirs.length);
      const ours = encodeTensor(type, x);
      expect(ours.length).toBe(theirs.length);
      let firstDiff = -1;
      for (let i = 0; i < ours.length && firstDiff < 0; i++) if (ours[i] !== theirs[i]) firstDiff = i;
      expect(firstDiff).toBe(-1);
      const deq = ggml.decode(type, theirs, n);
      expect(Buffer.from(decodeTensor(type, ours, n).buffer).equals(Buffer.from(deq.buffer))).toBe(true);
    });
  }

  test("F16 and BF16 narrowing equal ggml's row converters", () => {
    const h = ggml.toF16(x), b = ggml.toBf16(x);
    expect(Buffer.from(encodeTensor("F16", x)).equals(Buffer.from(h.buffer))).toBe(true);
    expect(Buffer.from(encodeTensor("BF16", x)).equals(Buffer.from(b.buffer))).toBe(true);
  });
});

describe("container", () => {
  const everyType: Array<[string, GgufValue]> = [
    ["a.u8", { type: "u8", value: 255 }],
    ["a.i8", { type: "i8", value: -128 }],
    ["a.u16", { type: "u16", value: 65535 }],
    ["a.i16", { type: "i16", value: -32768 }],
    ["a.u32", { type: "u32", value: 4294967295 }],
    ["a.i32", { type: "i32", value: -2147483648 }],
    ["a.f32", { type: "f32", value: 1.5 }],
    ["a.bool", { type: "bool", value: true }],
    ["a.string", { type: "string", value: "héllo ✓" }],
    ["a.u64", { type: "u64", value: 2n ** 64n - 1n }],
    ["a.i64", { type: "i64", value: -(2n ** 63n) }],
    ["a.f64", { type: "f64", value: 1e-300 }],
    ["a.empty", { type: "array", elem: "string", value: [] }],
    ["a.strings", { type: "array", elem: "string", value: ["x", "", "Ġ"] }],
    ["a.i32s", { type: "array", elem: "i32", value: [1, -2, 3] }],
    ["a.u64s", { type: "array", elem: "u64", value: [0n, 5n] }],
    ["a.bools", { type: "array", elem: "bool", value: [false, true] }],
  ];

  test("every value type round-trips, and tensors are packed, aligned to 32 and zero-padded", () => {
    const tensors = [
      {
        name: "a",
        ne: [3],
        type: "F32" as GgmlType,
        bytes: encodeTensor("F32", new Float32Array([1, 2, 3])),
      },
      { name: "b", ne: [32, 2], type: "Q4_0" as GgmlType, bytes: quantizeQ4_0(randomRow(64, 3)) },
      {
        name: "c",
        ne: [5],
        type: "F16" as GgmlType,
        bytes: encodeTensor("F16", new Float32Array(5).fill(2)),
      },
    ];
    const chunks = encodeGguf(everyType, tensors, "t.gguf");
    const file = new Uint8Array(Buffer.concat(chunks));
    const g = parseGguf(file, "t.gguf");
    expect(g.version).toBe(3);
    expect(g.alignment).toBe(32);
    expect([...g.metadata.entries()]).toEqual(everyType);
    expect(g.dataOffset % 32).toBe(0);
    expect(g.tensors.map((t) => [t.name, t.ne, t.type, t.offset])).toEqual([
      ["a", [3], "F32", 0],
      ["b", [32, 2], "Q4_0", 32],
      ["c", [5], "F16", 32 + 64],
    ]);
    for (let i = 0; i < tensors.length; i++) expect([...g.tensors[i].bytes]).toEqual([...tensors[i].bytes]);
    expect(file.length).toBe(g.dataOffset + 32 + 64 + 32);
    expect([...file.subarray(g.dataOffset + 12, g.dataOffset + 32)].every((b) => b === 0)).toBe(true);
    expect([...tensorToF32(g.tensors[0])]).toEqual([1, 2, 3]);
  });

  test("a file with no tensors and a custom alignment", () => {
    const md: Array<[string, GgufValue]> = [["general.alignment", { type: "u32", value: 64 }]];
    const g = parseGguf(new Uint8Array(Buffer.concat(encodeGguf(md, []))), "t.gguf");
    expect(g.alignment).toBe(64);
    expect(g.tensors).toEqual([]);
  });

  test("the writer refuses what llama.cpp would refuse", () => {
    const t = (
      over: object,
    ) => [{ name: "a", ne: [32], type: "F32" as GgmlType, bytes: new Uint8Array(128), ...over }];
    expectGgufError(
      () => encodeGguf([["k", { type: "u8", value: 1 }], ["k", { type: "u8", value: 2 }]], [], "t.gguf"),
      "k",
      /appears twice/,
    );
    expectGgufError(() => encodeGguf([["", { type: "u8", value: 1 }]], [], "t.gguf"), "metadata", /empty/);
    expectGgufError(() => encodeGguf([["k", { type: "u8", value: 256 }]], [], "t.gguf"), "k", /range of u8/);
    expectGgufError(
      () => encodeGguf([["general.alignment", { type: "u64", value: 32n }]], [], "t.gguf"),
      "general.alignment",
      /expected u32/,
    );
    expectGgufError(
      () => encodeGguf([["general.alignment", { type: "u32", value: 24 }]], [], "t.gguf"),
      "general.alignment",
      /power of two/,
    );
    expectGgufError(
      () => encodeGguf([], t({ name: "x".repeat(64) }), "t.gguf"),
      /^tensor x+$/,
      /64 bytes; expected 1 to 63/,
    );
    expectGgufError(() => encodeGguf([], [...t({}), ...t({})], "t.gguf"), "tensor a", /appears twice/);
    expectGgufError(() => encodeGguf([], t({ ne: [1, 1, 1, 1, 32] }), "t.gguf"), "tensor a", /5 dims/);
    expectGgufError(
      () => encodeGguf([], t({ type: "Q8_0", ne: [16], bytes: new Uint8Array(17) }), "t.gguf"),
      "tensor a",
      /not a multiple/,
    );
    expectGgufError(
      () => encodeGguf([], t({ bytes: new Uint8Array(127) }), "t.gguf"),
      "tensor a",
      /127 bytes; F32 ne \[32\] needs 128/,
    );
  });
});

describe("container reader refusals", () => {
  // A valid little file to break in one place at a time.
  const md: Array<[string, GgufValue]> = [["k", { type: "u32", value: 7 }]];
  const tensors = [
    { name: "w", ne: [32, 2], type: "Q8_0" as GgmlType, bytes: quantizeQ8_0(randomRow(64, 5)) },
    { name: "v", ne: [4], type: "F32" as GgmlType, bytes: new Uint8Array(16) },
  ];
  const good = new Uint8Array(Buffer.concat(encodeGguf(md, tensors)));
  // Offsets inside `good`: header 24 bytes; key "k" (8 + 1); type u32; value u32 -> 41; first tensor info.
  const KV_TYPE = 24 + 9, TENSOR0 = 41;
  const T0_NDIMS = TENSOR0 + 8 + 1, T0_NE0 = T0_NDIMS + 4, T0_TYPE = T0_NE0 + 16, T0_OFF = T0_TYPE + 4;
  const T1_OFF = T0_OFF + 8 + 8 + 1 + 4 + 8 + 4;
  const patch = (f: (dv: DataView, b: Uint8Array) => void, base = good) => {
    const b = base.slice();
    f(new DataView(b.buffer), b);
    return b;
  };
  const parse = (b: Uint8Array) => () => parseGguf(b, "t.gguf");

  test("the unbroken file parses", () => {
    const g = parseGguf(good, "t.gguf");
    expect(g.tensors.map((t) => t.name)).toEqual(["w", "v"]);
    expect(new DataView(good.buffer).getUint32(T0_TYPE, true)).toBe(8);
    expect(Number(new DataView(good.buffer).getBigUint64(T1_OFF, true))).toBe(96);
  });
  test("short file", () =>
    expectGgufError(parse(good.subarray(0, 20)), "header", /shorter than the 24-byte header/));
  test("wrong magic", () =>
    expectGgufError(parse(patch((_, b) => (b[0] = 0x48))), "header.magic", /expected "GGUF"/));
  test("version 2", () =>
    expectGgufError(
      parse(patch((dv) => dv.setUint32(4, 2, true))),
      "header.version",
      /2 is not supported \(expected 3\)/,
    ));
  test("tensor count beyond what the file holds", () => {
    expectGgufError(
      parse(patch((dv) => dv.setBigUint64(8, 1n << 40n, true))),
      "header.tensor_count",
      /more than the file can hold/,
    );
  });
  test("truncated inside the tensor infos", () =>
    expectGgufError(parse(good.subarray(0, T1_OFF + 4)), "tensor v.offset", /truncated/));
  test("unknown value type", () =>
    expectGgufError(parse(patch((dv) => dv.setUint32(KV_TYPE, 13, true))), "k", /unknown value type 13/));
  test("array of arrays", () => {
    const b = Buffer.concat([
      good.subarray(0, 16),
      Buffer.alloc(8),
      Buffer.from([1, 0, 0, 0, 0, 0, 0, 0, 0x6b, 9, 0, 0, 0, 9, 0, 0, 0]),
    ]);
    const f = new Uint8Array(b);
    new DataView(f.buffer).setBigUint64(8, 0n, true);
    new DataView(f.buffer).setBigUint64(16, 1n, true);
    expectGgufError(parse(f), "k", /array of arrays/);
  });
  test("duplicate key", () => {
    const b = new Uint8Array(
      Buffer.concat(encodeGguf([["k", { type: "u8", value: 1 }], ["j", { type: "u8", value: 2 }]], [])),
    );
    b[24 + 8 + 1 + 4 + 1 + 8] = 0x6b; // the second key's one character: "j" becomes "k"
    expectGgufError(parse(b), "k", /appears twice/);
  });
  test("key that is not UTF-8", () =>
    expectGgufError(parse(patch((_, b) => (b[32] = 0xff))), "metadata[0].key", /not valid UTF-8/));
  test("alignment of the wrong type", () => {
    // Written as u32 32, then retyped u64 (10) with four more zero bytes, so it reads as u64 32.
    const u32 = new Uint8Array(
      Buffer.concat(encodeGguf([["general.alignment", { type: "u32", value: 32 }]], [])),
    );
    const b = new Uint8Array(Buffer.concat([u32, Buffer.alloc(4)]));
    new DataView(b.buffer).setUint32(24 + 8 + 17, 10, true);
    expectGgufError(parse(b), "general.alignment", /has type u64; expected u32/);
  });
  test("alignment that is not a power of two", () => {
    const b = new Uint8Array(
      Buffer.concat(encodeGguf([["general.alignment", { type: "u32", value: 32 }]], [])),
    );
    new DataView(b.buffer).setUint32(24 + 8 + 17 + 4, 48, true);
    expectGgufError(parse(b), "general.alignment", /48 is not a power of two/);
  });
  test("n_dims 5", () =>
    expectGgufError(
      parse(patch((dv) => dv.setUint32(T0_NDIMS, 5, true))),
      "tensor w.n_dims",
      /5; expected 1 to 4/,
    ));
  test("a type ferry does not read (Q5_K)", () => {
    expectGgufError(
      parse(patch((dv) => dv.setUint32(T0_TYPE, 13, true))),
      "tensor w.type",
      /Q5_K \(13\); ferry reads F32, F16, Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, IQ4_NL, BF16/,
    );
  });
  test("an unknown type id", () =>
    expectGgufError(
      parse(patch((dv) => dv.setUint32(T0_TYPE, 99, true))),
      "tensor w.type",
      /unknown type 99/,
    ));
  test("innermost dim not a whole number of blocks", () => {
    expectGgufError(
      parse(patch((dv) => dv.setBigUint64(T0_NE0, 33n, true))),
      "tensor w.ne[0]",
      /33 is not a multiple of Q8_0's block of 32/,
    );
  });
  test("offset other than the packed one", () => {
    expectGgufError(
      parse(patch((dv) => dv.setBigUint64(T1_OFF, 128n, true))),
      "tensor v.offset",
      /128; expected 96/,
    );
  });
  test("data past the end", () =>
    expectGgufError(parse(good.subarray(0, good.length - 20)), "tensor v", /runs past the end/));
  test("trailing bytes", () => {
    expectGgufError(
      parse(new Uint8Array(Buffer.concat([good, Buffer.alloc(32)]))),
      "size",
      /32 bytes follow the last tensor's padding/,
    );
  });
  test("an unpadded last tensor is still read (as ggml reads it)", () => {
    expect(parseGguf(good.subarray(0, good.length - 16), "t.gguf").tensors[1].bytes.length).toBe(16);
  });
});

describe("qwen3 model files", () => {
  test("ferry model -> GGUF F32 -> ferry model is bit-exact, config included (tied and untied)", async () => {
    for (const tied of [false, true]) {
      const { config, tensors } = testTensors(3, tied);
      const path = join(dir, `rt.${tied}.gguf`);
      await writeGguf(path, tensors, config, { type: "f32" });
      const back = await readGguf(path);
      expect(configToToml(back.config)).toBe(configToToml(config));
      expect(back.config).toEqual(config);
      expect(back.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
      for (let i = 0; i < tensors.length; i++) {
        expect(back.tensors[i].dims).toEqual(tensors[i].dims);
        expect(
          Buffer.from(
            back.tensors[i].data.buffer,
            back.tensors[i].data.byteOffset,
            back.tensors[i].data.byteLength,
          )
            .equals(
              Buffer.from(tensors[i].data.buffer, tensors[i].data.byteOffset, tensors[i].data.byteLength),
            ),
        ).toBe(true);
      }
      expect(back.file.tensors.some((t) => t.name === "output.weight")).toBe(!tied);
    }
  });

  test("every type reads back as exactly its own rounding of the source, norms kept F32", async () => {
    const { config, tensors } = testTensors(4);
    const files = await writeAllTypes(dir, tensors, config, "each");
    for (const dtype of ALL_DTYPES) {
      const back = await readGguf(files[dtype]);
      expect(back.config).toEqual(config);
      for (let i = 0; i < tensors.length; i++) {
        const src = tensors[i], got = back.tensors[i];
        // The test config's rows (64 and 96 wide) are no K-quant's: q4_k and q4_k_m fall back to
        // Q5_0 (the mix's Q6_K to Q8_0), q6_k to Q8_0, as llama.cpp's quantizer does.
        const ne = [...src.dims].reverse(), gguf = ggufTensorName(src.name)!;
        const t = ggufTensorType(dtype, gguf, ne, { layers: config.num_hidden_layers, tied: false });
        expect(back.types[src.name]).toBe(t);
        expect([...got.data]).toEqual([...decodeTensor(t, encodeTensor(t, src.data), src.data.length)]);
      }
      const ftype = back.file.metadata.get("general.file_type");
      expect(ftype).toEqual({ type: "u32", value: GGUF_DTYPE_TYPES[dtype].ftype });
    }
  });

  test("metadata: llama.cpp's keys with the types it checks, ne reversed, byte vocabulary", async () => {
    const { config, tensors } = testTensors(5);
    const path = join(dir, "md.gguf");
    await writeGguf(path, tensors, config, { type: "q8_0", name: "tiny" });
    const g = parseGguf(new Uint8Array(await readFile(path)), path);
    const md = Object.fromEntries(g.metadata);
    expect(md["general.architecture"]).toEqual({ type: "string", value: "qwen3" });
    expect(md["general.name"]).toEqual({ type: "string", value: "tiny" });
    expect(md["general.alignment"]).toEqual({ type: "u32", value: 32 });
    const u32 = (value: number) => ({ type: "u32", value });
    expect(md["qwen3.context_length"]).toEqual(u32(128));
    expect(md["qwen3.embedding_length"]).toEqual(u32(64));
    expect(md["qwen3.block_count"]).toEqual(u32(2));
    expect(md["qwen3.feed_forward_length"]).toEqual(u32(96));
    expect(md["qwen3.attention.head_count"]).toEqual(u32(4));
    expect(md["qwen3.attention.head_count_kv"]).toEqual(u32(2));
    expect(md["qwen3.attention.key_length"]).toEqual(u32(24));
    expect(md["qwen3.attention.value_length"]).toEqual(u32(24));
    expect(md["qwen3.attention.layer_norm_rms_epsilon"]).toEqual({ type: "f32", value: Math.fround(1e-6) });
    expect(md["qwen3.rope.freq_base"]).toEqual({ type: "f32", value: 1e6 });
    expect(md["tokenizer.ggml.model"]).toEqual({ type: "string", value: "gpt2" });
    expect(md["tokenizer.ggml.merges"]).toEqual({ type: "array", elem: "string", value: [] });
    expect(md["tokenizer.ggml.bos_token_id"]).toEqual(u32(256));
    expect(md["tokenizer.ggml.eos_token_id"]).toEqual(u32(257));
    const tokens = md["tokenizer.ggml.tokens"] as { value: string[] };
    expect(tokens.value.length).toBe(258);
    expect(tokens.value[0x20]).toBe("Ġ");
    expect(tokens.value[0x0a]).toBe("Ċ");
    expect(tokens.value[0x41]).toBe("A");
    expect(new Set(tokens.value).size).toBe(258);
    expect((md["tokenizer.ggml.token_type"] as { value: number[] }).value.slice(254)).toEqual([1, 1, 3, 3]);
    expect(g.tensors.length).toBe(3 + 11 * 2);
    const q = g.tensors.find((t) => t.name === "blk.1.attn_q.weight")!;
    expect(q.ne).toEqual([64, 96]);
    expect(q.type).toBe("Q8_0");
    expect(g.tensors.find((t) => t.name === "blk.0.attn_k_norm.weight")!).toMatchObject({
      ne: [24],
      type: "F32",
    });
    expect(g.tensors.find((t) => t.name === "blk.0.ffn_down.weight")!.ne).toEqual([96, 64]);
  });

  test("byte table: 188 printable bytes stand for themselves, 68 map to U+0100 onwards, all distinct", () => {
    const t = [...BYTE_CHARS];
    expect(t.filter((c, b) => c.codePointAt(0) === b).length).toBe(188);
    expect(t[0]).toBe("\u0100");
    expect(t[0xad]).toBe("\u0143");
    expect(new Set(t).size).toBe(256);
  });

  test("f32 config values come back as the decimals they were written as", () => {
    expect(shortestF32Decimal(Math.fround(1e-6))).toBe(1e-6);
    expect(shortestF32Decimal(Math.fround(1e-5))).toBe(1e-5);
    expect(shortestF32Decimal(Math.fround(0.1))).toBe(0.1);
    expect(shortestF32Decimal(1e6)).toBe(1e6);
  });

  test("the writer refuses models it cannot write faithfully", async () => {
    const { config, tensors } = testTensors(6);
    const p = join(dir, "bad.gguf");
    const w = (ts: typeof tensors, c = config, type: "f32" | "f16" | "q4_0" = "f32") => () =>
      qwen3Tensors(ts, c, type.toUpperCase() as GgmlType, p);
    const nan = tensors.map((t) => ({ ...t, data: t.data.slice() }));
    nan[1].data[3] = NaN;
    expectGgufError(w(nan), "tensor model.layers.0.input_layernorm.weight", /element 3 is NaN/, p);
    expectGgufError(w(tensors.slice(1)), "tensor model.embed_tokens.weight", /missing/, p);
    const wrong = tensors.map((t, i) => (i === 2 ? { ...t, dims: [64, 96] } : t));
    expectGgufError(
      w(wrong),
      "tensor model.layers.0.self_attn.q_proj.weight",
      /has dims \[64,96\]; the config implies \[96,64\]/,
      p,
    );
    expectGgufError(
      w([...tensors, { name: "extra.weight", dims: [1], data: new Float32Array(1) }]),
      "tensor extra.weight",
      /not part/,
      p,
    );
    const big = tensors.map((
      t,
      i,
    ) => (i === 2 ? { ...t, data: t.data.map((x, j) => (j === 0 ? 1e6 : x)) } : t));
    expectGgufError(
      w(big, config, "f16"),
      "tensor model.layers.0.self_attn.q_proj.weight",
      /overflows f16/,
      p,
    );
    const oddCfg = { ...config, hidden_size: 48 };
    const oddTensors = initParams(oddCfg, 1, 0.5);
    expectGgufError(
      w(oddTensors, oddCfg, "q4_0"),
      "tensor model.embed_tokens.weight",
      /input dim \(48\) to be a multiple of 32/,
      p,
    );
    expectGgufError(w(tensors, { ...config, vocab_size: 100 }), "vocab_size", /at least 258/, p);
    await expect(writeGguf(p, tensors, config, { type: "q5_0" as "q4_0" })).rejects.toThrow(
      /unknown GGUF dtype q5_0/,
    );
  });
});

describe("qwen3 reader refusals", () => {
  const { config, tensors } = testTensors(8);
  const md = qwen3Metadata(config, "F32");
  const ts = qwen3Tensors(tensors, config, "F32");
  const file = (m = md, t = ts) => parseGguf(new Uint8Array(Buffer.concat(encodeGguf(m, t))), "t.gguf");
  const read = (m = md, t = ts) => () => qwen3FromGguf(file(m, t), "t.gguf");
  const set = (key: string, v: GgufValue | undefined) =>
    v ? md.map(([k, x]) => [k, k === key ? v : x] as [string, GgufValue]) : md.filter(([k]) => k !== key);

  test("the unbroken file reads", () => expect(read()().config).toEqual(config));
  test("another architecture", () =>
    expectGgufError(
      read(set("general.architecture", { type: "string", value: "llama" })),
      "general.architecture",
      /"llama"; expected "qwen3"/,
    ));
  test("no architecture", () =>
    expectGgufError(read(set("general.architecture", undefined)), "general.architecture", /missing/));
  test("a required hyperparameter missing", () =>
    expectGgufError(
      read(set("qwen3.block_count", undefined)),
      "qwen3.block_count",
      /missing \(expected u32\)/,
    ));
  test("a count stored as u64 (llama.cpp refuses it too)", () => {
    expectGgufError(
      read(set("qwen3.context_length", { type: "u64", value: 128n })),
      "qwen3.context_length",
      /has type u64; expected u32/,
    );
  });
  test("eps stored as f64", () => {
    expectGgufError(
      read(set("qwen3.attention.layer_norm_rms_epsilon", { type: "f64", value: 1e-6 })),
      "qwen3.attention.layer_norm_rms_epsilon",
      /has type f64; expected f32/,
    );
  });
  test("zero heads", () =>
    expectGgufError(
      read(set("qwen3.attention.head_count", { type: "u32", value: 0 })),
      "qwen3.attention.head_count",
      /expected a positive integer/,
    ));
  test("value_length differing from key_length", () => {
    expectGgufError(
      read(set("qwen3.attention.value_length", { type: "u32", value: 16 })),
      "qwen3.attention.value_length",
      /differs/,
    );
  });
  test("kv heads not dividing heads", () => {
    expectGgufError(
      read(set("qwen3.attention.head_count_kv", { type: "u32", value: 3 })),
      "qwen3.attention.head_count_kv",
      /does not divide/,
    );
  });
  test("RoPE scaling", () => {
    const m: Array<[string, GgufValue]> = [...md, ["qwen3.rope.scaling.type", {
      type: "string",
      value: "yarn",
    }]];
    expectGgufError(read(m), "qwen3.rope.scaling.type", /no RoPE scaling/);
  });
  test("a tokenizer other than gpt2", () =>
    expectGgufError(
      read(set("tokenizer.ggml.model", { type: "string", value: "llama" })),
      "tokenizer.ggml.model",
      /expected "gpt2"/,
    ));
  test("a vocabulary that is not ferry's bytes", () => {
    const tokens = [...BYTE_CHARS].concat(["<|startoftext|>", "<|endoftext|>"]);
    tokens[65] = "a";
    expectGgufError(
      read(set("tokenizer.ggml.tokens", { type: "array", elem: "string", value: tokens })),
      "tokenizer.ggml.tokens",
      /token 65 is "a"/,
    );
  });
  test("a vocabulary shorter than token_embd", () => {
    expectGgufError(
      read(set("tokenizer.ggml.tokens", { type: "array", elem: "string", value: [...BYTE_CHARS] })),
      "tokenizer.ggml.tokens",
      /256 tokens; token_embd.weight has 258 rows/,
    );
  });
  test("another EOS id", () =>
    expectGgufError(
      read(set("tokenizer.ggml.eos_token_id", { type: "u32", value: 11 })),
      "tokenizer.ggml.eos_token_id",
      /u32 11; expected u32 257/,
    ));
  test("a missing tensor", () =>
    expectGgufError(
      read(md, ts.filter((t) => t.name !== "blk.1.ffn_up.weight")),
      "tensor blk.1.ffn_up.weight",
      /missing/,
    ));
  test("an extra tensor", () => {
    const extra = [...ts, {
      name: "blk.0.attn_q.bias",
      ne: [96],
      type: "F32" as GgmlType,
      bytes: new Uint8Array(384),
    }];
    expectGgufError(read(md, extra), "tensor blk.0.attn_q.bias", /not a tensor of this qwen3 model/);
  });
  test("a layer beyond block_count", () => {
    const extra = [...ts, {
      ...ts.find((t) => t.name === "blk.1.attn_norm.weight")!,
      name: "blk.2.attn_norm.weight",
    }];
    expectGgufError(read(md, extra), "tensor blk.2.attn_norm.weight", /not a tensor/);
  });
  test("a wrong shape", () => {
    const bad = ts.map((t) => (t.name === "blk.0.attn_k.weight" ? { ...t, ne: [48, 64] } : t));
    expectGgufError(
      read(md, bad),
      "tensor blk.0.attn_k.weight",
      /has ne \[48,64\]; the metadata implies \[64,48\]/,
    );
  });
  test("a non-finite weight", () => {
    const bad = ts.map((
      t,
    ) => (t.name === "output_norm.weight"
      ? { ...t, bytes: encodeTensor("F32", new Float32Array(64).fill(Infinity)) }
      : t)
    );
    expectGgufError(read(md, bad), "tensor output_norm.weight", /element 0 is Infinity/);
  });
  test("readGguf names a missing file", async () => {
    await expect(readGguf(join(dir, "nope.gguf"))).rejects.toThrow(/nope\.gguf: file: cannot be read/);
  });
  test("readGguf refuses a ferry checkpoint by its magic", async () => {
    const p = join(dir, "not.gguf");
    await writeFile(p, new Uint8Array(64).fill(0x46));
    await expect(readGguf(p)).rejects.toThrow(/header\.magic: expected "GGUF"/);
  });
});

describe("@huggingface/gguf reads ferry's files and agrees with ferry's reader", () => {
  test("metadata, tensor infos and data offset, for every type", async () => {
    const { config, tensors } = testTensors(9, true);
    const files = await writeAllTypes(dir, tensors, config, "hf");
    for (const dtype of ALL_DTYPES) {
      const hf = await hfGguf(files[dtype], { allowLocalFile: true, typedMetadata: true });
      const ours = parseGguf(new Uint8Array(await readFile(files[dtype])), files[dtype]);
      const { version, tensor_count, kv_count, ...rest } = hf.metadata as Record<string, unknown>;
      expect(version).toBe(3);
      expect(tensor_count).toBe(BigInt(ours.tensors.length));
      expect(kv_count).toBe(BigInt(ours.metadata.size));
      expect(Object.keys(rest)).toEqual([...ours.metadata.keys()]);
      for (const [key, v] of ours.metadata) {
        expect(rest[key]).toEqual(v.value);
        // typedMetadata carries the stored type id; it must be the one ferry wrote.
        const typed = (hf.typedMetadata as Record<string, { type: number; subType?: number }>)[key];
        const ids: Record<string, number> = {
          u8: 0,
          i8: 1,
          u16: 2,
          i16: 3,
          u32: 4,
          i32: 5,
          f32: 6,
          bool: 7,
          string: 8,
          array: 9,
          u64: 10,
          i64: 11,
          f64: 12,
        };
        expect(typed.type).toBe(ids[v.type]);
        if (v.type === "array") expect(typed.subType).toBe(ids[v.elem]);
      }
      expect(
        hf.tensorInfos.map((t) => ({
          name: t.name,
          ne: t.shape.map(Number),
          type: t.dtype,
          offset: Number(t.offset),
        })),
      ).toEqual(
        ours.tensors.map((t) => ({ name: t.name, ne: t.ne, type: GGML_TYPES[t.type].id, offset: t.offset })),
      );
      expect(Number(hf.tensorDataOffset)).toBe(ours.dataOffset);
      expect(hf.littleEndian).toBe(true);
    }
  });
  test("tensor data: the bytes @huggingface/gguf locates decode, through llama.cpp's ggml, to exactly ferry's values, for every type", async () => {
    // @huggingface/gguf 0.4.6 parses a file's header, tensor infos and data offset but decodes no tensor
    // data itself (no type's values): so its offsets, shapes and types locate each tensor's bytes, and
    // ggml's own row decoders (bun:ffi) turn them into values, compared bit for bit with ferry's reader.
    // intermediate 256: ffn_down rows are whole K-quant super-blocks, so Q4_K and Q6_K occur too.
    const { config, tensors } = testTensors(9, false, { intermediate_size: 256 });
    const files = await writeAllTypes(dir, tensors, config, "hfdata");
    const byId = new Map(
      Object.entries(GGML_TYPE_ID).map(([k, v]) => [v as number, k as keyof typeof GGML_TYPE_ID]),
    );
    const bytesFor = (type: keyof typeof GGML_TYPE_ID, n: number) =>
      type === "F32"
        ? 4 * n
        : type === "F16" || type === "BF16"
        ? 2 * n
        : (n / GGML_BLOCKS[type][0]) * GGML_BLOCKS[type][1];
    const ggml = openGgml();
    try {
      const seen = new Set<string>();
      for (const dtype of ALL_DTYPES) {
        const file = new Uint8Array(await readFile(files[dtype]));
        const hf = await hfGguf(files[dtype], { allowLocalFile: true });
        const ours = new Map(parseGguf(file, files[dtype]).tensors.map((t) => [t.name, t]));
        expect(hf.tensorInfos.length).toBe(ours.size);
        let end = Number(hf.tensorDataOffset);
        for (const info of hf.tensorInfos) {
          const type = byId.get(info.dtype)!;
          seen.add(type);
          const n = info.shape.reduce((a, b) => a * Number(b), 1);
          const start = Number(hf.tensorDataOffset) + Number(info.offset);
          expect(start).toBeGreaterThanOrEqual(end); // in order, no overlap
          end = start + bytesFor(type, n);
          expect(end).toBeLessThanOrEqual(file.length);
          const theirs = ggml.decode(type, file.subarray(start, end), n);
          const mine = ours.get(info.name);
          expect(mine).toBeDefined();
          expectSameBits(tensorToF32(mine!), theirs, `${dtype} ${info.name}`);
        }
        expect(file.length - end).toBeLessThan(32); // at most the alignment padding after the last tensor
      }
      expect([...seen].sort()).toEqual([
        "BF16",
        "F16",
        "F32",
        "IQ4_NL",
        "Q4_0",
        "Q4_K",
        "Q5_0",
        "Q6_K",
        "Q8_0",
      ]);
    } finally {
      ggml.close();
    }
  });
});

describe("openGgufSources: a GGUF read a chunk of rows at a time", () => {
  test("every type: whole-row chunks give readGguf's values bit for bit", async () => {
    const { config, tensors } = testTensors(11, true);
    const files = await writeAllTypes(dir, tensors, config, "stream");
    for (const dtype of ALL_DTYPES) {
      const whole = await readGguf(files[dtype]);
      const g = await openGgufSources(files[dtype]);
      try {
        expect(g.config).toEqual(whole.config);
        for (const src of g.sources) {
          const want = whole.tensors.find((t) => t.name === src.name)!.data;
          const K = src.dims[src.dims.length - 1], got = new Float32Array(want.length);
          for (let at = 0; at < want.length; at += 3 * K) {
            const n = Math.min(3 * K, want.length - at);
            got.set(await src.read(at, n, new Float32Array(n)), at);
          }
          expectSameBits(got, want, `${dtype} ${src.name}`);
        }
      } finally {
        await g.close();
      }
    }
  });

  test("a non-finite value is refused when its chunk is read, naming the tensor and its index in it", async () => {
    const { config, tensors } = testTensors(8);
    const ts = qwen3Tensors(tensors, config, "F32").map((t) => {
      if (t.name !== "blk.1.ffn_up.weight") return t;
      const v = new Float32Array(decodeTensor("F32", t.bytes, 96 * 64));
      v[5 * 64 + 7] = NaN; // row 5, column 7
      return { ...t, bytes: encodeTensor("F32", v) };
    });
    const p = join(dir, "nan.gguf");
    await writeFile(p, Buffer.concat(encodeGguf(qwen3Metadata(config, "F32"), ts)));
    const g = await openGgufSources(p);
    try {
      const src = g.sources.find((s) => s.name === "model.layers.1.mlp.up_proj.weight")!;
      expect(await src.read(0, 64 * 4, new Float32Array(256))).toHaveLength(256); // rows 0-3 are fine
      await expect(src.read(64 * 4, 64 * 4, new Float32Array(256))).rejects.toThrow(
        /tensor blk\.1\.ffn_up\.weight: element 327 is NaN/,
      );
    } finally {
      await g.close();
    }
  });
  test("a quantized matrix offers its blocks, the file's bytes a chunk of rows at a time; F32, F16, BF16 none", async () => {
    const { config, tensors } = testTensors(12, true);
    const files = await writeAllTypes(dir, tensors, config, "blocks");
    for (const dtype of ALL_DTYPES) {
      const file = parseGguf(new Uint8Array(await readFile(files[dtype])), files[dtype]);
      const g = await openGgufSources(files[dtype]);
      try {
        for (const src of g.sources.filter((s) => s.dims.length === 2)) {
          const info = file.tensors.find((t) => t.name === ggufTensorName(src.name))!;
          if (["F32", "F16", "BF16"].includes(info.type)) {
            expect(`${dtype} ${src.name} ${src.blocks}`).toBe(`${dtype} ${src.name} undefined`);
            continue;
          }
          expect(src.blocks!.type).toBe(info.type);
          const rowBytes = info.bytes.length / src.dims[0], got = new Uint8Array(info.bytes.length);
          for (let row = 0; row < src.dims[0]; row += 3) {
            const rows = Math.min(3, src.dims[0] - row);
            got.set(await src.blocks!.read(row, rows, new Uint8Array(rows * rowBytes)), row * rowBytes);
          }
          expectSameBits(got, info.bytes, `${dtype} ${src.name}`);
        }
      } finally {
        await g.close();
      }
    }
  });

  test("blocks whose scale is not finite are refused when read, as `read` refuses their values", async () => {
    const { config, tensors } = testTensors(8);
    const ts = qwen3Tensors(tensors, config, "Q8_0").map((t) => {
      if (t.name !== "blk.1.ffn_up.weight") return t;
      const bytes = t.bytes.slice();
      bytes[(5 * 2 + 1) * 34 + 1] = 0x7c; // row 5's second block: d = infinity (its low byte is kept)
      bytes[(5 * 2 + 1) * 34] = 0;
      return { ...t, bytes };
    });
    const p = join(dir, "inf-scale.gguf");
    await writeFile(p, Buffer.concat(encodeGguf(qwen3Metadata(config, "Q8_0"), ts)));
    const g = await openGgufSources(p);
    try {
      const src = g.sources.find((s) => s.name === "model.layers.1.mlp.up_proj.weight")!;
      expect(await src.blocks!.read(0, 4, new Uint8Array(4 * 68))).toHaveLength(4 * 68); // rows 0-3 are fine
      const refusal = /tensor blk\.1\.ffn_up\.weight: element 35\d is (-?Infinity|NaN)/;
      await expect(src.read(4 * 64, 4 * 64, new Float32Array(256))).rejects.toThrow(refusal);
      await expect(src.blocks!.read(4, 4, new Uint8Array(4 * 68))).rejects.toThrow(refusal);
    } finally {
      await g.close();
    }
  });
});

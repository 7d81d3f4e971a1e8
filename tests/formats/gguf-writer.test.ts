// The GGUF container writer's buffer growth. The writer starts small and doubles; a write whose room
// grows the buffer must land in the new buffer (a stale DataView once wrote such values into the old
// one, so a 151,936-token vocabulary crashed every GGUF export). Each case below puts a growth point
// exactly on one kind of write and reads the file back.
import { expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { encodeGguf, type GgufValue, parseGguf } from "../../formats/gguf/gguf-container.ts";
import { createRng, type Rng } from "../../model/random.ts";

const bytesOf = (chunks: Uint8Array[]) => new Uint8Array(Buffer.concat(chunks));

// The header is 24 bytes; one metadata entry with key "k" and a string value of n bytes takes
// 8 + 1 (key) + 4 (type) + 8 + n (string): padding the string moves the next write onto any offset.
const SCALARS: Array<[string, GgufValue]> = [
  ["u8", { type: "u8", value: 200 }],
  ["i8", { type: "i8", value: -100 }],
  ["u16", { type: "u16", value: 60_000 }],
  ["i16", { type: "i16", value: -30_000 }],
  ["u32", { type: "u32", value: 4_000_000_000 }],
  ["i32", { type: "i32", value: -2_000_000_000 }],
  ["f32", { type: "f32", value: 1.5 }],
  ["f64", { type: "f64", value: Math.PI }],
  ["u64", { type: "u64", value: 2n ** 63n + 5n }],
  ["i64", { type: "i64", value: -(2n ** 62n) }],
  ["bool", { type: "bool", value: true }],
  ["string", { type: "string", value: "after growth" }],
];

test("a growth point on every kind of write (every scalar type, at every offset around 4096) reads back", () => {
  let cases = 0;
  for (const [name, value] of SCALARS) {
    // The value's type id (u32) and the value itself straddle the 4096-byte boundary at some padding.
    for (let pad = 4096 - 24 - 21 - 24; pad <= 4096 - 24 - 21 + 8; pad++) {
      const meta: Array<[string, GgufValue]> = [["k", { type: "string", value: "x".repeat(pad) }], [
        name,
        value,
      ]];
      const file = parseGguf(bytesOf(encodeGguf(meta, [])), "growth.gguf");
      expect(file.metadata.get(name)).toEqual(value);
      cases++;
    }
  }
  expect(cases).toBe(SCALARS.length * 33);
});

test("a 151,936-string array (a real Qwen3 vocabulary's size) and its arrays of ids grow the buffer many times", () => {
  const tokens = Array.from({ length: 151_936 }, (_, i) => `tok${i}\u0120`);
  const types = Array.from({ length: tokens.length }, (_, i) => (i % 7 === 0 ? 3 : 1));
  const scores = Array.from({ length: tokens.length }, (_, i) => -i / 8);
  const meta: Array<[string, GgufValue]> = [
    ["tokenizer.ggml.tokens", { type: "array", elem: "string", value: tokens }],
    ["tokenizer.ggml.token_type", { type: "array", elem: "i32", value: types }],
    ["tokenizer.ggml.scores", { type: "array", elem: "f32", value: scores }],
    ["tokenizer.ggml.eos_token_id", { type: "u32", value: 151_645 }],
  ];
  const file = parseGguf(bytesOf(encodeGguf(meta, [])), "vocab.gguf");
  expect(file.metadata.get("tokenizer.ggml.tokens")).toEqual(meta[0][1]);
  expect(file.metadata.get("tokenizer.ggml.token_type")).toEqual(meta[1][1]);
  expect(file.metadata.get("tokenizer.ggml.scores")).toEqual(meta[2][1]);
  expect(file.metadata.get("tokenizer.ggml.eos_token_id")).toEqual(meta[3][1]);
});

/** A random value of a random type: every scalar type, and arrays of each (strings multi-byte). */
function randomValue(rng: Rng): GgufValue {
  const types = [
    "u8",
    "i8",
    "u16",
    "i16",
    "u32",
    "i32",
    "f32",
    "f64",
    "u64",
    "i64",
    "bool",
    "string",
  ] as const;
  const scalar = (t: typeof types[number]): number | bigint | boolean | string => {
    switch (t) {
      case "u8":
        return rng.int(256);
      case "i8":
        return rng.int(256) - 128;
      case "u16":
        return rng.int(65536);
      case "i16":
        return rng.int(65536) - 32768;
      case "u32":
        return rng.int(2 ** 32);
      case "i32":
        return rng.int(2 ** 32) - 2 ** 31;
      case "f32":
        return Math.fround(rng.normal());
      case "f64":
        return rng.normal();
      case "u64":
        return BigInt(rng.int(2 ** 32)) << 31n | BigInt(rng.int(2 ** 31));
      case "i64":
        return -(BigInt(rng.int(2 ** 32)) << 30n);
      case "bool":
        return rng.next() < 0.5;
      case "string":
        return [..."aé✓🙂Ġ".repeat(rng.int(40))].slice(0, rng.int(200)).join(""); // whole code points
    }
  };
  const t = types[rng.int(types.length)];
  if (rng.next() < 0.7) return { type: t, value: scalar(t) } as GgufValue;
  return { type: "array", elem: t, value: Array.from({ length: rng.int(3000) }, () => scalar(t)) };
}

test("random metadata of every type and size (300 files, up to ~1.5 MB) reads back: writes land on every growth point", () => {
  // The buffer doubles from 4096; whatever write comes next at each boundary (a type id, a count, a
  // string's length or bytes, any scalar) must land in the new buffer. Sizes vary widely, so over the
  // cases every doubling up to 1 MiB is crossed by writes of every kind at every phase.
  const rng = createRng(2026);
  let crossed = 0;
  for (let c = 0; c < 300; c++) {
    const meta: Array<[string, GgufValue]> = Array.from({ length: 1 + rng.int(30) }, (_, i) => [
      `k${i}.${"x".repeat(rng.int(9))}`,
      randomValue(rng),
    ]);
    const bytes = bytesOf(encodeGguf(meta, []));
    if (bytes.length > 4096) crossed++;
    const back = parseGguf(bytes, "random.gguf");
    expect([...back.metadata]).toEqual(meta);
  }
  expect(crossed).toBeGreaterThan(150);
});

test("one write larger than twice the buffer (a 3 MiB string after a few bytes) takes the exact-size growth", () => {
  const big = "Ġ\u4e2d".repeat(1 << 19); // 3 MiB of UTF-8
  const meta: Array<[string, GgufValue]> = [
    ["a", { type: "u8", value: 7 }],
    ["tokenizer.chat_template", { type: "string", value: big }],
    ["z", { type: "u64", value: 2n ** 40n + 3n }],
  ];
  const back = parseGguf(bytesOf(encodeGguf(meta, [])), "big.gguf");
  expect([...back.metadata]).toEqual(meta);
});

test("a string or key with a lone surrogate is refused, not written as U+FFFD", () => {
  expect(() => encodeGguf([["k", { type: "string", value: "a\ud83d" }]], [], "s.gguf")).toThrow(
    /k: .*lone surrogate/,
  );
  expect(() => encodeGguf([["k", { type: "array", elem: "string", value: ["ok", "\udc00"] }]], [], "s.gguf"))
    .toThrow(/lone surrogate/);
  expect(() => encodeGguf([["k\ud800", { type: "u8", value: 1 }]], [], "s.gguf")).toThrow(/lone surrogate/);
});

// The GGUF container writer's buffer growth. The writer starts small and doubles; a write whose room
// grows the buffer must land in the new buffer (a stale DataView once wrote such values into the old
// one, so a 151,936-token vocabulary crashed every GGUF export). Each case below puts a growth point
// exactly on one kind of write and reads the file back.
import { expect, setDefaultTimeout, test } from "bun:test";
import { Buffer } from "node:buffer";
import { encodeGguf, type GgufValue, parseGguf } from "../formats/gguf-container.ts";

setDefaultTimeout(60_000);

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

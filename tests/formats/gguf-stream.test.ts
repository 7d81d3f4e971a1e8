// The GGUF writer at real size: it streams tensor by tensor from a header laid out from shapes alone,
// so a file past 4 GiB (u64 offsets beyond 2^32, as real models have) is written without being held,
// here into a sink that only counts bytes and checks that every tensor starts at its aligned offset.
// A model given as streamed sources is read a few rows at a time and gives the in-memory bytes.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Buffer } from "node:buffer";
import { readdirSync, readFileSync } from "node:fs";
import process from "node:process";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import {
  encodeGgufHeader,
  GgufError,
  type GgufTensorShape,
  parseGgufHeader,
  readGguf,
  streamGguf,
  writeGguf,
} from "../../formats/gguf/gguf.ts";
import type { TensorSource } from "../../model/tensor.ts";
import { tempDir, testTensors } from "../helpers/gguf-fixtures.ts";

let dir = "";
beforeAll(async () => {
  dir = await tempDir();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const GiB = 2 ** 30;

test("a 5 GiB file streams through a counting sink: every offset aligned, u64 offsets past 2^32, nothing held", async () => {
  // Five 1 GiB F32 tensors and an odd-sized Q8_0 one between them, so padding moves every later offset.
  const shapes: GgufTensorShape[] = [
    { name: "a", ne: [4096, 65536], type: "F32" },
    { name: "odd", ne: [32, 3], type: "Q8_0" }, // 102 bytes: 26 of padding follow
    { name: "b", ne: [4096, 65536], type: "F32" },
    { name: "c", ne: [4096, 65536], type: "F32" },
    { name: "d", ne: [4096, 65536], type: "F32" },
    { name: "e", ne: [4096, 32768, 2], type: "F32" },
  ];
  const metadata = [["general.alignment", { type: "u32", value: 32 }]] as const;
  const piece = new Uint8Array(16 << 20); // one 16 MiB piece, handed out again and again
  const layout = encodeGgufHeader(metadata, shapes, "big.gguf");
  let written = 0, tensorStarts = 0, maxWrite = 0;
  const starts: number[] = [];
  const sink = {
    write(bytes: Uint8Array) {
      written += bytes.length;
      maxWrite = Math.max(maxWrite, bytes.length);
    },
  };
  const before = process.memoryUsage().rss;
  const result = await streamGguf(sink, metadata, shapes, function* (i) {
    starts.push(written), tensorStarts++;
    let left = layout.sizes[i];
    while (left > 0) {
      const n = Math.min(left, piece.length);
      yield n === piece.length ? piece : new Uint8Array(n);
      left -= n;
    }
  }, "big.gguf");
  const grew = process.memoryUsage().rss - before;
  expect(tensorStarts).toBe(6);
  expect(result.fileBytes).toBe(written);
  expect(written).toBeGreaterThan(5 * GiB);
  // Each tensor's bytes began exactly where its offset says, 32-aligned from the data section.
  starts.forEach((at, i) => {
    expect(at).toBe(layout.header.length + layout.offsets[i]);
    expect(layout.offsets[i] % 32).toBe(0);
  });
  expect(layout.offsets[2]).toBe(GiB + 128);
  expect(layout.offsets[5]).toBeGreaterThan(2 ** 32);
  expect(maxWrite).toBe(piece.length);
  expect(grew).toBeLessThan(256 << 20);
  // The header alone reads back with the same u64 offsets, against the file's full size.
  const head = parseGgufHeader(layout.header, written, "big.gguf");
  if (head === "more") throw new Error("the header did not parse");
  expect(head.tensors.map((t) => t.offset)).toEqual(layout.offsets);
  expect(head.end).toBe(written);
  expect(head.dataOffset).toBe(layout.header.length);
});

test("a tensor whose pieces add up to more or less than its size is refused, naming it", async () => {
  const shapes: GgufTensorShape[] = [{ name: "w", ne: [32, 2], type: "F32" }];
  const sink = { write() {} };
  for (const n of [255, 257]) {
    const err = await streamGguf(sink, [], shapes, () => [new Uint8Array(n)], "x.gguf").catch((e) => e);
    expect(err).toBeInstanceOf(GgufError);
    expect(err.field).toBe("tensor w");
    expect(err.message).toMatch(/needs 256/);
  }
});

test("streamed sources are read a few rows at a time and give the in-memory file's bytes", async () => {
  // 151,936 × 64 embedding rows: 9.7M values, more than two of the writer's 4 Mi-value pieces.
  const { config, tensors } = testTensors(11, true, { vocab_size: 151_936 });
  const reads: number[] = [];
  const sources: TensorSource[] = tensors.map((t) => ({
    name: t.name,
    dims: t.dims,
    read(start, count, scratch) {
      reads.push(count);
      scratch.set(t.data.subarray(start, start + count));
      return scratch;
    },
  }));
  for (const type of ["bf16", "q8_0"] as const) {
    const mem = join(dir, `mem.${type}.gguf`), streamed = join(dir, `streamed.${type}.gguf`);
    await writeGguf(mem, tensors, config, { type });
    reads.length = 0;
    await writeGguf(streamed, sources, config, { type });
    expect(Math.max(...reads)).toBeLessThanOrEqual(1 << 22);
    expect(reads.length).toBeGreaterThan(tensors.length); // the embedding came in several pieces
    expect(Buffer.compare(readFileSync(streamed), readFileSync(mem))).toBe(0);
  }
  const back = await readGguf(join(dir, "streamed.bf16.gguf"));
  expect(back.tensors.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
  expect(back.digest?.ok).toBe(true);
});

test("a non-finite value in a later piece aborts the write: no file, no temporary", async () => {
  const { config, tensors } = testTensors(12, true, { vocab_size: 151_936 });
  const bad = tensors.map((t) => ({ ...t, data: t.data.slice() }));
  bad[0].data[9_000_000] = NaN; // in the embedding's third piece
  const p = join(dir, "nan.gguf");
  const err = await writeGguf(p, bad, config, { type: "f16" }).catch((e) => e);
  expect(err).toBeInstanceOf(GgufError);
  expect(err.message).toMatch(/element 9000000 is NaN/);
  const left = readdirSync(dir).filter((n) => n.startsWith("nan"));
  expect(left).toEqual([]);
});

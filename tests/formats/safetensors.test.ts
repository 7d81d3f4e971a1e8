// safetensors: the writer's exact layout, every dtype read, every refusal as its own named error,
// sharded input, and the minimal reader (under Deno and Bun) agreeing with the full one.
import { afterAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import {
  openSafetensors,
  openSafetensorsIndex,
  parseSafetensorsHeader,
  readSafetensors,
  readSafetensorsIndex,
  SafetensorsError,
  type SafetensorsErrorCode,
  writeSafetensors,
} from "../../formats/safetensors/safetensors.ts";
import { JsonNumber, parseStrictJson, StrictJsonError } from "../../formats/json.ts";
import { bf16ToF32, f16ToF32, f32ToBf16, f32ToF16 } from "../../quantize/float16.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { type Tensor, tensor } from "../../model/tensor.ts";
import { expectSameBits } from "../helpers/bits.ts";

const dir = await mkdtemp(join(tmpdir(), "ferry-st-"));
afterAll(() => rm(dir, { recursive: true, force: true }));
const enc = new TextEncoder();

/** A file: u64 LE length `n` (default: the header's length), the header bytes, then `data`. */
function build(header: string | Uint8Array, data: ArrayLike<number> = [], n?: bigint): Uint8Array {
  const h = typeof header === "string" ? enc.encode(header) : header;
  const out = new Uint8Array(8 + h.length + data.length);
  new DataView(out.buffer).setBigUint64(0, n ?? BigInt(h.length), true);
  out.set(h, 8);
  out.set(data, 8 + h.length);
  return out;
}

/** Asserts that parsing `bytes` is refused with `code`, and that the message names the field. */
function refuses(bytes: Uint8Array, code: SafetensorsErrorCode, field?: string) {
  try {
    parseSafetensorsHeader(bytes, bytes.length, "bad.safetensors");
  } catch (e) {
    expect(e).toBeInstanceOf(SafetensorsError);
    expect((e as SafetensorsError).code).toBe(code);
    expect((e as Error).message).toStartWith("bad.safetensors: ");
    if (field !== undefined) expect((e as SafetensorsError).field).toBe(field);
    return;
  }
  throw new Error(`expected ${code}, but the header was accepted`);
}

const entry = (dtype: string, shape: unknown[] | string, offsets: unknown[] | string) =>
  `{"dtype":"${dtype}","shape":${Array.isArray(shape) ? JSON.stringify(shape) : shape},"data_offsets":${
    Array.isArray(offsets) ? JSON.stringify(offsets) : offsets
  }}`;

describe("writer layout", () => {
  test("length prefix, metadata first, tensors by name, space padding to 8, packed data", async () => {
    const path = join(dir, "layout.safetensors");
    await writeSafetensors(path, [
      tensor("b", [2], new Float32Array([1, -2])),
      tensor("a", [1, 2], new Float32Array([0.5, 3])),
    ], { metadata: { zeta: "z", alpha: "x" }, digest: false }); // the reference's layout, without ferry's digest
    const bytes = new Uint8Array(await readFile(path));
    const json = '{"__metadata__":{"alpha":"x","format":"pt","zeta":"z"},' +
      '"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},' +
      '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}';
    const n = Math.ceil(json.length / 8) * 8;
    expect(Number(new DataView(bytes.buffer).getBigUint64(0, true))).toBe(n);
    expect(new TextDecoder().decode(bytes.subarray(8, 8 + n))).toBe(json.padEnd(n, " "));
    expect([...new Float32Array(bytes.slice(8 + n).buffer)]).toEqual([0.5, 3, 1, -2]);
    expect(bytes.length).toBe(8 + n + 16);
  });

  test('no tensors: only the metadata, {"format":"pt"}', async () => {
    const path = join(dir, "empty.safetensors");
    await writeSafetensors(path, [], { digest: false });
    const bytes = new Uint8Array(await readFile(path));
    expect(new TextDecoder().decode(bytes.subarray(8))).toBe('{"__metadata__":{"format":"pt"}}');
    expect((await readSafetensors(path)).tensors).toEqual([]);
  });

  test("refuses a tensor named __metadata__, duplicate names, dims that do not match, dtypes it does not write", async () => {
    const cases: Array<[Tensor[], string, SafetensorsErrorCode]> = [
      [[tensor("__metadata__", [1])], "F32", "ReservedName"],
      [[tensor("x", [1]), tensor("x", [2])], "F32", "DuplicateKey"],
      [[{ name: "x", dims: [3], data: new Float32Array(2) }], "F32", "InvalidTensor"],
      [[tensor("\ud800", [1])], "F32", "InvalidTensor"],
      [[tensor("x", [1])], "F64", "UnsupportedDtype"],
    ];
    for (const [tensors, dtype, code] of cases) {
      const p = writeSafetensors(join(dir, "never.safetensors"), tensors, { dtype: dtype as "F32" });
      await expect(p).rejects.toMatchObject({ code });
    }
  });
});

describe("round trip", () => {
  const tensors = initParams(PRESETS.tiny, 3);
  tensors.push(tensor("scalar", [], new Float32Array([7])), tensor("empty", [0, 3]));
  // Values a value comparison would blur: -0 against +0, subnormals (f16 and bf16 flush some to ±0).
  tensors.push(tensor("signed", [6], new Float32Array([-0, 0, -1e-45, 1e-45, -3e-8, -Infinity])));

  test("F32 is bit-exact, F16 and BF16 are exactly the round-to-nearest-even narrowing", async () => {
    for (const dtype of ["F32", "F16", "BF16"] as const) {
      const path = join(dir, `rt-${dtype}.safetensors`);
      await writeSafetensors(path, tensors, { dtype });
      const back = await readSafetensors(path);
      expect(back.metadata).toEqual({
        format: "pt",
        "ferry.sha256": expect.stringMatching(/^[0-9a-f]{64}$/),
      });
      expect(back.digest?.ok).toBe(true);
      expect(back.tensors.length).toBe(tensors.length);
      for (const t of tensors) {
        const got = back.tensors.find((x) => x.name === t.name)!;
        expect(got.dtype).toBe(dtype);
        expect(got.dims).toEqual(t.dims);
        const want = dtype === "F32"
          ? t.data
          : dtype === "F16"
          ? f16ToF32(f32ToF16(t.data))
          : bf16ToF32(f32ToBf16(t.data));
        expect(new Uint32Array(got.data.buffer, got.data.byteOffset, got.data.length))
          .toEqual(new Uint32Array(want.buffer, want.byteOffset, want.length));
      }
    }
  });

  test("reads every dtype: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL", async () => {
    const parts: Array<[string, number[], Uint8Array, number[]]> = [
      ["F64", [2], new Uint8Array(new Float64Array([0.25, -1e300]).buffer), [0.25, -Infinity]],
      ["F32", [2], new Uint8Array(new Float32Array([1.5, -0]).buffer), [1.5, -0]],
      ["F16", [2], new Uint8Array(new Uint16Array([0x3c00, 0xfbff]).buffer), [1, -65504]],
      ["BF16", [2], new Uint8Array(new Uint16Array([0x3f80, 0x4049]).buffer), [1, 3.140625]],
      ["I64", [2], new Uint8Array(new BigInt64Array([-5n, 1n << 40n]).buffer), [-5, 2 ** 40]],
      ["I32", [1, 2], new Uint8Array(new Int32Array([-7, 123456]).buffer), [-7, 123456]],
      ["I16", [2], new Uint8Array(new Int16Array([-32768, 9]).buffer), [-32768, 9]],
      ["I8", [2], new Uint8Array(new Int8Array([-128, 127]).buffer), [-128, 127]],
      ["U8", [2], new Uint8Array([0, 255]), [0, 255]],
      ["BOOL", [2], new Uint8Array([1, 0]), [1, 0]],
    ];
    let off = 0;
    const header: string[] = [];
    for (const [dtype, shape, bytes] of parts) {
      header.push(`"t${dtype}":${entry(dtype, shape, [off, off += bytes.length])}`);
    }
    const data = new Uint8Array(off);
    off = 0;
    for (const [, , bytes] of parts) data.set(bytes, off), off += bytes.length;
    const path = join(dir, "dtypes.safetensors");
    await writeFile(path, build(`{${header.join(",")}}`, data));
    const { tensors } = await readSafetensors(path);
    for (const [dtype, shape, , values] of parts) {
      const t = tensors.find((x) => x.name === `t${dtype}`)!;
      expect(t.dtype).toBe(dtype as "F32");
      expect(t.dims).toEqual(shape);
      expect([...t.data]).toEqual(values);
    }
  });

  test("accepts what the reference accepts: leading whitespace, null metadata, zero-size tensors sharing an offset", () => {
    const ok = build(
      `  \n{"__metadata__":null,"z":${entry("F32", [0], [0, 0])},"a":${entry("U8", [4], [0, 4])}}  `,
      [1, 2, 3, 4],
    );
    const h = parseSafetensorsHeader(ok);
    expect(h.entries.map((e) => e.name)).toEqual(["z", "a"]);
    expect(h.metadata).toEqual({});
  });
});

describe("refusals (each a named error)", () => {
  const one = (e: string, data: ArrayLike<number> = [0, 0, 0, 0]) => build(`{"x":${e}}`, data);

  test("HeaderTooSmall: fewer than 8 bytes", () => refuses(new Uint8Array(7), "HeaderTooSmall"));

  test("HeaderTooLarge: above 100,000,000 bytes, checked before anything is allocated", async () => {
    refuses(build("{}", [], 100_000_001n), "HeaderTooLarge", "header length");
    // 2^64 - 1 in an 8-byte file: allocating it first would throw a RangeError or exhaust memory.
    const path = join(dir, "huge-n.safetensors");
    await writeFile(path, build("", [], 2n ** 64n - 1n));
    await expect(readSafetensors(path)).rejects.toMatchObject({ code: "HeaderTooLarge" });
  });

  test("InvalidHeaderLength: the header runs past the file (the limit itself, 10^8, is allowed)", () => {
    refuses(build("{}", [], 100n), "InvalidHeaderLength");
    refuses(build("{}", [], 100_000_000n), "InvalidHeaderLength");
  });

  test("InvalidUtf8: header bytes that are not UTF-8", () =>
    refuses(build(new Uint8Array([0x7b, 0xff, 0x7d])), "InvalidUtf8"));

  test("InvalidJson: malformed, trailing characters, NUL padding, lone surrogate escape, too deep", () => {
    refuses(build(`{"x":${entry("F32", [1], [0, 4])},}`, [0, 0, 0, 0]), "InvalidJson");
    refuses(build("{} x"), "InvalidJson");
    refuses(build("{}\0\0\0\0\0\0"), "InvalidJson");
    refuses(build(`{"\\ud800":${entry("U8", [0], [0, 0])}}`), "InvalidJson");
    refuses(build(`{"__metadata__":{"a":"\\udc00"}}`), "InvalidJson");
    refuses(build(`{"x":${"[".repeat(200)}${"]".repeat(200)}}`), "InvalidJson");
  });

  test("DuplicateKey: a tensor name twice (the reference keeps the last), __metadata__ twice, a field twice", () => {
    refuses(
      build(`{"x":${entry("U8", [4], [0, 4])},"x":${entry("F32", [1], [0, 4])}}`, [0, 0, 0, 0]),
      "DuplicateKey",
      "x",
    );
    refuses(build(`{"__metadata__":{},"__metadata__":{}}`), "DuplicateKey");
    refuses(one(`{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}`), "DuplicateKey", "x.dtype");
    refuses(build(`{"__metadata__":{"k":"a","k":"b"}}`), "DuplicateKey");
  });

  test("NotAnInteger: 4.0, 1e2, -4 in a shape or offsets", () => {
    refuses(one(entry("F32", "[1.0]", [0, 4])), "NotAnInteger", "x.shape[0]");
    refuses(one(entry("F32", "[1e0]", [0, 4])), "NotAnInteger");
    refuses(one(entry("F32", "[-1]", [0, 4])), "NotAnInteger");
    refuses(one(entry("F32", [1], "[0, 4.0]")), "NotAnInteger", "x.data_offsets[1]");
  });

  test("IntegerTooLarge: 2^53 and above, which a JS number cannot hold exactly", () => {
    refuses(one(entry("F32", "[9007199254740992]", [0, 4])), "IntegerTooLarge", "x.shape[0]");
    refuses(one(entry("F32", [1], "[0, 18446744073709551615]")), "IntegerTooLarge");
  });

  test("HeaderNotObject: the header is an array", () => refuses(build("[]"), "HeaderNotObject"));

  test("InvalidMetadata: a non-string metadata value", () => {
    refuses(build(`{"__metadata__":{"n":1}}`), "InvalidMetadata", "__metadata__.n");
    refuses(build(`{"__metadata__":[]}`), "InvalidMetadata");
  });

  test("InvalidTensorEntry: not an object, shape not an array, three offsets, dtype not a string", () => {
    refuses(one(`"F32"`), "InvalidTensorEntry");
    refuses(one(entry("F32", `"1"`, [0, 4])), "InvalidTensorEntry", "x.shape");
    refuses(one(entry("F32", [1], [0, 4, 4])), "InvalidTensorEntry", "x.data_offsets");
    refuses(one(`{"dtype":4,"shape":[1],"data_offsets":[0,4]}`), "InvalidTensorEntry", "x.dtype");
  });

  test("MissingField: no shape", () =>
    refuses(one(`{"dtype":"F32","data_offsets":[0,4]}`), "MissingField", "x.shape"));

  test("UnknownField: a field the format does not define", () =>
    refuses(
      one(`{"dtype":"F32","shape":[1],"data_offsets":[0,4],"stride":[1]}`),
      "UnknownField",
      "x.stride",
    ));

  test("UnsupportedDtype: a reference dtype ferry does not read, and a wrong-case name", () => {
    refuses(one(entry("F8_E4M3", [4], [0, 4])), "UnsupportedDtype", "x.dtype");
    refuses(one(entry("f32", [1], [0, 4])), "UnsupportedDtype");
  });

  test("InvalidOffset: a hole, an overlap, a first tensor not at 0, end before begin, two owners of the same bytes", () => {
    const two = (a: unknown[], b: unknown[], n: number) =>
      build(
        `{"a":${entry("U8", [a[1] as number - (a[0] as number)], a)},"b":${
          entry("U8", [b[1] as number - (b[0] as number)], b)
        }}`,
        new Uint8Array(n),
      );
    refuses(two([0, 2], [3, 5], 5), "InvalidOffset", "b.data_offsets");
    refuses(two([0, 3], [2, 5], 5), "InvalidOffset", "b.data_offsets");
    refuses(one(entry("U8", [4], [1, 5]), new Uint8Array(5)), "InvalidOffset");
    refuses(one(entry("U8", [0], [4, 0])), "InvalidOffset");
    refuses(two([0, 4], [0, 4], 4), "InvalidOffset");
  });

  test("ValidationOverflow: shape × dtype size beyond 2^53 - 1", () =>
    refuses(one(entry("F32", [2 ** 40, 2 ** 40], [0, 4])), "ValidationOverflow", "x.shape"));

  test("TensorInvalidInfo: the offsets span a different byte count than the shape needs", () =>
    refuses(one(entry("F32", [2], [0, 4])), "TensorInvalidInfo", "x"));

  test("MetadataIncompleteBuffer: trailing bytes after the last tensor, or a truncated buffer", () => {
    refuses(one(entry("F32", [1], [0, 4]), [0, 0, 0, 0, 0]), "MetadataIncompleteBuffer");
    refuses(one(entry("F32", [1], [0, 4]), [0, 0, 0]), "MetadataIncompleteBuffer");
  });

  test("InvalidBool: a BOOL byte other than 0 or 1", async () => {
    const path = join(dir, "bool.safetensors");
    await writeFile(path, build(`{"x":${entry("BOOL", [3], [0, 3])}}`, [0, 1, 2]));
    await expect(readSafetensors(path)).rejects.toMatchObject({ code: "InvalidBool", field: "x" });
    // Streamed a chunk at a time, the refusal still names the element's place in the tensor.
    const st = await openSafetensors(path);
    try {
      await expect(st.source(st.entries[0]).read(2, 1, new Float32Array(1))).rejects.toMatchObject({
        code: "InvalidBool",
        message: expect.stringContaining("element 2 is byte 2"),
      });
    } finally {
      await st.close();
    }
  });
});

describe("strict JSON scanner", () => {
  test("keeps number text, so 4 and 4.0 differ", () => {
    const v = parseStrictJson('{"a":[4, 4.0, -1e-6]}') as { a: JsonNumber[] };
    expect(v.a.map((n) => n.text)).toEqual(["4", "4.0", "-1e-6"]);
  });
  test("decodes escapes and surrogate pairs", () => {
    expect(parseStrictJson('"\\u00e9\\ud83d\\ude00\\n\\/"')).toBe("é😀\n/");
  });
  test("refuses duplicates at any depth, with their path", () => {
    expect(() => parseStrictJson('{"a":{"b":1,"b":2}}')).toThrow(StrictJsonError);
    let caught: unknown;
    try {
      parseStrictJson('{"a":[{"b":1,"b":2}]}');
    } catch (e) {
      caught = e;
    }
    expect(caught).toMatchObject({ code: "DuplicateKey", at: "a[0].b" });
  });
  test("refuses what JSON.parse also refuses", () => {
    for (const bad of ["", "{", "[1,]", "01", "1.", "+1", "'a'", '"\t"', "tru", "{1:2}", "NaN"]) {
      expect(() => parseStrictJson(bad)).toThrow(StrictJsonError);
      expect(() => JSON.parse(bad)).toThrow();
    }
  });
});

describe("sharded input", () => {
  const tensors = initParams(PRESETS.tiny, 5);
  const half = Math.ceil(tensors.length / 2);
  const shards = [tensors.slice(0, half), tensors.slice(half)];
  const names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"];

  async function writeSharded(sub: string, weightMap: Record<string, string>) {
    const d = join(dir, sub);
    await rm(d, { recursive: true, force: true });
    await import("node:fs/promises").then((fs) => fs.mkdir(d));
    for (let i = 0; i < 2; i++) await writeSafetensors(join(d, names[i]), shards[i], { dtype: "BF16" });
    await writeFile(
      join(d, "model.safetensors.index.json"),
      JSON.stringify({ metadata: { total_size: 0 }, weight_map: weightMap }),
    );
    return join(d, "model.safetensors.index.json");
  }
  const goodMap = () => Object.fromEntries(shards.flatMap((s, i) => s.map((t) => [t.name, names[i]])));

  test("reads every tensor of every shard", async () => {
    const { tensors: back } = await readSafetensorsIndex(await writeSharded("ok", goodMap()));
    expect(back.map((t) => t.name).sort()).toEqual(tensors.map((t) => t.name).sort());
    for (const t of back) {
      expectSameBits(t.data, bf16ToF32(f32ToBf16(tensors.find((x) => x.name === t.name)!.data)), t.name);
    }
  });

  test("an index that starts with a byte-order mark is refused, as a shard's header is", async () => {
    const index = await writeSharded("bom", goodMap());
    await writeFile(index, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), await readFile(index)]));
    await expect(readSafetensorsIndex(index)).rejects.toMatchObject({ code: "InvalidJson" });
  });

  test("ShardMismatch: a tensor the index puts in another shard or does not list, or one listed but absent", async () => {
    // Each refusal says what the index claims and what the shard holds, the same from both readers.
    const moved = goodMap();
    moved[tensors[1].name] = names[1]; // shard 1 is checked first (tensors[0] is still assigned to it)
    const unlisted = goodMap();
    delete unlisted[tensors[1].name];
    const cases: Array<[string, Record<string, string>, object]> = [
      ["moved", moved, {
        field: tensors[1].name,
        message: expect.stringContaining(
          `the index assigns this tensor to ${names[1]}, but it is in ${names[0]}`,
        ),
        expected: `in ${names[1]}`,
        found: `in ${names[0]}`,
      }],
      ["unlisted", unlisted, {
        field: tensors[1].name,
        message: expect.stringContaining(`the index does not list this tensor, but it is in ${names[0]}`),
        expected: "not in any shard",
        found: `in ${names[0]}`,
      }],
      ["ghost", { ...goodMap(), "model.ghost.weight": names[0] }, {
        field: "weight_map.model.ghost.weight",
        message: expect.stringContaining(
          `the index assigns this tensor to ${names[0]}, but ${names[0]} does not hold it`,
        ),
        expected: `in ${names[0]}`,
        found: `not in ${names[0]}`,
      }],
    ];
    for (const [sub, map, want] of cases) {
      const index = await writeSharded(sub, map);
      for (const read of [readSafetensorsIndex, openSafetensorsIndex]) {
        await expect(read(index)).rejects.toMatchObject({ code: "ShardMismatch", ...want });
      }
    }
  });

  test("InvalidIndex: a shard outside the directory, or no weight_map", async () => {
    const escape = { ...goodMap(), [tensors[0].name]: "../elsewhere.safetensors" };
    await expect(readSafetensorsIndex(await writeSharded("escape", escape))).rejects.toMatchObject({
      code: "InvalidIndex",
    });
    const p = await writeSharded("nomap", goodMap());
    await writeFile(p, '{"metadata":{}}');
    await expect(readSafetensorsIndex(p)).rejects.toMatchObject({
      code: "InvalidIndex",
      field: "weight_map",
    });
    await writeFile(p, `{"weight_map":{"a":"${names[0]}","a":"${names[1]}"}}`);
    await expect(readSafetensorsIndex(p)).rejects.toMatchObject({ code: "DuplicateKey" });
  });
});

describe("minimal reader (readers/safetensors.ts)", () => {
  const run = promisify(execFile);
  const runtimes: Array<[string, string[]]> = [["deno", ["run", "-A"]], ["bun", []]];
  const tensors = initParams(PRESETS.tiny, 9);

  crossProcessTest(
    "agrees with the full reader on every tensor of every file ferry writes, under Deno and Bun",
    async () => {
      const jobs: Promise<void>[] = [];
      for (const dtype of ["F32", "F16", "BF16"] as const) {
        const path = join(dir, `minimal-${dtype}.safetensors`);
        await writeSafetensors(path, tensors, { dtype });
        const full = await readSafetensors(path);
        const lines = full.tensors.map((t) => `${t.name}\t${t.dtype}\t[${t.dims.join(",")}]`);
        for (const [cmd, pre] of runtimes) {
          const reader = [...pre, "readers/safetensors.ts", path];
          jobs.push((async () => {
            const list = await run(cmd, reader, { cwd: import.meta.dir + "/../.." });
            expect(list.stdout.trimEnd().split("\n")).toEqual(lines);
            const dump = await run(cmd, [...reader, ...full.tensors.map((t) => t.name)], {
              cwd: import.meta.dir + "/../..",
              maxBuffer: 1 << 26,
            });
            const out = dump.stdout.trimEnd().split("\n");
            expect(out.length).toBe(2 * full.tensors.length);
            full.tensors.forEach((t, i) => {
              expect(out[2 * i]).toBe(lines[i]);
              const got = Float32Array.from(out[2 * i + 1].split(" "), Number);
              expect(got.length).toBe(t.data.length);
              // Bytes, so -0 and 0 differ: the reader prints -0 as "-0".
              const same = Buffer.from(got.buffer).equals(
                Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength),
              );
              expect(`${cmd} ${dtype} ${t.name}: ${same ? "same bytes" : "different bytes"}`).toBe(
                `${cmd} ${dtype} ${t.name}: same bytes`,
              );
            });
          })());
        }
      }
      await Promise.all(jobs);
    },
    30_000,
  );

  crossProcessTest("exits 1 with one line naming a tensor that is not there", async () => {
    const path = join(dir, "minimal-missing.safetensors");
    await writeSafetensors(path, tensors.slice(0, 2));
    await expect(
      run("bun", ["readers/safetensors.ts", path, "no.such.tensor"], { cwd: import.meta.dir + "/../.." }),
    )
      .rejects.toMatchObject({ code: 1, stdout: "", stderr: `${path}: no tensor named no.such.tensor\n` });
  });

  crossProcessTest("a header that starts with a byte-order mark: refused by both readers", async () => {
    const path = join(dir, "minimal-bom.safetensors");
    await writeSafetensors(path, tensors.slice(0, 2));
    const bytes = await readFile(path);
    const n = Number(bytes.readBigUInt64LE(0));
    const length = Buffer.alloc(8);
    length.writeBigUInt64LE(BigInt(n + 3));
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    await writeFile(path, Buffer.concat([length, bom, bytes.subarray(8)]));
    await expect(readSafetensors(path)).rejects.toMatchObject({ code: "InvalidJson" });
    await expect(run("bun", ["readers/safetensors.ts", path], { cwd: import.meta.dir + "/../.." }))
      .rejects.toMatchObject({ code: 1, stdout: "" });
  });

  crossProcessTest("prints -0 as -0", async () => {
    const path = join(dir, "minimal-zero.safetensors");
    const zero = tensors.slice(0, 1).map((t) => ({ ...t, data: Float32Array.from(t.data) }));
    zero[0].data[0] = -0;
    await writeSafetensors(path, zero, { dtype: "F16" });
    const r = await run("bun", ["readers/safetensors.ts", path, zero[0].name], {
      cwd: import.meta.dir + "/../..",
    });
    expect(r.stdout.split("\n")[1].split(" ")[0]).toBe("-0");
  });
});

import { afterAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  decodeF64Token,
  encodeF64Token,
  F64LinesError,
  type F64LinesErrorCode,
  f64LinesModel,
  f64LinesToTensors,
  fnv1a64Hex,
  parseF64Lines,
  readF64Lines,
  readF64LinesArrays,
  readF64LinesModel,
  stringChecksum,
  tensorsToF64Lines,
  tokenizerRecord,
  weightsToF64Lines,
  weightsToF64LinesBytes,
  writeF64Lines,
  writeF64LinesArrays,
  writeF64LinesStreaming,
} from "../../formats/f64lines/f64lines.ts";
import { FUZZ_CONFIG } from "../../formats/fuzz-kit.ts";
import { fnv1a64 } from "../../formats/fnv1a64.ts";
import type { Tensor } from "../../model/tensor.ts";
import { paramShapes, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { createRng } from "../../model/random.ts";

const dir = mkdtempSync(join(tmpdir(), "f64lines-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const READER = new URL("../../readers/f64lines.ts", import.meta.url).pathname;
const enc = new TextEncoder();
const QUIET_NAN = [0, 0x7ff80000]; // the words every NaN reads back as

/** Appends the checksum line a writer would, so a test text fails only where it means to. */
function sealed(body: string): string {
  const canonical = body.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l !== "").join("\n");
  const hex = stringChecksum(canonical === "" ? "" : canonical + "\n").toString(16).padStart(8, "0");
  return `${body}#fnv1a32=${hex}\n`;
}

/** Asserts that parsing throws F64LinesError with this code, at this line and column when given. */
function refuses(
  input: string | Uint8Array,
  code: F64LinesErrorCode,
  line?: number,
  column?: number,
): F64LinesError {
  let caught: unknown;
  try {
    parseF64Lines(input, "t.f64lines");
  } catch (e) {
    caught = e;
  }
  expect(caught).toBeInstanceOf(F64LinesError);
  const err = caught as F64LinesError;
  expect(err.code).toBe(code);
  if (line !== undefined) expect(err.line).toBe(line);
  if (column !== undefined) expect(err.column).toBe(column);
  expect(err.message).toStartWith("t.f64lines:");
  return err;
}

const sameBits = (a: Float64Array, b: Float64Array) =>
  a.length === b.length && new Uint32Array(a.buffer, a.byteOffset, 2 * a.length)
    .every((w, i) => w === new Uint32Array(b.buffer, b.byteOffset, 2 * b.length)[i]);

// The stress set: random bit patterns over the whole float64 space, then the edges by name.
function stressSet(): Float64Array {
  const rng = createRng(20240611);
  const n = 100_000;
  const specials = [
    0,
    -0,
    Infinity,
    -Infinity,
    NaN,
    5e-324,
    -5e-324,
    Number.MAX_VALUE,
    -Number.MAX_VALUE,
    2 ** -1022,
    2 ** -1022 - 2 ** -1074,
    2 ** 1023,
    1,
    -1,
    0.1,
    0.5,
    2 ** 52,
    2 ** 53,
    2 ** 53 + 2,
    2 ** 61,
    2 ** 62,
    2 ** 62 - 1024,
    -(2 ** 62 - 512),
    2 ** 63,
    Number.MAX_SAFE_INTEGER,
    123456789012345,
    1e15,
    1e16,
  ];
  const out = new Float64Array(n + specials.length);
  const words = new Uint32Array(out.buffer);
  for (let i = 0; i < 2 * n; i++) words[i] = rng.next() * 2 ** 32;
  out.set(specials, n);
  // Signalling and negative NaN patterns too: they must all come back as the one quiet NaN.
  words[0] = 1, words[1] = 0x7ff00000, words[2] = 0, words[3] = 0xfff80000;
  return out;
}
const STRESS = stressSet();
const STRESS_TEXT = weightsToF64Lines(["stress"], [STRESS]);
writeFileSync(join(dir, "stress.f64lines"), STRESS_TEXT);

// ---------------------------------------------------------------------------------------------
// Tokens and checksum

test("the source page's token examples", () => {
  const cases: Array<[number, string]> = [
    [0.5, "1p-1"],
    [0.1, "3602879701896397p-55"],
    [Number.MAX_VALUE, "9007199254740991p971"],
    [5e-324, "1p-1074"],
    [2 ** 1023, "1p1023"],
    [2 ** 61, "2305843009213693952"],
    [2 ** 62, "1p62"],
    [-0, "-0"],
    [0, "0"],
    [-Infinity, "-inf"],
    [NaN, "nan"],
  ];
  for (const [x, token] of cases) {
    expect(encodeF64Token(x)).toBe(token);
    expect(Object.is(decodeF64Token(token), x)).toBe(true);
  }
});

test("tokens follow the IEEE-754 decomposition: odd m, exact digits below 2^62", () => {
  expect(encodeF64Token(-2.5)).toBe("-5p-1");
  expect(encodeF64Token(2 ** -1022 - 2 ** -1074)).toBe("4503599627370495p-1074"); // largest subnormal
  expect(encodeF64Token(2 ** 53)).toBe("9007199254740992");
  expect(encodeF64Token(2 ** 62 - 1024)).toBe("4611686018427386880"); // exact, where String() rounds
  expect(encodeF64Token(1.5 * 2 ** 62)).toBe("3p61");
  expect(encodeF64Token(Math.fround(0.1))).toBe("13421773p-27");
});

test("FNV-1a 64 matches Noll's published vectors, and the fold is high ^ low", () => {
  expect(fnv1a64Hex(enc.encode(""))).toBe("cbf29ce484222325");
  expect(fnv1a64Hex(enc.encode("a"))).toBe("af63dc4c8601ec8c");
  expect(fnv1a64Hex(enc.encode("foobar"))).toBe("85944171f73967e8");
  expect(stringChecksum("")).toBe(0xcbf29ce4 ^ 0x84222325);
  expect(stringChecksum("a")).toBe((0xaf63dc4c ^ 0x8601ec8c) >>> 0);
  expect(stringChecksum("foobar")).toBe((0x85944171 ^ 0xf73967e8) >>> 0);
  expect(stringChecksum("foobar!")).not.toBe(stringChecksum("foobar")); // one byte more changes it
  const hex = fnv1a64Hex(enc.encode("é")); // a string's checksum is over its UTF-8 bytes
  expect(stringChecksum("é")).toBe((parseInt(hex.slice(0, 8), 16) ^ parseInt(hex.slice(8), 16)) >>> 0);
});

test("a hasher is its owner's: two hash in turn without sharing state, by bytes or by line", () => {
  const foo = enc.encode("xfoo"), bar = enc.encode("bar!");
  const a = fnv1a64(), b = fnv1a64();
  a.update(foo, 1, 4), b.update(enc.encode("v1|w|1|1p-1"), 0, 11), a.update(bar, 0, 3);
  expect(a.hex()).toBe("85944171f73967e8"); // "foobar", whatever b did in between
  b.line(enc.encode("v1|v|0|"), 0, 7);
  expect(b.digest32()).toBe(stringChecksum("v1|w|1|1p-1v1|v|0|\n"));
  expect(fnv1a64().digest32()).toBe(stringChecksum(""));
});

// ---------------------------------------------------------------------------------------------
// Writing

test("writing is deterministic and the same from f32, f64 and plain arrays", () => {
  const f32 = new Float32Array([0.1, -3, 1e-40, NaN, -0, 3.4e38]);
  const a = weightsToF64Lines(["w"], [f32]);
  expect(weightsToF64Lines(["w"], [f32])).toBe(a);
  expect(weightsToF64Lines(["w"], [new Float64Array(f32)])).toBe(a);
  expect(weightsToF64Lines(["w"], [Array.from(f32)])).toBe(a);
  const wide = new Float64Array([9, ...f32]).subarray(1); // a view with a byte offset
  expect(weightsToF64Lines(["w"], [wide])).toBe(a);
  expect(new TextDecoder().decode(weightsToF64LinesBytes(["w"], [f32]))).toBe(a);
});

test("random f32 bit patterns write the same tokens as their widened float64", () => {
  const rng = createRng(7);
  const bits = new Uint32Array(100_000).map(() => rng.next() * 2 ** 32);
  const f32 = new Float32Array(bits.buffer);
  expect(weightsToF64Lines(["f"], [f32])).toBe(weightsToF64Lines(["f"], [new Float64Array(f32)]));
});

test("names: | \\n \\r become _, ASCII and other names round-trip verbatim", () => {
  let ascii = "";
  for (let c = 32; c < 127; c++) if (c !== 124) ascii += String.fromCharCode(c);
  const names = ["a|b\nc\rd", ascii, "\t\x00\x7f", "ümlaut·名前", ""];
  const back = parseF64Lines(weightsToF64Lines(names, names.map(() => [1])));
  expect(back.names).toEqual(["a_b_c_d", ascii, "\t\x00\x7f", "ümlaut·名前", ""]);
});

test("names and arrays of different counts write nothing and say why", async () => {
  expect(() => weightsToF64Lines(["a", "b"], [[1]])).toThrow(/2 names but 1 arrays/);
  const path = join(dir, "mismatch.f64lines");
  let code = "";
  await writeF64LinesArrays(path, ["a"], []).catch((e) => code = (e as F64LinesError).code);
  expect(code).toBe("CountMismatch");
  expect(existsSync(path)).toBe(false);
});

// ---------------------------------------------------------------------------------------------
// Round trips

test("100k random float64 bit patterns round-trip bit-exact (NaN as the quiet NaN)", () => {
  const back = parseF64Lines(STRESS_TEXT).arrays[0];
  const inW = new Uint32Array(STRESS.buffer), outW = new Uint32Array(back.buffer);
  let nans = 0;
  for (let i = 0; i < STRESS.length; i++) {
    const isNaN = STRESS[i] !== STRESS[i];
    nans += isNaN ? 1 : 0;
    const want = isNaN ? QUIET_NAN : [inW[2 * i], inW[2 * i + 1]];
    if (outW[2 * i] !== want[0] || outW[2 * i + 1] !== want[1]) {
      throw new Error(`value ${i}: ${encodeF64Token(STRESS[i])} came back as ${encodeF64Token(back[i])}`);
    }
  }
  expect(back.length).toBe(STRESS.length);
  expect(nans).toBeGreaterThan(10); // the set really holds NaNs, including the odd patterns
  expect(weightsToF64Lines(["stress"], [back])).toBe(STRESS_TEXT); // and the text is canonical
});

test("blank lines and CRLF endings are tolerated and change nothing, the checksum included", () => {
  const text = weightsToF64Lines(["a", "b"], [[0.5, -0], [3]]);
  const messy = "\n\r\n" + text.replaceAll("\n", "\r\n").replace("\r\nv1|b", "\r\n\r\n\nv1|b") + "\r\n\n";
  const a = parseF64Lines(text), b = parseF64Lines(messy);
  expect(b.names).toEqual(a.names);
  expect(b.checksum).toBe(a.checksum);
  expect(sameBits(b.arrays[0], a.arrays[0]) && sameBits(b.arrays[1], a.arrays[1])).toBe(true);
  expect(b.lines).toEqual([3, 6]);
});

test("a model round-trips through an f64lines file bit-exact, and still runs", async () => {
  const tensors = initParams(PRESETS.tiny, 3);
  const path = join(dir, "tiny.f64lines");
  await writeF64Lines(path, tensors);
  expect(readFileSync(path, "utf8")).toBe(tensorsToF64Lines(tensors));
  const back = await readF64Lines(path, paramShapes(PRESETS.tiny));
  expect(back.map((t) => t.name)).toEqual(tensors.map((t) => t.name));
  for (const [i, t] of back.entries()) {
    expect(t.dims).toEqual(tensors[i].dims);
    expect(new Uint32Array(t.data.buffer)).toEqual(new Uint32Array(tensors[i].data.buffer));
  }
  const logits = (ts: typeof tensors) => {
    const model = buildModel(PRESETS.tiny, ts);
    return forward(model, createCache(model), [256, 72, 105]);
  };
  expect(logits(back)).toEqual(logits(tensors));
});

test("every f32 bit pattern widens and narrows back exactly; NaN stays NaN", () => {
  const rng = createRng(11);
  const bits = new Uint32Array(20_000).map(() => rng.next() * 2 ** 32);
  bits.set([0x00000001, 0x80000001, 0x7f7fffff, 0xff800000, 0x80000000, 0x7fc00001], 0);
  const f32 = new Float32Array(bits.buffer);
  const [back] = f64LinesToTensors(weightsToF64Lines(["x"], [f32]));
  for (let i = 0; i < bits.length; i++) {
    const want = f32[i] !== f32[i] ? 0x7fc00000 : bits[i];
    if (new Uint32Array(back.data.buffer)[i] !== want) throw new Error(`f32 bits ${bits[i].toString(16)}`);
  }
  expect(back.dims).toEqual([bits.length]);
});

// ---------------------------------------------------------------------------------------------
// Refusals: one test per rule

test("refuses: bytes that are not UTF-8, at the byte's line and column", () => {
  const good = enc.encode(sealed("v1|ok|1|1\nv1|ab\xff|1|1\n"));
  const bytes = new Uint8Array([...good.subarray(0, 15), 0xff, ...good.subarray(17)]);
  refuses(bytes, "InvalidUtf8", 2, 6);
});

test("refuses: a last line with no newline", () => {
  refuses(sealed("v1|a|1|1\n").slice(0, -1), "Unterminated", 2);
});

test("refuses: an unknown version tag", () => {
  const err = refuses(sealed("v1|a|1|1\nv2|b|1|1\n"), "UnsupportedVersion", 2, 1);
  expect(err.message).toContain("'v2'");
});

test("refuses: a byte-order mark (it hides the version tag)", () => {
  refuses(enc.encode("\ufeff" + sealed("v1|a|1|1\n")), "UnsupportedVersion", 1, 1);
});

test("refuses: a v1 line with too few or too many fields", () => {
  refuses(sealed("v1|a|1\n"), "WrongFieldCount", 1);
  refuses(sealed("v1|a|2|1|2\n"), "WrongFieldCount", 1, 9);
});

test("refuses: a name holding \\r", () => {
  refuses(sealed("v1|a\rb|1|1\n"), "InvalidName", 1, 4);
});

test("refuses: a length that is not canonical decimal", () => {
  for (const len of ["01", "x", "-1", "", "1e1", "1234567890123456"]) {
    refuses(sealed(`v1|a|${len}|1\n`), "InvalidLength", 1, 6);
  }
});

test("refuses: a declared length that disagrees with the values", () => {
  refuses(sealed("v1|a|3|1,2\n"), "LengthMismatch", 1, 6);
  refuses(sealed("v1|a|1|1,2\n"), "LengthMismatch", 1, 6);
  refuses(sealed("v1|a|1|\n"), "LengthMismatch", 1, 6);
  refuses(sealed("v1|a|0|5\n"), "LengthMismatch", 1, 6);
  refuses(sealed("v1|a|999999999999999|1\n"), "LengthMismatch", 1, 6); // refused before allocating
});

test("refuses: malformed tokens, at the token's column", () => {
  for (
    const bad of [
      "1.5",
      "1e3",
      "+1",
      "Inf",
      "NaN",
      "-nan",
      "1p",
      "1p-",
      "p3",
      "",
      "--1",
      "1 ",
      "0x10",
      "1p+2",
    ]
  ) {
    refuses(sealed(`v1|a|2|7,${bad}\n`), "InvalidToken", 1, 10);
  }
  refuses(sealed("v1|a|2|7,\n"), "InvalidToken", 1, 10); // a trailing comma leaves an empty token
});

test("refuses: 1p1024, past the largest float64", () => {
  refuses(sealed("v1|a|1|1p1024\n"), "OutOfRange", 1, 8);
  refuses(sealed("v1|a|1|3p1023\n"), "OutOfRange", 1, 8);
  expect(decodeF64Token("1p1023")).toBe(2 ** 1023);
});

test("refuses: 1p-1075, below the smallest float64 step", () => {
  refuses(sealed("v1|a|1|1p-1075\n"), "OutOfRange", 1, 8);
  expect(decodeF64Token("3p-1074")).toBe(3 * 5e-324);
});

test("refuses: a significand of 2^53 or more", () => {
  refuses(sealed("v1|a|1|9007199254740993p1\n"), "OutOfRange", 1, 8);
  refuses(sealed("v1|a|1|99999999999999999999999p-3\n"), "OutOfRange", 1, 8);
  expect(decodeF64Token("9007199254740991p971")).toBe(Number.MAX_VALUE);
});

test("refuses: an even significand, where the canonical form needs an odd one", () => {
  refuses(sealed("v1|a|1|2p-2\n"), "OutOfRange", 1, 8);
  refuses(sealed("v1|a|1|0p3\n"), "OutOfRange", 1, 8);
});

test("refuses: digits that are not a float64 below 2^62", () => {
  refuses(sealed("v1|a|1|9007199254740993\n"), "OutOfRange", 1, 8); // between two float64s
  refuses(sealed("v1|a|1|4611686018427387904\n"), "OutOfRange", 1, 8); // 2^62 is 1p62
  refuses(sealed("v1|a|1|123456789012345678901\n"), "OutOfRange", 1, 8);
});

test("refuses: non-canonical spellings of valid values", () => {
  for (const bad of ["007", "-00", "1p07", "1p-0", "1p0", "3p1", "1p61", "-5p2"]) {
    refuses(sealed(`v1|a|1|${bad}\n`), "NonCanonical", 1, 8);
  }
});

test("refuses: a file with no checksum line", () => {
  refuses("v1|a|1|1\n", "MissingChecksum", 2);
  refuses("", "MissingChecksum", 1);
});

test("refuses: a checksum that is not 8 lowercase hex digits", () => {
  const text = sealed("v1|a|1|1\n");
  refuses(
    text.replace(/=([0-9a-f]{8})/, (_, h: string) => "=" + h.toUpperCase() + "x"),
    "MalformedChecksum",
    2,
    10,
  );
  refuses(text.replace(/=([0-9a-f]{8})/, (_, h: string) => "=" + h.slice(1)), "MalformedChecksum", 2, 10);
});

test("refuses: a wrong checksum, so any edit or truncation is caught", () => {
  const text = weightsToF64Lines(["a", "b"], [[1, 2], [3]]);
  refuses(text.replace("v1|a|2|1,2", "v1|a|2|1,3"), "ChecksumMismatch", 3, 10);
  refuses(text.replace("v1|b|1|3\n", ""), "ChecksumMismatch", 2, 10); // a whole line dropped
});

test("refuses: a line after the checksum line", () => {
  refuses(sealed("v1|a|1|1\n") + "v1|b|1|2\n", "LineAfterChecksum", 3, 1);
  refuses(sealed("v1|a|1|1\n") + "\n" + sealed(""), "LineAfterChecksum", 4, 1);
});

test("one bad line refuses the whole file: nothing partial comes back", () => {
  const lines = Array.from({ length: 50 }, (_, i) => `v1|t${i}|2|${i + 1},1p-1`);
  lines[37] = "v1|t37|2|1,1.5";
  let result: unknown = "untouched";
  try {
    result = parseF64Lines(sealed(lines.join("\n") + "\n"));
  } catch (e) {
    expect((e as F64LinesError).line).toBe(38);
  }
  expect(result).toBe("untouched");
});

test("refuses, reading tensors: values that do not narrow to f32 exactly", () => {
  for (const bad of [0.1, 5e-324, 2 ** 128, 1 + 2 ** -30]) {
    let err: F64LinesError | undefined;
    try {
      f64LinesToTensors(weightsToF64Lines(["w", "v"], [[1], [0.5, bad]]), "m.f64lines");
    } catch (e) {
      err = e as F64LinesError;
    }
    expect(err?.code).toBe("NotF32");
    expect([err?.line, err?.column]).toEqual([2, 13]); // v1|v|2|1p-1,<here>
  }
  expect(f64LinesToTensors(weightsToF64Lines(["w"], [[NaN, 1]]))[0].data[0]).toBeNaN();
});

test("refuses, reading tensors: names or sizes that differ from the config's shapes", () => {
  const tensors = initParams(PRESETS.tiny, 1);
  const text = tensorsToF64Lines(tensors.slice(1));
  expect(() => f64LinesToTensors(text, "m", paramShapes(PRESETS.tiny))).toThrow(/ShapeMismatch/);
  const swapped = tensorsToF64Lines([tensors[1], tensors[0], ...tensors.slice(2)]);
  let code = "";
  try {
    f64LinesToTensors(swapped, "m", paramShapes(PRESETS.tiny));
  } catch (e) {
    code = (e as F64LinesError).code;
  }
  expect(code).toBe("ShapeMismatch");
});

// ---------------------------------------------------------------------------------------------
// The minimal reader

const modelPath = join(dir, "model.f64lines");
await writeF64Lines(modelPath, initParams(PRESETS.tiny, 5));

// Every malformed file the refusal tests use, as files, for the minimal reader to refuse too.
const MALFORMED: Array<string | Uint8Array> = [
  sealed("v1|a|1|1\n").slice(0, -1),
  sealed("v2|b|1|1\n"),
  enc.encode("\ufeff" + sealed("v1|a|1|1\n")),
  new Uint8Array([...enc.encode("v1|a"), 0xff, ...enc.encode(sealed("|1|1\n"))]),
  sealed("v1|a|1\n"),
  sealed("v1|a|2|1|2\n"),
  sealed("v1|a\rb|1|1\n"),
  ...["01", "x", "-1", "", "1234567890123456"].map((l) => sealed(`v1|a|${l}|1\n`)),
  ...["v1|a|3|1,2", "v1|a|1|1,2", "v1|a|1|", "v1|a|0|5"].map((l) => sealed(l + "\n")),
  ...["1.5", "1e3", "+1", "Inf", "NaN", "-nan", "1p", "1p-", "p3", "", "1p+2", "7,"].map((t) =>
    sealed(`v1|a|2|7,${t}\n`)
  ),
  ...["1p1024", "1p-1075", "9007199254740993p1", "2p-2", "0p3", "9007199254740993", "4611686018427387904"]
    .map((t) => sealed(`v1|a|1|${t}\n`)),
  ...["007", "-00", "1p07", "1p-0", "1p0", "3p1", "1p61"].map((t) => sealed(`v1|a|1|${t}\n`)),
  "v1|a|1|1\n",
  sealed("v1|a|1|1\n").toUpperCase(),
  weightsToF64Lines(["a"], [[1, 2]]).replace("1,2", "1,3"),
  sealed("v1|a|1|1\n") + "v1|b|1|2\n",
  sealed("v1|a|1|1\r\n").replace("\r\n", "\n\r"),
  sealed("v1|a|1|1\n") + "\r",
];
const malformedPaths = MALFORMED.map((m, i) => {
  const path = join(dir, `bad${i}.f64lines`);
  writeFileSync(path, m);
  return path;
});

test("every malformed file is refused by the full reader too", async () => {
  for (const path of malformedPaths) {
    let refused = false;
    await readF64LinesArrays(path).catch((e) => refused = e instanceof F64LinesError);
    if (!refused) {
      throw new Error(`the full reader accepted ${path}: ${JSON.stringify(readFileSync(path, "latin1"))}`);
    }
  }
  expect(malformedPaths.length).toBeGreaterThan(40);
});

test("the minimal reader is at most 40 lines and imports only node: built-ins", () => {
  const source = readFileSync(READER, "utf8");
  expect(source.trimEnd().split("\n").length).toBeLessThanOrEqual(40);
  const imports = [...source.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
  expect(imports.length).toBeGreaterThan(0);
  expect(imports.every((s) => s.startsWith("node:"))).toBe(true);
});

/** Runs the minimal reader CLI on each file (a few at a time), under one runtime. */
function cli(
  runtime: "deno" | "bun",
  runs: string[][],
): Promise<Array<{ code: number | null; out: string; err: string }>> {
  const one = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      const [cmd, pre] = runtime === "deno" ? ["deno", ["run", "-A", READER]] : [process.execPath, [READER]];
      execFile(
        cmd,
        [...pre, ...args],
        { maxBuffer: 1 << 28, env: { ...process.env, NO_COLOR: "1" } },
        (e, out, err) => {
          resolve({ code: e ? (typeof e.code === "number" ? e.code : null) : 0, out, err });
        },
      );
    });
  const lanes = [Promise.resolve(), Promise.resolve(), Promise.resolve(), Promise.resolve()];
  return Promise.all(runs.map((args, i) => {
    const result = lanes[i % 4].then(() => one(args));
    lanes[i % 4] = result.then(() => undefined);
    return result;
  }));
}

/** The arrays the minimal reader printed for `names`, as float64 bit patterns. */
function printed(out: string, names: string[]): Float64Array[] {
  const lines = out.trimEnd().split("\n");
  expect(lines.length).toBe(2 * names.length);
  return names.map((name, i) => {
    expect(lines[2 * i].split("\t")[0]).toBe(name);
    return Float64Array.from(lines[2 * i + 1] === "" ? [] : lines[2 * i + 1].split(" "), Number);
  });
}

for (const runtime of ["deno", "bun"] as const) {
  crossProcessTest(
    `the minimal reader under ${runtime} lists and prints every array bit for bit as the full reader`,
    async () => {
      const paths = [join(dir, "stress.f64lines"), modelPath];
      const fulls = paths.map((p) => parseF64Lines(new Uint8Array(readFileSync(p))));
      const listed = await cli(runtime, paths.map((p) => [p]));
      const dumped = await cli(runtime, paths.map((p, i) => [p, ...fulls[i].names]));
      fulls.forEach((full, i) => {
        expect([listed[i].code, listed[i].err]).toEqual([0, ""]);
        expect(listed[i].out).toBe(
          full.names.map((n, k) => `${n}\tf64\t[${full.arrays[k].length}]\n`).join(""),
        );
        expect([dumped[i].code, dumped[i].err]).toEqual([0, ""]);
        const arrays = printed(dumped[i].out, full.names);
        expect(arrays.every((a, k) => sameBits(a, full.arrays[k]))).toBe(true);
      });
      expect(dumped[0].out).toContain(" -0 "); // the stress set's -0 is printed as -0
    },
    60_000,
  );

  crossProcessTest(
    `the minimal reader under ${runtime} refuses every malformed file with one line and exit 1`,
    async () => {
      const runs = await cli(runtime, malformedPaths.map((p) => [p]));
      const wrong = runs.map((r, i) => ({ ...r, path: malformedPaths[i] })).filter((r) =>
        r.code !== 1 || r.out !== "" || r.err.trimEnd().split("\n").length !== 1 ||
        !r.err.startsWith(`${r.path}: `)
      );
      expect(wrong).toEqual([]);
    },
    60_000,
  );
}

crossProcessTest(
  "mutated files: both readers accept and refuse the same ones, and accept only canonical text",
  async () => {
    const rng = createRng(99);
    const alphabet = [..."0125-p,|\n\rnaifv#e.+ ", "\xff", "é"];
    const base = weightsToF64Lines(["a", "b"], [[0.5, -0, 0.1, NaN, 5e-324, 2 ** 61, 2 ** 62, -Infinity], [
      3,
      -7,
    ]]);
    const canonical = (t: string) =>
      t.split("\n").map((l) => l.replace(/\r$/, "")).filter((l) => l).map((l) => l + "\n");
    const accepted: Array<[string, ReturnType<typeof parseF64Lines>]> = [];
    const refused: string[] = [];
    for (let k = 0; k < 5000; k++) {
      let t = base;
      for (let e = 1 + rng.int(3); e > 0; e--) {
        const at = rng.int(t.length + 1), ch = alphabet[rng.int(alphabet.length)], op = rng.int(3);
        t = t.slice(0, at) + (op === 1 ? "" : ch) + t.slice(op === 0 ? at : at + 1);
      }
      // Reseal most of them, so the token and line rules are what decides, not the checksum.
      const lines = canonical(t), last = lines.at(-1) ?? "";
      if (rng.next() < 0.8 && last.startsWith("#fnv1a32=")) {
        const sum = stringChecksum(lines.slice(0, -1).join("")).toString(16).padStart(8, "0");
        t = t.slice(0, t.lastIndexOf("#fnv1a32=")) + `#fnv1a32=${sum}\n`;
      }
      try {
        const full = parseF64Lines(enc.encode(t));
        expect(weightsToF64Lines(full.names, full.arrays)).toBe(canonical(t).join(""));
        accepted.push([t, full]);
      } catch (e) {
        expect(e).toBeInstanceOf(F64LinesError);
        refused.push(t);
      }
    }
    expect(accepted.length).toBeGreaterThan(200); // the mutations reach the token rules, not just the checksum
    // The minimal reader, as a program, on a sample of each kind: the same verdict and the same bits.
    const SAMPLE = 100; // of each verdict: as programs these cost a process each, so not all 5000
    const sample = [...accepted.slice(0, SAMPLE).map(([t]) => t), ...refused.slice(0, SAMPLE)];
    const paths = sample.map((t, i) => {
      const path = join(dir, `mutant${i}.f64lines`);
      writeFileSync(path, t);
      return path;
    });
    const runs = await cli("bun", paths.map((p, i) => [p, ...(i < SAMPLE ? accepted[i][1].names : [])]));
    runs.forEach((r, i) => {
      if (i >= SAMPLE) return expect(`${i}: exit ${r.code}`).toBe(`${i}: exit 1`);
      expect(`${i}: exit ${r.code} ${r.err}`).toBe(`${i}: exit 0 `);
      const full = accepted[i][1];
      const arrays = printed(r.out, full.names); // every array whose name is asked, once each, in file order
      arrays.forEach((a, k) => expect(sameBits(a, full.arrays[k])).toBe(true));
    });
  },
  60_000,
);

describe("the streaming model reader (readF64LinesModel)", () => {
  // A model file with tokenizer records, its values parsed 64 to 263 bytes at a time so that every token and
  // line end falls on a batch boundary somewhere: the same result as the reader of bytes in memory, and on
  // mutated files the same refusal (code, line, column and message): both are the one parser.
  const shapes = paramShapes(FUZZ_CONFIG);
  const tokenizer = {
    "tokenizer.json": JSON.stringify({ model: { type: "BPE", vocab: { a: 0, b: 1 }, merges: [] } }),
  };
  const canon = (r: { tensors: Tensor[]; tokenizer?: unknown }) =>
    JSON.stringify({ t: r.tensors.map((x) => [x.name, x.dims, Array.from(x.data)]), k: r.tokenizer });

  test("agrees with f64LinesModel on a valid file and on 400 mutated ones, refusal for refusal", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-f64stream-"));
    try {
      const path = join(dir, "m.f64lines");
      const tensors = initParams(FUZZ_CONFIG, 3);
      await writeF64LinesStreaming(path, [
        ...tensors.map((t) => ({
          name: t.name,
          length: t.data.length,
          chunks: () => [t.data.subarray(0, 3), t.data.subarray(3)],
        })),
        ...Object.entries(tokenizer).map(([f, text]) => tokenizerRecord(f, text)),
      ]);
      const good = new Uint8Array(readFileSync(path));
      const whole = f64LinesModel(good, path, shapes, 258);
      expect(whole.tokenizer).toEqual(tokenizer);
      expect(canon(await readF64LinesModel(path, shapes, 258, { chunkBytes: 64 }))).toBe(canon(whole));
      let seed = 7;
      const rand = (n: number) => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n;
      const outcome = async (read: () => unknown) => {
        try {
          return `ok ${canon(await read() as { tensors: Tensor[] })}`;
        } catch (e) {
          return `refused ${(e as F64LinesError).message}`;
        }
      };
      const differ: string[] = [];
      for (let i = 0; i < 400; i++) {
        const bytes = i % 3 === 2 ? good.subarray(0, rand(good.length)) : Uint8Array.from(good);
        if (i % 3 !== 2) bytes[rand(bytes.length)] = ",|\n\r0-p9 x".charCodeAt(rand(10));
        writeFileSync(path, bytes);
        const a = await outcome(() => f64LinesModel(bytes, path, shapes, 258));
        const b = await outcome(() => readF64LinesModel(path, shapes, 258, { chunkBytes: 64 + rand(200) }));
        if (a !== b) differ.push(`${i}: ${a} / ${b}`);
      }
      expect(differ).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  // A line of 150,000 values, some 2 MB: read 64 bytes at a time it is longer than the window (which takes in
  // at most 1 MiB for a line's head), so its values come in pieces before its end is in view.
  test("a line longer than the window: the same refusals but one, a lying length, weighed against the file", async () => {
    const values = Array.from(new Float32Array(150_000).map((_, i) => Math.sin(i)));
    values[140_000] = 0.1; // not an f32, far past the first window
    const text = weightsToF64Lines(["w"], [values]), path = join(dir, "long.f64lines");
    const shape = [{ name: "w", dims: [values.length] }];
    const said = async (read: () => unknown) => {
      try {
        return `read ${await read()}`;
      } catch (e) {
        return (e as F64LinesError).message;
      }
    };
    const column = enc.encode(text.slice(0, text.indexOf(",3602879701896397p-55") + 2)).length;
    writeFileSync(path, text);
    const streamed = await said(() => readF64LinesModel(path, shape, 258, { chunkBytes: 64 }));
    expect(streamed).toBe(
      `${path}:1:${column}: w[140000] = 3602879701896397p-55 is not an f32 value (NotF32)`,
    );
    expect(await said(() => f64LinesModel(enc.encode(text), path, shape, 258))).toBe(streamed);
    writeFileSync(path, text.replace("|150000|", "|9999999|"));
    expect(await said(() => readF64LinesModel(path, shape, 258, { chunkBytes: 64 })))
      .toBe(`${path}:1:6: declares 9999999 values, more than the file holds (LengthMismatch)`);
    expect(await said(() => f64LinesModel(new Uint8Array(readFileSync(path)), path, shape, 258)))
      .toBe(`${path}:1:6: declares 9999999 values but holds 150000 (LengthMismatch)`);
  });
});

// The minimal readers (readers/*.ts) as programs, under Deno and Bun: their shape (at most 40 lines of at most
// 110 columns, node: imports only), the usage error, and the refusal contract on malformed files: exit 1, one
// line "FILE: why" on stderr, nothing on stdout, no stack trace, and no allocation sized by a lying count (a
// run that tried one would take the time limit or die of memory instead of exiting 1); --help and a folder.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { execFile, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { readDmexp, writeDmexp } from "../../formats/dmexp/dmexp.ts";
import { dequantizeLut4, readLut4, writeLut4 } from "../../formats/lut4/lut4.ts";
import { quantizeModel } from "../../quantize/lut4-quantize.ts";
import { encodeTokenizerSection } from "../../formats/tokenizer-section.ts";
import { writeGguf } from "../../formats/gguf/gguf.ts";
import { writeSafetensors } from "../../formats/safetensors/safetensors.ts";
import { writeF64Lines } from "../../formats/f64lines/f64lines.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { testTensors } from "../helpers/gguf-fixtures.ts";
import { assemble, disassemble } from "../helpers/dmexp-fixtures.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "ferry-readers-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Runtime = "deno" | "bun";
function run(runtime: Runtime, reader: string, args: string[]) {
  const cmd = runtime === "deno"
    ? ["run", "-A", `readers/${reader}.ts`, ...args]
    : [`readers/${reader}.ts`, ...args];
  const r = spawnSync(runtime, cmd, {
    cwd: ROOT,
    encoding: "utf8",
    timeout: 20_000,
    maxBuffer: 1 << 26,
    env: { ...process.env, NO_COLOR: "1" },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The same as run(), several at a time: the malformed sets are most of this file's time. */
function runAll(runtime: Runtime, reader: string, paths: string[], width = 4) {
  const cmd = (
    path: string,
  ) => (runtime === "deno" ? ["run", "-A", `readers/${reader}.ts`, path] : [`readers/${reader}.ts`, path]);
  const one = (path: string) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve) => {
      execFile(
        runtime,
        cmd(path),
        { cwd: ROOT, timeout: 20_000, env: { ...process.env, NO_COLOR: "1" } },
        (e, out, err) => {
          resolve({ code: e ? (typeof e.code === "number" ? e.code : null) : 0, out, err });
        },
      );
    });
  const results: Promise<{ code: number | null; out: string; err: string }>[] = [];
  const lanes = Array.from({ length: width }, () => Promise.resolve());
  paths.forEach((path, i) => {
    const lane = lanes[i % width].then(() => one(path));
    lanes[i % width] = lane.then(() => undefined);
    results.push(lane);
  });
  return Promise.all(results);
}

const u64 = (x: bigint) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, x, true);
  return b;
};
const u32 = (x: number) => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, x >>> 0, true);
  return b;
};
/** A copy of `bytes` with `patch` written at `at`. */
const put = (bytes: Uint8Array, at: number, patch: ArrayLike<number>) => {
  const out = bytes.slice();
  out.set(patch, at);
  return out;
};
const flip = (bytes: Uint8Array, at: number) => put(bytes, at, [bytes[at] ^ 0xff]);
const enc = new TextEncoder();
const BIG = [2n ** 31n, 2n ** 64n - 1n];

/** Writes each malformed variant to its own file; returns [label, path] pairs. */
function files(reader: string, cases: Record<string, Uint8Array | string>): Array<[string, string]> {
  return Object.entries(cases).map(([label, bytes], i) => {
    const path = join(dir, `${reader}-${i}.bad`);
    writeFileSync(path, bytes);
    return [label, path];
  });
}

const model = initParams(PRESETS.tiny, 4);

async function dmexpCases() {
  const path = join(dir, "good.dmexp");
  await writeDmexp(path, model, PRESETS.tiny, { dtype: "f16", source: "init@step0", step: 0 });
  const { file, header, payload } = await disassemble(path);
  const start = file.length - payload.length;
  const cases: Record<string, Uint8Array | string> = {
    "empty": new Uint8Array(0),
    "truncated in the prefix": file.subarray(0, 10),
    "truncated in the header": file.subarray(0, 24 + (start - 24) / 2),
    "truncated in the payload": file.subarray(0, start + payload.length / 2),
    "one byte short": file.subarray(0, file.length - 1),
    "a flipped magic byte": flip(file, 2),
    "version 2 without its tokenizer section": put(file, 7, Uint8Array.of(2)),
    "version 3": put(file, 7, Uint8Array.of(3)),
    "header length 2^32-1": put(file, 8, u32(0xffffffff)),
    "a flipped payload byte": flip(file, file.length - 5),
    "invalid UTF-8 in the header": put(file, 40, Uint8Array.of(0xff)),
    "no dtype line": assemble(header.replace('dtype = "f16"', 'dtype = "f64"'), payload),
    "bad TOML in dims": assemble(header.replace(/dims = \[ (\d+)/, "dims = [ x$1"), payload),
  };
  for (const big of BIG) {
    cases[`payload length ${big}`] = put(file, 12, u64(big));
    cases[`a dim of ${big}`] = assemble(header.replace(/dims = \[ \d+/, `dims = [ ${big}`), payload);
  }
  return files("dmexp", cases);
}

async function safetensorsCases() {
  const path = join(dir, "good.safetensors");
  await writeSafetensors(path, model, { dtype: "BF16" });
  const file = new Uint8Array(readFileSync(path));
  const n = Number(new DataView(file.buffer).getBigUint64(0, true));
  const json = new TextDecoder().decode(file.subarray(8, 8 + n));
  const data = file.subarray(8 + n);
  const withJson = (text: string) => {
    const h = enc.encode(text);
    return new Uint8Array([...u64(BigInt(h.length)), ...h, ...data]);
  };
  const cases: Record<string, Uint8Array | string> = {
    "shorter than 8 bytes": file.subarray(0, 5),
    "truncated in the header": file.subarray(0, 8 + n / 2),
    "truncated in the data": file.subarray(0, file.length - 7),
    "header length past the end": put(file, 0, u64(BigInt(file.length))),
    "invalid UTF-8 in the header": put(file, 12, Uint8Array.of(0xc3, 0x28)),
    "bad JSON": withJson(json.replace(":", ";")),
    "a JSON array": withJson("[]"),
    "a JSON number": withJson("5"),
    "an entry that is null": withJson(
      json.replace(/"model\.norm\.weight":\{[^}]*\}/, '"model.norm.weight":null'),
    ),
    "an unknown dtype": withJson(json.replaceAll('"BF16"', '"BF17"')),
    "offsets past the data": withJson(
      json.replace(/"data_offsets":\[(\d+),(\d+)\]/, '"data_offsets":[$1,999999999]'),
    ),
    "negative offsets": withJson(json.replace(/"data_offsets":\[(\d+),/, '"data_offsets":[-2,')),
  };
  for (const big of BIG) {
    cases[`header length ${big}`] = put(file, 0, u64(big));
    cases[`a dim of ${big}`] = withJson(json.replace(/"shape":\[(\d+)/, `"shape":[${big}`));
  }
  return files("safetensors", cases);
}

async function ggufCases() {
  const path = join(dir, "good.gguf");
  const { config, tensors } = testTensors(3, false);
  await writeGguf(path, tensors, config, { type: "q4_0" });
  const file = new Uint8Array(readFileSync(path));
  const name = enc.encode("token_embd.weight"); // the first tensor info: its name, n_dims, ne, type, offset
  const info = Buffer.from(file).indexOf(Buffer.from([...u64(BigInt(name.length)), ...name])) + 8 +
    name.length;
  const firstKey = 24; // the first metadata key's u64 length
  const cases: Record<string, Uint8Array | string> = {
    "empty": new Uint8Array(0),
    "truncated in the header": file.subarray(0, 12),
    "truncated in the metadata": file.subarray(0, 200),
    "truncated in the tensor infos": file.subarray(0, info + 6),
    "truncated in the data": file.subarray(0, file.length - 100),
    "a flipped magic byte": flip(file, 1),
    "version 2": put(file, 4, u32(2)),
    "n_dims 2^31": put(file, info, u32(2 ** 31)),
    "an unknown tensor type": put(file, info + 4 + 16, u32(99)),
    "invalid UTF-8 in a tensor name": put(file, info - 3, Uint8Array.of(0xff)),
    "an unknown metadata value type": put(file, firstKey + 8 + 20, u32(77)),
  };
  for (const big of BIG) {
    cases[`tensor count ${big}`] = put(file, 8, u64(big));
    cases[`metadata key count ${big}`] = put(file, 16, u64(big));
    cases[`a key length of ${big}`] = put(file, firstKey, u64(big));
    cases[`a dim of ${big}`] = put(file, info + 4, u64(big));
    cases[`a data offset of ${big}`] = put(file, info + 4 + 16 + 4, u64(big));
  }
  return files("gguf", cases);
}

async function f64linesCases() {
  const path = join(dir, "good.f64lines");
  await writeF64Lines(path, model.slice(0, 3));
  const text = readFileSync(path, "utf8");
  const bytes = enc.encode(text);
  const body = text.slice(0, text.lastIndexOf("#fnv1a32="));
  const sealed = (b: string) => { // a body with its correct checksum, so the line rules decide
    let h = 0xcbf29ce484222325n;
    for (const byte of enc.encode(b)) h = BigInt.asUintN(64, (h ^ BigInt(byte)) * 0x100000001b3n);
    return `${b}#fnv1a32=${((h >> 32n) ^ (h & 0xffffffffn)).toString(16).padStart(8, "0")}\n`;
  };
  const cases: Record<string, Uint8Array | string> = {
    "empty": "",
    "truncated, no checksum line": bytes.subarray(0, bytes.length / 2),
    "one byte short": bytes.subarray(0, bytes.length - 1),
    "a changed digit": text.replace(/\|(\d)/, (_, d) => `|${(Number(d) + 1) % 10}`),
    "invalid UTF-8": put(bytes, 5, Uint8Array.of(0xff)),
    "a length of 2^31": sealed(body.replace(/\|(\d+)\|/, `|${2 ** 31}|`)),
    "an over-long length field": sealed(body.replace(/\|(\d+)\|/, "|1234567890123456|")),
    "a non-canonical token": sealed(body.replace(/\|(-?\d+p-?\d+)/, "|1p0")),
    "a version 2 line": sealed(body.replace("v1|", "v2|")),
    "a huge exponent": sealed(body.replace(/\|(-?\d+p-?\d+)/, "|1p99999")),
  };
  return files("f64lines", cases);
}

const CASES: Record<string, () => Promise<Array<[string, string]>>> = {
  dmexp: dmexpCases,
  safetensors: safetensorsCases,
  gguf: ggufCases,
  f64lines: f64linesCases,
};

test("every minimal reader is at most 40 lines of at most 110 columns and imports only node: built-ins", () => {
  const readers = readdirSync(join(ROOT, "readers")).filter((f) => f.endsWith(".ts"));
  expect(readers).toEqual(expect.arrayContaining(["dmexp.ts", "f64lines.ts", "gguf.ts", "safetensors.ts"]));
  for (const name of readers) {
    const src = readFileSync(join(ROOT, "readers", name), "utf8");
    const lines = src.trimEnd().split("\n");
    expect(`${name}: ${lines.length} lines`).toBe(`${name}: ${Math.min(lines.length, 40)} lines`);
    const wide = lines.filter((l) => [...l].length > 110);
    expect(`${name}: ${wide.length} lines over 110 columns`).toBe(`${name}: 0 lines over 110 columns`);
    const imports = [...src.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.filter((m) => !m.startsWith("node:"))).toEqual([]);
  }
});

for (const [reader, make] of Object.entries(CASES)) {
  describe(`readers/${reader}.ts`, () => {
    let bad: Array<[string, string]> = []; // [what is wrong, path], and good.<reader> beside them
    beforeAll(async () => {
      bad = await make();
    });
    for (const runtime of ["deno", "bun"] as const) {
      crossProcessTest(`${runtime}: no FILE is a usage error, exit 2`, () => {
        const r = run(runtime, reader, []);
        expect(r.code).toBe(2);
        expect(r.err).toBe(`usage: readers/${reader}.ts FILE [TENSOR...]\n`);
        expect(r.out).toBe("");
      });

      crossProcessTest(
        `${runtime}: every malformed file is refused: exit 1, one line "FILE: why", no stack trace`,
        async () => {
          expect(bad.length).toBeGreaterThanOrEqual(10);
          const failures: string[] = [];
          const runs = await runAll(runtime, reader, bad.map(([, path]) => path));
          for (const [i, [label, path]] of bad.entries()) {
            const r = runs[i];
            const lines = r.err.split("\n").filter((l) => l !== "");
            const ok = r.code === 1 && r.out === "" && lines.length === 1 &&
              lines[0].startsWith(`${path}: `) &&
              lines[0].length > path.length + 2 && !/\n\s+at |^error:|Uncaught/m.test(r.err);
            if (!ok) {
              failures.push(
                `${label}: exit ${r.code}, stdout ${JSON.stringify(r.out.slice(0, 80))}, stderr ${
                  JSON.stringify(r.err.slice(0, 300))
                }`,
              );
            }
          }
          expect(failures).toEqual([]);
        },
        120_000,
      );

      crossProcessTest(
        `${runtime}: a file that does not exist is one line too; a missing tensor is named, with nothing printed`,
        () => {
          const gone = run(runtime, reader, [join(dir, "no-such-file")]);
          expect(gone.code).toBe(1);
          expect(gone.err.trimEnd().split("\n")).toHaveLength(1);
          const good = readdirSync(dir).find((f) => f === `good.${reader}`);
          const real = reader === "gguf" ? "token_embd.weight" : "model.embed_tokens.weight";
          const listing = run(runtime, reader, [join(dir, good!)]).out.trimEnd().split("\n");
          const [first, second] = listing.map((l) => l.split("\t")[0]);
          const both = run(runtime, reader, [join(dir, good!), second, first]); // printed in file order
          expect([both.code, both.out.split("\n")[0], both.out.split("\n")[2]]).toEqual([
            0,
            listing[0],
            listing[1],
          ]);
          const r = run(runtime, reader, [join(dir, good!), real, "no.such.tensor"]); // nothing printed before
          expect(r.code).toBe(1);
          expect(r.err).toBe(`${join(dir, good!)}: no tensor named no.such.tensor\n`);
          expect(r.out).toBe("");
        },
      );
    }
  });
}

describe("every minimal reader: --help and folders", () => {
  const READERS = ["dmexp", "f64lines", "gguf", "lut4", "safetensors"];
  for (const runtime of ["deno", "bun"] as const) {
    crossProcessTest(`${runtime}: --help and -h print the usage line and exit 2, as no FILE does`, () => {
      for (const reader of READERS) {
        for (const flag of ["--help", "-h"]) {
          const r = run(runtime, reader, [flag]);
          expect(`${reader} ${flag}: exit ${r.code}: ${r.err}`).toBe(
            `${reader} ${flag}: exit 2: usage: readers/${reader}.ts FILE [TENSOR...]\n`,
          );
          expect(r.out).toBe("");
        }
      }
    });

    crossProcessTest(
      `${runtime}: a folder is refused in one line (safetensors reads a Hugging Face folder's model.safetensors)`,
      async () => {
        const folder = join(dir, "a-folder");
        mkdirSync(folder, { recursive: true });
        for (const reader of READERS.filter((r) => r !== "safetensors")) {
          const r = run(runtime, reader, [folder]);
          expect(`${reader}: exit ${r.code}: ${r.err}`).toBe(
            `${reader}: exit 1: ${folder}: is a folder, expected a file\n`,
          );
          expect(r.out).toBe("");
        }
        const hf = join(dir, "m.hf");
        mkdirSync(hf, { recursive: true });
        await writeSafetensors(join(hf, "model.safetensors"), model, { dtype: "BF16" });
        const inFolder = run(runtime, "safetensors", [hf]);
        const file = run(runtime, "safetensors", [join(hf, "model.safetensors")]);
        expect(inFolder.code).toBe(0);
        expect(inFolder.out.split("\n").length).toBeGreaterThan(model.length);
        expect(inFolder.out).toBe(file.out);
        const empty = run(runtime, "safetensors", [folder]); // a folder without model.safetensors
        expect(empty.code).toBe(1);
        expect(empty.err.startsWith(`${folder}: `)).toBe(true);
        expect(empty.err.trimEnd().split("\n")).toHaveLength(1);
      },
    );
  }
});

describe("a file with a tokenizer section: the minimal readers skip it, size it, and agree on every tensor", () => {
  const tokenizer = {
    "tokenizer.json": JSON.stringify({
      version: "1.0",
      added_tokens: [{ id: 3, content: "<|end|>", special: true }],
      model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: [["a", "b"]] },
    }),
    "chat_template.jinja": "{% for m in messages %}{{ m.content }}{% endfor %}",
  };
  const cfg = {
    ...PRESETS.tiny,
    hidden_size: 32,
    intermediate_size: 64,
    head_dim: 16,
    num_attention_heads: 2,
  };
  const weights = initParams(cfg, 9);
  const values = (out: string) => out.trimEnd().split("\n").filter((_, i) => i % 2 === 1);

  for (const runtime of ["deno", "bun"] as const) {
    crossProcessTest(
      `${runtime}: dmexp version 2 lists every tensor as readDmexp reads it, then the section's size`,
      async () => {
        const path = join(dir, "tokenizer.dmexp");
        await writeDmexp(path, weights, cfg, { dtype: "f16", source: "init@step0", step: 0, tokenizer });
        const full = await readDmexp(path);
        const bytes = readFileSync(path), dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
        const section = bytes.length - 24 - dv.getUint32(8, true) - Number(dv.getBigUint64(12, true));
        expect(section).toBe(encodeTokenizerSection(tokenizer).length);
        const listing = run(runtime, "dmexp", [path]);
        expect(listing.code).toBe(0);
        const lines = listing.out.trimEnd().split("\n");
        expect(lines.slice(0, -1).map((l) => l.split("\t")[0])).toEqual(full.tensors.map((t) => t.name));
        expect(lines.at(-1)).toBe(`${path}: ${section} bytes of tokenizer`);
        const all = run(runtime, "dmexp", [path, ...full.tensors.map((t) => t.name)]);
        expect(all.code).toBe(0);
        expect(values(all.out).map((l) => l.split(" ").map(Number))).toEqual(
          full.tensors.map((t) => Array.from(t.data)),
        );
      },
    );

    crossProcessTest(
      `${runtime}: lut4 schema /2 gives what /1 of the same codes gives, then the section's size`,
      async () => {
        const { weights: w } = quantizeModel(cfg, weights, { head: "tied" });
        const meta = { source: "init@step0", ropeTheta: cfg.rope_theta, rmsNormEps: cfg.rms_norm_eps };
        const [v1, v2] = [join(dir, "plain.lut4"), join(dir, "tokenizer.lut4")];
        await writeLut4(v1, w, meta);
        await writeLut4(v2, w, { ...meta, tokenizer });
        const section = (await readLut4(v2)).header.tokenizer!.bytes;
        expect(readFileSync(v2).length - readFileSync(v1).length).toBe(section);
        const [a, b] = [run(runtime, "lut4", [v1]), run(runtime, "lut4", [v2])];
        expect([a.code, b.code]).toEqual([0, 0]);
        expect(b.out.replaceAll(v2, v1)).toBe(`${a.out}${v1}: ${section} bytes of tokenizer\n`);
        const names = a.out.trimEnd().split("\n").map((l) => l.split("\t")[0]);
        const [x, y] = [run(runtime, "lut4", [v1, ...names]), run(runtime, "lut4", [v2, ...names])];
        expect(y.code).toBe(0);
        expect(y.out).toBe(x.out);
        const embed = dequantizeLut4(await readLut4(v2)).find((t) => t.name === "model.embed_tokens.weight")!;
        expect(values(y.out)[0].split(" ").map(Number)).toEqual(Array.from(embed.data));
      },
    );
  }
});

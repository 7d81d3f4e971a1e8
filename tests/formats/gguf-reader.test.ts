// readers/gguf.ts, the 40-line standalone reader, run as a program under Deno and Bun, must agree
// with the full reader (formats/gguf/gguf.ts) on every tensor of every file type ferry writes.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readFile, rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { type GgufDtype, parseGguf, tensorToF32 } from "../../formats/gguf/gguf.ts";
import {
  ALL_DTYPES,
  MINIMAL_VALUE_DTYPES,
  tempDir,
  testTensors,
  writeAllTypes,
} from "../helpers/gguf-fixtures.ts";

const READER = fileURLToPath(new URL("../../readers/gguf.ts", import.meta.url));
const RUNTIMES: Record<string, string[]> = {
  deno: ["deno", "run", "-A", READER],
  bun: ["bun", READER],
};

let dir = "";
let files = {} as Record<GgufDtype, string>;
beforeAll(async () => {
  dir = await tempDir();
  // Untied, so output.weight is in the files too; intermediate 256, so ffn_down rows are whole
  // K-quant super-blocks and the q4_k, q6_k and q4_k_m files hold Q4_K and Q6_K tensors.
  const { config, tensors } = testTensors(21, false, { intermediate_size: 256 });
  files = await writeAllTypes(dir, tensors, config, "min");
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function runReader(runtime: string, args: string[]): { code: number; out: string; err: string } {
  const [cmd, ...pre] = RUNTIMES[runtime];
  const r = spawnSync(cmd, [...pre, ...args], {
    encoding: "utf8",
    maxBuffer: 1 << 28,
    env: { ...process.env, NO_COLOR: "1" },
  });
  if (r.error) throw r.error;
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

test("the minimal reader is at most 40 lines and imports only node: built-ins", async () => {
  const src = await readFile(READER, "utf8");
  expect(src.trimEnd().split("\n").length).toBeLessThanOrEqual(40);
  const imports = [...src.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
  expect(imports.length).toBeGreaterThan(0);
  expect(imports.every((s) => s.startsWith("node:"))).toBe(true);
});

for (const runtime of Object.keys(RUNTIMES)) {
  describe(`readers/gguf.ts under ${runtime}`, () => {
    crossProcessTest("lists every tensor of every file with the full reader's type and dims", async () => {
      for (const dtype of ALL_DTYPES) {
        const full = parseGguf(new Uint8Array(await readFile(files[dtype])), files[dtype]);
        const r = runReader(runtime, [files[dtype]]);
        expect(r.err).toBe("");
        expect(r.code).toBe(0);
        const want = full.tensors.map((t) => `${t.name}\t${t.type}\t[${[...t.ne].reverse().join(",")}]`);
        expect(r.out.trimEnd().split("\n")).toEqual(want);
      }
    }, 30_000);

    crossProcessTest(
      "prints every tensor of every file with exactly the full reader's f32 values",
      async () => {
        for (const dtype of MINIMAL_VALUE_DTYPES) {
          const full = parseGguf(new Uint8Array(await readFile(files[dtype])), files[dtype]);
          const r = runReader(runtime, [files[dtype], ...full.tensors.map((t) => t.name)]);
          expect(r.code).toBe(0);
          const lines = r.out.trimEnd().split("\n");
          expect(lines.length).toBe(2 * full.tensors.length);
          full.tensors.forEach((t, i) => {
            expect(lines[2 * i]).toBe(`${t.name}\t${t.type}\t[${[...t.ne].reverse().join(",")}]`);
            const got = new Float32Array(lines[2 * i + 1].split(" ").map(Number));
            const want = tensorToF32(t);
            expect(got.length).toBe(want.length);
            // Bit patterns, so -0 and 0 count as different and nothing is compared approximately.
            expect(Buffer.from(got.buffer).equals(Buffer.from(want.buffer, want.byteOffset, want.byteLength)))
              .toBe(true);
          });
        }
      },
      60_000,
    );

    crossProcessTest(
      "the listing names the K-quant and IQ4_NL types; their values are refused in one line",
      () => {
        const types = (dtype: GgufDtype) =>
          new Set(runReader(runtime, [files[dtype]]).out.trimEnd().split("\n").map((l) => l.split("\t")[1]));
        expect([...types("q4_k_m")].sort()).toEqual(["F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"]);
        expect([...types("iq4_nl")].sort()).toEqual(["F32", "IQ4_NL"]);
        const r = runReader(runtime, [files.q4_k_m, "blk.0.ffn_down.weight"]);
        expect(r.code).toBe(1);
        expect(r.out).toBe("");
        expect(r.err).toBe(`${files.q4_k_m}: Q4_K is read by formats/gguf/\n`);
      },
      20_000,
    );

    crossProcessTest(
      "a tensor name that is not in the file is an error naming it, and nothing else is printed",
      () => {
        const r = runReader(runtime, [files.q4_0, "output.weight", "blk.9.attn_q.weight"]);
        expect(r.code).toBe(1);
        expect(r.out).toBe("");
        expect(r.err).toBe(`${files.q4_0}: no tensor named blk.9.attn_q.weight\n`);
      },
      10_000,
    );

    crossProcessTest("a file that is not GGUF is refused in one line", () => {
      const r = runReader(runtime, [READER]);
      expect(r.code).toBe(1);
      expect(r.err).toBe(`${READER}: not a GGUF version 3 file\n`);
    }, 10_000);
  });
}

// Provenance on read (ReadResult.origin): every format's read gives back what its file records of where
// the weights came from, so a re-export keeps the model's name, step and source. The lossless formats
// keep all three; lut4 keeps its `source`. A recorded origin of the wrong type is refused by field.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FORMATS } from "../../formats/mod.ts";
import type { ExportOrigin } from "../../formats/format.ts";
import { GgufError, readGguf, writeGguf } from "../../formats/gguf/gguf.ts";
import {
  exportHuggingFace,
  HuggingFaceError,
  importHuggingFace,
} from "../../formats/huggingface/huggingface.ts";
import { f64linesConfigPath, f64linesFormat } from "../../formats/f64lines/f64lines.ts";
import { sealDigest } from "../../formats/digest.ts";
import { SAFETENSORS_DIGEST_NEEDLE } from "../../formats/safetensors/safetensors.ts";
import { readDmexp, writeDmexp } from "../../formats/dmexp/dmexp.ts";
import { ConfigError } from "../../model/config.ts";
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import { FormatError } from "../../model/error.ts";
import { initParams } from "../../model/init.ts";
import { tensorSource } from "../../model/tensor.ts";

// The smallest shape every format stores, lut4 included (its widths are multiples of 32).
const CFG = FUZZ_LUT4_CONFIG;
const tensors = initParams(CFG, 3);
const dir = mkdtempSync(join(tmpdir(), "ferry-origin-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const WRITTEN = { name: 'tiny "q" ü', step: 1234, source: "runs/ü b.ckpt@step1234" }; // not ASCII, on purpose
// What each format records; a format not listed records all three (a new lossy one says here what it keeps).
const KEEPS: Record<string, (keyof ExportOrigin)[]> = { lut4: ["source"] };

for (const format of FORMATS) {
  const keeps = KEEPS[format.name] ?? ["name", "step", "source"];
  test(`${format.name}: read gives back the ${keeps.join(", ")} its writer was given`, async () => {
    const path = join(dir, `m${format.extension}`);
    await format.write(path, { config: CFG, tensors: tensors.map(tensorSource), ...WRITTEN }, {
      dtype: format.defaultDtype,
    });
    const { origin } = await format.read(path);
    expect(origin).toEqual(Object.fromEntries(keeps.map((k) => [k, WRITTEN[k]])));
  });
}

test("a file written without an origin reads with none, or only what the format always records", async () => {
  const d = join(dir, "plain.dmexp"), g = join(dir, "plain.gguf"), h = join(dir, "plain.hf");
  await writeDmexp(d, tensors, CFG, { dtype: "f32", source: "s", step: 0 });
  expect((await readDmexp(d)).header.extra.name).toBeUndefined();
  await writeGguf(g, tensors, CFG, { type: "f32" });
  expect((await readGguf(g)).origin).toEqual({ name: "ferry" }); // general.name's default
  await exportHuggingFace(h, tensors, CFG);
  expect((await importHuggingFace(h)).origin).toEqual({});
});

test("an origin of the wrong type is refused, naming the field, in GGUF, Hugging Face and f64lines", async () => {
  const refusal = async (p: Promise<unknown>) => {
    try {
      await p;
    } catch (e) {
      if (e instanceof FormatError) return e;
      throw e;
    }
    throw new Error("accepted");
  };
  // GGUF: a ferry.step of another type, forged by rewriting its type byte (u64 → i64), no digest written.
  const g = join(dir, "bad.gguf");
  await writeGguf(g, tensors, CFG, { type: "f32", step: 5, digest: false });
  const bytes = new Uint8Array(readFileSync(g));
  const key = new TextEncoder().encode("ferry.step");
  const at = bytes.findIndex((_, i) => key.every((b, j) => bytes[i + j] === b)) + key.length;
  new DataView(bytes.buffer).setUint32(at, 11, true); // GGUF type 11: i64
  writeFileSync(g, bytes);
  const ge = await refusal(readGguf(g));
  expect(ge).toBeInstanceOf(GgufError);
  expect([ge.field, ge.expected, ge.found]).toEqual(["ferry.step", "u64 or u32", "i64"]);

  const h = join(dir, "bad.hf");
  await exportHuggingFace(h, tensors, CFG, { origin: { step: 70 } });
  const st = join(h, "model.safetensors");
  const edited = Buffer.from(
    readFileSync(st, "latin1").replace('"ferry.step":"70"', '"ferry.step":"07"'),
    "latin1",
  );
  writeFileSync(st, sealDigest(new Uint8Array(edited), SAFETENSORS_DIGEST_NEEDLE)); // forged: digest recomputed
  const he = await refusal(importHuggingFace(h));
  expect(he).toBeInstanceOf(HuggingFaceError);
  expect([he.field, he.expected, he.found]).toEqual([
    "__metadata__.ferry.step",
    "a non-negative integer in digits",
    '"07"',
  ]);

  const f = join(dir, "bad.f64lines");
  await f64linesFormat.write(f, { config: CFG, tensors: tensors.map(tensorSource), ...WRITTEN }, {
    dtype: "f64",
  });
  const config = f64linesConfigPath(f);
  const good = readFileSync(config, "utf8");
  expect(good).toContain('\n[origin]\nname = "tiny \\"q\\" ü"\nstep = 1234\n');
  for (
    const [edit, field] of [["step = 1234", "step = -1"], ["step = 1234", 'step = "1234"'], [
      "step = 1234",
      'step = 1234\ncolour = "red"',
    ]] as const
  ) {
    writeFileSync(config, good.replace(edit, field));
    const e = await refusal(f64linesFormat.read(f));
    expect(e).toBeInstanceOf(ConfigError);
    expect(e.field).toBe(field.includes("colour") ? "origin.colour" : "origin.step");
  }
});

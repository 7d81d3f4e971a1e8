// The main job: with no --format, scripts/export.ts writes every format, and each reads back as the
// checkpoint's model.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PRESETS } from "../model/config.ts";
import { initParams } from "../model/init.ts";
import { writeCheckpoint } from "../formats/checkpoint.ts";
import { readDmexp } from "../formats/dmexp.ts";
import { importHuggingFace } from "../formats/huggingface.ts";
import { readGguf } from "../formats/gguf.ts";
import { readExport } from "../formats/mod.ts";
import { expectSameBits, expectSameTensors } from "./helpers/bits.ts";

setDefaultTimeout(60_000); // per file: Bun 1.4.5 applies a preload's default to the first test file only

const dir = mkdtempSync(join(tmpdir(), "ferry-export-all-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("--format all (the default) writes every format, and each returns the checkpoint's tensors", async () => {
  const cfg = { ...PRESETS.tiny, hidden_size: 32, intermediate_size: 64, head_dim: 8 };
  const model = initParams(cfg, 3);
  await writeCheckpoint(join(dir, "m.ckpt"), cfg, { step: 7, model });
  const r = spawnSync("deno", [
    "run",
    "-A",
    "scripts/export.ts",
    "--input",
    join(dir, "m.ckpt"),
    "--output",
    dir,
    "--dtype",
    "f32",
    "--json",
  ], { encoding: "utf8" });
  expect(r.status).toBe(0);
  const summaries = JSON.parse(r.stdout) as Array<{ format: string; file: string; step: number }>;
  expect(summaries.map((s) => s.format)).toEqual(["dmexp", "hf", "gguf", "f64lines", "lut4"]); // lut4 at its own q4
  const back = {
    dmexp: (await readDmexp(join(dir, "m.f32.dmexp"))).tensors,
    hf: (await importHuggingFace(join(dir, "m.f32.hf"))).tensors,
    gguf: (await readGguf(join(dir, "m.f32.gguf"))).tensors,
    f64lines: (await readExport(join(dir, "m.f64.f64lines"))).tensors,
  };
  for (const [format, tensors] of Object.entries(back)) {
    // Same names (none missing, none extra), same dims, same length, same bits: -0 is not +0.
    const byName = new Map(tensors.map((t) => [t.name, t]));
    expect(tensors.length).toBe(model.length);
    expectSameTensors(
      model.map((t) =>
        byName.get(t.name) ?? { name: `missing ${t.name}`, dims: [], data: new Float32Array(0) }
      ),
      model,
      `${format} `,
    );
  }
  // generate reads every export and gives the same greedy text from each lossless one.
  const texts = ["m.f32.dmexp", "m.f32.hf", "m.f32.gguf", "m.f64.f64lines"].map((f) => {
    const g = spawnSync("bun", [
      "scripts/generate.ts",
      join(dir, f),
      "--prompt",
      "The jury",
      "--max-tokens",
      "24",
    ], { encoding: "utf8" });
    expect(g.status).toBe(0);
    return g.stdout;
  });
  expect(texts[0].length).toBeGreaterThan(0);
  expect(new Set(texts).size).toBe(1);
  // A Hugging Face folder is export input too: HF f32 → GGUF f32 keeps every bit.
  const fromHf = spawnSync("bun", [
    "scripts/export.ts",
    "--input",
    join(dir, "m.f32.hf"),
    "--format",
    "gguf",
    "--dtype",
    "f32",
    "--output",
    join(dir, "from-hf.gguf"),
    "--json",
  ], { encoding: "utf8" });
  expect(fromHf.status).toBe(0);
  expect(JSON.parse(fromHf.stdout).config_from).toBe(join(dir, "m.f32.hf", "config.json"));
  const again = new Map((await readGguf(join(dir, "from-hf.gguf"))).tensors.map((t) => [t.name, t]));
  expect(again.size).toBe(model.length);
  for (const t of model) {
    expectSameBits(again.get(t.name)?.data ?? new Float32Array(0), t.data, `from-hf ${t.name}`);
  }
  const usage = spawnSync("deno", [
    "run",
    "-A",
    "scripts/export.ts",
    "--input",
    join(dir, "m.ckpt"),
    "--output",
    join(dir, "x.gguf"),
  ], { encoding: "utf8" });
  expect(usage.status).toBe(2);
});

test("a model lut4 cannot store (widths not multiples of 32): skipped under --format all, refused by name, nothing written", async () => {
  const cfg = PRESETS.tiny; // hidden_size 16
  const out = join(dir, "narrow");
  await writeCheckpoint(join(dir, "narrow.ckpt"), cfg, { step: 1, model: initParams(cfg, 5) });
  const all = spawnSync("bun", [
    "scripts/export.ts",
    "--input",
    join(dir, "narrow.ckpt"),
    "--output",
    out,
    "--json",
  ], { encoding: "utf8" });
  expect(all.status).toBe(0);
  const rows = JSON.parse(all.stdout) as Array<{ format: string; file?: string; skipped?: string }>;
  expect(rows.map((r) => r.format)).toEqual(["dmexp", "hf", "gguf", "f64lines", "lut4"]);
  expect(rows[4].skipped).toContain("hidden_size is 16, expected a multiple of 32");
  expect(all.stderr).toContain("lut4: skipped:");
  expect(readdirSync(out).some((f) => f.includes("lut4"))).toBe(false);
  const one = spawnSync("bun", [
    "scripts/export.ts",
    "--input",
    join(dir, "narrow.ckpt"),
    "--format",
    "lut4",
    "--output",
    join(dir, "narrow.lut4"),
  ], { encoding: "utf8" });
  expect(one.status).toBe(1);
  expect(one.stderr).toContain("lut4 cannot store this model: hidden_size is 16");
  expect(existsSync(join(dir, "narrow.lut4"))).toBe(false);
});

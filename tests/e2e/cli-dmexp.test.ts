// The dmexp commands as a user runs them, in subprocesses: export, info, generate, and the minimal
// reader under both Deno and Bun.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { readDmexp, writeDmexp } from "../../formats/dmexp/dmexp.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel } from "../../model/qwen3.ts";
import { floatEngineOf } from "../../engines/float.ts";
import { generateAll } from "../../model/generate.ts";
import { decode, encode } from "../../model/tokenizer.ts";
import { cloneTensors } from "../../model/tensor.ts";
import { disassemble, foreignFile, ROOT, tempDir, withHeader } from "../helpers/dmexp-fixtures.ts";
import { expectSameTensors } from "../helpers/bits.ts";

type Runtime = "deno" | "bun";
function sh(runtime: Runtime, script: string, args: string[]) {
  const cmd = runtime === "deno" ? ["run", "-A", script, ...args] : [script, ...args];
  const r = spawnSync(runtime, cmd, { cwd: ROOT, encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const cfg = PRESETS.tiny;
const model = initParams(cfg, 1);
const { dir, cleanup } = tempDir();
const at = (name: string) => join(dir, name);
const ckpt = at("run.ckpt");
const stem = `cli-dmexp-${process.pid}`; // the printed command writes out/<stem>.dmexp under the repository
const generated: string[] = [];

beforeAll(async () => {
  // EMA and optimizer state differ from the model, so an export that read them would show it.
  await writeCheckpoint(ckpt, cfg, {
    step: 42,
    model,
    ema: initParams(cfg, 2),
    adam: { m: initParams(cfg, 3), v: initParams(cfg, 4) },
  });
  for (const dtype of ["f32", "f16", "bf16"] as const) {
    await writeDmexp(at(`m.${dtype}.dmexp`), model, cfg, { dtype, source: "init@step0", step: 0 });
  }
  const { file } = await disassemble(at("m.f16.dmexp"));
  const flipped = file.slice();
  flipped[flipped.length - 3] ^= 1;
  await writeFile(at("flip.dmexp"), flipped);
  await writeFile(at("foreign.dmexp"), foreignFile().bytes);
});
afterAll(() => {
  cleanup();
  for (const f of generated) rmSync(f, { force: true });
});

describe("scripts/export.ts", () => {
  test("exports the model section only (not EMA, not optimizer state), with the snapshot's config, under Deno", async () => {
    const r = sh("deno", "scripts/export.ts", [
      "--format",
      "dmexp",
      "--input",
      ckpt,
      "--output",
      dir + "/",
      "--dtype",
      "f32",
      "--json",
    ]);
    expect(r.code).toBe(0);
    const s = JSON.parse(r.out);
    expect(s.file).toBe(join(dir, "run.f32.dmexp"));
    expect([s.format, s.dtype, s.step, s.source, s.config_from]).toEqual([
      "dmexp",
      "f32",
      42,
      `${ckpt}@step42`,
      at("run.config.toml"),
    ]);
    for (const k of ["bytes", "params", "tensors", "max_abs", "min_nonzero_abs", "flushed"]) {
      expect(s).toHaveProperty(k);
    }
    const { tensors, header } = await readDmexp(s.file);
    expectSameTensors(tensors, model);
    expect(header.source).toBe(`${ckpt}@step42`);
    expect(header.step).toBe(42);
  });

  test("defaults to bf16 and prints a summary, under Bun", () => {
    const r = sh("bun", "scripts/export.ts", ["--format", "dmexp", "--input", ckpt, "--output", dir]);
    expect(r.code).toBe(0);
    for (const k of ["wrote", "bytes", "params", "max_abs", "min_nonzero_abs", "flushed"]) {
      expect(r.out).toContain(k);
    }
    expect(existsSync(at("run.bf16.dmexp"))).toBe(true);
  });

  test("--preset is refused while the snapshot exists (exit 2), required when it is missing (exit 1), and accepted then", async () => {
    const refused = sh("bun", "scripts/export.ts", [
      "--format",
      "dmexp",
      "--input",
      ckpt,
      "--output",
      dir,
      "--preset",
      "tiny",
    ]);
    expect(refused.code).toBe(2);
    expect(refused.err).toContain("run.config.toml exists");
    await rename(at("run.config.toml"), at("run.config.away"));
    try {
      const missing = sh("bun", "scripts/export.ts", ["--format", "dmexp", "--input", ckpt, "--output", dir]);
      expect(missing.code).toBe(1);
      expect(missing.err).toContain("run.config.toml is missing");
      expect(missing.err).toContain("--preset");
      const named = sh("bun", "scripts/export.ts", [
        "--format",
        "dmexp",
        "--input",
        ckpt,
        "--output",
        at("preset.dmexp"),
        "--preset",
        "tiny",
        "--json",
      ]);
      expect(named.code).toBe(0);
      expect(JSON.parse(named.out).config_from).toBe("preset tiny");
      const wrong = sh("bun", "scripts/export.ts", [
        "--format",
        "dmexp",
        "--input",
        ckpt,
        "--output",
        at("p2.dmexp"),
        "--preset",
        "default",
      ]);
      expect(wrong.code).toBe(1);
      expect(wrong.err).toContain("model.model.embed_tokens.weight");
    } finally {
      await rename(at("run.config.away"), at("run.config.toml"));
    }
  });

  test("refuses a corrupt checkpoint (exit 1), and bad flags (exit 2)", async () => {
    const bytes = new Uint8Array(readFileSync(ckpt));
    bytes[bytes.length - 5] ^= 0x40; // inside the optimizer state: still a corrupt file
    await writeFile(at("bad.ckpt"), bytes);
    await writeFile(at("bad.config.toml"), readFileSync(at("run.config.toml")));
    const bad = sh("bun", "scripts/export.ts", [
      "--format",
      "dmexp",
      "--input",
      at("bad.ckpt"),
      "--output",
      dir,
    ]);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain("crc32");
    expect(sh("bun", "scripts/export.ts", ["--format", "dmexp", "--input", ckpt, "--dtype", "f8"]).code).toBe(
      2,
    );
    expect(sh("bun", "scripts/export.ts", ["--format", "dmexp", "--input", ckpt, "--format", "onnx"]).code)
      .toBe(2);
    expect(sh("bun", "scripts/export.ts", ["--format", "dmexp", "--nope"]).code).toBe(2);
    const none = sh("bun", "scripts/export.ts", ["--format", "dmexp", "--input", at("absent.ckpt")]);
    expect(none.code).toBe(1);
    expect(none.err).toContain("absent.ckpt");
  });

  test("an f16 export of a weight above 65504 is refused naming bf16; bf16 takes the same checkpoint", async () => {
    const big = cloneTensors(model);
    big[4].data[1] = -80000;
    await writeCheckpoint(at("big.ckpt"), cfg, { step: 1, model: big });
    const f16 = sh("bun", "scripts/export.ts", [
      "--format",
      "dmexp",
      "--input",
      at("big.ckpt"),
      "--output",
      dir,
      "--dtype",
      "f16",
    ]);
    expect(f16.code).toBe(1);
    expect(f16.err).toContain("--dtype bf16");
    expect(existsSync(at("big.f16.dmexp"))).toBe(false);
    const bf16 = sh("bun", "scripts/export.ts", [
      "--format",
      "dmexp",
      "--input",
      at("big.ckpt"),
      "--output",
      dir,
      "--dtype",
      "bf16",
      "--json",
    ]);
    expect(bf16.code).toBe(0);
    expect(JSON.parse(bf16.out).max_abs).toBe(79872); // -80000 to bf16's 8 significant bits
  });
});

describe("scripts/info.ts", () => {
  test("prints every header field and the checksum verdict (exit 0), and the same as JSON", () => {
    const r = sh("deno", "scripts/info.ts", [at("m.bf16.dmexp")]);
    expect(r.code).toBe(0);
    for (
      const k of [
        "format",
        "dtype",
        "source",
        "step",
        "num_params",
        "num_tensors",
        "flushed",
        "max_abs",
        "min_nonzero_abs",
        "config",
        "tensors",
        "arch",
        "tokenizer",
      ]
    ) {
      expect(r.out).toMatch(new RegExp(`^${k}\\b`, "m"));
    }
    expect(r.out).toContain("ok, the payload is intact");
    expect(r.out).toContain("hidden_size = 16");
    expect(r.out).toContain("model.layers.1.mlp.down_proj.weight");
    const j = JSON.parse(sh("bun", "scripts/info.ts", [at("m.bf16.dmexp"), "--json"]).out);
    expect(j.crc32.ok).toBe(true);
    expect(j.model.ok).toBe(true);
    expect(Object.keys(j.header)).toEqual([
      "format",
      "dtype",
      "source",
      "step",
      "num_params",
      "num_tensors",
      "flushed",
      "max_abs",
      "min_nonzero_abs",
      "config",
      "arch",
      "tokenizer",
      "header_crc32",
      "tensors",
    ]);
    expect(j.header.tensors[0]).toEqual({
      name: "model.embed_tokens.weight",
      dims: [258, 16],
      overflowed: 0,
    });
  });

  test("a flipped payload bit: prints the header and MISMATCH, exit 1", () => {
    const r = sh("bun", "scripts/info.ts", [at("flip.dmexp")]);
    expect(r.code).toBe(1);
    expect(r.out).toContain("MISMATCH");
    expect(r.out).toContain("dtype            f16");
  });

  test("a foreign file: prints its config and says ferry cannot build it, exit 0", () => {
    const r = sh("bun", "scripts/info.ts", [at("foreign.dmexp")]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('arm = "engram"');
    expect(r.out).toContain("ferry cannot build a model from this config");
    expect(r.out).toContain("embed.weight  [3, 2]");
  });

  test("a tampered header (CRC intact) is refused by the shape check, exit 1; a checkpoint with the command, exit 1", async () => {
    await withHeader(
      at("m.f32.dmexp"),
      at("tamper.dmexp"),
      (h) => h.replace("hidden_size = 16", "hidden_size = 32"),
    );
    const t = sh("bun", "scripts/info.ts", [at("tamper.dmexp")]);
    expect(t.code).toBe(1);
    expect(t.out).toContain("ok, the payload is intact");
    expect(t.out).toContain("REFUSED");
    const c = sh("bun", "scripts/info.ts", [ckpt]);
    expect(c.code).toBe(1);
    expect(c.err).toContain("--format dmexp --output");
  });
});

describe("scripts/generate.ts", () => {
  const greedy = async (tensors = model, prompt = "The jury", n = 24) =>
    decode(
      await generateAll(
        floatEngineOf(buildModel(cfg, cloneTensors(tensors))),
        encode(prompt, { bos: true }),
        {
          maxTokens: n,
        },
      ),
    );

  test("streams the greedy continuation of an export", async () => {
    const r = sh("deno", "scripts/generate.ts", [
      at("m.f32.dmexp"),
      "--prompt",
      "The jury",
      "--max-tokens",
      "24",
    ]);
    expect(r.code).toBe(0);
    expect(r.out).toBe(await greedy() + "\n");
  });

  test("refuses a training checkpoint with the exact command, and that command works", async () => {
    const theirs = at(`${stem}.ckpt`);
    await writeCheckpoint(theirs, cfg, { step: 9, model, ema: initParams(cfg, 5) });
    const r = sh("deno", "scripts/generate.ts", [theirs, "--prompt", "The jury"]);
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(r.err).toContain("training checkpoint");
    const command = r.err.split("\n").map((l) => l.trim()).find((l) => l.startsWith("deno run -A "));
    expect(command).toBe(
      `deno run -A scripts/export.ts --input ${theirs} --format dmexp --output out/${stem}.dmexp`,
    );
    generated.push(join(ROOT, "out", `${stem}.dmexp`));
    const run = spawnSync("sh", ["-c", command!], { cwd: ROOT, encoding: "utf8" });
    expect(run.status).toBe(0);
    const again = sh("bun", "scripts/generate.ts", [
      `out/${stem}.dmexp`,
      "--prompt",
      "The jury",
      "--max-tokens",
      "24",
    ]);
    expect(again.code).toBe(0);
    expect(again.out).toBe(
      await greedy((await readDmexp(join(ROOT, "out", `${stem}.dmexp`))).tensors) + "\n",
    );
  });

  test("usage errors exit 2: no prompt, a bad number, no file", () => {
    expect(sh("bun", "scripts/generate.ts", [at("m.f32.dmexp")]).code).toBe(2);
    expect(sh("bun", "scripts/generate.ts", [at("m.f32.dmexp"), "--prompt", "x", "--temperature", "-1"]).code)
      .toBe(2);
    expect(sh("bun", "scripts/generate.ts", ["--prompt", "x"]).code).toBe(2);
    const corrupt = sh("bun", "scripts/generate.ts", [at("flip.dmexp"), "--prompt", "x"]);
    expect(corrupt.code).toBe(1);
    expect(corrupt.err).toContain("crc32");
  });
});

describe("readers/dmexp.ts, the minimal reader", () => {
  test("is at most 40 lines and imports nothing but runtime built-ins", () => {
    const src = readFileSync(join(ROOT, "readers/dmexp.ts"), "utf8");
    expect(src.trimEnd().split("\n").length).toBeLessThanOrEqual(40);
    const imports = [...src.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1]);
    expect(imports.length).toBeGreaterThan(0);
    expect(imports.every((m) => m.startsWith("node:"))).toBe(true);
  });

  for (const runtime of ["deno", "bun"] as const) {
    for (const dtype of ["f32", "f16", "bf16"] as const) {
      test(`${runtime}, ${dtype}: agrees with the full reader on every tensor's name, dims and bytes`, async () => {
        const path = at(`m.${dtype}.dmexp`);
        const full = await readDmexp(path);
        const lines = full.tensors.map((t) => `${t.name}\t${dtype}\t[${t.dims.join(",")}]`);
        const list = sh(runtime, "readers/dmexp.ts", [path]);
        expect([list.code, list.err]).toEqual([0, ""]);
        expect(list.out).toBe(lines.join("\n") + "\n");
        const r = sh(runtime, "readers/dmexp.ts", [path, ...full.tensors.map((t) => t.name)]);
        expect([r.code, r.err]).toEqual([0, ""]);
        const out = r.out.trimEnd().split("\n");
        expect(out.length).toBe(2 * full.tensors.length);
        full.tensors.forEach((t, i) => {
          expect(out[2 * i]).toBe(lines[i]);
          const got = Float32Array.from(out[2 * i + 1].split(" "), Number);
          expect(got.length).toBe(t.data.length);
          // Bytes, so -0 and 0 differ and nothing is compared approximately.
          expect(new Uint8Array(got.buffer)).toEqual(
            new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength),
          );
        });
      });
    }
  }

  test("prints -0 as -0, reads a foreign file and refuses a corrupt one", async () => {
    const zero = cloneTensors(model);
    zero[0].data[0] = -0;
    await writeDmexp(at("zero.dmexp"), zero, cfg, { dtype: "bf16", source: "init@step0", step: 0 });
    const z = sh("deno", "readers/dmexp.ts", [at("zero.dmexp"), zero[0].name]);
    expect(z.code).toBe(0);
    expect(z.out.split("\n")[1].split(" ")[0]).toBe("-0");
    const f = sh("bun", "readers/dmexp.ts", [at("foreign.dmexp"), "embed.weight"]);
    expect(f.code).toBe(0);
    expect(f.out).toBe("embed.weight\tbf16\t[3,2]\n1 -2.5 0.125 0 2 -1\n");
    const bad = sh("deno", "readers/dmexp.ts", [at("flip.dmexp")]);
    expect(bad.code).toBe(1);
    expect(bad.out).toBe("");
    expect(bad.err).toBe(`${at("flip.dmexp")}: payload CRC-32 mismatch\n`);
  });
});

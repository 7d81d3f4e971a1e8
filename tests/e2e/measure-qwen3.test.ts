// scripts/measure.ts on a Hugging Face Qwen3 folder (the reduced shape, random peaked weights): the
// held-out text scored through the model's own tokenizer, dmexp f32 exact, bf16 close (the folder is
// bf16 already), lut4 on the integer engine finite; and the windows of measure/metrics.ts: a byte
// model's bits per byte as before, a BPE window's tokens and bytes by the stated rules.
import { expect, setDefaultTimeout, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import process from "node:process";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { bitsPerByte, profileEngine, scoredWindow, windowBits, windowInputs } from "../../measure/metrics.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { gapPrompts, scoredBitsPerByte } from "../../measure/gap.ts";

setDefaultTimeout(120_000); // longer than the preload's minute: see the tests below

test("measure on a Qwen3 folder: f32 exact, bf16 close, lut4 on the integer engine finite", async () => {
  const dir = await qwen3Folder({ peaked: true });
  const args = ["scripts/measure.ts", dir, "--windows", "2", "--prompts", "1"];
  args.push("--only", "dmexp:f32,dmexp:bf16,lut4:q4", "--calibrate", "0", "--json");
  const r = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 24 });
  expect(r.stderr).not.toContain("error");
  expect(r.status).toBe(0);
  const out = JSON.parse(r.stdout);
  expect(out.tokenizer).toBe("bpe");
  // ~4.3 bytes a token on English text: BPE tokens, not bytes, were scored.
  expect(out.scored_tokens).toBeGreaterThan(60);
  expect(out.scored_tokens).toBeLessThan(out.scored_bytes / 2);
  expect(out.scored_bytes).toBeGreaterThan(400);
  expect(out.scored_bytes).toBeLessThanOrEqual(512);
  expect(Number.isFinite(out.source_bpb) && out.source_bpb > 0).toBe(true);
  const row = (f: string, d: string) =>
    out.rows.find((x: { format: string; dtype: string }) => x.format === f && x.dtype === d);
  const f32 = row("dmexp", "f32"), bf16 = row("dmexp", "bf16"), lut4 = row("lut4", "q4");
  expect([f32.mean_kl, f32.kl_p99, f32.bpb_gap, f32.max_abs_delta]).toEqual([0, 0, 0, 0]);
  expect([f32.top1, f32.greedy_identical, f32.engine]).toEqual([1, 1, "float"]);
  expect(bf16.mean_kl).toBeLessThan(1e-6);
  expect(Math.abs(bf16.bpb_gap)).toBeLessThan(1e-4);
  expect(bf16.top1).toBe(1);
  expect(lut4.engine).toBe("int");
  for (const k of ["mean_kl", "kl_p99", "top1", "bpb", "bpb_gap", "max_abs_delta"]) {
    expect(Number.isFinite(lut4[k])).toBe(true);
  }
  expect(lut4.mean_kl).toBeGreaterThan(0); // 4-bit codes do change the logits
  expect(lut4.top1).toBeGreaterThan(0);
}, 120_000);

test("a byte model's windows and bits per byte are the byte convention's", async () => {
  const ck = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
  const engine = createFloatEngine(ck.config, ck.model, "ferry.ckpt", { frozen: true });
  const windows = evalWindows((await loadBrown()).heldOut, 2, 64);
  const w = scoredWindow(engine.tokenizer, windows[0]);
  expect(w.inputs).toEqual(windowInputs(windows[0]));
  expect(w.targets).toEqual(Array.from(windows[0]));
  expect(w.bytes).toBe(64);
  // The model itself, no engine: what measure computed before windows went through a tokenizer.
  const model = buildModel(ck.config, ck.model);
  let bits = 0;
  for (const x of windows) bits += windowBits(forward(model, createCache(model), windowInputs(x)), x, 258);
  const before = bits / 128;
  expect(bitsPerByte(model, windows)).toBe(before);
  const profile = await profileEngine(engine, windows, [], 0);
  expect(profile.bpb).toBeCloseTo(before, 6);
  expect(await bitsPerByte(engine, windows)).toBe(profile.bpb);
  // scripts/gap.ts's sums, on the model and on the engine.
  const scored = windows.map((x) => scoredWindow(engine.tokenizer, x));
  expect(await scoredBitsPerByte(model, scored)).toBe(before);
  expect(await scoredBitsPerByte(engine, scored)).toBe(profile.bpb);
  expect(gapPrompts(windows[0], 2, 8)).toEqual(evalWindows(windows[0], 2, 8).map((x) => [256, ...x]));
});

test("a lossless export is a source like its checkpoint; a lossy one is refused, saying why", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-measure-src-"));
  try {
    const input = "model/default/ferry.ckpt";
    const f32 = await exportCheckpoint({ input, output: dir, format: "dmexp", dtype: "f32" });
    const q4 = await exportCheckpoint({ input, output: dir, format: "gguf", dtype: "q4_0" });
    const measure = (src: string) =>
      spawnSync(process.execPath, [
        "scripts/measure.ts",
        src,
        ...["--windows", "1", "--prompts", "1", "--only", "dmexp:bf16", "--json"],
      ], { encoding: "utf8", maxBuffer: 1 << 24 });
    const r = measure(f32.file);
    expect(r.status).toBe(0);
    const out = JSON.parse(r.stdout);
    expect([out.tokenizer, out.scored_tokens, out.scored_bytes]).toEqual(["byte", 256, 256]);
    const ck = await readCheckpoint(input, { sections: ["model"] });
    const w = evalWindows((await loadBrown()).heldOut, 1);
    expect(out.source_bpb).toBeCloseTo(bitsPerByte(buildModel(ck.config, ck.model), w), 6);
    expect(out.rows[0].greedy_identical).toBe(1);
    const bad = measure(q4.file);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`${q4.file}: a lossy gguf export`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// A stand-in BPE: one token per character, with or without a BOS.
function charTokenizer(bos: number | undefined): Tokenizer {
  const bytes = (id: number) => new TextEncoder().encode(String.fromCodePoint(id));
  return {
    kind: "bpe",
    size: 0x10000,
    bos,
    eos: [],
    pad: undefined,
    specials: [],
    encode: (
      text,
      o,
    ) => [...(o?.bos && bos !== undefined ? [bos] : []), ...[...text].map((c) => c.codePointAt(0)!)],
    decode: (ids) => String.fromCodePoint(...Array.from(ids)),
    streamDecoder: () => (id) => String.fromCodePoint(id),
    tokenBytes: bytes,
    tokenText: (id) => String.fromCodePoint(id),
  };
}

test("a BPE window: no BOS leaves the first token's bytes out, a BOS scores them; cut characters trimmed", () => {
  const text = new TextEncoder().encode("é abc ü"); // 2 + 5 + 2 bytes
  const none = scoredWindow(charTokenizer(undefined), text);
  expect(none.inputs).toEqual([0xe9, 32, 97, 98, 99, 32]);
  expect(none.targets).toEqual([32, 97, 98, 99, 32, 0xfc]);
  expect(none.bytes).toBe(9 - 2);
  const withBos = scoredWindow(charTokenizer(1), text);
  expect(withBos.inputs).toEqual([1, 0xe9, 32, 97, 98, 99, 32]);
  expect(withBos.targets).toEqual([0xe9, 32, 97, 98, 99, 32, 0xfc]);
  expect(withBos.bytes).toBe(9);
  // A window cut inside é at its start and inside ü at its end scores only the whole characters.
  const cut = scoredWindow(charTokenizer(1), text.subarray(1, 8));
  expect(cut.targets).toEqual([32, 97, 98, 99, 32]);
  expect(cut.bytes).toBe(5);
  // gap's greedy prompts through a BPE: its BOS only when it has one.
  const held = new TextEncoder().encode("abcdefgh");
  expect(gapPrompts(held, 2, 3, charTokenizer(undefined))).toEqual([[97, 98, 99], [102, 103, 104]]);
  expect(gapPrompts(held, 1, 2, charTokenizer(1))).toEqual([[1, 97, 98]]);
});

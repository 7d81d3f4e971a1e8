// The memory rule on a model larger than the budget allows a careless reader: a Qwen3 folder whose tied
// embedding is 151936 x 512 (297 MiB in f32, 148 MiB as stored in bf16) is exported in a spawned process, and its
// resident memory may grow by at most the largest tensor plus 256 MB. It must also stay below the whole model in
// f32, which any reader or writer that held the model at once would need: the folder (and a dmexp file made
// from it, as export input) is streamed a chunk at a time. Loading that dmexp on the float engine likewise
// stays below the f32 model: its matrices are packed as they stream.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { makeQwen3Folder } from "../helpers/qwen3-folder.ts";
import { paramShapes } from "../../model/config.ts";
import { numel } from "../../model/tensor.ts";
import { configFromHfJson } from "../../formats/huggingface/huggingface.ts";
import { readFileSync } from "node:fs";

const SHAPE = {
  vocab_size: 151936,
  hidden_size: 512,
  intermediate_size: 1024,
  num_hidden_layers: 1,
  num_attention_heads: 8,
  num_key_value_heads: 4,
  head_dim: 64,
  tie_word_embeddings: true,
  max_position_embeddings: 40960,
  rope_theta: 1_000_000,
};
const MB = 1 << 20;
const dir = mkdtempSync(join(tmpdir(), "ferry-memory-"));
const folder = join(dir, "q");
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(async () => {
  await makeQwen3Folder(folder, { shape: SHAPE, seed: 1 });
});

/** How far a spawned tests/helpers/export-rss.ts run's resident memory grew, in bytes. */
function rssGrowth(input: string, output: string, format: string): number {
  const r = spawnSync(process.execPath, ["tests/helpers/export-rss.ts", input, output, format], {
    cwd: new URL("../..", import.meta.url).pathname,
    encoding: "utf8",
    timeout: 50_000,
  });
  expect(r.stderr).toBe("");
  expect(r.status).toBe(0);
  const { baseline, peak, maxRss } = JSON.parse(r.stdout);
  return Math.max(peak, maxRss) - baseline;
}

// The folder to dmexp and to hf, then that dmexp file (streamed as input too) to hf.
const CASES = [["folder", "dmexp", "q.bf16.dmexp"], ["folder", "hf", "q.f32.hf"], [
  "q.bf16.dmexp",
  "hf",
  "d.f32.hf",
]];
for (const [input, format, file] of CASES) {
  test(`${input} -> ${format}: RSS grows by less than the largest tensor + 256 MB, and less than the model`, () => {
    const { config } = configFromHfJson(readFileSync(join(folder, "config.json"), "utf8"), "config.json");
    const sizes = paramShapes(config).map((p) => numel(p.dims) * 4);
    const [largest, whole] = [Math.max(...sizes), sizes.reduce((a, b) => a + b, 0)];
    expect(largest).toBeGreaterThan(280 * MB);
    const from = input === "folder" ? folder : join(dir, input);
    const growth = rssGrowth(from, join(dir, file), format);
    console.log(
      `${input} -> ${format}: RSS grew ${(growth / MB).toFixed(0)} MB (largest tensor ${
        (largest / MB).toFixed(0)
      } MB)`,
    );
    expect(growth).toBeLessThan(largest + 256 * MB);
    expect(growth).toBeLessThan(whole);
  });
}

test("loading the dmexp on the float engine packs it as it streams: RSS grows by about its bf16 bytes, never the f32 model", () => {
  const { config } = configFromHfJson(readFileSync(join(folder, "config.json"), "utf8"), "config.json");
  const whole = paramShapes(config).reduce((n, p) => n + numel(p.dims) * 4, 0);
  const growth = rssGrowth(join(dir, "q.bf16.dmexp"), "-", "load-float");
  console.log(
    `load float: RSS grew ${(growth / MB).toFixed(0)} MB (the model: ${(whole / MB).toFixed(0)} MB in f32)`,
  );
  // The packed bf16 weights are half the f32 model, and the reads' chunks come and go; reading the model
  // whole first, as the engine did before, grew RSS by 573 MB here (the f32 model and its packed copy).
  expect(growth).toBeLessThan(whole);
});

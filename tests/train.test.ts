// A short training smoke test: on a tiny model the loss falls within seconds, and the trainer CLI
// writes a checkpoint it can resume from.
import { expect, setDefaultTimeout, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PRESETS } from "../model/config.ts";
import { initParams } from "../model/init.ts";
import { encode } from "../model/tokenizer.ts";
import { adamwStep, createScratch, flattenTensors, paramLayout, sequenceLossAndGrad } from "../model/train.ts";
import { readCheckpoint } from "../formats/checkpoint.ts";

setDefaultTimeout(60_000); // per file: Bun 1.4.5 applies a preload's default to the first test file only

test("AdamW on a tiny model drives the loss on a fixed sentence down", () => {
  const cfg = PRESETS.tiny;
  const layout = paramLayout(cfg);
  const params = flattenTensors(layout, initParams(cfg, 1));
  const m = new Float32Array(layout.size), v = new Float32Array(layout.size), g = new Float32Array(layout.size);
  const text = encode("the cat sat on the mat. the cat sat on the mat.");
  const inputs = [256, ...text.slice(0, -1)], targets = text;
  const s = createScratch(cfg, inputs.length);
  const losses: number[] = [];
  for (let step = 1; step <= 60; step++) {
    g.fill(0);
    losses.push(sequenceLossAndGrad(cfg, layout, params, g, inputs, targets, s, 1 / inputs.length) / inputs.length);
    adamwStep(layout, params, g, m, v, step, 1e-2, { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0 });
  }
  expect(losses[0]).toBeGreaterThan(5);
  expect(losses.at(-1)!).toBeLessThan(losses[0] * 0.5);
});

test("scripts/train.ts trains, writes a checkpoint with log and config, and resumes", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-train-"));
  try {
    const out = join(dir, "run.ckpt");
    const args = ["scripts/train.ts", "--out", out, "--preset", "tiny", "--seq", "32", "--batch", "4", "--steps", "12", "--warmup", "2", "--save-every", "6", "--eval-every", "6"];
    const first = spawnSync("bun", [...args, "--stop-after", "6"], { encoding: "utf8" });
    expect(first.status).toBe(0);
    expect((await readCheckpoint(out)).step).toBe(6);
    const second = spawnSync("bun", args, { encoding: "utf8" });
    expect(second.status).toBe(0);
    expect(second.stderr).toContain("resuming");
    const run = await readCheckpoint(out);
    expect(run.step).toBe(12);
    expect(run.adam).toBeDefined();
    expect(run.ema).toBeDefined();
    expect(existsSync(join(dir, "run.config.toml"))).toBe(true);
    const log = readFileSync(join(dir, "run.log"), "utf8").trim().split("\n");
    expect(log.at(-1)!.split("\t")[0]).toBe("12");
    const bad = spawnSync("bun", ["scripts/train.ts", "--out", join(dir, "x.ckpt"), "--preset", "nope"], { encoding: "utf8" });
    expect(bad.status).toBe(2);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);

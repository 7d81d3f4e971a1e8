// A short training smoke test: on a tiny model the loss falls within seconds, and the trainer CLI
// writes a checkpoint it can resume from.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { encode } from "../../model/tokenizer.ts";
import {
  adamwStep,
  clipGradNorm,
  createScratch,
  emaUpdate,
  flattenTensors,
  paramLayout,
  scaleRange,
  sequenceLossAndGrad,
  sumInto,
} from "../../model/train.ts";
import { createRng } from "../../model/random.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";

test("AdamW on a tiny model drives the loss on a fixed sentence down", () => {
  const cfg = PRESETS.tiny;
  const layout = paramLayout(cfg);
  const params = flattenTensors(layout, initParams(cfg, 1));
  const m = new Float32Array(layout.size),
    v = new Float32Array(layout.size),
    g = new Float32Array(layout.size);
  const text = encode("the cat sat on the mat. the cat sat on the mat.");
  const inputs = [256, ...text.slice(0, -1)], targets = text;
  const s = createScratch(cfg, inputs.length);
  const losses: number[] = [];
  for (let step = 1; step <= 60; step++) {
    g.fill(0);
    losses.push(
      sequenceLossAndGrad(cfg, layout, params, g, inputs, targets, s, 1 / inputs.length) / inputs.length,
    );
    adamwStep(layout, params, g, m, v, step, 1e-2, { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0 });
  }
  expect(losses[0]).toBeGreaterThan(5);
  expect(losses.at(-1)!).toBeLessThan(losses[0] * 0.5);
});

test("the optimizer split into ranges (as the workers run it) gives the bits of one pass over everything", () => {
  const cfg = PRESETS.tiny, layout = paramLayout(cfg), n = layout.size, rng = createRng(5);
  const rand = (k: number) => Float32Array.from({ length: n }, () => (rng.next() * 2 - 1) * k);
  const params = rand(1),
    m = rand(1e-3),
    v = rand(1e-6).map(Math.abs),
    ema = rand(1),
    parts = [rand(3), rand(3), rand(3)];
  const adam = { beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
  // Whole: the all-reduce, clipping, AdamW and EMA as one pass each.
  const w = { p: params.slice(), m: m.slice(), v: v.slice(), e: ema.slice(), g: parts[0].slice() };
  sumInto(w.g, parts.slice(1));
  const norm = clipGradNorm(w.g, 1.0);
  adamwStep(layout, w.p, w.g, w.m, w.v, 3, 1e-3, adam);
  emaUpdate(w.e, w.p, 0.998);
  // Split at cuts that fall inside tensors, in an order other than left to right.
  const s = { p: params.slice(), m: m.slice(), v: v.slice(), e: ema.slice(), g: parts[0].slice() };
  const cuts = [0, 17, Math.floor(n / 3), n - 5, n];
  const ranges = [2, 0, 3, 1].map((i) => [cuts[i], cuts[i + 1]]);
  for (const [from, to] of ranges) sumInto(s.g, parts.slice(1), from, to);
  expect(norm).toBeGreaterThan(1); // so the scaling runs
  for (const [from, to] of ranges) {
    scaleRange(s.g, 1.0 / norm, from, to);
    adamwStep(layout, s.p, s.g, s.m, s.v, 3, 1e-3, adam, from, to);
    emaUpdate(s.e, s.p, 0.998, from, to);
  }
  for (const k of ["p", "m", "v", "e", "g"] as const) {
    expect(Buffer.from(s[k].buffer).equals(Buffer.from(w[k].buffer))).toBe(true);
  }
});

crossProcessTest(
  "scripts/train.ts: 1, 2 and 3 workers give the same bits (sequences are summed in batch order)",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-train-workers-"));
    try {
      const bits = [];
      for (const workers of ["1", "2", "3"]) {
        const out = join(dir, `w${workers}.ckpt`);
        const r = spawnSync("bun", [
          "scripts/train.ts",
          "--out",
          out,
          "--preset",
          "tiny",
          "--seq",
          "24",
          "--batch",
          "5",
          "--steps",
          "3",
          "--warmup",
          "1",
          "--save-every",
          "3",
          "--eval-every",
          "100",
          "--workers",
          workers,
        ], { encoding: "utf8" });
        expect(r.status).toBe(0);
        const ck = await readCheckpoint(out);
        bits.push(
          [...ck.model, ...ck.ema!, ...ck.adam!.m, ...ck.adam!.v].map((t) =>
            Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength).toString("base64")
          ),
        );
      }
      expect(bits[0].length).toBeGreaterThan(0);
      expect(bits[1]).toEqual(bits[0]);
      expect(bits[2]).toEqual(bits[0]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

crossProcessTest(
  "scripts/train.ts trains, writes a checkpoint with log and config, and resumes",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-train-"));
    try {
      const out = join(dir, "run.ckpt");
      const args = [
        "scripts/train.ts",
        "--out",
        out,
        "--preset",
        "tiny",
        "--seq",
        "32",
        "--batch",
        "4",
        "--steps",
        "12",
        "--warmup",
        "2",
        "--save-every",
        "6",
        "--eval-every",
        "6",
      ];
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
      const bad = spawnSync("bun", ["scripts/train.ts", "--out", join(dir, "x.ckpt"), "--preset", "nope"], {
        encoding: "utf8",
      });
      expect(bad.status).toBe(2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  60_000,
);

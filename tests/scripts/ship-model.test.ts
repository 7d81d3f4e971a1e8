// scripts/tools/ship-model.ts: a run becomes a shipped model with its weights, config and log, and
// without the optimizer's state.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readCheckpoint, writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";

const ship = (...args: string[]) =>
  spawnSync("bun", ["scripts/tools/ship-model.ts", ...args], { encoding: "utf8", timeout: 30_000 });

test("ship-model keeps the model section, step, trainer record, config and log, and drops EMA and AdamW", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-ship-"));
  try {
    const cfg = PRESETS.tiny, run = join(dir, "run.ckpt");
    const model = initParams(cfg, 1), ema = initParams(cfg, 2);
    await writeCheckpoint(run, cfg, {
      step: 7,
      model,
      ema,
      adam: { m: initParams(cfg, 3), v: initParams(cfg, 4) },
      trainer: { tokens_seen: 123 },
    });
    writeFileSync(join(dir, "run.log"), "# ferry train: a log\n");
    const out = join(dir, "shipped", "ferry.ckpt");
    const r = ship(run, out, "--json");
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ checkpoint: out, step: 7, params: 14_504 });
    const back = await readCheckpoint(out);
    expect(back.step).toBe(7);
    expect(back.trainer.tokens_seen).toBe(123);
    expect(back.ema).toBeUndefined();
    expect(back.adam).toBeUndefined();
    expect(back.model.map((t) => t.name)).toEqual(model.map((t) => t.name));
    back.model.forEach((t, i) => expect(t.data).toEqual(model[i].data));
    expect(readFileSync(join(dir, "shipped", "ferry.log"), "utf8")).toBe("# ferry train: a log\n");
    expect(existsSync(join(dir, "shipped", "ferry.config.toml"))).toBe(true);
    // About a quarter of the run's file: one of its four sections.
    expect(statSync(out).size).toBeLessThan(statSync(run).size / 3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("ship-model refuses a missing run (exit 1, naming it) and a bad command line (exit 2)", () => {
  const missing = ship("/nonexistent/run.ckpt", join(tmpdir(), "ferry-ship-never.ckpt"));
  expect(missing.status).toBe(1);
  expect(missing.stderr).toContain("/nonexistent/run.ckpt");
  expect(existsSync(join(tmpdir(), "ferry-ship-never.log"))).toBe(false);
  expect(ship("only-one.ckpt").status).toBe(2);
  expect(ship("a.ckpt", "b.bin").status).toBe(2);
});

/**
 * Calibrated exports of a Qwen3 folder timed as a user runs them: each `scripts/export.ts --input FOLDER
 * --format F [--dtype D] --json` in its own process, calibrated by default (as many windows as the
 * default allows) or with `--calibrate N`, the exports in an order that alternates by round. Per export:
 * wall seconds, CPU seconds (user + system, every thread) and peak RSS (the kernel's high-water mark,
 * VmHWM), read from /proc while it runs (scripts/tools/bench-real.ts `measured`: Linux only), the
 * windows it calibrated on, and the memory rule's allowance beside them: the largest
 * tensor in f32 plus 256 MB (a lut4 export's GPTQ adds one layer's covariances and its own factor and
 * work matrices, stated in docs/benchmarks.md). The goal line says whether each median is within 10
 * minutes. A benchmark, not a test: run it on an idle machine.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-calibrated-export.ts /tmp/q06 --exports lut4,gguf:q4_k_m --rounds 1
 * ```
 * @module
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { configFromHfJson } from "../../formats/huggingface/huggingface.ts";
import { paramShapes } from "../../model/config.ts";
import { numel } from "../../model/tensor.ts";
import { median } from "../../measure/bench-real.ts";
import { type Measured, measured } from "./bench-real.ts";

const HELP = `
Time calibrated exports of a Qwen3 folder, each in its own process: wall, CPU, peak RSS, windows.

Usage: bun scripts/tools/bench-calibrated-export.ts FOLDER [--exports LIST] [--rounds N]
         [--runtime bun|deno] [--calibrate N] [--json]

Options:
  --exports LIST   comma-separated FORMAT or FORMAT:DTYPE (default lut4,gguf:q4_k_m)
  --rounds N       rounds, each export once per round, the order alternating (default 1)
  --runtime NAME   bun or deno (default bun)
  --calibrate N    windows for every export (default: the export's own default)
  --json           print the figures as JSON
  -h, --help       this text
`;

/** The 10-minute goal of a calibrated export on two idle cores. */
const GOAL_S = 600;
const MB = 1e6;

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    exports: { type: "string", default: "lut4,gguf:q4_k_m" },
    rounds: { type: "string", default: "1" },
    runtime: { type: "string", default: "bun", choices: ["bun", "deno"] },
    calibrate: { type: "string" },
    json: { type: "boolean", default: false },
  });
  if (positionals.length !== 1) fail("expected one FOLDER (a Hugging Face Qwen3 folder)", EXIT_USAGE);
  if (process.platform !== "linux") fail("this benchmark reads /proc: Linux only", EXIT_USAGE);
  const folder = positionals[0], rounds = Number(values.rounds);
  if (!Number.isInteger(rounds) || rounds < 1) fail(`--rounds ${values.rounds}: expected an integer >= 1`);
  const { config } = configFromHfJson(readFileSync(join(folder, "config.json"), "utf8"), "config.json");
  const largest = Math.max(...paramShapes(config).map((s) => numel(s.dims))) * 4;
  const exports = values.exports.split(",").map((e) => {
    const [format, dtype] = e.split(":");
    return { name: e, format, dtype };
  });
  const dir = mkdtempSync(join(tmpdir(), "ferry-bench-export-"));
  const runs = new Map<string, Measured[]>(exports.map((e) => [e.name, []]));
  const loads: number[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      for (const e of r % 2 === 0 ? exports : [...exports].reverse()) {
        const script = new URL("../export.ts", import.meta.url).pathname;
        const runtime = values.runtime === "deno" ? ["deno", "run", "-A", script] : ["bun", script];
        const argv = [
          ...runtime,
          "--input",
          folder,
          "--format",
          e.format,
          "--output",
          join(dir, "out"),
          "--json",
        ];
        if (e.dtype) argv.push("--dtype", e.dtype);
        if (values.calibrate !== undefined) argv.push("--calibrate", values.calibrate);
        loads.push(loadavg()[0]);
        process.stderr.write(`round ${r + 1}/${rounds}: ${e.name} (load ${loadavg()[0].toFixed(2)})\n`);
        runs.get(e.name)!.push(await measured(argv[0], argv.slice(1), process.cwd()));
        rmSync(join(dir, "out"), { recursive: true, force: true });
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const rows = exports.map((e) => {
    const rs = runs.get(e.name)!;
    return {
      export: e.name,
      wall_s: median(rs.map((x) => x.seconds)),
      cpu_s: median(rs.map((x) => x.cpuSeconds)),
      peak_rss_mb: median(rs.map((x) => x.peakRss)) / MB,
      peak_at_s: rs.map((x) => x.peakAt),
      calibration: (JSON.parse(rs[0].stdout) as { calibration?: string }).calibration ?? "none",
      within_goal: rs.every((x) => x.seconds <= GOAL_S),
    };
  });
  const result = {
    folder,
    runtime: values.runtime,
    rounds,
    load_average_at_starts: { min: Math.min(...loads), max: Math.max(...loads) },
    memory_rule_mb: (largest + 256 * 2 ** 20) / MB,
    rows,
  };
  if (values.json) return console.log(JSON.stringify(result, null, 2));
  console.log(
    `${folder}, ${values.runtime}, ${rounds} round(s), medians; load at starts ${
      result.load_average_at_starts.min.toFixed(2)
    }–${result.load_average_at_starts.max.toFixed(2)}`,
  );
  console.log(`memory rule: the largest tensor in f32 plus 256 MB = ${result.memory_rule_mb.toFixed(0)} MB`);
  for (const row of rows) {
    console.log(
      `${row.export.padEnd(14)} wall ${row.wall_s.toFixed(1)} s, CPU ${row.cpu_s.toFixed(1)} s, peak RSS ${
        row.peak_rss_mb.toFixed(0)
      } MB (at ${row.peak_at_s.map((t) => t.toFixed(0)).join(", ")} s), ${
        row.within_goal ? "within" : "over"
      } ${GOAL_S / 60} minutes; calibration: ${row.calibration}`,
    );
  }
}

if (import.meta.main) await run(main);

/**
 * Benchmarks f64lines against JSON on the same numbers, side by side in one run: serialize and
 * parse 10k and 1M typical weights (f32 values of an initialised model, widened to float64), and
 * prints each time with its ratio to JSON. f64lines times include the checksum both ways.
 *
 * Usage: `deno run -A scripts/tools/bench-f64lines.ts [--json]` or `bun scripts/tools/bench-f64lines.ts [--json]`
 *
 * @example
 * ```sh
 * deno run -A scripts/tools/bench-f64lines.ts
 * ```
 * @module
 */
import { cpus, loadavg } from "node:os";
import process from "node:process";
import { parseF64Lines, weightsToF64Lines } from "../../formats/f64lines/f64lines.ts";
import { createRng } from "../../model/random.ts";

const HELP = `bench-f64lines: f64lines vs JSON.stringify/JSON.parse on the same typical weights

usage: deno run -A scripts/tools/bench-f64lines.ts [--json]
       bun scripts/tools/bench-f64lines.ts [--json]

  --json   print the results as one JSON object instead of a table
  --help   show this help

Times are the best of many interleaved repetitions, in wall-clock time and in process CPU time
(the machine is shared: a process waiting for a core loses wall time but not CPU time, so the CPU
column is the steadier one); ratios are f64lines / JSON. Targets: 10k values each way under 1 ms,
and no more than 2x the JSON time.`;

/** One measured operation: best wall-clock and best CPU milliseconds of each side. */
interface Row {
  op: "serialize" | "parse";
  values: number;
  f64linesMs: number;
  jsonMs: number;
  ratio: number;
  f64linesCpuMs: number;
  jsonCpuMs: number;
  cpuRatio: number;
}

// Weights as ferry initialises them: normal, std 0.02, stored as f32.
function typicalWeights(n: number, seed: number): Float64Array {
  const rng = createRng(seed);
  const f32 = new Float32Array(n);
  for (let i = 0; i < n; i++) f32[i] = rng.normal() * 0.02;
  return new Float64Array(f32);
}

function bench(n: number, reps: number): Row[] {
  const w = typicalWeights(n, n);
  const plain = Array.from(w);
  const text = weightsToF64Lines(["w"], [w]);
  const json = JSON.stringify(plain);
  // A benchmark of a wrong answer is worthless: check the round trip first.
  const back = parseF64Lines(text).arrays[0];
  if (!new Uint8Array(back.buffer).every((x, i) => x === new Uint8Array(w.buffer)[i])) {
    throw new Error("f64lines round trip is not bit-exact");
  }
  const wall = [Infinity, Infinity, Infinity, Infinity], cpu = [...wall];
  const ops = [
    () => weightsToF64Lines(["w"], [w]),
    () => JSON.stringify(plain),
    () => parseF64Lines(text),
    () => JSON.parse(json),
  ];
  for (let r = 0; r < reps; r++) {
    ops.forEach((op, k) => {
      const c0 = process.cpuUsage(), t0 = performance.now();
      op();
      const t1 = performance.now(), c1 = process.cpuUsage(c0);
      wall[k] = Math.min(wall[k], t1 - t0);
      cpu[k] = Math.min(cpu[k], (c1.user + c1.system) / 1000);
    });
  }
  const row = (op: Row["op"], a: number, b: number): Row => ({
    op,
    values: n,
    f64linesMs: wall[a],
    jsonMs: wall[b],
    ratio: wall[a] / wall[b],
    f64linesCpuMs: cpu[a],
    jsonCpuMs: cpu[b],
    cpuRatio: cpu[a] / cpu[b],
  });
  return [row("serialize", 0, 1), row("parse", 2, 3)];
}

// Fixed-width columns: times in ms, wall-clock then CPU time, each with its ratio to JSON.
function table(rows: Row[]): string[] {
  const ms = (x: number) => x.toFixed(3).padStart(10), ratio = (x: number) => `${x.toFixed(2)}x`.padStart(7);
  return [
    "                     ---------- wall-clock ms ---------   ----------- CPU-time ms ----------",
    "op           values    f64lines       JSON    ratio       f64lines       JSON    ratio",
    ...rows.map((r) =>
      `${r.op.padEnd(10)} ${String(r.values).padStart(8)}  ${ms(r.f64linesMs)} ${ms(r.jsonMs)} ${
        ratio(r.ratio)
      }` +
      `     ${ms(r.f64linesCpuMs)} ${ms(r.jsonCpuMs)} ${ratio(r.cpuRatio)}`
    ),
  ];
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  if (args.includes("--help") || args.includes("-h")) {
    console.log(HELP);
    process.exit(0);
  }
  const unknown = args.filter((a) => a !== "--json");
  if (unknown.length > 0) {
    console.error(`bench-f64lines: unknown argument ${unknown[0]} (see --help)`);
    process.exit(2);
  }
  const runtime = "Deno" in globalThis
    ? `deno ${(globalThis as any).Deno.version.deno}`
    : `bun ${(process.versions as Record<string, string>).bun}`;
  bench(10_000, 50); // warm the JIT on both paths before anything is timed
  const rows = [...bench(10_000, 300), ...bench(1_000_000, 15)];
  // The machine is shared: say how busy it was, since that bounds what "best of" can mean.
  const load = loadavg()[0], cores = cpus().length;
  if (args.includes("--json")) {
    console.log(JSON.stringify({ runtime, load, cores, rows }));
  } else {
    console.log(
      `f64lines vs JSON, ${runtime}, best of interleaved repetitions, load ${load.toFixed(1)}/${cores} cores`,
    );
    for (const line of table(rows)) console.log(line);
  }
}

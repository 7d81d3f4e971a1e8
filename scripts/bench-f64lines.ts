/**
 * Benchmarks f64lines against JSON on the same numbers, side by side in one run: serialize and
 * parse 10k and 1M typical weights (f32 values of an initialised model, widened to float64), and
 * prints each time with its ratio to JSON. f64lines times include the checksum both ways.
 *
 * Usage: `deno run -A scripts/bench-f64lines.ts [--json]` or `bun scripts/bench-f64lines.ts [--json]`
 *
 * @example
 * ```sh
 * deno run -A scripts/bench-f64lines.ts
 * ```
 * @module
 */
import { cpus, loadavg } from "node:os";
import process from "node:process";
import { parseF64Lines, weightsToF64Lines } from "../formats/f64lines.ts";
import { createRng } from "../model/random.ts";

const HELP = `bench-f64lines: f64lines vs JSON.stringify/JSON.parse on the same typical weights

usage: deno run -A scripts/bench-f64lines.ts [--json]
       bun scripts/bench-f64lines.ts [--json]

  --json   print the results as one JSON object instead of a table
  --help   show this help

Times are the best of many interleaved repetitions (the machine is shared, so the best is the
least disturbed); ratios are f64lines / JSON. Targets: 10k values each way under 1 ms, and no more
than 2x the JSON time.`;

/** One measured operation. */
interface Row {
  op: "serialize" | "parse";
  values: number;
  f64linesMs: number;
  jsonMs: number;
  ratio: number;
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
  const best = [Infinity, Infinity, Infinity, Infinity];
  const ops = [
    () => weightsToF64Lines(["w"], [w]),
    () => JSON.stringify(plain),
    () => parseF64Lines(text),
    () => JSON.parse(json),
  ];
  for (let r = 0; r < reps; r++) {
    ops.forEach((op, k) => {
      const t0 = performance.now();
      op();
      best[k] = Math.min(best[k], performance.now() - t0);
    });
  }
  return [
    { op: "serialize", values: n, f64linesMs: best[0], jsonMs: best[1], ratio: best[0] / best[1] },
    { op: "parse", values: n, f64linesMs: best[2], jsonMs: best[3], ratio: best[2] / best[3] },
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
      `f64lines vs JSON, ${runtime}, best of interleaved repetitions (load ${
        load.toFixed(1)
      } on ${cores} cores)`,
    );
    console.log("op          values     f64lines ms   JSON ms   ratio");
    for (const r of rows) {
      console.log(
        `${r.op.padEnd(11)} ${String(r.values).padStart(9)}  ${r.f64linesMs.toFixed(3).padStart(12)}  ${
          r.jsonMs.toFixed(3).padStart(8)
        }  ${r.ratio.toFixed(2).padStart(5)}x`,
      );
    }
  }
}

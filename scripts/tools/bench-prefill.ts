/**
 * The integer engine's prefill projection, today's against the lanes kernel, side by side in one run:
 * `gemv_lut` over a batch of PREFILL_SLOTS inputs (each input's byte planes made first, as the prefill
 * does) against `gemv_lanesP` (kernels/wasm/int-lanes.ts) for P = 4, 8, 16, 32 over the same inputs, on
 * one thread, at two shapes (rows × columns 1024 × 3072, as a down projection of Qwen3-0.6B, and 3072 ×
 * 1024, as gate or up), the inputs at one exponent (q, k, v, gate, up) and at their own (o, down).
 * Rounds interleave every kernel; the figures are medians in G weight-positions per second, and ratios
 * to today's. Run it under each runtime.
 *
 * With `--model FILE.lut4` it times the integer engine's prefill of `--prompt` seeded ids instead (and
 * with `--decode N` the N greedy tokens after it), this checkout's engine beside those of other
 * checkouts (`--against DIR[,DIR…]`, e.g. the commits before, extracted into .bench/), all loaded in
 * this process, rounds interleaved, and checks that all leave the same logits; ratios are to the first.
 * With `--decode-kernel` it times `gemv_lut` alone instead, the decode projection, on four of the
 * file's matrices (layer 3's q, gate, o and down, at the shift bases a decoded token gives them) with
 * one seeded input, each checkout's module beside the others (CPU time, rounds interleaved, the same
 * outputs checked).
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-prefill.ts
 * // deno run -A scripts/tools/bench-prefill.ts --rounds 7 --json
 * // bun scripts/tools/bench-prefill.ts --model m.lut4 --against .bench/before --threads 1
 * // bun scripts/tools/bench-prefill.ts --model m.lut4 --against .bench/before --decode-kernel
 * ```
 * @module
 */
import { loadavg } from "node:os";
import process from "node:process";
import { resolve } from "node:path";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine } from "../../model/engine.ts";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { PREFILL_SLOTS } from "../../engines/int/model.ts";
import { quantizeMatrix } from "../../quantize/lut4-quantize.ts";
import { ACC_EXP, type LutMatrix } from "../../kernels/int/gemv.ts";
import { gemvLanes } from "../../kernels/int/gemv-lut.ts";
import { LANE_COUNTS } from "../../kernels/wasm/int-lanes.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import { createRng } from "../../model/random.ts";
import { readLut4 } from "../../formats/lut4/lut4.ts";

const HELP = `
Time the integer prefill's projection: today's gemv_lut over a batch against the lanes kernel.

Usage: bun scripts/tools/bench-prefill.ts [--positions N] [--rounds N] [--json]
       bun scripts/tools/bench-prefill.ts --model FILE.lut4 [--against DIR[,DIR…]] [--prompt N] [--threads N]

Options:
  --positions N  prompt positions per timed pass (default 32)
  --rounds N     interleaved rounds; each times every kernel once (default 9)
  --model FILE   time the integer engine's prefill on this lut4 file instead of the kernels
  --against DIRS also the integer engines of other ferry checkouts (comma-separated, inside this one)
  --float FILE   also ferry's float engine on this export (e.g. dmexp bf16 of the same weights)
  --prompt N     prompt tokens of the engine's prefill (default 128)
  --threads N    the engines' threads (default 1)
  --decode N     also time N greedy decoded tokens after the prompt (default 0: none)
  --decode-kernel  with --model: time gemv_lut alone (decode's projection) on four of its matrices
  --json         print the figures as JSON
  -h, --help     this text
`;

const { values: a } = cli(HELP, {
  positions: { type: "string", default: "32" },
  rounds: { type: "string", default: "9" },
  model: { type: "string" },
  against: { type: "string" },
  float: { type: "string" },
  prompt: { type: "string", default: "128" },
  threads: { type: "string", default: "1" },
  decode: { type: "string", default: "0" },
  "decode-kernel": { type: "boolean", default: false },
  json: { type: "boolean", default: false },
});
const positions = Number(a.positions);
const rounds = Number(a.rounds);
if (!Number.isInteger(positions) || positions < 1 || positions > 256) {
  fail("--positions expects an integer in [1, 256]", EXIT_USAGE);
}
if (!Number.isInteger(rounds) || rounds < 1) fail("--rounds expects a positive integer", EXIT_USAGE);

function median(xs: number[]): number {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** A matrix quantized by ferry's own quantizer from N(0, 0.02)-like weights (a sum of four uniforms). */
function matrix(rows: number, cols: number, seed: number): LutMatrix {
  const r = createRng(seed);
  const w = Float32Array.from(
    { length: rows * cols },
    () => (r.next() + r.next() + r.next() + r.next() - 2) * 0.0346,
  );
  return quantizeMatrix(`${rows}x${cols}`, w, rows, cols).matrix;
}

interface Row {
  shape: string;
  exponents: "one" | "own";
  kernel: string;
  gwps: number;
  ratio: number;
}

/** The integer engine's prefill, this checkout's beside `--against`'s: tokens/s, medians, ratios. */
async function engineBench(path: string): Promise<void> {
  const runtime = "Bun" in globalThis ? "bun" : "deno";
  const threads = Number(a.threads), prompt = Number(a.prompt), decode = Number(a.decode);
  if (!Number.isInteger(decode) || decode < 0) fail("--decode expects a whole number", EXIT_USAGE);
  if (!Number.isInteger(threads) || threads < 1) fail("--threads expects a positive integer", EXIT_USAGE);
  if (!Number.isInteger(prompt) || prompt < 2) fail("--prompt expects an integer of at least 2", EXIT_USAGE);
  const engines: Array<[string, Engine]> = [];
  for (const dir of a.against ? a.against.split(",") : []) {
    const other = await import(resolve(dir, "engines/int/engine.ts")) as {
      loadIntEngine: typeof loadIntEngine;
    };
    engines.push([`int @ ${dir}`, await other.loadIntEngine(path, { threads })]);
  }
  engines.push(["int (this checkout)", await loadIntEngine(path, { threads })]);
  const ints = engines.length;
  if (a.float) {
    engines.push([`float (${a.float.split("/").pop()})`, await loadEngine(a.float, "float", { threads })]);
  }
  const vocab = engines[0][1].config.vocab_size;
  const r = createRng(5);
  const ids = Array.from({ length: prompt }, () => r.int(Math.min(vocab, 30000)));
  const logits: number[][] = [];
  for (const [, e] of engines.slice(0, ints)) logits.push(Array.from(await e.start().feed(ids)));
  for (const [, e] of engines.slice(ints)) await e.start().feed(ids, "none"); // warmed, not compared
  if (logits.some((l) => l.join(",") !== logits[0].join(","))) fail("the engines' logits differ");
  const times = engines.map(() => [] as number[]);
  const decodeTimes = engines.map(() => [] as number[]);
  const bar = progress("bench-prefill", rounds * engines.length, { unit: "prefill" });
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < engines.length; k++) {
      const s = engines[k][1].start();
      const t0 = performance.now();
      await s.feed(ids, "none");
      times[k].push((performance.now() - t0) / 1000);
      const t1 = performance.now();
      for (let i = 0; i < decode; i++) await s.feed([s.pick()], "none");
      decodeTimes[k].push((performance.now() - t1) / 1000);
      bar.tick();
    }
  }
  bar.done();
  const rows = engines.map(([name], k) => ({
    name,
    tokensPerSecond: prompt / median(times[k]),
    decodePerSecond: decode > 0 ? decode / median(decodeTimes[k]) : 0,
  }));
  const load = loadavg()[0];
  if (a.json) {
    console.log(JSON.stringify({ runtime, model: path, prompt, threads, rounds, load, rows }, null, 2));
    return;
  }
  console.log(
    `${runtime}, ${path}, prefill of ${prompt} tokens, ${threads} thread(s), median of ${rounds} interleaved rounds, load ${
      load.toFixed(2)
    }`,
  );
  for (const x of rows) {
    console.log(
      `${x.name.padEnd(40)} ${x.tokensPerSecond.toFixed(1).padStart(8)} tok/s ${
        (x.tokensPerSecond / rows[0].tokensPerSecond).toFixed(2).padStart(6)
      }×` + (decode > 0
        ? `  decode ${x.decodePerSecond.toFixed(1).padStart(6)} tok/s ${
          (x.decodePerSecond / rows[0].decodePerSecond).toFixed(2).padStart(5)
        }×`
        : ""),
    );
  }
  for (const [, e] of engines) e.dispose?.();
}

/**
 * `gemv_lut` alone on layer 3's q, gate, o and down of the lut4 file at `path`, at the shift bases a
 * decoded token gives them (13 and 16 at the Qwen3-0.6B shape), this checkout's module beside each
 * `--against` checkout's: G weights/s (CPU time, median of interleaved rounds), ratios to the first.
 */
async function decodeKernelBench(path: string): Promise<void> {
  const runtime = "Bun" in globalThis ? "bun" : "deno";
  const dirs = [...(a.against ? a.against.split(",") : []), "."];
  const makers: Array<typeof createLutSums> = [];
  for (const dir of dirs) {
    makers.push(
      (await import(resolve(dir, "kernels/wasm/int-lut.ts")) as { createLutSums: typeof createLutSums })
        .createLutSums,
    );
  }
  const layer = (await readLut4(path)).weights.layers[3];
  const cases: Array<[LutMatrix, number]> = [[layer.q, 13], [layer.gate, 13], [layer.o, 16], [
    layer.down,
    16,
  ]];
  const cpu = () => {
    const c = process.cpuUsage();
    return (c.user + c.system) / 1e6;
  };
  const r = createRng(9);
  const results: Array<{ matrix: string; checkout: string; gwps: number; ratio: number }> = [];
  for (const [mat, base] of cases) {
    // A normal-like 16-bit input, as RMSNorm and the requantisation leave one.
    const x = Int32Array.from({ length: mat.cols }, () => {
      const v = Math.round((r.next() + r.next() + r.next() + r.next() - 2) * 12000);
      return Math.max(-32767, Math.min(32767, v));
    });
    const calls = makers.map((make) => {
      const made = make([mat], { vectorInts: mat.cols + mat.rows });
      if (!made) fail("this runtime has no WebAssembly SIMD");
      const lut = made.lut, outAt = lut.vectorsAt + mat.cols * 4;
      lut.mem32.set(x, lut.vectorsAt >> 2);
      lut.planes_offset(lut.vectorsAt, mat.cols, lut.planesAt);
      const call = () =>
        lut.gemv_lut(
          lut.planesAt,
          0,
          1,
          made.at[0],
          made.scalesAt[0],
          mat.rows,
          mat.cols >> 5,
          base,
          -1,
          8,
          outAt,
          0,
          lut.scratchAt,
        );
      const out = () => Array.from(lut.mem32.subarray(outAt >> 2, (outAt >> 2) + mat.rows)).join(",");
      return { call, out };
    });
    const outs = calls.map(({ call, out }) => (call(), out()));
    if (outs.some((o) => o !== outs[0])) fail(`${mat.name}: the checkouts' gemv_lut disagree`);
    let reps = 1;
    for (const t0 = cpu(); cpu() - t0 < 0.03; reps++) calls[0].call();
    const times = calls.map(() => [] as number[]);
    for (let round = 0; round < rounds; round++) {
      calls.forEach(({ call }, k) => {
        const t0 = cpu();
        for (let i = 0; i < reps; i++) call();
        times[k].push((cpu() - t0) / reps);
      });
    }
    const med = times.map(median);
    dirs.forEach((dir, k) => {
      results.push({
        matrix: mat.name,
        checkout: dir,
        gwps: (mat.rows * mat.cols) / med[k] / 1e9,
        ratio: med[0] / med[k],
      });
    });
  }
  const load = loadavg()[0];
  if (a.json) {
    console.log(JSON.stringify({ runtime, model: path, rounds, load, results }, null, 2));
    return;
  }
  console.log(
    `${runtime}, gemv_lut alone, CPU time, median of ${rounds} interleaved rounds, load ${load.toFixed(2)}`,
  );
  for (const x of results) {
    console.log(
      `${x.matrix.padEnd(16)} ${x.checkout.padEnd(16)} ${x.gwps.toFixed(2).padStart(7)} G w/s ${
        x.ratio.toFixed(2).padStart(6)
      }×`,
    );
  }
}

run(async () => {
  if (a.model && a["decode-kernel"]) return await decodeKernelBench(a.model);
  if (a.model) return await engineBench(a.model);
  const runtime = "Bun" in globalThis ? "bun" : "deno";
  const results: Row[] = [];
  const shapes: Array<[number, number]> = [[1024, 3072], [3072, 1024]];
  const bar = progress("bench-prefill", shapes.length * 2 * rounds, { unit: "round" });
  for (const [rows, cols] of shapes) {
    const mat = matrix(rows, cols, rows + cols);
    const made = createLutSums([mat], {
      vectorInts: cols + rows,
      slots: Math.max(positions, PREFILL_SLOTS),
      lanes: { lanes: 32, rows },
    });
    if (!made) fail("this runtime has no WebAssembly SIMD");
    const lut = made.lut;
    const groups = cols >> 5;
    const r = createRng(7);
    const vb = lut.slotVectorBytes;
    for (let p = 0; p < positions; p++) {
      const at = (lut.vectorsAt + p * vb) >> 2;
      for (let c = 0; c < cols; c++) lut.mem32[at + c] = r.int(65535) - 32767;
    }
    const xsAt = lut.vectorsAt, outAt = lut.vectorsAt + cols * 4;
    const baseOf = ACC_EXP + 4 - mat.expBase;
    for (const exponents of ["one", "own"] as const) {
      // o and down: each position's input at its own exponent (here −16 … −14).
      const expOf = (p: number) => (exponents === "one" ? -15 : -16 + (p % 3));
      const today = () => {
        for (let from = 0; from < positions; from += PREFILL_SLOTS) {
          const n = Math.min(PREFILL_SLOTS, positions - from);
          for (let b = 0; b < n; b++) {
            const p = from + b;
            lut.planes_offset(xsAt + p * vb, cols, lut.slotPlanesAt + b * lut.slotPlaneBytes);
            lut.mem32[lut.basesIndex + b] = baseOf - expOf(p);
          }
          lut.gemv_lut(
            lut.slotPlanesAt,
            lut.slotPlaneBytes,
            n,
            made.at[0],
            made.scalesAt[0],
            rows,
            groups,
            baseOf + 15,
            exponents === "one" ? -1 : lut.basesAt,
            -16 - ACC_EXP,
            outAt + from * vb,
            vb,
            lut.scratchAt,
          );
        }
      };
      const lanes = (P: number) => () => {
        for (let from = 0; from < positions; from += P) {
          const n = Math.min(P, positions - from);
          for (let b = 0; b < n; b++) lut.mem32[lut.basesIndex + b] = baseOf - expOf(from + b);
          gemvLanes(
            lut,
            P,
            xsAt + from * vb,
            vb,
            n,
            made.at[0],
            made.scalesAt[0],
            rows,
            groups,
            baseOf + 15,
            exponents === "one" ? -1 : lut.basesAt,
            -16 - ACC_EXP,
            outAt + from * vb,
            vb,
            lut.lanesAt,
          );
        }
      };
      const kernels: Array<[string, () => void]> = [
        ["today (gemv_lut, batch " + PREFILL_SLOTS + ")", today],
        ...LANE_COUNTS.map((P): [string, () => void] => [`lanes P=${P}`, lanes(P)]),
      ];
      // Same integers first (a benchmark of a wrong kernel measures nothing).
      const outputs = kernels.map(([, f]) => {
        f();
        const rowsOut: number[] = [];
        for (let p = 0; p < positions; p++) {
          const at = (outAt + p * vb) >> 2;
          rowsOut.push(...lut.mem32.subarray(at, at + rows));
        }
        return rowsOut.join(",");
      });
      if (outputs.some((o) => o !== outputs[0])) fail(`${mat.name}: the kernels disagree`);
      // Repetitions per timing: about 50 ms of today's kernel.
      let reps = 1;
      for (;;) {
        const t0 = performance.now();
        for (let i = 0; i < reps; i++) today();
        if (performance.now() - t0 > 50) break;
        reps *= 2;
      }
      const times = kernels.map(() => [] as number[]);
      for (let round = 0; round < rounds; round++) {
        kernels.forEach(([, f], k) => {
          const t0 = performance.now();
          for (let i = 0; i < reps; i++) f();
          times[k].push((performance.now() - t0) / reps);
        });
        bar.tick();
      }
      const med = times.map(median);
      kernels.forEach(([name], k) => {
        results.push({
          shape: `${rows}x${cols}`,
          exponents,
          kernel: name,
          gwps: (rows * cols * positions) / (med[k] / 1000) / 1e9,
          ratio: med[0] / med[k],
        });
      });
    }
  }
  bar.done();
  const load = loadavg()[0];
  if (a.json) {
    console.log(JSON.stringify({ runtime, positions, rounds, load, results }, null, 2));
    return;
  }
  console.log(
    `${runtime}, ${positions} positions, median of ${rounds} interleaved rounds, load ${load.toFixed(2)}`,
  );
  console.log("shape      exponents  kernel                         G w-pos/s   × today");
  for (const x of results) {
    console.log(
      `${x.shape.padEnd(10)} ${x.exponents.padEnd(10)} ${x.kernel.padEnd(30)} ${
        x.gwps.toFixed(2).padStart(9)
      } ${x.ratio.toFixed(2).padStart(8)}`,
    );
  }
});

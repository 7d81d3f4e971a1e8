// scripts/tools/bench-real.ts's arithmetic and tables (measure/bench-real.ts) (the run itself is minutes long at its smallest,
// so it is a benchmark script, not a test): medians, list parsing, the ratios against llama.cpp and
// against one thread, the fraction of the bandwidth ceiling, and the tables' cells.
import { expect, setDefaultTimeout, test } from "bun:test";
import {
  benchTokens,
  deriveRows,
  type EngineResult,
  engineTable,
  exportTable,
  loadTable,
  median,
  parseCounts,
  streamRead,
} from "../../measure/bench-real.ts";

setDefaultTimeout(20_000); // a bound of its own: each test here is quick

test("median of odd and even lists, and none", () => {
  expect(median([3, 1, 2])).toBe(2);
  expect(median([4, 1, 3, 2])).toBe(2.5);
  expect(() => median([])).toThrow(RangeError);
});

test("--threads lists: positive whole numbers, duplicates dropped, anything else named", () => {
  expect(parseCounts("--threads", "1,2")).toEqual([1, 2]);
  expect(parseCounts("--threads", "2, 2,1")).toEqual([2, 1]);
  for (const bad of ["0", "1,x", "1.5", "", "-1"]) {
    expect(parseCounts("--threads", bad)).toMatch(/^--threads /);
  }
});

const results: EngineResult[] = [
  { engine: "ferry float", runtime: "bun", threads: 1, decode: 10, prefill: 40, bytesPerToken: 1e9 },
  { engine: "ferry float", runtime: "bun", threads: 2, decode: 15, prefill: 60, bytesPerToken: 1e9 },
  { engine: "ferry int", runtime: "bun", threads: 1, decode: 30, prefill: 30, bytesPerToken: 2e8 },
  { engine: "llama.cpp F32", runtime: "bun", threads: 1, decode: 20, prefill: 200, bytesPerToken: 1e9 },
  { engine: "llama.cpp F32", runtime: "bun", threads: 2, decode: 25, prefill: 300, bytesPerToken: 1e9 },
  { engine: "llama.cpp F16", runtime: "bun", threads: 1, decode: 40, prefill: 220, bytesPerToken: 5e8 },
  { engine: "llama.cpp Q4_0", runtime: "bun", threads: 1, decode: 60, prefill: 300, bytesPerToken: 2e8 },
];

test("ratios: ferry over its llama.cpp counterpart at the same threads, 2 over 1 thread, share of the ceiling", () => {
  const rows = deriveRows(results, { 1: 20e9, 2: 30e9 });
  const row = (engine: string, threads: number) =>
    rows.find((r) => r.engine === engine && r.threads === threads)!;
  expect(row("ferry float", 1).vsLlamaDecode).toBeCloseTo(0.5);
  expect(row("ferry float", 1).vsLlamaPrefill).toBeCloseTo(0.2);
  expect(row("ferry float", 2).vsLlamaDecode).toBeCloseTo(0.6);
  expect(row("ferry float", 2).threadGain).toBeCloseTo(1.5);
  expect(row("ferry float", 1).threadGain).toBeNull();
  expect(row("ferry int", 1).vsLlamaDecode).toBeCloseTo(0.5); // against Q4_0, not F32
  expect(row("ferry float", 1).vsF16Decode).toBeCloseTo(0.25); // the 16-bit row, for a bf16-keeping engine
  expect(row("ferry float", 2).vsF16Decode).toBeNull(); // no F16 row at 2 threads
  expect(row("ferry int", 1).vsF16Decode).toBeNull();
  expect(row("llama.cpp F32", 1).vsLlamaDecode).toBeNull();
  expect(row("ferry float", 1).ofCeiling).toBeCloseTo(0.5); // 10 tok/s · 1 GB of 20 GB/s
  expect(row("ferry float", 2).ofCeiling).toBeCloseTo(0.5); // 15 · 1 GB of 30 GB/s
  expect(deriveRows(results, {})[0].ofCeiling).toBeNull();
});

test("the tables: one row each, dashes where nothing compares, percentages of the ceiling", () => {
  const text = engineTable(deriveRows(results, { 1: 20e9, 2: 30e9 }));
  const lines = text.split("\n");
  expect(lines.length).toBe(2 + results.length);
  expect(lines[2]).toBe("| ferry float | bun | 1 | 10.0 | 40.0 | 0.50× | 0.25× | 0.20× | — | 10.0 | 50% |");
  expect(lines[3]).toContain("| 1.50× |");
  const ex = exportTable([{
    format: "lut4",
    dtype: "q4",
    file: "m.lut4",
    seconds: 12.34,
    peakRssMB: 300.4,
    sizeMB: 250.25,
  }]);
  expect(ex.split("\n")[2]).toBe("| lut4 | q4 | 12.3 | 300 | 250.3 |");
  const load = loadTable([{
    engine: "ferry int",
    runtime: "deno",
    threads: 1,
    file: "m.lut4",
    readSeconds: 0.2,
    loadSeconds: 0.5,
  }]);
  expect(load.split("\n")[2]).toBe("| ferry int | deno | 1 | 0.20 | 0.50 | 2.5× |");
});

test("the children's pieces: seeded token ids in range, a streaming read that counts its bytes", () => {
  const a = benchTokens(258, 100, 7);
  expect(a).toEqual(benchTokens(258, 100, 7));
  expect(a).not.toEqual(benchTokens(258, 100, 8));
  expect(a.every((t) => Number.isInteger(t) && t >= 0 && t < 258)).toBe(true);
  const r = streamRead(1 << 20, 2);
  expect(r.bytes).toBe(2 << 20);
  expect(r.seconds).toBeGreaterThan(0);
});

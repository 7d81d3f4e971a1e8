/**
 * The arithmetic of scripts/tools/bench-real.ts (ferry beside llama.cpp at a real model's size), kept
 * apart from its processes so that it can be tested: medians, thread lists, the ratios of each engine
 * to its llama.cpp counterpart and to one thread, the share of the bandwidth ceiling, the tables, and
 * the two measurements its children make (seeded token ids, a streaming read).
 *
 * @example
 * ```ts
 * import { deriveRows, type EngineResult, engineTable } from "./bench-real.ts";
 * declare const results: EngineResult[]; // one per engine and thread count, as measured
 * const rows = deriveRows(results, { 1: 20e9, 2: 30e9 }); // bytes/s of the streaming read by threads
 * console.log(engineTable(rows));
 * ```
 * @module
 */

/** One export: format, dtype, the file written, and what it cost. */
export interface ExportRow {
  format: string;
  dtype: string;
  file: string;
  seconds: number;
  peakRssMB: number;
  sizeMB: number;
}

/** One engine's medians. `bytesPerToken`: the weight bytes a decoded token reads. */
export interface EngineResult {
  engine: string;
  runtime: string;
  threads: number;
  decode: number;
  prefill: number;
  bytesPerToken: number;
}

/** An engine's medians with the ratios the table prints (null where there is nothing to compare). */
export interface EngineRow extends EngineResult {
  /** ferry ÷ llama.cpp at the same thread count (float: F32, int: Q4_0). */
  vsLlamaDecode: number | null;
  /** ferry float's decode ÷ llama.cpp F16's: the fair row for an engine that keeps 16-bit weights. */
  vsF16Decode: number | null;
  vsLlamaPrefill: number | null;
  /** This row's decode ÷ its own 1-thread row's. */
  threadGain: number | null;
  /** Bytes read per second while decoding, ÷ the ceiling at this thread count. */
  ofCeiling: number | null;
}

/**
 * The median of a non-empty list (the mean of the middle two for an even count).
 *
 * @example
 * ```ts
 * import { median } from "./bench-real.ts";
 * median([3, 1, 2]); // 2
 * ```
 */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError("median of nothing");
  const s = [...xs].sort((a, b) => a - b), h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

/** A comma-separated list of positive integers (`--threads 1,2`), or the error message. */
export function parseCounts(flag: string, text: string): number[] | string {
  const xs = text.split(",").map((x) => Number(x.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isSafeInteger(x) || x < 1)) {
    return `${flag} ${text}: expected positive whole numbers separated by commas`;
  }
  return [...new Set(xs)];
}

/** The llama.cpp row a ferry engine is compared with: float with F32, int with Q4_0. */
const COUNTERPART: Record<string, string> = { "ferry float": "llama.cpp F32", "ferry int": "llama.cpp Q4_0" };

/** Adds the ratios to each result; `ceiling` is bytes/s of the streaming read by thread count. */
export function deriveRows(results: readonly EngineResult[], ceiling: Record<number, number>): EngineRow[] {
  return results.map((r) => {
    const other = COUNTERPART[r.engine];
    const llama = other ? results.find((x) => x.engine === other && x.threads === r.threads) : undefined;
    const one = results.find((x) => x.engine === r.engine && x.runtime === r.runtime && x.threads === 1);
    const c = ceiling[r.threads];
    const f16 = r.engine === "ferry float"
      ? results.find((x) => x.engine === "llama.cpp F16" && x.threads === r.threads)
      : undefined;
    return {
      ...r,
      vsLlamaDecode: llama ? r.decode / llama.decode : null,
      vsF16Decode: f16 ? r.decode / f16.decode : null,
      vsLlamaPrefill: llama ? r.prefill / llama.prefill : null,
      threadGain: one && r.threads !== 1 ? r.decode / one.decode : null,
      ofCeiling: c ? (r.decode * r.bytesPerToken) / c : null,
    };
  });
}

const fixed = (
  x: number | null,
  digits = 2,
  suffix = "",
) => (x === null ? "—" : `${x.toFixed(digits)}${suffix}`);

/** The engines' markdown table. */
export function engineTable(rows: readonly EngineRow[]): string {
  const lines = [
    "| engine | runtime | threads | decode tok/s | prefill tok/s | decode ÷ llama.cpp | decode ÷ F16 | prefill ÷ llama.cpp | 2t ÷ 1t | GB/s read | of ceiling |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.engine} | ${r.runtime} | ${r.threads} | ${r.decode.toFixed(1)} | ${r.prefill.toFixed(1)} | ${
        fixed(r.vsLlamaDecode, 2, "×")
      } | ${fixed(r.vsF16Decode, 2, "×")} | ${fixed(r.vsLlamaPrefill, 2, "×")} | ${
        fixed(r.threadGain, 2, "×")
      } | ${((r.decode * r.bytesPerToken) / 1e9).toFixed(1)} | ${
        r.ofCeiling === null ? "—" : `${(100 * r.ofCeiling).toFixed(0)}%`
      } |`,
    );
  }
  return lines.join("\n");
}

/** One ferry engine's load: the seconds of a plain (cached) read of its file and of `loadEngine`. */
export interface LoadRow {
  engine: string;
  runtime: string;
  threads: number;
  file: string;
  readSeconds: number;
  loadSeconds: number;
}

/** The loads' markdown table, with load ÷ read. */
export function loadTable(rows: readonly LoadRow[]): string {
  const lines = [
    "| engine | runtime | threads | read s | load s | load ÷ read |",
    "|---|---|---:|---:|---:|---:|",
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.engine} | ${r.runtime} | ${r.threads} | ${r.readSeconds.toFixed(2)} | ${
        r.loadSeconds.toFixed(2)
      } | ${(r.loadSeconds / r.readSeconds).toFixed(1)}× |`,
    );
  }
  return lines.join("\n");
}

/** The exports' markdown table. */
export function exportTable(rows: readonly ExportRow[]): string {
  const lines = ["| format | dtype | seconds | peak RSS MB | size MB |", "|---|---|---:|---:|---:|"];
  for (const r of rows) {
    lines.push(
      `| ${r.format} | ${r.dtype} | ${r.seconds.toFixed(1)} | ${r.peakRssMB.toFixed(0)} | ${
        r.sizeMB.toFixed(1)
      } |`,
    );
  }
  return lines.join("\n");
}

/**
 * `n` token ids in [0, vocab) from a 32-bit xorshift of `seed`: with random weights any ids time as
 * well as text, and every engine is given the same ones.
 */
export function benchTokens(vocab: number, n: number, seed: number): number[] {
  let s = (seed >>> 0) || 0x9e3779b9;
  return Array.from({ length: n }, () => {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0;
    return s % vocab;
  });
}

/** Reads `bytes` of memory end to end (after a first, untimed pass): the streaming-read rate of one thread. */
export function streamRead(bytes: number, passes = 3): { bytes: number; seconds: number; sum: number } {
  const a = new Float64Array(Math.max(1, Math.floor(bytes / 8)));
  for (let i = 0; i < a.length; i += 512) a[i] = i;
  const sweep = () => {
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (let i = 0; i + 3 < a.length; i += 4) s0 += a[i], s1 += a[i + 1], s2 += a[i + 2], s3 += a[i + 3];
    return s0 + s1 + s2 + s3;
  };
  let sum = sweep();
  const t0 = performance.now();
  for (let p = 0; p < passes; p++) sum += sweep();
  return { bytes: a.length * 8 * passes, seconds: (performance.now() - t0) / 1000, sum };
}

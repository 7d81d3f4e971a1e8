/**
 * Benchmarks dmexp at scale on a synthetic checkpoint (at least 512 MB by default), side by side in
 * one run: plain file copy, export to bf16, plain read, open-and-verify, and the export's peak
 * resident memory against its largest tensor.
 *
 * Each operation runs in a fresh child process of the same runtime, so its peak memory (VmHWM) is its
 * own; times exclude process start. The page cache is warm for all of them (the source is read once
 * first), and the copy, like the export, writes a temporary file, fsyncs it and renames it, so both
 * pay for the same durability. Throughput is bytes of the file each operation consumes per second
 * (the checkpoint for copy and export, the dmexp file for read and verify); the median of the runs.
 *
 * @example
 * ```ts
 * // deno run -A scripts/tools/bench-dmexp.ts            (512 MB, 3 runs each, in the system temp folder)
 * // bun scripts/tools/bench-dmexp.ts --mb 1024 --runs 5 --json
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { open, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { openAtomic } from "../../formats/io.ts";
import { verifyDmexp } from "../../formats/dmexp/dmexp.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import { numel, type Tensor } from "../../model/tensor.ts";
import { exportCheckpoint } from "../../formats/export.ts";

const HELP = `
Benchmark dmexp on a synthetic checkpoint: copy vs export (bf16), read vs verify, export peak memory.

Usage: deno run -A scripts/tools/bench-dmexp.ts [--mb N] [--runs N] [--dir PATH] [--json]

Options:
  --mb N       model size of the synthetic checkpoint in MB (default 512; rounded up to whole layers)
  --runs N     runs of each operation; the median is reported (default 3)
  --dir PATH   where the temporary folder goes (default the system temp folder); removed at the end
  --json       print the results as JSON
  -h, --help   this text
`;

const CHUNK = 4 << 20;

/** A wide, shallow model: 180 MB per layer, its largest tensor (an MLP matrix) 46 MB. */
export function benchConfig(mb: number): ModelConfig {
  const base: ModelConfig = {
    vocab_size: 258,
    hidden_size: 2048,
    intermediate_size: 5632,
    num_hidden_layers: 1,
    num_attention_heads: 16,
    num_key_value_heads: 4,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 512,
    tie_word_embeddings: false,
  };
  const bytes = (c: ModelConfig) => paramShapes(c).reduce((n, p) => n + numel(p.dims) * 4, 0);
  while (bytes(base) < mb * 1e6) base.num_hidden_layers++;
  return base;
}

// Peak resident memory of this process, from the kernel (Linux); elsewhere the current RSS.
function peakRss(): { bytes: number; what: string } {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
    if (kb) return { bytes: Number(kb[1]) * 1024, what: "VmHWM" };
  } catch { /* not Linux */ }
  return { bytes: process.memoryUsage().rss, what: "rss at end" };
}

// ---- the child side: one operation, timed, then its numbers as one JSON line ----

async function child(op: string, a: string, b: string): Promise<void> {
  const t0 = performance.now();
  let bytes = 0;
  if (op === "copy") {
    const src = await open(a, "r"), w = await openAtomic(b), buf = new Uint8Array(CHUNK);
    for (;;) {
      const { bytesRead } = await src.read(buf, 0, CHUNK, bytes);
      if (bytesRead === 0) break;
      await w.write(buf.subarray(0, bytesRead));
      bytes += bytesRead;
    }
    await src.close();
    await w.commit();
  } else if (op === "read") {
    const src = await open(a, "r"), buf = new Uint8Array(CHUNK);
    for (;;) {
      const { bytesRead } = await src.read(buf, 0, CHUNK, bytes);
      if (bytesRead === 0) break;
      bytes += bytesRead;
    }
    await src.close();
  } else if (op === "export") {
    await exportCheckpoint({ input: a, output: b, format: "dmexp", dtype: "bf16" });
    bytes = (await stat(a)).size;
  } else if (op === "verify") {
    bytes = (await verifyDmexp(a)).fileBytes;
  } else if (op !== "idle") {
    throw new Error(`unknown child operation ${op}`);
  }
  const seconds = (performance.now() - t0) / 1000;
  console.log(JSON.stringify({ op, bytes, seconds, peak: peakRss() }));
}

function runChild(
  op: string,
  a = "",
  b = "",
): { bytes: number; seconds: number; peak: { bytes: number; what: string } } {
  const self = fileURLToPath(import.meta.url);
  const deno = typeof (globalThis as { Deno?: unknown }).Deno !== "undefined";
  const args = deno ? ["run", "-A", self, "--child", op, a, b] : [self, "--child", op, a, b];
  const r = spawnSync(process.execPath, args, { encoding: "utf8", maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`bench child ${op} failed (exit ${r.status}): ${r.stderr.trim()}`);
  return JSON.parse(r.stdout.trim().split("\n").pop()!);
}

// ---- the parent side ----

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const mb = (b: number) => (b / 1e6).toFixed(1);

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    mb: { type: "string" },
    runs: { type: "string" },
    dir: { type: "string" },
    json: { type: "boolean" },
    child: { type: "string" },
  });
  if (values.child) return await child(values.child, positionals[0] ?? "", positionals[1] ?? "");
  const size = Number(values.mb ?? 512), runs = Number(values.runs ?? 3);
  if (!(size > 0) || !(Number.isInteger(runs) && runs > 0)) {
    fail("--mb and --runs must be positive numbers", EXIT_USAGE);
  }
  const dir = mkdtempSync(join(values.dir ?? tmpdir(), "ferry-bench-dmexp-"));
  const say = (s: string) => process.stderr.write(s + "\n");
  try {
    const config = benchConfig(size);
    const shapes = paramShapes(config);
    const largest = Math.max(...shapes.map((p) => numel(p.dims) * 4));
    say(`bench: writing a synthetic ${config.num_hidden_layers}-layer checkpoint to ${dir}`);
    // Deterministic, varied values (an LCG), so the narrowing and the CRC see realistic bits.
    let s = 12345;
    const tensors: Tensor[] = shapes.map(({ name, dims }) => {
      const data = new Float32Array(numel(dims));
      for (let i = 0; i < data.length; i++) {
        s = (Math.imul(s, 1664525) + 1013904223) | 0, data[i] = (s >> 8) * 6e-9;
      }
      return { name, dims, data };
    });
    const ckpt = join(dir, "synthetic.ckpt");
    await writeCheckpoint(ckpt, config, { step: 1, model: tensors });
    tensors.length = 0;
    const ckptBytes = (await stat(ckpt)).size;
    const out = join(dir, "synthetic.bf16.dmexp");
    runChild("read", ckpt); // warm the page cache for both copy and export
    const idle = runChild("idle");
    const results: Record<string, ReturnType<typeof runChild>[]> = {
      copy: [],
      export: [],
      read: [],
      verify: [],
    };
    for (let r = 0; r < runs; r++) {
      say(`bench: run ${r + 1}/${runs}: copy, export, read, verify`);
      results.copy.push(runChild("copy", ckpt, join(dir, "copy.ckpt")));
      rmSync(join(dir, "copy.ckpt"), { force: true });
      results.export.push(runChild("export", ckpt, out));
      results.read.push(runChild("read", out));
      results.verify.push(runChild("verify", out));
    }
    const rate = (op: string) => median(results[op].map((x) => x.bytes / x.seconds));
    const secs = (op: string) => median(results[op].map((x) => x.seconds));
    const exportPeak = Math.max(...results.export.map((x) => x.peak.bytes));
    const report = {
      runtime: typeof (globalThis as { Deno?: unknown }).Deno !== "undefined" ? "deno" : "bun",
      checkpoint_bytes: ckptBytes,
      dmexp_bytes: (await stat(out)).size,
      largest_tensor_bytes: largest,
      runs,
      copy: { seconds: secs("copy"), bytes_per_s: rate("copy") },
      export_bf16: {
        seconds: secs("export"),
        bytes_per_s: rate("export"),
        ratio_to_copy: rate("export") / rate("copy"),
      },
      read: { seconds: secs("read"), bytes_per_s: rate("read") },
      verify: {
        seconds: secs("verify"),
        bytes_per_s: rate("verify"),
        ratio_to_read: rate("verify") / rate("read"),
      },
      export_peak_rss_bytes: exportPeak,
      idle_runtime_rss_bytes: idle.peak.bytes,
      peak_measure: idle.peak.what,
      targets: {
        export_at_least_70pct_of_copy: rate("export") / rate("copy") >= 0.7,
        verify_at_least_80pct_of_read: rate("verify") / rate("read") >= 0.8,
        peak_within_largest_tensor_plus_64MB: exportPeak <= largest + (64 << 20),
      },
    };
    if (values.json) {
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    const yes = (b: boolean) => (b ? "met" : "MISSED");
    console.log(
      `dmexp benchmark (${report.runtime}, median of ${runs}; checkpoint ${mb(ckptBytes)} MB, bf16 dmexp ${
        mb(report.dmexp_bytes)
      } MB, largest tensor ${mb(largest)} MB)`,
    );
    console.log(
      `  plain copy      ${mb(report.copy.bytes_per_s).padStart(8)} MB/s  ${
        report.copy.seconds.toFixed(2)
      } s  (read + write + fsync + rename)`,
    );
    console.log(
      `  export bf16     ${mb(report.export_bf16.bytes_per_s).padStart(8)} MB/s  ${
        report.export_bf16.seconds.toFixed(2)
      } s  = ${(100 * report.export_bf16.ratio_to_copy).toFixed(0)}% of copy  (target >= 70%: ${
        yes(report.targets.export_at_least_70pct_of_copy)
      })`,
    );
    console.log(
      `  plain read      ${mb(report.read.bytes_per_s).padStart(8)} MB/s  ${
        report.read.seconds.toFixed(2)
      } s`,
    );
    console.log(
      `  open + verify   ${mb(report.verify.bytes_per_s).padStart(8)} MB/s  ${
        report.verify.seconds.toFixed(2)
      } s  = ${(100 * report.verify.ratio_to_read).toFixed(0)}% of read  (target >= 80%: ${
        yes(report.targets.verify_at_least_80pct_of_read)
      })`,
    );
    console.log(
      `  export peak RSS ${mb(exportPeak).padStart(8)} MB (${report.peak_measure}; an idle runtime is ${
        mb(idle.peak.bytes)
      } MB)  limit = largest tensor + 64 MiB = ${mb(largest + (64 << 20))} MB  (${
        yes(report.targets.peak_within_largest_tensor_plus_64MB)
      })`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await run(main);

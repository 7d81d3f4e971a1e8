/**
 * The GGUF writer and reader at real size: writes a Qwen3-0.6B-shaped model (the real tokenizer, 151,936
 * vocabulary rows, 28 layers) from synthetic streamed tensor sources, so nothing but the writer holds
 * memory, and reports the time, the file's size and the process's peak resident memory against the
 * largest tensor; then reads the header and tokenizer back, and, with `--read`, the whole model.
 *
 * Each step runs in a fresh child process of the same runtime, so its peak memory (VmHWM) is its own.
 * The values are a cheap deterministic pattern, not a trained model: this measures bytes and memory.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-gguf-stream.ts                  (bf16, in the system temp folder)
 * // deno run -A scripts/tools/bench-gguf-stream.ts --dtype q8_0 --read --json
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { cli, fail, run } from "../cli.ts";
import {
  GGUF_DTYPE_NAMES,
  type GgufDtype,
  readGguf,
  readGgufTokenizer,
  writeGguf,
} from "../../formats/gguf/gguf.ts";
import { type ModelConfig, paramShapes } from "../../model/config.ts";
import { numel, type TensorSource } from "../../model/tensor.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../../model/tokenizer-types.ts";

const HELP = `
Write (and read) a Qwen3-0.6B-shaped GGUF from streamed sources; report time and peak memory.

Usage: bun scripts/tools/bench-gguf-stream.ts [--dtype TYPE] [--read] [--dir PATH] [--json]

Options:
  --dtype TYPE  the matrices' type (default bf16; one of ${GGUF_DTYPE_NAMES.join(", ")})
  --read        also read the whole file back (the reader returns f32 tensors: 2.4 GB for 0.6B)
  --dir PATH    where the temporary folder goes (default the system temp folder); removed at the end
  --json        print the results as JSON
  -h, --help    this text
`;

/** Qwen3-0.6B's config.json as ferry reads it (shared/reference/qwen3_real.md). */
function qwen3Config(): ModelConfig {
  return {
    vocab_size: 151_936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 1_000_000,
    max_position_embeddings: 40960,
    tie_word_embeddings: true,
  };
}

/** The real Qwen3 tokenizer's files: the repository's pinned copy (a path; scripts import nothing from tests/). */
const QWEN3_TOKENIZER_DIR = fileURLToPath(
  new URL("../../tests/fixtures/qwen3-tokenizer/", import.meta.url),
);

/** Sources that make their values on demand: a small pattern around 0 (norms around 1). */
function syntheticSources(config: ModelConfig): TensorSource[] {
  return paramShapes(config).map(({ name, dims }) => ({
    name,
    dims,
    read(start, count, scratch) {
      const center = dims.length === 1 ? 1 : 0;
      for (let i = 0; i < count; i++) scratch[i] = center + (((start + i) * 2654435761) % 2001 - 1000) * 2e-5;
      return scratch;
    },
  }));
}

function peakRss(): number {
  const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
  return kb ? Number(kb[1]) * 1024 : process.memoryUsage().rss;
}

async function child(op: string, path: string, dtype: GgufDtype): Promise<void> {
  const t0 = performance.now();
  if (op === "write") {
    const tokenizer = {} as TokenizerFiles;
    for (const name of TOKENIZER_FILE_NAMES) {
      try {
        tokenizer[name] = readFileSync(join(QWEN3_TOKENIZER_DIR, name), "utf8");
      } catch { /* the package ships tokenizer.json and tokenizer_config.json */ }
    }
    const config = qwen3Config();
    await writeGguf(path, syntheticSources(config), config, { type: dtype, tokenizer });
  } else if (op === "tokenizer") {
    if (!(await readGgufTokenizer(path))) throw new Error("no tokenizer read back");
  } else {
    const { tensors } = await readGguf(path);
    if (tensors.length === 0) throw new Error("no tensors read back");
  }
  console.log(JSON.stringify({ op, ms: performance.now() - t0, peak: peakRss() }));
}

const mb = (b: number) => (b / 1e6).toFixed(0);

async function main(): Promise<void> {
  const { values } = cli(HELP, {
    dtype: { type: "string", default: "bf16", choices: GGUF_DTYPE_NAMES },
    read: { type: "boolean" },
    dir: { type: "string" },
    json: { type: "boolean" },
    child: { type: "string" },
    path: { type: "string" },
  });
  const dtype = values.dtype as GgufDtype;
  if (values.child) return await child(values.child, values.path!, dtype);
  const dir = mkdtempSync(join(values.dir ?? tmpdir(), "ferry-bench-gguf-"));
  const path = join(dir, `qwen3-0.6b.${dtype}.gguf`);
  const self = fileURLToPath(import.meta.url);
  const runtime = "Deno" in globalThis ? ["run", "-A", self] : [self];
  try {
    const rows = [];
    for (const op of ["write", "tokenizer", ...(values.read ? ["read"] : [])]) {
      const r = spawnSync(process.execPath, [...runtime, "--child", op, "--path", path, "--dtype", dtype], {
        encoding: "utf8",
        maxBuffer: 1 << 20,
      });
      if (r.status !== 0) fail(`${op} failed: ${r.stderr.trim().split("\n").slice(-3).join(" ")}`);
      rows.push(JSON.parse(r.stdout.trim().split("\n").pop()!));
    }
    const largest = Math.max(...paramShapes(qwen3Config()).map((p) => numel(p.dims))) * 4;
    const out = { dtype, fileBytes: statSync(path).size, largestTensorF32Bytes: largest, rows };
    if (values.json) return console.log(JSON.stringify(out, null, 2));
    console.log(
      `Qwen3-0.6B shape, ${dtype}: ${mb(out.fileBytes)} MB file; largest tensor ${mb(largest)} MB as f32`,
    );
    for (const r of rows) {
      console.log(`${r.op.padEnd(10)} ${(r.ms / 1000).toFixed(1)} s   peak RSS ${mb(r.peak)} MB`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) await run(main);

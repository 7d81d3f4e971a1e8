/**
 * Qwen3 Hugging Face folders for tests, written by the independent fixture writer
 * (scripts/tools/make-qwen3.ts, run as its own process: tests import no scripts/ module) and cached
 * per options for the whole test process. The default, the reduced shape (the real 151,936-token
 * vocabulary and tokenizer over a 64-wide, 2-layer body, about 10M parameters), takes under a second.
 *
 * @example
 * ```ts
 * const dir = await qwen3Folder({ peaked: true });   // a cached folder under the system temp dir
 * const { config } = await hfFormat.read(dir);
 * ```
 * @module
 */
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import process from "node:process";

/** Where the real Qwen3 tokenizer files are: the pinned copy in tests/fixtures/qwen3-tokenizer (see its README). */
export const QWEN3_TOKENIZER_DIR = fileURLToPath(
  new URL("../../tests/fixtures/qwen3-tokenizer/", import.meta.url),
);

const SCRIPT = fileURLToPath(new URL("../../scripts/tools/make-qwen3.ts", import.meta.url));

/** A Qwen3 shape's config fields (scripts/tools/make-qwen3.ts `Qwen3Shape`). */
export interface Qwen3Shape {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  tie_word_embeddings: boolean;
  max_position_embeddings: number;
  rope_theta: number;
}

/** What to write: the script's flags as options (see its --help). */
export interface Qwen3FolderOptions {
  /** A shape name (`reduced`, `qwen3-0.6b`, `qwen3-0.6b-body`), or fields over the reduced shape. */
  shape?: string | Partial<Qwen3Shape>;
  seed?: number;
  peaked?: boolean;
  /** The logits' spread in nats (`--logit-std`). */
  logitStd?: number;
  /** Log-uniform gains for the norms a quantized matrix reads (`--norm-spread`). */
  normSpread?: number;
  dtype?: "bf16" | "f32";
  shardBytes?: number;
  /** A folder to copy the tokenizer from; null for none (default: the script's choice). */
  tokenizerDir?: string | null;
}

const run = promisify(execFile);

/**
 * Writes a folder with these options into `dir` and returns what the script reports.
 *
 * @example
 * ```ts
 * const { params } = await makeQwen3Folder("/tmp/q", { shape: { hidden_size: 32 }, seed: 2 });
 * ```
 */
export async function makeQwen3Folder(
  dir: string,
  options: Qwen3FolderOptions = {},
): Promise<{ files: string[]; params: number; shape: Qwen3Shape }> {
  const args = [SCRIPT, "--out", dir, "--json"];
  if (typeof options.shape === "string") args.push("--shape", options.shape);
  else if (options.shape) args.push("--shape-json", JSON.stringify(options.shape));
  if (options.seed !== undefined) args.push("--seed", String(options.seed));
  if (options.peaked) args.push("--peaked");
  if (options.logitStd !== undefined) args.push("--logit-std", String(options.logitStd));
  if (options.normSpread !== undefined) args.push("--norm-spread", String(options.normSpread));
  if (options.dtype) args.push("--dtype", options.dtype);
  if (options.shardBytes) args.push("--shard-bytes", String(Math.round(options.shardBytes)));
  if (options.tokenizerDir === null) args.push("--no-tokenizer");
  else if (options.tokenizerDir) args.push("--tokenizer", options.tokenizerDir);
  const runtime = process.execPath, pre = /deno/.test(runtime) ? ["run", "-A"] : [];
  const { stdout } = await run(runtime, [...pre, ...args], { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

const made = new Map<string, Promise<string>>();
let root: string | undefined;

/**
 * A folder with these options (default: the reduced shape, seed 1, bf16, one file, the real
 * tokenizer), written once per process. Treat it as read-only: copy it before changing anything.
 */
export function qwen3Folder(options: Qwen3FolderOptions = {}): Promise<string> {
  const key = JSON.stringify(options);
  let dir = made.get(key);
  if (!dir) {
    root ??= mkdtempSync(join(tmpdir(), "ferry-qwen3-"));
    const path = join(root, `m${made.size}`);
    dir = makeQwen3Folder(path, options).then(() => path);
    made.set(key, dir);
  }
  return dir;
}

/**
 * ferry's 4-bit GGUF quantizers against llama.cpp's own, scored by llama.cpp's own tools: from ferry's
 * F32 GGUF of a checkpoint, llama-quantize writes Q4_0, Q4_K_M and IQ4_NL with and without an imatrix
 * (llama-imatrix over the calibration windows ferry uses), ferry exports the same types plain and
 * calibrated, and llama-perplexity --kl-divergence scores every file against the F32 file's logits over
 * the held-out windows. ferry's float engine scores the same files at the same positions beside it.
 * Needs llama.cpp's tools: scripts/tools/build-llama.ts builds them once.
 *
 * @module
 */
import { spawn } from "node:child_process";
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../../formats/checkpoint/parts.ts";
import { type Lut4File, readLut4 } from "../../formats/lut4/lut4.ts";
import { openIntEngine } from "../../engines/int/engine.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { GGML_TYPES, type GgmlType, readGguf, writeGguf } from "../../formats/gguf/gguf.ts";
import { type GgufHeader, parseGgufHeader } from "../../formats/gguf/gguf-container.ts";
import { calibrateOnce, CALIBRATION, lut4Calibrator } from "../../measure/calibrate.ts";
import { calibrationWindows } from "../../measure/calibration-text.ts";
import { findLlamaTools, type LlamaTools } from "../../measure/llama-tools.ts";
import { compareLogits, windowLogits } from "../../measure/metrics.ts";
import { evalWindows, loadBrown, WINDOW_BYTES } from "../../model/corpus.ts";
import { buildModel, type Model } from "../../model/qwen3.ts";
import { BOS } from "../../model/tokenizer.ts";

/** Tokens per llama-perplexity and llama-imatrix chunk, and per ferry calibration window, with --folder. */
const FOLDER_CHUNK = 256;

/** The types compared: ferry's GGUF dtype and llama-quantize's name for it. */
const TYPES = [
  { ferry: "q4_0", llama: "Q4_0", pure: true },
  { ferry: "q4_k_m", llama: "Q4_K_M", pure: false },
  { ferry: "iq4_nl", llama: "IQ4_NL", pure: true },
] as const;

/** ferry's lut4 dtypes, scored by ferry's integer engine only (no llama.cpp tool reads lut4). */
const LUT4_TYPES = ["q4", "q4-head"] as const;

/**
 * The llama.cpp files (with the imatrix) each calibrated lut4 file is set against: Q4_K_M and IQ4_NL, the
 * latter also `--pure` (llama.cpp's default IQ4_NL mix may hold types ferry's engine does not read).
 */
const LUT4_AGAINST = [
  { type: "q4_k_m", pure: false },
  { type: "iq4_nl", pure: false },
  { type: "iq4_nl", pure: true },
] as const;

const HELP = `
deno run -A scripts/tools/compare-llama-quant.ts [options]      (or: bun scripts/tools/compare-llama-quant.ts)

ferry's GGUF quantizers against llama.cpp's llama-quantize, both scored by llama-perplexity
--kl-divergence against the F32 GGUF's logits over the held-out windows (as docs/fidelity.md). Steps:
  1. ferry writes the checkpoint as an F32 GGUF, and Q4_0, Q4_K_M and IQ4_NL plain and calibrated
     (--calibrate windows of the Brown training split, as export.ts; ferry's Q4_0 takes no importance)
  2. llama-imatrix runs the F32 file over the same calibration windows
  3. llama-quantize writes each type from the F32 file, without and with that imatrix; Q4_0 and
     IQ4_NL also with --pure (otherwise llama.cpp keeps the tied embedding, which is the head, at Q8_0
     on a model whose rows are not a multiple of 256; ferry writes every matrix in the one type)
  4. llama-perplexity saves the F32 file's logits over the held-out windows (--kl-divergence-base),
     then scores every file against them (--kl-divergence)
  5. ferry's float engine scores every file at the same positions against the checkpoint (ferry KL)
  6. ferry's lut4 (q4 and q4-head, plain and calibrated on the same windows) on ferry's integer engine,
     scored the same way; set beside llama.cpp's Q4_K_M and IQ4_NL with the imatrix at their bits

Each window is one llama-perplexity chunk of BOS + 256 bytes (-c 257), so the chunks hold exactly the
windows ferry's measure uses; llama-perplexity scores the second half of each chunk (positions 128-255).
Needs llama.cpp's tools (deno run -A scripts/tools/build-llama.ts, once).

With --folder, a Hugging Face Qwen3 folder with its own tokenizer (Qwen3-0.6B's shape: make-qwen3.ts)
instead of a byte checkpoint. The texts are then cut by llama.cpp's tokenizer, which is ferry's (tested
by tests/llama/gguf-tokenizer-llama.test.ts): the held-out text in --windows chunks of 256 tokens, and
--calibrate windows of 256 tokens of the training split's start, which ferry's calibration reads as a
--calibration file and llama-imatrix as its -f text: the same tokens on both sides. Step 5 is skipped
and so is step 6 (ferry's engines over every file are hours at that size; scripts/measure.ts scores
ferry's files).

Options:
  --checkpoint PATH   model (default ${DEFAULT_INPUT})
  --folder DIR        a Hugging Face Qwen3 folder instead (see above)
  --windows N         held-out windows (default 64)
  --calibrate N       calibration windows for both imatrices (default ${CALIBRATION.windows})
  --threads N         llama.cpp threads (default: one per core)
  --keep DIR          write every file (GGUFs, texts, imatrix, logs) to DIR and keep them
  --json              print the rows as JSON
  -h, --help          this text
`;

/** One scored file. */
interface Row {
  side: "ferry" | "llama";
  /** The engine behind "KL (ferry engine)": float for every GGUF, int for lut4. */
  engine: "float" | "int";
  type: string;
  imatrix: boolean;
  /** llama-quantize --pure: every matrix in the one type, the head included. */
  pure: boolean;
  file: string;
  bytes: number;
  /** Bits per weight over the 2-D matrices, and the types they were stored in. */
  bpw: number;
  types: string;
  /** llama-perplexity --kl-divergence: mean KLD and its ±, 99th percentile, same top token. */
  kld: number;
  kldErr: number;
  kldP99: number;
  sameTop: number;
  /** ferry's engine on the file against the checkpoint, at the same positions (NaN: not run). */
  ferryKL: number;
}

if (import.meta.main) {
  const { values, positionals } = cli(HELP, {
    checkpoint: { type: "string", default: DEFAULT_INPUT },
    folder: { type: "string" },
    windows: { type: "string", default: "64" },
    calibrate: { type: "string", default: String(CALIBRATION.windows) },
    threads: { type: "string" },
    keep: { type: "string" },
    json: { type: "boolean", default: false },
  });
  if (positionals.length > 0) fail(`unexpected argument ${positionals[0]}\n(--help for more)`, EXIT_USAGE);
  const count = (flag: string, v: string, least = 2) => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < least) {
      fail(`--${flag} ${v}: expected a whole number of at least ${least}`, EXIT_USAGE);
    }
    return n;
  };
  const windows = count("windows", values.windows);
  const calWindows = count("calibrate", values.calibrate);
  const threads = values.threads === undefined ? availableParallelism() : count("threads", values.threads, 1);
  await run(async () => {
    const tools = findLlamaTools();
    const dir = values.keep ?? mkdtempSync(join(tmpdir(), "ferry-llama-quant-"));
    mkdirSync(dir, { recursive: true });
    try {
      const rows = await compare(tools, {
        checkpoint: values.checkpoint,
        folder: values.folder,
        windows,
        calWindows,
        threads,
        dir,
      });
      if (values.json) {
        console.log(JSON.stringify({ llama: tools.commit, windows, calWindows, rows }, null, 2));
      } else console.log(formatRows(rows, tools.commit, windows, calWindows, values.folder !== undefined));
    } finally {
      if (!values.keep) rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** Runs every step; returns one row per scored file. */
async function compare(
  tools: LlamaTools,
  opts: {
    checkpoint: string;
    folder?: string;
    windows: number;
    calWindows: number;
    threads: number;
    dir: string;
  },
): Promise<Row[]> {
  const { dir, threads } = opts;
  const t = ["-t", String(threads)];
  const folder = opts.folder, input = folder ?? opts.checkpoint;
  // ferry's files, the imatrix, the base logits and ferry's reference; then each llama file written;
  // then every file scored (the F32 one, ferry's two per type, llama's).
  const llamaFiles = TYPES.reduce((n, t) => n + (t.pure ? 4 : 2), 0);
  const lut4Files = opts.folder ? 0 : 2 * LUT4_TYPES.length;
  const steps = 4 + llamaFiles + 1 + 2 * TYPES.length + llamaFiles + lut4Files;
  const bar = progress("compare", steps, { unit: "step" });
  const { train, heldOut } = await loadBrown();
  const held = evalWindows(heldOut, opts.windows);
  const heldText = join(dir, "heldout.txt"), calText = join(dir, "calibration.txt");
  if (folder) {
    // Text, cut into chunks of tokens by each tool: at most 8 bytes a token leaves none short.
    writeFileSync(heldText, heldOut);
    writeFileSync(calText, train.subarray(0, 8 * FOLDER_CHUNK * opts.calWindows));
  } else {
    writeFileSync(heldText, chunkText(held));
    writeFileSync(
      calText,
      chunkText(calibrationWindows(train, opts.calWindows, CALIBRATION.seed, WINDOW_BYTES)),
    );
  }

  // 1. ferry's files. llama.cpp's tools start from an F32 file without ferry's digest: llama-quantize
  // copies the metadata, and a digest of the F32 file would not match the quantized one. (A folder's
  // F32 file keeps it: no file of llama's is read back by ferry then.)
  const source = folder ? undefined : await checkpointModel(opts.checkpoint);
  const f32 = join(dir, "f32.gguf");
  if (source) await writeGguf(f32, source.tensors, source.config, { type: "f32", digest: false });
  else await exportCheckpoint({ input, format: "gguf", dtype: "f32", output: f32 });
  const calibrate = calibrateOnce(
    lut4Calibrator(
      folder
        ? { file: calText, windows: opts.calWindows }
        : { windows: opts.calWindows, seed: CALIBRATION.seed },
    ),
  );
  const files: Array<Pick<Row, "side" | "type" | "imatrix" | "pure" | "file">> = [];
  for (const { ferry } of TYPES) {
    for (const imatrix of [false, true]) {
      const file = join(dir, `ferry.${ferry}${imatrix ? ".imatrix" : ""}.gguf`);
      // ferry's Q4_0 takes no importance: its calibrated file is its plain one.
      if (!(ferry === "q4_0" && imatrix)) {
        await exportCheckpoint({
          input,
          format: "gguf",
          dtype: ferry,
          output: file,
          calibrate: imatrix ? calibrate : undefined,
        });
      }
      files.push({
        side: "ferry",
        type: ferry,
        imatrix,
        pure: false,
        file: ferry === "q4_0" ? join(dir, "ferry.q4_0.gguf") : file,
      });
    }
  }
  bar.tick(1, "ferry's files");

  // 2. llama-imatrix over the calibration windows.
  const imatrixFile = join(dir, "imatrix.gguf");
  const chunks = (n: number) =>
    folder ? ["-c", `${FOLDER_CHUNK}`, "-b", `${FOLDER_CHUNK}`, "--chunks", `${n}`] : [
      "-c",
      "257",
      "-b",
      "257",
    ];
  await tool(tools.paths["llama-imatrix"], [
    "-m",
    f32,
    "-f",
    calText,
    "-o",
    imatrixFile,
    ...chunks(opts.calWindows),
    "--no-ppl",
    ...t,
  ], join(dir, "imatrix.log"));
  bar.tick(1, "imatrix");

  // 3. llama-quantize.
  for (const { ferry, llama, pure: hasPure } of TYPES) {
    for (
      const [pure, imatrix] of [
        [false, false],
        [false, true],
        ...(hasPure ? [[true, false], [true, true]] : []),
      ]
    ) {
      const file = join(dir, `llama.${ferry}${pure ? ".pure" : ""}${imatrix ? ".imatrix" : ""}.gguf`);
      await tool(tools.paths["llama-quantize"], [
        ...(pure ? ["--pure"] : []),
        ...(imatrix ? ["--imatrix", imatrixFile] : []),
        f32,
        file,
        llama,
        String(threads),
      ], `${file}.log`);
      files.push({ side: "llama", type: ferry, imatrix, pure, file });
      bar.tick(1, `llama ${llama}${pure ? " pure" : ""}${imatrix ? " imatrix" : ""}`);
    }
  }

  // 4. llama-perplexity: the F32 file's logits, then every file against them.
  const base = join(dir, "f32.kld");
  const ppl = [...chunks(opts.windows), ...t];
  const baseLog = await tool(
    tools.paths["llama-perplexity"],
    ["-m", f32, "-f", heldText, "--kl-divergence-base", base, ...ppl],
    join(dir, "f32.kld.log"),
  );
  if (!folder) checkChunks(base, held, baseLog);
  bar.tick(1, "base logits");

  // 5. ferry's own scorer: the checkpoint's logits on ferry's float engine at llama-perplexity's positions.
  const V = source?.config.vocab_size ?? 0;
  const scored = (m: Model) => held.map((w) => secondHalf(windowLogits(m, w), V));
  const ref = source && concat(scored(source));
  bar.tick(1, "ferry reference");

  const rows: Row[] = [];
  // ferry's Q4_0 is one file for both its rows: scored once.
  const byFile = new Map<string, Omit<Row, "side" | "engine" | "type" | "imatrix" | "pure" | "file">>();
  for (
    const f of [{ side: "llama" as const, type: "f32", imatrix: false, pure: false, file: f32 }, ...files]
  ) {
    const known = byFile.get(f.file);
    if (known) {
      rows.push({ ...f, engine: "float", ...known });
      bar.tick(1);
      continue;
    }
    const log = await toolPrinting(
      /Same top p:/,
      tools.paths["llama-perplexity"],
      ["-m", f.file, "--kl-divergence-base", base, "--kl-divergence", ...ppl],
      `${f.file}.kld.log`,
    );
    const ferryKL = ref ? await ferryScore(f.file) : NaN;
    const figures = { ...weightFigures(f.file), ...kldFigures(log, f.file), ferryKL };
    byFile.set(f.file, figures);
    rows.push({ ...f, engine: "float", ...figures });
    bar.tick(1, `${f.side} ${f.type}${f.imatrix ? " imatrix" : ""}`);
  }

  // 6. ferry's lut4 on the integer engine, the same positions against the same reference.
  for (const dtype of ref ? LUT4_TYPES : []) {
    for (const imatrix of [false, true]) {
      const file = join(dir, `ferry.${dtype}${imatrix ? ".calibrated" : ""}.lut4`);
      await exportCheckpoint({
        input,
        format: "lut4",
        dtype,
        output: file,
        calibrate: imatrix ? calibrate : undefined,
      });
      const lut4 = await readLut4(file);
      const engine = await openIntEngine(lut4);
      try {
        const logits: Float32Array[] = [];
        for (const w of held) logits.push(secondHalf(await windowLogits(engine, w), V));
        rows.push({
          side: "ferry",
          engine: "int",
          type: `lut4 ${dtype}`,
          imatrix,
          pure: false,
          file,
          bytes: lut4.bytes,
          ...lut4Figures(lut4),
          kld: NaN,
          kldErr: NaN,
          kldP99: NaN,
          sameTop: NaN,
          ferryKL: compareLogits(ref!, concat(logits), V).meanKL,
        });
      } finally {
        engine.dispose?.();
      }
      bar.tick(1, `ferry lut4 ${dtype}${imatrix ? " calibrated" : ""}`);
    }
  }
  bar.done();
  return rows;

  async function ferryScore(file: string): Promise<number> {
    // llama-quantize's mixes may hold a type ferry does not read (Q5_K in its default IQ4_NL on a model
    // at K-quant widths): llama-perplexity's figures stand alone for that file.
    const g = await readGguf(file).catch((e: Error) => {
      if (/\(UnsupportedDtype\)/.test(e.message)) return undefined;
      throw e;
    });
    if (!g) return NaN;
    return compareLogits(ref!, concat(scored(buildModel(g.config, g.tensors, file))), V).meanKL;
  }
}

async function checkpointModel(path: string): Promise<Model> {
  const ck = await readCheckpoint(path, { sections: ["model"] });
  return buildModel(ck.config, ck.model, path);
}

/**
 * The text whose llama-perplexity chunks of 257 tokens are exactly BOS + each window: the tokenizer
 * adds BOS before the text and the tool puts BOS in place of each later chunk's first token, so a
 * newline between windows stands where that BOS goes. ferry's byte tokenizer makes one token a byte.
 */
function chunkText(windows: Uint8Array[]): Uint8Array {
  // A newline after the last window too: the tools' -f drops a file's final newline, which would
  // otherwise be the last window's last byte (the held-out text ends with one).
  const out = new Uint8Array(windows.length * (WINDOW_BYTES + 1));
  windows.forEach((w, i) => {
    out.set(w, i * (WINDOW_BYTES + 1));
    out[i * (WINDOW_BYTES + 1) + WINDOW_BYTES] = 0x0a;
  });
  return out;
}

/**
 * Checks the tokens llama-perplexity saved with the base logits (`_logits_`, n_ctx, n_vocab, n_chunk,
 * then n_chunk × n_ctx token ids) are BOS + each window: the chunks are the windows, byte for byte.
 */
function checkChunks(path: string, windows: Uint8Array[], log: string): void {
  const b = readFileSync(path);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const nCtx = dv.getInt32(8, true), nChunk = dv.getInt32(16, true);
  if (nCtx !== WINDOW_BYTES + 1 || nChunk !== windows.length) {
    throw new Error(
      `${path}: llama-perplexity made ${nChunk} chunks of ${nCtx} tokens, expected ${windows.length} of ${
        WINDOW_BYTES + 1
      }:\n${log.slice(-2000)}`,
    );
  }
  windows.forEach((w, i) => {
    for (let k = 0; k < w.length; k++) {
      const id = dv.getInt32(20 + 4 * (i * nCtx + 1 + k), true);
      if (id !== w[k]) {
        throw new Error(
          `${path}: chunk ${i} token ${k + 1} is ${id}, window byte is ${w[k]} (tokenizer mismatch)`,
        );
      }
    }
  });
  if (dv.getInt32(20, true) !== BOS) throw new Error(`${path}: the first token is not BOS`);
}

/** Rows 128..255 of a window's logits: the positions llama-perplexity scores in a 257-token chunk. */
function secondHalf(logits: Float32Array, vocab: number): Float32Array {
  const first = Math.floor((WINDOW_BYTES + 1) / 2);
  return logits.slice(first * vocab, WINDOW_BYTES * vocab);
}

function concat(parts: Float32Array[]): Float32Array {
  const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}

/** File size, bits per weight over the 2-D matrices, and how many matrices each type holds. */
function weightFigures(path: string): Pick<Row, "bytes" | "bpw" | "types"> {
  let g: GgufHeader;
  try {
    g = ggufHeader(path);
  } catch (e) {
    // llama-quantize's mixes may hold a type ferry does not read (an imatrix Q4_0 keeps some Q4_1):
    // the file is still scored; only its bits per weight are not counted.
    return { bytes: statSync(path).size, bpw: NaN, types: `(${(e as Error).message.split(": ").at(-1)})` };
  }
  let bits = 0, weights = 0;
  const byType = new Map<GgmlType, number>();
  for (const t of g.tensors) {
    if (t.ne.length < 2) continue;
    const n = t.ne.reduce((a, b) => a * b, 1);
    const spec = GGML_TYPES[t.type];
    bits += (n / spec.blockSize) * spec.blockBytes * 8;
    weights += n;
    byType.set(t.type, (byType.get(t.type) ?? 0) + 1);
  }
  const types = [...byType].sort((a, b) => b[1] - a[1]).map(([ty, n]) => `${ty}×${n}`).join(" ");
  return { bytes: statSync(path).size, bpw: bits / weights, types };
}

/** A lut4 file's bits per weight over its matrices (codes and group scales), and their count. */
function lut4Figures(file: Lut4File): Pick<Row, "bpw" | "types"> {
  let bits = 0, weights = 0;
  for (const m of file.header.matrices) {
    bits += 8 * (m.nibbles.bytes + m.scales.bytes);
    weights += m.rows * m.cols;
  }
  return { bpw: bits / weights, types: `lut4×${file.header.matrices.length}` };
}

/** A GGUF file's header, read from its first bytes (a few MB at Qwen3's vocabulary). */
function ggufHeader(path: string): GgufHeader {
  const size = statSync(path).size, fd = openSync(path, "r");
  try {
    for (let n = 1 << 20;; n *= 4) {
      const prefix = new Uint8Array(Math.min(n, size));
      readSync(fd, prefix, 0, prefix.length, 0);
      const head = parseGgufHeader(prefix, size, path);
      if (head !== "more") return head;
      if (prefix.length === size) throw new Error(`${path}: the GGUF header runs past the file's end`);
    }
  } finally {
    closeSync(fd);
  }
}

/** The KL figures of a llama-perplexity --kl-divergence log. */
function kldFigures(log: string, where: string): Pick<Row, "kld" | "kldErr" | "kldP99" | "sameTop"> {
  const num = (re: RegExp, what: string) => {
    const m = re.exec(log);
    if (!m) throw new Error(`${where}: llama-perplexity printed no ${what}:\n${log.slice(-2000)}`);
    return m.slice(1).map(Number);
  };
  const [kld, kldErr] = num(/Mean\s+KLD:\s+([-\d.e+]+)\s+±\s+([-\d.e+]+)/, "Mean KLD");
  const [kldP99] = num(/99\.0%\s+KLD:\s+([-\d.e+]+)/, "99.0% KLD");
  const [sameTop] = num(/Same top p:\s+([-\d.e+]+)/, "Same top p");
  return { kld, kldErr, kldP99, sameTop: sameTop / 100 };
}

/**
 * Runs a tool with its output going straight to `logPath` (kept beside the files with --keep), then
 * returns that output, or throws with its tail.
 */
function tool(path: string, args: string[], logPath: string): Promise<string> {
  const fd = openSync(logPath, "w");
  return new Promise<string>((resolve, reject) => {
    const child = spawn(path, args, { stdio: ["ignore", fd, fd] });
    child.on("error", (e) => reject(new Error(`${path}: ${e.message}`)));
    child.on("close", (code) => {
      const out = readFileSync(logPath, "utf8");
      if (code === 0) resolve(out);
      else reject(new Error(`${path} ${args.join(" ")} exited with ${code}:\n${out.slice(-3000)}`));
    });
  }).finally(() => closeSync(fd));
}

/**
 * Runs a tool until its output holds `last` (at most 4 times). At this commit llama.cpp's logger is a
 * thread that the tools do not wait for at exit (common/log.cpp leaks it on purpose), so a run can end,
 * with status 0, before its last lines are written: here about one llama-perplexity run in three lost
 * its summary. The figures are deterministic, so a rerun gives the same ones.
 */
async function toolPrinting(last: RegExp, path: string, args: string[], logPath: string): Promise<string> {
  for (let attempt = 1;; attempt++) {
    const out = await tool(path, args, logPath);
    if (last.test(out) || attempt === 4) return out;
  }
}

/** The rows as a table, then ferry's KL over llama.cpp's for each type. */
function formatRows(
  rows: Row[],
  commit: string,
  windows: number,
  calWindows: number,
  folder: boolean,
): string {
  const e = (x: number) => Number.isNaN(x) ? "-" : x.toExponential(2);
  const ratio = (a: number, b: number) => Number.isNaN(a / b) ? "-" : (a / b).toFixed(3);
  const head = [
    "side",
    "type",
    "imatrix",
    "bytes",
    "bpw",
    "matrix types",
    "mean KLD (llama)",
    "KLD p99",
    "same top",
    "KL (ferry engine)",
  ];
  const body = rows.map((r) => [
    r.side,
    `${r.type}${r.pure ? " pure" : ""}`,
    r.imatrix ? "yes" : "no",
    String(r.bytes),
    r.bpw.toFixed(2),
    r.types,
    Number.isNaN(r.kld) ? "-" : `${e(r.kld)} ± ${e(r.kldErr)}`,
    e(r.kldP99),
    Number.isNaN(r.sameTop) ? "-" : `${(100 * r.sameTop).toFixed(2)}%`,
    `${e(r.ferryKL)}${r.engine === "int" ? " int" : ""}`,
  ]);
  const ratios = TYPES.flatMap(({ ferry, pure }) =>
    [[false, false], [false, true], ...(pure ? [[true, false], [true, true]] : [])].map(([pure, imatrix]) => {
      const f = rows.find((r) => r.side === "ferry" && r.type === ferry && r.imatrix === imatrix)!;
      const l = rows.find((r) =>
        r.side === "llama" && r.type === ferry && r.imatrix === imatrix && r.pure === pure
      )!;
      return [
        `${ferry}${pure ? " vs pure" : ""}`,
        imatrix ? "yes" : "no",
        ratio(f.kld, l.kld),
        folder ? "-" : ratio(f.ferryKL, l.ferryKL),
        `${f.bpw.toFixed(2)} / ${l.bpw.toFixed(2)}`,
      ];
    })
  );
  const heldOut = folder
    ? `${windows} held-out chunks of ${FOLDER_CHUNK} tokens (positions ${FOLDER_CHUNK / 2}-${
      FOLDER_CHUNK - 1
    } scored); ` +
      `imatrix and ferry's calibration on the training split's first ${calWindows} windows of ${FOLDER_CHUNK} tokens`
    : `${windows} held-out windows (BOS + 256 bytes, positions 128-255 scored); ` +
      `imatrix and ferry's calibration on ${calWindows} training-split windows`;
  // What calibration buys on each side: the imatrix file's KLD over the plain one's, type by type.
  const gains = TYPES.flatMap(({ ferry, pure }) =>
    (["ferry", "llama"] as const).flatMap((side) =>
      (side === "llama" && pure ? [false, true] : [false]).map((p) => {
        const at = (imatrix: boolean) =>
          rows.find((r) => r.side === side && r.type === ferry && r.imatrix === imatrix && r.pure === p)!;
        return [side, `${ferry}${p ? " pure" : ""}`, (at(true).kld / at(false).kld).toFixed(3)];
      })
    )
  );
  // lut4 on the integer engine against llama.cpp's 4-bit files with the imatrix, on ferry's scorer.
  const lut4 = LUT4_TYPES.flatMap((dtype) => {
    const f = rows.find((r) => r.type === `lut4 ${dtype}` && r.imatrix);
    return !f ? [] : LUT4_AGAINST.map((against) => {
      const l = rows.find((r) =>
        r.side === "llama" && r.type === against.type && r.imatrix && r.pure === against.pure
      )!;
      return [
        `lut4 ${dtype} (int)`,
        `${against.type}${against.pure ? " pure" : ""} imatrix (float)`,
        ratio(f.ferryKL, l.ferryKL),
        `${f.bpw.toFixed(2)} / ${l.bpw.toFixed(2)}`,
      ];
    });
  });
  return [
    `llama.cpp ${commit.slice(0, 12)}; ${heldOut}\n`,
    table(head, body),
    "",
    table([
      "type",
      "imatrix",
      "ferry/llama KLD (llama)",
      "ferry/llama KL (ferry engine)",
      "bpw ferry / llama",
    ], ratios),
    "",
    table(["side", "type", "KLD calibrated / plain (llama)"], gains),
    ...(lut4.length === 0 ? [] : [
      "",
      table(["ferry (calibrated)", "llama.cpp", "ferry/llama KL (ferry engines)", "bpw ferry / llama"], lut4),
    ]),
  ].join("\n");
}

function table(head: string[], body: string[][]): string {
  const width = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(width[i])).join("  ");
  return [line(head), ...body.map(line)].join("\n");
}

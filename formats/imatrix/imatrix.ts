/**
 * llama.cpp's importance matrix files (spec: formats/imatrix/imatrix.md): what `llama-imatrix` writes and
 * `llama-quantize --imatrix` reads, per weight matrix the mean square of the activation that multiplies
 * each of its input columns. Two encodings: the GGUF one llama-imatrix writes by default (tensors
 * `NAME.in_sum2`, the sums of x², and `NAME.counts`, the positions counted; keys `imatrix.*`), and the
 * legacy binary `.dat` one (`--output-format dat`). Both are read; `writeImatrix` writes the GGUF one,
 * or the legacy one for a name ending in `.dat`, as llama-imatrix chooses by its flag.
 *
 * Names are llama.cpp's (`blk.0.attn_q.weight`); `imatrixImportance` checks a file against a Qwen3
 * model's shape and maps it to ferry's (Hugging Face) names, refusing a tensor the model does not have
 * or a length that is not the tensor's input width.
 *
 * @example
 * ```ts
 * import { readFile } from "node:fs/promises";
 * import { imatrixImportance, parseImatrix } from "./imatrix.ts";
 * import type { ModelConfig } from "../../model/config.ts";
 * declare const config: ModelConfig;
 * const m = parseImatrix(await readFile("imatrix.gguf"), "imatrix.gguf");
 * const importance = imatrixImportance(m, config, "imatrix.gguf"); // "model.layers.0.self_attn.q_proj.weight" → [1024]
 * ```
 * @module
 */
import { writeFile } from "node:fs/promises";
import {
  encodeGguf,
  GgufError,
  type GgufRefusal,
  type GgufValue,
  parseGguf,
  tensorToF32,
} from "../gguf/gguf-container.ts";
import { ggufTensorName, hfTensorName } from "../gguf/gguf-qwen3.ts";
import type { ModelConfig } from "../../model/config.ts";

/** One matrix's statistics: the mean over `count` positions of x_c² for each input column c. */
export interface ImatrixEntry {
  values: Float32Array;
  /** Positions counted (legacy files: chunks × the chunk size when known, else the chunks). */
  count: number;
}

/** An importance matrix file's content, names llama.cpp's. */
export interface Imatrix {
  entries: Map<string, ImatrixEntry>;
  /** What it was computed on (llama-imatrix: its `-f` file names). */
  datasets: string[];
  chunkCount: number;
  /** Positions per chunk (0 in a legacy file: it does not say). */
  chunkSize: number;
  encoding: "gguf" | "dat";
}

const SUMS = ".in_sum2", COUNTS = ".counts";
const KEYS = {
  type: "general.type",
  datasets: "imatrix.datasets",
  chunks: "imatrix.chunk_count",
  size: "imatrix.chunk_size",
};

/** Refused: `code` names the rule, `field` the tensor or key, `message` what was expected and found. */
function refuse(
  code: GgufRefusal,
  path: string,
  field: string,
  message: string,
  expected?: string,
  found?: string,
): GgufError {
  return new GgufError(path, code, field, message, expected === undefined ? {} : { expected, found });
}

/** Reads either encoding (a GGUF one by its magic); a malformed file is refused naming the part. */
export function parseImatrix(bytes: Uint8Array, path: string): Imatrix {
  const magic = new TextDecoder().decode(bytes.subarray(0, 4));
  return magic === "GGUF" ? parseGgufImatrix(bytes, path) : parseLegacyImatrix(bytes, path);
}

function parseGgufImatrix(bytes: Uint8Array, path: string): Imatrix {
  const file = parseGguf(bytes, path);
  const m = file.metadata;
  // llama-quantize refuses a GGUF imatrix without these three keys; so does ferry (a model's GGUF
  // handed as an imatrix is refused here).
  const datasets = m.get(KEYS.datasets), chunks = m.get(KEYS.chunks), size = m.get(KEYS.size);
  if (!datasets || datasets.type !== "array" || datasets.elem !== "string") {
    throw refuse(
      "WrongType",
      path,
      KEYS.datasets,
      "expected an array of strings (an imatrix file's key)",
      "an array of strings",
      datasets ? datasets.type : "absent",
    );
  }
  for (const [key, v] of [[KEYS.chunks, chunks], [KEYS.size, size]] as const) {
    if (!v || v.type !== "u32") {
      throw refuse("WrongType", path, key, "expected a u32", "u32", v ? v.type : "absent");
    }
  }
  const sums = new Map<string, Float32Array>(), counts = new Map<string, Float32Array>();
  for (const t of file.tensors) {
    const field = `tensor ${t.name}`;
    const into = t.name.endsWith(SUMS) ? sums : t.name.endsWith(COUNTS) ? counts : undefined;
    if (!into) continue; // llama.cpp ignores other tensors too
    if (t.type !== "F32") {
      throw refuse("UnsupportedDtype", path, field, `expected F32, found ${t.type}`, "F32", t.type);
    }
    into.set(t.name.slice(0, t.name.length - (into === sums ? SUMS : COUNTS).length), tensorToF32(t));
  }
  const entries = new Map<string, ImatrixEntry>();
  for (const name of new Set([...sums.keys(), ...counts.keys()])) {
    const s = sums.get(name), c = counts.get(name);
    if (!s || !c) {
      const missing = s ? COUNTS : SUMS;
      throw refuse(
        "MissingTensor",
        path,
        `tensor ${name}${missing}`,
        `missing (its ${s ? SUMS : COUNTS} is present)`,
        "present",
        "absent",
      );
    }
    if (c.length !== 1) {
      throw refuse(
        "Unsupported",
        path,
        `tensor ${name}${COUNTS}`,
        `holds ${c.length} counts: one per expert of a mixture-of-experts model; ferry's Qwen3 is dense (one)`,
        "1 count",
        `${c.length}`,
      );
    }
    const count = Math.round(c[0]);
    if (!(count >= 0)) {
      throw refuse(
        "InvalidValue",
        path,
        `tensor ${name}${COUNTS}`,
        `expected a count, found ${c[0]}`,
        "a count ≥ 0",
        String(c[0]),
      );
    }
    // No positions: llama-quantize takes ones (uniform weights).
    entries.set(name, { values: count > 0 ? s.map((x) => x / count) : s.map(() => 1), count });
  }
  if (entries.size === 0) {
    throw refuse(
      "MissingTensor",
      path,
      "tensors",
      "no imatrix entries (NAME.in_sum2 with NAME.counts)",
      "at least one entry",
      "none",
    );
  }
  const value = (v: GgufValue | undefined) => v!.value as number;
  return {
    entries,
    datasets: (datasets.value as string[]).slice(),
    chunkCount: value(chunks),
    chunkSize: value(size),
    encoding: "gguf",
  };
}

function parseLegacyImatrix(bytes: Uint8Array, path: string): Imatrix {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const need = (n: number, field: string) => {
    if (at + n > bytes.length) {
      throw refuse(
        "Truncated",
        path,
        field,
        `the file ends at byte ${bytes.length}, ${
          at + n - bytes.length
        } bytes short (neither GGUF nor a complete legacy .dat imatrix)`,
        `${n} more bytes`,
        `${bytes.length - at}`,
      );
    }
  };
  const i32 = (field: string) => {
    need(4, field);
    const v = dv.getInt32(at, true);
    at += 4;
    return v;
  };
  const text = (len: number, field: string) => {
    need(len, field);
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(at, at += len));
    } catch {
      throw refuse("InvalidUtf8", path, field, "is not UTF-8", "UTF-8", "invalid bytes");
    }
  };
  const n = i32("entries");
  if (n < 1) {
    throw refuse(
      "InvalidValue",
      path,
      "entries",
      `expected a positive entry count, found ${n}`,
      "≥ 1",
      String(n),
    );
  }
  const entries = new Map<string, ImatrixEntry>();
  for (let i = 0; i < n; i++) {
    const len = i32(`entry ${i} name length`);
    if (len < 1 || len > 4096) {
      throw refuse("InvalidName", path, `entry ${i} name length`, `expected 1 to 4096, found ${len}`);
    }
    const name = text(len, `entry ${i} name`);
    const ncall = i32(`tensor ${name} ncall`), nval = i32(`tensor ${name} values`);
    if (nval < 1) {
      throw refuse(
        "InvalidValue",
        path,
        `tensor ${name}`,
        `expected a positive value count, found ${nval}`,
        "≥ 1",
        String(nval),
      );
    }
    need(nval * 4, `tensor ${name}`);
    const stored = new Float32Array(nval);
    for (let j = 0; j < nval; j++) stored[j] = dv.getFloat32(at + 4 * j, true);
    at += nval * 4;
    if (entries.has(name)) throw refuse("DuplicateTensor", path, `tensor ${name}`, "appears twice");
    // Stored: mean · ncall (llama-quantize divides by ncall; ncall 0 leaves the values as they are).
    entries.set(name, {
      values: ncall > 0 ? stored.map((x) => x / ncall) : stored,
      count: Math.max(0, ncall),
    });
  }
  let chunkCount = 0;
  const datasets: string[] = [];
  // The chunk count and the dataset name are optional, as llama.cpp reads them.
  if (at < bytes.length) {
    chunkCount = i32("chunk count");
    const len = i32("dataset length");
    if (len > 0) datasets.push(text(len, "dataset"));
  }
  if (at !== bytes.length) {
    throw refuse("TrailingBytes", path, "size", `${bytes.length - at} bytes follow the dataset name`);
  }
  return { entries, datasets, chunkCount, chunkSize: 0, encoding: "dat" };
}

/**
 * The file's bytes: GGUF (llama-imatrix's default: `general.type`, `imatrix.datasets`,
 * `imatrix.chunk_count`, `imatrix.chunk_size`, then per name in sorted order `NAME.in_sum2` = mean ·
 * count and `NAME.counts` = [count]) or, `encoding: "dat"`, the legacy layout (mean · chunks).
 */
export function encodeImatrix(m: Imatrix): Uint8Array {
  const names = [...m.entries.keys()].sort();
  if (m.encoding === "dat") return encodeLegacy(m, names);
  const metadata: Array<[string, GgufValue]> = [
    [KEYS.type, { type: "string", value: "imatrix" }],
    [KEYS.datasets, { type: "array", elem: "string", value: m.datasets }],
    [KEYS.chunks, { type: "u32", value: m.chunkCount }],
    [KEYS.size, { type: "u32", value: m.chunkSize }],
  ];
  const f32 = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
  const tensors = names.flatMap((name) => {
    const e = m.entries.get(name)!;
    const sums = e.values.map((x) => x * e.count);
    return [
      { name: name + SUMS, ne: [e.values.length], type: "F32" as const, bytes: f32(sums) },
      { name: name + COUNTS, ne: [1], type: "F32" as const, bytes: f32(Float32Array.of(e.count)) },
    ];
  });
  const chunks = encodeGguf(metadata, tensors, "imatrix");
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) out.set(c, at), at += c.length;
  return out;
}

function encodeLegacy(m: Imatrix, names: string[]): Uint8Array {
  const enc = new TextEncoder(), parts: Uint8Array[] = [];
  const i32 = (v: number) => {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setInt32(0, v, true);
    parts.push(b);
  };
  const str = (s: string) => {
    const b = enc.encode(s);
    i32(b.length), parts.push(b);
  };
  i32(names.length);
  // llama-imatrix stores mean · ncall, ncall the chunks the entry saw; ferry's entries saw them all.
  const ncall = Math.max(1, m.chunkCount);
  for (const name of names) {
    const e = m.entries.get(name)!;
    str(name), i32(ncall), i32(e.values.length);
    const v = e.values.map((x) => x * ncall);
    parts.push(new Uint8Array(v.buffer));
  }
  i32(m.chunkCount);
  str(m.datasets[0] ?? "");
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), at += p.length;
  return out;
}

/** Writes `m` to `path`: the legacy layout when the name ends in `.dat`, GGUF otherwise. */
export async function writeImatrix(path: string, m: Omit<Imatrix, "encoding">): Promise<void> {
  await writeFile(path, encodeImatrix({ ...m, encoding: path.endsWith(".dat") ? "dat" : "gguf" }));
}

/** Each matrix's input width in a Qwen3 model, by llama.cpp name (the tensors an imatrix may hold). */
function inputWidths(config: ModelConfig): Map<string, number> {
  const H = config.hidden_size, qDim = config.num_attention_heads * config.head_dim;
  const out = new Map<string, number>([["token_embd.weight", H]]);
  if (!config.tie_word_embeddings) out.set("output.weight", H);
  for (let i = 0; i < config.num_hidden_layers; i++) {
    for (const t of ["attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up"]) out.set(`blk.${i}.${t}.weight`, H);
    out.set(`blk.${i}.attn_output.weight`, qDim);
    out.set(`blk.${i}.ffn_down.weight`, config.intermediate_size);
  }
  return out;
}

/**
 * The file's importance under ferry's (Hugging Face) names, checked against the model: an entry the
 * model has no such matrix for (another model's file) or whose length is not the matrix's input width
 * (another shape) is refused, naming the tensor. Entries the file lacks stay unweighted, as in llama.cpp.
 */
export function imatrixImportance(m: Imatrix, config: ModelConfig, path: string): Map<string, Float32Array> {
  const widths = inputWidths(config), out = new Map<string, Float32Array>();
  for (const [name, e] of m.entries) {
    const width = widths.get(name), hf = hfTensorName(name);
    if (width === undefined || hf === undefined) {
      throw refuse(
        "UnknownTensor",
        path,
        `tensor ${name}`,
        `this model has no such matrix (${config.num_hidden_layers} layers${
          config.tie_word_embeddings ? ", a tied output" : ""
        }): an imatrix of another model?`,
        "a matrix of this model",
        name,
      );
    }
    if (e.values.length !== width) {
      throw refuse(
        "SizeMismatch",
        path,
        `tensor ${name}`,
        `holds ${e.values.length} values; this model's matrix has ${width} input columns`,
        `${width}`,
        `${e.values.length}`,
      );
    }
    if (!e.values.every((v) => Number.isFinite(v) && v >= 0)) {
      throw refuse(
        "NotFinite",
        path,
        `tensor ${name}`,
        "holds a value that is not a finite mean square (≥ 0)",
        "finite values ≥ 0",
        "another",
      );
    }
    out.set(hf, e.values);
  }
  return out;
}

/**
 * ferry's importance (Hugging Face names, mean squares over `count` positions) as an imatrix of
 * llama.cpp names. A tied embedding's entry (the head's input) is left out, as llama-imatrix leaves
 * out every matrix but `blk.*` and `output.weight`: llama-quantize would weigh the token lookup by it.
 */
export function imatrixOf(
  importance: ReadonlyMap<string, Float32Array>,
  count: number,
  about: { datasets: string[]; chunkCount: number; chunkSize: number },
): Omit<Imatrix, "encoding"> {
  const entries = new Map<string, ImatrixEntry>();
  for (const [hf, values] of importance) {
    const name = ggufTensorName(hf);
    if (name === undefined || name === "token_embd.weight") continue;
    entries.set(name, { values: Float32Array.from(values), count });
  }
  return { entries, ...about };
}

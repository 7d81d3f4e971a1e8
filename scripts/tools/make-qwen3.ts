/**
 * Writes a Qwen3 Hugging Face folder of any shape with seeded random weights: config.json,
 * generation_config.json, the tokenizer files of a given folder (the real Qwen3 tokenizer by default
 * when the vocab is Qwen3's), and bf16 (or f32) safetensors, single-file or sharded with
 * model.safetensors.index.json.
 *
 * It is an independent fixture: nothing of ferry's formats/ or model/ is on its write path. The
 * safetensors bytes (an 8-byte header length, the JSON header, the raw tensors) are written here by
 * hand, so a ferry importer bug cannot hide behind a matching ferry writer bug. Tensors are generated
 * and written a chunk at a time, so a 0.6B folder needs a few MB of memory.
 *
 * `peaked` makes greedy decoding varied and far from ties for float engines: on the reduced shape the
 * top two log-probabilities of a 32-token greedy run stay 0.002-0.6 nats apart (f32 rounding moves them
 * by about 1e-5), where the default spread (std 0.02) makes every prompt continue with one repeated
 * token. It is not meant to survive 4-bit quantization unchanged.
 *
 * @example
 * ```ts
 * import { makeQwen3Folder } from "./make-qwen3.ts";
 * // deno run -A scripts/tools/make-qwen3.ts --out /tmp/q06 --shape qwen3-0.6b
 * // bun scripts/tools/make-qwen3.ts --out /tmp/small --shape reduced --peaked --seed 7
 * await makeQwen3Folder("/tmp/small", { shape: "reduced", peaked: true });
 * ```
 * @module
 */
import { copyFile, mkdir, open, rename, rm, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** A Qwen3 shape: the config.json fields that size the tensors. */
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

const QWEN3_VOCAB = 151936;

/** Qwen3-0.6B's config.json shape. */
const QWEN3_06B: Qwen3Shape = {
  vocab_size: QWEN3_VOCAB,
  hidden_size: 1024,
  intermediate_size: 3072,
  num_hidden_layers: 28,
  num_attention_heads: 16,
  num_key_value_heads: 8,
  head_dim: 128,
  tie_word_embeddings: true,
  max_position_embeddings: 40960,
  rope_theta: 1_000_000,
};

/** Named shapes: Qwen3-0.6B itself, its body with ferry's byte vocabulary, and the reduced test shape. */
export const QWEN3_SHAPES: Readonly<Record<string, Qwen3Shape>> = {
  "qwen3-0.6b": QWEN3_06B,
  /** Qwen3-0.6B's layers with ferry's 258-id byte vocabulary (no tokenizer files: a byte model). */
  "qwen3-0.6b-body": { ...QWEN3_06B, vocab_size: 258 },
  /** The tests' shape: the real vocabulary over a small body (about 10M parameters, 20 MB in bf16). */
  reduced: {
    vocab_size: QWEN3_VOCAB,
    hidden_size: 64,
    intermediate_size: 192,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 32,
    tie_word_embeddings: true,
    max_position_embeddings: 40960,
    rope_theta: 1_000_000,
  },
};

/**
 * Where the real Qwen3 tokenizer files are: the repository's pinned copy (tests/fixtures/qwen3-tokenizer,
 * whose README says where they come from). A path, not an import: scripts import nothing from tests/.
 */
export const QWEN3_TOKENIZER_DIR = fileURLToPath(
  new URL("../../tests/fixtures/qwen3-tokenizer/", import.meta.url),
);

/** What `makeQwen3Folder` is told; every field has a default. */
export interface MakeQwen3Options {
  /** A name from `QWEN3_SHAPES`, or a shape (default "reduced"). */
  shape?: string | Qwen3Shape;
  seed?: number;
  peaked?: boolean;
  /**
   * The spread (std, nats) the logits should have: the final norm's gain is set to give it (about 3
   * for a trained model; `peaked` alone gives about 32 at Qwen3-0.6B's width). Default: the shape's own.
   */
  logitStd?: number;
  /**
   * The spread of o_proj and down_proj, which write into the residual stream (default: 0.6 peaked,
   * else 0.02). Peaked's 0.6 makes each layer's write tens of times the stream, so a deep model is
   * chaotic: any rounding anywhere changes its output wholesale. About 0.001 with `peaked` keeps each
   * write a fraction of the stream, as in a trained model.
   */
  updateStd?: number;
  /**
   * Spread the gains of the norms that feed a quantized matrix (input_layernorm,
   * post_attention_layernorm, the final norm) log-uniformly: gain = c · e^(s·√3·u), u uniform in [-1, 1),
   * c keeping their root mean square at the plain gain. A trained model's inputs have uneven channels,
   * a few carrying much of the energy; with even gains every input column matters alike, and
   * importance-weighted rounding (GPTQ, an imatrix) has little to weigh. Default 0: even gains.
   */
  normSpread?: number;
  dtype?: "bf16" | "f32";
  /** Split the weights into shards of about this many bytes (default: one file). */
  shardBytes?: number;
  /**
   * A folder with tokenizer.json and tokenizer_config.json to copy (default: the real Qwen3 tokenizer
   * when the vocab is Qwen3's; none, a byte model, otherwise); null writes none.
   */
  tokenizerDir?: string | null;
  onProgress?: (done: number, total: number) => void;
}

/** One tensor of the folder: its name, shape and the spread of its random values. */
interface TensorPlan {
  name: string;
  dims: number[];
  /** Values are uniform with this standard deviation around `center`. */
  std: number;
  center: number;
  /** When set, values are instead `center` times a log-uniform gain of this spread (`normSpread`). */
  logSpread?: number;
}

/** The tensors of a Qwen3 checkpoint, in the order transformers saves them, with their value spread. */
export function qwen3Tensors(
  s: Qwen3Shape,
  peaked = false,
  logitStd?: number,
  updateStd?: number,
  normSpread = 0,
): TensorPlan[] {
  const h = s.hidden_size, q = s.num_attention_heads * s.head_dim, kv = s.num_key_value_heads * s.head_dim;
  // Peaked: a unit-scale embedding and strong layers. With std 0.02 everywhere a random model repeats
  // one token whatever the prompt; with only the embedding large it echoes its input; these scales
  // (found by trying) give varied continuations whose top two logits stay apart.
  const embedStd = peaked ? 1 : 0.02,
    inStd = peaked ? 0.14 : 0.02,
    outStd = updateStd ?? (peaked ? 0.6 : 0.02);
  const w = (name: string, dims: number[], std = inStd): TensorPlan => ({ name, dims, std, center: 0 });
  const norm = (name: string, n: number): TensorPlan => ({ name, dims: [n], std: 0.05, center: 1 });
  // The norms whose output a quantized matrix reads: spread when asked (q_norm and k_norm feed none).
  const inputNorm = (name: string, n: number, center = 1): TensorPlan =>
    normSpread > 0
      ? { name, dims: [n], std: 0, center, logSpread: normSpread }
      : { name, dims: [n], std: 0.05 * center, center };
  const out: TensorPlan[] = [w("model.embed_tokens.weight", [s.vocab_size, h], embedStd)];
  for (let l = 0; l < s.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    out.push(
      inputNorm(`${p}.input_layernorm.weight`, h),
      w(`${p}.self_attn.q_proj.weight`, [q, h]),
      w(`${p}.self_attn.k_proj.weight`, [kv, h]),
      w(`${p}.self_attn.v_proj.weight`, [kv, h]),
      w(`${p}.self_attn.o_proj.weight`, [h, q], outStd),
      norm(`${p}.self_attn.q_norm.weight`, s.head_dim),
      norm(`${p}.self_attn.k_norm.weight`, s.head_dim),
      inputNorm(`${p}.post_attention_layernorm.weight`, h),
      w(`${p}.mlp.gate_proj.weight`, [s.intermediate_size, h]),
      w(`${p}.mlp.up_proj.weight`, [s.intermediate_size, h]),
      w(`${p}.mlp.down_proj.weight`, [h, s.intermediate_size], outStd),
    );
  }
  // A logit is the normed state (each value about 1 in size) dotted with a head row of std embedStd:
  // its std is about gain · embedStd · √h.
  const finalGain = logitStd === undefined ? 1 : logitStd / (embedStd * Math.sqrt(h));
  out.push(inputNorm("model.norm.weight", h, finalGain));
  if (!s.tie_word_embeddings) out.push(w("lm_head.weight", [s.vocab_size, h], embedStd));
  return out;
}

/** config.json as transformers writes it for Qwen3 (the real model's extra keys included). */
export function qwen3ConfigJson(s: Qwen3Shape, dtype: "bf16" | "f32"): Record<string, unknown> {
  const real = s.vocab_size === QWEN3_VOCAB;
  return {
    architectures: ["Qwen3ForCausalLM"],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: real ? 151643 : 256,
    eos_token_id: real ? 151645 : 257,
    head_dim: s.head_dim,
    hidden_act: "silu",
    hidden_size: s.hidden_size,
    initializer_range: 0.02,
    intermediate_size: s.intermediate_size,
    max_position_embeddings: s.max_position_embeddings,
    max_window_layers: s.num_hidden_layers,
    model_type: "qwen3",
    num_attention_heads: s.num_attention_heads,
    num_hidden_layers: s.num_hidden_layers,
    num_key_value_heads: s.num_key_value_heads,
    rms_norm_eps: 1e-6,
    rope_scaling: null,
    rope_theta: s.rope_theta,
    sliding_window: null,
    tie_word_embeddings: s.tie_word_embeddings,
    torch_dtype: dtype === "bf16" ? "bfloat16" : "float32",
    transformers_version: "4.51.0",
    use_cache: true,
    use_sliding_window: false,
    vocab_size: s.vocab_size,
  };
}

/** generation_config.json of Qwen3-0.6B: its EOS list and sampling defaults. */
const QWEN3_GENERATION_CONFIG = {
  bos_token_id: 151643,
  do_sample: true,
  eos_token_id: [151645, 151643],
  pad_token_id: 151643,
  temperature: 0.6,
  top_k: 20,
  top_p: 0.95,
  transformers_version: "4.51.0",
};

/**
 * A seeded uniform generator: xoshiro128** (period 2^128 - 1) seeded through splitmix32, all in 32-bit
 * integer arithmetic so it is fast; each call gives a value in [-1, 1).
 */
function uniform(seed: number): () => number {
  let z = seed | 0;
  const split = () => {
    z = (z + 0x9e3779b9) | 0;
    let x = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
    return (x ^ (x >>> 16)) | 0;
  };
  let a = split(), b = split(), c = split(), d = split();
  return () => {
    const r = Math.imul(rotl(Math.imul(b, 5), 7), 9);
    const t = b << 9;
    c ^= a;
    d ^= b;
    b ^= c;
    a ^= d;
    c ^= t;
    d = rotl(d, 11);
    return r / 2147483648;
  };
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** f32 to bf16 bits, rounding to nearest even (all values here are finite). */
function toBf16(x: number, f32: Float32Array, u32: Uint32Array): number {
  f32[0] = x;
  const bits = u32[0];
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

const SAFETENSORS_DTYPE = { bf16: "BF16", f32: "F32" } as const;
const DTYPE_BYTES = { bf16: 2, f32: 4 } as const;

/** The JSON header of one safetensors file, padded with spaces to a multiple of 8 bytes. */
function safetensorsHeader(plans: TensorPlan[], dtype: "bf16" | "f32"): Uint8Array {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const p of plans) {
    const bytes = p.dims.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    header[p.name] = {
      dtype: SAFETENSORS_DTYPE[dtype],
      shape: p.dims,
      data_offsets: [offset, offset + bytes],
    };
    offset += bytes;
  }
  let text = JSON.stringify(header);
  text += " ".repeat((8 - (text.length % 8)) % 8);
  const json = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + json.length);
  new DataView(out.buffer).setBigUint64(0, BigInt(json.length), true);
  out.set(json, 8);
  return out;
}

const CHUNK = 1 << 20;

/**
 * The generator of one tensor's values, one draw of `next` each (so a spread norm leaves every other
 * tensor's values as they were). A log-uniform gain e^(a·u), a = s·√3, has mean square sinh(2a)/(2a):
 * dividing by its root keeps the gains' root mean square at `center`.
 */
function valueOf(p: TensorPlan, next: () => number): () => number {
  if (!p.logSpread) {
    const half = p.std * Math.sqrt(3);
    return () => p.center + next() * half;
  }
  const a = p.logSpread * Math.sqrt(3), scale = p.center / Math.sqrt(Math.sinh(2 * a) / (2 * a));
  return () => scale * Math.exp(a * next());
}

/** Writes one safetensors file of these tensors, values drawn from `next`, a chunk at a time. */
async function writeSafetensors(
  path: string,
  plans: TensorPlan[],
  dtype: "bf16" | "f32",
  next: () => number,
  tick: (n: number) => void,
): Promise<void> {
  const fh = await open(path, "w");
  try {
    await fh.write(safetensorsHeader(plans, dtype));
    const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
    const chunk = new Uint8Array(CHUNK * DTYPE_BYTES[dtype]), view = new DataView(chunk.buffer);
    for (const p of plans) {
      const n = p.dims.reduce((a, b) => a * b, 1), value = valueOf(p, next);
      for (let start = 0; start < n; start += CHUNK) {
        const count = Math.min(CHUNK, n - start);
        for (let i = 0; i < count; i++) {
          const x = value();
          if (dtype === "bf16") view.setUint16(2 * i, toBf16(x, f32, u32), true);
          else view.setFloat32(4 * i, x, true);
        }
        await fh.write(chunk.subarray(0, count * DTYPE_BYTES[dtype]));
        tick(count);
      }
    }
  } finally {
    await fh.close();
  }
}

/** Splits the tensors into shards of about `shardBytes` each (a tensor is never split). */
function shard(plans: TensorPlan[], dtype: "bf16" | "f32", shardBytes: number): TensorPlan[][] {
  const shards: TensorPlan[][] = [[]];
  let size = 0;
  for (const p of plans) {
    const bytes = p.dims.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    if (size > 0 && size + bytes > shardBytes) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1].push(p);
    size += bytes;
  }
  return shards;
}

/** The resolved shape of `options.shape`, refusing an unknown name. */
export function resolveShape(shape: MakeQwen3Options["shape"] = "reduced"): Qwen3Shape {
  if (typeof shape !== "string") return shape;
  const s = QWEN3_SHAPES[shape];
  if (!s) throw new Error(`unknown shape ${shape} (known: ${Object.keys(QWEN3_SHAPES).join(", ")})`);
  return s;
}

/**
 * Writes the folder (created if missing; its model files replaced). Returns the file names written and
 * the parameter count.
 *
 * @example
 * ```ts
 * import { makeQwen3Folder } from "./make-qwen3.ts";
 * const { params } = await makeQwen3Folder("/tmp/q", { shape: "reduced", seed: 1, shardBytes: 8e6 });
 * ```
 */
export async function makeQwen3Folder(
  dir: string,
  options: MakeQwen3Options = {},
): Promise<{ files: string[]; params: number }> {
  const shape = resolveShape(options.shape);
  const dtype = options.dtype ?? "bf16";
  const plans = qwen3Tensors(
    shape,
    options.peaked ?? false,
    options.logitStd,
    options.updateStd,
    options.normSpread,
  );
  const params = plans.reduce((a, p) => a + p.dims.reduce((x, y) => x * y, 1), 0);
  const tokenizerDir = options.tokenizerDir === undefined
    ? (shape.vocab_size === QWEN3_VOCAB ? QWEN3_TOKENIZER_DIR : null)
    : options.tokenizerDir;
  await mkdir(dir, { recursive: true });
  const files: string[] = [];
  const put = async (name: string, text: string) => {
    await writeFile(join(dir, name), text);
    files.push(name);
  };
  await put("config.json", JSON.stringify(qwen3ConfigJson(shape, dtype), null, 2) + "\n");
  if (tokenizerDir) {
    for (const name of ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]) {
      if (!existsSync(join(tokenizerDir, name))) continue;
      await copyFile(join(tokenizerDir, name), join(dir, name));
      files.push(name);
    }
    if (shape.vocab_size === QWEN3_VOCAB) {
      await put("generation_config.json", JSON.stringify(QWEN3_GENERATION_CONFIG, null, 2) + "\n");
    }
  }
  const next = uniform(options.seed ?? 1);
  let done = 0;
  const tick = (n: number) => options.onProgress?.(done += n, params);
  const shards = options.shardBytes ? shard(plans, dtype, options.shardBytes) : [plans];
  await rm(join(dir, "model.safetensors.index.json"), { force: true });
  if (shards.length === 1) {
    await writeSafetensors(join(dir, "model.safetensors.part"), plans, dtype, next, tick);
    await rename(join(dir, "model.safetensors.part"), join(dir, "model.safetensors"));
    files.push("model.safetensors");
    return { files, params };
  }
  const weightMap: Record<string, string> = {};
  let totalSize = 0;
  for (let i = 0; i < shards.length; i++) {
    const name = `model-${String(i + 1).padStart(5, "0")}-of-${
      String(shards.length).padStart(5, "0")
    }.safetensors`;
    await writeSafetensors(join(dir, name), shards[i], dtype, next, tick);
    files.push(name);
    for (const p of shards[i]) {
      weightMap[p.name] = name;
      totalSize += p.dims.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
    }
  }
  await put(
    "model.safetensors.index.json",
    JSON.stringify({ metadata: { total_size: totalSize }, weight_map: weightMap }, null, 2) + "\n",
  );
  return { files, params };
}

const HELP = `
Write a Qwen3 Hugging Face folder of any shape with seeded random weights (an independent test fixture).

Usage: deno run -A scripts/tools/make-qwen3.ts --out DIR [options]

Options:
  --out DIR           the folder to write (created if missing)
  --shape NAME        ${Object.keys(QWEN3_SHAPES).join(", ")} (default reduced)
  --layers N          override the shape's layer count (e.g. a few layers of the 0.6B widths)
  --seed N            the random seed (default 1)
  --peaked            scale the weights so greedy decoding is far from ties
  --logit-std S       set the final norm's gain so the logits spread about S nats (a trained model's:
                      about 3; --peaked alone gives about 32 at Qwen3-0.6B's width)
  --update-std S      the spread of o_proj and down_proj, which write into the residual stream (default
                      0.6 with --peaked, which makes a deep model chaotic; about 0.001 keeps each write
                      a fraction of the stream, as in a trained model)
  --norm-spread S     spread the gains of the norms a quantized matrix reads log-uniformly (e^(S·√3·u),
                      root mean square kept): a trained model's uneven input channels, which give
                      importance-weighted rounding something to weigh (default 0: even gains; 1 spans
                      0.18 to 5.7 before scaling)
  --dtype D           bf16 or f32 (default bf16)
  --shape-json JSON   config fields over the shape's, e.g. '{"hidden_size":128,"vocab_size":300}'
  --shard-mb N        split the weights into shards of about N MB (index.json beside them)
  --shard-bytes N     the same in bytes
  --tokenizer DIR     copy tokenizer.json, tokenizer_config.json (and chat_template.jinja) from DIR
                      (default: the real Qwen3 tokenizer for Qwen3's vocabulary, none otherwise)
  --no-tokenizer      write no tokenizer files (a byte model's folder)
  --json              print what was written as JSON
  -h, --help          this help
`;

/** `--shape-json`: an object of known shape fields with values of the right type. */
function shapeJson(
  text: string | undefined,
  fail: (message: string, code?: number) => never,
  usage: number,
): Partial<Qwen3Shape> {
  if (text === undefined) return {};
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    fail(`--shape-json: not JSON: ${text}`, usage);
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    fail("--shape-json: expected an object", usage);
  }
  const known = QWEN3_SHAPES.reduced;
  for (const [key, value] of Object.entries(raw)) {
    if (!Object.hasOwn(known, key)) fail(`--shape-json: unknown field ${key}`, usage);
    if (typeof value !== typeof known[key as keyof Qwen3Shape]) {
      fail(`--shape-json: ${key} must be a ${typeof known[key as keyof Qwen3Shape]}`, usage);
    }
  }
  return raw as Partial<Qwen3Shape>;
}

async function main(): Promise<void> {
  const { cli, fail, progress, EXIT_USAGE } = await import("../cli.ts");
  const { values } = cli(HELP, {
    out: { type: "string" },
    shape: { type: "string", default: "reduced", choices: Object.keys(QWEN3_SHAPES) },
    layers: { type: "string" },
    seed: { type: "string", default: "1" },
    peaked: { type: "boolean", default: false },
    "logit-std": { type: "string" },
    "update-std": { type: "string" },
    "norm-spread": { type: "string" },
    dtype: { type: "string", default: "bf16", choices: ["bf16", "f32"] },
    "shape-json": { type: "string" },
    "shard-mb": { type: "string" },
    "shard-bytes": { type: "string" },
    tokenizer: { type: "string" },
    "no-tokenizer": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
  });
  const out = resolve(values.out ?? fail("--out DIR is required (see --help)", EXIT_USAGE));
  const int = (flag: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n <= 0) fail(`--${flag} ${v}: expected a positive integer`, EXIT_USAGE);
    return n;
  };
  const spread = (flag: string, v: string | undefined) => {
    if (v === undefined) return undefined;
    const x = Number(v);
    if (!(x > 0 && x < 1000)) fail(`--${flag} ${v}: expected a spread above 0`, EXIT_USAGE);
    return x;
  };
  const base = resolveShape(values.shape);
  const layers = int("layers", values.layers);
  const shape = { ...base, ...shapeJson(values["shape-json"], fail, EXIT_USAGE) };
  if (layers) shape.num_hidden_layers = layers;
  const mb = int("shard-mb", values["shard-mb"]);
  const bytes = int("shard-bytes", values["shard-bytes"]);
  let bar: ReturnType<typeof progress> | undefined, shown = 0;
  const result = await makeQwen3Folder(out, {
    shape,
    seed: int("seed", values.seed),
    peaked: values.peaked,
    logitStd: spread("logit-std", values["logit-std"]),
    updateStd: spread("update-std", values["update-std"]),
    normSpread: spread("norm-spread", values["norm-spread"]),
    dtype: values.dtype as "bf16" | "f32",
    shardBytes: bytes ?? (mb === undefined ? undefined : mb * 1e6),
    tokenizerDir: values["no-tokenizer"] ? null : values.tokenizer,
    onProgress: values.json ? undefined : (done, total) => {
      bar ??= progress("weights", total, { unit: "param" });
      bar.tick(done - shown);
      shown = done;
    },
  });
  bar?.done();
  if (values.json) console.log(JSON.stringify({ dir: out, shape, ...result }));
  else {console.log(
      `${values.out}: ${result.params.toLocaleString("en")} parameters in ${result.files.join(", ")}`,
    );}
}

if (import.meta.main) await main();

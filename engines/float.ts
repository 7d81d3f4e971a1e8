/**
 * The float CPU engine: the reference Qwen3 model (model/qwen3.ts) in f32 behind the `Engine`
 * interface. It is built from a config and named tensors, whatever file they came from; reading files
 * is the loader's job (engines/mod.ts), so this module knows no format. Frozen (as the loader builds
 * it), its matrices live once in kernels/wasm/packed.ts's layout, bf16 when exact, a file's quantized
 * blocks as they are stored (`TensorSource.blocks`), and its products
 * run on `threads` threads with the same bits on any number; sessions hold `context` positions.
 *
 * @example
 * ```ts
 * import { createFloatEngine } from "./float.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { Tensor } from "../model/tensor.ts";
 * import { encode } from "../model/tokenizer.ts";
 * declare const config: ModelConfig, tensors: Tensor[]; // read from out/ferry.bf16.dmexp
 * const engine = createFloatEngine(config, tensors, "out/ferry.bf16.dmexp");
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }));
 * const next = s.pick();                      // greedy
 * ```
 * @module
 */
import { defaultKernels, type Kernels, rmsnorm, ropeHead, ropeTables } from "../kernels/kernels.ts";
import {
  createPackedStore,
  type PackedDtype,
  type PackedMatrix,
  type PackedShare,
  type PackedStore,
} from "../kernels/wasm/packed.ts";
import { isBlockDtype } from "../kernels/wasm/blocks.ts";
import { checkTensors, type ModelConfig, paramShapes } from "../model/config.ts";
import { FormatError } from "../model/error.ts";
import type {
  Engine,
  EngineSession,
  LogitsWanted,
  SamplingOptions,
  TokenLogprobs,
  WeightsShare,
} from "../model/engine.ts";
import { checkRewind, contextOf, defaultContext as defaultContextOf } from "../model/engine.ts";
import {
  type Activations,
  buildModel,
  forward,
  type KVCache,
  mapWeights,
  type Model,
  type Qwen3Kernels,
  walkForward,
  type Weights,
  weightsByName,
} from "../model/qwen3.ts";
import { createRng, type Rng } from "../model/random.ts";
import { floatLogprobs, neverSampled, pickToken, type SpecialIds } from "../model/sample.ts";
import { byteTokenizer } from "../model/tokenizer.ts";
import { checkSampling, checkSeed } from "../model/sampling.ts";
import { materialize, type Tensor, type TensorSource } from "../model/tensor.ts";
import {
  decodeFloatSession,
  type DigestTensor,
  encodeFloatSession,
  floatSessionShape,
  type SessionShape,
} from "../formats/session/session.ts";

/** How a float engine runs, and how it may treat the tensors it is given. */
export interface FloatEngineOptions {
  /**
   * The caller will never write the tensors again (they were read from a file for this engine alone),
   * so the engine keeps its own packed copy of each weight matrix, once, and no reference to the
   * tensors (see `createFloatEngine`). Only on the WebAssembly kernels; the reference set runs in place.
   */
  frozen?: boolean;
  /** The tokenizer's special ids, which the sampler never picks (model/sample.ts `neverSampled`). */
  specials?: SpecialIds;
  /** The kernel set (kernels/kernels.ts `kernelSet`; default the WebAssembly SIMD set where there is one). */
  kernels?: Kernels;
  /**
   * Threads a frozen engine's matrix products run on, this one included (default: the machine's
   * cores, `defaultThreads()`). The logits are the same bits on any number.
   */
  threads?: number;
  /**
   * Positions each session's KV cache holds (default `defaultContext(config)`); feeding past it is
   * refused. At most max_position_embeddings.
   */
  context?: number;
  /**
   * How a frozen engine keeps its matrices: `auto` (default) keeps a matrix its file stores in quantized
   * blocks the store multiplies by (Q8_0, Q4_0, IQ4_NL, Q4_K, Q6_K: kernels/wasm/blocks.ts) as those
   * blocks, and any other as bf16 when every value is one, else f32 (each exact: the same bits); `f32`
   * always f32 (the most bytes read per token).
   */
  keep?: "auto" | "f32";
  /**
   * Matrix bytes from which a product is split between the threads (kernels/wasm/packed.ts
   * `SPLIT_BYTES`, 1 MiB; smaller ones run on one thread, where waking workers would cost more than
   * they save). Tests pass 0 to split every product; the bits are the same either way.
   */
  splitBytes?: number;
  /**
   * One copy of the weights for `count` engines (engines/mod.ts `EngineLoadOptions.share`; a chat
   * server's slots, each in its own worker), frozen engines on the WebAssembly kernels only: engine 0
   * packs them into a shared memory and offers them as its `shareable` (`FloatWeights`); an engine given
   * that as `weights` attaches to them (`attachFloatEngine`) and packs nothing. Where the memory cannot
   * be shared (a page that is not cross-origin isolated) there is no `shareable`.
   */
  share?: WeightsShare;
}

/** The positions a session holds unless `context` says otherwise (model/engine.ts, the one definition). */
export { DEFAULT_CONTEXT } from "../model/engine.ts";

/** min(max_position_embeddings, `DEFAULT_CONTEXT`): model/engine.ts `defaultContext` for a config. */
export function defaultContext(config: ModelConfig): number {
  return defaultContextOf(config.max_position_embeddings);
}

/** The machine's cores (`navigator.hardwareConcurrency`), at least 1: the default `threads`. */
export function defaultThreads(): number {
  const n = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator?.hardwareConcurrency;
  return Math.max(1, Math.floor(n ?? 1));
}

/** What a frozen float engine keeps: its packed matrices (by dtype) and its plain f32 vectors. */
export interface FloatEngineMemory {
  /** Whether its weights are shared with other engines (it offered them, or attached to another's). */
  shared: boolean;
  /** Threads its products run on. */
  threads: number;
  /** Positions a session's KV cache holds. */
  context: number;
  /** Bytes of packed weight matrices, the one copy the products stream (padding included). */
  packedBytes: number;
  /** Matrices kept in each dtype (a tied embedding/lm_head counts once). */
  matrices: Partial<Record<PackedDtype, number>>;
  /** Bytes of the f32 norm vectors, kept plain (shared, in one SharedArrayBuffer for every engine). */
  vectorBytes: number;
  /**
   * Bytes of a full session's KV cache (keys and values of every layer for `context` positions); a
   * session's arrays grow to it as positions fill, doubling from 64 positions.
   */
  cacheBytes: number;
}

const memories = new WeakMap<Engine, FloatEngineMemory>();

/** What a frozen float engine (`createFloatEngine` with `frozen`) keeps; undefined for any other engine. */
export function floatEngineMemory(engine: Engine): FloatEngineMemory | undefined {
  return memories.get(engine);
}

/**
 * A float engine over `tensors`, which must be exactly the ones `config` implies (checked; the
 * refusal names `source`). Unfrozen, the tensors are used in place, not copied. Frozen (on the
 * WebAssembly kernels), each weight matrix is packed once into a shared WebAssembly memory in the
 * layout its product streams (bf16 when exact, see kernels/wasm/packed.ts) and the engine keeps no
 * reference to the tensors, so the caller's f32 copy can be collected: one copy of the weights. Frozen
 * with `share`, that copy serves other engines too (`FloatEngineOptions.share`); given another's
 * `weights`, the engine attaches to them (`attachFloatEngine`) and the tensors are not used.
 */
export function createFloatEngine(
  config: ModelConfig,
  tensors: Tensor[],
  source = "tensors",
  options: FloatEngineOptions = {},
): Engine {
  const model = buildModel(config, tensors, source, options.kernels);
  if (!options.frozen || model.kernels.name !== "wasm") return floatEngineOf(model, source, options);
  if (options.share?.weights !== undefined) return attachFloatEngine(options.share.weights, source, options);
  return packedEngine(model, source, options);
}

/**
 * What an engine's sessions run on: a forward pass over a cache, the tensors its session digest hashes
 * (called once, on the first save or restore), and a promise the first feed waits for.
 */
interface Runner {
  config: ModelConfig;
  context: number;
  /** Bytes of the weights as the engine holds them (`Engine.weightBytes`). */
  weightBytes: number;
  /** The weights offered to other engines (`Engine.shareable`), where they are shared. */
  shareable?: FloatWeights;
  /** The tokenizer's special ids (absent: a byte model's, or none). */
  specials?: SpecialIds;
  forward(cache: KVCache, tokens: readonly number[], head: "all" | "last"): Float32Array;
  tensors(): readonly Tensor[];
  /** The tensors as the session digest reads them, where cheaper than `tensors()` (packed matrices by rows). */
  digestTensors?(): readonly DigestTensor[];
  ready?: Promise<void>;
}

/**
 * The float engine over a model already built, on the model's kernel set: how a model made in memory
 * (live training weights, a test's random init) generates and is measured through the `Engine` interface.
 * Its sessions save as float sessions (formats/session/session.md, version 2), bound to the model by
 * `floatModelDigest` of its config and tensors (computed once, on the first save or restore).
 * `options.context` sizes each session's KV cache (default `defaultContext`).
 */
export function floatEngineOf(
  model: Model,
  source = "model",
  options: Pick<FloatEngineOptions, "context" | "specials"> = {},
): Engine {
  return engineOf({
    config: model.config,
    context: contextOf(model.config.max_position_embeddings, options.context),
    // From the dims: the tensors the model was built from (a tied lm_head is the embedding, once).
    weightBytes: model.tensors.reduce((n, t) => n + 4 * t.dims.reduce((a, b) => a * b, 1), 0),
    specials: options.specials,
    forward: (cache, tokens) => forward(model, cache, tokens),
    tensors: () => model.tensors,
  }, source);
}

/** A weight as the packed engine holds it: a packed matrix, or a plain f32 vector (the norms). */
type Held = Float32Array | PackedMatrix;

/** The frozen engine: the model's matrices packed once, then the model's f32 arrays let go. */
function packedEngine(model: Model, source: string, options: FloatEngineOptions): Engine {
  const store = storeFor(options);
  const byName = packWeights(model, store, options.keep === "f32" ? "f32" : "auto");
  return packedEngineOver(model.config, model.kernels, store, byName, source, options);
}

function storeFor(options: FloatEngineOptions, attach?: PackedShare): PackedStore {
  return createPackedStore({
    threads: options.threads ?? defaultThreads(),
    splitBytes: options.splitBytes,
    attach,
  });
}

/**
 * A frozen float engine built as its file streams past (what engines/mod.ts loads an export with when
 * its format can open it for streaming): each weight matrix is read a chunk of rows at a time straight
 * into the packed store (`PackedStore.packFrom`; a matrix whose source offers quantized blocks the store
 * keeps, as those blocks: `PackedStore.packBlocks`), so loading holds the packed weights and one chunk,
 * never an f32 copy of the model beside them; the vectors (norms) are read whole. The sources must be exactly the
 * tensors `config` implies (checked first, naming `source`). The same engine, bits and sessions as
 * `createFloatEngine(config, tensors, source, { frozen: true })`; on a kernel set other than WebAssembly's
 * (which runs unfrozen, in place) the tensors are read whole and handed to it. `share` as for
 * `createFloatEngine` (given another's `weights`, nothing is read).
 *
 * @example
 * ```ts
 * import { createFloatEngineFromSources } from "./float.ts";
 * import { dmexpFormat } from "../formats/dmexp/dmexp.ts";
 * const m = await dmexpFormat.open!("out/q.bf16.dmexp");
 * const engine = await createFloatEngineFromSources(m.config, m.sources, "out/q.bf16.dmexp", {});
 * await m.close();
 * ```
 */
export async function createFloatEngineFromSources(
  config: ModelConfig,
  sources: TensorSource[],
  source: string,
  options: FloatEngineOptions = {},
): Promise<Engine> {
  const bad = checkTensors(config, sources);
  if (bad) throw new FormatError(source, bad.code, bad.tensor, `${source}: ${bad.message}`, bad);
  const kernels = options.kernels ?? defaultKernels;
  if (kernels.name !== "wasm") {
    return createFloatEngine(config, await Promise.all(sources.map(materialize)), source, options);
  }
  if (options.share?.weights !== undefined) return attachFloatEngine(options.share.weights, source, options);
  const store = storeFor(options), keep = options.keep === "f32" ? "f32" : "auto";
  const bySource = new Map(sources.map((s) => [s.name, s]));
  const byName = new Map<string, Held>();
  try {
    for (const { name, dims } of paramShapes(config)) {
      const src = bySource.get(name)!;
      byName.set(
        name,
        dims.length === 2
          ? await packSource(store, src, dims[0], dims[1], keep)
          : (await materialize(src)).data,
      );
    }
  } catch (e) {
    store.close();
    throw e;
  }
  return packedEngineOver(config, kernels, store, byName, source, options);
}

/**
 * A source's matrix into the store: as its stored blocks where the store keeps their type and `keep` is
 * `auto`, else read as f32 rows (kept bf16 when exact, unless `keep` is `f32`).
 */
function packSource(
  store: PackedStore,
  src: TensorSource,
  N: number,
  K: number,
  keep: "auto" | "f32",
): Promise<PackedMatrix> {
  const blocks = src.blocks, dtype = blocks?.type.toLowerCase() ?? "";
  if (blocks && keep === "auto" && isBlockDtype(dtype)) {
    return store.packBlocks((row, rows, scratch) => blocks.read(row, rows, scratch), N, K, dtype);
  }
  return store.packFrom((start, count, scratch) => src.read(start, count, scratch), N, K, keep);
}

/**
 * The weights a frozen float engine loaded with `share` offers other engines (its `Engine.shareable`):
 * plain data, a shared WebAssembly memory and a SharedArrayBuffer, so it posts to another worker
 * without copying a weight. Everything the engine keeps of the model is in it: an engine that attaches
 * reads no file.
 */
export interface FloatWeights {
  /** The model's shape. */
  config: ModelConfig;
  /** The packed store's memory and where its matrices end (the embedding and lm_head included). */
  packed: PackedShare;
  /**
   * Every weight by name, in `paramShapes` order: a matrix's place in the packed store, or a norm
   * vector, a view of one SharedArrayBuffer that every engine reads.
   */
  weights: [string, PackedMatrix | Float32Array][];
}

/** Whether `x` is a `FloatWeights` (what `attachFloatEngine` is handed is opaque). */
function isFloatWeights(x: unknown): x is FloatWeights {
  const w = x as FloatWeights | undefined;
  return typeof w?.config === "object" && w.packed?.memory instanceof WebAssembly.Memory &&
    Array.isArray(w.weights);
}

/**
 * A frozen float engine over another's weights: its `shareable` (a `FloatWeights`), here or posted from
 * another worker. It packs and reads nothing; of its own it holds its sessions' KV caches, its RoPE
 * tables and its products' work area (pages of the shared memory it grew itself, which no other engine
 * writes: kernels/wasm/packed.ts). The same tokens, logits and session bytes as the engine that packed
 * the weights. `threads`, `context`, `specials` and `splitBytes` as for any frozen engine; the kernel set
 * must be WebAssembly's (the default where the runtime has SIMD).
 *
 * @example
 * ```ts
 * import { attachFloatEngine, createFloatEngine } from "./float.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { Tensor } from "../model/tensor.ts";
 * declare const config: ModelConfig, tensors: Tensor[];
 * const first = createFloatEngine(config, tensors, "m", { frozen: true, share: { count: 2, slot: 0 } });
 * const second = attachFloatEngine(first.shareable, "m", { threads: 1 }); // or in another worker
 * ```
 */
export function attachFloatEngine(
  weights: unknown,
  source: string,
  options: FloatEngineOptions = {},
): Engine {
  if (!isFloatWeights(weights)) {
    throw new TypeError(`${source}: the weights to attach to are not a float engine's`);
  }
  const kernels = options.kernels ?? defaultKernels;
  if (kernels.name !== "wasm") {
    throw new RangeError(`${source}: shared float weights run on the wasm kernels, not ${kernels.name}`);
  }
  const store = storeFor(options, weights.packed);
  return packedEngineOver(weights.config, kernels, store, new Map(weights.weights), source, options, weights);
}

/**
 * Offers a packed engine's weights to others: the store's matrices, and its norm vectors moved into
 * one SharedArrayBuffer (`byName` updated to the shared views). Undefined where the store's memory is
 * not shared.
 */
function offerWeights(
  config: ModelConfig,
  store: PackedStore,
  byName: Map<string, Held>,
): FloatWeights | undefined {
  const packed = store.share();
  if (!packed) return undefined;
  let bytes = 0;
  for (const w of byName.values()) if (w instanceof Float32Array) bytes += w.byteLength;
  const room = new SharedArrayBuffer(bytes);
  let at = 0;
  for (const [name, w] of byName) {
    if (!(w instanceof Float32Array)) continue;
    const view = new Float32Array(room, at, w.length);
    view.set(w);
    byName.set(name, view);
    at += w.byteLength;
  }
  return { config, packed, weights: [...byName] };
}

/**
 * The frozen engine over weights already in `store`, named in `byName`; `attached` when they are another
 * engine's. With `options.share` (and nothing attached), it offers them (`offerWeights`).
 */
function packedEngineOver(
  config: ModelConfig,
  kernels: Kernels,
  store: PackedStore,
  byName: Map<string, Held>,
  source: string,
  options: FloatEngineOptions,
  attached?: FloatWeights,
): Engine {
  const shareable = attached ?? (options.share ? offerWeights(config, store, byName) : undefined);
  const weights = weightsByName<Held>(config, (name) => byName.get(name)!);
  const shapes = paramShapes(config).map(({ name, dims }) => ({ name, dims: [...dims] }));
  const context = contextOf(config.max_position_embeddings, options.context);
  const rope = ropeTables(context, config.head_dim, config.rope_theta);
  const held = [...new Set(byName.values())];
  const packed = held.filter((w): w is PackedMatrix => !(w instanceof Float32Array));
  const packedBytes = packed.reduce((s, w) => s + w.bytes, 0);
  const vectorBytes = held.reduce((s, w) => s + (w instanceof Float32Array ? w.byteLength : 0), 0);
  const kvBytes = 2 * config.num_hidden_layers * context * config.num_key_value_heads * config.head_dim * 4;
  let up = store.threads === 1;
  const runner: Runner = {
    config,
    context,
    weightBytes: packedBytes + vectorBytes,
    shareable,
    specials: options.specials,
    ready: store.ready.then(() => void (up = true)),
    forward: (cache, tokens, head) =>
      packedForward(config, weights, store, kernels, rope, cache, tokens, head),
    tensors: () =>
      shapes.map(({ name, dims }) => {
        const w = byName.get(name)!;
        return {
          name,
          dims,
          get data() {
            return w instanceof Float32Array ? w : store.unpack(w);
          },
        };
      }),
    digestTensors: () =>
      shapes.map(({ name, dims }) => {
        const w = byName.get(name)!;
        if (w instanceof Float32Array) return { name, dims, data: w };
        return { name, dims, rows: (n: number, out: Float32Array) => store.row(w, n, out, 0) };
      }),
  };
  if (up) delete runner.ready;
  // An engine dropped before its workers were up ends them (see `closeWhenCollected`): nobody waits.
  else runner.ready!.catch(() => {});
  const engine = engineOf(runner, source, () => up);
  memories.set(engine, {
    shared: shareable !== undefined,
    threads: store.threads,
    context,
    packedBytes,
    matrices: packed.reduce<FloatEngineMemory["matrices"]>(
      (n, w) => ({ ...n, [w.dtype]: (n[w.dtype] ?? 0) + 1 }),
      {},
    ),
    vectorBytes,
    cacheBytes: kvBytes,
  });
  closeWhenCollected.register(runner, store); // the runner: what the engine and every session hold
  return engine;
}

/**
 * Packs the model's matrices into the store (vectors are copied) and names every weight held. A
 * function of its own so that no closure the engine keeps can reach the model's f32 arrays.
 */
function packWeights(model: Model, store: PackedStore, keep: "auto" | "f32"): Map<string, Held> {
  const dims = new Map(model.tensors.map((t) => [t.data, t.dims]));
  const byName = new Map<string, Held>();
  mapWeights<Held>(model, (data, name) => {
    const d = dims.get(data)!;
    // A vector is copied: a reader's tensors may be views of one buffer, which a view would keep.
    const w = d.length === 2 ? store.pack(data, d[0], d[1], keep) : data.slice();
    byName.set(name, w);
    return w;
  });
  return byName;
}

/**
 * A dropped engine's workers end with it, once neither it nor any of its sessions can run again (the
 * workers hold the store's memory, never the engine).
 */
const closeWhenCollected = new FinalizationRegistry<PackedStore>((store) => store.close());

/** One forward pass of the packed engine: model/qwen3.ts `walkForward` on the store's products. */
function packedForward(
  c: ModelConfig,
  weights: Weights<Held>,
  store: PackedStore,
  kernels: Kernels,
  rope: ReturnType<typeof ropeTables>,
  cache: KVCache,
  tokens: readonly number[],
  head: "all" | "last",
): Float32Array {
  const T = tokens.length, H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim;
  const nh = c.num_attention_heads, nkv = c.num_key_value_heads, qDim = nh * hd, kvDim = nkv * hd;
  const plain = (w: Held) => w as Float32Array, matrix = (w: Held) => w as PackedMatrix;
  const k: Qwen3Kernels<Float32Array, Held> = {
    embed(x, ids, table, dim) {
      for (let t = 0; t < ids.length; t++) {
        if (table instanceof Float32Array) x.set(table.subarray(ids[t] * dim, ids[t] * dim + dim), t * dim);
        else store.row(table, ids[t], x, t * dim);
      }
    },
    rmsnorm: (out, x, w, rows, dim, eps) => rmsnorm(out, x, plain(w), rows, dim, eps),
    matmul: (out, x, w, M) => store.matmul(out, x, matrix(w), M),
    rope(x, T, heads, pos0) {
      for (let t = 0; t < T; t++) {
        for (let h = 0; h < heads; h++) ropeHead(x, (t * heads + h) * hd, pos0 + t, rope);
      }
    },
    attention(att, q, kk, v, layer, T, pos0) {
      const K = cache.keys[layer], Vc = cache.values[layer];
      K.set(kk.subarray(0, T * kvDim), pos0 * kvDim);
      Vc.set(v.subarray(0, T * kvDim), pos0 * kvDim);
      kernels.attendCached(att, q, K, Vc, T, pos0, nh, nkv, hd);
    },
    addInto(x, y, n) {
      for (let i = 0; i < n; i++) x[i] += y[i];
    },
    swiglu: (gate, up, n) => kernels.swiglu(gate, gate, up, n),
    copyRow: (out, x, row, dim) => out.set(x.subarray(row * dim, row * dim + dim)),
  };
  const rows = head === "all" ? T : 1;
  const a: Activations<Float32Array> = {
    x: new Float32Array(T * H),
    xn: new Float32Array(T * H),
    q: new Float32Array(T * qDim),
    k: new Float32Array(T * kvDim),
    v: new Float32Array(T * kvDim),
    att: new Float32Array(T * qDim),
    proj: new Float32Array(T * H),
    gate: new Float32Array(T * I),
    up: new Float32Array(T * I),
    logits: new Float32Array(rows * c.vocab_size),
  };
  walkForward(c, weights, k, a, tokens, cache.length, cache.capacity, head);
  cache.length += T;
  return a.logits;
}

/**
 * An empty KV cache that may hold `capacity` positions. Its arrays start small and grow as positions
 * fill (`reserveCache`), so a session costs what it holds, not its whole context: at Qwen3-0.6B's
 * shape a full 4096-position cache is 0.94 GB.
 */
function emptyCache(c: ModelConfig, capacity: number): KVCache {
  const n = c.num_hidden_layers;
  return {
    keys: Array.from({ length: n }, () => new Float32Array(0)),
    values: Array.from({ length: n }, () => new Float32Array(0)),
    length: 0,
    capacity,
  };
}

/** Positions a cache's arrays are first allocated for. */
const CACHE_START = 64;

/**
 * Makes `cache`'s arrays hold at least `positions` positions (doubling, at most its capacity; past the
 * capacity the feed's own check refuses), keeping what they hold.
 */
function reserveCache(cache: KVCache, positions: number, kvDim: number): void {
  const have = cache.keys[0]?.length ?? 0;
  if (have >= Math.min(positions, cache.capacity) * kvDim) return;
  let rows = Math.max(CACHE_START, have / kvDim);
  while (rows < positions) rows *= 2;
  const size = Math.min(rows, cache.capacity) * kvDim;
  const grow = (a: Float32Array) => {
    const b = new Float32Array(size);
    b.set(a.subarray(0, cache.length * kvDim));
    return b;
  };
  cache.keys = cache.keys.map(grow);
  cache.values = cache.values.map(grow);
}

/** The `Engine` over a runner; `isUp` says whether the first feed may skip waiting for `ready`. */
function engineOf(runner: Runner, source: string, isUp: () => boolean = () => true): Engine {
  const config = runner.config, kvDim = config.num_key_value_heads * config.head_dim;
  const never = neverSampled(config, runner.specials);
  let shape: SessionShape | undefined;
  const shapeOf = () => shape ??= floatSessionShape(config, runner.digestTensors?.() ?? runner.tensors());
  const fresh = (): FloatState => ({
    cache: emptyCache(config, runner.context),
    tokens: [],
    rng: createRng(0),
    pending: undefined,
  });
  return {
    kind: "float",
    weightBytes: runner.weightBytes,
    shareable: runner.shareable,
    config,
    source,
    tokenizer: byteTokenizer, // engines/mod.ts loadEngine sets the model's own
    context: runner.context,
    start: () => floatSession(runner, never, shapeOf, fresh(), isUp),
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const d = decodeFloatSession(bytes, shapeOf(), "float", where);
      if (d.position > runner.context) {
        throw new RangeError(
          `${where}: the session holds ${d.position} positions, more than this engine's context of ${runner.context}`,
        );
      }
      const st = fresh();
      st.tokens.push(...d.tokens);
      reserveCache(st.cache, d.position, kvDim);
      st.cache.length = d.position;
      d.keys.forEach((k, l) => st.cache.keys[l].set(k));
      d.values.forEach((v, l) => st.cache.values[l].set(v));
      st.rng = createRng(d.rng);
      st.pending = d.position > 0 ? d.logits : undefined;
      return floatSession(runner, never, shapeOf, st, isUp);
    },
  };
}

/** One conversation's state on the float engine. */
interface FloatState {
  cache: KVCache;
  tokens: number[];
  rng: Rng;
  /** The last fed position's logits: what `pick` and `logprobs` read. */
  pending: Float32Array | undefined;
}

/** A deep copy: the same continuation, bit for bit, and nothing shared. */
function copyState(st: FloatState): FloatState {
  const c = st.cache;
  return {
    cache: { ...c, keys: c.keys.map((k) => k.slice()), values: c.values.map((v) => v.slice()) },
    tokens: [...st.tokens],
    rng: createRng(st.rng.state()),
    pending: st.pending?.slice(),
  };
}

function floatSession(
  runner: Runner,
  never: Uint8Array,
  shapeOf: () => SessionShape,
  st: FloatState,
  isUp: () => boolean,
): EngineSession {
  const V = runner.config.vocab_size;
  const kvDim = runner.config.num_key_value_heads * runner.config.head_dim;
  const cache = st.cache, tokens = st.tokens;
  // A refusal (a position past the context, an id outside the vocabulary) rejects, never throws.
  const feedNow = (ids: readonly number[], wanted: LogitsWanted): Float32Array => {
    if (ids.length === 0) return new Float32Array(0);
    reserveCache(cache, tokens.length + ids.length, kvDim);
    const logits = runner.forward(cache, ids, wanted === "all" ? "all" : "last");
    tokens.push(...ids);
    st.pending = logits.subarray(logits.length - V);
    if (wanted === "all") return logits;
    return wanted === "last" ? st.pending.slice() : new Float32Array(0);
  };
  return {
    get position() {
      return tokens.length;
    },
    get tokens() {
      return tokens;
    },
    feed(ids: readonly number[], wanted: LogitsWanted = "last") {
      // Until the engine's worker threads are up (the first feed only), wait for them.
      if (!isUp() && runner.ready) return runner.ready.then(() => feedNow(ids, wanted));
      try {
        return Promise.resolve(feedNow(ids, wanted));
      } catch (e) {
        return Promise.reject(e);
      }
    },
    pick(options: SamplingOptions = {}) {
      const choice = checkSampling(options);
      if (!st.pending) {
        throw new Error("pick: nothing fed yet (or since a rewind), so there is no next-token distribution");
      }
      return pickToken(st.pending, 0, V, choice, st.rng, never);
    },
    seed(seed: number) {
      st.rng = createRng(checkSeed(seed));
    },
    logprobs(ids: readonly number[], top: number): TokenLogprobs {
      if (!st.pending) {
        throw new Error(
          "logprobs: nothing fed yet (or since a rewind), so there is no next-token distribution",
        );
      }
      return floatLogprobs(st.pending, 0, V, ids, top);
    },
    save(): Uint8Array {
      if (!st.pending && tokens.length > 0) {
        throw new Error("save: nothing fed since a rewind, so there is no next-token distribution to save");
      }
      const n = tokens.length;
      return encodeFloatSession({
        shape: shapeOf(),
        engine: "float",
        position: n,
        tokens,
        rng: st.rng.state(),
        logits: st.pending ?? new Float32Array(0),
        keys: cache.keys.map((k) => k.subarray(0, n * kvDim)),
        values: cache.values.map((v) => v.subarray(0, n * kvDim)),
      });
    },
    fork: () => floatSession(runner, never, shapeOf, copyState(st), isUp),
    rewind(length: number) {
      if (checkRewind(length, tokens.length) === tokens.length) return;
      // The rows past `length` stay allocated and are overwritten by the next feed.
      tokens.length = length;
      cache.length = length;
      st.pending = undefined;
    },
  };
}

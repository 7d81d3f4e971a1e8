/**
 * The float engine on WebGPU (Deno only). It runs model/qwen3.ts's own `walkForward`, with the kernels
 * of `wgsl.ts` in place of the CPU ones: weights, shapes and the order of operations come from the
 * model definition, not from a copy of it. Weights and every session's KV cache stay on the GPU; each
 * `feed` is one command submission per chunk of up to CHUNK tokens, each reading back the chunk's new
 * KV rows (the session's CPU copy of its cache, so `save` and `fork` need no GPU round trip), and at
 * the end the GPU's argmax (4 bytes; never a never-sampled id, model/sample.ts `neverSampled`), with the
 * logits the caller asked for (see `WebGpuEngineOptions.readback`). Sessions save as float sessions
 * (formats/session/session.md, version 2, engine `webgpu`).
 *
 * @example
 * ```ts
 * import { createWebGpuEngine } from "./webgpu.ts";
 * import type { ModelConfig } from "../model/config.ts";
 * import type { Tensor } from "../model/tensor.ts";
 * import { encode } from "../model/tokenizer.ts";
 * declare const config: ModelConfig, tensors: Tensor[]; // read from out/ferry.bf16.dmexp
 * const engine = await createWebGpuEngine(config, tensors, "out/ferry.bf16.dmexp", { readback: "argmax" });
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }), "none"); // reads back 4 bytes: the argmax
 * const next = s.pick();                                          // greedy, from the GPU's argmax
 * ```
 * @module
 */
import type { Engine, EngineSession, LogitsWanted, SamplingOptions, TokenLogprobs } from "../model/engine.ts";
import { checkRewind, contextOf } from "../model/engine.ts";
import type { ModelConfig } from "../model/config.ts";
import type { Tensor } from "../model/tensor.ts";
import {
  type Activations,
  buildModel,
  checkTokens,
  type HeadRows,
  mapWeights,
  type Model,
  type Qwen3Kernels,
  walkForward,
  type Weights,
} from "../model/qwen3.ts";
import { floatLogprobs, maskedArgmax, neverSampled, pickToken, type SpecialIds } from "../model/sample.ts";
import { byteTokenizer } from "../model/tokenizer.ts";
import { checkSampling, checkSeed } from "../model/sampling.ts";
import { createRng, type Rng } from "../model/random.ts";
import { type Gpu, openGpu } from "../kernels/webgpu/device.ts";
import * as W from "../kernels/webgpu/wgsl.ts";
import {
  decodeFloatSession,
  encodeFloatSession,
  floatSessionShape,
  type SessionShape,
} from "../formats/session/session.ts";

/** Tokens per command submission during prefill; longer prompts run in several. */
export const CHUNK = 128;

/** A GPU buffer with an id, so bind groups can be cached by the buffers they bind. */
export interface Buf {
  gpu: GPUBuffer;
  id: number;
  bytes: number;
}

/**
 * A session's KV cache on the GPU, [k, v] per layer, the bind groups that use it (cached by key), and
 * its copy on the CPU ([k, v] per layer, `context` rows), kept by every feed's readback.
 */
interface SessionCache {
  layers: Buf[][];
  bindGroups: Map<string, GPUBindGroup>;
  mirror: Float32Array[][];
}

const SLOT = 256; // bytes between uniform slots: the minimum uniform-offset alignment WebGPU allows

/**
 * The engine table's factory (engines/mod.ts): gets the device first, so a machine without WebGPU
 * (or Bun) is told so before the export is read, then reads the export through its format (a
 * `FormatDescriptor`; kernels know no format, so only its `read` is named here).
 */
export async function loadWebGpuEngine(
  path: string,
  format: { read(path: string, options?: object): Promise<{ config: ModelConfig; tensors: Tensor[] }> },
  options: {
    onProgress?: (done: number, total: number) => void;
    context?: number;
    specials?: SpecialIds | Promise<SpecialIds | undefined>;
  } = {},
): Promise<Engine> {
  const gpu = await openGpu();
  const { config, tensors } = await format.read(path, options);
  return await createWebGpuEngine(config, tensors, path, {
    gpu,
    context: options.context,
    specials: await options.specials,
  });
}

/** Options of `createWebGpuEngine`. */
export interface WebGpuEngineOptions {
  /** The device (default: the process's, from `openGpu`). */
  gpu?: Gpu;
  /**
   * What `feed(tokens, "none")` reads back: the GPU's argmax and the last position's logits, so `pick`
   * can sample as well as choose greedily (`"logits"`, the default; 4 + 4·vocab bytes), or the argmax
   * alone (`"argmax"`, 4 bytes; then `pick` is greedy only, and sampling needs `feed` with `"last"`).
   * Either way it is one readback per feed.
   */
  readback?: "logits" | "argmax";
  /**
   * Positions a session's KV cache (on the GPU and its CPU copy) and the RoPE tables hold (default
   * min(max_position_embeddings, 4096), as the float engine's); feeding past it is refused.
   */
  context?: number;
  /** The tokenizer's special ids, which the sampler never picks (model/sample.ts `neverSampled`). */
  specials?: SpecialIds;
}

/** Builds the WebGPU engine for a model given by its config and named tensors (`source` names the file). */
export async function createWebGpuEngine(
  config: ModelConfig,
  tensors: Tensor[],
  source: string,
  options: WebGpuEngineOptions = {},
): Promise<Engine> {
  const model = buildModel(config, tensors, source);
  checkGpuShape(config, source);
  const context = contextOf(config.max_position_embeddings, options.context);
  const gpu = options.gpu ?? await openGpu(deviceNeeds(model, context));
  gpu.device.pushErrorScope("validation");
  const g = uploadModel(gpu.device, model, source, context, options.specials);
  // The digest now, while the tensors are at hand: the engine keeps only their GPU copies.
  const shape = floatSessionShape(config, model.tensors);
  const engine = webGpuEngine(g, gpu, options.readback === "argmax" ? "argmax" : "logits", shape);
  const error = await gpu.device.popErrorScope();
  if (error) throw new Error(`WebGPU engine for ${source}: ${error.message}`);
  return engine;
}

/** Refuses, before any device is asked for, a shape the kernels of `wgsl.ts` cannot run. */
function checkGpuShape(c: ModelConfig, source: string): void {
  // The one-row product reads rows as vec4s.
  const widths = {
    hidden_size: c.hidden_size,
    intermediate_size: c.intermediate_size,
    "heads × head_dim": c.num_attention_heads * c.head_dim,
  };
  for (const [name, k] of Object.entries(widths)) {
    if (k % 4 !== 0) {
      throw new Error(`${source}: the WebGPU engine needs ${name} to be a multiple of 4, got ${k}`);
    }
  }
  if (c.head_dim > W.MAX_HEAD_DIM) {
    throw new Error(`${source}: the WebGPU engine takes head_dim up to ${W.MAX_HEAD_DIM}, got ${c.head_dim}`);
  }
}

/** The device limits this model needs: its largest buffer, and the workgroup memory of the tiles. */
function deviceNeeds(model: Model, context: number): { bufferBytes: number; workgroupBytes: number } {
  const c = model.config, kvDim = c.num_key_value_heads * c.head_dim;
  const bufferBytes = Math.max(
    ...model.tensors.map((t) => t.data.length * 4),
    context * kvDim * 4,
    16 + CHUNK * c.vocab_size * 4 + 2 * c.num_hidden_layers * CHUNK * kvDim * 4, // the readback
  );
  return { bufferBytes, workgroupBytes: Math.max((W.ATTN_TILE + W.WG) * 4, 2 * W.TILE * 16 * 4) };
}

/** Makes a GPU buffer (at least 16 bytes, a multiple of 16) and keeps it in `keep` to be destroyed. */
type Allocate = (bytes: number, usage: number, label: string, keep?: GPUBuffer[]) => Buf;

// A function, not a constant: GPUBufferUsage exists only where WebGPU does, and Bun loads this module
// to be told so by `openGpu`.
const STORAGE = () => GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;

/**
 * One model on one device: its weights and RoPE tables uploaded, the activations, token, argmax,
 * readback and uniform buffers every session shares (one feed runs at a time), and the pipelines.
 */
interface GpuModel {
  config: ModelConfig;
  /** Positions a session holds (its KV cache's rows). */
  context: number;
  source: string;
  device: GPUDevice;
  allocate: Allocate;
  /** Every buffer of the model (not the sessions'), destroyed by `dispose`. */
  owned: GPUBuffer[];
  weights: Weights<Buf>;
  cos: Buf;
  sin: Buf;
  act: Activations<Buf>;
  tokens: Buf;
  argmax: Buf;
  /** The ids never sampled (model/sample.ts `neverSampled`), and as a row added before the argmax. */
  never: Uint8Array;
  /** 0, or −∞ at each never-sampled id; null when none is (then the argmax reads the logits directly). */
  bias: Buf | null;
  /** The last row's logits plus `bias`, what the argmax reads. */
  masked: Buf;
  /** 16 bytes (the argmax), the logits read (up to CHUNK rows), then the chunk's keys and values per layer. */
  readback: Buf;
  /** The uniform buffer, `slots` slots of SLOT bytes (one per dispatch of a chunk), and its CPU copy. */
  params: Buf;
  slots: number;
  paramBytes: ArrayBuffer;
  pipelines: Map<string, GPUComputePipeline>;
}

/** Uploads the model and makes everything its sessions share (inside the caller's error scope). */
function uploadModel(
  device: GPUDevice,
  model: Model,
  source: string,
  context: number,
  specials?: SpecialIds,
): GpuModel {
  const c = model.config, H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const qDim = c.num_attention_heads * c.head_dim, kvDim = c.num_key_value_heads * c.head_dim;
  const owned: GPUBuffer[] = [];
  let nextId = 1;
  const allocate: Allocate = (bytes, usage, label, keep = owned) => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage, label });
    keep.push(b);
    return { gpu: b, id: nextId++, bytes };
  };
  const upload = (data: Float32Array, label: string): Buf => {
    const b = allocate(data.byteLength, STORAGE(), label);
    device.queue.writeBuffer(b.gpu, 0, data as Float32Array<ArrayBuffer>);
    return b;
  };
  const chunk = (width: number, label: string) => allocate(CHUNK * width * 4, STORAGE(), label);
  const weights = mapWeights(model, upload);
  // RoPE for the context's positions only (row p is the same whatever the table's length).
  const half = model.rope.half;
  const cos = upload(model.rope.cos.subarray(0, context * half), "rope.cos");
  const sin = upload(model.rope.sin.subarray(0, context * half), "rope.sin");
  const act: Activations<Buf> = {
    x: chunk(H, "x"),
    xn: chunk(H, "xn"),
    q: chunk(qDim, "q"),
    k: chunk(kvDim, "k"),
    v: chunk(kvDim, "v"),
    att: chunk(qDim, "att"),
    proj: chunk(H, "proj"),
    gate: chunk(I, "gate"),
    up: chunk(I, "up"),
    logits: chunk(V, "logits"),
  };
  const tokens = chunk(1, "tokens");
  const argmax = allocate(16, STORAGE(), "argmax");
  const never = neverSampled(c, specials);
  const bias = never.includes(1) ? upload(Float32Array.from(never, (x) => x ? -Infinity : 0), "bias") : null;
  const masked = allocate(V * 4, STORAGE(), "masked");
  const readback = allocate(
    16 + CHUNK * V * 4 + 2 * c.num_hidden_layers * CHUNK * kvDim * 4,
    GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
    "readback",
  );
  const slots = c.num_hidden_layers * 24 + 16;
  const params = allocate(slots * SLOT, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, "params");
  const paramBytes = new ArrayBuffer(slots * SLOT);
  const pipelines = createPipelines(device);
  return {
    config: c,
    context,
    source,
    device,
    allocate,
    owned,
    weights,
    cos,
    sin,
    act,
    tokens,
    argmax,
    never,
    bias,
    masked,
    readback,
    params,
    slots,
    paramBytes,
    pipelines,
  };
}

/** One compute pipeline per shader of `wgsl.ts`, by the name `dispatch` uses. */
function createPipelines(device: GPUDevice): Map<string, GPUComputePipeline> {
  const shaders: Record<string, string> = {
    gemv: W.GEMV,
    matmul: W.MATMUL,
    rmsnorm: W.rmsnormSource(false),
    rmsnormInPlace: W.rmsnormSource(true),
    rope: W.ROPE,
    kvStore: W.KV_STORE,
    attention: W.ATTENTION,
    add: W.ADD,
    swiglu: W.SWIGLU,
    embed: W.EMBED,
    copyRow: W.COPY_ROW,
    argmax: W.ARGMAX,
  };
  const pipelines = new Map<string, GPUComputePipeline>();
  for (const [name, code] of Object.entries(shaders)) {
    const module = device.createShaderModule({ code, label: name });
    pipelines.set(
      name,
      device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" }, label: name }),
    );
  }
  return pipelines;
}

/** Records one dispatch: its pipeline, parameters (u32s, and one f32 at an index), buffers and grid. */
type Dispatch = (
  name: string,
  u32: number[],
  bufs: Buf[],
  groups: [number, number?],
  f32?: [number, number],
) => void;

/**
 * Records dispatches of one forward chunk into one compute pass: each takes the next parameter slot,
 * and its bind group is cached in the session's cache by (pipeline, slot, buffers).
 */
function dispatcher(g: GpuModel, pass: GPUComputePassEncoder, cache: SessionCache) {
  const paramU32 = new Uint32Array(g.paramBytes), paramF32 = new Float32Array(g.paramBytes);
  let slot = 0;
  const dispatch: Dispatch = (name, u32, bufs, groups, f32) => {
    if (slot >= g.slots) throw new Error("webgpu engine: more dispatches than parameter slots");
    const base = slot * SLOT / 4;
    u32.forEach((v, i) => paramU32[base + i] = v);
    if (f32) paramF32[base + f32[0]] = f32[1];
    const key = `${name}:${slot}:${bufs.map((b) => b.id).join(",")}`;
    let group = cache.bindGroups.get(key);
    const p = g.pipelines.get(name)!;
    if (!group) {
      group = g.device.createBindGroup({
        layout: p.getBindGroupLayout(0),
        entries: [
          { binding: 0, resource: { buffer: g.params.gpu, offset: slot * SLOT, size: 32 } },
          ...bufs.map((b, i) => ({ binding: i + 1, resource: { buffer: b.gpu } })),
        ],
      });
      cache.bindGroups.set(key, group);
    }
    pass.setPipeline(p);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(groups[0], groups[1] ?? 1);
    slot++;
  };
  return { dispatch, used: () => slot };
}

/** `walkForward`'s kernels as dispatches of `wgsl.ts`, attending over (and appending to) `cache`. */
function gpuKernels(g: GpuModel, cache: SessionCache, dispatch: Dispatch): Qwen3Kernels<Buf, Buf> {
  const c = g.config, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const kvDim = nkv * hd;
  const flat = (n: number): [number] => [Math.ceil(n / W.WG)];
  return {
    embed(x, tokens, table, dim) {
      g.device.queue.writeBuffer(g.tokens.gpu, 0, Uint32Array.from(tokens));
      dispatch("embed", [tokens.length * dim, dim], [g.tokens, table, x], flat(tokens.length * dim));
    },
    rmsnorm(out, x, w, rows, dim, eps) {
      const grid: [number, number] = [Math.min(rows, 65535), Math.ceil(rows / 65535)];
      if (out === x) dispatch("rmsnormInPlace", [rows, dim, 0], [x, w], grid, [2, eps]);
      else dispatch("rmsnorm", [rows, dim, 0], [x, w, out], grid, [2, eps]);
    },
    matmul(out, x, w, M, K, N) {
      if (M === 1) dispatch("gemv", [M, K, N], [x, w, out], [Math.ceil(N / W.GEMV_ROWS), M]);
      else dispatch("matmul", [M, K, N], [x, w, out], [Math.ceil(N / W.TILE), Math.ceil(M / W.TILE)]);
    },
    rope(x, T, heads, pos0) {
      dispatch("rope", [T, heads, hd, pos0], [x, g.cos, g.sin], flat(T * heads * hd / 2));
    },
    attention(out, q, k, v, layer, T, pos0) {
      const [kc, vc] = cache.layers[layer];
      dispatch("kvStore", [T * kvDim, pos0 * kvDim], [k, v, kc, vc], flat(T * kvDim));
      dispatch("attention", [pos0, nh, nkv, hd, 0], [q, kc, vc, out], [nh, T], [4, 1 / Math.sqrt(hd)]);
    },
    addInto(x, y, n) {
      dispatch("add", [n], [x, y], flat(n));
    },
    swiglu(gate, up, n) {
      dispatch("swiglu", [n], [gate, up], flat(n));
    },
    copyRow(out, x, row, dim) {
      dispatch("copyRow", [row, dim], [x, out], flat(dim));
    },
  };
}

/** What one chunk reads back: nothing, the GPU's argmax of the last row, or that and the logits. */
type ChunkRead = "none" | "argmax" | "logits";

/** What a chunk read back: the argmax of its last row's logits, and the logits when asked for. */
interface ChunkResult {
  argmax: number;
  logits: Float32Array | null;
}

/**
 * Runs one chunk of tokens at pos0 in one submission and reads back its new KV rows into the cache's
 * CPU copy; returns the argmax and logits when `read` asks for them.
 */
async function runChunk(
  g: GpuModel,
  cache: SessionCache,
  tokens: number[],
  pos0: number,
  head: HeadRows,
  read: ChunkRead,
): Promise<ChunkResult | null> {
  const { device, config: c } = g, V = c.vocab_size;
  device.pushErrorScope("validation");
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  const r = dispatcher(g, pass, cache);
  const rows = head === "all" ? tokens.length : 1;
  try {
    // feed checked the tokens
    walkForward(
      c,
      g.weights,
      gpuKernels(g, cache, r.dispatch),
      g.act,
      tokens,
      pos0,
      g.context,
      head,
    );
    // over the last row's logits, never-sampled ids at −∞
    if (read !== "none" && g.bias) {
      r.dispatch("copyRow", [rows - 1, V], [g.act.logits, g.masked], [Math.ceil(V / W.WG)]);
      r.dispatch("add", [V], [g.masked, g.bias], [Math.ceil(V / W.WG)]);
      r.dispatch("argmax", [V, 0], [g.masked, g.argmax], [1]);
    } else if (read !== "none") r.dispatch("argmax", [V, (rows - 1) * V], [g.act.logits, g.argmax], [1]);
  } catch (e) {
    pass.end();
    await device.popErrorScope();
    throw e;
  }
  pass.end();
  device.queue.writeBuffer(g.params.gpu, 0, new Uint8Array(g.paramBytes, 0, r.used() * SLOT));
  const logitBytes = read === "logits" ? rows * V * 4 : 0;
  if (read !== "none") encoder.copyBufferToBuffer(g.argmax.gpu, 0, g.readback.gpu, 0, 16);
  if (logitBytes) encoder.copyBufferToBuffer(g.act.logits.gpu, 0, g.readback.gpu, 16, logitBytes);
  const kvDim = c.num_key_value_heads * c.head_dim, rowBytes = tokens.length * kvDim * 4;
  const kvAt = 16 + logitBytes, mapBytes = kvAt + 2 * c.num_hidden_layers * rowBytes;
  cache.layers.forEach((pair, l) =>
    pair.forEach((b, j) =>
      encoder.copyBufferToBuffer(
        b.gpu,
        pos0 * kvDim * 4,
        g.readback.gpu,
        kvAt + (2 * l + j) * rowBytes,
        rowBytes,
      )
    )
  );
  device.queue.submit([encoder.finish()]);
  const error = await device.popErrorScope();
  if (error) throw new Error(`WebGPU engine for ${g.source}: ${error.message}`);
  await g.readback.gpu.mapAsync(GPUMapMode.READ, 0, mapBytes);
  const mapped = g.readback.gpu.getMappedRange(0, mapBytes);
  cache.layers.forEach((_, l) =>
    [0, 1].forEach((j) =>
      cache.mirror[l][j].set(
        new Float32Array(mapped, kvAt + (2 * l + j) * rowBytes, rowBytes / 4),
        pos0 * kvDim,
      )
    )
  );
  const bytes = read === "none" ? null : mapped.slice(0, 16 + logitBytes);
  g.readback.gpu.unmap();
  if (!bytes) return null;
  const argmax = new Uint32Array(bytes, 0, 1)[0];
  return { argmax, logits: logitBytes ? new Float32Array(bytes, 16, rows * V) : null };
}

/** The engine over an uploaded model: sessions, one feed at a time across them, and `dispose`. */
function webGpuEngine(
  g: GpuModel,
  gpu: Gpu,
  noneReads: "argmax" | "logits",
  shape: SessionShape,
): Engine & { gpu: Gpu } {
  // A session's KV cache is freed when the session is collected, or by dispose() while it lives.
  const liveCaches = new Set<GPUBuffer[]>();
  const collect = new FinalizationRegistry<GPUBuffer[]>((bufs) => {
    liveCaches.delete(bufs);
    for (const b of bufs) b.destroy();
  });
  // One feed at a time across sessions: they share the activations, parameter slots and readback buffer.
  let busy: Promise<unknown> = Promise.resolve();
  const serialize = <T>(f: () => Promise<T>): Promise<T> => {
    const r = busy.then(f);
    busy = r.catch(() => {});
    return r;
  };
  // A session over a fresh cache, holding `from`'s state (its cache rows written to the GPU) if given.
  const open = (from?: GpuSessionState): EngineSession => {
    const bufs: GPUBuffer[] = [];
    const cache = sessionCache(g, bufs);
    liveCaches.add(bufs);
    collect.register(cache, bufs); // the cache, not the session: a feed in flight keeps it alive
    const st: GpuSessionState = from
      ? { ...from, cache }
      : { cache, tokens: [], rng: createRng(0), pending: null };
    if (from) writeCache(g, cache, from.cache.mirror, from.tokens.length);
    return webGpuSession(g, st, serialize, noneReads, shape, open);
  };
  return {
    kind: "webgpu",
    tokenizer: byteTokenizer, // engines/mod.ts loadEngine sets the model's own
    config: g.config,
    source: g.source,
    context: g.context,
    gpu,
    start: () => open(),
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const d = decodeFloatSession(bytes, shape, "webgpu", where);
      if (d.position > g.context) {
        throw new RangeError(
          `${where}: the session holds ${d.position} positions, more than this engine's context of ${g.context}`,
        );
      }
      const mirror = d.keys.map((k, l) => [k, d.values[l]]);
      const argmax = maskedArgmax(d.logits, 0, g.config.vocab_size, g.never);
      return open({
        cache: { layers: [], bindGroups: new Map(), mirror },
        tokens: d.tokens,
        rng: createRng(d.rng),
        pending: d.position > 0 ? { argmax, logits: d.logits } : null,
      });
    },
    dispose() {
      for (const b of g.owned) b.destroy();
      for (const bufs of liveCaches) for (const b of bufs) b.destroy();
      liveCaches.clear();
    },
  };
}

/** A fresh KV cache on the GPU, its buffers kept in `bufs`, and its CPU copy. */
function sessionCache(g: GpuModel, bufs: GPUBuffer[]): SessionCache {
  const c = g.config, rows = g.context * c.num_key_value_heads * c.head_dim;
  const kv = (name: string) => g.allocate(rows * 4, STORAGE(), name, bufs);
  return {
    layers: Array.from({ length: c.num_hidden_layers }, (_, l) => [kv(`k${l}`), kv(`v${l}`)]),
    bindGroups: new Map(),
    mirror: Array.from(
      { length: c.num_hidden_layers },
      () => [new Float32Array(rows), new Float32Array(rows)],
    ),
  };
}

/** Writes the first `n` rows of `rows` ([k, v] per layer) into `cache`, on the GPU and in its CPU copy. */
function writeCache(g: GpuModel, cache: SessionCache, rows: Float32Array[][], n: number): void {
  const count = n * g.config.num_key_value_heads * g.config.head_dim;
  cache.layers.forEach((pair, l) =>
    pair.forEach((b, j) => {
      const part = rows[l][j].subarray(0, count);
      cache.mirror[l][j].set(part);
      if (count > 0) g.device.queue.writeBuffer(b.gpu, 0, part as Float32Array<ArrayBuffer>);
    })
  );
}

/** One conversation's state: its cache, its tokens, its sampler and the read-back of its last feed. */
interface GpuSessionState {
  cache: SessionCache;
  tokens: number[];
  rng: Rng;
  pending: ChunkResult | null;
}

/** One conversation over `st`, behind the engine interface; `open` makes a session of a copied state. */
function webGpuSession(
  g: GpuModel,
  st: GpuSessionState,
  serialize: <T>(f: () => Promise<T>) => Promise<T>,
  noneReads: "argmax" | "logits",
  shape: SessionShape,
  open: (from: GpuSessionState) => EngineSession,
): EngineSession {
  const V = g.config.vocab_size, kvDim = g.config.num_key_value_heads * g.config.head_dim;
  const { cache, tokens } = st;
  const pendingLogits = (what: string) => {
    if (!st.pending) throw new Error(`webgpu session: ${what} before any feed() (or since a rewind)`);
    if (!st.pending.logits) {
      throw new Error(
        `webgpu session: this engine reads back only the argmax after feed(tokens, 'none'); ` +
          `feed with 'last' to ${what}`,
      );
    }
    return st.pending.logits;
  };
  return {
    get position() {
      return tokens.length;
    },
    tokens,
    feed(fed: readonly number[], wanted: LogitsWanted = "last") {
      return serialize(async () => {
        const ids = [...fed];
        checkTokens(g.config, ids, tokens.length, g.context); // all, before any chunk
        if (ids.length === 0) return new Float32Array(0);
        const { last, all } = await feedChunks(g, cache, tokens, ids, wanted, noneReads);
        st.pending = last;
        if (wanted === "none") return new Float32Array(0);
        if (wanted === "last") return st.pending!.logits!.slice();
        st.pending = { argmax: st.pending!.argmax, logits: all.at(-1)!.slice(-V) };
        const out = new Float32Array(ids.length * V);
        let o = 0;
        for (const a of all) out.set(a, o), o += a.length;
        return out;
      });
    },
    pick(options: SamplingOptions = {}) {
      const choice = checkSampling(options);
      if (!st.pending) throw new Error("webgpu session: pick() before any feed() (or since a rewind)");
      if (choice.temperature === 0) return st.pending.argmax;
      return pickToken(pendingLogits("sample"), 0, V, choice, st.rng, g.never);
    },
    seed(n: number) {
      st.rng = createRng(checkSeed(n));
    },
    logprobs(ids: readonly number[], top: number): TokenLogprobs {
      return floatLogprobs(pendingLogits("get logprobs"), 0, V, ids, top);
    },
    save(): Uint8Array {
      const n = tokens.length;
      return encodeFloatSession({
        shape,
        engine: "webgpu",
        position: n,
        tokens,
        rng: st.rng.state(),
        logits: n > 0 ? pendingLogits("save") : new Float32Array(0),
        keys: cache.mirror.map(([k]) => k.subarray(0, n * kvDim)),
        values: cache.mirror.map(([, v]) => v.subarray(0, n * kvDim)),
      });
    },
    rewind(length: number) {
      if (checkRewind(length, tokens.length) === tokens.length) return;
      // The rows past `length`, on the GPU and in the CPU copy, are overwritten by the next feed.
      tokens.length = length;
      st.pending = null;
    },
    fork: () =>
      open({
        cache,
        tokens: [...tokens],
        rng: createRng(st.rng.state()),
        pending: st.pending && { argmax: st.pending.argmax, logits: st.pending.logits?.slice() ?? null },
      }),
  };
}

/**
 * Runs `ids` (already checked) in chunks of up to CHUNK, appending each to `tokens` as it runs. Only the
 * last chunk reads back, unless every position's logits are wanted: then each chunk's come back.
 */
async function feedChunks(
  g: GpuModel,
  cache: SessionCache,
  tokens: number[],
  ids: number[],
  wanted: LogitsWanted,
  noneReads: "argmax" | "logits",
): Promise<{ last: ChunkResult | null; all: Float32Array[] }> {
  const all: Float32Array[] = [];
  let pos = tokens.length, last: ChunkResult | null = null;
  for (let i = 0; i < ids.length; i += CHUNK) {
    const part = ids.slice(i, i + CHUNK), isLast = i + CHUNK >= ids.length;
    const head: HeadRows = wanted === "all" ? "all" : isLast ? "last" : "none";
    const read: ChunkRead = wanted === "all" || (isLast && wanted === "last")
      ? "logits"
      : isLast
      ? noneReads
      : "none";
    last = await runChunk(g, cache, part, pos, head, read);
    if (last?.logits && wanted === "all") all.push(last.logits);
    pos += part.length;
    tokens.push(...part);
  }
  return { last, all };
}

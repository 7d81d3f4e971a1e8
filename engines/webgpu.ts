/**
 * The float engine on WebGPU (Deno only). It runs model/qwen3.ts's own `walkForward`, with the kernels
 * of `wgsl.ts` in place of the CPU ones: weights, shapes and the order of operations come from the
 * model definition, not from a copy of it. Weights and every session's KV cache stay on the GPU; each
 * `feed` is one command submission per chunk of up to CHUNK tokens, and one readback at the end: the
 * GPU's argmax (4 bytes), with the logits the caller asked for (see `WebGpuEngineOptions.readback`).
 *
 * @example
 * ```ts
 * const engine = await createWebGpuEngine(config, tensors, "out/ferry.bf16.dmexp", { readback: "argmax" });
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }), "none"); // reads back 4 bytes: the argmax
 * const next = s.pick();                                          // greedy, from the GPU's argmax
 * ```
 * @module
 */
import type { Engine, EngineSession, LogitsWanted, SamplingOptions } from "../model/engine.ts";
import type { ModelConfig } from "../model/config.ts";
import type { Tensor } from "../model/tensor.ts";
import {
  type Activations,
  buildModel,
  checkTokens,
  type HeadRows,
  mapWeights,
  type Qwen3Kernels,
  walkForward,
  type Weights,
} from "../model/qwen3.ts";
import { pickToken } from "../model/sample.ts";
import { createRng, type Rng } from "../model/random.ts";
import { type Gpu, openGpu } from "../kernels/webgpu/device.ts";
import * as W from "../kernels/webgpu/wgsl.ts";

/** Tokens per command submission during prefill; longer prompts run in several. */
export const CHUNK = 128;

/** A GPU buffer with an id, so bind groups can be cached by the buffers they bind. */
export interface Buf {
  gpu: GPUBuffer;
  id: number;
  bytes: number;
}

/** A session's KV cache on the GPU, [k, v] per layer, and the bind groups that use it (cached by key). */
interface SessionCache {
  layers: Buf[][];
  bindGroups: Map<string, GPUBindGroup>;
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
  options: { onProgress?: (done: number, total: number) => void } = {},
): Promise<Engine> {
  const gpu = await openGpu();
  const { config, tensors } = await format.read(path, options);
  return await createWebGpuEngine(config, tensors, path, { gpu });
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
}

/** Builds the WebGPU engine for a model given by its config and named tensors (`source` names the file). */
export async function createWebGpuEngine(
  config: ModelConfig,
  tensors: Tensor[],
  source: string,
  options: WebGpuEngineOptions = {},
): Promise<Engine> {
  let gpu = options.gpu;
  const noneReads = options.readback === "argmax" ? "argmax" : "logits";
  const model = buildModel(config, tensors, source);
  const c = config, hd = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const qDim = nh * hd, kvDim = nkv * hd, capacity = c.max_position_embeddings;
  // The one-row product reads rows as vec4s.
  const widths = { hidden_size: H, intermediate_size: I, "heads × head_dim": qDim };
  for (const [name, k] of Object.entries(widths)) {
    if (k % 4 !== 0) {
      throw new Error(`${source}: the WebGPU engine needs ${name} to be a multiple of 4, got ${k}`);
    }
  }
  const largest = Math.max(
    ...model.tensors.map((t) => t.data.length * 4),
    capacity * kvDim * 4,
    CHUNK * V * 4,
  );
  if (hd > W.MAX_HEAD_DIM) {
    throw new Error(`${source}: the WebGPU engine takes head_dim up to ${W.MAX_HEAD_DIM}, got ${hd}`);
  }
  const workgroupBytes = Math.max((W.ATTN_TILE + W.WG) * 4, 2 * W.TILE * 16 * 4);
  gpu ??= await openGpu({ bufferBytes: largest, workgroupBytes });
  const device = gpu.device;
  device.pushErrorScope("validation");

  let nextId = 1;
  const owned: GPUBuffer[] = [];
  const buffer = (bytes: number, usage: number, label: string, keep = owned): Buf => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage, label });
    keep.push(b);
    return { gpu: b, id: nextId++, bytes };
  };
  // A session's KV cache is freed when the session is collected, or by dispose() while it lives.
  const liveCaches = new Set<GPUBuffer[]>();
  const collect = new FinalizationRegistry<GPUBuffer[]>((bufs) => {
    liveCaches.delete(bufs);
    for (const b of bufs) b.destroy();
  });
  const STORAGE = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const upload = (data: Float32Array, label: string): Buf => {
    const b = buffer(data.byteLength, STORAGE, label);
    device.queue.writeBuffer(b.gpu, 0, data as Float32Array<ArrayBuffer>);
    return b;
  };
  const weights: Weights<Buf> = mapWeights(model, upload);
  const cosT = upload(model.rope.cos, "rope.cos"), sinT = upload(model.rope.sin, "rope.sin");
  const act: Activations<Buf> = {
    x: buffer(CHUNK * H * 4, STORAGE, "x"),
    xn: buffer(CHUNK * H * 4, STORAGE, "xn"),
    q: buffer(CHUNK * qDim * 4, STORAGE, "q"),
    k: buffer(CHUNK * kvDim * 4, STORAGE, "k"),
    v: buffer(CHUNK * kvDim * 4, STORAGE, "v"),
    att: buffer(CHUNK * qDim * 4, STORAGE, "att"),
    proj: buffer(CHUNK * H * 4, STORAGE, "proj"),
    gate: buffer(CHUNK * I * 4, STORAGE, "gate"),
    up: buffer(CHUNK * I * 4, STORAGE, "up"),
    logits: buffer(CHUNK * V * 4, STORAGE, "logits"),
  };
  const tokenBuf = buffer(CHUNK * 4, STORAGE, "tokens");
  const argmaxBuf = buffer(16, STORAGE, "argmax");
  const readback = buffer(16 + CHUNK * V * 4, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST, "readback");
  const slots = c.num_hidden_layers * 24 + 16;
  const params = buffer(slots * SLOT, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST, "params");
  const paramBytes = new ArrayBuffer(slots * SLOT);
  const paramU32 = new Uint32Array(paramBytes), paramF32 = new Float32Array(paramBytes);

  const pipelines = new Map<string, GPUComputePipeline>();
  const pipeline = (name: string, code: string): GPUComputePipeline => {
    let p = pipelines.get(name);
    if (!p) {
      const module = device.createShaderModule({ code, label: name });
      p = device.createComputePipeline({
        layout: "auto",
        compute: { module, entryPoint: "main" },
        label: name,
      });
      pipelines.set(name, p);
    }
    return p;
  };
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
  for (const [name, code] of Object.entries(shaders)) pipeline(name, code);

  /** Records dispatches of one forward chunk into one compute pass. */
  function recorder(pass: GPUComputePassEncoder, cache: SessionCache) {
    const bindGroups = cache.bindGroups;
    let slot = 0;
    const dispatch = (
      name: string,
      u32: number[],
      bufs: Buf[],
      groups: [number, number?],
      f32?: [number, number],
    ) => {
      if (slot >= slots) throw new Error("webgpu engine: more dispatches than parameter slots");
      const base = slot * SLOT / 4;
      u32.forEach((v, i) => paramU32[base + i] = v);
      if (f32) paramF32[base + f32[0]] = f32[1];
      const key = `${name}:${slot}:${bufs.map((b) => b.id).join(",")}`;
      let group = bindGroups.get(key);
      const p = pipelines.get(name)!;
      if (!group) {
        group = device.createBindGroup({
          layout: p.getBindGroupLayout(0),
          entries: [
            { binding: 0, resource: { buffer: params.gpu, offset: slot * SLOT, size: 32 } },
            ...bufs.map((b, i) => ({ binding: i + 1, resource: { buffer: b.gpu } })),
          ],
        });
        bindGroups.set(key, group);
      }
      pass.setPipeline(p);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(groups[0], groups[1] ?? 1);
      slot++;
    };
    const flat = (n: number): [number] => [Math.ceil(n / W.WG)];
    const kernels: Qwen3Kernels<Buf, Buf> = {
      embed(x, tokens, table, dim) {
        device.queue.writeBuffer(tokenBuf.gpu, 0, Uint32Array.from(tokens));
        dispatch("embed", [tokens.length * dim, dim], [tokenBuf, table, x], flat(tokens.length * dim));
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
        dispatch("rope", [T, heads, hd, pos0], [x, cosT, sinT], flat(T * heads * hd / 2));
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
    const argmax = (offset: number) => dispatch("argmax", [V, offset], [act.logits, argmaxBuf], [1]);
    return { kernels, argmax, used: () => slot };
  }

  // One feed at a time across sessions: they share the activations, parameter slots and readback buffer.
  let busy: Promise<unknown> = Promise.resolve();
  const serialize = <T>(f: () => Promise<T>): Promise<T> => {
    const r = busy.then(f);
    busy = r.catch(() => {});
    return r;
  };

  /** Runs one chunk; returns what was read back (argmax, logits) when `read` asks for it. */
  async function runChunk(
    cache: SessionCache,
    tokens: number[],
    pos0: number,
    head: HeadRows,
    read: "none" | "argmax" | "logits",
  ): Promise<{ argmax: number; logits: Float32Array | null } | null> {
    device.pushErrorScope("validation");
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    const r = recorder(pass, cache);
    const rows = head === "all" ? tokens.length : 1;
    try {
      walkForward(c, weights, r.kernels, act, tokens, pos0, capacity, head); // feed checked the tokens
      if (read !== "none") r.argmax((rows - 1) * V); // over the last row's logits
    } catch (e) {
      pass.end();
      await device.popErrorScope();
      throw e;
    }
    pass.end();
    device.queue.writeBuffer(params.gpu, 0, new Uint8Array(paramBytes, 0, r.used() * SLOT));
    const logitBytes = read === "logits" ? rows * V * 4 : 0;
    if (read !== "none") encoder.copyBufferToBuffer(argmaxBuf.gpu, 0, readback.gpu, 0, 16);
    if (logitBytes) encoder.copyBufferToBuffer(act.logits.gpu, 0, readback.gpu, 16, logitBytes);
    device.queue.submit([encoder.finish()]);
    const error = await device.popErrorScope();
    if (error) throw new Error(`WebGPU engine for ${source}: ${error.message}`);
    if (read === "none") return null;
    await readback.gpu.mapAsync(GPUMapMode.READ, 0, 16 + logitBytes);
    const bytes = readback.gpu.getMappedRange(0, 16 + logitBytes).slice(0);
    readback.gpu.unmap();
    const argmax = new Uint32Array(bytes, 0, 1)[0];
    return { argmax, logits: logitBytes ? new Float32Array(bytes, 16, rows * V) : null };
  }

  const engine: Engine & { gpu: Gpu } = {
    kind: "webgpu",
    config,
    source,
    gpu,
    start: () => startSession(),
    dispose() {
      for (const b of owned) b.destroy();
      for (const bufs of liveCaches) for (const b of bufs) b.destroy();
      liveCaches.clear();
    },
  };

  function startSession(): EngineSession {
    const bufs: GPUBuffer[] = [];
    const kv = (name: string) => buffer(capacity * kvDim * 4, STORAGE, name, bufs);
    const cache: SessionCache = {
      layers: Array.from({ length: c.num_hidden_layers }, (_, l) => [kv(`k${l}`), kv(`v${l}`)]),
      bindGroups: new Map(),
    };
    liveCaches.add(bufs);
    const tokens: number[] = [];
    let rng: Rng = createRng(0);
    let pending: { argmax: number; logits: Float32Array | null } | null = null;
    const session: EngineSession = {
      get position() {
        return tokens.length;
      },
      tokens,
      feed(fed: readonly number[], wanted: LogitsWanted = "last") {
        return serialize(async () => {
          const ids = [...fed];
          checkTokens(c, ids, tokens.length, capacity); // all of them, before any chunk runs
          if (ids.length === 0) return new Float32Array(0);
          const all: Float32Array[] = [];
          let pos = tokens.length, got = null;
          for (let i = 0; i < ids.length; i += CHUNK) {
            const part = ids.slice(i, i + CHUNK), last = i + CHUNK >= ids.length;
            const head: HeadRows = wanted === "all" ? "all" : last ? "last" : "none";
            const read = wanted === "all" || (last && wanted === "last")
              ? "logits"
              : last
              ? noneReads
              : "none";
            got = await runChunk(cache, part, pos, head, read);
            if (got?.logits && wanted === "all") all.push(got.logits);
            pos += part.length;
            tokens.push(...part);
          }
          pending = got;
          if (wanted === "none") return new Float32Array(0);
          if (wanted === "last") return pending!.logits!.slice();
          pending = { argmax: pending!.argmax, logits: all.at(-1)!.slice(-V) };
          const out = new Float32Array(ids.length * V);
          let o = 0;
          for (const a of all) out.set(a, o), o += a.length;
          return out;
        });
      },
      pick(options: SamplingOptions = {}) {
        if (!pending) throw new Error("webgpu session: pick() before any feed()");
        const { temperature = 0 } = options;
        if (temperature <= 0) return pending.argmax;
        if (!pending.logits) {
          throw new Error(
            "webgpu session: this engine reads back only the argmax after feed(tokens, 'none'); " +
              "feed with 'last' to sample",
          );
        }
        return pickToken(pending.logits, 0, V, options, rng);
      },
      seed(n: number) {
        rng = createRng(n);
      },
    };
    collect.register(cache, bufs); // the cache, not the session: a feed in flight keeps it alive
    return session;
  }

  const error = await device.popErrorScope();
  if (error) throw new Error(`WebGPU engine for ${source}: ${error.message}`);
  return engine;
}

/**
 * The integer engine behind the one engine interface (model/engine.ts). This module is the adapter's
 * load-time half, not the engine: it reads the lut4 file (or quantizes a float export to one on load),
 * sizes the KV cache to the context, lays the model out in the WebAssembly module and starts the
 * worker threads (pool.ts), turns a new value of the caller's float sampling options into fixed point,
 * and converts the fixed-point logits to floats for callers that ask (eval, measure). It is outside
 * the audited set (tests/kernels/audit.test.ts); everything that serves a token — boundary.ts (the adapter's
 * per-token half), threads.ts, model.ts, forward.ts, simd.ts, sampler.ts and kernels/int/ — is inside
 * it and never sees a float.
 *
 * @example
 * ```ts
 * import { loadIntEngine } from "./engine.ts";
 * import { encode } from "../../model/tokenizer.ts";
 * import { writeSessionFile } from "../../formats/session/session.ts";
 * const engine = await loadIntEngine("out/ferry.lut4", { threads: 2, context: 2048 });
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }), "none");
 * const next = s.pick();                     // greedy
 * await writeSessionFile("a.session", s.save!());
 * engine.dispose?.();                        // stops the workers, if any
 * ```
 * @module
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {
  Engine,
  EngineSession,
  LogitsWanted,
  SamplingOptions,
  TokenLogprobs,
  WeightsShare,
} from "../../model/engine.ts";
import { checkRewind, defaultContext } from "../../model/engine.ts";
import { FormatError, messageWithoutCode } from "../../model/error.ts";
import { neverSampled, type SpecialIds, specialIds } from "../../model/sample.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import type { Tokenizer, TokenizerFiles } from "../../model/tokenizer-types.ts";
import { byteTokenizer } from "../../model/tokenizer.ts";
import { checkSampling, checkSeed } from "../../model/sampling.ts";
import { tensorSource } from "../../model/tensor.ts";
import type { FormatDescriptor } from "../../formats/format.ts";
import { type Lut4Checked, type Lut4File, lut4Format, readLut4 } from "../../formats/lut4/lut4.ts";
import { decodeSession, encodeSession, type SessionShape } from "../../formats/session/session.ts";
import type { GainTable, Lut4Weights } from "../../quantize/lut4-types.ts";
import { simdSupported } from "../../kernels/wasm/asm.ts";
import { createLutSums, type LutRoom, type LutShared, placedMemory } from "../../kernels/wasm/int-lut.ts";
import { checkTokens, feedTokens, remember, rememberedSampling, samplingMemo } from "./boundary.ts";
import { LOGIT_EXP, step } from "./forward.ts";
import { intLogprobs } from "./logprobs.ts";
import { buildIntModel, type IntModel, type IntState, LANES_MAX, newState, PREFILL_SLOTS } from "./model.ts";
import { coreCount, planShares, type RunningPool, startPool, stopPool } from "./pool.ts";
import { embedFromModule, lutMatrices, packAllWords, useLut, vectorRoom } from "./simd.ts";
import {
  type IntSampling,
  sample,
  SAMPLE_KERNEL_ROOM,
  type SamplerScratch,
  samplerScratch,
  seedRng,
} from "./sampler.ts";
import { createSampleKernel } from "../../kernels/wasm/int-sample.ts";

const LOGIT_SCALE = 2 ** LOGIT_EXP;
/** Logit units per nat (2^16): logprobs are reported as the integer over this. */
const LOGIT_Q = 2 ** -LOGIT_EXP;
/** What `feed(…, "none")` returns: shared, so the serving path allocates nothing per token. */
const NO_LOGITS = new Float32Array(0);
/** The context a load allocates for unless asked otherwise: every engine's default (model/engine.ts). */
export { DEFAULT_CONTEXT } from "../../model/engine.ts";

/** How to build the integer engine. */
export interface IntEngineOptions {
  /** false: the TypeScript kernels alone (default: WebAssembly SIMD where the runtime has it). */
  simd?: boolean;
  /** Threads one generation's projections are split across (default: the core count). */
  threads?: number;
  /** Positions the KV cache is allocated for (default min(max_positions, 4096)); at most max_positions. */
  context?: number;
  /**
   * Weights a projection needs to be split across the threads (default pool.ts `SPLIT_WEIGHTS`, 2^18:
   * smaller ones cost more to hand out than they save); 0 splits every one (tests).
   */
  splitWeights?: number;
  /** The tokenizer's special ids, never sampled (model/sample.ts `neverSampled`; absent: a byte model's). */
  specials?: SpecialIds;
  /**
   * The file was read for this engine alone: once the module holds the matrices, the file's bytes are
   * let go of at once (detached) rather than left for the collector, which in an idle worker (a chat
   * server's slot) may not run for a long time: a 0.6B model's slot kept its 328 MB file resident.
   */
  ownsFile?: boolean;
  /**
   * Serve from one copy of the matrices with `count - 1` other engines of this file (engines/mod.ts
   * `EngineLoadOptions.share`): `weights` absent lays them out in shared memory for all (the engine's
   * `shareable`); given (another's `shareable`), attaches as engine `slot`. One thread each.
   */
  share?: WeightsShare;
  /**
   * The file's bytes lie in this shared memory, from address 0 (kernels/wasm/int-lut.ts `placedMemory`,
   * as `loadIntEngine` reads them): the matrices are laid out where they lie rather than copied.
   */
  placed?: LutRoom["placed"];
}

/**
 * Sampling options in the sampler's fixed point, after the one contract's check (model/sampling.ts
 * `checkSampling`: a `SamplingError` names an option out of range). Every value the contract accepts
 * has a fixed-point form: temperature · 2^16 (a positive temperature never rounds to greedy), minP and
 * topP · 2^16.
 */
export function toIntSampling(options: SamplingOptions = {}): IntSampling {
  const { temperature, topK, minP, topP } = checkSampling(options);
  const tempQ16 = Math.round(temperature * 65536);
  return {
    tempQ16: temperature > 0 && tempQ16 === 0 ? 1 : tempQ16,
    topK,
    minPQ16: Math.round(minP * 65536),
    topPQ16: Math.round(topP * 65536),
  };
}

/** The shape sessions of this file must match. */
export function sessionShape(file: Lut4File): SessionShape {
  const s = file.weights.shape;
  return {
    sha256: file.sha256,
    vocab: s.vocab,
    layers: s.layers,
    kvHeads: s.kvHeads,
    headDim: s.headDim,
    maxPositions: s.maxPositions,
  };
}

/**
 * Builds the integer engine from a read lut4 file, on this thread alone (`openIntEngine` adds the
 * workers). Its projections run on WebAssembly SIMD where the runtime has it (`simd: false` forces
 * the TypeScript kernels); the integers are the same either way.
 */
export function intEngineFromFile(file: Lut4File, opts: IntEngineOptions = {}): Engine {
  return prepared(file, { ...opts, threads: 1 }).engine;
}

/**
 * Builds the integer engine from a read lut4 file with `threads` threads (default the core count)
 * where it has projections worth splitting; `dispose()` stops the workers (they never keep a process
 * alive, and stop when the engine is collected).
 */
export async function openIntEngine(file: Lut4File, opts: IntEngineOptions = {}): Promise<Engine> {
  const threads = opts.share ? 1 : opts.threads ?? coreCount();
  if (!(Number.isInteger(threads) && threads >= 1 && threads <= 256)) {
    throw new RangeError(`threads: expected an integer in [1, 256], got ${threads}`);
  }
  const { engine, model, shared } = prepared(file, { ...opts, threads });
  if (shared === null || model.lut === null) return engine;
  const running = await startPool(lutMatrices(model), shared, threads, opts.splitWeights);
  if (running === null) return engine;
  model.pool = running.pool;
  let stopped = false;
  const stop = () => {
    if (!stopped) stopPool(running);
    stopped = true;
    model.pool = null;
  };
  const threaded: Engine = { ...engine, dispose: stop };
  // The workers stop with the engine the caller holds, if it is collected without `dispose()`; a
  // session still held then goes on on one thread (the same integers).
  POOLS.register(threaded, { running, model });
  return threaded;
}

/** Stops a pool whose engine was collected without `dispose()`. */
const POOLS = new FinalizationRegistry<{ running: RunningPool; model: IntModel }>(({ running, model }) => {
  model.pool = null;
  stopPool(running);
});

/**
 * The context to allocate: `context` (checked) or the default, never above the file's max_positions.
 * Unlike model/engine.ts `contextOf`, a context past max_positions is cut to it, not refused.
 */
function allocatedContext(file: Lut4File, context: number | undefined): number {
  const max = file.weights.shape.maxPositions;
  if (context === undefined) return defaultContext(max);
  if (!(Number.isInteger(context) && context >= 1)) {
    throw new RangeError(`context: expected a positive integer, got ${context}`);
  }
  return Math.min(context, max);
}

/**
 * The weights the model keeps: the shape cut to `context` positions, the RoPE tables cut to match, and
 * every small table copied, so that nothing the engine holds is a view of the file's bytes (with SIMD the
 * matrices' codes are laid out in the module and then let go, and an untied embedding is copied, unless
 * the file was `placed` in the module's memory, where it stays; without SIMD every matrix is copied,
 * since the TypeScript kernels read them where they lie).
 */
function servingWeights(w: Lut4Weights, context: number, simd: boolean, placed: boolean): Lut4Weights {
  const copy = (m: Matrix) => ({ ...m, nibbles: m.nibbles.slice(), scales: m.scales.slice() });
  const mat = simd ? (m: Matrix) => m : copy;
  return {
    ...copiedTables(w, mat, context * (w.shape.headDim >> 1)),
    shape: { ...w.shape, maxPositions: context },
    // A file read into the module's memory stays there: an untied embedding is read where it lies.
    embed: simd && (w.head === null || placed) ? w.embed : copy(w.embed),
  };
}

type Matrix = Lut4Weights["embed"];

/**
 * `w` with the head and every layer's matrices through `mat`, and its small tables copied (nothing of
 * them a view of the file's bytes): the gains, exp and SiLU, and RoPE's first `ropeInts` entries.
 */
function copiedTables(w: Lut4Weights, mat: (m: Matrix) => Matrix, ropeInts: number): Lut4Weights {
  const gain = (g: GainTable): GainTable => ({ ...g, values: g.values.slice() });
  return {
    ...w,
    head: w.head && mat(w.head),
    finalGain: w.finalGain && gain(w.finalGain),
    layers: w.layers.map((l) => ({
      ...l,
      q: mat(l.q),
      k: mat(l.k),
      v: mat(l.v),
      o: mat(l.o),
      gate: mat(l.gate),
      up: mat(l.up),
      down: mat(l.down),
      qGain: gain(l.qGain),
      kGain: gain(l.kGain),
    })),
    exp: w.exp.slice(),
    silu: w.silu.slice(),
    ropeCos: w.ropeCos.slice(0, ropeInts),
    ropeSin: w.ropeSin.slice(0, ropeInts),
  };
}

/**
 * What an engine laying its weights out for others offers them (its `Engine.shareable`): the module's
 * shared memory and layout, and the file as read with every matrix's codes and scales left out (the
 * memory holds them) and its small tables copied, so that an engine attaching to it is built from this
 * and never reads the file: a Qwen3-0.6B-shape chat server's second slot read all 328 MB (and hashed
 * them) only to keep the norms and tables.
 */
export interface IntShareable {
  lut: LutShared;
  file: Lut4File;
  /** Whether the file carries a tokenizer (left out of `file`): an engine asked to build it reads the file. */
  tokenizer: boolean;
}

/** `share`'s weights where they are another integer engine's, to attach to without reading the file. */
function attachable(share: WeightsShare | undefined): IntShareable | undefined {
  const given = share?.weights as IntShareable | undefined;
  return given?.lut !== undefined && given.file !== undefined ? given : undefined;
}

/**
 * `file` for engines that attach to this one's module: matrices by shape alone, small tables copied (the
 * file's buffer is let go of once the module holds the matrices), no tokenizer (a server's slots are
 * handed the decoding table). An untied embedding is read row by row outside the module, so it goes
 * along: as a view where it lies in the shared memory (a placed file), else as a copy.
 */
function attachableFile(file: Lut4File): Lut4File {
  const none = new Uint8Array(0);
  const shape = (m: Matrix): Matrix => ({ ...m, nibbles: none, scales: none });
  const onShared = (a: Uint8Array) =>
    typeof SharedArrayBuffer !== "undefined" && a.buffer instanceof SharedArrayBuffer;
  const w = file.weights;
  const embed = w.head === null
    ? shape(w.embed) // tied: the head's rows in the module
    : onShared(w.embed.nibbles) && onShared(w.embed.scales)
    ? w.embed
    : { ...w.embed, nibbles: w.embed.nibbles.slice(), scales: w.embed.scales.slice() };
  return { ...file, tokenizer: undefined, weights: { ...copiedTables(w, shape, w.ropeCos.length), embed } };
}

/** The engine over a prepared model, and what a pool needs (the shared memory, when threads > 1). */
function prepared(
  file: Lut4File,
  opts: IntEngineOptions,
): { engine: Engine; model: IntModel; shared: LutShared | null } {
  const context = allocatedContext(file, opts.context);
  // Where the runtime has no SIMD the TypeScript kernels serve and keep copies of the matrices.
  const simd = opts.simd !== false && simdSupported();
  // An engine that attaches to another's weights lays nothing out (the first of them may place).
  const placed = opts.share?.weights || !simd ? undefined : opts.placed;
  const model = buildIntModel(servingWeights(file.weights, context, simd, placed !== undefined), false);
  // A shared memory only where some projection is worth splitting: small models stay on one thread.
  const split = planShares(lutMatrices(model), opts.threads ?? 1, opts.splitWeights).shareAt.some((a) =>
    a >= 0
  );
  const threads = split ? opts.threads ?? 1 : 1;
  const given = attachable(opts.share);
  const served = simd ? serveOnSimd(model, threads, file.weights.head === null, opts.share, placed) : null;
  const shared = served && threads > 1 ? served : null;
  // An engine that attached offers what it was given; one that laid the weights out, them and the file.
  const shareable: IntShareable | undefined = opts.share && served
    ? given ?? { lut: served, file: attachableFile(file), tokenizer: file.tokenizer !== undefined }
    : undefined;
  // The module's (or the TypeScript kernels') codes and scales, and an untied embedding's own copy: by
  // shape, as an engine that attached holds no codes of its own.
  const matrixBytes = (m: Lut4Weights["embed"]) => m.rows * m.cols / 2 + m.rows * m.cols / 32;
  const embedBytes = simd && file.weights.head === null ? 0 : matrixBytes(model.embed);
  const weightBytes = lutMatrices(model).reduce((n, w) => n + matrixBytes(w), embedBytes);
  if (model.lut === null) packAllWords(model);
  else {
    releaseCodes(model);
    // Every matrix is in the module and every small table a copy: nothing views the file any more.
    if (opts.ownsFile) detach(file.weights.embed.nibbles.buffer);
  }
  const shape = sessionShape(file);
  // The sampler's pass over the vocabulary runs in its own small WebAssembly module where there is one.
  const kernel = createSampleKernel(model.vocab, SAMPLE_KERNEL_ROOM.divLen, model.exp.t.length) ?? undefined;
  const scratch = samplerScratch(model.vocab, model.exp, neverSampled(file.config, opts.specials), kernel);
  const engine: Engine = {
    kind: "int",
    config: file.config,
    source: file.path,
    context: model.maxPositions,
    tokenizer: byteTokenizer, // engines/mod.ts loadEngine sets the model's own
    shareable,
    weightBytes,
    start() {
      const st = newState(model);
      seedRng(st.rng, 0, 0);
      return intSession(model, st, shape, scratch);
    },
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const d = decodeSession(bytes, shape, where);
      if (d.position > model.maxPositions) {
        throw new RangeError(
          `${where}: position ${d.position} exceeds the context of ${model.maxPositions} this engine was loaded with`,
        );
      }
      const st = newState(model);
      st.pos = d.position;
      st.tokens.push(...d.tokens);
      st.rng[0] = d.rngHi;
      st.rng[1] = d.rngLo;
      st.logits.set(d.logits);
      for (let l = 0; l < model.layers.length; l++) {
        st.keys[l].set(d.keys[l]);
        st.keyExp[l].set(d.keyExp[l]);
        st.values[l].set(d.values[l]);
        st.valueExp[l].set(d.valueExp[l]);
      }
      return intSession(model, st, shape, scratch);
    },
  };
  return { engine, model, shared };
}

/**
 * Lays the model out in a WebAssembly module and serves through it, where the runtime has SIMD; with
 * `threads` > 1 over a shared memory (returned, for the workers). A tied head's embedding rows are then
 * read from the module's copy.
 */
function serveOnSimd(
  model: IntModel,
  threads: number,
  tied: boolean,
  share?: WeightsShare,
  placed?: LutRoom["placed"],
): LutShared | null {
  const room: LutRoom = {
    keyDigitBytes: model.digitBytes,
    valueDigitBytes: model.valueDigitBytes,
    positions: model.maxPositions,
    headDim: model.headDim,
    expMirrorBytes: model.expMirrorBytes,
    attendTasks: model.heads * PREFILL_SLOTS,
    headExps: (model.heads + 2 * model.kvHeads + 1) * PREFILL_SLOTS,
    exp: model.exp,
    vectorInts: vectorRoom(model),
    rope: { cos: model.ropeCos, sin: model.ropeSin },
    silu: model.silu,
    // Layer l's q and k gains' multiples, tables 2l and 2l + 1 (forward.ts rotateHeads).
    tables: model.layers.flatMap((L) => [L.qGain, L.kGain]),
    threads,
    slots: PREFILL_SLOTS,
    // The prefill's projections (forward.ts productBatch): up to LANES_MAX inputs in the lanes.
    lanes: { lanes: LANES_MAX, rows: Math.max(model.qDim, model.kvDim, model.width, model.ffn) },
    placed,
  };
  const weights = attachable(share)?.lut;
  const sharing = share
    ? { sharers: share.count, attach: weights && { shared: weights, slot: share.slot } }
    : {};
  // Too large to share (past 4 GiB for every slot's areas): a copy of its own, as without sharing.
  const made = createLutSums(lutMatrices(model), { ...room, ...sharing }) ??
    (share ? createLutSums(lutMatrices(model), room) : null);
  if (!made) return null;
  useLut(model, made.lut, made.at, made.scalesAt);
  if (tied) embedFromModule(model, made.lut);
  return made.shared;
}

/** Frees a buffer's memory now (an `ArrayBuffer` moved to a new, empty one), where the runtime can. */
function detach(buffer: ArrayBufferLike): void {
  if (buffer instanceof ArrayBuffer && typeof buffer.transfer === "function" && !buffer.detached) {
    buffer.transfer(0);
  }
}

/** Lets go of the matrices' codes and scales outside the module, which now holds the only copy. */
function releaseCodes(model: IntModel): void {
  const none = new Uint8Array(0);
  for (const w of lutMatrices(model)) {
    w.nibbles = none;
    w.scales = none;
  }
  if (model.embedStride === 16) model.embed = { ...model.embed, nibbles: none, scales: none };
}

/** A deep copy of a conversation's state: the same continuation, nothing shared. */
function copyState(st: IntState): IntState {
  return {
    pos: st.pos,
    tokens: [...st.tokens],
    keys: st.keys.map((a) => a.slice()),
    keyExp: st.keyExp.map((a) => a.slice()),
    values: st.values.map((a) => a.slice()),
    valueExp: st.valueExp.map((a) => a.slice()),
    logits: st.logits.slice(),
    rng: st.rng.slice(),
  };
}

/** One conversation over `st`, behind the engine interface. */
function intSession(
  model: IntModel,
  st: IntState,
  shape: SessionShape,
  scratch: SamplerScratch,
): EngineSession {
  const memo = samplingMemo();
  // Set by a rewind: the logits in `st` are of a dropped position until the next feed.
  let stale = false;
  const pending = (what: string) => {
    if (st.pos === 0 || stale) {
      throw new Error(`${what}: nothing fed yet (or since a rewind), so there are no logits`);
    }
  };
  return {
    get position() {
      return st.pos;
    },
    get tokens() {
      return st.tokens;
    },
    // A refusal arrives as a rejected promise, like any other failure of feed.
    feed(tokens: readonly number[], wanted: LogitsWanted = "last"): Promise<Float32Array> {
      return Promise.resolve().then(() => {
        const logits = feed(model, st, tokens, wanted);
        if (tokens.length > 0) stale = false;
        return logits;
      });
    },
    pick(options?: SamplingOptions): number {
      pending("pick");
      // Converted once per new options value (per request), not per token.
      const q = rememberedSampling(memo, options) ?? remember(memo, options!, toIntSampling(options));
      return sample(st.logits, q, st.rng, scratch);
    },
    seed(seed: number): void {
      // A negative seed as its 64-bit two's complement.
      const bits = BigInt.asUintN(64, BigInt(checkSeed(seed)));
      seedRng(st.rng, Number(bits >> 32n) | 0, Number(bits & 0xffffffffn) | 0);
    },
    logprobs(ids: readonly number[], top: number): TokenLogprobs {
      pending("logprobs");
      const q = intLogprobs(st.logits, model.exp, ids, top);
      return {
        of: q.of.map((v) => v / LOGIT_Q),
        top: q.top.map(({ id, logprob }) => ({ id, logprob: logprob / LOGIT_Q })),
      };
    },
    fork() {
      const copy = intSession(model, copyState(st), shape, scratch);
      if (stale) copy.rewind!(st.pos);
      return copy;
    },
    rewind(length: number): void {
      if (checkRewind(length, st.pos) === st.pos) return;
      // The positions past `length` stay in the arrays and are overwritten by the next feed; a save
      // writes only the first `pos`, so none of them is ever read.
      st.pos = length;
      st.tokens.length = length;
      stale = true;
    },
    save(): Uint8Array {
      if (stale && st.pos > 0) {
        throw new Error("save: nothing fed since a rewind, so there are no logits to save");
      }
      return encodeSession({
        shape,
        position: st.pos,
        tokens: st.tokens,
        rngHi: st.rng[0],
        rngLo: st.rng[1],
        logits: st.logits,
        keys: st.keys,
        keyExp: st.keyExp,
        values: st.values,
        valueExp: st.valueExp,
      });
    },
  };
}

/**
 * The engine table's factory (engines/mod.ts). A format that stores lut4 codes is read by the lut4
 * reader; any other export is quantized on load, as `export --format lut4` would write it (the same
 * quantizer, the same bits), and `onNote` is told so in one line. `threads` and `context` as
 * `IntEngineOptions`.
 */
export async function intEngineFactory(
  path: string,
  format: FormatDescriptor,
  options: {
    onProgress?: (done: number, total: number) => void;
    onNote?: (line: string) => void;
    threads?: number;
    context?: number;
    specials?: LaterSpecials;
    share?: WeightsShare;
    withTokenizer?: boolean;
  } = {},
): Promise<Engine> {
  const { threads, context, specials, share, withTokenizer } = options;
  const opts = { threads, context, specials, share };
  // An engine attaching to another's weights reads nothing, whatever the format (loadIntEngine).
  if (format.weights === "lut4" || attachable(share)) {
    return await loadIntEngine(path, { ...opts, withTokenizer });
  }
  const file = await quantizeOnLoad(path, format, options);
  options.onNote?.(`quantized ${path} to lut4 on load (as export --format lut4 would)`);
  return await openIntEngine(file, { ...opts, specials: await specials });
}

/** Special ids given now, or later (engines/mod.ts `EngineLoadOptions.specials`). */
type LaterSpecials = SpecialIds | Promise<SpecialIds | undefined>;

/**
 * Loads a lut4 file onto the integer engine (`openIntEngine`'s options). Where the engine serves from
 * WebAssembly SIMD alone (no `share`), the file is read straight into the module's memory and laid out
 * where it lies. `withTokenizer` builds the file's own tokenizer while the weights are read, masks its
 * special ids in the sampler and sets it as `engine.tokenizer`, as engines/mod.ts `loadEngine` would.
 */
export async function loadIntEngine(
  path: string,
  opts: Omit<IntEngineOptions, "specials"> & { specials?: LaterSpecials; withTokenizer?: boolean } = {},
): Promise<Engine> {
  const { withTokenizer, specials: later, ...engineOpts } = opts;
  // Attached to another engine's module: the file as that engine read it holds everything else.
  const given = attachable(opts.share);
  if (given && !(withTokenizer && given.tokenizer)) {
    return await openIntEngine({ ...given.file, path }, { ...engineOpts, specials: await later });
  }
  let placed: LutRoom["placed"];
  const place = opts.simd !== false && !opts.share?.weights;
  const into = (size: number) => {
    placed = place ? memoryToPlace(size) : undefined;
    return placed?.bytes ?? new Uint8Array(size);
  };
  const onTokenizer = withTokenizer ? (files: TokenizerFiles) => warmTokenizer(files, path) : undefined;
  const file = await readLut4(path, { into, onTokenizer });
  const own = withTokenizer ? fileTokenizer(file, path) : undefined;
  // The special ids of a tokenizer still on its way are waited for only now, with the file read.
  const specials = own ? own.specials : await later;
  const engine = await openIntEngine(file, { ...engineOpts, specials, ownsFile: !placed, placed });
  return own ? Object.assign(engine, { tokenizer: own.tokenizer }) : engine;
}

/** The largest file read into the module's memory: room left in 4 GiB for the areas and the KV cache. */
const MAX_PLACED = 3 * 2 ** 30;

/**
 * A shared memory to put a lut4 file of `size` bytes in before it is read, so that the engine lays it
 * out where it lies (`IntEngineOptions.placed`); undefined where the engine would not serve from it (no
 * WebAssembly SIMD, a file too large) or where the runtime has no shared memory (a page that is not
 * cross-origin isolated).
 *
 * @example
 * ```ts
 * import { memoryToPlace } from "./engine.ts";
 * const placed = memoryToPlace(328_430_592); // placed?.bytes: where the file's bytes go
 * ```
 */
export function memoryToPlace(size: number): LutRoom["placed"] | undefined {
  if (!simdSupported() || size > MAX_PLACED) return undefined;
  try {
    return placedMemory(size);
  } catch {
    return undefined; // shared memory refused here
  }
}

/**
 * Builds (and so remembers, model/hf-tokenizer.ts) a file's tokenizer while its weights are still being
 * read, for `fileTokenizer` to find once the file is checked. A refusal is left for then, when it is
 * made again with the whole file checked.
 */
function warmTokenizer(files: TokenizerFiles, path: string): void {
  try {
    loadTokenizer(files, path);
  } catch {
    // Named by fileTokenizer, after the file's own checks.
  }
}

/**
 * The tokenizer a read lut4 file carries (none: the byte tokenizer) and the special ids its engine's
 * sampler masks (absent for a byte model), as engines/mod.ts `loadEngine` makes them; a tokenizer with
 * more ids than the model's vocab is refused, naming `name`.
 */
export function fileTokenizer(
  file: Lut4Checked,
  name: string,
): { tokenizer: Tokenizer; specials?: SpecialIds } {
  const tokenizer = loadTokenizer(file.tokenizer, name);
  const vocab = file.config.vocab_size;
  if (tokenizer.size > vocab) {
    throw new FormatError(
      name,
      "VocabMismatch",
      "vocab_size",
      `${name}: vocab_size: the tokenizer has ${tokenizer.size} ids, more than the model's ${vocab}`,
      { expected: `at least ${tokenizer.size}`, found: String(vocab) },
    );
  }
  return { tokenizer, specials: file.tokenizer === undefined ? undefined : specialIds(tokenizer) };
}

/**
 * A float export as the lut4 file `export --format lut4` would make of it: its tensors go through the
 * lut4 format's own writer (to a temporary file, removed at once) and its own full reader, so the
 * integers, the refusals and the model's identity (the SHA-256 sessions name) are the export's. A
 * shape lut4 cannot store is refused with the format's `cannotStore` reason, naming `path`.
 */
async function quantizeOnLoad(
  path: string,
  format: FormatDescriptor,
  options: { onProgress?: (done: number, total: number) => void },
): Promise<Lut4File> {
  const { config, tensors, origin } = await format.read(path, options);
  const why = lut4Format.cannotStore?.(config);
  if (why) {
    throw new FormatError(
      path,
      "UnsupportedModel",
      why.field,
      `${path}: ${why.field}: the integer engine quantizes to lut4 on load, and lut4 needs ${why.field} ` +
        `to be ${why.expected}, got ${why.found}`,
      { expected: why.expected, found: why.found },
    );
  }
  const dir = await mkdtemp(join(tmpdir(), "ferry-lut4-"));
  const file = join(dir, "model.lut4");
  try {
    await lut4Format.write(file, {
      config,
      tensors: tensors.map(tensorSource),
      source: origin?.source ?? path,
      step: origin?.step ?? 0,
      name: origin?.name ?? "model",
    }, { dtype: lut4Format.defaultDtype });
    return { ...await readLut4(file), path };
  } catch (e) {
    // The lut4 reader names its temporary file; the refusal is of the export the caller named.
    if (!(e instanceof FormatError)) throw e;
    const message = messageWithoutCode(e);
    const said = message.startsWith(`${file}: `) ? message.slice(file.length + 2) : message;
    throw new FormatError(
      path,
      "UnsupportedModel",
      e.field,
      `${path}: quantized to lut4 on load: ${said}`,
      e,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Steps the tokens (boundary.ts `feedTokens`); converts the wanted logits to floats for a caller that asks. */
function feed(m: IntModel, st: IntState, tokens: readonly number[], wanted: LogitsWanted): Float32Array {
  if (wanted !== "all") {
    // The serving path: step only; floats are made for a caller that asked for them.
    feedTokens(m, st, tokens);
    if (wanted === "none" || tokens.length === 0) return NO_LOGITS;
    // A plain loop: Float32Array.from with a mapping function took 8–12 ms over 151,936 logits under Deno.
    const floats = new Float32Array(st.logits.length);
    for (let i = 0; i < floats.length; i++) floats[i] = st.logits[i] * LOGIT_SCALE;
    return floats;
  }
  checkTokens(m, st, tokens);
  const all = new Float32Array(tokens.length * m.vocab);
  tokens.forEach((id, t) => {
    step(m, st, id);
    for (let i = 0; i < m.vocab; i++) all[t * m.vocab + i] = st.logits[i] * LOGIT_SCALE;
  });
  return all;
}

/**
 * The integer engine behind the one engine interface (model/engine.ts). This module is the adapter,
 * not the engine: it reads the lut4 file (or quantizes a float export to one on load), turns the
 * caller's float sampling options into fixed point, and converts the fixed-point logits to floats for
 * callers that measure. It is deliberately outside the audited set (tests/audit.test.ts); everything
 * that serves a token — model.ts, forward.ts, simd.ts, sampler.ts and kernels/int/ — is inside it and
 * never sees a float.
 *
 * @example
 * ```ts
 * const engine = await loadIntEngine("out/ferry.lut4");
 * const s = engine.start();
 * await s.feed(encode("The jury said", { bos: true }), "none");
 * const next = s.pick();                     // greedy
 * await writeSessionFile("a.session", s.save!());
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
} from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import { neverSampled, type SpecialIds } from "../../model/sample.ts";
import { byteTokenizer } from "../../model/tokenizer.ts";
import { checkSampling, checkSeed } from "../../model/sampling.ts";
import { tensorSource } from "../../model/tensor.ts";
import type { FormatDescriptor } from "../../formats/format.ts";
import { type Lut4File, lut4Format, readLut4 } from "../../formats/lut4.ts";
import { decodeSession, encodeSession, type SessionShape } from "../../formats/session.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import { LOGIT_EXP, step } from "./forward.ts";
import { intLogprobs } from "./logprobs.ts";
import { buildIntModel, type IntModel, type IntState, newState } from "./model.ts";
import { lutMatrices, useLut, vectorRoom } from "./simd.ts";
import { type IntSampling, sample, type SamplerScratch, samplerScratch, seedRng } from "./sampler.ts";

const LOGIT_SCALE = 2 ** LOGIT_EXP;
/** Logit units per nat (2^16): logprobs are reported as the integer over this. */
const LOGIT_Q = 2 ** -LOGIT_EXP;
/** What `feed(…, "none")` returns: shared, so the serving path allocates nothing per token. */
const NO_LOGITS = new Float32Array(0);
/** Greedy in fixed point, the options of a plain `pick()`: made once, not per token. */
const GREEDY: IntSampling = { tempQ16: 0, topK: 0, minPQ16: 0, topPQ16: 65536 };

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
 * Builds the integer engine from a read lut4 file. Its projections run on WebAssembly SIMD where the
 * runtime has it (`simd: false` forces the TypeScript kernels); the integers are the same either way.
 */
export function intEngineFromFile(
  file: Lut4File,
  opts: { simd?: boolean; specials?: SpecialIds } = {},
): Engine {
  const model = buildIntModel(file.weights);
  if (opts.simd !== false) serveOnSimd(model);
  const shape = sessionShape(file);
  const scratch = samplerScratch(model.vocab, model.exp, neverSampled(file.config, opts.specials));
  return {
    kind: "int",
    config: file.config,
    source: file.path,
    tokenizer: byteTokenizer, // engines/mod.ts loadEngine sets the model's own
    start() {
      const st = newState(model);
      seedRng(st.rng, 0, 0);
      return intSession(model, st, shape, scratch);
    },
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const d = decodeSession(bytes, shape, where);
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
}

/** Lays the model out in a WebAssembly module and serves through it, where the runtime has SIMD. */
function serveOnSimd(model: IntModel): void {
  const made = createLutSums(lutMatrices(model), {
    keyDigitBytes: model.digitBytes,
    valueDigitBytes: model.valueDigitBytes,
    planeCols: 4 * model.headDim,
    positions: model.maxPositions,
    headDim: model.headDim,
    expMirrorBytes: model.expMirrorBytes,
    exp: model.exp,
    vectorInts: vectorRoom(model),
    rope: { cos: model.ropeCos, sin: model.ropeSin },
    silu: model.silu,
  });
  if (made) useLut(model, made.lut, made.at, made.scalesAt);
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
  return {
    get position() {
      return st.pos;
    },
    get tokens() {
      return st.tokens;
    },
    // A refusal arrives as a rejected promise, like any other failure of feed.
    feed(tokens: readonly number[], wanted: LogitsWanted = "last"): Promise<Float32Array> {
      return Promise.resolve().then(() => feed(model, st, tokens, wanted));
    },
    pick(options?: SamplingOptions): number {
      if (st.pos === 0) throw new Error("pick: nothing fed yet, so there are no logits to pick from");
      return sample(st.logits, options === undefined ? GREEDY : toIntSampling(options), st.rng, scratch);
    },
    seed(seed: number): void {
      // A negative seed as its 64-bit two's complement.
      const bits = BigInt.asUintN(64, BigInt(checkSeed(seed)));
      seedRng(st.rng, Number(bits >> 32n) | 0, Number(bits & 0xffffffffn) | 0);
    },
    logprobs(ids: readonly number[], top: number): TokenLogprobs {
      if (st.pos === 0) throw new Error("logprobs: nothing fed yet, so there are no logits");
      const q = intLogprobs(st.logits, model.exp, ids, top);
      return {
        of: q.of.map((v) => v / LOGIT_Q),
        top: q.top.map(({ id, logprob }) => ({ id, logprob: logprob / LOGIT_Q })),
      };
    },
    fork: () => intSession(model, copyState(st), shape, scratch),
    save(): Uint8Array {
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
 * quantizer, the same bits), and `onNote` is told so in one line.
 */
export async function intEngineFactory(
  path: string,
  format: FormatDescriptor,
  options: {
    onProgress?: (done: number, total: number) => void;
    onNote?: (line: string) => void;
    specials?: SpecialIds;
  } = {},
): Promise<Engine> {
  if (format.weights === "lut4") {
    return intEngineFromFile(await readLut4(path), { specials: options.specials });
  }
  const file = await quantizeOnLoad(path, format, options);
  options.onNote?.(`quantized ${path} to lut4 on load (as export --format lut4 would)`);
  return intEngineFromFile(file, { specials: options.specials });
}

/** Loads a lut4 file onto the integer engine. */
export async function loadIntEngine(path: string): Promise<Engine> {
  return intEngineFromFile(await readLut4(path));
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
    const said = e.message.startsWith(`${file}: `) ? e.message.slice(file.length + 2) : e.message;
    throw new FormatError(path, e.field, `${path}: quantized to lut4 on load: ${said}`, e);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Checks every token and the room left, then steps them; converts the wanted logits to floats. */
function feed(m: IntModel, st: IntState, tokens: readonly number[], wanted: LogitsWanted): Float32Array {
  for (const id of tokens) {
    if (!(Number.isInteger(id) && id >= 0 && id < m.vocab)) {
      throw new RangeError(`token id ${id} is outside [0, ${m.vocab})`);
    }
  }
  if (st.pos + tokens.length > m.maxPositions) {
    throw new RangeError(
      `context full: ${st.pos} + ${tokens.length} positions exceed the model's ${m.maxPositions}`,
    );
  }
  if (wanted !== "all") {
    // The serving path: step only; floats are made for a caller that asked for them.
    for (let t = 0; t < tokens.length; t++) step(m, st, tokens[t]);
    if (wanted === "none" || tokens.length === 0) return NO_LOGITS;
    return Float32Array.from(st.logits, (v) => v * LOGIT_SCALE);
  }
  const all = new Float32Array(tokens.length * m.vocab);
  tokens.forEach((id, t) => {
    step(m, st, id);
    for (let i = 0; i < m.vocab; i++) all[t * m.vocab + i] = st.logits[i] * LOGIT_SCALE;
  });
  return all;
}

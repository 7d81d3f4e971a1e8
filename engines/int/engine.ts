/**
 * The integer engine behind the one engine interface (model/engine.ts). This module is the adapter,
 * not the engine: it reads the lut4 file, turns the caller's float sampling options into fixed point,
 * and converts the fixed-point logits to floats for callers that measure. It is deliberately outside the
 * audited set (tests/audit.test.ts); everything that serves a token — model.ts, forward.ts, simd.ts,
 * sampler.ts and kernels/int/ — is inside it and never sees a float.
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
import type { Engine, EngineSession, LogitsWanted, SamplingOptions } from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import type { FormatDescriptor } from "../../formats/format.ts";
import { type Lut4File, readLut4 } from "../../formats/lut4.ts";
import { decodeSession, encodeSession, type SessionShape } from "../../formats/session.ts";
import { createLutSums } from "../../kernels/wasm/int-lut.ts";
import { LOGIT_EXP, step } from "./forward.ts";
import { buildIntModel, type IntModel, type IntState, newState } from "./model.ts";
import { lutMatrices, useLut, vectorRoom } from "./simd.ts";
import { type IntSampling, sample, samplerScratch, seedRng } from "./sampler.ts";

const LOGIT_SCALE = 2 ** LOGIT_EXP;
/** What `feed(…, "none")` returns: shared, so the serving path allocates nothing per token. */
const NO_LOGITS = new Float32Array(0);
/** Greedy in fixed point, the options of a plain `pick()`: made once, not per token. */
const GREEDY: IntSampling = { tempQ16: 0, topK: 0, minPQ16: 0, topPQ16: 65536 };

/** Sampling options in the sampler's fixed point; refuses values it cannot represent. */
export function toIntSampling(o: SamplingOptions = {}): IntSampling {
  const t = o.temperature ?? 0;
  const topK = o.topK ?? 0, minP = o.minP ?? 0, topP = o.topP ?? 1;
  if (!(t >= 0 && t <= 1024)) throw new RangeError(`temperature ${t}: expected a number in [0, 1024]`);
  if (!(Number.isInteger(topK) && topK >= 0)) {
    throw new RangeError(`topK ${topK}: expected a non-negative integer`);
  }
  if (!(minP >= 0 && minP <= 1)) throw new RangeError(`minP ${minP}: expected a number in [0, 1]`);
  if (!(topP > 0 && topP <= 1)) throw new RangeError(`topP ${topP}: expected a number in (0, 1]`);
  const tempQ16 = Math.round(t * 65536);
  return {
    tempQ16: t > 0 && tempQ16 === 0 ? 1 : tempQ16,
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
export function intEngineFromFile(file: Lut4File, opts: { simd?: boolean } = {}): Engine {
  const model = buildIntModel(file.weights);
  if (opts.simd !== false) {
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
  const shape = sessionShape(file);
  const scratch = samplerScratch(model.vocab, model.exp);
  const session = (st: IntState): EngineSession => ({
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
      if (!Number.isSafeInteger(seed)) throw new RangeError(`seed ${seed}: expected a safe integer`);
      const bits = BigInt.asUintN(64, BigInt(seed)); // a negative seed as its 64-bit two's complement
      seedRng(st.rng, Number(bits >> 32n) | 0, Number(bits & 0xffffffffn) | 0);
    },
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
  });
  return {
    kind: "int",
    config: file.config,
    source: file.path,
    start() {
      const st = newState(model);
      seedRng(st.rng, 0, 0);
      return session(st);
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
      return session(st);
    },
  };
}

/** The engine table's factory (engines/mod.ts): lut4 files only, read by their own full reader. */
export const intEngineFactory = async (path: string, format: FormatDescriptor): Promise<Engine> => {
  if (format.name !== "lut4") {
    throw new FormatError(
      path,
      "engine",
      `${path}: engine: the integer engine runs lut4 files, not ${format.name} (export with --format lut4)`,
      {
        expected: "a .lut4 file",
        found: format.name,
      },
    );
  }
  return await loadIntEngine(path);
};

/** Loads a lut4 file onto the integer engine. */
export async function loadIntEngine(path: string): Promise<Engine> {
  return intEngineFromFile(await readLut4(path));
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

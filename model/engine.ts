/**
 * The one engine interface. Every way of running a model — the float CPU reference, the integer-only
 * engine, the WebGPU engine — is an `Engine`, and generate, eval, measure and the server use nothing
 * else, so a new engine is one module and one line in the engine table.
 *
 * An engine holds a model's weights; a session holds one conversation's state (position, tokens, KV
 * cache, sampler state). Feeding is async so that a GPU engine fits the same shape.
 *
 * @example
 * ```ts
 * import { loadEngine } from "../engines/mod.ts";
 * import { encode } from "./tokenizer.ts";
 * const engine = await loadEngine("out/ferry.bf16.dmexp");          // the format's natural engine
 * const s = engine.start();
 * const logits = await s.feed(encode("The jury said", { bos: true })); // [vocab] of the last position
 * const next = s.pick({ temperature: 0 });                           // greedy, lowest id on a tie
 * ```
 * @module
 */
import type { ModelConfig } from "./config.ts";
import type { Tokenizer } from "./tokenizer-types.ts";

/**
 * How the next token is chosen: the one sampling contract (model/sampling.ts), the same for every
 * engine, CLI flag and HTTP field. Every option may be absent, which means its neutral value, so `{}`
 * is greedy decoding. Every engine accepts exactly these ranges: a value outside one is refused by
 * `checkSampling` with a `SamplingError` naming the option, never clamped.
 */
export interface SamplingOptions {
  /** In [0, 100]. 0 (neutral) is greedy: the highest logit, the lowest id on a tie, no draw. */
  temperature?: number;
  /** An integer ≥ 0: keep only the k most likely tokens. 0 (neutral) keeps every token. */
  topK?: number;
  /** In (0, 1]: keep the smallest set of most likely tokens whose mass reaches p. 1 (neutral) keeps all. */
  topP?: number;
  /** In [0, 1]: drop tokens below minP times the top token's probability. 0 (neutral) drops none. */
  minP?: number;
}

/** Which positions' logits `feed` returns. */
export type LogitsWanted = "last" | "all" | "none";

/** One conversation on an engine: everything needed to continue it. */
export interface EngineSession {
  /** Tokens fed so far (the next token goes at this position). */
  readonly position: number;
  /** Every token fed so far, in order. */
  readonly tokens: readonly number[];
  /**
   * Runs tokens through the model (prefill and decode are the same call) and keeps the last position's
   * logits as the pending distribution for `pick`. Returns float logits: the last position's `[vocab]`
   * (default), every fed position's `[n × vocab]` (`"all"`, for measurement), or an empty array.
   * An integer engine converts its fixed-point logits exactly; its serving path never needs the floats.
   */
  feed(tokens: readonly number[], wanted?: LogitsWanted): Promise<Float32Array>;
  /**
   * Chooses the next token from the pending logits. The options are checked with model/sampling.ts
   * `checkSampling` (out of range: a `SamplingError`, and nothing drawn); greedy takes no draw, any
   * other choice takes one draw from the session's seeded generator. Float engines sample with
   * model/sample.ts `pickToken`; the integer engine with its integer sampler over the same options, so
   * the same seed draws the same tokens on the float and WebGPU engines, and its own on the integer one.
   */
  pick(options?: SamplingOptions): number;
  /**
   * Reseeds this session's sampler: a safe integer, negative allowed (`checkSeed`; anything else is a
   * `SamplingError` for `seed`). A fresh session is seeded with 0.
   */
  seed(seed: number): void;
  /**
   * Natural-log probabilities of the pending distribution: the model's own (temperature 1, no sampling
   * filter, never-sampled ids included), for the given `ids` and for the `top` most likely tokens (most
   * likely first, lower id on a tie). For OpenAI's `logprobs`. Float engines: the log-softmax in f64 of
   * the f32 logits (model/sample.ts `floatLogprobs`). The integer engine: its own integers at 2^-16 nats
   * (engines/int/logprobs.ts: the normaliser inverted through its exp table), reported as int / 65536,
   * so exactly representable and the same on every runtime. An id outside the vocabulary is a
   * `RangeError`; nothing fed yet is an `Error`.
   */
  logprobs(ids: readonly number[], top: number): TokenLogprobs;
  /**
   * The session as bytes (formats/session/session.md): everything `Engine.restore` needs to continue it bit for
   * bit on the same engine and model — tokens, KV cache, pending logits, sampler state.
   */
  save?(): Uint8Array;
  /**
   * A deep copy of the session, in memory: the copy and the original continue independently, each as
   * this session would have, bit for bit (same tokens, logits and sampler state; nothing shared). What a
   * prompt cache keeps to continue a conversation's state more than once. Not while a `feed` is pending.
   */
  fork?(): EngineSession;
  /**
   * Drops every position from `length` on (an integer in [0, position]): the session then holds its
   * first `length` tokens, with the KV cache a fresh feed of them gives (causal attention: no position
   * depends on a later one), and no pending distribution, so `pick`, `logprobs` and `save` refuse until
   * the next `feed`. The sampler's state is kept. What a prompt cache uses to continue the common prefix
   * of a held state and a new prompt (llama.cpp's server drops the cache past it the same way).
   */
  rewind?(length: number): void;
}

/** What `EngineSession.logprobs` returns: the asked ids' log-probabilities, in order, and the top list. */
export interface TokenLogprobs {
  of: number[];
  top: Array<{ id: number; logprob: number }>;
}

/** A model loaded on one kind of engine. */
export interface Engine {
  /** The engine's kind: `float`, `int`, `webgpu`. */
  readonly kind: string;
  /** The model's shape. */
  readonly config: ModelConfig;
  /** The path the model was loaded from. */
  readonly source: string;
  /**
   * Positions one session holds (its KV cache's size; feeding past it is refused). Absent: the config's
   * max_position_embeddings.
   */
  readonly context?: number;
  /**
   * The model's tokenizer: what engines/mod.ts `loadEngine` read beside the weights (the format's
   * `readTokenizer`), or the byte tokenizer (model/tokenizer.ts `byteTokenizer`) for a byte model and
   * for an engine built directly from tensors.
   */
  readonly tokenizer: Tokenizer;
  /** A fresh session at position 0. */
  start(): EngineSession;
  /** Restores a session saved by `EngineSession.save`, refusing one for another model. */
  restore?(bytes: Uint8Array, where?: string): EngineSession;
  /** Frees what the engine holds outside the JavaScript heap (GPU buffers). */
  dispose?(): void;
  /**
   * The weights where other engines of the same file can use them without a copy (the integer and the
   * frozen float engine's shared WebAssembly memory), when it was loaded to share them (engines/mod.ts
   * `EngineLoadOptions.share`); opaque, and handed to those engines' loads. A chat server's slots share
   * one copy this way.
   */
  readonly shareable?: unknown;
  /**
   * Bytes the weights take in memory as this engine serves them (the integer engine's codes, scales and
   * tables; a frozen float engine's packed matrices and norm vectors, an unfrozen one's f32 parameters):
   * what a slot costs besides its KV cache, and what shared weights save; shared, the one copy's bytes.
   * Absent where the engine does not say.
   */
  readonly weightBytes?: number;
}

/** One copy of the weights for `count` engines of one file (engines/mod.ts `EngineLoadOptions.share`). */
export interface WeightsShare {
  count: number;
  /** This engine's place, 0 to `count - 1`: 0 lays the weights out, unless `weights` is given. */
  slot: number;
  /** Engine 0's `shareable`: attach to it rather than lay out a copy. */
  weights?: unknown;
}

/**
 * The positions one session of `engine` holds: its `context`, or else its config's
 * max_position_embeddings. The one figure the server, the tab and the CLIs give for a model's context.
 *
 * @example
 * ```ts
 * import { contextLength } from "./engine.ts";
 * import type { ModelConfig } from "./config.ts";
 * contextLength({ context: 4096, config: { max_position_embeddings: 16384 } as ModelConfig }); // 4096
 * ```
 */
export function contextLength(engine: Pick<Engine, "context" | "config">): number {
  return engine.context ?? engine.config.max_position_embeddings;
}

/**
 * The KV cache size every engine allocates unless asked otherwise: min(max positions, 4096).
 * Here in model/ because it is the lowest layer all its users may import (engines/, serve/, scripts/).
 */
export const DEFAULT_CONTEXT = 4096;

/** The context a session holds by default: min(`maxPositions`, `DEFAULT_CONTEXT`). */
export function defaultContext(maxPositions: number): number {
  return Math.min(maxPositions, DEFAULT_CONTEXT);
}

/**
 * The context asked for, checked: an integer in [1, `maxPositions`] (a `RangeError` naming
 * max_position_embeddings otherwise), or `defaultContext` when none is asked for.
 */
export function contextOf(maxPositions: number, context: number | undefined): number {
  if (context === undefined) return defaultContext(maxPositions);
  if (!Number.isInteger(context) || context < 1 || context > maxPositions) {
    throw new RangeError(
      `context must be an integer in [1, ${maxPositions}] (max_position_embeddings), got ${context}`,
    );
  }
  return context;
}

/**
 * Checks a `rewind` length against a session's position: an integer in [0, `position`], or a
 * `RangeError` naming both.
 *
 * @example
 * ```ts
 * import { checkRewind } from "./engine.ts";
 * checkRewind(3, 10); // 3
 * checkRewind(11, 10); // RangeError
 * ```
 */
export function checkRewind(length: number, position: number): number {
  if (!Number.isInteger(length) || length < 0 || length > position) {
    throw new RangeError(
      `rewind: length must be an integer in [0, ${position}] (the position), got ${length}`,
    );
  }
  return length;
}

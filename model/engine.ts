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
 * const engine = await loadEngine("out/ferry.bf16.dmexp");          // the format's natural engine
 * const s = engine.start();
 * const logits = await s.feed(encode("The jury said", { bos: true })); // [vocab] of the last position
 * const next = s.pick({ temperature: 0 });                           // greedy, lowest id on a tie
 * ```
 * @module
 */
import type { ModelConfig } from "./config.ts";

/** How the next token is chosen. Temperature 0 (the default) is greedy. */
export interface SamplingOptions {
  /** 0 is greedy; otherwise logits are divided by it before the softmax. */
  temperature?: number;
  /** Keep only the k most likely tokens (0 or absent: all). */
  topK?: number;
  /** Keep the smallest set of tokens whose mass reaches p (1 or absent: all). */
  topP?: number;
  /** Drop tokens whose probability is below minP times the top token's (0 or absent: none). */
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
  /** Chooses the next token from the pending logits with this engine's own sampler and its seeded state. */
  pick(options?: SamplingOptions): number;
  /** Reseeds this session's sampler (a session starts seeded with 0). */
  seed(seed: number): void;
  /** The session as bytes, for engines that can save (`Engine.restore` reads them back). */
  save?(): Uint8Array;
}

/** A model loaded on one kind of engine. */
export interface Engine {
  /** The engine's kind: `float`, `int`, `webgpu`. */
  readonly kind: string;
  /** The model's shape. */
  readonly config: ModelConfig;
  /** The path the model was loaded from. */
  readonly source: string;
  /** A fresh session at position 0. */
  start(): EngineSession;
  /** Restores a session saved by `EngineSession.save`, refusing one for another model. */
  restore?(bytes: Uint8Array, where?: string): EngineSession;
  /** Frees what the engine holds outside the JavaScript heap (GPU buffers). */
  dispose?(): void;
}

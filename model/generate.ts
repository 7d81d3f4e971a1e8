/**
 * The one generation loop: feed the prompt, then pick a token and feed it back, one at a time,
 * streaming each as it is chosen. It uses only the `Engine` interface, so the float, integer and WebGPU
 * engines — and every caller: the CLIs, the server, measurement — generate the same way (and give the
 * same text when their logits agree). A float model built in memory runs through it on engines/float.ts
 * `floatEngineOf(model)`.
 *
 * @example
 * ```ts
 * import { generateTokens } from "./generate.ts";
 * import { loadEngine } from "../engines/mod.ts";
 * const engine = await loadEngine("out/ferry.bf16.dmexp");
 * const decode = engine.tokenizer.streamDecoder();
 * const prompt = engine.tokenizer.encode("The jury said", { bos: true });
 * for await (const id of generateTokens(engine, prompt, { maxTokens: 64 })) {
 *   process.stdout.write(decode(id));
 * }
 * ```
 * @module
 */
import type { Engine, EngineSession, SamplingOptions } from "./engine.ts";
import { checkSampling, checkSeed } from "./sampling.ts";

/** Options of `generateTokens`: how many tokens, and the sampling contract's options (model/sampling.ts). */
export interface GenerateOptions extends SamplingOptions {
  /** At most this many new tokens (fewer when the context fills); 0 reads the prompt and generates none. */
  maxTokens: number;
  /** Reseeds the session's sampler first (a fresh session is seeded with 0). */
  seed?: number;
  /**
   * Stop when one of the tokenizer's EOS ids (`engine.tokenizer.eos`: Qwen3's `<|im_end|>` and
   * `<|endoftext|>`) is picked (default true); that id is neither yielded nor fed.
   */
  stopAtEos?: boolean;
  /** Continue this session (a conversation) instead of starting a fresh one. */
  session?: EngineSession;
  /**
   * Feed the prompt in pieces of this many tokens (default: all at once), awaiting `onPrompt` after each
   * and stopping before the next piece once `signal` is aborted: a long prompt can then be watched and
   * cancelled. The session ends the same either way (the engines read a prompt position by position).
   */
  promptPiece?: number;
  /** Told the prompt tokens fed so far, of all of them, after each piece. */
  onPrompt?: (fed: number, total: number) => void | Promise<void>;
  /** Nothing more is fed once this is aborted (checked before each prompt piece). */
  signal?: AbortSignal;
}

/**
 * Feeds `prompt` (which may be empty when continuing a session that has been fed), then yields up to
 * `maxTokens` new tokens. Each yielded token is fed back, so afterwards the session holds the prompt and
 * every yielded token, ready to continue. The sampling options and the seed are checked before anything
 * is fed (a `SamplingError` names the one out of range).
 */
export async function* generateTokens(
  engine: Engine,
  prompt: readonly number[],
  opts: GenerateOptions,
): AsyncGenerator<number, void, undefined> {
  const { stopAtEos = true } = opts;
  const eos = new Set(engine.tokenizer.eos);
  const choice = checkSampling(opts);
  if (opts.seed !== undefined) checkSeed(opts.seed);
  const session = opts.session ?? engine.start();
  if (opts.seed !== undefined) session.seed(opts.seed);
  const room = (engine.context ?? engine.config.max_position_embeddings) - session.position - prompt.length;
  const budget = Math.min(opts.maxTokens, room);
  // A budget of 0 asked for reads the prompt alone (a state prepared for a later reply); one the
  // context cuts to 0 reads nothing.
  if (room < 0 || (budget <= 0 && opts.maxTokens > 0)) return;
  const piece = opts.promptPiece ?? prompt.length;
  for (let at = 0; at < prompt.length; at += piece) {
    if (opts.signal?.aborted) return;
    await session.feed(prompt.slice(at, at + piece), "none");
    await opts.onPrompt?.(Math.min(at + piece, prompt.length), prompt.length);
  }
  for (let i = 0; i < budget; i++) {
    const id = session.pick(choice);
    if (stopAtEos && eos.has(id)) return;
    await session.feed([id], "none");
    yield id;
  }
}

/** `generateTokens`, collected: the new tokens as one array. */
export async function generateAll(
  engine: Engine,
  prompt: readonly number[],
  opts: GenerateOptions,
): Promise<number[]> {
  const out: number[] = [];
  for await (const id of generateTokens(engine, prompt, opts)) out.push(id);
  return out;
}

/**
 * The generation slots: `parallel` replies at once, a bounded line behind them (turns.ts: 429 past it,
 * 499 for a client that leaves while waiting), and the prompt cache in front of them (prompt-cache.ts).
 *
 * The chat server starts its slots with `startSlots`: each slot is a worker (slot-worker.ts) that loads
 * the model itself, `--parallel 1` included, so the server's thread only does HTTP and holds no weights
 * (slot-model.ts gives the routes the model's kind, config, tokenizer and session checks). Two users on
 * two cores each get a core; one slot alone gets every core for its products. A worker that dies fails
 * its request with 500 and is replaced. `createSlots` builds slots around an engine already in memory
 * (the browser tab's worker, which is itself off the page's thread, and tests): with `parallel` 1 the
 * slot is that engine, on the caller's thread.
 *
 * Each slot keeps its last conversation's session. A fresh conversation continues the longest common
 * prefix of its prompt with what its slot holds or what the cache holds, whichever is longer, cut back
 * to that prefix (`EngineSession.rewind`), as llama.cpp's server does with `cache_prompt`; without a
 * cache the slot's session is rewound to nothing and reused, which spares a KV cache's allocation.
 *
 * Every slot runs the same `runJob` on the same model, so a seeded request gives the same tokens on any
 * slot, and a cached state continues bit-identically to a fresh prefill (tests/engines/float-session
 * and tests/serve/prompt-cache).
 *
 * @example
 * ```ts
 * import { startSlots } from "./slots.ts";
 * import { servedTokenizer } from "../../engines/mod.ts";
 * import type { ReplyOptions } from "./generation.ts";
 * import type { OnText } from "./slot-run.ts";
 * import type { EngineSession } from "../../model/engine.ts";
 * declare const session: EngineSession, prompt: number[], opts: ReplyOptions;
 * declare const signal: AbortSignal, onText: OnText;
 * const path = "out/ferry.q4.lut4";
 * const { tokenizer } = await servedTokenizer(path);
 * const { engine, slots } = await startSlots(path, tokenizer, { parallel: 2, queueLimit: 8 }); // the cache sized from the model
 * engine.config.vocab_size;                            // known on this thread; the weights are in the workers
 * const lease = await slots.acquire(signal);           // or throws ApiError 429 / 499
 * try { const r = await lease.reply(session, prompt, opts, onText); r.cachedTokens; } finally { lease.release(); }
 * ```
 * @module
 */
import type { Engine, EngineSession } from "../../model/engine.ts";
import { contextLength } from "../../model/engine.ts";
import type { WeightsShare } from "../../model/engine.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { type TokenTable, tokenTable } from "../../model/token-table.ts";
import { refusalError, type SlotModel, slotModelEngine } from "./slot-model.ts";
import { ApiError } from "../errors.ts";
import type { PromptProgress, ReplyOptions, ReplyResult } from "./generation.ts";
import { totalmem } from "node:os";
import {
  commonPrefix,
  createPromptCache,
  defaultCacheBytes,
  type PromptCache,
  stateBytes,
} from "./prompt-cache.ts";
import { type OnText, runJob, type SlotJob, type SlotResult } from "./slot-run.ts";
import { createTurns } from "./turns.ts";

/** How the slots are made. */
export interface SlotsOptions {
  /** Replies at once (default 1); `createSlots` runs one on the engine it is given, on its thread, and more each in a worker; `startSlots` always in workers. */
  parallel?: number;
  /** Requests that may wait for a slot before new ones get 429 (default 8). */
  queueLimit?: number;
  /**
   * The prompt cache's bound in bytes of saved state (0: no cache; default: prompt-cache.ts
   * `defaultCacheBytes`, from the bytes a whole-context state costs on this engine and the memory).
   */
  cacheBytes?: number;
  /**
   * Whether an idle slot reads a chat's next-turn prompt ahead (`Lease.prime`; default true, with a
   * cache): off, turn 2 reads the reply and the follow-up itself.
   */
  prime?: boolean;
}

/** A reply on a slot: the reply, the prompt tokens the cache supplied, the final state when asked. */
export interface LeaseReply extends ReplyResult {
  /** Prompt tokens restored from the cache rather than computed (OpenAI's `cached_tokens`). */
  cachedTokens: number;
  /** The session's bytes after the reply, with `saveEnd` (for `save_session`). */
  saved?: Uint8Array;
}

/** One slot, held from `acquire` until `release`. */
export interface Lease {
  /** Which slot, 0 to `parallel - 1`. */
  readonly slot: number;
  /**
   * Generates on this slot: `session` is where the conversation stands (a restored one, or a fresh one;
   * undefined: fresh, started on the slot).
   */
  reply(
    session: EngineSession | undefined,
    prompt: number[],
    opts: ReplyOptions & { saveEnd?: boolean },
    onText?: OnText,
  ): Promise<LeaseReply>;
  /**
   * After `release`, when no request is waiting, reads `tokens` on this slot in the background and
   * keeps the state in the prompt cache: the conversation as its next turn's prompt will begin
   * (serve/chat/chat-prompt.ts `nextPromptStart`), so that turn reads only the new message. A request that needs
   * the slot stops it within `PRIME_PIECE` tokens; what was read by then is kept. Ignored without a
   * cache or with priming off.
   */
  prime(tokens: readonly number[]): void;
  /** Gives the slot back (idempotent). */
  release(): void;
}

/** The pool. */
export interface Slots {
  readonly parallel: number;
  readonly cache?: PromptCache;
  /** The cache's bound in bytes (0: none). */
  readonly cacheBytes: number;
  /** Whether the slots serve from one copy of the weights (else each holds its own). */
  readonly sharedWeights: boolean;
  /** Waits for a free slot; throws ApiError 429 (line full) or 499 (client gone). */
  acquire(signal: AbortSignal): Promise<Lease>;
  /** Replies running and requests waiting, for `/metrics`. */
  load(): { active: number; waiting: number };
  /**
   * Runs a short reply on every slot (a few prompt tokens, two generated), so each has loaded its
   * model and compiled its code paths before the server says it is ready: the first request at the
   * Qwen3-0.6B shape otherwise waited 25 s for its first token against 4.6 s warm (float engine).
   * Nothing of it is kept for matching.
   */
  warm(): Promise<void>;
  /** Resolves once no slot is reading a next turn ahead (`Lease.prime`): for tests and benchmarks. */
  idle(): Promise<void>;
  /** Ends the workers. */
  close(): void;
  /** For tests: makes slot `i`'s worker fail the way a fault would (nothing on the server's own slot). */
  crash(i: number): void;
  /** For memory measurements: asks every worker to collect its garbage now. */
  collect(): void;
}

/**
 * Where a job starts: a live session, saved bytes, `"held"` (the slot's last session, or a fresh one
 * when it has none), or nothing (a fresh session).
 */
type From = EngineSession | Uint8Array | "held" | undefined;

/** What runs one job: the server's thread, or one worker. */
interface Runner {
  /** The tokens the slot's last session holds (none before its first job and after a failed one). */
  readonly held: readonly number[];
  /** Forgets what the slot holds for matching (its session's allocation is still reused). */
  forget(): void;
  /**
   * Whether its sessions can be rewound, as its last job found (false until one has run): if not, only
   * a cached state the prompt continues whole is used.
   */
  readonly rewinds: boolean;
  run(
    from: From,
    job: SlotJob,
    signal: AbortSignal,
    onText?: OnText,
    onPrompt?: ReplyOptions["onPrompt"],
  ): Promise<SlotResult>;
  close(): void;
  crash(): void;
  collect(): void;
}

/**
 * Slots around `engine`, already loaded in this process: with `parallel` 1 the one slot runs on it, on
 * this thread; with more, each is a worker loading the engine's `source` on its `kind`.
 */
export function createSlots(engine: Engine, opts: SlotsOptions = {}): Slots {
  const parallel = opts.parallel ?? 1;
  const runners = parallel === 1
    ? [localRunner(engine)]
    : Array.from({ length: parallel }, () =>
      workerRunner({
        path: engine.source,
        kind: engine.kind,
        tokens: decodingTable(engine.tokenizer),
        threads: 1,
        context: engine.context,
      }));
  return pool(runners, engine, opts, parallel === 1);
}

/** How the server starts its slots: the model's file, and how each worker loads it. */
export interface StartSlotsOptions extends SlotsOptions {
  /** The engine kind (default: the format's own, engines/mod.ts `DEFAULT_ENGINE`). */
  kind?: string;
  /** Threads of the one slot's products with `parallel` 1 (default: the cores); 1 a slot otherwise. */
  threads?: number;
  /** Positions a conversation may hold (default: the engine's). */
  context?: number;
  /** Told the loader's lines for the user (e.g. "quantized … to lut4 on load"), once. */
  onNote?: (line: string) => void;
}

/**
 * The server's slots: `parallel` workers (default 1), each loading `path` itself, so generation never
 * runs on the thread that does HTTP and that thread holds no weights (serve/slots/slot-model.ts). Resolves once
 * the first worker has loaded, with the model as an `Engine` for the routes (`tokenizer`: the one the
 * server built from the same files) and the slots; a load that fails rejects with the worker's refusal
 * (a `FormatError` where it was one) and ends every worker.
 */
export async function startSlots(
  path: string,
  tokenizer: Tokenizer | Promise<Tokenizer>,
  opts: StartSlotsOptions = {},
): Promise<{ engine: Engine; slots: Slots }> {
  const parallel = opts.parallel ?? 1;
  const load = { path, kind: opts.kind, threads: parallel === 1 ? opts.threads : 1, context: opts.context };
  // The first slot lays the weights out for all; the others attach to them once it has. It reads its
  // model at once, while this thread builds the tokenizer, whose decoding table follows it.
  const first = workerRunner({
    ...load,
    tokensLater: true,
    share: parallel > 1 ? { count: parallel, slot: 0 } : undefined,
    probe: true,
  });
  let model: SlotModel, built: Tokenizer;
  try {
    const told = Promise.resolve(tokenizer).then((t) => (first.giveTokens(decodingTable(t)), t));
    [built, model] = await Promise.all([told, first.ready]);
  } catch (e) {
    first.close();
    throw e;
  }
  const init = { ...load, tokens: decodingTable(built) };
  const share = (slot: number) =>
    model.shareable === undefined ? undefined : { count: parallel, slot, weights: model.shareable };
  first.respawnWith({ ...init, share: share(0) }); // a replacement attaches to what the others use, probes nothing
  const runners = [
    first,
    ...Array.from({ length: parallel - 1 }, (_, k) => workerRunner({ ...init, share: share(k + 1) })),
  ];
  model.notes.forEach((line) => opts.onNote?.(line));
  const engine = slotModelEngine(model, path, built);
  const shared = parallel === 1 || model.shareable !== undefined;
  return { engine, slots: pool(runners, engine, opts, shared) };
}

/**
 * The pool over its runners, on `engine`'s tokenizer (for warming), with the prompt cache `opts` asks
 * for (default: sized from the bytes a whole-context state costs on this engine and the machine's memory).
 */
function pool(runners: Runner[], engine: Engine, opts: SlotsOptions, sharedWeights: boolean): Slots {
  const tokenizer = engine.tokenizer, queueLimit = opts.queueLimit ?? 8;
  const cacheBytes = opts.cacheBytes ??
    defaultCacheBytes(stateBytes(engine, contextLength(engine)), totalmem());
  const cache = engine.restore && cacheBytes > 0 ? createPromptCache(cacheBytes) : undefined;
  const parallel = runners.length;
  const turns = createTurns(queueLimit, parallel);
  const free = [...runners];
  const all = [...runners];
  const primes = cache && (opts.prime ?? true) ? priming(cache) : undefined;
  // A runner back from a job or a prime: to a request that found none free, else to the free list.
  const wanting: Array<(runner: Runner) => void> = [];
  const giveBack = (runner: Runner) => {
    const next = wanting.shift();
    if (next) next(runner);
    else free.push(runner);
  };
  // The line lets in at most `parallel`, so a request finds a runner free or one priming, which stops.
  const take = (): Promise<Runner> | Runner =>
    free.pop() ?? new Promise<Runner>((resolve) => {
      wanting.push(resolve);
      primes?.stopOne();
    });
  return {
    parallel,
    cache,
    cacheBytes: cache ? cacheBytes : 0,
    sharedWeights,
    load: turns.load,
    idle: () => primes?.idle() ?? Promise.resolve(),
    close: () => all.forEach((r) => r.close()),
    async warm() {
      const prompt = tokenizer.encode("Warm up, please.", { bos: true });
      const job: SlotJob = {
        prompt,
        maxTokens: 2,
        sampling: {},
        stop: [],
        keep: false,
        saveEnd: false,
        rewind: 0,
      };
      await Promise.all(all.map(async (r) => {
        await r.run("held", job, new AbortController().signal);
        r.forget();
      }));
    },
    crash: (i) => all[i]?.crash(),
    collect: () => all.forEach((r) => r.collect()),
    async acquire(signal) {
      const leave = await turns.wait(signal);
      const runner = await take();
      let held = true, next: readonly number[] | undefined;
      return {
        slot: all.indexOf(runner),
        async reply(session, prompt, o, onText) {
          const t0 = performance.now();
          try {
            return await replyOn(runner, cache, session, prompt, o, onText);
          } finally {
            turns.took(performance.now() - t0);
          }
        },
        prime(tokens) {
          next = tokens;
        },
        release() {
          if (!held) return;
          held = false;
          // A request waiting gets the slot at once; a prime would only be stopped.
          if (primes && next && turns.load().waiting === 0) primes.start(runner, next, giveBack);
          else giveBack(runner);
          leave();
        },
      };
    },
  };
}

/** One reply: continue the longest cached prefix of a fresh prompt, run it, keep its states. */
async function replyOn(
  runner: Runner,
  cache: PromptCache | undefined,
  session: EngineSession | undefined,
  prompt: number[],
  o: ReplyOptions & { saveEnd?: boolean },
  onText?: OnText,
): Promise<LeaseReply> {
  const { signal, saveEnd = false, onPrompt, ...reply } = o;
  let job: SlotJob = { ...reply, prompt, keep: cache !== undefined, saveEnd }, from: From = session;
  let cachedTokens = 0;
  // Only a fresh conversation: a stored session continues its own sampler stream, which a reused
  // state does not have. It is reseeded (0, a fresh session's seed, when the request has none).
  if ((session?.position ?? 0) === 0) {
    const start = startOf(runner, cache, prompt);
    from = start.from;
    cachedTokens = start.reused;
    job = { ...job, rewind: cachedTokens, prompt: prompt.slice(cachedTokens), seed: o.seed ?? 0 };
  }
  // The part read here follows the part reused: progress counts the whole prompt.
  const told = onPrompt &&
    ((p: PromptProgress) =>
      onPrompt({ total: prompt.length, cache: cachedTokens, processed: cachedTokens + p.processed }));
  const r = await runner.run(from, job, signal ?? new AbortController().signal, onText, told);
  if (cache && r.endState) cache.put(r.endState.tokens, r.endState.bytes);
  const { endState, held: _held, ...result } = r;
  const saved = saveEnd && r.finishReason !== "abort" ? endState?.bytes : undefined;
  return { ...result, cachedTokens, saved };
}

/**
 * Where a fresh prompt starts on `runner`: the slot's own state or a cached one, whichever shares more
 * of it (the own one on a tie: nothing to restore), and how many of its tokens are reused.
 */
function startOf(
  runner: Runner,
  cache: PromptCache | undefined,
  prompt: readonly number[],
): { from: From; reused: number } {
  const own = cache ? reusable(runner.held, commonPrefix(runner.held, prompt), prompt) : 0;
  const hit = cache?.longest(prompt);
  const usable = hit && (runner.rewinds || hit.length === hit.holds);
  const cached = usable ? reusable({ length: hit.holds }, hit.length, prompt) : 0;
  return cached > own ? { from: hit!.bytes, reused: cached } : { from: "held", reused: own };
}

/**
 * Prompt tokens a prime feeds between two looks at its stop: the integer engine's prefill batch
 * (engines/int/model.ts `PREFILL_SLOTS`), so a request that needs the slot waits at most one batch.
 */
export const PRIME_PIECE = 16;

/** The slots reading next turns ahead (`Lease.prime`), each with its stop. */
function priming(cache: PromptCache) {
  const running = new Map<Runner, AbortController>();
  let done = Promise.withResolvers<void>();
  done.resolve();
  return {
    /** Reads `tokens` on `runner` into the cache, then hands the runner to `giveBack`. */
    start(runner: Runner, tokens: readonly number[], giveBack: (runner: Runner) => void) {
      const stop = new AbortController();
      if (running.size === 0) done = Promise.withResolvers<void>();
      running.set(runner, stop);
      primeOn(runner, cache, tokens, stop.signal)
        .catch(() => {}) // a prime is a guess: a failure costs the next turn its head start, nothing more
        .finally(() => {
          running.delete(runner);
          if (running.size === 0) done.resolve();
          giveBack(runner);
        });
    },
    /** Stops one prime not yet asked to stop (a request needs its slot). */
    stopOne() {
      for (const stop of running.values()) if (!stop.signal.aborted) return stop.abort();
    },
    idle: () => done.promise,
  };
}

/**
 * One prime: continue the longest held or cached prefix of `tokens`, read the rest without generating,
 * and keep the state in the cache (a stopped prime's too: what it read is as valid).
 */
async function primeOn(runner: Runner, cache: PromptCache, tokens: readonly number[], signal: AbortSignal) {
  const { from, reused } = startOf(runner, cache, tokens);
  if (reused === tokens.length) return;
  const job: SlotJob = {
    prompt: tokens.slice(reused),
    rewind: reused,
    maxTokens: 0,
    sampling: {},
    keep: true,
    saveEnd: false,
    promptPiece: PRIME_PIECE,
  };
  const r = await runner.run(from, job, signal);
  if (r.endState) cache.put(r.endState.tokens, r.endState.bytes);
}

/**
 * How much of a state holding `state.length` tokens, `common` of them the prompt's first, a reply may
 * continue: all of them, unless that is the whole prompt and the state holds more, since a state cut
 * back has no next-token distribution until a token is fed (llama.cpp's server re-reads the last
 * prompt token the same way).
 */
function reusable(state: { length: number }, common: number, prompt: readonly number[]): number {
  return common === prompt.length && state.length > common ? common - 1 : common;
}

/** The one slot of `createSlots` on the engine it was given, on the caller's thread. */
function localRunner(engine: Engine): Runner {
  let kept: EngineSession | undefined, held: readonly number[] = [], rewinds = false;
  return {
    get held() {
      return held;
    },
    get rewinds() {
      return rewinds;
    },
    forget: () => void (held = []),
    async run(from, job, signal, onText, onPrompt) {
      const session = from instanceof Uint8Array
        ? engine.restore!(from, "cached session")
        : from === "held"
        ? kept ?? engine.start()
        : from ?? engine.start();
      // Until the job ends well: a failed one may leave the session anywhere.
      kept = undefined, held = [];
      const r = await runJob(engine, session, job, signal, onText, onPrompt);
      rewinds = r.rewinds;
      if (rewinds) kept = session, held = r.held;
      return r;
    },
    close() {},
    crash() {},
    collect() {},
  };
}

/** The server's side of one job on a worker. */
interface Pending {
  id: number;
  onMessage(m: any): void;
  died(e: Error): void;
}

/**
 * What a slot worker gets of the server's tokenizer: a BPE tokenizer's decoding half (a worker never
 * encodes; building the tokenizer from its files cost each Deno worker about 200 MB at Qwen3's size);
 * nothing for the byte tokenizer, which the worker then finds in the export as the server did.
 */
function decodingTable(tokenizer: Tokenizer): TokenTable | undefined {
  return tokenizer.kind === "bpe" ? tokenTable(tokenizer) : undefined;
}

/** How a slot worker loads its model (serve/slots/slot-worker.ts, message `init`). */
interface WorkerInit {
  path: string;
  kind?: string;
  tokens?: TokenTable;
  /** Whether the table follows (`giveTokens`): the load begins without it and waits for it only when it must. */
  tokensLater?: boolean;
  share?: WeightsShare;
  /** Whether its `ready` brings a fresh session's bytes (the first slot's: the model's session shape). */
  probe?: boolean;
  threads?: number;
  context?: number;
}

/**
 * A slot in a worker that loads the model itself; replaced when it dies. `ready` settles with the first
 * worker's load: the model it loaded, or its refusal.
 */
function workerRunner(
  init: WorkerInit,
): Runner & {
  ready: Promise<SlotModel>;
  respawnWith(init: WorkerInit): void;
  /** Hands a worker started with `tokensLater` the table (undefined: the byte tokenizer's). */
  giveTokens(tokens: TokenTable | undefined): void;
} {
  const loaded = Promise.withResolvers<SlotModel>();
  loaded.promise.catch(() => {}); // a runner nobody waits on (one of several) must not fail the process
  let worker: Worker;
  let current: Pending | undefined;
  let seq = 0;
  let held: readonly number[] = [], rewinds = false;
  const spawn = () => {
    held = [];
    const w = new Worker(new URL("./slot-worker.ts", import.meta.url).href, { type: "module" });
    worker = w;
    // Reported twice on Bun (the worker's own `died`, then the error event): acted on once.
    const died = (message: string) => {
      if (worker !== w) return;
      w.terminate();
      loaded.reject(new Error(`the slot worker died while loading the model (${message})`)); // no-op once loaded
      const job = current;
      current = undefined;
      spawn();
      job?.died(new Error(message));
    };
    w.onmessage = (ev) => {
      if (ev.data.type === "ready") loaded.resolve(ev.data.model);
      else if (ev.data.type === "failed") loaded.reject(refusalError(ev.data.error));
      else if (ev.data.type === "died") died(ev.data.message);
      else if (current && current.id === ev.data.id) current.onMessage(ev.data);
    };
    w.onerror = (ev) => {
      ev.preventDefault?.();
      died(ev.message || "the worker failed");
    };
    w.postMessage({ type: "init", ...init });
  };
  spawn();
  return {
    ready: loaded.promise,
    respawnWith: (next) => void (init = next),
    giveTokens(tokens) {
      init = { ...init, tokens, tokensLater: undefined };
      worker.postMessage({ type: "tokens", tokens });
    },
    get held() {
      return held;
    },
    get rewinds() {
      return rewinds;
    },
    forget: () => void (held = []),
    async run(from, job, signal, onText, onPrompt) {
      const id = ++seq;
      const sent = from instanceof Uint8Array || from === "held"
        ? from
        : from && from.position > 0
        ? from.save!()
        : undefined;
      const abort = () => worker.postMessage({ type: "abort", id });
      held = []; // until the job ends well (the worker drops its session too)
      const r = await new Promise<SlotResult>((resolve, reject) => {
        const finished = () => {
          if (current?.id === id) current = undefined;
        };
        current = pending(id, signal, abort, { onText, onPrompt }, finished, resolve, reject);
        worker.postMessage({ type: "job", id, from: sent, job });
        if (signal.aborted) abort();
      });
      held = r.held, rewinds = r.rewinds;
      return r;
    },
    close: () => worker.terminate(),
    crash: () => worker.postMessage({ type: "crash" }),
    collect: () => worker.postMessage({ type: "gc" }),
  };
}

/**
 * One job's messages: text shown in order as it arrives (a failure to show it, such as a closed
 * stream, aborts the job), and the result once every piece before it has been shown.
 */
function pending(
  id: number,
  signal: AbortSignal,
  abort: () => void,
  tell: { onText?: OnText; onPrompt?: ReplyOptions["onPrompt"] },
  finished: () => void,
  resolve: (r: SlotResult) => void,
  reject: (e: unknown) => void,
): Pending {
  let shown = Promise.resolve(), failed: unknown;
  signal.addEventListener("abort", abort, { once: true });
  const end = () => {
    signal.removeEventListener("abort", abort);
    finished();
  };
  return {
    id,
    onMessage(m) {
      if (m.type === "prompt") {
        shown = shown.then(() => tell.onPrompt?.(m.progress));
        return;
      }
      if (m.type === "text") {
        shown = shown.then(() => tell.onText?.(m.piece, m.picks ?? [])).catch((e) => {
          failed ??= e;
          abort();
        });
        return;
      }
      end();
      if (m.type === "fail") reject(new Error(m.message));
      else shown.then(() => failed === undefined ? resolve(m.result) : reject(failed));
    },
    died(e) {
      end();
      reject(new ApiError(500, `the generation worker died (${e.message}); it has been replaced`));
    },
  };
}

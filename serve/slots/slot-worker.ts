/**
 * One slot (serve/slots/slots.ts): a worker that loads the model itself with `loadEngine` (its own engine and
 * sessions; the server's thread loads none) and runs one job at a time with `runJob`, streaming the
 * reply's text back by message. The server's thread keeps the queue, the prompt cache, the session store
 * and the whole tokenizer; this worker keeps only its last session, which a job may continue
 * (`from: "held"`), and the tokenizer's decoding half.
 *
 * Messages in:
 * - `init { path, kind?, tokens?, tokensLater?, threads?, context?, share?, probe? }` once: `tokens` is the
 *   decoding half of the server's tokenizer (model/token-table.ts), or with `tokensLater` it follows in a
 *   `tokens { tokens }` message (the first slot reads its model while the server builds the tokenizer),
 *   `threads` the slot's, `context` the server's, `share` how the slots share one copy of the weights
 *   (engines/mod.ts `EngineLoadOptions.share`), `probe` whether `ready` brings a fresh session's bytes
 *   (`SlotModel.probe`; the first slot's only);
 * - `job { id, from?, job }`: `from` is session bytes to continue (a stored session or a cached state),
 *   or `"held"`: this worker's last session, or a fresh one if none;
 * - `abort { id }`; `gc` (collect garbage now, where the runtime allows: for memory measurements);
 *   `crash` (for tests: fail the way a fault would).
 *
 * Messages out: `ready { model }` (serve/slots/slot-model.ts `SlotModel`) or `failed { error }` once, then
 * `text { id, piece, picks }`, `prompt { id, progress }`, `done { id, result }`, `fail { id, message }`,
 * and `died { message }` when an error nothing caught ends the worker.
 *
 * @example
 * ```ts
 * const w = new Worker(new URL("./slot-worker.ts", import.meta.url), { type: "module" });
 * w.postMessage({ type: "init", path: "out/ferry.q4.lut4", kind: "int" });
 * ```
 * @module
 */
import { loadEngine } from "../../engines/mod.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import { FormatError, messageWithoutCode } from "../../model/error.ts";
import type { SlotModel, SlotRefusal } from "./slot-model.ts";
import type { TokenLogprob } from "../openai/logprobs.ts";
import { runJob, type SlotResult } from "./slot-run.ts";
import type { PromptProgress } from "./generation.ts";
import type { TokenTable } from "../../model/token-table.ts";

// The worker's global scope, typed for the members used (Deno and Bun both provide them).
const scope = self as unknown as {
  postMessage(m: unknown, transfer?: Transferable[]): void;
  onmessage: (ev: MessageEvent) => void;
};

// An error nothing caught ends this worker, reported first: Deno 2.9 would otherwise end the whole
// server's process with it, whatever the server's `onerror` does. The server replaces the worker.
const died = (e: Event, why: unknown) => {
  e.preventDefault();
  scope.postMessage({ type: "died", message: (why as Error)?.message ?? String(why) });
  self.close();
};
self.addEventListener("error", (e) => died(e, (e as ErrorEvent).error ?? (e as ErrorEvent).message));
self.addEventListener("unhandledrejection", (e) => died(e, (e as PromiseRejectionEvent).reason));

let engine: Promise<Engine> | undefined;
/** Hands the load the server's table, for an `init` whose table follows (`tokensLater`). */
let giveTokens: ((tokens: TokenTable | undefined) => void) | undefined;
/** The last job's session, kept for the next job to continue (its tokens went back with the result). */
let kept: EngineSession | undefined;
const aborts = new Map<number, AbortController>();

scope.onmessage = (ev: MessageEvent) => {
  const msg = ev.data;
  if (msg.type === "init") {
    const notes: string[] = [];
    const later = msg.tokensLater
      ? new Promise<TokenTable | undefined>((give) => giveTokens = give)
      : undefined;
    engine = loadEngine(msg.path, msg.kind, {
      tokens: msg.tokens ?? later,
      share: msg.share,
      threads: msg.threads,
      context: msg.context,
      onNote: (line) => notes.push(line),
    });
    engine.then((e) => scope.postMessage({ type: "ready", model: describe(e, notes, msg.probe) }), (err) => {
      scope.postMessage({ type: "failed", error: refusal(err) });
    });
  } else if (msg.type === "tokens") {
    giveTokens?.(msg.tokens);
  } else if (msg.type === "job") {
    void job(msg.id, msg.from, msg.job);
  } else if (msg.type === "abort") {
    aborts.get(msg.id)?.abort();
  } else if (msg.type === "gc") {
    const g = globalThis as any;
    if (g.Bun) g.Bun.gc(true);
    else g.gc?.();
  } else if (msg.type === "crash") {
    setTimeout(() => {
      throw new Error("slot worker crashed on request");
    });
  }
};

async function job(id: number, from: Uint8Array | "held" | undefined, job: Parameters<typeof runJob>[2]) {
  const ac = new AbortController();
  aborts.set(id, ac);
  try {
    if (!engine) throw new Error("slot worker: job before init");
    const e = await engine;
    const session = from instanceof Uint8Array
      ? e.restore!(from, "session")
      : from === "held" && kept
      ? kept
      : e.start();
    kept = undefined; // until the job ends well: a failed one may leave it anywhere
    const text = batched((piece, picks) => scope.postMessage({ type: "text", id, piece, picks }));
    const onPrompt = (progress: PromptProgress) => scope.postMessage({ type: "prompt", id, progress });
    const r = await runJob(e, session, job, ac.signal, text.add, onPrompt);
    text.flush();
    if (session.rewind) kept = session;
    scope.postMessage({ type: "done", id, result: r }, transfers(r));
  } catch (err) {
    scope.postMessage({ type: "fail", id, message: (err as Error).message ?? String(err) });
  } finally {
    aborts.delete(id);
  }
}

/**
 * Text posted at most every `ms` milliseconds: pieces (and their log-probabilities) generated in
 * between go as one message, so the server's thread handles one message and one event per batch
 * rather than per token (at this model's speed, per-token messages kept two slots from scaling).
 */
function batched(post: (piece: string, picks: TokenLogprob[]) => void, ms = 2) {
  let piece = "", picks: TokenLogprob[] = [], last = performance.now();
  const flush = () => {
    if (piece === "" && picks.length === 0) return;
    post(piece, picks);
    piece = "", picks = [], last = performance.now();
  };
  const add = (more: string, morePicks: TokenLogprob[]) => {
    piece += more;
    if (morePicks.length > 0) picks = picks.concat(morePicks);
    if (performance.now() - last >= ms) flush();
  };
  return { add, flush };
}

/** The state buffers go back without a copy. */
function transfers(r: SlotResult): Transferable[] {
  return r.endState ? [r.endState.bytes.buffer as ArrayBuffer] : [];
}

/**
 * What the server's thread needs to know of the loaded model, which it does not load itself: its kind,
 * config and context, the loader's notes, and a fresh session's bytes (their header names the shape
 * every session of this model has; none where the engine cannot save sessions).
 */
function describe(e: Engine, notes: string[], probing: boolean): SlotModel {
  // Only the first slot is asked: a float engine's fresh session hashes every weight (its model digest).
  const probe = probing && e.restore ? e.start().save?.() : undefined;
  return {
    kind: e.kind,
    config: e.config,
    context: e.context,
    probe,
    notes,
    shareable: e.shareable,
    weightBytes: e.weightBytes,
  };
}

/** A load's failure as data: a `FormatError` keeps its file and field, so the server refuses it as one. */
function refusal(err: unknown): SlotRefusal {
  const e = err as Error;
  if (!(e instanceof FormatError)) return { message: e?.message ?? String(err) };
  const { name, code, path, field, expected, found } = e;
  return { message: messageWithoutCode(e), format: { name, code, path, field, expected, found } };
}

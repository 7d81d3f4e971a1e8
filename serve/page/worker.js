// The integer engine in the tab: a dedicated module worker that runs the server's own modules (served
// as JavaScript with their types stripped, serve/browser-modules.ts) on a lut4 file's bytes, so the
// page stays responsive while it generates. A chat request goes the server's way, step for step: the
// same request check (serve/openai/requests.ts), transcript (serve/chat/transcript.ts), seed rule, context check
// and session continuation (serve/chat/prompt.ts), and the same reply loop and saved end state
// (serve/slots/slot-run.ts). A model with its own tokenizer (a lut4 file of schema /2 carries it) is prompted
// through its chat template and stops at its EOS set, its thinking sent apart as reasoning
// (serve/chat/chat-prompt.ts, serve/openai/reasoning.ts), as the server's chat route does. So the same request
// gives the same tokens, and a saved session is the bytes the server would have written.
//
// Messages in: {type, id, ...}: "download" {url, name, bytes, sha256 (what the manifest promised), engine?,
// threads?} (the server's model, downloaded here, then loaded and kept), "load" {bytes, name, sha256?,
// engine?: "int" | "float", keep?: "server" | "disk", threads?}, "load-kept" {sha256?, engine?, threads?},
// "reload" {engine?, threads?}, "complete"
// {body}, "abort", "count" {messages}, "session-get" {session}, "session-put" {bytes}, "bench" {prompt,
// decode, threads?}.
// Messages out: {type: "reply", id, value} | {type: "piece", id, text, kind} (a reply's text as it
// comes, kind "reasoning" or "content"; a load's step as it starts, kind "phase", text the step; how far
// a download has come, kind "progress", text {done, total}; how far a prompt has been read, kind
// "prompt", text the server's prompt_progress object)
// | {type: "error", id, error: {message, status, code}} | {type: "ready"} once, when the modules loaded.
import { intEngineFromBytes, memoryToPlace } from "../../engines/int/from-bytes.ts";
import { chatTemplateOf } from "../../model/chat-template.ts";
import { contextLength } from "../../model/engine.ts";
import { chatStops, chatText } from "../chat/chat-prompt.ts";
import { precheck, prepare } from "../chat/prompt.ts";
import { createReasoningSplitter, splitReasoning } from "../openai/reasoning.ts";
import { readChatRequest } from "../openai/requests.ts";
import { randomSeed } from "../openai/sampling.ts";
import { finishReason, usage } from "../openai/shapes.ts";
import { runJob } from "../slots/slot-run.ts";
import { parseTranscript } from "../chat/transcript.ts";
import { overLimits } from "../sessions/session-limits.ts";
import { keepModel, keptModel } from "./tab-store.js";

/**
 * Saved sessions kept in the worker's memory: the newest 64 within 256 MiB (at Qwen3-0.6B's shape a
 * session is about 115 KB a position; the newest is always kept).
 */
const KEEP = { sessions: 64, bytes: 256 << 20 };

let ctx = null; // the server context's few fields that serve/chat/prompt.ts reads
let retained = null; // the loaded file's { bytes, name, sha256 } when IndexedDB does not keep them
let loadedSha256 = null;
let loadedThreads = 1;
const running = new Map(); // request id -> AbortController
// Replies and benchmarks running (a model's keep in IndexedDB waits for none), and who waits for none.
let busy = 0;
const idle = [];
// The keeps asked for (the latest is the one that counts) and the chain they run on, one at a time.
let keeps = 0;
let keeping = Promise.resolve();
/** The messages a keep's writing waits for. */
const HOLDS_KEEP = new Set(["complete", "bench"]);

/** Sessions by id, as the server's store holds them (opaque 32-hex-digit ids). */
function sessionStore() {
  const saved = new Map(); // id -> { bytes, time }, in the order saved
  let saves = 0;
  return {
    put(bytes) {
      const id = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0"))
        .join("");
      saved.set(id, { bytes, time: saves++ });
      const listed = [...saved].map(([id, s]) => ({ id, time: s.time, bytes: s.bytes.byteLength }));
      for (const old of overLimits(listed, KEEP)) saved.delete(old.id);
      return Promise.resolve(id);
    },
    get: (id) => Promise.resolve(saved.get(id)?.bytes),
  };
}

/** An error as the page's ApiError wants it: the message, an HTTP-like status and OpenAI's code. */
function errorOf(e) {
  return { message: e.message ?? String(e), status: e.status ?? 0, code: e.code ?? null, name: e.name };
}

/**
 * The integer engine's threads in this tab: every core up to 4, where the page is cross-origin isolated
 * (its threads share one memory, which needs SharedArrayBuffer); else one.
 */
function defaultThreads() {
  if (!self.crossOriginIsolated) return 1;
  return Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1));
}

/**
 * Builds the engine on a lut4 file's bytes: the integer engine, or (`engine: "float"`) the float engine
 * on the file's dequantized tensors, as the server's `--engine float` runs a lut4 file. The float
 * engine's modules are imported only when it is asked for. `sha256` is what the bytes must hash to;
 * `digested` says it was computed from these very bytes here before (they were kept with it), so it is
 * not computed again. `placed`: a copy of the bytes in a shared memory the integer engine lays them out
 * in (`download`).
 */
async function load(
  { id, bytes, name, sha256, digested = false, engine = "int", keep, threads = defaultThreads(), placed },
) {
  // Each step's start goes to the page as it comes (a message is delivered while this thread works on).
  const onPhase = (phase) => postMessage({ type: "piece", id, text: phase, kind: "phase" });
  const t0 = performance.now();
  const view = new Uint8Array(bytes);
  onPhase("check");
  const digest = digested ? Promise.resolve(sha256) : webCryptoDigest(view);
  const made = engine === "float"
    ? await (await import("../../engines/float-from-bytes.ts")).floatEngineFromLut4Bytes(view, name, {
      sha256,
      digest,
    })
    : await intEngineFromBytes(view, name, { sha256, digest, onPhase, threads, placed });
  ctx?.engine.dispose?.(); // the model it replaces: its threads end
  const tokenizer = made.engine.tokenizer;
  ctx = {
    engine: made.engine,
    tokenizer, // the file's own, or the byte tokenizer
    template: chatTemplateOf(tokenizer.files, name), // as serve/app.ts parses it; none for a byte model
    sessions: sessionStore(),
    contextLength: contextLength(made.engine), // as the server says it: the KV cache loaded, not the file's most
    defaultMaxTokens: 256,
  };
  // The bytes are kept once: in IndexedDB when asked (`keep`: where they came from), else in memory for
  // a switch of engine; in memory too until IndexedDB has them.
  retained = { bytes, name, sha256: made.sha256 };
  if (keep) keepInBackground({ name, sha256: made.sha256, bytes, from: keep });
  loadedSha256 = made.sha256;
  loadedThreads = engine === "float" ? 1 : threads;
  return {
    id: name,
    keeping: Boolean(keep),
    engine: made.engine.kind,
    contextLength: ctx.contextLength,
    tokenizer: tokenizer.kind,
    chatTemplate: ctx.template !== undefined,
    thinkingSwitch: ctx.template?.thinkingSwitch ?? false,
    sessions: true,
    threads: engine === "float" ? 1 : threads,
    sha256: made.sha256,
    bytes: made.bytes,
    inPlace: made.inPlace ?? false, // laid out where the download put it
    loadMs: performance.now() - t0,
  };
}

/**
 * The SHA-256 (hex) of `bytes` by Web Crypto, which hashes on another thread (and at twice the speed of
 * the reader's own hash in JavaScript: 328 MB in 1.15 s against 2.3 s) while this one checks the file and
 * builds its tokenizer. Undefined without Web Crypto (a page served over plain http from another host):
 * the reader then hashes the bytes itself.
 */
function webCryptoDigest(bytes) {
  if (!globalThis.crypto?.subtle) return undefined;
  return crypto.subtle.digest("SHA-256", bytes).then((d) =>
    Array.from(new Uint8Array(d), (b) => b.toString(16).padStart(2, "0")).join("")
  );
}

/**
 * Keeps `model` in IndexedDB after its load has answered, so the model runs meanwhile (writing a 328 MB
 * file took about 6 s); then says so to the page: {type: "kept", sha256, unkept?}, `unkept` saying why
 * it could not be kept (a private window without IndexedDB, a full quota: the model runs anyway). Its
 * pieces wait while a reply or a benchmark runs (`whenIdle`). Keeps run one at a time: one still
 * writing when another model is loaded stops at its next piece, and the newer one is kept instead.
 */
function keepInBackground(model) {
  const mine = ++keeps;
  const between = async () => {
    await whenIdle();
    if (mine !== keeps) throw new Error("replaced by a newer model");
  };
  keeping = keeping.then(() => keepModel(model, between)).then(
    () => undefined,
    (e) => e?.message ?? String(e),
  );
  keeping.then((unkept) => {
    if (mine !== keeps) return; // superseded: the newer keep reports
    // Kept: the copy in memory is no longer needed, unless another model's load has replaced it since.
    if (!unkept && retained?.bytes === model.bytes) retained = null;
    postMessage({ type: "kept", sha256: model.sha256, unkept });
  });
}

/** Resolves once no reply or benchmark is running in this worker. */
function whenIdle() {
  if (busy === 0) return Promise.resolve();
  return new Promise((resolve) => idle.push(resolve));
}

/** Loads the kept model (only if its SHA-256 is `sha256`, when given); resolves to null when there is none. */
async function loadKept({ id, sha256, engine, threads }) {
  const kept = await keptModel();
  if (!kept || (sha256 !== undefined && kept.sha256 !== sha256)) return null;
  const { bytes, name, sha256: digest } = kept;
  return await load({ id, bytes, name, sha256: digest, digested: true, engine, threads });
}

/**
 * Builds the loaded model again on another engine (or, for a benchmark, another thread count), from the
 * bytes held here or the kept ones.
 */
async function reload({ id, engine, threads }) {
  if (retained) return await load({ id, ...retained, digested: true, engine, threads });
  const again = await loadKept({ id, sha256: loadedSha256, engine, threads });
  if (!again) throw new Error("the model is no longer kept in this browser: load it again");
  return again;
}

function needModel() {
  if (!ctx) throw Object.assign(new Error("no model is loaded in this tab"), { code: "no_model" });
  return ctx;
}

/** One chat completion, as serve/routes/completions.ts answers it, pieces streamed back as they come. */
async function complete(id, body) {
  const c = needModel();
  const req = readChatRequest(body);
  const text = chatText(c, req.messages, req.templateKwargs);
  // As serve/routes/completions.ts: with a template, a think block the reply opens is reasoning
  // ("inside" when the prompt itself opened it).
  const split = !c.template || req.reasoningFormat === "none"
    ? undefined
    : createReasoningSplitter(/<think>\s*$/.test(text));
  precheck(c, req, text, "messages", true);
  // No seed: a fresh one, reported; a continued session without one keeps its stream (as the server).
  const seed = req.seed ?? (req.session === undefined ? randomSeed() : undefined);
  const p = await prepare(c, req, text, "messages", true);
  const abort = new AbortController();
  running.set(id, abort);
  const t0 = performance.now();
  let first = 0;
  try {
    const r = await runJob(
      c.engine,
      p.session ?? c.engine.start(),
      {
        prompt: p.prompt,
        maxTokens: p.maxTokens,
        sampling: req.sampling,
        seed,
        stop: [...chatStops(c), ...req.stop],
        keep: false,
        saveEnd: req.saveSession,
      },
      abort.signal,
      (piece) => {
        first ||= performance.now();
        if (!split) return postMessage({ type: "piece", id, text: piece, kind: "content" });
        for (const part of split.push(piece)) postMessage({ type: "piece", id, ...part });
      },
      // How far the prompt has been read, as the server streams it (prompt_progress).
      (progress) =>
        postMessage({
          type: "piece",
          id,
          text: { ...progress, time_ms: Math.round(performance.now() - t0) },
          kind: "prompt",
        }),
    );
    for (const part of split?.flush() ?? []) postMessage({ type: "piece", id, ...part });
    const session = req.saveSession && r.endState ? await c.sessions.put(r.endState.bytes) : undefined;
    const end = performance.now();
    const { reasoning, content } = split
      ? splitReasoning(r.text, /<think>\s*$/.test(text))
      : { content: r.text };
    return {
      content,
      reasoning,
      finish: r.finishReason === "abort" ? "abort" : finishReason(r),
      usage: usage(p.prompt.length, r),
      seed: seed ?? null,
      session,
      timing: { firstMs: (first || end) - t0, totalMs: end - t0, tokens: r.completionTokens },
    };
  } finally {
    running.delete(id);
  }
}

/** What the server's /apply-template then /tokenize answer for these messages: the prompt's length. */
function count(messages) {
  const c = needModel();
  const req = readChatRequest({ messages });
  return c.tokenizer.encode(chatText(c, req.messages, req.templateKwargs), { specials: true }).length;
}

/** A session file uploaded, checked by restoring it, kept, and described as POST /v1/sessions does. */
async function putSession(bytes) {
  const c = needModel();
  let session;
  try {
    session = c.engine.restore(new Uint8Array(bytes), "uploaded session");
  } catch (e) {
    throw Object.assign(new Error(`session: ${e.message}`), { status: 400, code: "invalid_session" });
  }
  const id = await c.sessions.put(new Uint8Array(bytes));
  // As the server's upload: a templated model's turns are read from its special tokens by the page.
  const text = c.tokenizer.decode(session.tokens, { specials: true });
  const messages = c.template ? [] : parseTranscript(text);
  return { id, object: "session", tokens: session.position, text, messages };
}

async function getSession(id) {
  const bytes = await needModel().sessions.get(id);
  if (!bytes) {
    throw Object.assign(new Error(`session: no session ${JSON.stringify(id)}`), {
      code: "session_not_found",
    });
  }
  return bytes;
}

/**
 * A timing for scripts/tools/bench-tab.ts: `prompt` fed at once on a fresh session (prefill), then
 * `decode` greedy tokens picked and fed one at a time, as generation does (no stop, no text). With
 * `threads`, the integer engine is first built again on that many threads if it runs on another count.
 */
async function bench(prompt, decode, threads) {
  needModel();
  if (threads !== undefined && threads !== loadedThreads) {
    await reload({ id: "bench", engine: "int", threads });
  }
  const s = needModel().engine.start();
  const t0 = performance.now();
  await s.feed(prompt, "none");
  const t1 = performance.now();
  for (let i = 0; i < decode; i++) await s.feed([s.pick()], "none");
  return { prefillMs: t1 - t0, decodeMs: performance.now() - t1 };
}

/**
 * Downloads the server's lut4 file (`url`, `bytes` long as its manifest says), saying how far it has
 * come, then loads it (`load`, its SHA-256 checked against the manifest's) and keeps it. Each piece goes
 * into a buffer for the digest and IndexedDB and, for the integer engine where there is shared memory
 * (a cross-origin isolated page), into the memory it will serve from, so the load after the download
 * checks and lays the model out where it lies instead of copying 0.3 GB into fresh memory. Here, not
 * on the page: those copies and their first touch of fresh memory then run beside the page's thread.
 */
async function download({ id, url, name, bytes: total, sha256, engine = "int", threads }) {
  const res = await fetch(url, { cache: "no-cache" });
  if (!res.ok) {
    throw Object.assign(new Error(`${name}: the download failed (${res.status} ${res.statusText})`), {
      status: res.status,
    });
  }
  const out = new Uint8Array(total);
  const placed = engine === "int" && self.crossOriginIsolated ? memoryToPlace(total) : undefined;
  const reader = res.body.getReader();
  let done = 0, said = 0;
  for (;;) {
    const { done: end, value } = await reader.read();
    if (end) break;
    if (done + value.length > total) throw new Error(`${name}: longer than the ${total} bytes announced`);
    out.set(value, done);
    placed?.bytes.set(value, done);
    done += value.length;
    // A progress message per 1/200 of the file, not per piece (a 328 MB file arrives in thousands).
    if (done - said >= total / 200 || done === total) {
      said = done;
      postMessage({ type: "piece", id, text: { done, total }, kind: "progress" });
    }
  }
  if (done !== total) throw new Error(`${name}: ${done} of ${total} bytes arrived`);
  return await load({ id, bytes: out.buffer, name, sha256, engine, keep: "server", threads, placed });
}

/** What each message asks for, by its type: the value to answer with. */
const ANSWERS = {
  download: (m) => download(m),
  load: (m) => load(m),
  "load-kept": (m) => loadKept(m),
  reload: (m) => reload(m),
  complete: (m) => complete(m.id, m.body),
  count: (m) => count(m.messages),
  "session-put": (m) => putSession(m.bytes),
  "session-get": (m) => getSession(m.session),
  bench: (m) => bench(m.prompt, m.decode, m.threads),
};

self.onmessage = async ({ data: m }) => {
  if (m.type === "abort") return running.get(m.id)?.abort();
  const holds = HOLDS_KEEP.has(m.type);
  if (holds) busy++;
  try {
    if (!Object.hasOwn(ANSWERS, m.type)) throw new Error(`unknown message ${m.type}`);
    const value = await ANSWERS[m.type](m);
    postMessage({ type: "reply", id: m.id, value });
  } catch (e) {
    postMessage({ type: "error", id: m.id, error: errorOf(e) });
  } finally {
    if (holds && --busy === 0) idle.splice(0).forEach((go) => go());
  }
};

postMessage({ type: "ready" });

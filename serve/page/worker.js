// The integer engine in the tab: a dedicated module worker that runs the server's own modules (served
// as JavaScript with their types stripped, serve/browser-modules.ts) on a lut4 file's bytes, so the
// page stays responsive while it generates. A chat request goes the server's way, step for step: the
// same request check (serve/requests.ts), transcript (serve/transcript.ts), seed rule, context check
// and session continuation (serve/prompt.ts), and the same reply loop and saved end state
// (serve/slot-run.ts). So the same request gives the same tokens, and a saved session is the bytes the
// server would have written.
//
// Messages in: {type, id, ...}: "load" {bytes, name, sha256?, engine?: "int" | "float"}, "complete" {body}, "abort", "count"
// {messages}, "session-get" {session}, "session-put" {bytes}, "bench" {prompt, decode}.
// Messages out: {type: "reply", id, value} | {type: "piece", id, text} (a reply's text as it comes)
// | {type: "error", id, error: {message, status, code}} | {type: "ready"} once, when the modules loaded.
import { intEngineFromBytes } from "../../engines/int/from-bytes.ts";
import { precheck, prepare } from "../prompt.ts";
import { readChatRequest } from "../requests.ts";
import { randomSeed } from "../sampling.ts";
import { finishReason, usage } from "../shapes.ts";
import { runJob } from "../slot-run.ts";
import { CHAT_STOP, parseTranscript, renderChat } from "../transcript.ts";
import { decode, encode } from "../../model/tokenizer.ts";

/** Saved sessions kept in the worker, newest last; the oldest go past this many. */
const KEEP_SESSIONS = 64;

let ctx = null; // the server context's few fields that serve/prompt.ts reads
const running = new Map(); // request id -> AbortController

/** Sessions by id, as the server's store holds them (opaque 32-hex-digit ids). */
function sessionStore() {
  const saved = new Map();
  return {
    put(bytes) {
      const id = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, "0"))
        .join("");
      saved.set(id, bytes);
      if (saved.size > KEEP_SESSIONS) saved.delete(saved.keys().next().value);
      return Promise.resolve(id);
    },
    get: (id) => Promise.resolve(saved.get(id)),
  };
}

/** An error as the page's ApiError wants it: the message, an HTTP-like status and OpenAI's code. */
function errorOf(e) {
  return { message: e.message ?? String(e), status: e.status ?? 0, code: e.code ?? null, name: e.name };
}

/**
 * Builds the engine on a lut4 file's bytes: the integer engine, or (`engine: "float"`) the float engine
 * on the file's dequantized tensors, as the server's `--engine float` runs a lut4 file. The float
 * engine's modules are imported only when it is asked for.
 */
async function load({ bytes, name, sha256, engine = "int" }) {
  const t0 = performance.now();
  const made = engine === "float"
    ? (await import("../../engines/float-from-bytes.ts")).floatEngineFromLut4Bytes(
      new Uint8Array(bytes),
      name,
      {
        sha256,
      },
    )
    : intEngineFromBytes(new Uint8Array(bytes), name, { sha256 });
  ctx = {
    engine: made.engine,
    tokenizer: made.engine.tokenizer, // the byte tokenizer: a lut4 file carries no other yet
    sessions: sessionStore(),
    contextLength: made.engine.config.max_position_embeddings,
    defaultMaxTokens: 256,
  };
  return {
    id: name,
    engine: made.engine.kind,
    contextLength: ctx.contextLength,
    sessions: true,
    sha256: made.sha256,
    bytes: made.bytes,
    loadMs: performance.now() - t0,
  };
}

function needModel() {
  if (!ctx) throw Object.assign(new Error("no model is loaded in this tab"), { code: "no_model" });
  return ctx;
}

/** One chat completion, as serve/routes/completions.ts answers it, pieces streamed back as they come. */
async function complete(id, body) {
  const c = needModel();
  const req = readChatRequest(body);
  const text = renderChat(req.messages);
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
      p.session,
      {
        prompt: p.prompt,
        maxTokens: p.maxTokens,
        sampling: req.sampling,
        seed,
        stop: [CHAT_STOP, ...req.stop],
        keep: false,
        saveEnd: req.saveSession,
      },
      abort.signal,
      (piece) => {
        first ||= performance.now();
        postMessage({ type: "piece", id, text: piece });
      },
    );
    const session = req.saveSession && r.endState ? await c.sessions.put(r.endState.bytes) : undefined;
    const end = performance.now();
    return {
      content: r.text,
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
  needModel();
  const req = readChatRequest({ messages });
  return encode(renderChat(req.messages)).length;
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
  const text = decode(session.tokens);
  return { id, object: "session", tokens: session.position, text, messages: parseTranscript(text) };
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
 * `decode` greedy tokens picked and fed one at a time, as generation does (no stop, no text).
 */
async function bench(prompt, decode) {
  const s = needModel().engine.start();
  const t0 = performance.now();
  await s.feed(prompt, "none");
  const t1 = performance.now();
  for (let i = 0; i < decode; i++) await s.feed([s.pick()], "none");
  return { prefillMs: t1 - t0, decodeMs: performance.now() - t1 };
}

/** What each message asks for, by its type: the value to answer with. */
const ANSWERS = {
  load: (m) => load(m),
  complete: (m) => complete(m.id, m.body),
  count: (m) => count(m.messages),
  "session-put": (m) => putSession(m.bytes),
  "session-get": (m) => getSession(m.session),
  bench: (m) => bench(m.prompt, m.decode),
};

self.onmessage = async ({ data: m }) => {
  if (m.type === "abort") return running.get(m.id)?.abort();
  try {
    if (!Object.hasOwn(ANSWERS, m.type)) throw new Error(`unknown message ${m.type}`);
    const value = await ANSWERS[m.type](m);
    postMessage({ type: "reply", id: m.id, value });
  } catch (e) {
    postMessage({ type: "error", id: m.id, error: errorOf(e) });
  }
};

postMessage({ type: "ready" });

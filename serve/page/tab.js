// "Run in this tab": the page's other door to a model. It offers api.js's exports (modelInfo, complete,
// countTokens, sessionUrl, uploadSession), answered by the integer engine in a Web Worker (worker.js)
// instead of the server, and the controls that choose where the model runs and which model the tab
// has: the server's lut4 file (downloaded with a progress bar, its SHA-256 checked before use) or one
// from disk (a file picker, or dropped on the page), read with the full lut4 reader either way. The
// model is kept in IndexedDB (tab-store.js), so a reload does not download it again.
import { ApiError } from "./api.js";
import { forgetModel, keptInfo } from "./tab-store.js";

const $ = (id) => document.getElementById(id);

let worker = null; // the worker's promise, made on first use
/** What the worker said of its model (its load reply: id, engine, contextLength, inPlace, ...), or null. */
export let loaded = null;
let calls = 0;
const pending = new Map(); // call id -> { resolve, reject, onPiece }

/** The worker, started once; its module graph is fetched from the server (or the static folder). */
function engineWorker() {
  worker ??= new Promise((resolve, reject) => {
    const w = new Worker(new URL("../src/serve/page/worker.js", import.meta.url), {
      type: "module",
      name: "ferry-int-engine",
    });
    w.onerror = (e) =>
      reject(new ApiError(`the tab's engine did not start: ${e.message ?? "a module failed to load"}`));
    w.onmessage = ({ data: m }) => {
      if (m.type === "ready") return resolve(w);
      if (m.type === "kept") return onKept(m);
      const call = pending.get(m.id);
      if (!call) return;
      if (m.type === "piece") return call.onPiece?.(m.text, m.kind);
      pending.delete(m.id);
      if (m.type === "error") call.reject(new ApiError(m.error.message, m.error.status, m.error.code));
      else call.resolve(m.value);
    };
  });
  return worker;
}

/**
 * Sends `message` to the worker: `answer` resolves to its reply, `onPiece` hears streamed text. The id
 * is taken at once, so an abort sent right after names this call.
 */
function call(message, transfer = [], onPiece) {
  const id = ++calls;
  const answer = engineWorker().then((w) =>
    new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject, onPiece });
      w.postMessage({ ...message, id }, transfer);
    })
  );
  return { id, answer };
}

/** `call`'s answer alone. */
function ask(message, transfer = [], onPiece) {
  return call(message, transfer, onPiece).answer;
}

// ---- The backend: api.js's exports, answered in the tab. ----

/** The tab's model as api.js describes the server's; rejects when the tab has none yet. */
export function modelInfo() {
  if (!loaded) {
    // The status line already says what to do; the header just says there is none.
    return Promise.reject(new ApiError("no model in this tab yet", 0, "no_model"));
  }
  return Promise.resolve({
    id: loaded.id,
    engine: loaded.engine,
    place: "in this tab",
    contextLength: loaded.contextLength,
    sessions: true,
    tokenizer: loaded.tokenizer,
    chatTemplate: loaded.chatTemplate,
    thinkingSwitch: loaded.thinkingSwitch,
  });
}

/** One chat reply, as api.js's `complete`: the same request, the same result, an AbortError on `signal`. */
export async function complete(request, onChunk, signal) {
  // As it would travel to the server: JSON, so a field left undefined is absent, not undefined.
  const body = JSON.parse(JSON.stringify({ messages: request.messages, stream: true, ...request.sampling }));
  if (request.templateKwargs) body.chat_template_kwargs = request.templateKwargs;
  if (request.session) body.session = request.session;
  if (request.saveSession) body.save_session = true;
  signal?.throwIfAborted();
  // The worker's pieces: the reply's text, or (kind "prompt") how far the prompt has been read.
  const onPiece = (piece, kind) => kind === "prompt" ? request.onPrompt?.(piece) : onChunk(piece, kind);
  const { id, answer: done } = call({ type: "complete", body }, [], onPiece);
  // Posted after the request (the worker takes messages in order), heard between two tokens.
  const stop = () => engineWorker().then((w) => w.postMessage({ type: "abort", id }));
  signal?.addEventListener("abort", stop, { once: true });
  try {
    const r = await done;
    if (r.finish === "abort") throw new DOMException("the reply was stopped", "AbortError");
    lastTiming = r.timing;
    return {
      content: r.content,
      reasoning: r.reasoning ?? "",
      finish: r.finish,
      usage: r.usage,
      seed: r.seed ?? undefined,
      session: r.session,
    };
  } finally {
    signal?.removeEventListener("abort", stop);
  }
}

/** The last reply's timing in the tab: { firstMs, totalMs, tokens } (for the status line and benchmarks). */
export let lastTiming = null;

/** How many tokens `messages` take, counted by the tab's own tokenizer. */
export function countTokens(messages) {
  return loaded ? ask({ type: "count", messages }) : Promise.resolve(null);
}

/** A download link for the saved session `id`: its bytes, from the worker. */
export async function sessionUrl(id) {
  const bytes = await ask({ type: "session-get", session: id });
  return URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
}

/** A session file restored in the tab: `{ id, tokens, messages }`, as the server's upload answers. */
export async function uploadSession(file) {
  const bytes = await file.arrayBuffer();
  return await ask({ type: "session-put", bytes }, [bytes]);
}

/**
 * Times `prompt` fed at once and `decode` greedy tokens after it, in the worker, on `threads` threads when
 * given (scripts/tools/bench-tab.ts).
 */
export function benchTab(prompt, decode, threads) {
  return ask({ type: "bench", prompt, decode, threads });
}

// ---- Getting a model into the tab. ----

/** The page's model manifest (`page/model.json`): what the server, or a static folder, offers the tab. */
export async function manifest() {
  try {
    const res = await fetch(new URL("./model.json", import.meta.url), { cache: "no-cache" });
    if (res.ok) return await res.json();
  } catch { /* an older server: nothing offered */ }
  return { server: true, model: null, reason: "this server offers no model file to the tab" };
}

const ENGINE_KEY = "ferry.tab-engine";

/** The engine the tab runs a model on: "int" (the default) or "float" (the settings' choice). */
function engineChoice() {
  return localStorage.getItem(ENGINE_KEY) === "float" ? "float" : "int";
}

/** What the status line says of each step of a load (engines/int/from-bytes.ts `LoadPhase`). */
const LOAD_PHASES = {
  check: "checking the file (CRC-32 and SHA-256)…",
  tokenizer: "building its tokenizer…",
  layout: "laying the model out for the engine…",
};

/**
 * Has the worker load a model (`message`: "download", "load", "load-kept" or "reload"), saying each step
 * on the status line and a download's progress through `onProgress(done, total)`; resolves to what it
 * loaded, or null (no kept model). The bytes of a "load" are moved to the worker, not copied, and a
 * download's never reach the page: the page holds no copy of the model.
 */
async function loadInWorker(message, transfer = [], onProgress = () => {}) {
  let started = performance.now();
  const onPiece = (piece, kind) => {
    if (kind === "progress") {
      started = performance.now(); // a step's seconds count from the download's end
      return onProgress(piece.done, piece.total);
    }
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    $("tab-status").textContent = `loading the model: ${LOAD_PHASES[piece] ?? piece} (${seconds} s)`;
  };
  const info = await ask({ ...message, engine: engineChoice() }, transfer, onPiece);
  if (info) loaded = info;
  return info;
}

/**
 * Hands `bytes` (an ArrayBuffer, moved) to the worker, which reads them with the lut4 reader (`sha256`
 * checked when given) and then keeps them in IndexedDB, noting `from`: the load answers with `keeping`,
 * and a "kept" message follows (`onKept`), its `unkept` saying why they could not be kept.
 */
function loadBytes(bytes, name, sha256, from) {
  return loadInWorker({ type: "load", bytes, name, sha256, keep: from }, [bytes]);
}

/** Loads the server's model: from the kept copy when its SHA-256 matches, else downloaded and kept. */
export async function loadServerModel(onProgress = () => {}) {
  const m = await manifest();
  if (!m.model) throw new ApiError(m.reason ?? "no model is offered to the tab");
  if ((await keptInfo().catch(() => undefined))?.sha256 === m.model.sha256) {
    const kept = await loadInWorker({ type: "load-kept", sha256: m.model.sha256 });
    if (kept) return { ...kept, from: "kept" };
  }
  // The worker downloads it (and says how far it has come), checks it against the manifest and keeps it.
  const { name, bytes, sha256 } = m.model;
  const url = new URL(m.model.url, new URL("./", import.meta.url)).href;
  const message = { type: "download", url, name, bytes, sha256 };
  return { ...(await loadInWorker(message, [], onProgress)), from: "server" };
}

/** Loads a lut4 file chosen from disk (read by the worker's full reader) and keeps it. */
export async function loadFileModel(file) {
  const bytes = await file.arrayBuffer();
  return { ...(await loadBytes(bytes, file.name, undefined, "disk")), from: "disk" };
}

/** Loads the kept model, if there is one; resolves to its info or null. */
export async function loadKeptModel() {
  const kept = await loadInWorker({ type: "load-kept" });
  return kept && { ...kept, from: "kept" };
}

// ---- The controls: where the model runs, and which model the tab has. ----

const MODE_KEY = "ferry.where";

function megabytes(n) {
  return `${(n / 1e6).toFixed(n < 1e7 ? 2 : 0)} MB`;
}

let shown = null; // the model the status line describes (`showLoaded`), while it does

/** The status line of the tab's model: which, from where, and what the browser keeps. */
function showLoaded(info) {
  shown = info;
  const whence =
    { kept: "kept in this browser", server: "downloaded from the server", disk: "read from disk" }[info.from];
  const kept = info.keeping
    ? "keeping it in this browser…"
    : info.unkept
    ? `not kept in this browser (${info.unkept}): a reload needs it again`
    : `this browser keeps ${megabytes(info.bytes)} for it`;
  const threads = info.threads > 1 ? `${info.threads} threads` : "one thread";
  $("tab-status").textContent = `${info.id} (${megabytes(info.bytes)}, SHA-256 ${
    info.sha256.slice(0, 12)
  }…) ${whence}; ${kept}; ${threads}`;
  $("tab-status").classList.remove("error");
}

let forgetWhenKept = null; // the SHA-256 of a model "Forget" was pressed for while it was being kept

/** The worker's word that a model's bytes are in IndexedDB (or why not): the status line says it. */
function onKept({ sha256, unkept }) {
  if (loaded?.sha256 === sha256) loaded = { ...loaded, keeping: false, unkept };
  if (forgetWhenKept === sha256) {
    forgetWhenKept = null;
    return void forgetModel().catch(() => {});
  }
  if (shown?.sha256 === sha256) showLoaded({ ...shown, keeping: false, unkept });
}

function showRefusal(e) {
  shown = null;
  $("tab-status").textContent = `refused: ${e.message}`;
  $("tab-status").classList.add("error");
}

/**
 * Wires the switch and the tab's model controls. `onChange(backend)` is called with the module to talk
 * to (api.js's or this one's exports) whenever the mode or the tab's model changes; resolves to the
 * backend to start with. A static copy (no server) runs in the tab only, and says so.
 */
export async function mountTab(serverBackend, onChange) {
  const self = { modelInfo, complete, countTokens, sessionUrl, uploadSession };
  const offer = await manifest();
  const where = $("where"), panel = $("tab-panel"), progress = $("tab-progress");
  const mode = () => where.value;
  const backend = () => (mode() === "tab" ? self : serverBackend);
  const notes = [];
  if (!offer.server) {
    where.querySelector('option[value="server"]').disabled = true;
    notes.push("a static page: the model runs in this tab only");
  }
  if (!globalThis.crossOriginIsolated) {
    notes.push("this page is not cross-origin isolated (its host sends no COOP/COEP headers): one thread");
  }
  $("where-note").textContent = notes.join("; ");
  $("tab-load-server").disabled = !offer.model;
  if (!offer.model) $("tab-load-server").title = offer.reason ?? "";
  const wanted = !offer.server || localStorage.getItem(MODE_KEY) === "tab" ? "tab" : "server";
  where.value = wanted;

  let lastFrom = "kept";
  const busy = async (what) => {
    for (const b of panel.querySelectorAll("button, input, select")) b.disabled = true;
    shown = null;
    $("tab-status").textContent = "loading the model…";
    $("tab-status").classList.remove("error");
    try {
      const info = await what();
      lastFrom = info.from;
      showLoaded(info);
      onChange(self);
    } catch (e) {
      showRefusal(e);
    } finally {
      for (const b of panel.querySelectorAll("button, input, select")) b.disabled = false;
      $("tab-load-server").disabled = !offer.model;
      progress.hidden = true;
    }
  };
  const fromServer = () =>
    busy(() => {
      progress.hidden = false;
      progress.value = 0;
      return loadServerModel((done, total) => (progress.value = done / total));
    });
  const fromFile = (file) => busy(() => loadFileModel(file));

  const showMode = () => {
    panel.hidden = mode() !== "tab";
    document.body.dataset.where = mode();
  };
  where.addEventListener("change", async () => {
    localStorage.setItem(MODE_KEY, mode());
    showMode();
    if (mode() === "tab" && !loaded) await startTab();
    onChange(backend());
  });
  $("tab-load-server").addEventListener("click", fromServer);
  $("tab-file").addEventListener("change", (e) => {
    const file = e.target.files[0];
    e.target.value = "";
    if (file) fromFile(file);
  });
  $("tab-engine").value = engineChoice();
  $("tab-engine").addEventListener("change", (e) => {
    localStorage.setItem(ENGINE_KEY, e.target.value);
    if (!loaded) return;
    const from = lastFrom;
    busy(async () => ({ ...(await loadInWorker({ type: "reload" })), from }));
  });
  $("tab-forget").addEventListener("click", async () => {
    // A model still being kept would be kept after this: it is forgotten again once it is (`onKept`).
    if (loaded?.keeping) forgetWhenKept = loaded.sha256;
    await forgetModel();
    shown = null;
    $("tab-status").textContent = loaded ? "forgotten: a reload will need the model again" : "nothing kept";
  });
  // A file dropped anywhere on the page, in tab mode.
  document.addEventListener("dragover", (e) => {
    if (mode() === "tab" && e.dataTransfer?.types.includes("Files")) e.preventDefault();
  });
  document.addEventListener("drop", (e) => {
    if (mode() !== "tab" || !e.dataTransfer?.files.length) return;
    e.preventDefault();
    fromFile(e.dataTransfer.files[0]);
  });

  /** Tab mode's start: the kept model, else (a static page) the offered one; otherwise wait for the user. */
  async function startTab() {
    const kept = await keptInfo().catch(() => undefined);
    if (kept) return await busy(loadKeptModel);
    if (!offer.server && offer.model) return await fromServer();
    $("tab-status").textContent = offer.model
      ? "no model in this tab yet: load the server's, or choose a lut4 file (or drop one here)"
      : `no model in this tab yet: choose a lut4 file (or drop one here)${
        offer.reason ? `; ${offer.reason}` : ""
      }`;
  }
  showMode();
  if (mode() === "tab") await startTab();
  return backend();
}

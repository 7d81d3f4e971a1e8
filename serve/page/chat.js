// The chat page: plain ES modules, served as they are. A conversation is a list of OpenAI messages kept
// in IndexedDB (store.js); each reply streams in through api.js, the one module that talks to the
// server. The whole history is sent with each turn, trimmed of its oldest turns when it would not fit
// the model's context; where the server keeps sessions, the id of the state after the last reply goes
// with it, so the server reads only the new turn. A server started with --api-key refuses the page
// until the user gives the key in Settings (askForKey), which api.js then sends with every call.
import * as server from "./api.js";
import { ApiError } from "./api.js";
import { mountTab } from "./tab.js";
import { renderInto } from "./markdown.js";
import { button, messageItem, reasoningInto } from "./view.js";
import { followLog } from "./follow.js";
import { deleteConversation, listConversations, newConversation, saveConversation } from "./store.js";

const $ = (id) => document.getElementById(id);
const log = $("log"), prompt = $("prompt"), stats = $("stats"), scroller = $("scroller");

/** What the page shows and is doing. */
const state = {
  model: { id: "?", engine: "?", contextLength: 512, sessions: false },
  conv: newConversation(),
  running: null, // the AbortController of the reply being streamed
};

/** Where the model runs: api.js (the server) or tab.js (the integer engine in a worker), one interface. */
let api = server;

const SETTINGS = ["system", "max-tokens", "temperature", "top-k", "top-p", "min-p", "seed"];

// The log scrolls between header and footer, so the footer never covers it; it follows the reply.
const { follow, pin } = followLog(scroller);

// ---- Showing messages. ----

/** Shows the open conversation's messages. */
function renderLog() {
  const msgs = state.conv.messages;
  const on = { regenerate, useSeed: (seed) => ($("seed").value = seed) };
  log.replaceChildren(
    ...msgs.map((m, i) =>
      messageItem(m, { ...on, last: i === msgs.length - 1, edit: (li) => startEdit(i, li) })
    ),
  );
  $("empty").hidden = state.conv.messages.length > 0;
  $("save").disabled = !state.conv.session;
  follow();
}

// ---- The context meter. ----

/** The meter: `used` tokens of the model's context. */
function showContext(used) {
  const ctx = state.model.contextLength;
  $("context-meter").max = ctx;
  $("context-meter").value = Math.min(used, ctx);
  $("context-text").textContent = `context ${used} / ${ctx}`;
  $("context").classList.toggle("full", used >= ctx * 0.9);
}

/** Tokens `messages` take, from the server's tokenizer, else counted as bytes (ferry's byte model). */
async function tokensOf(messages) {
  const n = await api.countTokens(messages);
  if (n !== null) return n;
  const bytes = (s) => new TextEncoder().encode(s).length;
  return 1 + messages.reduce((sum, m) => sum + bytes(m.content) + m.role.length + 3, 0) + 11;
}

/** Updates the meter for the conversation as it stands (used after loading one). */
async function measureContext() {
  const c = state.conv;
  if (c.used === undefined) c.used = c.messages.length ? await tokensOf(outgoing(c.messages, 0)) : 0;
  showContext(c.used);
}

// ---- Settings, kept in localStorage. ----

function loadSettings() {
  const saved = JSON.parse(localStorage.getItem("ferry.settings") ?? "{}");
  for (const id of SETTINGS) if (saved[id] !== undefined) $(id).value = saved[id];
}

function saveSettings() {
  localStorage.setItem(
    "ferry.settings",
    JSON.stringify(Object.fromEntries(SETTINGS.map((id) => [id, $(id).value]))),
  );
}

function numberField(id) {
  const v = $(id).value.trim();
  return v === "" ? undefined : Number(v);
}

/**
 * What the page offers for `model` (undefined: none loaded): the empty chat's hint that fits its
 * tokenizer and template, and the thinking switch where its template has one.
 */
function showModelHints(model) {
  const kind = !model || model.tokenizer === "byte" ? "byte" : model.chatTemplate ? "template" : "plain";
  for (const p of $("empty").querySelectorAll("[data-for]")) p.hidden = p.dataset.for !== kind;
  $("thinking-field").hidden = !model?.thinkingSwitch;
}

/** The template's variables a request sends (`chat_template_kwargs`): the thinking switch, where offered. */
function templateKwargs() {
  return $("thinking-field").hidden ? undefined : { enable_thinking: $("thinking").checked };
}

/** The sampling settings in OpenAI's names; an empty box is left out (the seed: a random one). */
function sampling() {
  return {
    max_tokens: numberField("max-tokens"),
    temperature: numberField("temperature"),
    top_k: numberField("top-k"),
    top_p: numberField("top-p"),
    min_p: numberField("min-p"),
    seed: numberField("seed"),
  };
}

// ---- The API key: asked for when the server refuses the page without it. ----

/** Whether `e` is the server's refusal for want of its API key (none sent, or a wrong one). */
function keyRefused(e) {
  return e instanceof ApiError && e.code === "invalid_api_key";
}

/** Opens Settings at the API key field, marked, with a message saying what the server wants. */
function askForKey() {
  const field = $("api-key"), note = $("api-key-note");
  note.textContent = field.value
    ? "The server refused this API key: check it and enter it again."
    : "This server needs its API key (it was started with --api-key): enter it here.";
  note.hidden = false;
  field.setAttribute("aria-invalid", "true");
  $("settings").open = true;
  field.focus();
}

/** Clears the key field's mark once the server has accepted the key; true if it was marked. */
function keyAccepted() {
  const was = $("api-key").hasAttribute("aria-invalid");
  $("api-key").removeAttribute("aria-invalid");
  $("api-key-note").hidden = true;
  return was;
}

/** The user's key, kept and sent from now on (api.js); the model is read again with it. */
async function useKey() {
  server.setApiKey($("api-key").value.trim());
  if (api !== server) return;
  if ((await useBackend(server)) && keyAccepted()) prompt.focus(); // it was asked for: back to the message
}

/** Takes back a turn the server refused for want of its key: the user's text returns to the box. */
function takeBack(conv) {
  conv.messages.pop(); // the reply, still empty
  if (conv.messages.at(-1)?.role !== "user") return;
  const { content } = conv.messages.pop();
  if (!prompt.value.trim()) prompt.value = content;
  if (conv.messages.length === 0) conv.title = "New chat";
}

// ---- One turn: fit the history to the context, stream the reply, record how it went. ----

/** Messages as sent: failed or empty replies left out, the oldest `drop` turns dropped, the system prompt first. */
function outgoing(messages, drop) {
  let kept = messages.filter((m) => !m.error && !(m.role === "assistant" && m.content === ""))
    .map(({ role, content }) => ({ role, content }));
  const starts = kept.flatMap((m, i) => (m.role === "user" ? [i] : []));
  if (drop > 0) kept = kept.slice(starts[Math.min(drop, starts.length - 1)]);
  const system = $("system").value.trim();
  return system ? [{ role: "system", content: system }, ...kept] : kept;
}

/** How many of the oldest turns must go so the history and room for a reply fit the context. */
async function turnsToDrop(messages, maxTokens) {
  const ctx = state.model.contextLength;
  const reserve = Math.min(maxTokens ?? 120, Math.floor(ctx / 4));
  const turns = messages.filter((m) => m.role === "user").length;
  for (let drop = 0; drop < turns - 1; drop++) {
    if ((await tokensOf(outgoing(messages, drop))) + reserve <= ctx) return drop;
  }
  return Math.max(0, turns - 1);
}

/** The session to continue: only when the history is exactly the one it was saved after, plus one turn. */
function sessionFor(conv, drop) {
  const sent = conv.messages.length - 1; // before the new reply
  if (!state.model.sessions || drop > 0 || !conv.session || conv.sessionLength !== sent - 1) return undefined;
  return conv.session;
}

const RETRY = new Set([
  "sessions_unavailable",
  "session_mismatch",
  "session_not_found",
  "context_length_exceeded",
]);

/** Tokens per second after the first token (the wait for the first is the prompt's reading). */
function rate(tokens, first) {
  const secs = (performance.now() - first) / 1000;
  return tokens > 1 && secs > 0 ? ((tokens - 1) / secs).toFixed(1) : undefined;
}

/** Notes how a finished reply went: its stats, the dropped turns, the context used, the session after it. */
function record(conv, msg, r, drop, continued, first) {
  const tokens = r.usage?.completion_tokens ?? msg.stats.tokens;
  msg.stats = { tokens, tps: rate(tokens, first), promptTokens: r.usage?.prompt_tokens, seed: r.seed };
  if (r.finish === "length") msg.stats.finish = "length";
  msg.dropped = drop || undefined;
  const before = continued ? conv.used ?? 0 : 0; // a continued session already holds the earlier turns
  conv.used = r.usage ? before + r.usage.prompt_tokens + r.usage.completion_tokens : undefined;
  conv.session = r.session;
  conv.sessionLength = r.session ? conv.messages.length : undefined;
}

/** Streams one reply into `msg`, retrying without a session or with fewer turns when the server says so. */
async function stream(msg, li, signal) {
  const conv = state.conv, opts = sampling(), kwargs = templateKwargs(), history = conv.messages.slice(0, -1);
  const turns = history.filter((m) => m.role === "user").length;
  let drop = await turnsToDrop(history, opts.max_tokens);
  let session = sessionFor(conv, drop);
  let first = 0;
  msg.stats = { tokens: 0 };
  const onPiece = (piece, kind) => {
    first ||= performance.now();
    msg.stats.tokens++;
    msg.stats.tps = rate(msg.stats.tokens, first);
    if (kind === "reasoning") {
      msg.reasoning = (msg.reasoning ?? "") + piece;
      reasoningInto(li, msg.reasoning);
    } else {
      msg.content += piece;
      renderInto(li.querySelector(".content"), msg.content);
    }
    stats.textContent = `${statusLine(msg.stats)} · generating`;
    follow();
  };
  for (;;) {
    const request = {
      messages: outgoing(history, drop),
      sampling: opts,
      templateKwargs: kwargs,
      session,
      onPrompt: showPromptProgress,
    };
    request.saveSession = state.model.sessions;
    try {
      const r = await api.complete(request, onPiece, signal);
      return record(conv, msg, r, drop, session !== undefined, first);
    } catch (e) {
      const retry = e instanceof ApiError && RETRY.has(e.code) && msg.content === "";
      if (!retry || (e.code === "context_length_exceeded" && drop >= turns - 1)) throw e;
      if (e.code === "sessions_unavailable") state.model.sessions = false; // send the whole history instead
      if (e.code === "context_length_exceeded") drop++;
      session = undefined; // a retry sends the whole history, fitted to the context
    }
  }
}

/** The status line after a reply: tokens, speed, engine. */
function statusLine(s) {
  const stopped = s.finish === "stopped" ? " · stopped" : "";
  const where = state.model.place ? `${state.model.engine} ${state.model.place}` : state.model.engine;
  return `${s.tokens} tokens · ${s.tps ?? "–"} tok/s · ${where}${stopped}`;
}

/**
 * The status while the prompt is read (`progress` as the server streams it, prompt_progress): how many
 * of its tokens, at what rate, and the meter counting them.
 */
function showPromptProgress({ total, cache, processed, time_ms }) {
  const read = processed - cache;
  const rate = time_ms > 0 ? ` · ${(read / (time_ms / 1000)).toFixed(1)} tok/s` : "";
  const cached = cache > 0 ? ` (${cache} cached)` : "";
  $("stats").textContent = `reading the prompt: ${processed} / ${total} tokens${cached}${rate}`;
  showContext(processed);
}

/** Adds an assistant reply to the conversation and streams it in; failures stay in the turn, with Retry. */
async function reply() {
  const conv = state.conv;
  const msg = { role: "assistant", content: "", streaming: true };
  conv.messages.push(msg);
  pin();
  renderLog();
  const li = log.lastElementChild;
  state.running = new AbortController();
  setRunning(true);
  let refused = false; // the server wants its API key: nothing to show in the log
  try {
    await stream(msg, li, state.running.signal);
    stats.classList.remove("error");
    stats.textContent = statusLine(msg.stats);
  } catch (e) {
    if (e.name === "AbortError") {
      msg.stats.finish = "stopped";
      conv.used = undefined; // the server reports no usage for a stopped reply: count it again
      stats.classList.remove("error");
      stats.textContent = statusLine(msg.stats);
    } else if (keyRefused(e)) {
      refused = true;
      takeBack(conv);
      stats.textContent = "the server needs its API key: enter it in Settings, then send again";
      stats.classList.add("error");
    } else {
      msg.error = e.message;
      if (msg.content === "") delete msg.stats; // nothing came: no counts to show
      stats.textContent = "the last turn failed";
      stats.classList.add("error");
    }
  } finally {
    delete msg.streaming;
    state.running = null;
    setRunning(false);
    if (conv.used !== undefined) showContext(conv.used);
    renderLog();
    $("announce").textContent = refused
      ? "Not sent: the server needs its API key. Enter it in Settings, then send again."
      : msg.error
      ? `The turn failed: ${msg.error}`
      : `Model: ${msg.content}`;
    if (refused) askForKey(); // after setRunning, which focuses the prompt
    await persist();
  }
}

function setRunning(on) {
  log.setAttribute("aria-busy", String(on));
  $("send").disabled = on;
  $("stop").disabled = !on;
  $("restore").disabled = on;
  $("new").disabled = on;
  $("chat-list").inert = on; // the reply belongs to this conversation: no switching until it ends
  for (const b of log.querySelectorAll(".actions button, .error button")) b.disabled = on;
  if (!on) prompt.focus();
}

/** Sends `text` as the user's next message. */
function ask(text) {
  state.conv.messages.push({ role: "user", content: text });
  if (state.conv.title === "New chat") state.conv.title = text.slice(0, 40);
  return reply();
}

/** Replaces the last reply (or a failed one) with a new one. */
function regenerate() {
  if (state.running) return;
  const msgs = state.conv.messages;
  if (msgs.at(-1)?.role === "assistant") msgs.pop();
  reply();
}

/** Turns user message `i` into a text box; sending it drops everything after it and asks again. */
function startEdit(i, li) {
  if (state.running) return;
  const box = document.createElement("textarea");
  box.value = state.conv.messages[i].content;
  box.setAttribute("aria-label", "Edit message");
  const done = () => renderLog();
  const resend = () => {
    const text = box.value.trim();
    if (!text) return;
    state.conv.messages.splice(i);
    state.conv.session = undefined;
    ask(text);
  };
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      resend();
    } else if (e.key === "Escape") done();
  });
  const bar = document.createElement("div");
  bar.className = "actions";
  bar.append(button("Send", resend, "Send the edited message"), button("Cancel", done, "Cancel editing"));
  li.replaceChildren(box, bar);
  box.focus();
}

// ---- The conversation list. ----

/** Stores the open conversation (once it has a message) and shows the list and meter as they now are. */
async function persist() {
  const c = state.conv;
  if (c.messages.length === 0) return;
  c.updated = Date.now();
  await saveConversation(JSON.parse(JSON.stringify(c)));
  localStorage.setItem("ferry.current", c.id);
  await renderChats();
  await measureContext();
}

/** Shows `conv` and makes it the one a reload comes back to. */
async function open(conv) {
  state.conv = conv;
  pin();
  localStorage.setItem("ferry.current", conv.id);
  renderLog();
  await renderChats();
  await measureContext();
}

/** A row of the conversation list: its title (opens it), Rename and Delete. */
function chatItem(c) {
  const li = document.createElement("li");
  if (c.id === state.conv.id) li.setAttribute("aria-current", "true");
  const title = button(c.title, () => open(c));
  title.className = "title";
  const rename = button("✎", async () => {
    const name = globalThis.prompt("Rename this conversation", c.title)?.trim();
    if (!name) return;
    c.title = name;
    if (c.id === state.conv.id) state.conv.title = name;
    await saveConversation(c);
    await renderChats();
  }, `Rename ${c.title}`);
  const remove = button("✕", async () => {
    if (!confirm(`Delete "${c.title}"? This cannot be undone.`)) return;
    await deleteConversation(c.id);
    if (c.id === state.conv.id) await open(newConversation());
    else await renderChats();
  }, `Delete ${c.title}`);
  li.append(title, rename, remove);
  return li;
}

async function renderChats() {
  const all = await listConversations();
  $("chat-list").replaceChildren(...all.map(chatItem));
}

// ---- Sessions: download the state after the last reply, or upload one to continue. ----

async function saveSession() {
  const id = state.conv.session;
  if (!id) return;
  let url;
  try {
    url = await api.sessionUrl(id);
  } catch (e) {
    if (keyRefused(e)) askForKey();
    stats.textContent = `save failed: ${e.message}`;
    stats.classList.add("error");
    return;
  }
  stats.classList.remove("error");
  const a = document.createElement("a");
  a.href = url;
  a.download = `ferry-${id}.session`;
  document.body.append(a);
  a.click();
  a.remove();
  // A blob: URL (the bytes fetched with the key, or from the tab) holds them until revoked.
  if (url.startsWith("blob:")) setTimeout(() => URL.revokeObjectURL(url), 60_000);
  stats.textContent = "session saved to your downloads";
}

async function restoreSession(file) {
  let body;
  try {
    body = await api.uploadSession(file);
  } catch (e) {
    if (keyRefused(e)) askForKey();
    stats.textContent = `restore refused: ${e.message}`;
    stats.classList.add("error");
    return;
  }
  stats.classList.remove("error");
  const conv = newConversation();
  conv.messages = body.messages;
  conv.title = body.messages.find((m) => m.role === "user")?.content.slice(0, 40) ?? "Restored session";
  conv.session = body.id;
  conv.sessionLength = body.messages.length;
  conv.used = body.tokens;
  await open(conv);
  await persist();
  stats.textContent = `session restored: ${body.tokens} tokens`;
  prompt.focus();
}

// ---- Wiring. ----

$("ask").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = prompt.value.trim();
  if (!text || state.running) return;
  prompt.value = "";
  ready.then(() => ask(text));
});

prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("ask").requestSubmit();
  }
});

document.addEventListener("keydown", (e) => {
  if (e.key !== "Escape") return;
  if (state.running) state.running.abort();
  else if (document.body.classList.contains("chats-open")) showChats(false);
});
$("stop").addEventListener("click", () => state.running?.abort());
$("save").addEventListener("click", saveSession);
$("restore").addEventListener("change", (e) => {
  const file = e.target.files[0];
  e.target.value = "";
  if (file) ready.then(() => restoreSession(file));
});

// New chat keeps the current one in the list: nothing is discarded, so there is nothing to ask.
$("new").addEventListener("click", async () => {
  await open(newConversation());
  stats.textContent = "ready";
  showChats(false);
  prompt.focus();
});

/** Opens or closes the conversation list (a panel over the chat on a narrow screen). */
function showChats(on) {
  document.body.classList.toggle("chats-open", on);
  $("toggle-chats").setAttribute("aria-expanded", String(on));
  if (on) ($("chat-list").querySelector("[aria-current] .title") ?? $("new")).focus();
}
$("toggle-chats").addEventListener("click", () => showChats(!document.body.classList.contains("chats-open")));
$("close-chats").addEventListener("click", () => showChats(false));
$("chat-list").addEventListener("click", (e) => {
  if (e.target.classList.contains("title")) showChats(false);
});

for (const id of SETTINGS) $(id).addEventListener("change", saveSettings);
$("api-key").addEventListener("change", useKey); // on Enter, or on leaving the field
$("system").addEventListener("change", () => {
  state.conv.used = undefined; // the system prompt is part of what the model reads: count again
  measureContext();
});

/**
 * Talks to `backend` from now on (the server's api.js or the tab's tab.js) and shows its model;
 * resolves to whether the model could be read.
 */
async function useBackend(backend) {
  if (backend !== api) state.conv.session = undefined; // a saved session lives on the side that saved it
  api = backend;
  let read = false;
  try {
    state.model = await api.modelInfo();
    const m = state.model;
    $("model").textContent = `${m.id} · ${m.engine} engine · context ${m.contextLength}`;
    showModelHints(m);
    $("save").title = m.sessions ? "" : "this server keeps no sessions: the whole chat is sent each turn";
    read = true;
  } catch (e) {
    if (keyRefused(e)) {
      $("model").textContent = "the server needs its API key (Settings)";
      askForKey();
    } else {$("model").textContent = api === server
        ? "server unreachable"
        : e.code === "no_model"
        ? "no model loaded"
        : e.message;}
    showModelHints(undefined);
  }
  renderLog();
  // Another backend counts the conversation with its own tokenizer, against its own context.
  state.conv.used = undefined;
  if (read) await measureContext().catch(() => showContext(0));
  return read;
}

/** Reads the model, the settings and the conversation a reload comes back to. */
async function start() {
  loadSettings();
  $("api-key").value = server.apiKey();
  await useBackend(await mountTab(server, useBackend));
  const current = localStorage.getItem("ferry.current");
  const stored = (await listConversations()).find((c) => c.id === current);
  await open(stored ?? newConversation());
  // The prompt takes focus only if nothing has it yet: a user (or a key) already in Settings keeps it,
  // and the asked-for key field keeps it.
  const untouched = !document.activeElement || document.activeElement === document.body;
  if (untouched && !$("api-key").hasAttribute("aria-invalid")) prompt.focus();
}

// What the user does before the stored conversation is back waits for it, so it is not replaced.
const ready = start();

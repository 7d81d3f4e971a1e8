// The page's one door to a model. Everything that talks to the server is in this module, so another
// backend (the integer engine in a Web Worker, "run in this tab") can stand in for it by offering the
// same exports: modelInfo, complete and countTokens (and, where it keeps sessions, sessionUrl and
// uploadSession; modelInfo's `sessions` says whether it does). Every call carries the API key the
// user gave in Settings, as `Authorization: Bearer KEY`, when there is one (a server started with
// --api-key refuses the API without it: 401 `invalid_api_key`).

/** A refusal or failure, with the server's HTTP status and OpenAI error code when there was a reply. */
export class ApiError extends Error {
  constructor(message, status = 0, code = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

// The key is kept in sessionStorage, not localStorage with the other settings: it survives a reload but
// not the tab, so it is not left on disk, nor readable by whatever page is served from the same
// host:port later (another local server taking port 8080 shares this origin's localStorage).
const KEY = "ferry.api-key";

/** The API key the page sends ("" for none). */
export function apiKey() {
  return sessionStorage.getItem(KEY) ?? "";
}

/** Keeps `key` for this tab (through reloads) and sends it from now on; "" stops sending one. */
export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** `extra` headers plus the key's `Authorization` when there is a key. */
function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

/** `fetch` with the key; a network failure becomes ApiError (an abort stays an AbortError). */
async function send(path, init = {}) {
  try {
    return await fetch(path, { ...init, headers: headers(init.headers) });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(`the server cannot be reached (${e.message})`);
  }
}

/** The ApiError for a refused answer, from OpenAI's error body when there is one. */
async function refusal(res) {
  const err = await res.json().catch(() => ({}));
  return new ApiError(err.error?.message ?? `${res.status} ${res.statusText}`, res.status, err.error?.code);
}

async function post(path, body, signal) {
  const res = await send(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  if (res.ok) return res;
  throw await refusal(res);
}

/** The served model: `{ id, engine, contextLength, sessions }`; throws ApiError when unreachable or refused. */
export async function modelInfo() {
  const res = await send("/v1/models");
  if (!res.ok) throw await refusal(res);
  const model = (await res.json()).data[0];
  return {
    id: model.id,
    engine: model.engine,
    contextLength: model.context_length,
    sessions: model.sessions === true,
    tokenizer: model.tokenizer,
    chatTemplate: model.chat_template === true,
    thinkingSwitch: model.thinking_switch === true,
  };
}

/** Reads a server-sent-events body and calls onData with each `data:` payload. */
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) if (line.startsWith("data: ")) onData(line.slice(6));
    }
  }
}

/**
 * Streams one chat reply. `request` is `{ messages, sampling, session, saveSession }`, `sampling` in
 * OpenAI's names (max_tokens, temperature, top_k, top_p, min_p, seed). `onChunk(text, kind)` is called
 * with each piece of the reply, `kind` "reasoning" for the model's thinking (`delta.reasoning_content`)
 * and "content" otherwise. `request.onPrompt`, when given, is told how far the prompt has been read
 * (the server's `prompt_progress` object) while it is read. Resolves to `{ content, reasoning, finish, usage, seed, session }` (usage, seed and
 * session as the server reported them, or undefined); rejects with ApiError, or an AbortError on
 * `signal`.
 */
export async function complete(request, onChunk, signal) {
  const body = {
    messages: request.messages,
    stream: true,
    stream_options: { include_usage: true },
    ...request.sampling,
  };
  if (request.onPrompt) body.return_progress = true;
  if (request.templateKwargs) body.chat_template_kwargs = request.templateKwargs;
  if (request.session) body.session = request.session;
  if (request.saveSession) body.save_session = true;
  const res = await post("/v1/chat/completions", body, signal);
  const out = {
    content: "",
    reasoning: "",
    finish: null,
    usage: undefined,
    seed: undefined,
    session: undefined,
  };
  await readEvents(res.body, (data) => {
    if (data === "[DONE]") return;
    const chunk = JSON.parse(data);
    if (chunk.error) throw new ApiError(chunk.error.message, 500, chunk.error.code);
    if (chunk.prompt_progress) request.onPrompt?.(chunk.prompt_progress);
    const choice = chunk.choices?.[0];
    const thought = choice?.delta?.reasoning_content;
    if (thought) {
      out.reasoning += thought;
      onChunk(thought, "reasoning");
    }
    const piece = choice?.delta?.content;
    if (piece) {
      out.content += piece;
      onChunk(piece, "content");
    }
    if (choice?.finish_reason) out.finish = choice.finish_reason;
    if (chunk.session) out.session = chunk.session;
    if (chunk.seed !== undefined) out.seed = chunk.seed;
    if (chunk.usage) out.usage = chunk.usage;
  });
  return out;
}

let canCount = true; // false once the server showed it has no /apply-template or /tokenize

/**
 * How many tokens `messages` take as the model reads them (the chat template, then the tokenizer), or
 * null when the server cannot say (an older server without /apply-template and /tokenize).
 */
export async function countTokens(messages, signal) {
  if (!canCount) return null;
  try {
    const { prompt } = await (await post("/apply-template", { messages }, signal)).json();
    const { tokens } = await (await post("/tokenize", { content: prompt }, signal)).json();
    return Array.isArray(tokens) ? tokens.length : null;
  } catch (e) {
    if (e.name === "AbortError") throw e;
    if (e.status === 404 || e.status === 405) canCount = false;
    return null;
  }
}

/**
 * Where the saved session `id` downloads from: its URL, which a link downloads directly; with an API key
 * (which a link cannot send) a `blob:` URL of the bytes, fetched with the key. Rejects with ApiError.
 */
export async function sessionUrl(id) {
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  if (!apiKey()) return path;
  const res = await send(path);
  if (!res.ok) throw await refusal(res);
  return URL.createObjectURL(await res.blob());
}

/** Uploads a saved session file: resolves to `{ id, tokens, messages }`; rejects with ApiError. */
export async function uploadSession(file) {
  const res = await send("/v1/sessions", { method: "POST", body: file });
  if (!res.ok) throw await refusal(res);
  return await res.json();
}

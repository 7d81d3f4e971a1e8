// The chat page: plain JavaScript, served as it is. It keeps the conversation as OpenAI messages, sends
// the whole of it with the id of the session saved after the last reply (the server then reads only the
// new turn), and streams the reply from /v1/chat/completions as server-sent events.
"use strict";

const $ = (id) => document.getElementById(id);
const log = $("log"), prompt = $("prompt"), send = $("send"), stop = $("stop"), stats = $("stats");

let messages = [];
let session = null; // the id of the state after the last complete reply
let running = null; // the AbortController of the reply being streamed
let engineKind = "?";

async function loadModel() {
  try {
    const res = await fetch("/v1/models");
    const model = (await res.json()).data[0];
    engineKind = model.engine;
    $("model").textContent = `${model.id} · ${model.engine} engine · context ${model.context_length}`;
  } catch {
    $("model").textContent = "server unreachable";
  }
}

function bubble(role, text) {
  const li = document.createElement("li");
  li.className = role;
  li.textContent = text;
  log.append(li);
  $("empty").hidden = true;
  li.scrollIntoView({ block: "end" });
  return li;
}

function render() {
  log.replaceChildren();
  for (const m of messages) bubble(m.role, m.content);
  $("empty").hidden = messages.length > 0;
  $("save").disabled = session === null;
}

function setRunning(on) {
  log.setAttribute("aria-busy", String(on)); // screen readers read the reply once, not token by token
  send.disabled = on;
  stop.disabled = !on;
  $("restore").disabled = on;
  $("new").disabled = on;
  if (!on) prompt.focus();
}

function numberField(id) {
  const v = $(id).value.trim();
  return v === "" ? undefined : Number(v);
}

/** Reads an SSE body and calls onData with each `data:` payload. */
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

async function ask(text) {
  messages.push({ role: "user", content: text });
  bubble("user", text);
  const reply = { role: "assistant", content: "" };
  const li = bubble("assistant", "");
  li.classList.add("streaming");
  running = new AbortController();
  setRunning(true);
  const t0 = performance.now();
  let first = 0, tokens = 0, finish = null;
  const show = () => {
    const secs = (performance.now() - (first || t0)) / 1000;
    const rate = tokens > 1 && secs > 0 ? ((tokens - 1) / secs).toFixed(1) : "–";
    stats.textContent = `${tokens} tokens · ${rate} tok/s · ${engineKind}${finish ? "" : " · generating"}`;
  };
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        messages: messages.slice(),
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: numberField("max-tokens"),
        temperature: numberField("temperature"),
        min_p: numberField("min-p"),
        seed: numberField("seed"),
        session: session ?? undefined,
        save_session: true,
      }),
      signal: running.signal,
    });
    if (!res.ok) throw new Error((await res.json()).error?.message ?? res.statusText);
    await readEvents(res.body, (data) => {
      if (data === "[DONE]") return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const choice = chunk.choices[0];
      if (choice?.delta?.content) {
        if (!first) first = performance.now();
        tokens++;
        reply.content += choice.delta.content;
        li.textContent = reply.content;
        li.scrollIntoView({ block: "end" });
      }
      if (choice?.finish_reason) finish = choice.finish_reason;
      if (chunk.session) session = chunk.session;
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      show();
    });
  } catch (e) {
    if (e.name === "AbortError") finish = "stopped";
    else {
      finish = "error";
      stats.textContent = `error: ${e.message}`;
      stats.classList.add("error");
    }
  } finally {
    messages.push(reply);
    li.classList.remove("streaming");
    running = null;
    setRunning(false);
    if (finish !== "error") {
      stats.classList.remove("error");
      show();
      if (finish === "stopped") stats.textContent += " · stopped";
    }
    $("save").disabled = session === null;
  }
}

$("ask").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = prompt.value.trim();
  if (!text || running) return;
  prompt.value = "";
  ask(text);
});

prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("ask").requestSubmit();
  }
});

document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && running) running.abort();
});
stop.addEventListener("click", () => running?.abort());

$("save").addEventListener("click", () => {
  if (!session) return;
  const a = document.createElement("a");
  a.href = `/v1/sessions/${session}`;
  a.download = `ferry-${session}.session`;
  document.body.append(a);
  a.click();
  a.remove();
  stats.textContent = "session saved to your downloads";
});

$("restore").addEventListener("change", async (e) => {
  const file = e.target.files[0];
  e.target.value = "";
  if (!file) return;
  const res = await fetch("/v1/sessions", { method: "POST", body: file });
  const body = await res.json();
  if (!res.ok) {
    stats.textContent = `restore refused: ${body.error.message}`;
    stats.classList.add("error");
    return;
  }
  stats.classList.remove("error");
  session = body.id;
  messages = body.messages;
  render();
  stats.textContent = `session restored: ${body.tokens} tokens`;
  prompt.focus();
});

$("new").addEventListener("click", () => {
  messages = [];
  session = null;
  render();
  stats.textContent = "ready";
  prompt.focus();
});

loadModel();
prompt.focus();

// How one message of the log is shown: a reply as sanitized Markdown, the user's text as typed, a
// notice when older turns were dropped, a failed turn's error with Retry, the reply's stats, and the
// actions (Copy, Edit, Regenerate, Use seed). Plain DOM, no state: chat.js passes the handlers.
import { copyText, renderInto } from "./markdown.js";

/** A button with a visible `label`, and `title` as its accessible name and tooltip when given. */
export function button(label, onClick, title) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (title) {
    b.setAttribute("aria-label", title);
    b.title = title;
  }
  b.addEventListener("click", onClick);
  return b;
}

/** The line under a reply: token counts, speed, the seed it was drawn with. */
export function statsText(s) {
  const parts = [`${s.tokens} tokens`];
  if (s.tps) parts.push(`${s.tps} tok/s`);
  if (s.promptTokens !== undefined) parts.push(`${s.promptTokens} prompt tokens`);
  if (s.seed !== undefined) parts.push(`seed ${s.seed}`);
  if (s.finish === "stopped") parts.push("stopped");
  if (s.finish === "length") parts.push("cut at max tokens");
  return parts.join(" · ");
}

function messageActions(m, li, on) {
  const bar = document.createElement("div");
  bar.className = "actions";
  if (m.content !== "") bar.append(button("Copy", (e) => copyText(m.content, e.target), "Copy message"));
  if (m.role === "user") bar.append(button("Edit", () => on.edit(li), "Edit and resend"));
  if (m.role === "assistant" && on.last && !m.error) {
    bar.append(button("Regenerate", () => on.regenerate(), "Regenerate this reply"));
  }
  if (m.stats?.seed !== undefined) {
    bar.append(button("Use seed", () => on.useSeed(m.stats.seed), `Use seed ${m.stats.seed}`));
  }
  return bar;
}

/**
 * The list item for message `m`: its notice, content, error with Retry, stats and actions. `on` holds
 * `last` (whether it is the newest message) and the actions' handlers: edit(li), regenerate(),
 * useSeed(seed).
 */
/**
 * Shows a reply's thinking (`reasoning_content`) folded in a `<details>` above its content, creating
 * the fold on the first piece.
 */
export function reasoningInto(li, text) {
  let fold = li.querySelector("details.reasoning");
  if (!fold) {
    fold = document.createElement("details");
    fold.className = "reasoning";
    const summary = document.createElement("summary");
    summary.textContent = "Reasoning";
    const body = document.createElement("div");
    body.className = "reasoning-text";
    fold.append(summary, body);
    li.querySelector(".content").before(fold);
  }
  fold.querySelector(".reasoning-text").textContent = text;
}

export function messageItem(m, on) {
  const li = document.createElement("li");
  li.className = `message ${m.role}`;
  if (m.dropped) {
    const note = document.createElement("p");
    note.className = "notice";
    note.setAttribute("role", "note");
    note.textContent = `The oldest ${m.dropped} turn${m.dropped === 1 ? " was" : "s were"} dropped ` +
      "to fit the model's context.";
    li.append(note);
  }
  const content = document.createElement("div");
  content.className = "content";
  if (m.role === "assistant") renderInto(content, m.content);
  else content.textContent = m.content;
  li.append(content);
  if (m.role === "assistant" && m.reasoning) reasoningInto(li, m.reasoning);
  if (m.error) {
    const err = document.createElement("p");
    err.className = "error";
    err.setAttribute("role", "alert");
    err.textContent = m.error + " ";
    err.append(button("Retry", () => on.regenerate(), "Retry this turn"));
    li.append(err);
  }
  if (m.stats) {
    const meta = document.createElement("p");
    meta.className = "meta";
    meta.textContent = statsText(m.stats);
    li.append(meta);
  }
  if (!m.streaming) li.append(messageActions(m, li, on));
  else li.classList.add("streaming");
  return li;
}

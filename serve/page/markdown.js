// Model replies as Markdown, made safe: marked turns the text into HTML and DOMPurify removes anything
// that could run (scripts, event handlers, javascript: links) before it reaches the page. A reply is
// untrusted text: a model can write `<img onerror=...>` as easily as prose. The bare names resolve through
// index.html's import map to the files serve/routes/page.ts serves from node_modules.
import { Marked } from "marked";
import DOMPurify from "dompurify";

const marked = new Marked({ gfm: true, breaks: true });

/** `text` (Markdown) as sanitized HTML. */
export function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text), { USE_PROFILES: { html: true } });
}

/** Fills `el` with `text` rendered as Markdown, each code block with a Copy button. */
export function renderInto(el, text) {
  el.innerHTML = renderMarkdown(text);
  for (const pre of el.querySelectorAll("pre")) {
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy-code";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy code");
    copy.addEventListener("click", () => copyText(pre.querySelector("code")?.textContent ?? "", copy));
    pre.append(copy);
  }
}

/** Copies `text` to the clipboard and says so on `button` for a moment. */
export async function copyText(text, button) {
  try {
    await navigator.clipboard.writeText(text);
    button.textContent = "Copied";
  } catch {
    button.textContent = "Copy failed";
  }
  setTimeout(() => (button.textContent = "Copy"), 1500);
}

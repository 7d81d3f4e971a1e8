/**
 * A checkpoint's own chat template: the Jinja text in `chat_template.jinja` (which wins when present)
 * or in tokenizer_config.json's `chat_template`, rendered with `@huggingface/jinja` (the Jinja
 * transformers.js renders templates with) the way transformers' `apply_chat_template` does: the
 * messages, `add_generation_prompt`, the special-token strings templates expect (`bos_token`,
 * `eos_token`, `pad_token`, `unk_token`; the library provides `raise_exception`), and any `chat_template_kwargs`
 * (`enable_thinking: false` for Qwen3). A template that does not parse, or fails while rendering, is
 * refused with a `FormatError` naming the file and the field it came from.
 *
 * @example
 * ```ts
 * import { chatTemplateOf } from "./chat-template.ts";
 * import type { TokenizerFiles } from "./tokenizer-types.ts";
 * declare const files: TokenizerFiles; // the tokenizer files of a Qwen3 folder
 * const template = chatTemplateOf(files, "models/qwen3/");
 * template?.render([{ role: "user", content: "Hi" }], { kwargs: { enable_thinking: false } });
 * // "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
 * ```
 * @module
 */
import { Template } from "@huggingface/jinja";
import { FormatError, type FormatRefusal, messageWithoutCode } from "./error.ts";
import type { TokenizerFiles } from "./tokenizer-types.ts";

/** One message as templates read it; `reasoning_content` is an assistant's thinking, when it had one. */
export interface TemplateMessage {
  role: string;
  content: string;
  reasoning_content?: string;
}

/** How one conversation is rendered. */
export interface RenderOptions {
  /** End with the opening of the assistant's turn, for the model to write it (default true). */
  addGenerationPrompt?: boolean;
  /** Further template variables (`chat_template_kwargs`), e.g. `{ enable_thinking: false }`. */
  kwargs?: Readonly<Record<string, unknown>>;
}

/** A parsed chat template and where it came from. */
export interface ChatTemplate {
  /** The file (`where` + name) and the field the template text was read from. */
  readonly file: string;
  readonly field: string;
  /**
   * Whether the template reads `enable_thinking` (Qwen3's switch between a think block and an empty one),
   * so a chat can offer the switch. Read off the template's text: a variable it never names is never read.
   */
  readonly thinkingSwitch: boolean;
  /** The prompt text for `messages` (a `FormatError` naming `file` and `field` when rendering fails). */
  render(messages: readonly TemplateMessage[], options?: RenderOptions): string;
}

type Json = Record<string, unknown>;

/** A special token's string in tokenizer_config.json: a string or an AddedToken object's `content`. */
function tokenString(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "object" && v !== null && typeof (v as Json).content === "string") {
    return (v as Json).content as string;
  }
  return undefined;
}

function templateError(
  code: FormatRefusal,
  file: string,
  field: string,
  what: string,
  e: unknown,
): FormatError {
  return new FormatError(file, code, field, `${file}: ${field}: ${what}: ${messageWithoutCode(e)}`, {
    expected: "a Jinja chat template",
  });
}

/** The template text and its origin, or undefined when the files carry none. */
function templateSource(
  files: TokenizerFiles,
  where: string,
): { text: string; file: string; field: string; config: Json } | undefined {
  let config: Json = {};
  const configFile = `${where}tokenizer_config.json`;
  if (files["tokenizer_config.json"] !== undefined) {
    try {
      config = JSON.parse(files["tokenizer_config.json"]);
    } catch (e) {
      throw templateError("InvalidJson", configFile, "(whole file)", "not JSON", e);
    }
  }
  const jinja = files["chat_template.jinja"];
  if (jinja !== undefined) {
    return { text: jinja, file: `${where}chat_template.jinja`, field: "(whole file)", config };
  }
  const t = config.chat_template;
  if (t === undefined || t === null) return undefined;
  if (typeof t === "string") return { text: t, file: configFile, field: "chat_template", config };
  // transformers also allows a list of named templates; the one named "default" is the chat's.
  if (Array.isArray(t)) {
    const named = t.find((x) => x?.name === "default");
    if (typeof named?.template === "string") {
      return { text: named.template, file: configFile, field: "chat_template", config };
    }
  }
  throw new FormatError(
    configFile,
    "InvalidTemplate",
    "chat_template",
    `${configFile}: chat_template: expected a string`,
    {
      expected: "a string, or a list of {name, template} with one named default",
      found: JSON.stringify(t).slice(0, 80),
    },
  );
}

/**
 * The chat template a model's tokenizer files carry, parsed, or undefined when they carry none (then
 * the model is prompted as a plain transcript). `where` is the folder or export the files came from,
 * ending in `/` or `:` (it prefixes the file names in refusals).
 *
 * @example
 * ```ts
 * import { chatTemplateOf } from "./chat-template.ts";
 * chatTemplateOf({ "tokenizer.json": "{}", "chat_template.jinja": "{{ messages[0].content }}" }, "m/")
 *   ?.render([{ role: "user", content: "Hi" }]); // "Hi"
 * ```
 */
export function chatTemplateOf(files: TokenizerFiles | undefined, where: string): ChatTemplate | undefined {
  if (files === undefined) return undefined;
  const source = templateSource(files, where);
  if (!source) return undefined;
  const { file, field, config } = source;
  let template: Template;
  try {
    template = new Template(source.text);
  } catch (e) {
    throw templateError("InvalidTemplate", file, field, "does not parse", e);
  }
  const specials: Json = {};
  for (const name of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
    const s = tokenString(config[name]);
    if (s !== undefined) specials[name] = s;
  }
  return {
    file,
    field,
    thinkingSwitch: /\benable_thinking\b/.test(source.text),
    render(messages, options = {}) {
      try {
        return template.render({
          ...specials,
          ...options.kwargs,
          // A field left undefined is absent, as it is in transformers (templates test `is defined`).
          messages: messages.map((m) =>
            Object.fromEntries(Object.entries(m).filter(([, v]) => v !== undefined))
          ),
          add_generation_prompt: options.addGenerationPrompt ?? true,
        });
      } catch (e) {
        throw templateError("InvalidTemplate", file, field, "does not render", e);
      }
    },
  };
}

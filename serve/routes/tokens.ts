/**
 * llama.cpp's text utilities, through the model's tokenizer: `POST /tokenize` (`{content, add_special?,
 * parse_special?, with_pieces?}` → `{tokens}`), `POST /detokenize` (`{tokens}` → `{content}`) and
 * `POST /apply-template` (`{messages, chat_template_kwargs?}` → `{prompt}`, exactly the text a chat
 * request feeds: the model's template rendered, or the transcript of serve/chat/transcript.ts after BOS).
 *
 * `with_pieces` gives each token's text when its bytes are whole UTF-8 characters (a special token: its
 * name) and, as llama.cpp does for pieces that are not valid UTF-8, the list of its byte values
 * otherwise: on a byte model every non-ASCII byte is such a list.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { tokenRoutes } from "./tokens.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext;
 * declare function post(path: string, body: unknown): Promise<unknown>; // POSTs JSON to app, reads JSON back
 * const app = new Hono();
 * app.route("/", tokenRoutes(ctx));
 * await post("/tokenize", { content: "Hi", add_special: true }); // { tokens: [256, 72, 105] } on a byte model
 * ```
 * @module
 */
import { Hono } from "hono";
import { limitBody, readJson } from "../body.ts";
import type { ServerContext } from "../context.ts";
import { invalidValue } from "../errors.ts";
import { readChatRequest } from "../openai/requests.ts";
import { chatText } from "../chat/chat-prompt.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { ROUTES } from "./table.ts";

const { tokenize, detokenize, applyTemplate } = ROUTES;

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw invalidValue("body", "a JSON object", body);
  }
  return body as Record<string, unknown>;
}

function flag(o: Record<string, unknown>, field: string, fallback = false): boolean {
  const v = o[field] ?? fallback;
  if (typeof v !== "boolean") throw invalidValue(field, "true or false", v);
  return v;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A token as llama.cpp's `with_pieces` shows it. */
function piece(tokenizer: Tokenizer, id: number): string | number[] {
  if (tokenizer.specials.includes(id)) return tokenizer.tokenText(id);
  const bytes = tokenizer.tokenBytes(id);
  try {
    return strictUtf8.decode(bytes);
  } catch {
    return [...bytes];
  }
}

/** The tokenizer routes. */
export function tokenRoutes(ctx: ServerContext): Hono {
  const limit = limitBody(ctx.maxBodyBytes, "request body");
  const { tokenizer } = ctx;
  return new Hono()
    .on(tokenize.methods, tokenize.path, limit, async (c) => {
      const o = object(await readJson(c));
      if (typeof o.content !== "string") throw invalidValue("content", "a string", o.content);
      const tokens = tokenizer.encode(o.content, {
        bos: flag(o, "add_special"),
        specials: flag(o, "parse_special", true),
      });
      const withPieces = flag(o, "with_pieces");
      return c.json({
        tokens: withPieces ? tokens.map((id) => ({ id, piece: piece(tokenizer, id) })) : tokens,
      });
    })
    .on(detokenize.methods, detokenize.path, limit, async (c) => {
      const o = object(await readJson(c));
      const t = o.tokens;
      // Ids past the tokenizer's (Qwen3's padding up to its vocab) stand for no text.
      if (!Array.isArray(t) || !t.every((id) => Number.isInteger(id) && id >= 0 && id < tokenizer.size)) {
        throw invalidValue("tokens", `an array of token ids in [0, ${tokenizer.size})`, t);
      }
      return c.json({ content: tokenizer.decode(t) });
    })
    .on(applyTemplate.methods, applyTemplate.path, limit, async (c) => {
      const { messages, templateKwargs } = readChatRequest(object(await readJson(c)));
      return c.json({ prompt: chatText(ctx, messages, templateKwargs) });
    });
}

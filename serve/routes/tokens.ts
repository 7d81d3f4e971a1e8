/**
 * llama.cpp's text utilities: `POST /tokenize` (`{content, add_special?, with_pieces?}` → `{tokens}`),
 * `POST /detokenize` (`{tokens}` → `{content}`) and `POST /apply-template` (`{messages}` → `{prompt}`,
 * exactly the text a chat request feeds after BOS: serve/transcript.ts).
 *
 * The model's tokens are bytes, so a piece is one byte: `with_pieces` gives it as a string when the
 * byte is a character on its own (ASCII) and, as llama.cpp does for pieces that are not valid UTF-8, as
 * a list of byte values otherwise.
 *
 * @example
 * ```ts
 * app.route("/", tokenRoutes(ctx));
 * await post("/tokenize", { content: "Hi", add_special: true }); // { tokens: [256, 72, 105] }
 * ```
 * @module
 */
import { Hono } from "hono";
import { limitBody, readJson } from "../body.ts";
import type { ServerContext } from "../context.ts";
import { invalidValue } from "../errors.ts";
import { readChatRequest } from "../requests.ts";
import { BOS, BOS_TOKEN, decode, encode, EOS, EOS_TOKEN } from "../../model/tokenizer.ts";
import { renderChat } from "../transcript.ts";

function object(body: unknown): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw invalidValue("body", "a JSON object", body);
  }
  return body as Record<string, unknown>;
}

function flag(o: Record<string, unknown>, field: string): boolean {
  const v = o[field] ?? false;
  if (typeof v !== "boolean") throw invalidValue(field, "true or false", v);
  return v;
}

/** A token as llama.cpp's `with_pieces` shows it. */
function piece(id: number): string | number[] {
  if (id === BOS) return BOS_TOKEN;
  if (id === EOS) return EOS_TOKEN;
  return id < 0x80 ? String.fromCharCode(id) : [id];
}

/** The tokenizer routes. */
export function tokenRoutes(ctx: ServerContext): Hono {
  const limit = limitBody(ctx.maxBodyBytes, "request body");
  const vocab = ctx.engine.config.vocab_size;
  return new Hono()
    .post("/tokenize", limit, async (c) => {
      const o = object(await readJson(c));
      if (typeof o.content !== "string") throw invalidValue("content", "a string", o.content);
      const tokens = encode(o.content, { bos: flag(o, "add_special") });
      const withPieces = flag(o, "with_pieces");
      return c.json({ tokens: withPieces ? tokens.map((id) => ({ id, piece: piece(id) })) : tokens });
    })
    .post("/detokenize", limit, async (c) => {
      const o = object(await readJson(c));
      const t = o.tokens;
      if (!Array.isArray(t) || !t.every((id) => Number.isInteger(id) && id >= 0 && id < vocab)) {
        throw invalidValue("tokens", `an array of token ids in [0, ${vocab})`, t);
      }
      return c.json({ content: decode(t) });
    })
    .post("/apply-template", limit, async (c) => {
      const { messages } = readChatRequest(object(await readJson(c)));
      return c.json({ prompt: renderChat(messages) });
    });
}

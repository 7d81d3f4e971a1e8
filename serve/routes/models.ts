/**
 * `GET /v1/models`: the one model this server serves, in OpenAI's list shape, with ferry's own fields
 * (the engine, the context length, whether sessions can be saved).
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { modelRoutes } from "./models.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext;
 * const app = new Hono();
 * app.route("/v1", modelRoutes(ctx));
 * (await (await app.request("/v1/models")).json()).data[0].id; // "ferry.q4.lut4"
 * ```
 * @module
 */
import { Hono } from "hono";
import type { ServerContext } from "../context.ts";
import { ROUTES } from "./table.ts";

const { models } = ROUTES;

/** The model route, relative to `/v1`. */
export function modelRoutes(ctx: ServerContext): Hono {
  return new Hono().on(models.methods, models.path, (c) =>
    c.json({
      object: "list",
      data: [{
        id: ctx.modelId,
        object: "model",
        created: 0,
        owned_by: "ferry",
        // ferry's own fields: what serves the model and how much context it has.
        engine: ctx.engine.kind,
        context_length: ctx.contextLength,
        sessions: ctx.sessions !== undefined,
        // `byte` or `bpe`, and whether chats are rendered with the model's own template.
        tokenizer: ctx.tokenizer.kind,
        chat_template: ctx.template !== undefined,
        // Whether the template takes chat_template_kwargs.enable_thinking (Qwen3's think block on or off).
        thinking_switch: ctx.template?.thinkingSwitch ?? false,
      }],
    }));
}

/**
 * The model as the chat server's own thread sees it when the model lives in the slot workers: the server
 * (scripts/chat.ts) loads no weights on the thread that does HTTP, so every copy of them is a slot's.
 * The first worker to load says what the thread needs (`SlotModel`): the engine's kind, config and
 * context, the loader's notes, and a fresh session's bytes, whose header names the shape of every
 * session of this model. `slotModelEngine` makes that an `Engine` for the routes: the tokenizer the
 * thread built, and `restore` checking a stored or uploaded session whole, as the engine's own restore
 * would, and holding it as bytes for a slot to continue (`save()` gives them back). Nothing runs on it:
 * its sessions are only carried to a slot.
 *
 * @example
 * ```ts
 * import { slotModelEngine } from "./slot-model.ts";
 * import type { SlotModel } from "./slot-model.ts";
 * import type { Tokenizer } from "../../model/tokenizer-types.ts";
 * declare const model: SlotModel, tokenizer: Tokenizer, bytes: Uint8Array;
 * const engine = slotModelEngine(model, "out/ferry.q4.lut4", tokenizer);
 * engine.restore!(bytes, "uploaded session").position; // checked whole, or a SessionError
 * ```
 * @module
 */
import type { ModelConfig } from "../../model/config.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import { FormatError, type FormatRefusal } from "../../model/error.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { checkEngineSession, sessionShapeOf } from "../../formats/session/session.ts";

/** What a slot worker reports of the model it loaded (serve/slots/slot-worker.ts, message `ready`). */
export interface SlotModel {
  kind: string;
  config: ModelConfig;
  context?: number;
  /** A fresh session's bytes; absent where the engine cannot save sessions. */
  probe?: Uint8Array;
  /** The loader's lines for the user (e.g. "quantized … to lut4 on load"). */
  notes: string[];
  /** The weights for the other slots to attach to (the engine's `shareable`), where it shares them. */
  shareable?: unknown;
  /** The engine's `weightBytes`. */
  weightBytes?: number;
}

/**
 * A load's failure as data (message `failed`): `format` where it was a `FormatError`, with its class's
 * name, code and parts, and `message` then its sentence without the code.
 */
export interface SlotRefusal {
  message: string;
  format?: { name: string; code: string; path: string; field: string; expected: string; found: string };
}

/**
 * The error a refusal was: a `FormatError` again where it was one (a CLI exits 1 on it), with the same
 * message, code, file and field and its class's name, else an `Error`.
 */
export function refusalError(r: SlotRefusal): Error {
  if (!r.format) return new Error(r.message);
  const { name, code, path, field, expected, found } = r.format;
  // The code is the worker's class's own (its table's), which FormatError's own table need not hold.
  const e = new FormatError(path, code as FormatRefusal, field, r.message, { expected, found });
  e.name = name;
  return e;
}

/** The model of `source`, loaded in the slot workers, as an `Engine` for the server's routes. */
export function slotModelEngine(model: SlotModel, source: string, tokenizer: Tokenizer): Engine {
  const shape = model.probe && sessionShapeOf(model.probe);
  const context = model.context ?? model.config.max_position_embeddings;
  const engine: Engine = {
    kind: model.kind,
    config: model.config,
    source,
    context: model.context,
    tokenizer,
    weightBytes: model.weightBytes,
    start(): EngineSession {
      throw new Error("the model runs in the slot workers: a conversation starts on a slot");
    },
  };
  if (!shape) return engine;
  return {
    ...engine,
    restore(bytes: Uint8Array, where = "session"): EngineSession {
      const { position, tokens } = checkEngineSession(model.kind, bytes, shape, where);
      if (position > context) {
        throw new RangeError(
          `${where}: the session holds ${position} positions, more than the context of ${context}`,
        );
      }
      return carriedSession(bytes, position, tokens);
    },
  };
}

/** A checked session held as its bytes until a slot restores it: where it stands, and nothing to run. */
function carriedSession(bytes: Uint8Array, position: number, tokens: readonly number[]): EngineSession {
  const elsewhere = (): never => {
    throw new Error("this session runs on a slot: it is carried there as bytes");
  };
  return {
    position,
    tokens,
    feed: elsewhere,
    pick: elsewhere,
    seed: elsewhere,
    logprobs: elsewhere,
    save: () => bytes,
  };
}

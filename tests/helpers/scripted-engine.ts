// The scripted engine of the page and server tests: greedy output the test chooses, so a test can ask for
// a reply with Markdown, a script tag or a given length without depending on what the trained model
// happens to write. Kept apart from tests/helpers/browser.ts so that a Deno child (which does not resolve
// playwright-core, an optional dependency) can import it.
import type { ModelConfig } from "../../model/config.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import { byteTokenizer, decode, encode, EOS } from "../../model/tokenizer.ts";

/**
 * A scripted engine: `delayMs` slows each fed token by waiting (the thread is free meanwhile), `busyMs`
 * by computing (the thread is held, as a real engine holds it); `replies` counts the replies begun.
 */
export interface ScriptedEngine extends Engine {
  delayMs: number;
  busyMs: number;
  replies: number;
}

/**
 * An engine that answers `reply(prompt)` (the text fed so far, BOS dropped) and then EOS, whatever the
 * sampling options. With `sessions`, it saves and restores sessions as the JSON of their tokens.
 */
export function scriptedEngine(
  reply: (prompt: string) => string,
  opts: { contextLength?: number; sessions?: boolean } = {},
): ScriptedEngine {
  const config = { max_position_embeddings: opts.contextLength ?? 512, vocab_size: 258 } as ModelConfig;
  const engine: ScriptedEngine = {
    kind: "scripted",
    config,
    source: "scripted.stub",
    tokenizer: byteTokenizer,
    delayMs: 0,
    busyMs: 0,
    replies: 0,
    start: () => session([]),
  };
  function session(tokens: number[]): EngineSession {
    let plan: number[] | null = null;
    return {
      get position() {
        return tokens.length;
      },
      tokens,
      async feed(ids) {
        tokens.push(...ids);
        if (engine.delayMs) await new Promise((r) => setTimeout(r, engine.delayMs));
        for (const end = performance.now() + engine.busyMs; performance.now() < end;) { /* computing */ }
        return new Float32Array(0);
      },
      pick() {
        if (!plan) {
          engine.replies++;
          plan = [...encode(reply(decode(tokens))), EOS];
        }
        const id = plan.shift()!;
        if (plan.length === 0) plan = null;
        return id;
      },
      seed() {},
      ...(opts.sessions ? { save: () => new TextEncoder().encode(JSON.stringify(tokens)) } : {}),
    };
  }
  if (opts.sessions) {
    engine.restore = (bytes) => session(JSON.parse(new TextDecoder().decode(bytes)));
  }
  return engine;
}

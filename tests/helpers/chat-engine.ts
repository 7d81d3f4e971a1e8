// A stand-in Engine for the chat tests until the float engine (model/float-engine.ts) lands: the real
// float forward pass over the shipped checkpoint's weights, with a seeded sampler, and sessions saved as
// JSON (tokens + sampler state) and restored by re-feeding the tokens (prefill gives the same bits).
import { readCheckpoint } from "../../formats/checkpoint.ts";
import type { Engine, EngineSession, SamplingOptions } from "../../model/engine.ts";
import { buildModel, createCache, forward, type Model } from "../../model/qwen3.ts";
import { createRng } from "../../model/random.ts";
import { sampleToken } from "../../model/sample.ts";

export async function loadTestEngine(path = "model/default/ferry.ckpt"): Promise<Engine> {
  const run = await readCheckpoint(path, { sections: ["model"] });
  const model = buildModel(run.config, run.model);
  const engine: Engine = {
    kind: "float",
    config: model.config,
    source: "ferry.test",
    start: () => startSession(model),
    restore(bytes) {
      const saved = JSON.parse(new TextDecoder().decode(bytes));
      if (saved.model !== "ferry.test") throw new Error("session for another model");
      const s = startSession(model, saved.rng);
      if (saved.tokens.length) s.feedSync(saved.tokens);
      return s;
    },
  };
  return engine;
}

function startSession(model: Model, rngState?: number[]): EngineSession & { feedSync(t: number[]): void } {
  const V = model.config.vocab_size;
  const cache = createCache(model);
  const tokens: number[] = [];
  let rng = createRng(rngState ?? 0);
  let pending: Float32Array | undefined;
  const feedSync = (t: number[]) => {
    const all = forward(model, cache, t);
    tokens.push(...t);
    pending = all.slice(all.length - V);
  };
  return {
    get position() {
      return tokens.length;
    },
    get tokens() {
      return tokens;
    },
    feedSync,
    feed(t) {
      feedSync([...t]);
      return Promise.resolve(pending!);
    },
    pick(o: SamplingOptions = {}) {
      if (!pending) throw new Error("nothing fed");
      return sampleToken(pending, 0, V, o.temperature ?? 0, o.topP ?? 1, rng);
    },
    seed(n) {
      rng = createRng(n);
    },
    save: () => new TextEncoder().encode(JSON.stringify({ model: "ferry.test", tokens, rng: rng.state() })),
  };
}

// A prompt fed in pieces (model/generate.ts `promptPiece`, as the chat server feeds it: serve/slots/generation.ts
// PROMPT_PIECE) leaves the session exactly as one feed does, on the float and the integer engine; and a
// stop while a prompt is read is heard within one piece (serve/slots/generation.ts).
import { describe, expect, test } from "bun:test";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine } from "../../model/engine.ts";
import { generateAll } from "../../model/generate.ts";
import { encode } from "../../model/tokenizer.ts";
import { generateReply, PROMPT_PIECE } from "../../serve/slots/generation.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";

const PROMPT = encode("The jury said it did find that many of the registration practices were ".repeat(3), {
  bos: true,
});

const engines: Array<[string, () => Promise<Engine>]> = [
  ["float", async () => loadEngine(await smallLut4(), "float")],
  ["int", async () => loadEngine(await smallLut4(), "int")],
];

for (const [kind, load] of engines) {
  describe(`the ${kind} engine`, () => {
    test("a prompt fed in pieces of 1, 5, 16 or 64 tokens: the same tokens and the same saved state", async () => {
      const engine = await load();
      const opts = { maxTokens: 16, temperature: 0.8, topK: 40, seed: 5 };
      const whole = engine.start();
      const want = await generateAll(engine, PROMPT, { ...opts, session: whole });
      for (const piece of [1, 5, 16, 64]) {
        const s = engine.start();
        const told: number[] = [];
        const onPrompt = (fed: number) => void told.push(fed);
        expect(await generateAll(engine, PROMPT, { ...opts, session: s, promptPiece: piece, onPrompt }))
          .toEqual(want);
        expect(s.save!()).toEqual(whole.save!());
        expect(told.at(-1)).toBe(PROMPT.length);
        expect(told.length).toBe(Math.ceil(PROMPT.length / piece));
      }
    });
  });
}

test("a stop while the prompt is read ends the reply within one piece, as an abort", async () => {
  const engine = await loadEngine(await smallLut4(), "float");
  const session = engine.start();
  const fed: number[] = [];
  const feed = session.feed.bind(session);
  const stop = new AbortController();
  session.feed = (tokens, wanted) => {
    fed.push(tokens.length);
    if (fed.length === 1) stop.abort(); // the user presses Stop during the first piece
    return feed(tokens, wanted);
  };
  const long = [...PROMPT, ...PROMPT, ...PROMPT].slice(0, 3 * PROMPT_PIECE);
  const r = await generateReply(engine, session, long, { maxTokens: 8, sampling: {}, signal: stop.signal });
  expect(r.finishReason).toBe("abort");
  expect(r.completionTokens).toBe(0);
  expect(fed).toEqual([PROMPT_PIECE]);
  expect(session.position).toBe(PROMPT_PIECE);
});

test("a budget of 0 reads the prompt and generates nothing; one the context cuts to 0 reads nothing", async () => {
  const engine = await loadEngine(await smallLut4(), "int");
  const read = engine.start(), whole = engine.start();
  expect(await generateAll(engine, PROMPT, { maxTokens: 0, session: read, promptPiece: 16 })).toEqual([]);
  await whole.feed(PROMPT, "none");
  expect(read.position).toBe(PROMPT.length);
  expect(read.save!()).toEqual(whole.save!());
  // A prompt that fills the context exactly leaves no room for a token: nothing is fed.
  const small = await loadEngine(await smallLut4(), "int", { context: PROMPT.length });
  const full = small.start();
  expect(await generateAll(small, PROMPT, { maxTokens: 4, session: full })).toEqual([]);
  expect(full.position).toBe(0);
});

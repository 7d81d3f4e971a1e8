// `return_progress` (llama.cpp's name): a streamed reply tells how far its prompt has been read, a
// `prompt_progress` chunk after each piece of 64 tokens (serve/slots/generation.ts PROMPT_PIECE), in order,
// before the first text; a prompt partly held by the slot counts the held part as cached and processed.
import { expect, test } from "bun:test";
import { loadEngine } from "../../engines/mod.ts";
import { createApp } from "../../serve/app.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";

const PROMPT = "The jury said it did find that many of the registration practices were ambiguous. ".repeat(3);

/** The `data:` payloads of a streamed reply, [DONE] left out. */
async function events(res: Response): Promise<Record<string, unknown>[]> {
  const text = await res.text();
  return text.split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
}

test("prompt_progress chunks count the prompt's tokens up to its length, then the text comes", async () => {
  const app = createApp({ engine: await loadEngine(await smallLut4()) });
  const ask = (prompt: string, progress: boolean) =>
    app.request("/v1/completions", {
      method: "POST",
      body: JSON.stringify({
        prompt,
        max_tokens: 4,
        temperature: 0,
        stream: true,
        return_progress: progress,
      }),
    }).then(events);
  const first = await ask(PROMPT, true);
  const told = first.filter((e) => e.prompt_progress).map((e) => e.prompt_progress as Record<string, number>);
  const total = PROMPT.length + 1; // a byte per token, and the BOS
  expect(told.map((p) => p.processed)).toEqual([64, 128, 192, total]);
  expect(told.every((p) => p.total === total && p.cache === 0 && p.time_ms >= 0)).toBe(true);
  const firstText = first.findIndex((e) => (e.choices as unknown[]).length > 0);
  expect(firstText).toBeGreaterThan(first.findLastIndex((e) => e.prompt_progress));
  // The same prompt and more: the slot holds the first, so only the rest is read.
  const again = await ask(PROMPT + "And then", true);
  const more = again.filter((e) => e.prompt_progress).map((e) => e.prompt_progress as Record<string, number>);
  expect(more.at(-1)).toMatchObject({ total: total + 8, processed: total + 8 });
  expect(more[0].cache).toBeGreaterThan(200);
  // Not asked for: no such chunk.
  expect((await ask(PROMPT, false)).some((e) => e.prompt_progress)).toBe(false);
});

// The windows calibration runs over, cut with the model's own tokenizer (measure/calibration-text.ts):
// the Brown training split by default (seeded, never the held-out documents), a user's text or token
// file as llama-imatrix -f takes one, and the refusals of a bad file naming what is wrong.
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../helpers/lut4-fixture.ts";
import { QWEN3_TOKENIZER_DIR } from "../helpers/qwen3-folder.ts";
import { calibrationText, calibrationWindows } from "../../measure/calibration-text.ts";
import { loadBrown } from "../../model/corpus.ts";
import { byteTokenizer } from "../../model/tokenizer.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { windowInputs } from "../../measure/metrics.ts";

const qwen3 = loadTokenizer({
  "tokenizer.json": readFileSync(join(QWEN3_TOKENIZER_DIR, "tokenizer.json"), "utf8"),
}, QWEN3_TOKENIZER_DIR);
const V = 151_936;

test("a byte model's windows are those calibration always fed it: BOS and 255 bytes of the training split", async () => {
  const { train } = await loadBrown();
  const t = await calibrationText(byteTokenizer, { windows: 4, seed: 1, size: 256, vocab: 258 });
  expect(t.source).toBe("brown train split");
  expect(t.inputs).toEqual(calibrationWindows(train, 4, 1).map(windowInputs));
});

test("a BPE model's windows are its own tokens of the training split, seeded, cut to the window size", async () => {
  const { train, heldOut } = await loadBrown();
  const a = await calibrationText(qwen3, { windows: 6, seed: 1, size: 128, vocab: V });
  const b = await calibrationText(qwen3, { windows: 6, seed: 1, size: 128, vocab: V });
  const c = await calibrationText(qwen3, { windows: 6, seed: 2, size: 128, vocab: V });
  expect(a).toEqual(b);
  expect(c.inputs).not.toEqual(a.inputs);
  const trainText = new TextDecoder().decode(train), heldText = new TextDecoder().decode(heldOut);
  for (const w of a.inputs) {
    expect(w.length).toBe(128);
    expect(w.every((id) => Number.isInteger(id) && id >= 0 && id < qwen3.size)).toBe(true);
    // Whole words from inside the window's text: in the training split, and (a long run) not held out.
    const text = qwen3.decode(w).split(" ").slice(2, 14).join(" ");
    expect(text.length).toBeGreaterThan(30);
    expect(trainText.includes(text)).toBe(true);
    expect(heldText.includes(text)).toBe(false);
  }
});

test("a text file is cut into consecutive windows, the first ones kept (as llama-imatrix --chunks)", async () => {
  const dir = scratchDir(), file = join(dir, "notes.txt");
  const text = Array.from({ length: 400 }, (_, i) => `Line ${i}: the quick brown fox.`).join("\n");
  writeFileSync(file, text);
  const ids = qwen3.encode(text);
  const all = await calibrationText(qwen3, { windows: 1000, seed: 1, size: 64, vocab: V, file });
  // Qwen3 adds no BOS: windows are the file's tokens 64 at a time, the last partial one dropped.
  expect(all.inputs.length).toBe(Math.floor(ids.length / 64));
  expect(all.inputs.flat()).toEqual(ids.slice(0, all.inputs.length * 64));
  expect(all.source).toMatch(/^text notes\.txt sha256:[0-9a-f]{16}$/);
  const some = await calibrationText(qwen3, { windows: 5, seed: 7, size: 64, vocab: V, file });
  expect(some.inputs).toEqual(all.inputs.slice(0, 5));
  // The byte model puts its BOS first in every window.
  const bytes = await calibrationText(byteTokenizer, { windows: 2, seed: 1, size: 64, vocab: 258, file });
  expect(bytes.inputs[0]).toEqual([256, ...new TextEncoder().encode(text).subarray(0, 63)]);
  expect(bytes.inputs[1][0]).toBe(256);
  // Shorter than one window: one shorter window.
  writeFileSync(join(dir, "short.txt"), "Hello there.");
  const short = await calibrationText(qwen3, {
    windows: 4,
    seed: 1,
    size: 64,
    vocab: V,
    file: join(dir, "short.txt"),
  });
  expect(short.inputs).toEqual([qwen3.encode("Hello there.")]);
});

test("a .tokens file is ids; a bad id, invalid UTF-8, an empty or missing file are refused by name", async () => {
  const dir = scratchDir(), tokens = join(dir, "calib.tokens");
  writeFileSync(tokens, "1 2 3\n4\t5 6 7 8 9 10\n");
  const t = await calibrationText(qwen3, { windows: 8, seed: 1, size: 4, vocab: V, file: tokens });
  expect(t.inputs).toEqual([[1, 2, 3, 4], [5, 6, 7, 8]]);
  expect(t.source).toMatch(/^tokens calib\.tokens sha256:/);
  const refused = async (name: string, content: string | Uint8Array, message: string) => {
    const file = join(dir, name);
    if (content !== "") writeFileSync(file, content);
    await expect(calibrationText(qwen3, { windows: 2, seed: 1, size: 8, vocab: V, file })).rejects.toThrow(
      `${file}: ${message}`,
    );
  };
  await refused("big.tokens", "1 2 151936", `token 2: expected a token id in [0, ${V}), found "151936"`);
  await refused("word.tokens", "1 two", `token 1: expected a token id in [0, ${V}), found "two"`);
  await refused("neg.tokens", "-1", `token 0: expected a token id`);
  await refused("bad.txt", new Uint8Array([65, 66, 0xff, 67]), "text: invalid UTF-8 at byte 2");
  await refused("empty.txt", new Uint8Array(0), "no calibration tokens in it");
  await refused("missing.txt", "", "cannot read the calibration file");
});

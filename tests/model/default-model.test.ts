// The shipped model, model/default/: what docs/training.md says of it is what it does: its widths, its
// parameters, its held-out bits per byte and its greedy text (its log against the training command is
// tests/e2e/training-doc.test.ts's).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { configParamCount } from "../../model/config.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { generateAll } from "../../model/generate.ts";
import { bitsPerByte } from "../../measure/metrics.ts";
import { decode, encode } from "../../model/tokenizer.ts";

const CHECKPOINT = "model/default/ferry.ckpt";

test("the default model: every matrix's rows a multiple of 256, GQA, q wider than the hidden state", async () => {
  const { config: cfg } = await readCheckpoint(CHECKPOINT, { sections: [] });
  const q = cfg.num_attention_heads * cfg.head_dim;
  // The rows llama.cpp's K-quants cut in blocks of 256: q, k, v, gate and up read the hidden state,
  // o reads the heads, down the MLP; the tied embedding is hidden wide.
  for (const width of [cfg.hidden_size, q, cfg.intermediate_size]) expect(width % 256).toBe(0);
  expect(cfg.num_key_value_heads).toBeLessThan(cfg.num_attention_heads);
  expect(q).not.toBe(cfg.hidden_size);
  expect(cfg.tie_word_embeddings).toBe(true);
  const page = readFileSync("docs/training.md", "utf8");
  expect(page).toContain(`| parameters | ${configParamCount(cfg).toLocaleString("en-US")} |`);
});

test("the default model reaches docs/training.md's held-out bits per byte and greedy text", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const engine = createFloatEngine(run.config, run.model, CHECKPOINT, { frozen: true });
  const bpb = await bitsPerByte(engine, evalWindows((await loadBrown()).heldOut));
  // The target was 1.9; this run reached 1.9499 (docs/training.md says so). It must stay well below the
  // earlier default model's 2.1699.
  expect(bpb).toBeLessThan(1.96);
  const page = readFileSync("docs/training.md", "utf8"), readme = readFileSync("README.md", "utf8");
  expect(page).toContain(`**${bpb.toFixed(4)}**`);
  expect(readme).toContain(`**${bpb.toFixed(4)}**`);
  const prompt = "The jury said";
  const text = prompt + decode(await generateAll(engine, encode(prompt, { bos: true }), { maxTokens: 64 }));
  expect(page).toContain("`" + text + "`");
}, 120_000);

// The shipped model: what docs/training.md says about it is what it does.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { bitsPerByte } from "../../measure/metrics.ts";
import { buildModel } from "../../model/qwen3.ts";
import { floatEngineOf } from "../../engines/float.ts";
import { generateAll } from "../../model/generate.ts";
import { decode, encode } from "../../model/tokenizer.ts";
import { configParamCount } from "../../model/config.ts";

test("the default model reaches the held-out bits per byte and greedy text of docs/training.md", async () => {
  const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
  const cfg = run.config;
  // GQA, and heads × head_dim ≠ hidden, as the issue asked.
  expect(cfg.num_key_value_heads).toBeLessThan(cfg.num_attention_heads);
  expect(cfg.num_attention_heads * cfg.head_dim).not.toBe(cfg.hidden_size);
  expect(configParamCount(cfg)).toBe(468_256);
  const model = buildModel(cfg, run.model);
  const bpb = bitsPerByte(model, evalWindows((await loadBrown()).heldOut));
  expect(bpb).toBeLessThanOrEqual(2.3);
  const readme = readFileSync("README.md", "utf8"), page = readFileSync("docs/training.md", "utf8");
  expect(readme).toContain(`**${bpb.toFixed(4)}**`);
  expect(page).toContain(`**${bpb.toFixed(4)}**`);
  const text = "The jury said" +
    decode(
      await generateAll(floatEngineOf(model), encode("The jury said", { bos: true }), { maxTokens: 64 }),
    );
  expect(page).toContain("`" + text + "`");
}, 60_000);

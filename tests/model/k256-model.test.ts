// model/k256/: the model retrained at K-quant widths, shipped beside the default one. What docs/training.md
// says of it is what it does: its widths, its parameters, its held-out bits per byte, its greedy text, and
// the run its log records.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { configParamCount } from "../../model/config.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { generateAll } from "../../model/generate.ts";
import { bitsPerByte } from "../../measure/metrics.ts";
import { decode, encode } from "../../model/tokenizer.ts";

const CHECKPOINT = "model/k256/ferry.ckpt";

test("model/k256: every matrix's rows a multiple of 256, GQA, q wider than the hidden state", async () => {
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

test("model/k256 reaches docs/training.md's held-out bits per byte and greedy text", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const engine = createFloatEngine(run.config, run.model, CHECKPOINT, { frozen: true });
  const bpb = await bitsPerByte(engine, evalWindows((await loadBrown()).heldOut));
  // The target was 1.9; this run reached 1.9499 (docs/training.md says so). It must stay well below the
  // default model's 2.1699.
  expect(bpb).toBeLessThan(1.96);
  const page = readFileSync("docs/training.md", "utf8");
  expect(page).toContain(`**${bpb.toFixed(4)}**`);
  const prompt = "The jury said";
  const text = prompt + decode(await generateAll(engine, encode(prompt, { bos: true }), { maxTokens: 64 }));
  expect(page).toContain("`" + text + "`");
}, 120_000);

test("model/k256's log is the run docs/training.md gives: its command's flags, its last step", async () => {
  const { step } = await readCheckpoint(CHECKPOINT, { sections: [] });
  const log = readFileSync("model/k256/ferry.log", "utf8").trimEnd().split("\n");
  const page = readFileSync("docs/training.md", "utf8");
  const command = page.slice(page.indexOf("deno run -A scripts/train.ts --out runs/k256.ckpt"))
    .split("\n```")[0].replace(/\\\n\s*/g, " ");
  // The log's header: "# steps=… batch=… seq=… lr=… warmup=… seed=… workers=… kernels=…".
  const logged = (name: string) => new RegExp(`\\b${name}=(\\S+)`).exec(log[1])![1];
  const given = (name: string) => new RegExp(`--${name} (\\S+)`).exec(command)![1];
  for (const name of ["steps", "batch", "lr", "warmup", "seed"]) {
    expect([name, Number(given(name))]).toEqual([name, Number(logged(name))]);
  }
  expect(logged("kernels")).toBe("wasm");
  expect(Number(logged("steps"))).toBe(step);
  expect(log.at(-1)!.split("\t")[0]).toBe(String(step));
});

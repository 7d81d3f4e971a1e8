// A bad Qwen3 Hugging Face folder is refused, naming the file and the field, before anything is written: a config
// field that changes the maths, a tokenizer that does not fit the model or names merges outside its vocab, a chat
// template that does not parse, an index whose shard lies outside the folder or is missing.
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { crossProcessTest, FAST } from "../helpers/fast.ts";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { SMALL_QWEN3, smallQwen3Folder } from "../helpers/qwen3-small.ts";

const dir = mkdtempSync(join(tmpdir(), "ferry-qwen3-refusals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let src = "";
beforeAll(async () => {
  if (FAST) return;
  src = await smallQwen3Folder(join(dir, "qwen3"));
});

describe("a bad folder is refused, naming the file and the field, before anything is written", () => {
  let n = 0;
  // A folder of links to the good one's files, with `changes` written in place of those files.
  const variant = (base: string, changes: Record<string, string | null>) => {
    const d = join(dir, `bad-${n++}`);
    mkdirSync(d);
    for (const f of readdirSync(base)) {
      if (!(f in changes)) symlinkSync(join(base, f), join(d, f));
    }
    for (const [f, text] of Object.entries(changes)) if (text !== null) writeFileSync(join(d, f), text);
    return d;
  };
  const refused = async (folder: string, file: string, field: string, words?: RegExp) => {
    const outDir = join(dir, `never-${n}`);
    const e = await exportCheckpoint({ input: folder, output: join(outDir, "m.bf16.dmexp"), format: "dmexp" })
      .then(() => undefined, (x) => x);
    expect(e).toBeDefined();
    expect({ where: e.where ?? e.path, field: e.field }).toMatchObject({ field });
    expect(e.message).toContain(join(folder, file));
    if (words) expect(e.message).toMatch(words);
    expect(existsSync(outDir)).toBe(false);
  };
  const config = () => JSON.parse(readFileSync(join(src, "config.json"), "utf8"));
  const tokenizer = () => JSON.parse(readFileSync(join(src, "tokenizer.json"), "utf8"));

  crossProcessTest("config.json: attention_bias true, a rope_scaling, a sliding window in use", async () => {
    const json = (patch: Record<string, unknown>) => JSON.stringify({ ...config(), ...patch });
    await refused(
      variant(src, { "config.json": json({ attention_bias: true }) }),
      "config.json",
      "attention_bias",
    );
    const yarn = { rope_type: "yarn", factor: 4, original_max_position_embeddings: 32768 };
    await refused(
      variant(src, { "config.json": json({ rope_scaling: yarn }) }),
      "config.json",
      "rope_scaling",
    );
    const sliding = json({ use_sliding_window: true, sliding_window: 4096 });
    await refused(variant(src, { "config.json": sliding }), "config.json", "use_sliding_window");
  });

  crossProcessTest(
    "tokenizer.json: ids beyond config.json's vocab_size, a merge of tokens not in the vocab",
    async () => {
      const big = tokenizer();
      big.added_tokens.push({ ...big.added_tokens[0], id: 151936, content: "<|beyond|>" });
      await refused(
        variant(src, { "tokenizer.json": JSON.stringify(big) }),
        "tokenizer.json",
        "vocab_size",
        /disagrees with .*config\.json's vocab_size/,
      );
      const merges = tokenizer();
      merges.model.merges[7] = ["Ġ", "no-such-token"];
      await refused(
        variant(src, { "tokenizer.json": JSON.stringify(merges) }),
        "tokenizer.json",
        "model.merges[7]",
      );
    },
  );

  crossProcessTest(
    "a chat template that does not parse, in chat_template.jinja or tokenizer_config.json",
    async () => {
      await refused(
        variant(src, { "chat_template.jinja": "{% if messages %}never closed" }),
        "chat_template.jinja",
        "chat_template",
      );
      const tc = JSON.parse(readFileSync(join(src, "tokenizer_config.json"), "utf8"));
      tc.chat_template = "{{ messages | }}";
      await refused(
        variant(src, { "tokenizer_config.json": JSON.stringify(tc), "chat_template.jinja": null }),
        "tokenizer_config.json",
        "chat_template",
      );
    },
  );

  crossProcessTest("model.safetensors.index.json: a shard outside the folder, or missing", async () => {
    const sharded = await qwen3Folder({ shape: SMALL_QWEN3, seed: 3, shardBytes: 4e6 });
    const index = JSON.parse(readFileSync(join(sharded, "model.safetensors.index.json"), "utf8"));
    const name = Object.keys(index.weight_map)[0];
    for (const shard of ["../x.safetensors", "/tmp/x.safetensors", "model-00099-of-00099.safetensors"]) {
      const moved = { ...index, weight_map: { ...index.weight_map, [name]: shard } };
      const bad = variant(sharded, { "model.safetensors.index.json": JSON.stringify(moved) });
      await refused(bad, "model.safetensors.index.json", `weight_map.${name}`);
    }
  });
});

// Qwen3's real chat template rendered by model/chat-template.ts gives what transformers'
// apply_chat_template gives (the expected strings follow the template's own logic); thinking on and off,
// history with and without reasoning, and refusals naming the file and the field; Deno renders the same.
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { chatTemplateOf } from "../../model/chat-template.ts";
import { FormatError } from "../../model/error.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { QWEN3_TOKENIZER_DIR, qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";

setDefaultTimeout(20_000);

const files = qwen3TokenizerFiles();
const qwen3 = chatTemplateOf(files, QWEN3_TOKENIZER_DIR)!;

function refusal(run: () => unknown): FormatError {
  try {
    run();
  } catch (e) {
    if (e instanceof FormatError) return e;
    throw e;
  }
  throw new Error("not refused");
}

describe("Qwen3's template", () => {
  test("comes from tokenizer_config.json's chat_template", () => {
    expect(qwen3.file).toBe(QWEN3_TOKENIZER_DIR + "tokenizer_config.json");
    expect(qwen3.field).toBe("chat_template");
  });

  test("has a thinking switch (it reads enable_thinking); a template that never names it has none", () => {
    expect(qwen3.thinkingSwitch).toBe(true);
    const plain = chatTemplateOf({ ...files, "chat_template.jinja": "{{ messages[0].content }}" }, "m/")!;
    expect(plain.thinkingSwitch).toBe(false);
  });

  test("system and user, with the generation prompt; thinking left to the model", () => {
    const text = qwen3.render([{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }]);
    expect(text).toBe(
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  test("enable_thinking false adds the empty think block; true adds nothing", () => {
    const messages = [{ role: "user", content: "Hi" }];
    expect(qwen3.render(messages, { kwargs: { enable_thinking: false } })).toBe(
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    );
    expect(qwen3.render(messages, { kwargs: { enable_thinking: true } })).toBe(
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  test("an earlier assistant turn loses its thinking; the generation prompt can be left off", () => {
    const text = qwen3.render([
      { role: "system", content: "S" },
      { role: "user", content: "Q1" },
      { role: "assistant", content: "<think>\nhmm\n</think>\n\nA1" },
      { role: "user", content: "Q2" },
    ], { addGenerationPrompt: false });
    expect(text).toBe(
      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n" +
        "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n",
    );
  });

  test("the last assistant turn after the last question keeps its reasoning_content", () => {
    const text = qwen3.render([
      { role: "user", content: "Q" },
      { role: "assistant", content: "A", reasoning_content: "R" },
    ], { addGenerationPrompt: false });
    expect(text).toBe(
      "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nR\n</think>\n\nA<|im_end|>\n",
    );
  });
});

describe("where templates come from, and refusals", () => {
  test("chat_template.jinja wins over tokenizer_config.json; the special-token strings are variables", () => {
    const t = chatTemplateOf({
      ...files,
      "chat_template.jinja": "[{{ eos_token }}|{{ messages[0].content }}]",
    }, "m/")!;
    expect(t.file).toBe("m/chat_template.jinja");
    expect(t.render([{ role: "user", content: "x" }])).toBe("[<|im_end|>|x]");
  });

  test("no template: undefined (the model is prompted as a transcript)", () => {
    expect(chatTemplateOf(undefined, "m/")).toBeUndefined();
    expect(chatTemplateOf({ "tokenizer.json": "{}" }, "m/")).toBeUndefined();
  });

  test("a template that does not parse names tokenizer_config.json and chat_template", () => {
    const config = JSON.stringify({ chat_template: "{% if messages %}never closed" });
    const e = refusal(() => chatTemplateOf({ ...files, "tokenizer_config.json": config }, "m/"));
    expect(e.path).toBe("m/tokenizer_config.json");
    expect(e.field).toBe("chat_template");
    expect(e.message).toContain("m/tokenizer_config.json: chat_template: does not parse");
  });

  test("a template that fails to render (raise_exception) names the file and field too", () => {
    const config = JSON.stringify({ chat_template: "{{ raise_exception('roles must alternate') }}" });
    const t = chatTemplateOf({ ...files, "tokenizer_config.json": config }, "m/")!;
    const e = refusal(() => t.render([{ role: "user", content: "x" }]));
    expect(e.field).toBe("chat_template");
    expect(e.message).toContain("roles must alternate");
    const notString = JSON.stringify({ chat_template: 7 });
    expect(refusal(() => chatTemplateOf({ ...files, "tokenizer_config.json": notString }, "m/")).field)
      .toBe("chat_template");
  });
});

crossProcessTest("Deno renders the same text as Bun", () => {
  const messages = [
    { role: "system", content: "S" },
    { role: "user", content: "Q1" },
    { role: "assistant", content: "<think>\nhmm\n</think>\n\nA1" },
    { role: "user", content: "Q2 你好 👋" },
  ];
  const script = `
    import { chatTemplateOf } from "./model/chat-template.ts";
    import { qwen3TokenizerFiles, QWEN3_TOKENIZER_DIR } from "./tests/helpers/tokenizer-check.ts";
    const t = chatTemplateOf(qwen3TokenizerFiles(), QWEN3_TOKENIZER_DIR)!;
    console.log(JSON.stringify(t.render(${
    JSON.stringify(messages)
  }, { kwargs: { enable_thinking: false } })));
  `;
  const run = spawnSync("deno", ["eval", "--ext=ts", script], { encoding: "utf8" });
  expect(withoutDenoDownloads(run.stderr)).toBe("");
  expect(JSON.parse(run.stdout)).toBe(qwen3.render(messages, { kwargs: { enable_thinking: false } }));
});

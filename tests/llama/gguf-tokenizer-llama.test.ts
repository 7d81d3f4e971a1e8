// Proof by a real client that the GGUF carries the real Qwen3 tokenizer: llama.cpp (node-llama-cpp
// 3.21.1, CPU) tokenizing the file ferry wrote gives @huggingface/tokenizers' ids on the original
// tokenizer.json, on Brown corpus paragraphs, code, whitespace runs, digits, CJK, emoji, combining marks
// and special-token text (parsed and not), and detokenizes them back; it stops on <|im_end|> and
// <|endoftext|>; and a chat rendered from the GGUF's own template gives the Hugging Face prompt's ids.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import {
  type ChatHistoryItem,
  getLlama,
  JinjaTemplateChatWrapper,
  LlamaLogLevel,
  type LlamaModel,
} from "node-llama-cpp";
import { readGgufTokenizer, writeGguf } from "../../formats/gguf/gguf.ts";
import { brownDir, untag } from "../../model/corpus.ts";
import { qwen3VocabModel, tempDir, tokenizerFilesOf } from "../helpers/gguf-fixtures.ts";

const files = tokenizerFilesOf();
const hfConfig = JSON.parse(files["tokenizer_config.json"]!);
const hfJson = JSON.parse(files["tokenizer.json"]);
const hf = new Tokenizer(hfJson, hfConfig);

/** A tokenizer.json's tokenizer with its special added tokens left out: specials read as plain text. */
function withoutSpecials(json: { added_tokens: Array<{ special: boolean }> }, config: object): Tokenizer {
  return new Tokenizer({ ...json, added_tokens: json.added_tokens.filter((t) => !t.special) }, config);
}

const brown = ["ca01", "cb02", "cf03", "cg10", "cj10", "cn05", "cp20", "cr07"].map((doc) =>
  untag(readFileSync(join(brownDir(), doc), "utf8")).slice(0, 700)
);

/** Text already in NFC, Qwen's normalizer: llama.cpp applies no normalizer, so only NFC input is equal. */
const TEXTS = [
  ...brown,
  "function fib(n: number): number {\n\treturn n < 2 ? n : fib(n - 1) + fib(n - 2);\n}\n",
  "import numpy as np\n\nclass A:\n    def __init__(self):\n        self.x = [i ** 2 for i in range(10)]\n",
  "    four\n\n\n\n  two  \t\t tabs   \r\n\r\n trailing   ",
  "\n\n\n",
  "          ",
  "0 12 345 6789 3.14159 1,000,000 2024-01-02 0x1F",
  "日本語のテキストです。中文文本，标点符号！한국어 텍스트",
  "emoji 👍🏽 🇫🇷 👨‍👩‍👧‍👦 ❤️ 🫠",
  "café naïve Ωμέγα Привет עברית العربية",
  "combining that NFC keeps: x\u0301 q\u0323\u0307 ŉ",
  "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n<think>\nok\n</think>\n\nhi<|im_end|>",
  "<|endoftext|><|fim_prefix|>def<|fim_suffix|>x<|fim_middle|><tool_call>{}</tool_call>",
  "almost special: <|im_start <im_end|> <|unknown|> </think",
];

let dir = "";
let path = "";
let model: LlamaModel;
let rebuilt: { json: { added_tokens: Array<{ special: boolean }> }; config: object };
beforeAll(async () => {
  dir = await tempDir();
  path = join(dir, "qwen3.f16.gguf");
  const { config, tensors } = qwen3VocabModel();
  await writeGguf(path, tensors, config, { type: "f16", tokenizer: files });
  const back = (await readGgufTokenizer(path))!;
  rebuilt = { json: JSON.parse(back["tokenizer.json"]), config: JSON.parse(back["tokenizer_config.json"]!) };
  const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: 1,
    logLevel: LlamaLogLevel.error,
    progressLogs: false,
  });
  model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
}, 120_000);
afterAll(async () => {
  await model?.dispose();
  await rm(dir, { recursive: true, force: true });
});

describe("llama.cpp tokenizes the GGUF as @huggingface/tokenizers tokenizes tokenizer.json", () => {
  test("with special-token parsing: the same ids on every text, and detokenizing gives the text back", () => {
    for (const text of TEXTS) {
      expect(text.normalize("NFC")).toBe(text);
      const ids = model.tokenize(text, true);
      expect({ text, ids }).toEqual({ text, ids: hf.encode(text).ids });
      expect(model.detokenize(ids, true)).toBe(text);
    }
  });

  test("without special-token parsing: special text is plain text, as HF with its specials left out", () => {
    // llama.cpp still matches USER_DEFINED tokens (<think>, <tool_call>) and skips CONTROL ones. Its
    // CONTROL set is HF's specials plus the <|...|> tokens gguf-py deems special (<|fim_prefix|>...),
    // so the HF side is the tokenizer rebuilt from the GGUF, whose flags say so.
    const plain = withoutSpecials(rebuilt.json, rebuilt.config);
    const hfPlain = withoutSpecials(hfJson, hfConfig);
    for (const text of TEXTS) {
      const ids = model.tokenize(text, false);
      expect({ text, ids }).toEqual({ text, ids: plain.encode(text).ids });
      expect(model.detokenize(ids)).toBe(text);
      if (!/<\|(fim_|repo_name|file_sep)/.test(text)) expect(ids).toEqual(hfPlain.encode(text).ids);
    }
    expect(model.tokenize("<|im_end|>", false).length).toBeGreaterThan(1);
    expect(model.tokenize("<|im_end|>", true)).toEqual([151_645]);
    expect(model.tokenize("<think>", false)).toEqual([151_667]);
  });

  test("text not in NFC: HF normalizes it first, llama.cpp does not (equal once the text is NFC)", () => {
    for (const text of ["e\u0301t\u0301e\u0301", "A\u030a ring, n\u0303", "u\u0308ber"]) {
      expect(text.normalize("NFC")).not.toBe(text);
      expect(model.tokenize(text.normalize("NFC"), true)).toEqual(hf.encode(text).ids);
      expect(model.tokenize(text, true)).not.toEqual(hf.encode(text).ids);
      expect(model.detokenize(model.tokenize(text, true), true)).toBe(text);
    }
  });

  test("llama.cpp's end-of-generation set: <|im_end|> (the EOS), <|endoftext|>, the FIM stops; no BOS is added", () => {
    expect(model.tokens.eos).toBe(151_645);
    // By name: <|endoftext|>, <|im_end|>, and the FIM pad / repo / file-separator tokens; nothing else.
    const eog = Array.from({ length: 26 }, (_, i) => 151_643 + i).filter((id) => model.isEogToken(id));
    expect(eog).toEqual([151_643, 151_645, 151_662, 151_663, 151_664]);
    expect(model.tokenize("Hi", true)).toEqual(hf.encode("Hi").ids); // no BOS in front
    expect(model.detokenize([9707, 151_645])).toBe("Hello"); // specials render as nothing by default
  });
});

describe("a chat rendered from the GGUF's own template gives the Hugging Face prompt", () => {
  const system = "You are a terse assistant. Answer in one line.";
  const turns: Array<[string, string]> = [
    ["What is the capital of France?", "Paris."],
    ["And of Japan? 日本", "Tokyo. 🗼"],
  ];
  const last = "Now list both, comma-separated.";
  const history = (pending: boolean): ChatHistoryItem[] => [
    { type: "system", text: system },
    ...turns.flatMap((
      [q, a],
    ): ChatHistoryItem[] => [{ type: "user", text: q }, { type: "model", response: [a] }]),
    { type: "user", text: last },
    ...(pending ? [{ type: "model", response: [] } as ChatHistoryItem] : []),
  ];
  const messages = [
    { role: "system", content: system },
    ...turns.flatMap(([q, a]) => [{ role: "user", content: q }, { role: "assistant", content: a }]),
    { role: "user", content: last },
  ];
  const hfPrompt = (enable_thinking: boolean) =>
    hf.encode(
      new Template(hfConfig.chat_template).render({ messages, add_generation_prompt: true, enable_thinking }),
    ).ids;
  const llamaPrompt = (reasoning: boolean, pending: boolean) => {
    const template = (model.fileInfo.metadata as { tokenizer: { chat_template: string } }).tokenizer
      .chat_template;
    const wrapper = new JinjaTemplateChatWrapper({ template, reasoning, tokenizer: model.tokenizer });
    return wrapper.generateContextState({ chatHistory: history(pending) }).contextText.tokenize(
      model.tokenizer,
    );
  };

  test("the template llama.cpp reads from the file is tokenizer_config.json's, byte for byte", () => {
    const md = model.fileInfo.metadata as { tokenizer: { chat_template: string } };
    expect(md.tokenizer.chat_template).toBe(hfConfig.chat_template);
  });

  test("thinking off: node-llama-cpp's prompt ids equal HF's (system, user, assistant history)", () => {
    const ids = llamaPrompt(false, true);
    expect(ids).toEqual(hfPrompt(false));
    expect(model.detokenize(ids, true).endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
  });

  test("thinking on: node-llama-cpp renders the pending turn with an empty think block, so the history matches", () => {
    // node-llama-cpp 3.21.1's JinjaTemplateChatWrapper renders the reply being generated as an assistant
    // message, where Qwen3's template always writes a (here empty) <think> block, whatever
    // enable_thinking says; HF's add_generation_prompt with thinking on writes only the turn's header.
    // Everything before that header is the same ids; the header is the template's own text.
    const ids = llamaPrompt(true, false);
    const header = model.tokenize("<|im_start|>assistant\n", true);
    expect([...ids, ...header]).toEqual(hfPrompt(true));
    expect(llamaPrompt(true, true)).toEqual(hfPrompt(false));
  });

  test("an earlier turn's thought: HF's template drops it, node-llama-cpp keeps it (a difference, measured)", () => {
    // Qwen3's template keeps <think> only after the last user turn. node-llama-cpp 3.21.1 passes an
    // earlier reply's thought segment through, whatever keepOnlyLastThought says; what ferry writes
    // plays no part (the template arrives byte for byte, above).
    const template = (model.fileInfo.metadata as { tokenizer: { chat_template: string } }).tokenizer
      .chat_template;
    const chatHistory: ChatHistoryItem[] = [
      { type: "user", text: "2+2?" },
      {
        type: "model",
        response: [{ type: "segment", segmentType: "thought", text: "Add.", ended: true }, "4."],
      },
      { type: "user", text: "3+3?" },
      { type: "model", response: [] },
    ];
    const wrapper = new JinjaTemplateChatWrapper({ template, reasoning: false, keepOnlyLastThought: true });
    const ours = model.detokenize(
      wrapper.generateContextState({ chatHistory }).contextText.tokenize(model.tokenizer),
      true,
    );
    const theirs = new Template(hfConfig.chat_template).render({
      messages: [
        { role: "user", content: "2+2?" },
        { role: "assistant", content: "<think>\nAdd.\n</think>\n\n4." },
        { role: "user", content: "3+3?" },
      ],
      add_generation_prompt: true,
      enable_thinking: false,
    });
    expect(theirs.includes("Add.")).toBe(false);
    expect(ours.includes("<think>\nAdd.\n</think>\n\n4.")).toBe(true);
    expect(ours.replace("<think>\nAdd.\n</think>\n\n", "")).toBe(theirs);
  });
});

// The server on a model carrying Qwen3's real tokenizer and chat template (a reduced random Qwen3
// folder from tests/helpers/qwen3-folder.ts): prompts rendered by the template and counted in its
// tokens, chat_template_kwargs checked and passed, /tokenize and /detokenize through the tokenizer,
// padding ids never sampled, a think block returned as reasoning_content (whole and streamed), and
// generation stopping at either id of the EOS set (scripts/chat.ts on a folder: chat-qwen3-cli.test.ts).
import { beforeAll, describe, expect } from "bun:test";
import { crossProcessTest, FAST } from "../helpers/fast.ts";
import { loadEngine } from "../../engines/mod.ts";
import { FormatError } from "../../model/error.ts";
import { bitsPerByte, tokenWindowBits } from "../../measure/metrics.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import { createApp } from "../../serve/app.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";
import { sseChunks } from "../helpers/chat-sse.ts";

const IM_END = 151645, END_OF_TEXT = 151643;
let engine: Engine;

beforeAll(async () => {
  if (FAST) return;
  // The folder's own tokenizer files go in explicitly until formats/huggingface/huggingface.ts reads them itself.
  engine = await loadEngine(await qwen3Folder({ peaked: true }), "float", {
    tokenizer: qwen3TokenizerFiles(),
  });
});

/** `engine`, with every session picking `script`'s ids in turn (its feeds are the model's own). */
function scripted(script: readonly number[]): Engine {
  const start = (): EngineSession => {
    const s = engine.start();
    let next = 0;
    return Object.assign(s, { pick: () => script[Math.min(next++, script.length - 1)] });
  };
  return { ...engine, start, restore: undefined };
}

async function post(app: ReturnType<typeof createApp>, path: string, body: unknown) {
  const res = await app.request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return {
    status: res.status,
    body: res.headers.get("content-type")?.includes("json") ? await res.json() as any : await res.text(),
  };
}

describe("a Qwen3 model's prompts and token routes", () => {
  crossProcessTest(
    "the engine carries the tokenizer; padding and control ids are never sampled",
    async () => {
      // The folder's own files, read by its format, without the override the other tests use.
      const own = await loadEngine(await qwen3Folder({ peaked: true }), "float");
      expect([own.tokenizer.kind, own.tokenizer.size, own.tokenizer.eos]).toEqual(["bpe", 151669, [
        151645,
        151643,
      ]]);
      expect(engine.tokenizer.kind).toBe("bpe");
      expect(engine.config.vocab_size).toBe(151936);
      const s = engine.start();
      await s.feed(engine.tokenizer.encode("<|im_start|>user\nHi<|im_end|>\n", { specials: true }), "none");
      for (let i = 0; i < 12; i++) {
        const id = s.pick({ temperature: 1.5 });
        expect(id).toBeLessThan(engine.tokenizer.size);
        expect(engine.tokenizer.specials.includes(id) && !engine.tokenizer.eos.includes(id)).toBe(false);
        await s.feed([id], "none");
      }
    },
  );

  crossProcessTest(
    "/apply-template renders Qwen3's template with chat_template_kwargs; a non-object is a 400",
    async () => {
      const app = createApp({ engine });
      const messages = [{ role: "user", content: "Hi" }];
      const plain = await post(app, "/apply-template", { messages });
      expect(plain.body.prompt).toBe("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
      const off = await post(app, "/apply-template", {
        messages,
        chat_template_kwargs: { enable_thinking: false },
      });
      expect(off.body.prompt).toBe(
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
      );
      for (const path of ["/apply-template", "/v1/chat/completions"]) {
        const bad = await post(app, path, { messages, chat_template_kwargs: [true] });
        expect(bad.status).toBe(400);
        expect(bad.body.error.param).toBe("chat_template_kwargs");
      }
    },
  );

  crossProcessTest("/tokenize and /detokenize go through the tokenizer", async () => {
    const app = createApp({ engine });
    const t = await post(app, "/tokenize", { content: "Hello world<|im_end|>", with_pieces: true });
    expect(t.body.tokens).toEqual([{ id: 9707, piece: "Hello" }, { id: 1879, piece: " world" }, {
      id: IM_END,
      piece: "<|im_end|>",
    }]);
    const raw = await post(app, "/tokenize", { content: "<|im_end|>", parse_special: false });
    expect(raw.body.tokens).not.toContain(IM_END);
    const d = await post(app, "/detokenize", { tokens: [9707, 1879] });
    expect(d.body.content).toBe("Hello world");
    const pad = await post(app, "/detokenize", { tokens: [151700] });
    expect(pad.status).toBe(400);
    expect(pad.body.error.param).toBe("tokens");
  });

  crossProcessTest("a chat's prompt is the template's tokens: usage counts them", async () => {
    const app = createApp({ engine });
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi there" }];
    const r = await post(app, "/v1/chat/completions", { messages, max_tokens: 4, temperature: 0 });
    expect(r.status).toBe(200);
    const text =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n";
    expect(r.body.usage.prompt_tokens).toBe(engine.tokenizer.encode(text, { specials: true }).length);
    expect(r.body.usage.completion_tokens).toBeLessThanOrEqual(4);
  });
});

describe("reasoning_content and the EOS set", () => {
  const reply = "<think>\nThe user greets.\n</think>\n\nHello! 你好";

  crossProcessTest("a think block is reasoning_content; <|im_end|> ends the reply", async () => {
    const ids = [...engine.tokenizer.encode(reply), IM_END, 9707, 9707];
    const app = createApp({ engine: scripted(ids) });
    const r = await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 64,
    });
    expect(r.body.choices[0].message).toEqual({
      role: "assistant",
      content: "Hello! 你好",
      reasoning_content: "The user greets.",
    });
    expect(r.body.choices[0].finish_reason).toBe("stop");
    expect(r.body.usage.completion_tokens).toBe(ids.length - 3); // the reply's tokens: the EOS is not one
  });

  crossProcessTest("streamed: delta.reasoning_content inside the block, then delta.content", async () => {
    const ids = [...engine.tokenizer.encode(reply), END_OF_TEXT, 9707];
    const app = createApp({ engine: scripted(ids) });
    const r = await post(app, "/v1/chat/completions", {
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 64,
      stream: true,
    });
    const deltas = sseChunks(r.body).map((c) => c.choices[0]?.delta).filter(Boolean);
    const reasoning = deltas.map((d) => d.reasoning_content ?? "").join("");
    const content = deltas.map((d) => d.content ?? "").join("");
    expect(reasoning).toBe("The user greets.");
    expect(content).toBe("Hello! 你好"); // <|endoftext|> stopped it: 9707 never came
    const firstContent = deltas.findIndex((d) => (d.content ?? "") !== "");
    const lastReasoning = deltas.findLastIndex((d) => d.reasoning_content !== undefined);
    expect(lastReasoning).toBeLessThan(firstContent);
    expect(deltas.some((d) => d.reasoning_content !== undefined && d.content !== undefined)).toBe(false);
  });

  crossProcessTest(
    "reasoning_format none leaves the think block in content; a bad one is a 400",
    async () => {
      const ids = [...engine.tokenizer.encode(reply), IM_END];
      const app = createApp({ engine: scripted(ids) });
      const messages = [{ role: "user", content: "Hi" }];
      const r = await post(app, "/v1/chat/completions", { messages, reasoning_format: "none" });
      expect(r.body.choices[0].message).toEqual({ role: "assistant", content: reply });
      const bad = await post(app, "/v1/chat/completions", { messages, reasoning_format: "hidden" });
      expect(bad.status).toBe(400);
      expect(bad.body.error.param).toBe("reasoning_format");
    },
  );

  crossProcessTest(
    "thinking turned off: no think block, so all content and no reasoning_content",
    async () => {
      const ids = [...engine.tokenizer.encode("Plain answer."), IM_END];
      const app = createApp({ engine: scripted(ids) });
      const r = await post(app, "/v1/chat/completions", {
        messages: [{ role: "user", content: "Hi" }],
        chat_template_kwargs: { enable_thinking: false },
      });
      expect(r.body.choices[0].message).toEqual({ role: "assistant", content: "Plain answer." });
    },
  );

  crossProcessTest(
    "/v1/models says the model has a BPE tokenizer, a template and its thinking switch",
    async () => {
      const res = await createApp({ engine: scripted([IM_END]) }).request("/v1/models");
      expect((await res.json()).data[0]).toMatchObject({
        tokenizer: "bpe",
        chat_template: true,
        thinking_switch: true,
      });
    },
  );
});

crossProcessTest("held-out bits per byte of a BPE model are over its own tokens", async () => {
  const window = new TextEncoder().encode(
    "The jury said it did find that many of the registration practices.",
  );
  const r = await tokenWindowBits(engine, window);
  const ids = engine.tokenizer.encode(new TextDecoder().decode(window));
  expect(r.bytes).toBe(window.length - engine.tokenizer.tokenBytes(ids[0]).length);
  expect(r.bits).toBeGreaterThan(0);
  const bpb = await bitsPerByte(engine, [window, window]);
  expect(bpb).toBeCloseTo(r.bits / r.bytes, 9);
});

crossProcessTest("a tokenizer with more ids than the model's vocab is refused by loadEngine", async () => {
  const small = await qwen3Folder({
    shape: {
      vocab_size: 1000,
      hidden_size: 64,
      intermediate_size: 192,
      num_hidden_layers: 1,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 16,
      tie_word_embeddings: true,
      max_position_embeddings: 128,
      rope_theta: 1_000_000,
    },
  });
  const refusal = await loadEngine(small, "float", { tokenizer: qwen3TokenizerFiles() }).catch((e) => e);
  expect(refusal).toBeInstanceOf(FormatError);
  expect(refusal.field).toBe("vocab_size");
  expect(refusal.message).toContain("151669 ids, more than the model's 1000");
});

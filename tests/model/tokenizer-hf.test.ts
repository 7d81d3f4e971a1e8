// ferry's Hugging Face BPE tokenizer equals @huggingface/tokenizers on Qwen3's real tokenizer (Brown
// paragraphs, code, whitespace runs, digits, CJK, emoji, combining marks, NFC-sensitive text, special
// token strings parsed and not), round-trips, streams what it decodes, and knows its special ids; under Bun here and under Deno in a child. The tokenizer
// files are pinned in tests/fixtures/qwen3-tokenizer (their README says where they come from).
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { checkTokenizer, QWEN3_TOKENIZER_DIR, qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";
import { byteTokenizer } from "../../model/tokenizer.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { FormatError } from "../../model/error.ts";
import { neverSampled, specialIds } from "../../model/sample.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { crossProcessTest } from "../helpers/fast.ts";

describe("the Qwen3 tokenizer", () => {
  test("agrees with @huggingface/tokenizers under Bun", () => {
    const r = checkTokenizer();
    expect(r.mismatches).toEqual([]);
    expect(r.texts).toBeGreaterThan(40);
    expect(r.ids).toBeGreaterThan(5000);
  });

  crossProcessTest("agrees with @huggingface/tokenizers under Deno", () => {
    const run = spawnSync("deno", ["run", "-A", "tests/helpers/tokenizer-check.ts"], { encoding: "utf8" });
    expect(withoutDenoDownloads(run.stderr)).toBe("");
    expect(run.status).toBe(0);
    const r = JSON.parse(run.stdout);
    expect(r.mismatches).toEqual([]);
    expect(r.texts).toBeGreaterThan(40);
  });

  const tok = loadTokenizer(qwen3TokenizerFiles(), QWEN3_TOKENIZER_DIR);

  test("special ids: no BOS, the EOS set from both files, the pad, the size below the vocab", () => {
    expect(tok.kind).toBe("bpe");
    expect(tok.size).toBe(151669);
    expect(tok.bos).toBeUndefined();
    expect([...tok.eos].sort()).toEqual([151643, 151645]);
    expect(tok.pad).toBe(151643);
    expect(tok.specials).toContain(151644); // <|im_start|>
    expect(tok.specials).not.toContain(151667); // <think> is an added token, not a special one
    expect(tok.encode("x", { bos: true })).toEqual(tok.encode("x"));
  });

  test("never sampled: the specials but the EOS set, and the padding ids up to the model's vocab", () => {
    const never = neverSampled({ vocab_size: 151936 }, specialIds(tok));
    expect([never[151644], never[151656], never[151669], never[151935]]).toEqual([1, 1, 1, 1]);
    expect([never[151643], never[151645], never[151667], never[9707]]).toEqual([0, 0, 0, 0]);
    expect(never.reduce((n, x) => n + x, 0)).toBe(151936 - 151669 + 12); // 14 specials, 2 of them EOS
  });

  test("digits are one piece each; a split character is held back until it completes", () => {
    expect(tok.encode("12345").map((id) => tok.tokenText(id))).toEqual(["1", "2", "3", "4", "5"]);
    const ids = tok.encode(" 👋");
    expect(ids.length).toBe(2); // " " and 3 of the emoji's bytes, then its last byte
    expect(ids.map(tok.streamDecoder())).toEqual([" ", "👋"]);
    expect([...tok.tokenBytes(ids[0]), ...tok.tokenBytes(ids[1])]).toEqual([
      ...new TextEncoder().encode(" 👋"),
    ]);
  });

  test("special tokens: parsed only when asked; dropped when decoding unless asked", () => {
    const ids = tok.encode("<|im_start|>hi<|im_end|>", { specials: true });
    expect(ids[0]).toBe(151644);
    expect(ids.at(-1)).toBe(151645);
    expect(tok.encode("<|im_start|>")).not.toContain(151644);
    expect(tok.decode(ids)).toBe("hi");
    expect(tok.decode(ids, { specials: true })).toBe("<|im_start|>hi<|im_end|>");
    expect(tok.tokenText(151645)).toBe("<|im_end|>");
    expect(tok.streamDecoder()(151645)).toBe("");
  });
});

describe("files refused and the byte tokenizer", () => {
  test("bad files are refused naming the file and the field", () => {
    const files = qwen3TokenizerFiles();
    const refusal = (f: Record<string, string>) => {
      try {
        loadTokenizer({ ...files, ...f } as typeof files, "m/");
      } catch (e) {
        return e as FormatError;
      }
      throw new Error("not refused");
    };
    const notJson = refusal({ "tokenizer_config.json": "{" });
    expect(notJson).toBeInstanceOf(FormatError);
    expect(notJson.path).toBe("m/tokenizer_config.json");
    const badEos = refusal({ "generation_config.json": '{"eos_token_id": "x"}' });
    expect(badEos.path).toBe("m/generation_config.json");
    expect(badEos.field).toBe("eos_token_id");
    const wordPiece = refusal({ "tokenizer.json": '{"model": {"type": "WordPiece", "vocab": {}}}' });
    expect(wordPiece.field).toBe("model.type");
    expect(wordPiece.message).toContain("m/tokenizer.json");
    const badId = refusal({
      "tokenizer.json": '{"model": {"type": "BPE", "vocab": {"a": -1}}, "decoder": {"type": "ByteLevel"}}',
    });
    expect(badId.field).toBe('model.vocab["a"]');
  });

  test("no files: the byte tokenizer, whose interface matches its old functions", () => {
    const t = loadTokenizer(undefined, "x");
    expect(t).toBe(byteTokenizer);
    expect(t.encode("hé", { bos: true })).toEqual([256, 104, 195, 169]);
    expect(t.decode([256, 104, 195, 169, 257])).toBe("hé");
    expect([t.bos, t.eos, t.size, t.specials]).toEqual([256, [257], 258, [256, 257]]);
    const s = t.streamDecoder();
    expect([195, 169].map(s)).toEqual(["", "é"]);
    expect(t.tokenText(0xc3)).toBe("bytes:\\xc3");
    expect(t.tokenText(257)).toBe("<|endoftext|>");
    expect([...t.tokenBytes(65)]).toEqual([65]);
  });
});

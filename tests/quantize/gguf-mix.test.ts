// quantize/gguf-mix.ts: which ggml type llama.cpp's quantizer gives each tensor, per --dtype — the
// Q4_K_M mix (llama-quant.cpp's llama_tensor_get_type_impl) and the shape fallback
// (tensor_type_fallback) — checked on the shipped model's shapes (every row a multiple of 256), on a
// narrow one that falls back (the earlier shipped model's) and on single tensors.
import { describe, expect, test } from "bun:test";
import { ggufTensorType, useMoreBits } from "../../quantize/gguf-mix.ts";
import { ggmlType, readGguf, writeGguf } from "../../formats/gguf/gguf.ts";
import { join } from "node:path";
import { rm } from "node:fs/promises";
import { tempDir, testTensors } from "../helpers/gguf-fixtures.ts";
import { type ModelConfig, paramShapes, PRESETS } from "../../model/config.ts";
import { ggufTensorName } from "../../formats/gguf/gguf-qwen3.ts";

describe("use_more_bits: the first and last eighth of the layers, and every third between", () => {
  const picked = (n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => useMoreBits(i, n));
  test("for 4, 6, 8 and 32 layers", () => {
    expect(picked(4)).toEqual([2, 3]);
    expect(picked(6)).toEqual([2, 5]);
    expect(picked(8)).toEqual([0, 3, 6, 7]);
    expect(picked(32)).toEqual([0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]);
  });
});

/** Each 2-D tensor's GGUF name and the type `dtype` gives it in a model of `config`'s shape. */
function mixTable(config: ModelConfig, dtype: Parameters<typeof ggufTensorType>[0]): Record<string, string> {
  const model = { layers: config.num_hidden_layers, tied: config.tie_word_embeddings };
  return Object.fromEntries(
    paramShapes(config).filter((s) => s.dims.length === 2).map((s) => {
      const name = ggufTensorName(s.name)!;
      return [name, ggufTensorType(dtype, name, [...s.dims].reverse(), model)];
    }),
  );
}

describe("the shipped model (hidden 256, SwiGLU 768, 8 heads × 64, 6 layers, tied): no fallback", () => {
  const config = PRESETS.default;

  test("the preset is the shape this table was derived for", () => {
    expect([config.hidden_size, config.intermediate_size, config.num_hidden_layers]).toEqual([256, 768, 6]);
    expect(config.num_attention_heads * config.head_dim).toBe(512);
    expect(config.tie_word_embeddings).toBe(true);
  });

  test("q4_k_m: Q6_K on the tied head and on attn_v and ffn_down of layers 2 and 5, Q4_K elsewhere", () => {
    const t = mixTable(config, "q4_k_m");
    expect(t["token_embd.weight"]).toBe("Q6_K"); // tied: quantized as the output, 256 wide
    for (let i = 0; i < 6; i++) {
      const more = i === 2 || i === 5;
      expect(t[`blk.${i}.ffn_down.weight`]).toBe(more ? "Q6_K" : "Q4_K");
      expect(t[`blk.${i}.attn_v.weight`]).toBe(more ? "Q6_K" : "Q4_K");
      for (const n of ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"]) {
        expect(t[`blk.${i}.${n}.weight`]).toBe("Q4_K");
      }
    }
  });

  test("q4_k, q6_k, iq4_nl: one type in every matrix", () => {
    const q4k = mixTable(config, "q4_k"), q6k = mixTable(config, "q6_k"), iq4 = mixTable(config, "iq4_nl");
    for (const name of Object.keys(q4k)) {
      expect([name, q4k[name], q6k[name], iq4[name]]).toEqual([name, "Q4_K", "Q6_K", "IQ4_NL"]);
    }
  });

  test("norms stay F32 in every mix", () => {
    const model = { layers: 6, tied: true };
    expect(ggufTensorType("q4_k_m", "blk.0.attn_norm.weight", [256], model)).toBe("F32");
  });
});

describe("narrow rows (hidden 96, SwiGLU 256, 4 layers, tied: the earlier shipped model) fall back", () => {
  const config: ModelConfig = {
    ...PRESETS.default,
    hidden_size: 96,
    intermediate_size: 256,
    num_hidden_layers: 4,
    num_attention_heads: 4,
    head_dim: 32,
  };

  test("q4_k_m: Q6_K on ffn_down of layers 2-3, Q8_0 where a Q6_K row is too narrow, Q5_0 where Q4_K's is", () => {
    const t = mixTable(config, "q4_k_m");
    expect(t["token_embd.weight"]).toBe("Q8_0"); // tied: quantized as the output; 96 % 256 ≠ 0 → Q8_0
    for (let i = 0; i < 4; i++) {
      const more = i >= 2;
      expect(t[`blk.${i}.ffn_down.weight`]).toBe(more ? "Q6_K" : "Q4_K"); // rows 256 wide
      expect(t[`blk.${i}.attn_v.weight`]).toBe(more ? "Q8_0" : "Q5_0"); // Q6_K / Q4_K, rows 96 wide
      for (const n of ["attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"]) {
        expect(t[`blk.${i}.${n}.weight`]).toBe("Q5_0");
      }
    }
  });

  test("q4_k, q6_k, iq4_nl: one type, with llama.cpp's fallback for narrow rows", () => {
    const q4k = mixTable(config, "q4_k"), q6k = mixTable(config, "q6_k"), iq4 = mixTable(config, "iq4_nl");
    for (const name of Object.keys(q4k)) {
      const wide = name.endsWith("ffn_down.weight");
      expect([name, q4k[name]]).toEqual([name, wide ? "Q4_K" : "Q5_0"]);
      expect([name, q6k[name]]).toEqual([name, wide ? "Q6_K" : "Q8_0"]);
      expect([name, iq4[name]]).toEqual([name, "IQ4_NL"]);
    }
  });
});

describe("rules neither model reaches", () => {
  const untied = { layers: 8, tied: false };
  test("output.weight 256 wide is Q6_K; an untied token_embd takes the default Q4_K", () => {
    expect(ggufTensorType("q4_k_m", "output.weight", [512, 258], untied)).toBe("Q6_K");
    expect(ggufTensorType("q4_k_m", "token_embd.weight", [512, 258], untied)).toBe("Q4_K");
    expect(ggufTensorType("q4_k_m", "token_embd.weight", [512, 258], { ...untied, tied: true })).toBe("Q6_K");
  });
  test("attn_v follows use_more_bits by its layer; other tensors do not", () => {
    expect(ggufTensorType("q4_k_m", "blk.3.attn_v.weight", [512, 128], untied)).toBe("Q6_K");
    expect(ggufTensorType("q4_k_m", "blk.4.attn_v.weight", [512, 128], untied)).toBe("Q4_K");
    expect(ggufTensorType("q4_k_m", "blk.3.attn_q.weight", [512, 512], untied)).toBe("Q4_K");
  });
  test("a width no fallback fits becomes F16; a type without a fallback stays (the writer refuses it)", () => {
    expect(ggufTensorType("q4_k", "blk.0.attn_q.weight", [80, 64], untied)).toBe("F16");
    expect(ggufTensorType("q6_k", "blk.0.attn_q.weight", [80, 64], untied)).toBe("F16");
    expect(ggufTensorType("iq4_nl", "blk.0.attn_q.weight", [80, 64], untied)).toBe("IQ4_NL");
  });
  test("each dtype's default type; unknown dtypes are refused by name", () => {
    expect(ggmlType("q4_k_m")).toBe("Q4_K");
    expect(ggmlType("iq4_nl")).toBe("IQ4_NL");
    // deno-lint-ignore no-explicit-any
    expect(() => ggmlType("q5_k" as any)).toThrow(/unknown GGUF dtype q5_k \(expected f32, .*, q4_k_m\)/);
  });
});

describe("writeGguf's importance option", () => {
  test("a matrix's importance steers its quantizer (lower weighted error), and a wrong width is refused", async () => {
    const dir = await tempDir();
    try {
      const { config, tensors } = testTensors(17, true, { intermediate_size: 256 });
      const name = "model.layers.0.mlp.down_proj.weight"; // ffn_down: Q4_K in a q4_k_m file
      const src = tensors.find((t) => t.name === name)!;
      const imp = new Float32Array(256).map((_, i) => (i % 16 === 0 ? 50 : 1));
      const read = async (file: string, importance?: Record<string, Float32Array>) => {
        await writeGguf(join(dir, file), tensors, config, { type: "q4_k_m", importance });
        const g = await readGguf(join(dir, file));
        expect(g.types[name]).toBe("Q4_K");
        return g.tensors.find((t) => t.name === name)!.data;
      };
      const err = (d: Float32Array) => d.reduce((e, v, i) => e + imp[i % 256] * (v - src.data[i]) ** 2, 0);
      const [plain, weighted] = [await read("plain.gguf"), await read("imp.gguf", { [name]: imp })];
      expect(err(weighted)).toBeLessThan(0.95 * err(plain));
      await expect(writeGguf(join(dir, "bad.gguf"), tensors, config, {
        type: "q4_k_m",
        importance: { [name]: new Float32Array(96) },
      })).rejects.toThrow(
        /importance of model\.layers\.0\.mlp\.down_proj\.weight.*96 weights; expected one per column \(256\)/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

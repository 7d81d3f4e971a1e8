import { describe, expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeQwen3Folder } from "../helpers/qwen3-folder.ts";
import { hfFormat } from "../../formats/huggingface/huggingface.ts";

/** The JSON header of a safetensors file, read by hand. */
function header(path: string): Record<string, { dtype: string; shape: number[]; data_offsets: number[] }> {
  const bytes = readFileSync(path);
  const n = Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0, true));
  const h = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + n)));
  delete h.__metadata__;
  return h;
}

const small = { vocab_size: 300, hidden_size: 16, intermediate_size: 24, head_dim: 8 };

/** The tensor names and dims of a 2-layer Qwen3 of the small shape (4/2 heads, tied), as transformers saves them. */
function expectedTensors(): Array<{ name: string; dims: number[] }> {
  const out = [{ name: "model.embed_tokens.weight", dims: [300, 16] }];
  for (const l of [0, 1]) {
    const p = `model.layers.${l}`;
    out.push(
      { name: `${p}.input_layernorm.weight`, dims: [16] },
      { name: `${p}.self_attn.q_proj.weight`, dims: [32, 16] },
      { name: `${p}.self_attn.k_proj.weight`, dims: [16, 16] },
      { name: `${p}.self_attn.v_proj.weight`, dims: [16, 16] },
      { name: `${p}.self_attn.o_proj.weight`, dims: [16, 32] },
      { name: `${p}.self_attn.q_norm.weight`, dims: [8] },
      { name: `${p}.self_attn.k_norm.weight`, dims: [8] },
      { name: `${p}.post_attention_layernorm.weight`, dims: [16] },
      { name: `${p}.mlp.gate_proj.weight`, dims: [24, 16] },
      { name: `${p}.mlp.up_proj.weight`, dims: [24, 16] },
      { name: `${p}.mlp.down_proj.weight`, dims: [16, 24] },
    );
  }
  out.push({ name: "model.norm.weight", dims: [16] });
  return out;
}

describe("make-qwen3: the independent Qwen3 fixture", () => {
  crossProcessTest("one file holds every tensor of the shape, contiguous, in bf16", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-mq-"));
    await makeQwen3Folder(dir, { shape: small, tokenizerDir: null });
    const h = header(join(dir, "model.safetensors"));
    const plans = expectedTensors();
    expect(Object.keys(h)).toEqual(plans.map((p) => p.name));
    let end = 0;
    for (const p of plans) {
      expect(h[p.name].shape).toEqual(p.dims);
      expect(h[p.name].dtype).toBe("BF16");
      expect(h[p.name].data_offsets[0]).toBe(end);
      end = h[p.name].data_offsets[1];
    }
    expect(end).toBe(plans.reduce((a, p) => a + 2 * p.dims.reduce((x, y) => x * y, 1), 0));
  });

  crossProcessTest(
    "the same seed gives the same bytes, another seed other bytes; shards cover every tensor once",
    async () => {
      const [a, b, c] = [1, 1, 2].map(() => mkdtempSync(join(tmpdir(), "ferry-mq-")));
      await makeQwen3Folder(a, { shape: small, seed: 1, tokenizerDir: null });
      await makeQwen3Folder(b, { shape: small, seed: 1, tokenizerDir: null });
      await makeQwen3Folder(c, { shape: small, seed: 2, tokenizerDir: null, shardBytes: 4000 });
      expect(readFileSync(join(a, "model.safetensors"))).toEqual(readFileSync(join(b, "model.safetensors")));
      const index = JSON.parse(readFileSync(join(c, "model.safetensors.index.json"), "utf8"));
      const shards = [...new Set(Object.values(index.weight_map) as string[])];
      expect(shards.length).toBeGreaterThan(1);
      const named = shards.flatMap((s) => Object.keys(header(join(c, s))));
      expect(named.sort()).toEqual(expectedTensors().map((p) => p.name).sort());
    },
  );

  crossProcessTest(
    "the reduced shape carries the real tokenizer and Qwen3's EOS list, and ferry imports it",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "ferry-mq-"));
      const { params } = await makeQwen3Folder(dir, { peaked: true });
      expect(params).toBe(9_847_232);
      const gen = JSON.parse(readFileSync(join(dir, "generation_config.json"), "utf8"));
      expect(gen.eos_token_id).toEqual([151645, 151643]);
      const tok = JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8"));
      expect(tok.model.type).toBe("BPE");
      const { config, tensors } = await hfFormat.read(dir);
      expect(config.vocab_size).toBe(151936);
      expect(config.head_dim).toBe(32);
      const embed = tensors.find((t) => t.name === "model.embed_tokens.weight")!;
      let sq = 0;
      for (let i = 0; i < 64 * 1000; i++) sq += embed.data[i] ** 2;
      expect(Math.sqrt(sq / 64000)).toBeGreaterThan(0.9); // peaked: a unit-scale embedding
    },
  );
});

crossProcessTest(
  "make-qwen3 --logit-std: the final norm's gain centres on S / (embedding std · √hidden)",
  async () => {
    const read = async (logitStd?: number) => {
      const dir = mkdtempSync(join(tmpdir(), "ferry-mq-"));
      await makeQwen3Folder(dir, { shape: small, tokenizerDir: null, peaked: true, logitStd, dtype: "f32" });
      const { tensors } = await hfFormat.read(dir);
      return (name: string) => tensors.find((t) => t.name === name)!.data;
    };
    const [plain, scaled] = [await read(), await read(3)];
    const gain = scaled("model.norm.weight"), centre = 3 / Math.sqrt(small.hidden_size); // --peaked: std 1
    const mean = gain.reduce((a, b) => a + b, 0) / gain.length;
    expect(Math.abs(mean - centre)).toBeLessThan(0.1 * centre);
    expect(Math.max(...gain.map((g) => Math.abs(g - centre)))).toBeLessThan(0.5 * centre);
    expect(plain("model.norm.weight").reduce((a, b) => a + b, 0) / gain.length).toBeGreaterThan(0.9);
    // Nothing else changes: the same seed gives --peaked's weights.
    expect(scaled("model.layers.0.mlp.down_proj.weight")).toEqual(
      plain("model.layers.0.mlp.down_proj.weight"),
    );
  },
);

crossProcessTest(
  "make-qwen3 --norm-spread: the input norms' gains spread log-uniformly at the plain root mean square",
  async () => {
    const read = async (normSpread?: number) => {
      const dir = mkdtempSync(join(tmpdir(), "ferry-mq-"));
      const shape = { ...small, hidden_size: 256 };
      await makeQwen3Folder(dir, { shape, tokenizerDir: null, normSpread, dtype: "f32" });
      const { tensors } = await hfFormat.read(dir);
      return (name: string) => tensors.find((t) => t.name === name)!.data;
    };
    const [plain, spread] = [await read(), await read(1)];
    for (
      const name of [
        "model.layers.1.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
      ]
    ) {
      const gain = spread(name);
      const rms = Math.sqrt(gain.reduce((a, g) => a + g * g, 0) / gain.length);
      expect(Math.abs(rms - 1)).toBeLessThan(0.25); // 256 draws of a heavy-tailed gain
      // e^(±√3) before scaling by 1/√(sinh(2√3)/(2√3)) ≈ 0.47: 0.083 to 2.64.
      expect(Math.min(...gain)).toBeGreaterThan(0.08);
      expect(Math.max(...gain)).toBeLessThan(2.65);
      expect(Math.max(...gain) / Math.min(...gain)).toBeGreaterThan(15);
      expect(Math.max(...plain(name)) / Math.min(...plain(name))).toBeLessThan(1.2);
    }
    // q_norm feeds no quantized matrix: unchanged, as is every weight.
    expect(spread("model.layers.0.self_attn.q_norm.weight")).toEqual(
      plain("model.layers.0.self_attn.q_norm.weight"),
    );
    expect(spread("model.layers.1.mlp.up_proj.weight")).toEqual(plain("model.layers.1.mlp.up_proj.weight"));
  },
);

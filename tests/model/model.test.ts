// The float reference: the Qwen3 forward against a hand-computed case and an independent naive
// implementation, the KV cache against full recompute, grouped-query attention, and sampling.
import { expect, test } from "bun:test";
import { type ModelConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import { pickToken } from "../../model/sample.ts";
import { checkSampling, GREEDY } from "../../model/sampling.ts";
import { generateAll } from "../../model/generate.ts";
import { floatEngineOf } from "../../engines/float.ts";
import { createRng } from "../../model/random.ts";
import type { Tensor } from "../../model/tensor.ts";

/** A straightforward f64 transcription of Hugging Face's Qwen3 maths, written independently of qwen3.ts. */
function naiveLogits(cfg: ModelConfig, tensors: Tensor[], ids: number[]): number[][] {
  const W = (n: string) => tensors.find((t) => t.name === n)!;
  const mat = (n: string) => {
    const t = W(n);
    return Array.from(
      { length: t.dims[0] },
      (_, r) => Array.from(t.data.subarray(r * t.dims[1], (r + 1) * t.dims[1])),
    );
  };
  const vec = (n: string) => Array.from(W(n).data);
  const lin = (m: number[][], x: number[]) => m.map((row) => row.reduce((s, w, i) => s + w * x[i], 0));
  const norm = (x: number[], w: number[]) => {
    const r = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + cfg.rms_norm_eps);
    return x.map((v, i) => v * r * w[i]);
  };
  const hd = cfg.head_dim, nh = cfg.num_attention_heads, nkv = cfg.num_key_value_heads;
  const rope = (v: number[], pos: number) => {
    const half = hd / 2, out = v.slice();
    for (let i = 0; i < half; i++) {
      const ang = pos / Math.pow(cfg.rope_theta, (2 * i) / hd);
      out[i] = v[i] * Math.cos(ang) - v[i + half] * Math.sin(ang);
      out[i + half] = v[i + half] * Math.cos(ang) + v[i] * Math.sin(ang);
    }
    return out;
  };
  let xs = ids.map((id) => mat("model.embed_tokens.weight")[id]);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    const hs = xs.map((x) => norm(x, vec(p + "input_layernorm.weight")));
    const heads = (m: number[][], n: number, w: number[], pos: number, x: number[]) => {
      const y = lin(m, x);
      return Array.from({ length: n }, (_, h) => rope(norm(y.slice(h * hd, h * hd + hd), w), pos));
    };
    const Q = hs.map((x, t) =>
      heads(mat(p + "self_attn.q_proj.weight"), nh, vec(p + "self_attn.q_norm.weight"), t, x)
    );
    const K = hs.map((x, t) =>
      heads(mat(p + "self_attn.k_proj.weight"), nkv, vec(p + "self_attn.k_norm.weight"), t, x)
    );
    const Vv = hs.map((x) => lin(mat(p + "self_attn.v_proj.weight"), x));
    const att = Q.map((qh, t) =>
      qh.flatMap((q, h) => {
        const g = Math.floor(h / (nh / nkv));
        const s = Array.from({ length: t + 1 }, (_, j) =>
          K[j][g].reduce((a, k, i) => a + k * q[i], 0) / Math.sqrt(hd));
        const mx = Math.max(...s),
          e = s.map((v) =>
            Math.exp(v - mx)
          ),
          z = e.reduce((a, b) => a + b, 0);
        return Array.from(
          { length: hd },
          (_, i) => e.reduce((a, w, j) => a + (w / z) * Vv[j][g * hd + i], 0),
        );
      })
    );
    xs = xs.map((x, t) => lin(mat(p + "self_attn.o_proj.weight"), att[t]).map((v, i) => v + x[i]));
    xs = xs.map((x) => {
      const h = norm(x, vec(p + "post_attention_layernorm.weight"));
      const g = lin(mat(p + "mlp.gate_proj.weight"), h), u = lin(mat(p + "mlp.up_proj.weight"), h);
      const d = lin(mat(p + "mlp.down_proj.weight"), g.map((gi, i) => (gi / (1 + Math.exp(-gi))) * u[i]));
      return d.map((v, i) => v + x[i]);
    });
  }
  const head = mat(cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  return xs.map((x) => lin(head, norm(x, vec("model.norm.weight"))));
}

test("one token, one layer: logits equal a case computed by hand", () => {
  // hidden 2, one head of dim 2, vocab 2, intermediate 1, all norm weights 1, eps 0.
  const cfg: ModelConfig = {
    vocab_size: 2,
    hidden_size: 2,
    intermediate_size: 1,
    num_hidden_layers: 1,
    num_attention_heads: 1,
    num_key_value_heads: 1,
    head_dim: 2,
    rms_norm_eps: 1e-30,
    rope_theta: 10000,
    max_position_embeddings: 4,
    tie_word_embeddings: false,
  };
  const t = (name: string, dims: number[], v: number[]) => ({ name, dims, data: new Float32Array(v) });
  const p = "model.layers.0.";
  const tensors = [
    t("model.embed_tokens.weight", [2, 2], [3, 4, 1, 0]),
    t(p + "input_layernorm.weight", [2], [1, 1]),
    t(p + "self_attn.q_proj.weight", [2, 2], [1, 0, 0, 1]),
    t(p + "self_attn.k_proj.weight", [2, 2], [1, 0, 0, 1]),
    t(p + "self_attn.v_proj.weight", [2, 2], [1, 0, 0, 1]), // v = normed x
    t(p + "self_attn.q_norm.weight", [2], [1, 1]),
    t(p + "self_attn.k_norm.weight", [2], [1, 1]),
    t(p + "self_attn.o_proj.weight", [2, 2], [1, 0, 0, 1]),
    t(p + "post_attention_layernorm.weight", [2], [1, 1]),
    t(p + "mlp.gate_proj.weight", [1, 2], [0, 0]), // gate 0 → silu(0) = 0: the MLP adds nothing
    t(p + "mlp.up_proj.weight", [1, 2], [1, 1]),
    t(p + "mlp.down_proj.weight", [2, 1], [1, 1]),
    t("model.norm.weight", [2], [1, 1]),
    t("lm_head.weight", [2, 2], [1, 0, 0, 1]),
  ];
  // Token 0 has embedding [3, 4]; rms = sqrt((9 + 16) / 2) = 5/√2, so the normed input is [3, 4]·√2/5.
  // A single position attends only to itself: attention output = v = [0.6√2, 0.8√2].
  // Residual: [3 + 0.6√2, 4 + 0.8√2] = (1 + 0.2√2)·[3, 4]; the final norm maps it back to [0.6√2, 0.8√2].
  const model = buildModel(cfg, tensors);
  const logits = forward(model, createCache(model), [0]);
  expect(logits[0]).toBeCloseTo(0.6 * Math.SQRT2, 6);
  expect(logits[1]).toBeCloseTo(0.8 * Math.SQRT2, 6);
});

test("two tokens, one layer: RoPE, q/k norm, causal softmax and a working MLP, against a case computed by hand", () => {
  // hidden 2, one head of dim 2 (so RoPE turns the pair (x0, x1) by `position` radians), vocab 2,
  // intermediate 1, every norm weight 1, eps ~0. Omitting RoPE, turning it the wrong way, skipping the
  // q/k norms, the 1/√head_dim scale or the MLP each moves some logit below by 0.036 or more.
  const cfg: ModelConfig = {
    vocab_size: 2,
    hidden_size: 2,
    intermediate_size: 1,
    num_hidden_layers: 1,
    num_attention_heads: 1,
    num_key_value_heads: 1,
    head_dim: 2,
    rms_norm_eps: 1e-30,
    rope_theta: 10000,
    max_position_embeddings: 4,
    tie_word_embeddings: false,
  };
  const t = (name: string, dims: number[], v: number[]) => ({ name, dims, data: new Float32Array(v) });
  const p = "model.layers.0.";
  const tensors = [
    t("model.embed_tokens.weight", [2, 2], [3, 4, 0, 2]),
    t(p + "input_layernorm.weight", [2], [1, 1]),
    t(p + "self_attn.q_proj.weight", [2, 2], [2, 0, 0, 2]), // q = 2·n: the q norm must undo the 2
    t(p + "self_attn.k_proj.weight", [2, 2], [3, 0, 0, 3]), // k = 3·n: the k norm must undo the 3
    t(p + "self_attn.v_proj.weight", [2, 2], [1, 0, 0, 1]),
    t(p + "self_attn.q_norm.weight", [2], [1, 1]),
    t(p + "self_attn.k_norm.weight", [2], [1, 1]),
    t(p + "self_attn.o_proj.weight", [2, 2], [1, 0, 0, 1]),
    t(p + "post_attention_layernorm.weight", [2], [1, 1]),
    t(p + "mlp.gate_proj.weight", [1, 2], [1, 0]), // gate = h0
    t(p + "mlp.up_proj.weight", [1, 2], [0, 1]), // up = h1
    t(p + "mlp.down_proj.weight", [2, 1], [1, -1]), // adds [a, -a] with a = silu(h0)·h1
    t("model.norm.weight", [2], [1, 1]),
    t("lm_head.weight", [2, 2], [1, 0, 0, 1]),
  ];
  // Normed inputs: n0 = [3, 4]/rms = [0.6√2, 0.8√2]; n1 = [0, 2]/√2 = [0, √2]. v = n.
  // Queries and keys after their norms are n again; RoPE leaves position 0 alone and turns position 1
  // by 1 radian: q1 = k1 = [-√2·sin 1, √2·cos 1].
  // Position 0 attends to itself: att0 = n0. Position 1: scores q1·k0/√2 = √2(0.8 cos 1 − 0.6 sin 1)
  // = -0.1027295 and q1·k1/√2 = √2 = 1.4142136; softmax [0.1799121, 0.8200879];
  // att1 = 0.1799121·n0 + 0.8200879·n1 = [0.1526605, 1.3633267].
  // Residual: x0 = [3.8485281, 5.1313708], x1 = [0.1526605, 3.3633267].
  // Post-attention norm h = x/rms(x): h0 = [0.8485281, 1.1313708], h1 = [0.0641247, 1.4127590].
  // MLP a = silu(h[0])·h[1] = h0·h1/(1 + e^-h0): a0 = 0.6722480, a1 = 0.0467482.
  // Out: x0 + [a0, -a0] = [4.5207761, 4.4591229]; x1 + [a1, -a1] = [0.1994087, 3.3165785].
  // Final norm (the logits, lm_head = I): [1.0068420, 0.9931109] and [0.0848761, 1.4116643].
  const model = buildModel(cfg, tensors);
  const logits = forward(model, createCache(model), [0, 1]);
  expect(logits.length).toBe(4);
  const want = [1.0068420, 0.9931109, 0.0848761, 1.4116643];
  for (let i = 0; i < 4; i++) expect(Math.abs(logits[i] - want[i])).toBeLessThan(2e-6);
  // The same case decoded one token at a time through the cache gives the same numbers.
  const cache = createCache(model);
  const stepwise = [...forward(model, cache, [0]), ...forward(model, cache, [1])];
  expect(stepwise).toEqual([...logits]);
});

test("forward equals an independent naive implementation (GQA, untied and tied)", () => {
  for (const tied of [false, true]) {
    const cfg = { ...PRESETS.tiny, tie_word_embeddings: tied };
    const tensors = initParams(cfg, 11, 0.2);
    const ids = [256, 84, 104, 101, 32, 106, 117, 114, 121];
    const model = buildModel(cfg, tensors);
    const got = forward(model, createCache(model), ids);
    const want = naiveLogits(cfg, tensors, ids);
    let worst = 0;
    want.forEach((row, t) =>
      row.forEach((v, i) => (worst = Math.max(worst, Math.abs(v - got[t * cfg.vocab_size + i]))))
    );
    expect(worst).toBeLessThan(1e-4);
  }
});

test("KV-cached prefill + one-token decode gives the same bits as full recompute", () => {
  const cfg = PRESETS.tiny;
  const model = buildModel(cfg, initParams(cfg, 5, 0.3));
  const ids = [256, 10, 20, 30, 40, 50, 60, 70, 80, 90];
  const V = cfg.vocab_size;
  const full = forward(model, createCache(model), ids);
  const cache = createCache(model);
  const pre = forward(model, cache, ids.slice(0, 4));
  expect(Array.from(pre)).toEqual(Array.from(full.subarray(0, 4 * V)));
  for (let t = 4; t < ids.length; t++) {
    const step = forward(model, cache, [ids[t]]);
    expect(Array.from(step)).toEqual(Array.from(full.subarray(t * V, (t + 1) * V)));
  }
  expect(cache.length).toBe(ids.length);
});

test("grouped-query attention equals full multi-head attention with each KV head repeated", () => {
  const cfg = PRESETS.tiny; // 4 query heads share 2 KV heads
  const tensors = initParams(cfg, 9, 0.3);
  const mha: ModelConfig = { ...cfg, num_key_value_heads: cfg.num_attention_heads };
  const hd = cfg.head_dim, H = cfg.hidden_size, group = cfg.num_attention_heads / cfg.num_key_value_heads;
  const widened = tensors.map((t) => {
    if (!/[kv]_proj/.test(t.name)) return t;
    const data = new Float32Array(cfg.num_attention_heads * hd * H);
    for (let h = 0; h < cfg.num_attention_heads; h++) {
      const g = Math.floor(h / group);
      data.set(t.data.subarray(g * hd * H, (g + 1) * hd * H), h * hd * H);
    }
    return { name: t.name, dims: [cfg.num_attention_heads * hd, H], data };
  });
  const ids = [256, 1, 2, 3, 4, 5, 6];
  const a = buildModel(cfg, tensors), b = buildModel(mha, widened);
  const la = forward(a, createCache(a), ids), lb = forward(b, createCache(b), ids);
  let worst = 0;
  for (let i = 0; i < la.length; i++) worst = Math.max(worst, Math.abs(la[i] - lb[i]));
  expect(worst).toBeLessThan(1e-5);
});

test("buildModel refuses a missing tensor, a wrong shape and an unknown name", () => {
  const cfg = PRESETS.tiny;
  const tensors = initParams(cfg, 1);
  expect(() => buildModel(cfg, tensors.slice(1), "x.bin")).toThrow(
    /x\.bin: missing tensor model\.embed_tokens\.weight/,
  );
  const bad = tensors.map((
    t,
  ) => (t.name === "model.norm.weight" ? { ...t, dims: [cfg.hidden_size + 1] } : t));
  expect(() => buildModel(cfg, bad)).toThrow(/model\.norm\.weight has dims/);
  expect(() => buildModel(cfg, [...tensors, { name: "extra.bias", dims: [1], data: new Float32Array(1) }]))
    .toThrow(/unknown tensor extra\.bias/);
});

test("a position past max_position_embeddings and a token outside the vocabulary are refused", () => {
  const cfg = PRESETS.tiny;
  const model = buildModel(cfg, initParams(cfg, 1));
  expect(() => forward(model, createCache(model), [258])).toThrow(/outside \[0, 258\)/);
  expect(() => forward(model, createCache(model), new Array(cfg.max_position_embeddings + 1).fill(1)))
    .toThrow(/exceed|past/);
});

test("greedy picks the argmax; seeded sampling repeats; top-p near 0 is greedy", () => {
  const logits = new Float32Array([0.1, 2.5, 2.4, -1]);
  expect(pickToken(logits, 0, 4, GREEDY, createRng(1))).toBe(1);
  const warm = checkSampling({ temperature: 1 });
  const draw = (seed: number) => {
    const r = createRng(seed);
    return Array.from({ length: 50 }, () => pickToken(logits, 0, 4, warm, r));
  };
  expect(draw(3)).toEqual(draw(3));
  expect(new Set(draw(3)).size).toBeGreaterThan(1);
  const r = createRng(4);
  const nucleus = checkSampling({ temperature: 1, topP: 1e-9 });
  for (let i = 0; i < 20; i++) expect(pickToken(logits, 0, 4, nucleus, r)).toBe(1);
});

test("generation: greedy decoding with the cache equals argmax of full recompute at every step", async () => {
  const cfg = PRESETS.tiny;
  const model = buildModel(cfg, initParams(cfg, 2, 0.5));
  const prompt = [256, 72, 105];
  const out = await generateAll(floatEngineOf(model), prompt, { maxTokens: 12, stopAtEos: false });
  expect(out.length).toBe(12);
  const ids = prompt.slice();
  for (const tok of out) {
    const l = forward(model, createCache(model), ids);
    const row = l.subarray((ids.length - 1) * cfg.vocab_size);
    expect(row.indexOf(Math.max(...row))).toBe(tok);
    ids.push(tok);
  }
});

// Every hand-written backward against central finite differences, op by op and for the whole model.
import { expect, test } from "bun:test";
import { rmsnorm, ropeHead, ropeTables, silu } from "../kernels/cpu.ts";
import {
  attentionBackward,
  attentionForward,
  crossEntropyBackward,
  rmsnormBackward,
  ropeBackward,
  swigluBackward,
} from "../kernels/cpu-grad.ts";
import { PRESETS, type ModelConfig } from "../model/config.ts";
import { initParams } from "../model/init.ts";
import { createRng } from "../model/random.ts";
import { buildModel, createCache, forward } from "../model/qwen3.ts";
import { createScratch, flattenTensors, paramLayout, sequenceLossAndGrad, viewTensors } from "../model/train.ts";
import { logSoftmax } from "../model/measure.ts";

const rng = createRng(7);
const randn = (n: number, s = 1) => Float32Array.from({ length: n }, () => rng.normal() * s);

/**
 * Checks an analytic gradient against (f(x+h) - f(x-h)) / 2h at every coordinate of `x`.
 * `loss` must read `x` afresh each call. f32 storage limits precision, hence the loose tolerance.
 */
function checkGrad(x: Float32Array, analytic: Float32Array, loss: () => number, h = 1e-2, tol = 2e-2) {
  let worst = 0;
  for (let i = 0; i < x.length; i++) {
    const keep = x[i];
    x[i] = keep + h;
    const up = loss();
    x[i] = keep - h;
    const down = loss();
    x[i] = keep;
    const numeric = (up - down) / (2 * h);
    const err = Math.abs(numeric - analytic[i]) / Math.max(1, Math.abs(numeric) + Math.abs(analytic[i]));
    worst = Math.max(worst, err);
  }
  expect(worst).toBeLessThan(tol);
  return worst;
}

/** A fixed random linear read-out turns any output into a scalar loss: L = sum(y * r). */
function readout(n: number) {
  const r = randn(n);
  return { r, loss: (y: Float32Array) => y.reduce((acc, v, i) => acc + v * r[i], 0) };
}

test("rmsnorm backward matches finite differences (x and weight)", () => {
  const rows = 3, dim = 8, eps = 1e-6;
  const x = randn(rows * dim), w = randn(dim, 0.5).map((v) => v + 1);
  const { r, loss } = readout(rows * dim);
  const y = new Float32Array(rows * dim), rstd = new Float32Array(rows);
  const f = () => (rmsnorm(y, x, w, rows, dim, eps), loss(y));
  f();
  const dx = new Float32Array(rows * dim), dw = new Float32Array(dim);
  rmsnormBackward(dx, dw, r, x, w, (rmsnorm(y, x, w, rows, dim, eps, rstd), rstd), rows, dim);
  checkGrad(x, dx, f);
  checkGrad(w, dw, f);
});

test("rope backward is the transpose of rope", () => {
  const hd = 8, pos = 5, t = ropeTables(16, hd, 10000);
  const v = randn(hd), { r, loss } = readout(hd);
  const f = () => {
    const c = v.slice();
    ropeHead(c, 0, pos, t);
    return loss(c);
  };
  const d = r.slice();
  ropeBackward(d, 0, pos, t);
  checkGrad(v, d, f, 1e-2, 1e-3);
});

test("swiglu backward matches finite differences", () => {
  const n = 16, g = randn(n, 2), u = randn(n);
  const { r, loss } = readout(n);
  const f = () => loss(g.map((gi, i) => silu(gi) * u[i]));
  const dg = new Float32Array(n), du = new Float32Array(n);
  swigluBackward(dg, du, r, g, u);
  checkGrad(g, dg, f);
  checkGrad(u, du, f);
});

test("causal GQA attention backward matches finite differences (q, k, v)", () => {
  const shape = { T: 5, heads: 4, kvHeads: 2, headDim: 4 };
  const qDim = 16, kvDim = 8;
  const q = randn(shape.T * qDim), k = randn(shape.T * kvDim), v = randn(shape.T * kvDim);
  const out = new Float32Array(shape.T * qDim), probs = new Float32Array(4 * 25);
  const { r, loss } = readout(shape.T * qDim);
  const f = () => (attentionForward(out, probs, q, k, v, shape), loss(out));
  f();
  const dq = new Float32Array(q.length), dk = new Float32Array(k.length), dv = new Float32Array(v.length);
  attentionBackward(dq, dk, dv, r, probs, q, k, v, shape);
  checkGrad(q, dq, f);
  checkGrad(k, dk, f);
  checkGrad(v, dv, f);
});

test("cross-entropy backward matches finite differences and returns the loss", () => {
  const T = 3, V = 6, logits = randn(T * V), targets = [1, 5, 0];
  const f = () => crossEntropyBackward(logits.slice(), targets, V, 1);
  const d = logits.slice();
  const loss = crossEntropyBackward(d, targets, V, 1);
  const lp = new Float64Array(V);
  let expected = 0;
  for (let t = 0; t < T; t++) logSoftmax(logits, t * V, V, lp), expected -= lp[targets[t]];
  expect(loss).toBeCloseTo(expected, 5);
  checkGrad(logits, d, f);
});

function smallConfig(tied: boolean): ModelConfig {
  return { ...PRESETS.tiny, hidden_size: 8, intermediate_size: 12, head_dim: 4, vocab_size: 258, tie_word_embeddings: tied };
}

for (const tied of [false, true]) {
  test(`whole-model gradient matches finite differences (tie_word_embeddings = ${tied})`, () => {
    const cfg = smallConfig(tied);
    const layout = paramLayout(cfg);
    const params = flattenTensors(layout, initParams(cfg, 3, 0.3));
    const inputs = [256, 72, 101, 108, 108, 111], targets = [72, 101, 108, 108, 111, 33];
    const scratch = createScratch(cfg, inputs.length);
    const grads = new Float32Array(layout.size);
    const loss0 = sequenceLossAndGrad(cfg, layout, params, grads, inputs, targets, scratch);
    // The training forward and the inference forward are the same maths.
    const model = buildModel(cfg, viewTensors(layout, params));
    const logits = forward(model, createCache(model), inputs);
    const lp = new Float64Array(cfg.vocab_size);
    let ref = 0;
    for (let t = 0; t < inputs.length; t++) logSoftmax(logits, t * cfg.vocab_size, cfg.vocab_size, lp), ref -= lp[targets[t]];
    expect(Math.abs(loss0 - ref)).toBeLessThan(1e-4);
    const lossOnly = () => sequenceLossAndGrad(cfg, layout, params, new Float32Array(layout.size), inputs, targets, scratch);
    // Check a spread of coordinates in every tensor (all of them would take too long).
    for (const e of layout.entries) {
      const idx = [...new Set(Array.from({ length: 6 }, (_, j) => e.offset + Math.floor((j * e.length) / 6)))];
      // Embedding rows only get gradient for tokens in the input; pick those for the embedding.
      if (e.name === "model.embed_tokens.weight") idx.splice(0, idx.length, ...inputs.slice(0, 3).map((id) => e.offset + id * cfg.hidden_size + 1));
      const sub = new Float32Array(idx.length), ana = new Float32Array(idx.length);
      idx.forEach((i, j) => (sub[j] = params[i], ana[j] = grads[i]));
      checkGrad(sub, ana, () => {
        idx.forEach((i, j) => (params[i] = sub[j]));
        return lossOnly();
      }, 1e-2, 3e-2);
      idx.forEach((i, j) => (params[i] = sub[j]));
    }
  });
}

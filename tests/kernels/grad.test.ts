// Every hand-written backward against central finite differences, op by op and for the whole model.
import { expect, test } from "bun:test";
import { rmsnorm, ropeHead, ropeTables, silu } from "../../kernels/cpu.ts";
import {
  attentionBackward,
  attentionForward,
  crossEntropyBackward,
  rmsnormBackward,
  ropeBackward,
  swigluBackward,
} from "../../kernels/cpu-grad.ts";
import { type ModelConfig, PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { createRng } from "../../model/random.ts";
import { buildModel, createCache, forward } from "../../model/qwen3.ts";
import {
  createScratch,
  flattenTensors,
  paramLayout,
  sequenceLossAndGrad,
  viewTensors,
} from "../../model/train.ts";
import { logSoftmax } from "../../measure/metrics.ts";

const rng = createRng(7);
const randn = (n: number, s = 1) => Float32Array.from({ length: n }, () => rng.normal() * s);

/** Central difference (f(x+h) - f(x-h)) / (x+h - x-h) at every coordinate of `x` (stored in f32). */
function numericGrad(x: Float32Array, loss: () => number, h: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const keep = x[i];
    x[i] = keep + h;
    const up = loss(), xUp = x[i];
    x[i] = keep - h;
    const down = loss(), xDown = x[i];
    x[i] = keep;
    out[i] = (up - down) / (xUp - xDown); // the step actually taken, after f32 rounding of x ± h
  }
  return out;
}

/**
 * Where an analytic gradient disagrees with a numeric one, as relative errors with sound denominators:
 * `tensor` = ‖num − ana‖₂ / max(‖num‖₂, ‖ana‖₂), so a zeroed gradient scores 1, a halved one 0.5;
 * `entries` = the entries where |num − ana| > RTOL · max(|num|, |ana|) + ATOL. ATOL is the noise floor
 * of a finite difference of an f32 loss (measured below); it only matters where both are near zero.
 */
function gradError(num: ArrayLike<number>, ana: ArrayLike<number>, rtol: number, atol: number) {
  if (num.length !== ana.length) throw new Error(`lengths differ: ${num.length} vs ${ana.length}`);
  let dd = 0, nn = 0, aa = 0, entries = 0;
  for (let i = 0; i < num.length; i++) {
    const d = num[i] - ana[i];
    dd += d * d, nn += num[i] * num[i], aa += ana[i] * ana[i];
    if (Math.abs(d) > rtol * Math.max(Math.abs(num[i]), Math.abs(ana[i])) + atol) entries++;
  }
  const norm = Math.sqrt(Math.max(nn, aa));
  return { tensor: norm === 0 ? 0 : Math.sqrt(dd) / norm, entries, norm };
}

/** The gradient bugs a check must catch: zeroed, halved, and laid out transposed (reversed if 1-D). */
function mutations(g: Float32Array, dims: number[]): Array<[string, Float32Array]> {
  const moved = new Float32Array(g.length);
  if (dims.length === 2) {
    // The [C, R] transpose written where [R, C] belongs: what a swapped operand order produces.
    const [R, C] = dims;
    for (let r = 0; r < R; r++) for (let c = 0; c < C; c++) moved[c * R + r] = g[r * C + c];
  } else moved.set(g.slice().reverse());
  return [["zeroed", new Float32Array(g.length)], ["halved", g.map((v) => v / 2)], [
    dims.length === 2 ? "transposed" : "reversed",
    moved,
  ]];
}

/**
 * Checks an analytic gradient against central differences at every coordinate of `x`, and that the same
 * check refuses the gradient zeroed, halved and transposed. `loss` must read `x` afresh each call.
 * Bounds: these op-level cases measure a tensor error of at most 2e-5 and entry errors within 8e-4
 * relative and 3.1e-5 absolute at h = 1e-2 (bun, x86-64); the limits are 10× that.
 */
function checkGrad(x: Float32Array, analytic: Float32Array, loss: () => number, dims = [analytic.length]) {
  const num = numericGrad(x, loss, 1e-2);
  const verdict = (g: Float32Array) => {
    const e = gradError(num, g, 1e-2, 3e-4);
    return e.tensor < 2e-4 && e.entries === 0;
  };
  expect(gradError(num, analytic, 1e-2, 3e-4).norm).toBeGreaterThan(1e-2); // an all-zero gradient proves nothing
  expect(gradError(num, analytic, 1e-2, 3e-4)).toMatchObject({ entries: 0 });
  expect(gradError(num, analytic, 1e-2, 3e-4).tensor).toBeLessThan(2e-4);
  for (const [name, bad] of mutations(analytic, dims)) {
    expect(`${name}: ${verdict(bad)}`).toBe(`${name}: false`);
  }
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
  checkGrad(v, d, f);
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
  return {
    ...PRESETS.tiny,
    hidden_size: 8,
    intermediate_size: 12,
    head_dim: 4,
    vocab_size: 258,
    tie_word_embeddings: tied,
  };
}

/**
 * Whole-model check bounds at h = 1e-3 (f32 loss summed over 6 tokens). Measured on both configs below
 * (bun 1.4.5, x86-64): tensor error at most 4.4e-4; entry differences at most 5.7e-3 on gradients up to
 * 24 (the embedding, 0.03% relative) and 4.5e-4 where |gradient| < 0.05. h = 3e-3 leaves one
 * embedding entry 4% off (curvature of the RMSNorm after a small embedding row); h = 1e-2 is 10× worse.
 * The tensor limit is 11× the worst measured; the entry limit (1% relative + 1e-3) is 2× the noise floor.
 */
const MODEL_TENSOR_TOL = 5e-3, MODEL_RTOL = 1e-2, MODEL_ATOL = 1e-3;

for (const tied of [false, true]) {
  test(
    `whole-model gradient matches finite differences at every coordinate (tie_word_embeddings = ${tied})`,
    () => {
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
      for (let t = 0; t < inputs.length; t++) {
        logSoftmax(logits, t * cfg.vocab_size, cfg.vocab_size, lp), ref -= lp[targets[t]];
      }
      expect(Math.abs(loss0 - ref)).toBeLessThan(1e-4);
      const junk = new Float32Array(layout.size);
      const num = numericGrad(
        params,
        () => sequenceLossAndGrad(cfg, layout, params, junk, inputs, targets, scratch),
        1e-3,
      );
      const failures: string[] = [], caught: string[] = [];
      for (const e of layout.entries) {
        const n = num.subarray(e.offset, e.offset + e.length),
          a = grads.subarray(e.offset, e.offset + e.length);
        const err = gradError(n, a, MODEL_RTOL, MODEL_ATOL);
        expect(err.norm).toBeGreaterThan(0.1); // every tensor's gradient is far from zero: no tensor is checked vacuously
        if (err.tensor >= MODEL_TENSOR_TOL || err.entries > 0) {
          failures.push(`${e.name}: ${JSON.stringify(err)}`);
        }
        // The mutation test: the same check must refuse each broken gradient of each tensor.
        for (const [how, bad] of mutations(a, e.dims)) {
          const m = gradError(n, bad, MODEL_RTOL, MODEL_ATOL);
          if (m.tensor < MODEL_TENSOR_TOL && m.entries === 0) {
            caught.push(`${e.name} ${how} passes`);
          }
        }
      }
      expect(failures).toEqual([]);
      expect(caught).toEqual([]);
      // The output head's large entries sit in the target rows (the softmax's -1): they are checked, and
      // they dominate its gradient. Rows of tokens never targeted carry only the softmax mass.
      const head = layout.entries.find((e) =>
        e.name === (tied ? "model.embed_tokens.weight" : "lm_head.weight")
      )!;
      const H = cfg.hidden_size;
      let targetMax = 0, otherMax = 0;
      for (let row = 0; row < cfg.vocab_size; row++) {
        for (let i = 0; i < H; i++) {
          const g = Math.abs(num[head.offset + row * H + i]);
          if (targets.includes(row)) targetMax = Math.max(targetMax, g);
          else if (!inputs.includes(row)) otherMax = Math.max(otherMax, g);
        }
      }
      expect(targetMax).toBeGreaterThan(0.5);
      expect(otherMax).toBeLessThan(targetMax / 10);
    },
    60_000,
  ); // an explicit limit: bun applies the preload's default timeout to the first file only
}

// The fast lut4 quantizer gives the bits of the exhaustive search it replaced: every group's scale equals
// a plain 48-candidate search's (a reference written out here), on plain and weighted matrices with
// outliers, all-zero and constant groups, and groups pushed to the bottom of exp_base's range; its
// rounding is Math.round's; a matrix read a few rows at a time, and a model streamed to its file one
// matrix at a time, give the same bytes as the in-memory path.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CHECKPOINT, scratchDir } from "../helpers/lut4-fixture.ts";
import { lut4Format, writeLut4 } from "../../formats/lut4/lut4.ts";
import {
  quantizeMatrix,
  quantizeModel,
  quantizeModelStreamed,
  quantizePool,
  roundHalfUp,
  rowQuantizer,
} from "../../quantize/lut4-quantize.ts";
import type { LutMatrix } from "../../kernels/int/gemv.ts";
import { validateConfig } from "../../model/config.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { tensorSource } from "../../model/tensor.ts";

/** xorshift32 in [0, 1). */
function random(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13, s >>>= 0, s ^= s >>> 17, s ^= s << 5, s >>>= 0;
    return s / 2 ** 32;
  };
}

// The reference: the search as it was first written, every (m, E) summed in full, strict < in order.
function referenceScale(
  w: Float64Array,
  off: number,
  eLo: number,
  eHi: number,
  imp: Float64Array,
  io: number,
) {
  let best = { m: 0, e: eLo, sse: Infinity };
  for (let e = eLo; e <= eHi; e++) {
    for (let m = 0; m < 16; m++) {
      const s = (16 + m) * 2 ** (e - 4);
      let sse = 0;
      for (let i = 0; i < 32; i++) {
        const q = Math.max(-8, Math.min(7, Math.round(w[off + i] / s)));
        const d = w[off + i] - q * s;
        sse += d * d * imp[io + i];
      }
      if (sse < best.sse) best = { m, e, sse };
    }
  }
  return best;
}

function referenceMatrix(data: Float32Array, rows: number, cols: number, importance?: Float64Array) {
  const w = Float64Array.from(data), groups = (rows * cols) / 32;
  const imp = importance ?? new Float64Array(32).fill(1), below = importance ? 2 : 1;
  const at = (g: number) => (importance ? (g * 32) % cols : 0);
  const ec = (g: number) => {
    let a = 0;
    for (let i = 0; i < 32; i++) a = Math.max(a, Math.abs(w[g * 32 + i]));
    return a === 0 ? NaN : Math.floor(Math.log2(a / 8));
  };
  const es = new Int32Array(groups);
  let eMax = -Infinity;
  for (let g = 0; g < groups; g++) {
    if (Number.isNaN(ec(g))) continue;
    es[g] = referenceScale(w, g * 32, ec(g) - below, ec(g) + 1, imp, at(g)).e;
    eMax = Math.max(eMax, es[g]);
  }
  const expBase = Number.isFinite(eMax) ? eMax - 15 : 0;
  const scales = new Uint8Array(groups);
  for (let g = 0; g < groups; g++) {
    if (Number.isNaN(ec(g))) continue;
    const lo = Math.max(expBase, es[g] - 1), hi = Math.min(expBase + 15, Math.max(lo, es[g] + 1));
    const { m, e } = referenceScale(w, g * 32, lo, hi, imp, at(g));
    scales[g] = ((e - expBase) << 4) | m;
  }
  return { expBase, scales };
}

/** A matrix with the cases a pruned search could get wrong. */
function awkwardMatrix(rows: number, cols: number, seed: number): Float32Array {
  const r = random(seed), out = new Float32Array(rows * cols);
  for (let g = 0; g < out.length / 32; g++) {
    const kind = Math.floor(r() * 8), scale = 0.02 * 2 ** Math.floor(r() * 6 - 3);
    // Multiples of a grid scale s within ±3: s and s/2 both round them exactly, a tie.
    const grid = (16 + Math.floor(r() * 16)) * 2 ** (Math.floor(r() * 4) - 12);
    for (let i = 0; i < 32; i++) {
      const k = g * 32 + i, gauss = Math.sqrt(-2 * Math.log(r() + 1e-12)) * Math.cos(2 * Math.PI * r());
      out[k] = kind === 0
        ? 0 // all zero
        : kind === 1
        ? scale // constant: many scales tie
        : kind === 2
        ? (i === 5 ? 40 * scale : gauss * scale) // one outlier
        : kind === 3
        ? gauss * scale * 2 ** -22 // far below exp_base: the search is clamped
        : kind === 4
        ? (i === 0 ? 3 : Math.floor(r() * 7) - 3) * grid // exact on the grid: ties
        : gauss * scale;
    }
  }
  return out;
}

test("roundHalfUp is Math.round: halves, the value below one half, negatives, random values", () => {
  const edge = [0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 7.5, -8.5, 0.49999999999999994, -0.49999999999999994];
  edge.push(1.4999999999999998, -1.5000000000000002, 0, -0, 1e-300, -7.499999999999999, 1e15 + 0.5);
  for (const v of edge) expect(Object.is(roundHalfUp(v) + 0, Math.round(v) + 0)).toBe(true);
  const r = random(9);
  for (let i = 0; i < 200_000; i++) {
    const v = (r() - 0.5) * 40, h = Math.floor(v) + 0.5;
    expect(roundHalfUp(v)).toBe(Math.round(v) + 0);
    // Values next to a half, where floor(v + 0.5) alone goes wrong.
    for (const x of [h, h - Number.EPSILON * Math.abs(h), h + Number.EPSILON * Math.abs(h)]) {
      expect(roundHalfUp(x)).toBe(Math.round(x) + 0);
    }
  }
});

test("every group's scale is the exhaustive search's, plain and weighted", () => {
  for (const [rows, cols, seed] of [[24, 256, 1], [40, 96, 2], [8, 1024, 3]]) {
    const data = awkwardMatrix(rows, cols, seed);
    const r = random(seed + 100);
    // Importance with zeros and a wide spread, as calibration statistics have.
    const imp = Float64Array.from({ length: cols }, (_, c) => (c % 17 === 0 ? 0 : r() * r() * 10));
    for (const importance of [undefined, imp]) {
      const want = referenceMatrix(data, rows, cols, importance);
      const got = quantizeMatrix("m", data, rows, cols, importance).matrix;
      expect(got.expBase).toBe(want.expBase);
      expect(Buffer.from(got.scales).equals(Buffer.from(want.scales))).toBe(true);
    }
  }
});

test("a matrix fed a few rows at a time gives the bytes of the whole at once", () => {
  const rows = 30, cols = 128, data = awkwardMatrix(rows, cols, 5);
  const whole = quantizeMatrix("m", data, rows, cols);
  for (const per of [1, 7, 30]) {
    const q = rowQuantizer("m", rows, cols);
    const block = (r0: number) =>
      Float64Array.from(data.subarray(r0 * cols, Math.min(rows, r0 + per) * cols));
    for (let r0 = 0; r0 < rows; r0 += per) q.survey(block(r0), r0);
    for (let r0 = 0; r0 < rows; r0 += per) q.encode(block(r0), r0);
    const { matrix, error } = q.result();
    expect(matrix.expBase).toBe(whole.matrix.expBase);
    expect(Buffer.from(matrix.nibbles).equals(Buffer.from(whole.matrix.nibbles))).toBe(true);
    expect(Buffer.from(matrix.scales).equals(Buffer.from(whole.matrix.scales))).toBe(true);
    // The error is summed per block of rows: equal up to the order of the additions.
    expect(error.relRmse).toBeCloseTo(whole.error.relRmse, 12);
    expect(error.maxAbsError).toBe(whole.error.maxAbsError);
  }
  expect(() => rowQuantizer("m", rows, cols).survey(new Float64Array(cols + 32), 0)).toThrow(/whole rows/);
});

test("the streamed export writes the bytes of the in-memory quantizer and writer, and leaves no spool", async () => {
  const ck = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const dir = scratchDir();
  for (const [dtype, head] of [["q4", "tied"], ["q4-head", "separate"]] as const) {
    const streamed = join(dir, `s.${dtype}.lut4`), held = join(dir, `h.${dtype}.lut4`);
    const input = {
      config: ck.config,
      tensors: ck.model!.map(tensorSource),
      source: "x",
      step: 0,
      name: "m",
    };
    await lut4Format.write(streamed, input, { dtype });
    const { weights } = quantizeModel(ck.config, ck.model!, { head });
    await writeLut4(held, weights, {
      source: "x",
      ropeTheta: ck.config.rope_theta,
      rmsNormEps: ck.config.rms_norm_eps,
      quantizer: { head, scale_search: "mse", grid: "(16+m)*2^(e-4)" },
    });
    expect(readFileSync(streamed).equals(readFileSync(held))).toBe(true);
  }
  const { readdirSync } = await import("node:fs");
  expect(readdirSync(dir).filter((f) => f.includes(".data"))).toEqual([]);
});

test("a pool of workers gives the same matrices and errors as one thread, for a matrix of several blocks", async () => {
  const config = validateConfig({
    vocab_size: 8200, // the embedding: 8200 x 256, two blocks of rows
    hidden_size: 256,
    intermediate_size: 512,
    num_hidden_layers: 1,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 64,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 64,
    tie_word_embeddings: true,
  }, "test");
  const r = random(11);
  const names: [string, number[]][] = [["model.embed_tokens.weight", [8200, 256]], ["model.norm.weight", [
    256,
  ]]];
  const p = "model.layers.0.";
  names.push([p + "input_layernorm.weight", [256]], [p + "post_attention_layernorm.weight", [256]]);
  names.push([p + "self_attn.q_proj.weight", [256, 256]], [p + "self_attn.k_proj.weight", [128, 256]]);
  names.push([p + "self_attn.v_proj.weight", [128, 256]], [p + "self_attn.o_proj.weight", [256, 256]]);
  names.push([p + "self_attn.q_norm.weight", [64]], [p + "self_attn.k_norm.weight", [64]]);
  names.push([p + "mlp.gate_proj.weight", [512, 256]], [p + "mlp.up_proj.weight", [512, 256]]);
  names.push([p + "mlp.down_proj.weight", [256, 512]]);
  const tensors = names.map(([name, dims]) => ({
    name,
    dims,
    data: Float32Array.from(
      { length: dims.reduce((a, b) => a * b) },
      () => (r() - 0.5) * (dims.length > 1 ? 0.1 : 2),
    ),
  }));
  const run = async (pool?: ReturnType<typeof quantizePool>) => {
    const got: LutMatrix[] = [];
    const out = await quantizeModelStreamed(
      config,
      tensors.map(tensorSource),
      { head: "tied", pool },
      (m) => {
        got.push(m);
        return Promise.resolve();
      },
    );
    return { got, errors: out.errors };
  };
  const alone = await run();
  const pool = quantizePool(2);
  const pooled = await run(pool).finally(() => pool.close());
  const held = quantizeModel(config, tensors, { head: "tied" });
  expect(pooled.errors).toEqual(alone.errors);
  expect(held.errors).toEqual(alone.errors);
  expect(pooled.got.length).toBe(8);
  for (const [i, m] of pooled.got.entries()) {
    expect(m.expBase).toBe(alone.got[i].expBase);
    expect(Buffer.from(m.nibbles).equals(Buffer.from(alone.got[i].nibbles))).toBe(true);
    expect(Buffer.from(m.scales).equals(Buffer.from(alone.got[i].scales))).toBe(true);
  }
  expect(Buffer.from(held.weights.embed.nibbles).equals(Buffer.from(pooled.got[0].nibbles))).toBe(true);
});

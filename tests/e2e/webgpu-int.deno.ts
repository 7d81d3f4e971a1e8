// Run by tests/e2e/webgpu-int.test.ts under Deno: the WGSL lut4 kernel against the CPU integer kernel
// (kernels/int/gemv.ts), bit for bit, on random matrices of many shapes and exponents, on inputs that
// drive every rounding and saturation path, and on every lut4 matrix of the default model.
// Prints one JSON line: counts and the first mismatch, or `skip` with the reason when there is no adapter.
import { activationTables, gemv, type LutMatrix, prepareMatrix } from "../../kernels/int/gemv.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { lut4Format, readLut4 } from "../../formats/lut4/lut4.ts";
import { tensorSource } from "../../model/tensor.ts";
import { GpuUnavailable, openGpu } from "../../kernels/webgpu/device.ts";
import { gpuLut4 } from "../helpers/webgpu-lut4.ts";
import { createRng } from "../../model/random.ts";

let gpu;
try {
  gpu = await openGpu();
} catch (e) {
  if (!(e instanceof GpuUnavailable)) throw e;
  console.log(JSON.stringify({ skip: e.message }));
  Deno.exit(0);
}
const lut = gpuLut4(gpu);
const rng = createRng(12);
const int = (lo: number, hi: number) => lo + rng.int(hi - lo + 1);

function randomMatrix(name: string, rows: number, cols: number, kind: string): LutMatrix {
  const nibbles = new Uint8Array(rows * cols / 2), scales = new Uint8Array(rows * cols / 32);
  for (let i = 0; i < nibbles.length; i++) {
    nibbles[i] = kind === "max" ? 0xff : kind === "min" ? 0 : rng.int(256);
  }
  for (let i = 0; i < scales.length; i++) scales[i] = kind === "random" ? rng.int(256) : 0xff;
  return { name, rows, cols, expBase: int(-12, 2), nibbles, scales };
}

const cases: { mat: LutMatrix; x: Int32Array; xExp: number; outExp: number }[] = [];
const shapes = [[1, 32], [3, 64], [96, 96], [258, 96], [96, 256], [256, 96], [64, 1024], [7, 8192]];
for (const [rows, cols] of shapes) {
  for (const kind of ["random", "random", "max", "min"]) {
    const mat = randomMatrix(`${kind} ${rows}x${cols}`, rows, cols, kind);
    const extreme = kind !== "random";
    const x = Int32Array.from(
      { length: cols },
      () => extreme ? (rng.int(2) ? 32767 : -32767) : int(-32767, 32767),
    );
    // Exponents from ordinary (-16) to ones that make the row shift left and saturate.
    for (const outExp of [-16, -8, extreme ? -40 : -24]) cases.push({ mat, x, xExp: int(-20, -8), outExp });
  }
}

// Every lut4 matrix of the default model, quantized by the lut4 writer into a temporary folder.
const dir = await Deno.makeTempDir({ prefix: "ferry-webgpu-lut4-" });
const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
const path = `${dir}/ferry.lut4`;
await lut4Format.write(path, {
  config: run.config,
  tensors: run.model.map(tensorSource),
  source: "ferry.ckpt",
  step: run.step,
  name: "ferry",
}, { dtype: "q4" });
const w = (await readLut4(path)).weights;
await Deno.remove(dir, { recursive: true });
const modelMats = [
  w.embed,
  ...(w.head ? [w.head] : []),
  ...w.layers.flatMap((l) => [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]),
];
for (const mat of modelMats) {
  // Activations as the engine feeds them: 16-bit, small and full-range.
  for (let v = 0; v < 2; v++) {
    const x = Int32Array.from({ length: mat.cols }, () => v ? int(-32767, 32767) : int(-2000, 2000));
    cases.push({ mat, x, xExp: -16 + v, outExp: -16 });
  }
}

let compared = 0, saturated = 0, mismatch: unknown = null;
const uploaded = new Map<LutMatrix, ReturnType<typeof lut.upload>>();
for (const { mat, x, xExp, outExp } of cases) {
  const tab = new Int32Array(mat.cols << 4);
  activationTables(x, 0, mat.cols, tab);
  const cpu = new Int32Array(mat.rows);
  gemv(cpu, 0, prepareMatrix(mat), tab, xExp, outExp);
  if (!uploaded.has(mat)) uploaded.set(mat, lut.upload(mat));
  const gpuOut = await lut.gemv(uploaded.get(mat)!, x, xExp, outExp);
  for (let r = 0; r < mat.rows; r++) {
    compared++;
    if (cpu[r] === 2147483647 || cpu[r] === -2147483648) saturated++;
    if (cpu[r] !== gpuOut[r] && !mismatch) {
      mismatch = {
        matrix: mat.name,
        row: r,
        cpu: cpu[r],
        gpu: gpuOut[r],
        xExp,
        outExp,
        expBase: mat.expBase,
      };
    }
  }
}
console.log(
  JSON.stringify({
    adapter: gpu.name,
    cases: cases.length,
    compared,
    saturated,
    modelMatrices: modelMats.map((m) => m.name),
    mismatch,
  }),
);

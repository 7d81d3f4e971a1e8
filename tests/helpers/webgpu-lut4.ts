/**
 * The lut4 projection on WebGPU: `lut4.wgsl` (integers only, no multiply) run on the device, giving
 * exactly the bits of `kernels/int/gemv.ts` for the same matrix, activations and exponents.
 *
 * @example
 * ```ts
 * const lut = gpuLut4(await openGpu());
 * const m = lut.upload(mat);                        // a LutMatrix from a lut4 file
 * const out = await lut.gemv(m, x, xExp, -16);      // Int32Array(mat.rows), as gemv() on the CPU
 * ```
 * @module
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { ACC_EXP, type LutMatrix } from "../../kernels/int/gemv.ts";
import type { Gpu } from "../../kernels/webgpu/device.ts";

/** Where the WGSL source lives (read at load: there is no build step). */
export const LUT4_WGSL = fileURLToPath(new URL("./webgpu-lut4.wgsl", import.meta.url));

/** Most groups of 32 columns a row may have (the shader's workgroup array). */
export const MAX_GROUPS = 256;

/** A lut4 matrix uploaded to the device. */
export interface GpuLutMatrix {
  mat: LutMatrix;
  nibbles: GPUBuffer;
  scales: GPUBuffer;
}

/** The lut4 kernel on one device. */
export interface GpuLut4 {
  upload(mat: LutMatrix): GpuLutMatrix;
  /** `(W · x)` at exponent `outExp` for x at exponent `xExp` (|x_c| ≤ 32767); one submission, one readback. */
  gemv(m: GpuLutMatrix, x: Int32Array, xExp: number, outExp: number): Promise<Int32Array>;
}

/** Compiles the lut4 kernel on `gpu`. */
export function gpuLut4(gpu: Gpu): GpuLut4 {
  const device = gpu.device;
  const module = device.createShaderModule({ code: readFileSync(LUT4_WGSL, "utf8"), label: "lut4.wgsl" });
  const tables = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "tables" } });
  const gemv = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "gemv" } });
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  const bytes = (data: Uint8Array | Int32Array, usage = S) => {
    const b = device.createBuffer({ size: Math.max(16, Math.ceil(data.byteLength / 16) * 16), usage });
    const padded = new Uint8Array(b.size);
    padded.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    device.queue.writeBuffer(b, 0, padded);
    return b;
  };
  return {
    upload(mat) {
      const where = `lut4 matrix ${mat.name}`;
      if (mat.cols % 32 !== 0) throw new RangeError(`${where}: cols ${mat.cols} is not a multiple of 32`);
      if (mat.cols / 32 > MAX_GROUPS) throw new RangeError(`${where}: more than ${MAX_GROUPS} groups a row`);
      if (mat.rows > 65535) throw new RangeError(`${where}: more than 65535 rows`);
      if (mat.nibbles.length !== mat.rows * mat.cols / 2 || mat.scales.length !== mat.rows * mat.cols / 32) {
        throw new RangeError(`${where}: code or scale bytes do not match ${mat.rows} x ${mat.cols}`);
      }
      return { mat, nibbles: bytes(mat.nibbles), scales: bytes(mat.scales) };
    },
    async gemv(m, x, xExp, outExp) {
      const { rows, cols, expBase } = m.mat;
      if (x.length !== cols) {
        throw new RangeError(`lut4 gemv ${m.mat.name}: x has ${x.length} values, not ${cols}`);
      }
      const params = new Int32Array([
        rows,
        cols,
        cols / 32,
        ACC_EXP + 4 - expBase - xExp,
        outExp - ACC_EXP,
        0,
        0,
        0,
      ]);
      const ub = bytes(params, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const xb = bytes(x), tab = device.createBuffer({ size: cols * 64, usage: S });
      const ob = device.createBuffer({ size: Math.ceil(rows / 4) * 16, usage: S });
      const rb = device.createBuffer({
        size: ob.size,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
      const bind = (p: GPUComputePipeline, entries: [number, GPUBuffer][]) =>
        device.createBindGroup({
          layout: p.getBindGroupLayout(0),
          entries: entries.map(([binding, buffer]) => ({ binding, resource: { buffer } })),
        });
      device.pushErrorScope("validation");
      const enc = device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(tables);
      pass.setBindGroup(0, bind(tables, [[0, ub], [1, xb], [2, tab]]));
      pass.dispatchWorkgroups(Math.ceil(cols / 64));
      pass.setPipeline(gemv);
      pass.setBindGroup(0, bind(gemv, [[0, ub], [2, tab], [3, m.nibbles], [4, m.scales], [5, ob]]));
      pass.dispatchWorkgroups(rows);
      pass.end();
      enc.copyBufferToBuffer(ob, 0, rb, 0, ob.size);
      device.queue.submit([enc.finish()]);
      const error = await device.popErrorScope();
      if (error) throw new Error(`lut4 gemv ${m.mat.name}: ${error.message}`);
      await rb.mapAsync(GPUMapMode.READ);
      const out = new Int32Array(rb.getMappedRange().slice(0, rows * 4));
      rb.unmap();
      for (const b of [ub, xb, tab, ob, rb]) b.destroy();
      return out;
    },
  };
}

/**
 * The engine's matrix product on its own, for benchmarks and shape tests: `out = x · wᵀ` for
 * x: [M, K], w: [N, K], with the one-row kernel when M = 1 and the tiled kernel otherwise.
 *
 * @example
 * ```ts
 * import { gpuMatmul } from "./matmul.ts";
 * import { openGpu } from "./device.ts";
 * const x = new Float32Array(128 * 1024), w = new Float32Array(2816 * 1024); // [M, K], [N, K]
 * const mm = gpuMatmul(await openGpu());
 * const { out, msEach } = await mm(x, w, 128, 1024, 2816, 10); // 10 products in one submission
 * ```
 * @module
 */
import type { Gpu } from "./device.ts";
import { GEMV, GEMV_ROWS, MATMUL, TILE } from "./wgsl.ts";

/** Runs `reps` products back to back in one submission and reads the result back once. */
export type GpuMatmul = (
  x: Float32Array,
  w: Float32Array,
  M: number,
  K: number,
  N: number,
  reps?: number,
) => Promise<{ out: Float32Array; msEach: number }>;

/** A matrix product on this device (K must be a multiple of 4 for the one-row kernel). */
export function gpuMatmul(gpu: Gpu): GpuMatmul {
  const device = gpu.device;
  const make = (code: string) =>
    device.createComputePipeline({
      layout: "auto",
      compute: { module: device.createShaderModule({ code }), entryPoint: "main" },
    });
  const gemv = make(GEMV), tiled = make(MATMUL);
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
  return async (x, w, M, K, N, reps = 1) => {
    if (M === 1 && K % 4 !== 0) throw new RangeError(`one-row product needs K % 4 = 0, got K = ${K}`);
    const buf = (bytes: number, usage: number) =>
      device.createBuffer({ size: Math.ceil(bytes / 16) * 16, usage });
    const xb = buf(M * K * 4, S), wb = buf(N * K * 4, S), ob = buf(M * N * 4, S);
    const ub = buf(16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    const rb = buf(M * N * 4, GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST);
    device.queue.writeBuffer(xb, 0, x as Float32Array<ArrayBuffer>);
    device.queue.writeBuffer(wb, 0, w as Float32Array<ArrayBuffer>);
    device.queue.writeBuffer(ub, 0, new Uint32Array([M, K, N, 0]));
    const p = M === 1 ? gemv : tiled;
    const group = device.createBindGroup({
      layout: p.getBindGroupLayout(0),
      entries: [ub, xb, wb, ob].map((b, i) => ({ binding: i, resource: { buffer: b } })),
    });
    // Finish the uploads first, so the timing holds only the products and the one readback.
    await device.queue.onSubmittedWorkDone();
    const t0 = performance.now();
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(p);
    pass.setBindGroup(0, group);
    for (let r = 0; r < reps; r++) {
      if (M === 1) pass.dispatchWorkgroups(Math.ceil(N / GEMV_ROWS), 1);
      else pass.dispatchWorkgroups(Math.ceil(N / TILE), Math.ceil(M / TILE));
    }
    pass.end();
    enc.copyBufferToBuffer(ob, 0, rb, 0, M * N * 4);
    device.queue.submit([enc.finish()]);
    await rb.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(rb.getMappedRange().slice(0, M * N * 4));
    const msEach = (performance.now() - t0) / reps;
    rb.unmap();
    for (const b of [xb, wb, ob, ub, rb]) b.destroy();
    return { out, msEach };
  };
}

/**
 * The one WebGPU device factory of ferry. Every WebGPU kernel and engine gets its device here, so the
 * adapter is asked for once, with the limits models need, and a missing adapter is explained once.
 *
 * WebGPU needs Deno (stable since Deno 2.0, no flag). Bun has no `navigator.gpu`; on a machine with no
 * GPU, Mesa's software Vulkan driver (lavapipe, Debian's `mesa-vulkan-drivers`) gives a working adapter.
 *
 * @example
 * ```ts
 * import { openGpu } from "./device.ts";
 * const gpu = await openGpu({ bufferBytes: 64 << 20 });
 * console.log(gpu.name, gpu.fallback ? "(software)" : "");
 * ```
 * @module
 */

/** A device and what it is. */
export interface Gpu {
  device: GPUDevice;
  /** The adapter's own description, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`. */
  name: string;
  /** True for a software (CPU) adapter such as lavapipe or WARP. */
  fallback: boolean;
  /** The limits the device was created with. */
  limits: GPUSupportedLimits;
}

/** What a caller needs from the device; a request beyond the adapter's limits is refused by name. */
export interface GpuNeeds {
  /** The largest single buffer (and storage binding), in bytes. */
  bufferBytes?: number;
  /** Workgroup memory one shader uses, in bytes. */
  workgroupBytes?: number;
}

/** No WebGPU here: `message` says why and how to get one. */
export class GpuUnavailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "GpuUnavailable";
  }
}

let opened: Promise<Gpu> | undefined;

/**
 * The process's WebGPU device (created on first call, then shared), with the adapter's largest buffer and
 * workgroup-memory limits requested so that wide models fit. Throws `GpuUnavailable` with the fix when
 * there is no WebGPU or no adapter, and a plain error when `needs` exceed what the adapter allows.
 */
export async function openGpu(needs: GpuNeeds = {}): Promise<Gpu> {
  opened ??= requestGpu().catch((e) => {
    opened = undefined;
    throw e;
  });
  const gpu = await opened;
  const l = gpu.limits;
  const buffer = needs.bufferBytes ?? 0, wg = needs.workgroupBytes ?? 0;
  if (buffer > l.maxStorageBufferBindingSize || buffer > l.maxBufferSize) {
    throw new Error(
      `WebGPU adapter ${gpu.name}: a ${buffer}-byte buffer is needed, but it allows ` +
        `${Math.min(l.maxStorageBufferBindingSize, l.maxBufferSize)} bytes per storage buffer`,
    );
  }
  if (wg > l.maxComputeWorkgroupStorageSize) {
    throw new Error(
      `WebGPU adapter ${gpu.name}: a shader needs ${wg} bytes of workgroup memory, ` +
        `but it allows ${l.maxComputeWorkgroupStorageSize}`,
    );
  }
  return gpu;
}

async function requestGpu(): Promise<Gpu> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (!nav?.gpu) {
    const runtime = "Bun" in globalThis ? "Bun has no WebGPU" : "this runtime has no navigator.gpu";
    throw new GpuUnavailable(`WebGPU is unavailable: ${runtime}; run this under Deno (deno run -A ...)`);
  }
  quietMesa();
  const adapter = await nav.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) {
    throw new GpuUnavailable(
      "WebGPU is unavailable: Deno found no adapter (no GPU driver). On a machine without a GPU, install " +
        "Mesa's software Vulkan driver: `apt-get install mesa-vulkan-drivers` (lavapipe)",
    );
  }
  const a = adapter.limits;
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxBufferSize: a.maxBufferSize,
      maxStorageBufferBindingSize: a.maxStorageBufferBindingSize,
      maxComputeWorkgroupStorageSize: a.maxComputeWorkgroupStorageSize,
      maxStorageBuffersPerShaderStage: Math.min(a.maxStorageBuffersPerShaderStage, 10),
    },
  });
  const info = adapter.info;
  const fallback = Boolean(
    (info as { isFallbackAdapter?: boolean }).isFallbackAdapter ??
      (adapter as { isFallbackAdapter?: boolean }).isFallbackAdapter,
  );
  const name = info.description || [info.vendor, info.architecture, info.device].filter(Boolean).join(" ") ||
    "unnamed adapter";
  device.lost.then((why) => {
    if (why.reason !== "destroyed") console.error(`WebGPU device lost: ${why.message}`);
    opened = undefined;
  });
  return { device, name, fallback, limits: device.limits };
}

// Mesa prints "XDG_RUNTIME_DIR is invalid" twice when the variable is unset; it only wants a directory.
function quietMesa(): void {
  try {
    const env = (globalThis as {
      Deno?: { env: { get(k: string): string | undefined; set(k: string, v: string): void } };
    })
      .Deno?.env;
    if (env && !env.get("XDG_RUNTIME_DIR")) env.set("XDG_RUNTIME_DIR", "/tmp");
  } catch { /* no env permission: the warning is harmless */ }
}

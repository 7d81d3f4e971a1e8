/**
 * The pool task of quantize/gptq.ts: on a worker, an instance of the f64 module on the engine's shared
 * memory, and the handler that runs this worker's share of each GPTQ job.
 *
 * @example
 * ```ts
 * import { createPool } from "../kernels/pool.ts";
 * import { gptqShare } from "./gptq.ts";
 * declare const threads: number, memory: WebAssembly.Memory;
 * createPool(threads, new URL("./gptq-task.ts", import.meta.url), { memory }, gptqShare(memory));
 * ```
 * @module
 */
import type { PoolHandler } from "../kernels/pool.ts";
import { gptqShare } from "./gptq.ts";

/** kernels/pool.ts's entry point: the share handler on the shared memory. */
export function setup(init: { memory: WebAssembly.Memory }): PoolHandler {
  return gptqShare(init.memory);
}

/**
 * The pool task of kernels/wasm/covariance.ts: on a worker, an instance of the calibration module on
 * the shared memory, and the handler that runs this worker's share of each job.
 *
 * @example
 * ```ts
 * import { createPool } from "../pool.ts";
 * import { covarianceShare } from "./covariance.ts";
 * declare const threads: number, memory: WebAssembly.Memory;
 * createPool(threads, new URL("./covariance-task.ts", import.meta.url), { memory }, covarianceShare(memory));
 * ```
 * @module
 */
import type { PoolHandler } from "../pool.ts";
import { covarianceShare } from "./covariance.ts";

/** kernels/pool.ts's entry point: the share handler on the shared memory. */
export function setup(init: { memory: WebAssembly.Memory }): PoolHandler {
  return covarianceShare(init.memory);
}

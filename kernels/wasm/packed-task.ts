/**
 * The pool task of kernels/wasm/packed.ts: on a worker, an instance of the packed-product module on
 * the store's shared memory, and the handler that runs this worker's share of each product.
 *
 * @example
 * ```ts
 * import { createPool } from "../pool.ts";
 * import { instantiatePacked, productShare } from "./packed.ts";
 * declare const threads: number, memory: WebAssembly.Memory; // the store's shared memory
 * const ex = instantiatePacked(memory);
 * createPool(threads, new URL("./packed-task.ts", import.meta.url), { memory }, productShare(ex));
 * ```
 * @module
 */
import type { PoolHandler } from "../pool.ts";
import { instantiatePacked, productShare } from "./packed.ts";

/** kernels/pool.ts's entry point: instantiates on the shared memory and returns the share handler. */
export function setup(init: { memory: WebAssembly.Memory }): PoolHandler {
  return productShare(instantiatePacked(init.memory));
}

/**
 * One worker of the integer engine's thread pool (engines/int/pool.ts starts it): it instantiates the
 * engine's WebAssembly module over the shared memory it is sent and serves its share of each
 * projection (engines/int/threads.ts `serveCalls`) until told to stop.
 *
 * @example
 * ```ts
 * const w = new Worker(new URL("./worker.ts", import.meta.url));
 * w.postMessage({ bytes, memory, ctrl, head });   // it answers "ready", then waits for dispatches
 * ```
 * @module
 */
import { parentPort } from "node:worker_threads";
import type { LutProjections } from "../../kernels/int/gemv-lut.ts";
import { serveCalls } from "./threads.ts";

/** What the pool sends a worker. */
export interface WorkerStart {
  bytes: Uint8Array<ArrayBuffer>;
  memory: WebAssembly.Memory;
  ctrl: SharedArrayBuffer;
  head: number;
}

parentPort?.once("message", (start: WorkerStart) => {
  const instance = new WebAssembly.Instance(new WebAssembly.Module(start.bytes), {
    env: { memory: start.memory },
  });
  const lut = instance.exports as unknown as LutProjections;
  parentPort!.postMessage("ready");
  serveCalls(lut, new Int32Array(start.ctrl), start.head);
});

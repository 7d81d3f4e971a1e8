/**
 * What one worker of the integer engine's thread pool does, on either kind of worker (engines/int/worker.ts
 * under node:worker_threads, engines/int/worker-web.ts in a browser): instantiate the engine's
 * WebAssembly module over the shared memory it was sent, say it is ready, then serve its share of each
 * projection (engines/int/threads.ts `serveCalls`) until told to stop.
 *
 * @example
 * ```ts
 * import { parentPort } from "node:worker_threads";
 * import { serveWorker, type WorkerStart } from "./worker-serve.ts";
 * declare const start: WorkerStart; // the first message
 * serveWorker(start, () => parentPort!.postMessage("ready"));
 * ```
 * @module
 */
import type { LutProjections } from "../../kernels/int/gemv-lut.ts";
import { serveCalls } from "./threads.ts";

/** What the pool sends a worker. */
export interface WorkerStart {
  bytes: Uint8Array<ArrayBuffer>;
  memory: WebAssembly.Memory;
  ctrl: SharedArrayBuffer;
  head: number;
}

/** Runs one worker on `start`, calling `ready` once it can take dispatches; returns when told to stop. */
export function serveWorker(start: WorkerStart, ready: () => void): void {
  const instance = new WebAssembly.Instance(new WebAssembly.Module(start.bytes), {
    env: { memory: start.memory },
  });
  const lut = instance.exports as unknown as LutProjections;
  ready();
  serveCalls(lut, new Int32Array(start.ctrl), start.head);
}

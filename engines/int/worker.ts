/**
 * One worker of the integer engine's thread pool under `node:worker_threads` (Deno, Bun): engines/int/pool.ts
 * starts it, and it runs engines/int/worker-serve.ts `serveWorker` on the first message it is sent.
 *
 * @example
 * ```ts
 * import { Worker } from "node:worker_threads";
 * import type { WorkerStart } from "./worker-serve.ts";
 * declare const { bytes, memory, ctrl, head }: WorkerStart;
 * const w = new Worker(new URL("./worker.ts", import.meta.url));
 * w.postMessage({ bytes, memory, ctrl, head });   // it answers "ready", then waits for dispatches
 * ```
 * @module
 */
import { parentPort } from "node:worker_threads";
import { serveWorker, type WorkerStart } from "./worker-serve.ts";

export type { WorkerStart };

parentPort?.once(
  "message",
  (start: WorkerStart) => serveWorker(start, () => parentPort!.postMessage("ready")),
);

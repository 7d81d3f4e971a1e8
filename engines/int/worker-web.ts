/**
 * One worker of the integer engine's thread pool in a browser, as a module Web Worker (the tab's engine
 * runs in a worker of its own, which starts these): engines/int/pool.ts starts it where there is no
 * `node:worker_threads`, and it runs engines/int/worker-serve.ts `serveWorker` on the first message.
 * A cross-origin isolated page is needed, for the shared memory.
 *
 * @example
 * ```ts
 * import type { WorkerStart } from "./worker-serve.ts";
 * declare const { bytes, memory, ctrl, head }: WorkerStart;
 * const w = new Worker(new URL("./worker-web.ts", import.meta.url), { type: "module" });
 * w.postMessage({ bytes, memory, ctrl, head });   // it answers "ready", then waits for dispatches
 * ```
 * @module
 */
import { serveWorker, type WorkerStart } from "./worker-serve.ts";

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<WorkerStart>) => void) | null;
  postMessage(message: unknown): void;
};
scope.onmessage = (e) => {
  scope.onmessage = null; // one start
  serveWorker(e.data, () => scope.postMessage("ready"));
};

/**
 * One worker of kernels/pool.ts: imports the task module, runs its `setup(init, index)`, says it is
 * ready, then runs the returned handler on each job the control block announces, forever (the pool
 * terminates it). Not imported by anything: kernels/pool.ts starts it by URL.
 *
 * @example
 * ```ts
 * import { Worker } from "node:worker_threads";
 * declare const task: string, init: unknown, control: SharedArrayBuffer, index: number, threads: number;
 * new Worker(new URL("./pool-worker.ts", import.meta.url), { workerData: { task, init, control, index, threads } });
 * ```
 * @module
 */
import { parentPort, workerData } from "node:worker_threads";
import { awaitChange, newSpin, POOL_CONTROL, type PoolHandler } from "./pool.ts";

const { task, init, control, index, threads } = workerData as {
  task: string;
  init: unknown;
  control: SharedArrayBuffer;
  index: number;
  threads: number;
};
const { SEQ, DONE, FAILED, ARGS } = POOL_CONTROL;
const mod = await import(task) as { setup(init: unknown, index: number): PoolHandler | Promise<PoolHandler> };
const handler = await mod.setup(init, index);
const ctl = new Int32Array(control);
const args = ctl.subarray(ARGS);
let seen = Atomics.load(ctl, SEQ);
const spin = newSpin();
parentPort!.postMessage("ready");
for (;;) {
  seen = awaitChange(ctl, SEQ, seen, spin);
  try {
    handler(args, index, threads);
  } catch {
    Atomics.store(ctl, FAILED, 1);
  }
  Atomics.add(ctl, DONE, 1);
  Atomics.notify(ctl, DONE);
}

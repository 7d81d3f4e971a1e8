/**
 * Starts the integer engine's thread pool at load: plans each large projection's shares of 16-row
 * blocks (engines/int/threads.ts `GemvPool`), starts `threads − 1` workers on the module's shared
 * memory (`node:worker_threads` under Deno and Bun, Web Workers in a browser tab), and stops them when
 * asked.
 * Load-time code, not serving code: the per-token dispatch is threads.ts.
 *
 * @example
 * ```ts
 * import { startPool, stopPool } from "./pool.ts";
 * import { lutMatrices } from "./simd.ts";
 * import type { IntModel } from "./model.ts";
 * import type { LutShared } from "../../kernels/wasm/int-lut.ts";
 * declare const model: IntModel, made: { shared: LutShared | null }; // made: createLutSums's
 * const pool = await startPool(lutMatrices(model), made.shared!, 2); // null: nothing worth splitting
 * // … serve …
 * if (pool) stopPool(pool);
 * ```
 * @module
 */
import type { LutMatrix } from "../../kernels/int/gemv.ts";
import type { LutShared } from "../../kernels/wasm/int-lut.ts";
import { CALL_INTS, type GemvPool, MAX_CALLS, SEQ, STOP } from "./threads.ts";
import type { WorkerStart } from "./worker-serve.ts";

/** A projection is split only when it has at least this many weights (smaller ones cost more to hand out). */
export const SPLIT_WEIGHTS = 1 << 18;
/**
 * A layer's attention is shared out from this many (query head, position) pairs on: below it, the
 * hand-off costs about what the second thread saves.
 */
export const SPLIT_PAIRS = 1024;
/** Control words before the first worker's calls. */
const HEADER_INTS = 16;

/** A worker of a pool, of either kind: all the pool does with it is end it. */
export interface PoolWorker {
  terminate(): void;
}

/** A running pool: the dispatch state and the workers behind it. */
export interface RunningPool {
  pool: GemvPool;
  workers: PoolWorker[];
}

/**
 * Starts one worker on `start` and resolves once it is ready: a `node:worker_threads` worker
 * (engines/int/worker.ts, unreferenced so it never keeps the process alive) under Deno and Bun, or a
 * module Web Worker (engines/int/worker-web.ts) in a browser, where the import of node:worker_threads
 * gets serve/page/worker-node.js, which has no `Worker`. Imported here, not at the top, so a one-thread
 * engine never needs the module.
 */
async function startWorker(start: WorkerStart): Promise<PoolWorker> {
  const { Worker: NodeWorker } = await import("node:worker_threads");
  if (typeof NodeWorker === "function") {
    const w = new NodeWorker(new URL("./worker.ts", import.meta.url));
    const ready = new Promise<void>((resolve, reject) => {
      w.once("message", () => resolve());
      w.once("error", reject);
    });
    w.postMessage(start);
    await ready.catch((e) => {
      void w.terminate();
      throw e;
    });
    w.unref();
    return { terminate: () => void w.terminate() };
  }
  // This module's own extension: .ts where the server serves the repository's paths, .js in the static
  // folder of scripts/page.ts (serve/browser-modules.ts `jsNames`).
  const ext = import.meta.url.endsWith(".js") ? ".js" : ".ts";
  const w = new Worker(new URL(`./worker-web${ext}`, import.meta.url), { type: "module" });
  await new Promise<void>((resolve, reject) => {
    w.onmessage = () => resolve();
    w.onerror = (e) => {
      w.terminate();
      reject(new Error(`a thread of the engine did not start: ${e.message ?? "its module failed to load"}`));
    };
    w.postMessage(start);
  });
  w.onmessage = w.onerror = null;
  return w;
}

/** The cores of this machine (the default thread count). */
export function coreCount(): number {
  const n = (globalThis.navigator as { hardwareConcurrency?: number } | undefined)?.hardwareConcurrency;
  return Number.isInteger(n) && n! > 0 ? n! : 1;
}

/**
 * Each matrix's shares for `threads` threads: blocks of 16 rows dealt out as evenly as they go, in
 * order, thread 0 first; −1 for a matrix too small to split (below `splitWeights` weights) or with fewer blocks
 * than threads.
 */
export function planShares(
  mats: LutMatrix[],
  threads: number,
  splitWeights = SPLIT_WEIGHTS,
): { shareAt: Int32Array; shares: Int32Array } {
  const shareAt = new Int32Array(mats.length).fill(-1);
  const shares: number[] = [];
  mats.forEach((m, e) => {
    const blocks = Math.ceil(m.rows / 16);
    if (threads < 2 || m.rows * m.cols < splitWeights || blocks < threads) return;
    shareAt[e] = shares.length;
    for (let t = 0; t < threads; t++) {
      const b0 = Math.floor((blocks * t) / threads);
      const b1 = Math.floor((blocks * (t + 1)) / threads);
      const r0 = b0 * 16;
      const r1 = Math.min(m.rows, b1 * 16);
      shares.push(r0 * (m.cols / 2), r0 * (m.cols / 32), r0 * 4, r1 - r0);
    }
  });
  return { shareAt, shares: Int32Array.from(shares) };
}

/**
 * Starts a pool of `threads` threads (this one and `threads − 1` workers) over `shared`, the module and
 * memory the engine runs on; null when no matrix is worth splitting or `threads` is 1 (the caller then runs
 * everything on this thread).
 */
export async function startPool(
  mats: LutMatrix[],
  shared: LutShared,
  threads: number,
  splitWeights = SPLIT_WEIGHTS,
): Promise<RunningPool | null> {
  const { shareAt, shares } = planShares(mats, threads, splitWeights);
  if (threads < 2 || shareAt.every((a) => a < 0)) return null;
  const perWorker = 1 + MAX_CALLS * CALL_INTS;
  const ctrlBuffer = new SharedArrayBuffer((HEADER_INTS + (threads - 1) * perWorker) * 4);
  const workerAt = new Int32Array(threads);
  for (let t = 1; t < threads; t++) workerAt[t] = HEADER_INTS + (t - 1) * perWorker;
  const workers: PoolWorker[] = [];
  try {
    for (let t = 1; t < threads; t++) {
      const start: WorkerStart = {
        bytes: shared.bytes,
        memory: shared.memory,
        ctrl: ctrlBuffer,
        head: workerAt[t],
      };
      workers.push(await startWorker(start));
    }
  } catch (e) {
    for (const w of workers) w.terminate();
    throw e;
  }
  const pool: GemvPool = {
    threads,
    ctrl: new Int32Array(ctrlBuffer),
    workerAt,
    mine: new Int32Array(perWorker),
    shareAt,
    shares,
    // splitWeights 0 (the tests' setting) shares out everything, the attention too.
    attendSplit: splitWeights === 0 ? 0 : SPLIT_PAIRS,
    seq: 0,
    spin: 1 << 18,
    queued: 0,
    saturated: 0,
  };
  return { pool, workers };
}

/** Stops a pool's workers (they finish the dispatch under way, if any, and end). */
export function stopPool(running: RunningPool): void {
  const ctrl = running.pool.ctrl;
  Atomics.store(ctrl, STOP, 1);
  Atomics.add(ctrl, SEQ, 1);
  Atomics.notify(ctrl, SEQ);
  for (const w of running.workers) w.terminate();
}

/**
 * A small pool of worker threads that run one synchronous job together and return when all have
 * finished: the caller's thread takes share 0 and each worker one more, so a job of `threads` shares
 * runs on `threads` threads. Jobs are a few i32 arguments in a shared control block; the data they work
 * on lives in memory the caller shares with the workers (a shared `WebAssembly.Memory`, say), so
 * nothing is copied or posted per job. Which share does what is the job's own business: a job that
 * splits its work by share index (not by which thread is faster) gives the same result on any number
 * of threads.
 *
 * A worker runs `setup(init, index)` from the `task` module once, and the handler it returns on every
 * job. Waiting polls (for up to about a millisecond, adapted: `Spin`), then `Atomics.wait`, on both sides (Deno and Bun both allow
 * `Atomics.wait` on the main thread). On the main thread the workers are unref'd once they are up, so
 * an idle pool never keeps a process alive; `close` ends them. Nothing here knows what a job computes: the float engine (kernels/wasm/
 * packed.ts) splits matrix products with it, and any other engine may run its own task module on it.
 *
 * @example
 * ```ts
 * import { createPool, type PoolHandler } from "./pool.ts";
 * declare const init: unknown, localHandler: PoolHandler, rows: number, cols: number;
 * // task.ts: export function setup(init, index) { return (args, share, shares) => { ... }; }
 * const pool = createPool(2, new URL("./task.ts", import.meta.url), init, localHandler);
 * await pool.ready;
 * pool.run([rows, cols]); // localHandler(args, 0, 2) here, the task's handler(args, 1, 2) on the worker
 * pool.close();
 * ```
 * @module
 */

/** One share of a job: `args` are the job's arguments, `share` < `shares` says which part to do. */
export type PoolHandler = (args: Int32Array, share: number, shares: number) => void;

/** A running pool. */
export interface Pool {
  /** Threads a job runs on, the caller's included (1: no workers, jobs run inline). */
  readonly threads: number;
  /** Resolves when every worker has run its setup (rejects if one failed); `run` needs it settled. */
  readonly ready: Promise<void>;
  /** Runs one job on every thread and returns when all shares are done; throws if a worker's failed. */
  run(args: ArrayLike<number>): void;
  /** Ends the workers; the pool runs nothing afterwards. */
  close(): void;
}

/** The most i32 arguments a job may have. */
export const POOL_ARGS = 60;
// The control block: job sequence number, shares finished, failures, then the arguments.
const SEQ = 0, DONE = 1, FAILED = 2, ARGS = 4;
/** A waiter's polls before it sleeps: at most about 1–2 ms of polling, at least about 10 µs. */
export const SPIN_MAX = 1 << 18, SPIN_MIN = 1 << 12;

/**
 * A waiter's polling budget, carried from one wait to the next (`awaitChange` adapts it): doubled, up
 * to SPIN_MAX, when a wait was met while polling; halved, down to SPIN_MIN, when it had to sleep. On an
 * idle machine the other thread answers within the polls, so nobody sleeps between two products of a
 * token (a futex wake-up per product cost Deno most of its second thread: 1.15× one thread's decode at
 * the 0.6B shape, 1.86× polling); on a busy machine polling only keeps the thread being waited for off
 * its core (2 threads then decoded at a fifth of one thread's speed), so the waits fail, the budget falls
 * to a short spin, and they sleep as a plain futex wait would.
 */
export interface Spin {
  budget: number;
}

/** A fresh polling budget: the longest, until waits say otherwise. */
export const newSpin = (): Spin => ({ budget: SPIN_MAX });

/** Waits until `ctl[at]` differs from `value`: polls up to `spin`'s budget, then sleeps; adapts the budget. */
export function awaitChange(ctl: Int32Array, at: number, value: number, spin: Spin): number {
  for (let i = 0; i < spin.budget; i++) {
    const v = Atomics.load(ctl, at);
    if (v !== value) {
      if (spin.budget < SPIN_MAX) spin.budget = spin.budget << 1;
      return v;
    }
  }
  if (spin.budget > SPIN_MIN) spin.budget = spin.budget >> 1;
  for (;;) {
    Atomics.wait(ctl, at, value, 100);
    const v = Atomics.load(ctl, at);
    if (v !== value) return v;
  }
}

/**
 * A growable WebAssembly memory of up to 4 GiB for a pool of `threads`: shared where the runtime allows
 * it, else (a page that is not cross-origin isolated) a plain one, and then one thread.
 *
 * @example
 * ```ts
 * import { poolMemory } from "./pool.ts";
 * const { memory, threads } = poolMemory(2); // threads 1 where the memory could not be shared
 * ```
 */
export function poolMemory(threads: number): { memory: WebAssembly.Memory; threads: number } {
  try {
    const memory = new WebAssembly.Memory({ initial: 1, maximum: 65536, shared: true });
    if (memory.buffer instanceof SharedArrayBuffer) return { memory, threads };
  } catch { /* no shared memory here */ }
  return { memory: new WebAssembly.Memory({ initial: 1, maximum: 65536 }), threads: 1 };
}

/**
 * Starts `threads - 1` workers running the `task` module's `setup(init, index)` (index 1..threads-1;
 * `init` must be structured-cloneable, and may hold shared memory), with `local` as share 0's handler.
 * `threads` is clamped to at least 1.
 */
export function createPool(threads: number, task: URL, init: unknown, local: PoolHandler): Pool {
  const n = Math.max(1, Math.floor(threads));
  // One thread shares nothing: a plain buffer, so a page that is not cross-origin isolated (no
  // SharedArrayBuffer there: the browser tab's worker) runs the pool too.
  const bytes = (ARGS + POOL_ARGS) * 4;
  const ctl = new Int32Array(n === 1 ? new ArrayBuffer(bytes) : new SharedArrayBuffer(bytes));
  const argv = ctl.subarray(ARGS);
  const spin = newSpin();
  const workers: { terminate(): unknown }[] = [];
  let closed = false;
  // node:worker_threads is imported only for a pool with workers, so one thread needs nothing of Node.
  const ready = n === 1
    ? Promise.resolve()
    : import("node:worker_threads").then(({ isMainThread, Worker }) => {
      const started: Promise<void>[] = [];
      for (let index = 1; index < n && !closed; index++) {
        const w = new Worker(new URL("./pool-worker.ts", import.meta.url), {
          workerData: { task: task.href, init, control: ctl.buffer, index, threads: n },
        });
        started.push(
          new Promise<void>((resolve, reject) => {
            w.once("message", () => {
              // Unref'd once up, so an idle pool never keeps a process alive (before, the wait for
              // this message must: Deno ends a process whose only handles are unref'd). Not inside a
              // worker (a chat slot): Bun 1.4 then stalls the nested one, and the parent's end ends it.
              if (isMainThread) w.unref();
              resolve();
            });
            w.once("error", reject);
            w.once(
              "exit",
              (code) => reject(new Error(`pool worker ${index} exited (code ${code}) before it was ready`)),
            );
          }),
        );
        workers.push(w);
      }
      return Promise.all(started).then(() => {
        if (closed) throw new Error("pool: closed before its workers were up");
      });
    });
  ready.catch(() => {}); // a caller that never awaits it still learns of a failure from `run`
  return {
    threads: n,
    ready,
    run(args) {
      if (closed) throw new Error("pool: closed");
      if (args.length > POOL_ARGS) {
        throw new RangeError(`pool: ${args.length} arguments, at most ${POOL_ARGS}`);
      }
      for (let i = 0; i < args.length; i++) argv[i] = args[i];
      if (n > 1) {
        Atomics.store(ctl, DONE, 0);
        Atomics.add(ctl, SEQ, 1);
        Atomics.notify(ctl, SEQ);
      }
      local(argv, 0, n);
      for (let done = n > 1 ? Atomics.load(ctl, DONE) : 0; done < n - 1;) {
        done = awaitChange(ctl, DONE, done, spin);
      }
      if (Atomics.load(ctl, FAILED) !== 0) throw new Error("pool: a worker's share of the job failed");
    },
    close() {
      closed = true;
      for (const w of workers) void w.terminate();
    },
  };
}

/** The control block's layout, for kernels/pool-worker.ts. */
export const POOL_CONTROL = { SEQ, DONE, FAILED, ARGS } as const;

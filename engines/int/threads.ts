/**
 * The integer engine's projections on several threads: the rows of each large projection are split
 * into fixed shares of 16-row blocks, one per thread (the main thread takes the first), and every
 * thread runs the module's `gemv_lut` on its share over one shared WebAssembly memory. A row is computed
 * by exactly one thread with the same instructions whatever the thread count, so the integers are the
 * same with 1 thread or many (tests/engines/int-threads.test.ts). Serving code: audited (tests/kernels/audit.test.ts);
 * the shares are planned at load by engines/int/pool.ts, which also starts the workers
 * (engines/int/worker.ts).
 *
 * The control words (`GemvPool.ctrl`, shared with the workers): `SEQ` counts dispatches (a worker
 * wakes when it changes), `DONE` counts the workers finished with the current one, `SAT` sums their
 * saturations, `STOP` asks them to end; worker w's calls start at `workerAt[w]`: a count, then per
 * call `CALL_INTS` words, the arguments first and the kind in the last (`KIND`): the 13 arguments of
 * `gemv_lut` (or of `gemv_lanesP`) and P (0 for `gemv_lut`), or the 12 of `attend_heads` (a share of a
 * layer's attention heads, `queueAttention`) and −1, or the 10 of `cache_digits` (a decoded position's
 * digits of half the kv heads, `queueHeadsByThread`) and −2, or one batch slot's `rmsnorm`,
 * `norm_rope`, `quantize_heads` or `gated_product` (`queueCall`) and −3 … −6. Each thread has
 * its own list: a projection or attention gives every thread a call, a slot's work only the thread
 * it was dealt to.
 *
 * @example
 * ```ts
 * import { type GemvPool, queueGemv, runQueued } from "./threads.ts";
 * import type { LutSums } from "../../kernels/int/gemv-lut.ts";
 * declare const pool: GemvPool, lut: LutSums, e: number, groups: number, base: number, fin: number;
 * declare const codesAt: number, scalesAt: number, rows: number, planesAt: number, qAt: number; // q's
 * declare const codesAt1: number, scalesAt1: number, rows1: number, zAt: number, kAt: number; // k's
 * declare const stride: number, n: number; // n inputs, `stride` apart
 * queueGemv(pool, lut, e, codesAt, scalesAt, rows, groups, planesAt, 0, 1, base, -1, fin, qAt, 0, 0);
 * queueGemv(pool, lut, e + 1, codesAt1, scalesAt1, rows1, groups, zAt, stride, n, base, -1, fin, kAt, stride, 16);
 * const saturated = runQueued(pool, lut);
 * ```
 * @module
 */
import { TASK_BYTES } from "../../kernels/int/attention.ts";
import { gemvLanes, type LutProjections, type LutSums } from "../../kernels/int/gemv-lut.ts";

/** Control word indices. */
export const SEQ = 0;
export const DONE = 1;
export const SAT = 2;
export const STOP = 3;
/**
 * Words of one queued call (up to 16 arguments, a spare, the kind); calls one worker may hold per
 * dispatch (a batch of 32 slots' three head calls on two threads take 48).
 */
export const CALL_INTS = 18;
export const MAX_CALLS = 64;
/** The word of a call that says its kind: P ≥ 0 for a projection, else one of the kinds below. */
const KIND = 17;
/** An `attend_heads` call (its 12 arguments in the first words). */
const ATTEND = -1;
/** A `cache_digits` call (its 10 arguments in the first words). */
const DIGITS = -2;
/**
 * A batch slot's `rmsnorm` (8 arguments), `norm_rope` (15), `quantize_heads` (5) or `gated_product`
 * (11), the arguments in the module function's order (`queueCall`, `runCall`).
 */
export const NORM = -3;
export const NORM_ROPE = -4;
export const QUANTIZE_HEADS = -5;
export const GATED = -6;
/**
 * A waiter's polls before it sleeps: at most about 3–4 ms, at least about 10 µs (`adaptSpin`). A
 * prefill's work between two dispatches (norms, rotations, the cache's appends for 16 positions) takes
 * up to 1–2 ms: a budget of 2^18 polls (1.5–2 ms) let the worker fall asleep there and made the main
 * thread wait for its wake-up, 12% of a two-thread prefill's time under Deno.
 */
const SPIN_MAX = 1 << 19;
const SPIN_MIN = 1 << 12;

/**
 * A waiter's next polling budget: doubled (up to SPIN_MAX) after a wait met while polling, halved (down
 * to SPIN_MIN) after one that had to sleep. On an idle machine the other thread answers within the
 * polls, so nobody sleeps between two dispatches of a token (a futex wake-up per dispatch made 2
 * threads only 1.13× one under Deno at the 0.6B shape; 1.58× polling); on a busy machine polling only
 * keeps the awaited thread off its core, so the budget falls to a short spin and the waits sleep. The
 * same policy as kernels/pool.ts `Spin`, kept here because this file's serving code is audited alone.
 */
function adaptSpin(budget: number, slept: boolean): number {
  if (slept) return budget > SPIN_MIN ? budget >> 1 : SPIN_MIN;
  return budget < SPIN_MAX ? budget << 1 : SPIN_MAX;
}

/** The threads of one model and its matrices' shares (built at load by engines/int/pool.ts). */
export interface GemvPool {
  /** Threads, the main one included. */
  threads: number;
  ctrl: Int32Array;
  /** Where each worker's calls start in `ctrl` (index 0, the main thread, unused). */
  workerAt: Int32Array;
  /** The main thread's calls, in the same form. */
  mine: Int32Array;
  /**
   * Per matrix entry (simd.ts `lutMatrices` order): −1 to run it whole on the main thread, else where
   * its shares start in `shares`: per thread, the byte offsets of its codes, its scales and its output
   * from the matrix's, and its rows.
   */
  shareAt: Int32Array;
  shares: Int32Array;
  /**
   * A layer's attention is shared out only from this many (query head, position) pairs on (fewer cost
   * less than the hand-off); 0 shares out every one.
   */
  attendSplit: number;
  /** Dispatches so far; calls queued for the next; saturations counted by whole-matrix calls. */
  seq: number;
  /** The main thread's polling budget (`adaptSpin`). */
  spin: number;
  queued: number;
  saturated: number;
}

/** Thread t's call words: the main thread's own, or the control words its worker reads. */
function callsOf(pool: GemvPool, t: number): Int32Array {
  return t === 0 ? pool.mine : pool.ctrl;
}

/** Where thread t's next queued call's words start (after the calls it holds); counts it in. */
function nextCall(pool: GemvPool, t: number): number {
  const calls = callsOf(pool, t);
  const head = t === 0 ? 0 : pool.workerAt[t];
  const held = calls[head];
  if (held >= MAX_CALLS) {
    throw new RangeError(`integer engine: more than ${MAX_CALLS} calls for one thread in a dispatch`);
  }
  let i = head + 1;
  for (let c = 0; c < held; c++) i = i + CALL_INTS;
  calls[head] = held + 1;
  return i;
}

/**
 * Queues `gemv_lut` of matrix `entry` (its codes and scales at `m.lutAt`/`lutScales` given as
 * `codesAt`/`scalesAt`) over `count` inputs, or with `lanes` P > 0 `gemv_lanesP` (then `planes` and
 * `planeStride` are the int32 inputs and their stride): split across the threads when the pool shares
 * it out, else run at once on this thread; with `only` a thread (forward.ts `productBatch`, a group of
 * inputs for each of two threads), every row on that thread alone, the others getting the same call
 * over no input. Each thread gets its own scratch (the module's 128 bytes per thread) or lanes work
 * area (`lanesAt + t · lanesBytes`).
 */
export function queueGemv(
  pool: GemvPool,
  lut: LutSums,
  entry: number,
  codesAt: number,
  scalesAt: number,
  rows: number,
  groups: number,
  planes: number,
  planeStride: number,
  count: number,
  base: number,
  bases: number,
  fin: number,
  out: number,
  outStride: number,
  lanes: number,
  only = -1,
): void {
  const at = pool.shareAt[entry];
  const lanesWork = lanes > 0;
  if (at < 0 && only < 0) {
    pool.saturated = pool.saturated +
      runOne(
        lut,
        lanes,
        planes,
        planeStride,
        count,
        codesAt,
        scalesAt,
        rows,
        groups,
        base,
        bases,
        fin,
        out,
        outStride,
        lanesWork ? lut.lanesAt : lut.scratchAt,
      );
    return;
  }
  const sh = pool.shares;
  let share = at;
  let scratch = lanesWork ? lut.lanesAt : lut.scratchAt;
  const scratchStep = lanesWork ? lut.lanesBytes : 128;
  for (let t = 0; t < pool.threads; t++) {
    // Thread t's rows: its share, or (`only`) every row on that thread and none on the others.
    let codesOff = 0;
    let scalesOff = 0;
    let outOff = 0;
    let rowsHere = rows;
    let inputs = count;
    if (only < 0) {
      codesOff = sh[share];
      scalesOff = sh[share + 1];
      outOff = sh[share + 2];
      rowsHere = sh[share + 3];
      share = share + 4;
    } else if (t !== only) inputs = 0;
    const calls = callsOf(pool, t);
    const i = nextCall(pool, t);
    calls[i] = planes;
    calls[i + 1] = planeStride;
    calls[i + 2] = inputs;
    calls[i + 3] = codesAt + codesOff;
    calls[i + 4] = scalesAt + scalesOff;
    calls[i + 5] = rowsHere;
    calls[i + 6] = groups;
    calls[i + 7] = base;
    calls[i + 8] = bases;
    calls[i + 9] = fin;
    calls[i + 10] = out + outOff;
    calls[i + 11] = outStride;
    calls[i + 12] = scratch;
    calls[i + KIND] = lanes;
    scratch = scratch + scratchStep;
  }
  pool.queued = pool.queued + 1;
}

/** One call: `gemv_lut` when `lanes` is 0, else `gemv_lanesP` for P = `lanes`; returns its saturations. */
function runOne(
  lut: LutProjections,
  lanes: number,
  planes: number,
  planeStride: number,
  count: number,
  codes: number,
  scales: number,
  rows: number,
  groups: number,
  base: number,
  bases: number,
  fin: number,
  out: number,
  outStride: number,
  scratch: number,
): number {
  if (lanes === 0) {
    return lut.gemv_lut(
      planes,
      planeStride,
      count,
      codes,
      scales,
      rows,
      groups,
      base,
      bases,
      fin,
      out,
      outStride,
      scratch,
    );
  }
  return gemvLanes(
    lut,
    lanes,
    planes,
    planeStride,
    count,
    codes,
    scales,
    rows,
    groups,
    base,
    bases,
    fin,
    out,
    outStride,
    scratch,
  );
}

/** Thread t's next call: `attend_heads` over the tasks `first`, `first + stride`, … below `end`, in `work`. */
function attendCall(
  pool: GemvPool,
  lut: LutSums,
  t: number,
  first: number,
  end: number,
  stride: number,
  work: number,
  hd: number,
  blocks: number,
  plane: number,
  digitStride: number,
): void {
  const calls = callsOf(pool, t);
  const i = nextCall(pool, t);
  calls[i] = first;
  calls[i + 1] = end;
  calls[i + 2] = stride;
  calls[i + 3] = work;
  calls[i + 4] = hd;
  calls[i + 5] = lut.attendPositions;
  calls[i + 6] = lut.expTAt;
  calls[i + 7] = lut.expMulAt;
  calls[i + 8] = lut.expLen1;
  calls[i + 9] = blocks;
  calls[i + 10] = plane;
  calls[i + 11] = digitStride;
  calls[i + KIND] = ATTEND;
}

/**
 * Queues a layer's attention, the `attend_heads` tasks from byte `tasks` to `end` (kernels/int/attention.ts
 * `writeHeadTask`), dealt out in turn: thread t takes tasks t, t + threads, … in its own work area
 * (`attendAt + t · attendBytes`). Heads of the same slot cost the same, so each thread gets an even
 * share of every slot. `hd`, `blocks`, `plane` and `digitStride` are the model's (`attend_heads`).
 */
export function queueAttention(
  pool: GemvPool,
  lut: LutSums,
  tasks: number,
  end: number,
  hd: number,
  blocks: number,
  plane: number,
  digitStride: number,
): void {
  let stride = 0;
  for (let t = 0; t < pool.threads; t++) stride = stride + TASK_BYTES;
  let first = tasks;
  let work = lut.attendAt;
  for (let t = 0; t < pool.threads; t++) {
    attendCall(pool, lut, t, first, end, stride, work, hd, blocks, plane, digitStride);
    first = first + TASK_BYTES;
    work = work + lut.attendBytes;
  }
  pool.queued = pool.queued + 1;
}

/**
 * Queues a decoded position's digit-plane writes (the module's `cache_digits`) and its attention on two
 * threads by kv head: thread t writes the digits of its half of the kv heads, then attends the query
 * heads that read them (the tasks `tasks` … `split` for the first half, `split` … `end` for the second),
 * so neither waits for the other's writes. The arguments after `split` are `cache_digits`'s, for every
 * kv head; `hd`, `blocks`, `plane` and `digitStride` also `attend_heads`'s.
 */
export function queueHeadsByThread(
  pool: GemvPool,
  lut: LutSums,
  tasks: number,
  split: number,
  end: number,
  k: number,
  v: number,
  hd: number,
  heads: number,
  keyAt: number,
  keyHeadStride: number,
  valueAt: number,
  valueHeadStride: number,
  blocks: number,
  plane: number,
  digitStride: number,
): void {
  const half = heads >> 1;
  let vectors = 0;
  let keys = 0;
  let values = 0;
  for (let h = 0; h < half; h++) {
    vectors = vectors + (hd << 2);
    keys = keys + keyHeadStride;
    values = values + valueHeadStride;
  }
  for (let t = 0; t < 2; t++) {
    const calls = callsOf(pool, t);
    const i = nextCall(pool, t);
    calls[i] = t === 0 ? k : k + vectors;
    calls[i + 1] = t === 0 ? v : v + vectors;
    calls[i + 2] = hd;
    calls[i + 3] = t === 0 ? half : heads - half;
    calls[i + 4] = t === 0 ? keyAt : keyAt + keys;
    calls[i + 5] = keyHeadStride;
    calls[i + 6] = t === 0 ? valueAt : valueAt + values;
    calls[i + 7] = valueHeadStride;
    calls[i + 8] = plane;
    calls[i + 9] = digitStride;
    calls[i + KIND] = DIGITS;
  }
  pool.queued = pool.queued + 1;
  let work = lut.attendAt;
  for (let t = 0; t < 2; t++) {
    const first = t === 0 ? tasks : split;
    attendCall(pool, lut, t, first, t === 0 ? split : end, TASK_BYTES, work, hd, blocks, plane, digitStride);
    work = work + lut.attendBytes;
  }
  pool.queued = pool.queued + 1;
}

/**
 * Queues on thread t a call of a batch slot's module function (kind `NORM` … `GATED`), its arguments
 * the first words of `args` (forward.ts writes them). A slot's calls all go to one thread, in order,
 * since they share the slot's scratch.
 */
export function queueCall(pool: GemvPool, t: number, kind: number, args: Int32Array): void {
  const calls = callsOf(pool, t);
  const i = nextCall(pool, t);
  for (let w = 0; w < KIND; w++) calls[i + w] = args[w];
  calls[i + KIND] = kind;
  pool.queued = pool.queued + 1;
}

/** Runs a call of kind `kind` (below 0), its arguments the first words of `args`, here and now; returns its faults. */
export function runCall(lut: LutProjections, kind: number, args: Int32Array): number {
  return runModuleCall(lut, args, 0, kind);
}

/** Runs the calls at `calls[head]` (a count, then each call's words); returns their saturations (and faults). */
export function runCalls(lut: LutProjections, calls: Int32Array, head: number): number {
  let saturated = 0;
  let i = head + 1;
  for (let c = 0; c < calls[head]; c++) {
    const kind = calls[i + KIND];
    if (kind < 0) {
      saturated = saturated + runModuleCall(lut, calls, i, kind);
      i = i + CALL_INTS;
      continue;
    }
    saturated = saturated + runOne(
      lut,
      kind,
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
      calls[i + 8],
      calls[i + 9],
      calls[i + 10],
      calls[i + 11],
      calls[i + 12],
    );
    i = i + CALL_INTS;
  }
  return saturated;
}

/** One call of a kind below 0 (a module function other than a projection); returns its faults, if it counts any. */
function runModuleCall(lut: LutProjections, calls: Int32Array, i: number, kind: number): number {
  if (kind === NORM) {
    lut.rmsnorm(
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
    );
    return 0;
  }
  if (kind === NORM_ROPE) {
    lut.norm_rope(
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
      calls[i + 8],
      calls[i + 9],
      calls[i + 10],
      calls[i + 11],
      calls[i + 12],
      calls[i + 13],
      calls[i + 14],
    );
    return 0;
  }
  if (kind === QUANTIZE_HEADS) {
    lut.quantize_heads(calls[i], calls[i + 1], calls[i + 2], calls[i + 3], calls[i + 4]);
    return 0;
  }
  if (kind === GATED) {
    lut.gated_product(
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
      calls[i + 8],
      calls[i + 9],
      calls[i + 10],
    );
    return 0;
  }
  if (kind === DIGITS) {
    lut.cache_digits(
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
      calls[i + 8],
      calls[i + 9],
    );
    return 0;
  }
  if (kind === ATTEND) {
    return lut.attend_heads(
      calls[i],
      calls[i + 1],
      calls[i + 2],
      calls[i + 3],
      calls[i + 4],
      calls[i + 5],
      calls[i + 6],
      calls[i + 7],
      calls[i + 8],
      calls[i + 9],
      calls[i + 10],
      calls[i + 11],
    );
  }
  return 0;
}

/**
 * Wakes the workers on the queued calls, runs the main thread's share, waits for theirs; returns the
 * saturations of every call since the last run (whole-matrix ones included) and clears the queue.
 */
export function runQueued(pool: GemvPool, lut: LutSums): number {
  let saturated = pool.saturated;
  pool.saturated = 0;
  if (pool.queued === 0) return saturated;
  const ctrl = pool.ctrl;
  Atomics.store(ctrl, DONE, 0);
  Atomics.store(ctrl, SAT, 0);
  pool.seq = pool.seq + 1;
  Atomics.store(ctrl, SEQ, pool.seq);
  Atomics.notify(ctrl, SEQ);
  saturated = saturated + runCalls(lut, pool.mine, 0);
  const workers = pool.threads - 1;
  let spins = 0;
  let waits = 0;
  let slept = false;
  for (;;) {
    const done = Atomics.load(ctrl, DONE);
    if (done === workers) break;
    spins = spins + 1;
    if (spins > pool.spin) {
      slept = true;
      if (Atomics.wait(ctrl, DONE, done, 1000) === "timed-out") {
        // A worker that has not answered for a minute is gone (stopped, or its thread died).
        waits = waits + 1;
        if (waits === 60) throw new Error("integer engine: a worker thread stopped answering");
      }
    }
  }
  pool.spin = adaptSpin(pool.spin, slept);
  pool.queued = 0;
  pool.mine[0] = 0;
  return saturated + Atomics.load(ctrl, SAT);
}

/**
 * A worker's loop (engines/int/worker.ts): waits for a dispatch, runs its calls, adds its saturations
 * and counts itself done; returns when `STOP` is set.
 */
export function serveCalls(lut: LutProjections, ctrl: Int32Array, head: number): void {
  let seq = 0;
  let budget = SPIN_MAX;
  for (;;) {
    let spins = 0;
    let slept = false;
    while (Atomics.load(ctrl, SEQ) === seq) {
      spins = spins + 1;
      if (spins > budget) {
        slept = true;
        Atomics.wait(ctrl, SEQ, seq);
      }
    }
    budget = adaptSpin(budget, slept);
    seq = Atomics.load(ctrl, SEQ);
    if (Atomics.load(ctrl, STOP) !== 0) return;
    const saturated = runCalls(lut, ctrl, head);
    ctrl[head] = 0;
    Atomics.add(ctrl, SAT, saturated);
    Atomics.add(ctrl, DONE, 1);
    Atomics.notify(ctrl, DONE);
  }
}

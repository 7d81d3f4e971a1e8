/**
 * Frozen weight matrices kept once, in the layout their product streams, in one shared WebAssembly
 * memory that every thread of a kernels/pool.ts pool runs the same module on. A matrix W [N, K] (the
 * model's [out, in]) is stored as kernels/wasm/gen.ts `pack_b` lays out B = W^T: panels of NR = 8
 * output rows, k-major, the last panel padded with zeros. It is kept as bfloat16 when every value is
 * one (a bf16 export's weights: exact, half the bytes, widened in the product's loads), else as f32.
 * Nothing else of it is kept: the caller's f32 array may go. A matrix a GGUF file stores in quantized
 * blocks (Q8_0, Q4_0, IQ4_NL, Q4_K, Q6_K) is kept as those blocks, the file's bytes re-laid out in
 * panels (kernels/wasm/blocks.ts, `packBlocks`), and dequantized in the products' registers: the
 * same values, so the same bits, as the f32 it dequantizes to at load.
 *
 * A product `x @ W^T` splits W's panels between the threads: share i of P panels takes panels
 * [floor(i P / T), floor((i + 1) P / T)), and each output is the same f32 sum in the same k order as
 * one thread (or kernels/wasm/kernels.ts `matmul`) computes, so the bits never depend on the number of
 * threads.
 *
 * The matrices can serve several stores at once, each in its own worker (a chat server's slots): the
 * store that packed them `share`s them, and the others attach to its memory (`attach`) and pack
 * nothing. A product writes its input, output and scratch in a work area that only its store writes:
 * unshared, everything past the weights; shared, pages the store grew the memory by itself (a shared
 * memory grows atomically, so two stores growing at once get different pages).
 *
 * @example
 * ```ts
 * import { createPackedStore } from "./packed.ts";
 * declare const weights: Float32Array, N: number, K: number, x: Float32Array, M: number;
 * const y = new Float32Array(M * N);
 * const store = createPackedStore({ threads: 2 });
 * await store.ready;
 * const w = store.pack(weights, N, K);      // bf16 if exact, else f32; `weights` may be dropped now
 * store.matmul(y, x, w, M);                 // y [M, N] = x [M, K] @ W^T, on both threads
 * store.close();
 * ```
 * @module
 */
import { assemble, type Func } from "./asm.ts";
import {
  BLOCK_TYPES,
  type BlockDtype,
  blockRow,
  GEMV_BLOCK_PANELS,
  gemvBlocks,
  isBlockDtype,
  panelBytes,
  placeBlock,
  unpackBlocks,
} from "./blocks.ts";
import { gemm, gemvPanels, MR, NR, packA, packB, packBf16 } from "./gen.ts";
import { createPool, type Pool, type PoolHandler, poolMemory } from "../pool.ts";

/** How one packed matrix is kept: f32, bf16, or a GGUF file's quantized blocks (kernels/wasm/blocks.ts). */
export type PackedDtype = "f32" | "bf16" | BlockDtype;

/** The dtypes in the order a product's arguments name them (`productShare`'s args[6]). */
const DTYPES: readonly PackedDtype[] = ["f32", "bf16", ...Object.keys(BLOCK_TYPES) as BlockDtype[]];

/** Bytes of one panel (8 output rows) of a matrix of `dtype` with K inputs. */
export function packedPanelBytes(dtype: PackedDtype, K: number): number {
  return dtype === "f32" ? NR * K * 4 : dtype === "bf16" ? NR * K * 2 : panelBytes(dtype, K);
}

/** A matrix in the store: where, its shape and dtype. Plain data: the store's memory holds the values. */
export interface PackedMatrix {
  /** Byte offset of its first panel in the store's memory. */
  readonly at: number;
  /** Output rows N (W's first dimension). */
  readonly rows: number;
  /** Inputs K (W's second dimension). */
  readonly cols: number;
  readonly dtype: PackedDtype;
  /** Bytes it occupies: ceil(N / 8) panels of `packedPanelBytes` (roundUp(N, 8) * K * 4 or 2 for f32, bf16). */
  readonly bytes: number;
}

/**
 * Values [start, start + count) of a row-major matrix: written into `scratch` (which holds `count`) or a
 * view of memory of the reader's own.
 */
export type ReadRows = (
  start: number,
  count: number,
  scratch: Float32Array,
) => Float32Array | Promise<Float32Array>;

/**
 * The bytes of rows [row, row + rows) of a matrix stored in quantized blocks (each row whole blocks, as
 * a GGUF file holds them): written into `scratch` (which holds them) or a view of the reader's own memory.
 */
export type ReadBlocks = (
  row: number,
  rows: number,
  scratch: Uint8Array,
) => Uint8Array | Promise<Uint8Array>;

/** What another store needs to use a store's matrices: its shared memory and where the matrices end. */
export interface PackedShare {
  /** The shared memory the matrices lie in (structured-cloneable: it posts to a worker unchanged). */
  memory: WebAssembly.Memory;
  /** Bytes from the memory's start that hold the matrices (`PackedStore.weightBytes`). */
  weightBytes: number;
}

/** The store: its matrices' memory, the products over them, and the pool they run on. */
export interface PackedStore {
  /** Threads a product runs on. */
  readonly threads: number;
  /** Resolves when the pool's workers are up; `matmul` needs it settled. */
  readonly ready: Promise<void>;
  /** Bytes held by packed matrices (the weights), excluding the per-call work area. */
  readonly weightBytes: number;
  /**
   * Bytes of the whole shared memory (weights, work area and growth slack; shared, the other stores'
   * work areas too).
   */
  readonly memoryBytes: number;
  /**
   * Packs `w` ([N, K] row-major) and returns its handle. bf16 when every value is bf16 (and `dtype` is
   * not `f32`), else f32. The store copies what it needs: `w` is not kept.
   */
  pack(w: Float32Array, N: number, K: number, dtype?: "f32" | "bf16" | "auto"): PackedMatrix;
  /**
   * The same from a matrix read a chunk of rows at a time (about 1 MiB; `read` as a model/tensor.ts
   * `TensorSource` reads), so the caller never holds it whole. A matrix that turns out not to be bf16
   * is read again from the start as f32.
   */
  packFrom(read: ReadRows, N: number, K: number, dtype?: "f32" | "bf16" | "auto"): Promise<PackedMatrix>;
  /**
   * A matrix stored in quantized blocks of `dtype` (K a multiple of its block), kept as those blocks:
   * read a chunk of rows at a time (about 1 MiB) and re-laid out in panels. Refuses (RangeError) a block
   * whose scale is infinite or NaN: its values are not finite, and the products widen only finite f16.
   */
  packBlocks(read: ReadBlocks, N: number, K: number, dtype: BlockDtype): Promise<PackedMatrix>;
  /** `out[m*N + n] = sum_k x[m*K + k] * W[n, k]` for m < M, on every thread of the pool. */
  matmul(out: Float32Array, x: Float32Array, w: PackedMatrix, M: number): void;
  /** Row n of W into out[at .. at + K) (an embedding lookup from the packed table). */
  row(w: PackedMatrix, n: number, out: Float32Array, at?: number): void;
  /** W again as a plain [N, K] f32 array (exact: what was packed), e.g. to hash it. */
  unpack(w: PackedMatrix): Float32Array;
  /**
   * The matrices for other stores to attach to (`PackedStoreOptions.attach`); undefined where the memory
   * is not shared (then there is nothing to attach to). From then on nothing more may be packed, and the
   * store's products work in pages it grew the memory by, as an attached store's do.
   */
  share(): PackedShare | undefined;
  /** Ends the pool's workers. */
  close(): void;
}

/** Options of `createPackedStore`. */
export interface PackedStoreOptions {
  /** Threads products run on, the caller's included (default 1). */
  threads?: number;
  /**
   * A product is split between the threads only if its matrix holds at least this many bytes or it
   * has at least `SPLIT_MACS` multiply-adds (default `SPLIT_BYTES`): below that, waking the workers
   * costs more than they save, so it runs on the caller's thread alone. The bits are the same either
   * way; tests pass 0 to split every product.
   */
  splitBytes?: number;
  /**
   * Another store's matrices (its `share()`, possibly from another worker): this store runs products
   * over them and packs nothing; its own work areas are pages it grows the memory by.
   */
  attach?: PackedShare;
}

/** Matrix bytes from which a product is split between threads (1 MiB: about 100 µs of reading). */
export const SPLIT_BYTES = 1 << 20;
/** Multiply-adds from which a product is split whatever its matrix's size (a prefill's). */
export const SPLIT_MACS = 1 << 21;

/** gemm(pa, pb, M, N, K, c, ldc, accumulate, tmp): see kernels/wasm/gen.ts. */
type Gemm = (
  pa: number,
  pb: number,
  M: number,
  N: number,
  K: number,
  c: number,
  ldc: number,
  acc: number,
  tmp: number,
) => void;

/** gemv_panels(pa, pb, groups, K, c): see kernels/wasm/gen.ts `gemvPanels`. */
type GemvPanels = (pa: number, pb: number, groups: number, K: number, c: number) => void;
/** unpack_DTYPE(src, K, panels, dst): see kernels/wasm/blocks.ts `unpackBlocks`. */
type Unpack = (src: number, K: number, panels: number, dst: number) => void;
/** The block kernels, per block dtype. */
type BlockExports =
  & { [D in BlockDtype as `gemv_panels_${D}`]: GemvPanels }
  & { [D in BlockDtype as `unpack_${D}`]: Unpack };

interface Exports extends BlockExports {
  pack_a(src: number, is: number, ks: number, rows: number, K: number, dst: number): void;
  pack_b(src: number, cs: number, ks: number, N: number, K: number, dst: number): void;
  pack_a1(src: number, is: number, ks: number, rows: number, K: number, dst: number): void;
  pack_bf16(src: number, K: number, panels: number, dst: number): number;
  gemm: Gemm;
  gemm_bf16: Gemm;
  gemm1: Gemm;
  gemm1_bf16: Gemm;
  gemv_panels: GemvPanels;
  gemv_panels_bf16: GemvPanels;
}

/** Panels the one-row product runs at once (kernels/wasm/gen.ts `gemvPanels`). */
export const GEMV_PANELS = 4;

const PAGE = 65536;
/** The memory may grow to 4 GiB (wasm32's limit); pages are committed only as it grows. */
const MAX_PAGES = 65536;
const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;
/** f32 slots of one thread's splatted A chunk (as kernels/wasm/kernels.ts): about 256 KiB, in L2. */
const A_CHUNK = 65536;
/** f32 values of plain rows copied into the memory at a time while packing (1 MiB). */
const PACK_CHUNK = 1 << 18;
/** Bytes of a block matrix's rows read at a time while packing (1 MiB). */
const PACK_BLOCK_BYTES = 1 << 20;

/** The module every thread instantiates on the shared memory. */
export function packedModuleBytes(shared = true, pages = 1): Uint8Array<ArrayBuffer> {
  return assemble({
    pages,
    importedMemory: { maximum: MAX_PAGES, shared },
    functions: {
      pack_a: packA(),
      pack_b: packB(),
      pack_a1: packA(1),
      pack_bf16: packBf16(),
      gemm: gemm(),
      gemm_bf16: gemm(MR, NR, undefined, true),
      gemm1: gemm(1),
      gemm1_bf16: gemm(1, NR, undefined, true),
      gemv_panels: gemvPanels(GEMV_PANELS, false),
      gemv_panels_bf16: gemvPanels(GEMV_PANELS, true),
      ...Object.fromEntries(
        (Object.keys(BLOCK_TYPES) as BlockDtype[]).flatMap((d): [string, Func][] => [
          [`gemv_panels_${d}`, gemvBlocks(d)],
          [`unpack_${d}`, unpackBlocks(d)],
        ]),
      ),
    },
  });
}

/** Rows of A one pack_a chunk holds for inputs of length K. */
const chunkRows = (M: number, K: number, chunk = A_CHUNK) =>
  Math.min(roundUp(M, MR), Math.max(MR, Math.floor(chunk / (4 * K) / MR) * MR));
/**
 * f32 slots of A's chunk in a product over quantized blocks (4 MiB): each panel is dequantized once per
 * chunk, so a bigger chunk dequantizes less, and streaming it from L3 costs less than that. At K = 3072
 * (a 0.6B down projection) the f32 chunk held 4 rows, and a 64-row prefill ran at half the speed.
 */
const BLOCK_A_CHUNK = 16 * A_CHUNK;
/**
 * Bytes of one thread's product scratch: its A chunk, then an MR x NR edge tile, then (a block dtype)
 * one panel dequantized to f32.
 */
export const shareScratchBytes = (M: number, K: number, dtype: PackedDtype = "f32"): number =>
  isBlockDtype(dtype)
    ? roundUp((chunkRows(M, K, BLOCK_A_CHUNK) * 4 * K + MR * NR) * 4, 16) + NR * K * 4
    : roundUp((chunkRows(M, K) * 4 * K + MR * NR) * 4, 16);

/**
 * One thread's share of a product, on its instance. args: M, N, K, a, pb, c, dtype, scratch, stride
 * (a, pb, c, scratch byte offsets; a [M, K] and c [M, N] row-major f32; dtype W's index in `DTYPES`,
 * 0 f32 and 1 bf16; scratch + share * stride this share's own).
 */
export function productShare(ex: Exports): PoolHandler {
  const { pack_a, pack_a1, gemm, gemm_bf16, gemm1, gemm1_bf16, gemv_panels, gemv_panels_bf16 } = ex;
  return (args, share, shares) => {
    const M = args[0], N = args[1], K = args[2], a = args[3] >>> 0, pb = args[4] >>> 0, c = args[5] >>> 0;
    const dtype = DTYPES[args[6]], scratch = (args[7] >>> 0) + share * (args[8] >>> 0);
    const panels = Math.ceil(N / NR);
    const p0 = Math.floor(share * panels / shares), p1 = Math.floor((share + 1) * panels / shares);
    if (p0 === p1) return;
    const n0 = p0 * NR, n = Math.min(N, p1 * NR) - n0;
    const b = pb + p0 * packedPanelBytes(dtype, K), out = c + n0 * 4;
    if (isBlockDtype(dtype)) return blocksShare(ex, dtype, M, N, K, a, b, n, out, scratch);
    const bf16 = dtype === "bf16";
    if (M === 1) {
      // One row: whole groups of GEMV_PANELS panels together, the rest as 1 x NR tiles; each output is
      // the same sum as a row of an MR-row tile.
      pack_a1(a, K, 1, 1, K, scratch);
      const groups = Math.floor(Math.floor(n / NR) / GEMV_PANELS), done = groups * GEMV_PANELS * NR;
      if (groups > 0) (bf16 ? gemv_panels_bf16 : gemv_panels)(scratch, b, groups, K, out);
      if (done < n) {
        const rest = b + done * K * (bf16 ? 2 : 4);
        (bf16 ? gemm1_bf16 : gemm1)(scratch, rest, 1, n - done, K, out + done * 4, N, 0, scratch + 16 * K);
      }
      return;
    }
    const rows = chunkRows(M, K), tmp = scratch + rows * 16 * K, run = bf16 ? gemm_bf16 : gemm;
    for (let m0 = 0; m0 < M; m0 += rows) {
      const m = Math.min(rows, M - m0);
      pack_a(a + m0 * K * 4, K, 1, m, K, scratch);
      run(scratch, b, m, n, K, out + m0 * N * 4, N, 0, tmp);
    }
  };
}

/**
 * `productShare` over panels of quantized blocks: n outputs from the panels at `b`. One row: whole
 * groups of the type's panels in registers (kernels/wasm/blocks.ts `gemvBlocks`); the panels left, and
 * every panel of a product of more rows, are dequantized into f32 panels in the scratch, one at a time,
 * and run by the f32 kernels (`unpackBlocks`, then gemm1 or gemm), each panel once per chunk of A's rows.
 * Every output is the f32 kernels' sum of the same values, so the bits are those of the f32 matrix.
 */
function blocksShare(
  ex: Exports,
  dtype: BlockDtype,
  M: number,
  N: number,
  K: number,
  a: number,
  b: number,
  n: number,
  out: number,
  scratch: number,
): void {
  const per = panelBytes(dtype, K), unpack = ex[`unpack_${dtype}`], rows = chunkRows(M, K, BLOCK_A_CHUNK);
  const tmp = scratch + rows * 16 * K, panel = tmp + MR * NR * 4;
  if (M === 1) {
    ex.pack_a1(a, K, 1, 1, K, scratch);
    const P = GEMV_BLOCK_PANELS, groups = Math.floor(Math.floor(n / NR) / P);
    if (groups > 0) ex[`gemv_panels_${dtype}`](scratch, b, groups, K, out);
    for (let q = groups * P * NR; q < n; q += NR) {
      unpack(b + (q / NR) * per, K, 1, panel);
      ex.gemm1(scratch, panel, 1, Math.min(NR, n - q), K, out + q * 4, N, 0, tmp);
    }
    return;
  }
  for (let m0 = 0; m0 < M; m0 += rows) {
    const m = Math.min(rows, M - m0);
    ex.pack_a(a + m0 * K * 4, K, 1, m, K, scratch);
    for (let q = 0; q < n; q += NR) {
      unpack(b + (q / NR) * per, K, 1, panel);
      ex.gemm(scratch, panel, m, Math.min(NR, n - q), K, out + (m0 * N + q) * 4, N, 0, tmp);
    }
  }
}

/** An instance of the module on `memory` (what each worker does in kernels/wasm/packed-task.ts). */
export function instantiatePacked(memory: WebAssembly.Memory): Exports {
  // Where SharedArrayBuffer is not defined (a page that is not cross-origin isolated), no memory is shared.
  const shared = typeof SharedArrayBuffer === "function" && memory.buffer instanceof SharedArrayBuffer;
  const module = new WebAssembly.Module(packedModuleBytes(shared));
  return new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as Exports;
}

/**
 * A store with its own shared memory and a pool of `threads` (see the module doc), or, with `attach`,
 * over another store's matrices. Where shared memory is not allowed (a page that is not cross-origin
 * isolated), a plain memory and one thread.
 */
export function createPackedStore(options: PackedStoreOptions = {}): PackedStore {
  const { memory, threads } = options.attach
    ? { memory: options.attach.memory, threads: options.threads ?? 1 }
    : poolMemory(options.threads ?? 1);
  const ex = instantiatePacked(memory);
  const productOf = productShare(ex), args = new Int32Array(9);
  const pool: Pool = createPool(
    threads,
    new URL("./packed-task.ts", import.meta.url),
    { memory },
    productOf,
  );
  let weightsEnd = options.attach?.weightBytes ?? 0;
  let heapF32 = new Float32Array(memory.buffer), have = memory.buffer.byteLength;
  // Whether other stores use the matrices (this one attached to them, or shared them): then no more
  // may be packed, and others grow the memory too, so this store works only in pages it grew itself,
  // [workAt, workEnd) (none yet for an attached store).
  let shared = options.attach !== undefined, workAt = 0, workEnd = 0;
  // Grows the memory by `pages`; returns its byte length before, where the new pages begin: they are
  // this thread's alone, whatever other threads grow at the same time. Refreshes the f32 view.
  const grow = (pages: number): number => {
    let before: number;
    try {
      before = memory.grow(pages) * PAGE;
    } catch {
      throw new RangeError(`packed weights: ${pages} more pages pass wasm32's 4 GiB`);
    }
    heapF32 = new Float32Array(memory.buffer);
    have = heapF32.byteLength;
    return before;
  };
  // Makes the memory at least `bytes` long; returns the f32 view (fresh after any growth). Until the
  // matrices are shared only this thread grows the memory, so its length is tracked here rather than
  // asked for on every call.
  const ensure = (bytes: number): Float32Array => {
    if (bytes <= have) return heapF32;
    if (bytes > MAX_PAGES * PAGE) {
      throw new RangeError(`packed weights: ${bytes} bytes exceed wasm32's 4 GiB`);
    }
    grow(Math.ceil((bytes - have) / PAGE));
    return heapF32;
  };
  // The byte offset of `bytes` of work area that no other store writes: unshared, right past the
  // weights; shared, this store's own pages, extended when nobody grew the memory since this store
  // last did, else fresh pages past whatever the others took (the old ones are left unused).
  const workArea = (bytes: number): number => {
    if (!shared) {
      ensure(weightsEnd + bytes);
      return weightsEnd;
    }
    while (workEnd - workAt < bytes) {
      const pages = Math.ceil((bytes - (workEnd - workAt)) / PAGE), before = grow(pages);
      if (before !== workEnd) workAt = before;
      workEnd = before + pages * PAGE;
    }
    return workAt;
  };
  const refuseShared = () => {
    if (shared) throw new Error("pack: the matrices are shared with other stores; no more may be packed");
  };
  const splitBytes = options.splitBytes ?? SPLIT_BYTES;

  // Packs an [N, K] matrix at `at` as pack_b would (panels of NR rows, k-major, padded with zeros),
  // reading it a chunk of panels at a time: each `yield [start, count, scratch]` asks for the values
  // [start, start + count) and is answered with them (the answer may be written into the `count` floats
  // at byte `scratch` of the memory, which then need no copy). As bf16, whole panels go through
  // pack_bf16 when K is a multiple of 4, the rest row by row, the high halves of rows n and n + 4 making
  // one 32-bit store (gen.ts `bf16Lanes`); a value that loses bits returns false at once (the caller
  // packs again as f32). The memory grows once, first: growing a memory that is not shared detaches
  // the views made before.
  function* packing(
    N: number,
    K: number,
    at: number,
    bf16: boolean,
  ): Generator<[number, number, number], boolean, Float32Array> {
    const panels = Math.ceil(N / NR), slots = panels * NR * K, full = Math.floor(N / NR);
    const step = Math.max(1, Math.floor(PACK_CHUNK / (NR * K)));
    const scratch = roundUp(at + slots * (bf16 ? 2 : 4), 16);
    const heap = ensure(scratch + step * NR * K * 4);
    const dst = new Uint32Array(memory.buffer, at, bf16 ? slots / 2 : slots);
    dst.fill(0, ((panels - 1) * NR * K) / (bf16 ? 2 : 1)); // the last panel, whose padding rows stay zero
    for (let p0 = 0; p0 < panels; p0 += step) {
      const n0 = p0 * NR, n1 = Math.min(N, (p0 + step) * NR);
      const values = yield [n0 * K, (n1 - n0) * K, scratch];
      const src = new Uint32Array(values.buffer, values.byteOffset, values.length);
      if (!bf16) {
        for (let n = n0; n < n1; n++) {
          const from = (n - n0) * K, to = (n - (n % NR)) * K + (n % NR);
          for (let k = 0; k < K; k++) dst[to + k * NR] = src[from + k];
        }
        continue;
      }
      let p = p0;
      const whole = K % 4 === 0 ? Math.max(0, Math.min(p0 + step, full) - p0) : 0;
      if (whole > 0) {
        if (values.buffer !== memory.buffer || values.byteOffset !== scratch) {
          heap.set(values.subarray(0, whole * NR * K), scratch / 4);
        }
        if (ex.pack_bf16(scratch, K, whole, at + p0 * NR * K * 2) !== 0) return false;
        p += whole;
      }
      for (; p * NR < n1; p++) {
        for (let j = 0; j < NR / 2; j++) {
          const n = p * NR + j, out = (p * NR * K) / 2 + j;
          if (n >= N) break;
          const from = (n - n0) * K, next = n + NR / 2 < N ? from + (NR / 2) * K : -1;
          let lost = 0;
          for (let k = 0; k < K; k++) {
            const a = src[from + k], b = next < 0 ? 0 : src[next + k];
            lost |= (a | b) & 0xffff;
            dst[out + k * (NR >> 1)] = (a >>> 16) | (b & 0xffff0000);
          }
          if (lost !== 0) return false;
        }
      }
    }
    return true;
  }
  // A packing answered from an array in memory.
  const packAt = (w: Float32Array, N: number, K: number, at: number, bf16: boolean): boolean => {
    const run = packing(N, K, at, bf16);
    for (let r = run.next();; r = run.next(w.subarray(r.value[0], r.value[0] + r.value[1]))) {
      if (r.done) return r.value;
    }
  };
  // A packing answered by `read`, a chunk at a time, into the memory's scratch.
  const packFromAt = async (read: ReadRows, N: number, K: number, at: number, bf16: boolean) => {
    const run = packing(N, K, at, bf16);
    let r = run.next();
    while (!r.done) {
      const [start, count, scratch] = r.value;
      r = run.next(await read(start, count, new Float32Array(memory.buffer, scratch, count)));
    }
    return r.value;
  };
  // The matrix's handle, once packed at `at` as `kept`.
  const placed = (at: number, N: number, K: number, kept: PackedDtype): PackedMatrix => {
    const bytes = Math.ceil(N / NR) * packedPanelBytes(kept, K);
    weightsEnd = roundUp(at + bytes, 16);
    return { at, rows: N, cols: K, dtype: kept, bytes };
  };
  const refuseNarrow = (dtype: string, kept: PackedDtype) => {
    if (dtype === "bf16" && kept !== "bf16") {
      throw new RangeError("pack: bf16 asked for, but a value is not bf16");
    }
  };

  const store: PackedStore = {
    threads: pool.threads,
    ready: pool.ready,
    get weightBytes() {
      return weightsEnd;
    },
    get memoryBytes() {
      return memory.buffer.byteLength;
    },
    pack(w, N, K, dtype = "auto") {
      refuseShared();
      if (w.length !== N * K) throw new RangeError(`pack: ${w.length} values are not [${N}, ${K}]`);
      const at = weightsEnd;
      let kept: PackedDtype = dtype === "f32" ? "f32" : "bf16";
      if (kept === "bf16" && !packAt(w, N, K, at, true)) kept = "f32";
      if (kept === "f32") packAt(w, N, K, at, false);
      refuseNarrow(dtype, kept);
      return placed(at, N, K, kept);
    },
    async packFrom(read, N, K, dtype = "auto") {
      refuseShared();
      const at = weightsEnd;
      let kept: PackedDtype = dtype === "f32" ? "f32" : "bf16";
      if (kept === "bf16" && !await packFromAt(read, N, K, at, true)) kept = "f32";
      if (kept === "f32") await packFromAt(read, N, K, at, false);
      refuseNarrow(dtype, kept);
      return placed(at, N, K, kept);
    },
    async packBlocks(read, N, K, dtype) {
      refuseShared();
      const { values, bytes } = BLOCK_TYPES[dtype];
      if (K % values !== 0) {
        throw new RangeError(`packBlocks: K ${K} is not a whole number of ${dtype} blocks`);
      }
      const at = weightsEnd,
        panels = Math.ceil(N / NR),
        per = panelBytes(dtype, K),
        rowBytes = (K / values) * bytes;
      const step = Math.max(1, Math.floor(PACK_BLOCK_BYTES / per)), scratch = roundUp(at + panels * per, 16);
      ensure(scratch + step * NR * rowBytes); // once, first: growing detaches an unshared memory's views
      new Uint8Array(memory.buffer).fill(0, at, at + panels * per); // codes are ORed into their bytes
      for (let p0 = 0; p0 < panels; p0 += step) {
        const n0 = p0 * NR, n1 = Math.min(N, (p0 + step) * NR);
        const src = await read(n0, n1 - n0, new Uint8Array(memory.buffer, scratch, (n1 - n0) * rowBytes));
        const mem = new Uint8Array(memory.buffer);
        for (let n = n0; n < n1; n++) {
          const from = (n - n0) * rowBytes, panel = at + (n >> 3) * per;
          for (let blk = 0; blk < K / values; blk++) {
            if (!placeBlock(dtype, src, from + blk * bytes, mem, panel + blk * NR * bytes, n & 7)) {
              throw new RangeError(`packBlocks: row ${n}, block ${blk}: a scale is not finite`);
            }
          }
        }
      }
      return placed(at, N, K, dtype);
    },
    matmul(out, x, w, M) {
      const N = w.rows, K = w.cols;
      if (M === 0 || N === 0) return;
      const stride = shareScratchBytes(M, K, w.dtype);
      const split = pool.threads > 1 && (w.bytes >= splitBytes || M * N * K >= SPLIT_MACS);
      const inBytes = roundUp(M * K * 4, 16), outBytes = roundUp(M * N * 4, 16);
      const a = workArea(inBytes + outBytes + stride * (split ? pool.threads : 1));
      const c = a + inBytes, scratch = c + outBytes, heap = heapF32;
      heap.set(x.length === M * K ? x : x.subarray(0, M * K), a / 4);
      args[0] = M, args[1] = N, args[2] = K, args[3] = a, args[4] = w.at, args[5] = c;
      args[6] = DTYPES.indexOf(w.dtype), args[7] = scratch, args[8] = stride;
      if (split) pool.run(args);
      else productOf(args, 0, 1);
      out.set(heap.subarray(c / 4, c / 4 + M * N));
    },
    row(w, n, out, at = 0) {
      const K = w.cols, base = (n >> 3) * 8 * K, lane = n & 7;
      if (isBlockDtype(w.dtype)) {
        const mem = new Uint8Array(memory.buffer);
        return blockRow(w.dtype, mem, w.at + (n >> 3) * panelBytes(w.dtype, K), K, lane, out, at);
      }
      if (w.dtype === "f32") {
        const heap = ensure(0), from = w.at / 4 + base + lane;
        for (let k = 0; k < K; k++) out[at + k] = heap[from + 8 * k];
        return;
      }
      // bf16 lanes: n0, n4, n1, n5, … (gen.ts `bf16Lanes`)
      const halves = new Uint16Array(memory.buffer),
        from = w.at / 2 + base + (lane < 4 ? 2 * lane : 2 * lane - 7);
      const bits = new Uint32Array(out.buffer, out.byteOffset + at * 4, K);
      for (let k = 0; k < K; k++) bits[k] = halves[from + 8 * k] << 16;
    },
    unpack(w) {
      const out = new Float32Array(w.rows * w.cols);
      for (let n = 0; n < w.rows; n++) store.row(w, n, out, n * w.cols);
      return out;
    },
    share() {
      if (typeof SharedArrayBuffer !== "function" || !(memory.buffer instanceof SharedArrayBuffer)) {
        return undefined;
      }
      // This store's work area so far, everything past the weights, stays its own; others grow past it.
      if (!shared) shared = true, workAt = weightsEnd, workEnd = have;
      return { memory, weightBytes: weightsEnd };
    },
    close: () => pool.close(),
  };
  return store;
}

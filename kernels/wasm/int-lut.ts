/**
 * The integer engine's WebAssembly half, made at load: a module with the functions of
 * kernels/wasm/int-gemv.ts (the projection), int-attention.ts (attention) and int-vector.ts
 * (norm, requantisation, RoPE, SiLU, the SwiGLU product and the residual add), with every lut4 matrix's codes and scales, the exp, SiLU and RoPE
 * tables, and room for the engine's vectors, the KV cache's digit planes and exponent mirrors laid out
 * in its memory. This file runs once per model load and is not serving code; the serving code is the
 * audited TypeScript that calls the module (kernels/int/gemv-lut.ts, attention.ts, engines/int/forward.ts)
 * and the module's functions, audited by opcode (tests/kernels/audit.test.ts, from `INT_LUT_FUNCTIONS` and
 * `portableLutFunctions()`, the very records assembled here).
 *
 * @example
 * ```ts
 * import { createLutSums } from "./int-lut.ts";
 * import { gemvLut, inputPlanes } from "../int/gemv-lut.ts";
 * import type { PreparedMatrix } from "../int/gemv.ts";
 * declare const mat: PreparedMatrix, x: Int32Array, out: Int32Array, xExp: number, outExp: number;
 * const made = createLutSums([mat]);          // null where WebAssembly SIMD is missing
 * if (made) { inputPlanes(x, -1, 0, mat.cols, made.lut);
 *   gemvLut(out, -1, 0, mat, made.lut, made.at[0], made.scalesAt[0], xExp, outExp); }
 * ```
 * @module
 */
import { assemble, type Code, fn, type Func, I32, op, uleb } from "./asm.ts";
import {
  attendHeadsFn,
  attendWorkBytes,
  cacheDigitsFn,
  mixFn,
  scoresFn,
  softmaxFn,
} from "./int-attention.ts";
import { gemvFn, planesFn } from "./int-gemv.ts";
import { lanesFn, lanesWorkBytes } from "./int-lanes.ts";
import {
  addSatFn,
  gatedProductFn,
  normRopeFn,
  quantizeFn,
  quantizeHeadsFn,
  rmsnormFn,
  ropeFn,
  siluFn,
  swigluFn,
} from "./int-vector.ts";
import { get, localsAfter, set } from "./int-ops.ts";
import type { LutMatrix } from "../int/gemv.ts";
import type { LutSums } from "../int/gemv-lut.ts";
import { TASK_BYTES } from "../int/attention.ts";

/**
 * The functions of the module, by export name: what `createLutSums` assembles and the audit censuses.
 * `relaxed` reads tables with `i8x16.relaxed_swizzle` (the same results for indices below 16, the only
 * ones the engine uses); a runtime without relaxed SIMD gets the plain `i8x16.swizzle` set.
 */
export function intLutFunctions(relaxed: boolean): Record<string, Func> {
  const functions: Record<string, Func> = {
    planes_offset: planesFn("offset"),
    planes_digits: planesFn("digits"),
    planes_unsigned: planesFn("unsigned"),
    gemv_lut: gemvFn(relaxed),
    gemv_lanes4: lanesFn(4),
    gemv_lanes8: lanesFn(8),
    gemv_lanes16: lanesFn(16),
    gemv_lanes32: lanesFn(32),
    scores: scoresFn(relaxed),
    softmax: softmaxFn(),
    mix: mixFn(relaxed),
    cache_digits: cacheDigitsFn(),
    quantize: quantizeFn(),
    swiglu: swigluFn(),
    rmsnorm: rmsnormFn(),
    add_sat: addSatFn(),
    rope: ropeFn(),
    silu: siluFn(),
    layout_codes: layoutFn(),
  };
  // attend_heads calls five of the functions above, by their index: their place in this record.
  const index = (name: string) => Object.keys(functions).indexOf(name);
  functions.attend_heads = attendHeadsFn({
    planesDigits: index("planes_digits"),
    scores: index("scores"),
    softmax: index("softmax"),
    planesUnsigned: index("planes_unsigned"),
    mix: index("mix"),
  });
  functions.norm_rope = normRopeFn({
    rmsnorm: index("rmsnorm"),
    quantize: index("quantize"),
    rope: index("rope"),
  });
  functions.quantize_heads = quantizeHeadsFn({ quantize: index("quantize") });
  functions.gated_product = gatedProductFn({
    silu: index("silu"),
    quantize: index("quantize"),
    swiglu: index("swiglu"),
  });
  return functions;
}

/**
 * `layout_codes(src, dst, pairs)`: one 16-row block of a matrix's codes from the file's row-major bytes
 * (16 rows of `pairs` bytes at `src`, `pairs` a multiple of 16) to the engine's layout at `dst` (per pair
 * of columns, the 16 rows' bytes): 16 × 16 byte transposes by four rounds of interleaving shuffles
 * (bytes, then 16-, 32- and 64-bit pieces). Load-time code, about 20× the JavaScript transpose.
 */
export function layoutFn(): Func {
  const src = 0, dst = 1, pairs = 2;
  const l = localsAfter(3);
  const j = l.i32(), d = l.i32();
  const row = Array.from({ length: 16 }, () => l.i32()); // row i's first byte: src + i · pairs
  const v = Array.from({ length: 16 }, () => l.v128()), w = Array.from({ length: 16 }, () => l.v128());
  // Interleaves the low (or high) halves of two vectors in pieces of `e` bytes.
  const zip = (e: number, high: boolean) =>
    op.i8x16_shuffle(Array.from({ length: 16 }, (_, b) => {
      const piece = (b / (2 * e)) | 0, second = b % (2 * e) >= e, at = (high ? 8 : 0) + piece * e + (b % e);
      return second ? 16 + at : at;
    }));
  // One round: out[2k], out[2k + 1] = the low and high zips of in[x], in[y] for the pairs `pairsOf` lists.
  const round = (from: number[], to: number[], e: number, pairsOf: [number, number][]): Code =>
    pairsOf.map(([x, y], k) => [
      get(from[x]),
      get(from[y]),
      zip(e, false),
      set(to[2 * k]),
      get(from[x]),
      get(from[y]),
      zip(e, true),
      set(to[2 * k + 1]),
    ]);
  const idx = (n: number, f: (k: number) => [number, number]) => Array.from({ length: n }, (_, k) => f(k));
  return fn([I32, I32, I32], [], l.types, [
    get(src),
    set(row[0]),
    row.slice(1).map((r, i) => [get(row[i]), get(pairs), op.i32_add, set(r)]),
    get(dst),
    set(d),
    op.i32(0),
    set(j),
    op.block([op.loop([
      get(j),
      get(pairs),
      op.i32_ge_s,
      op.br_if(1),
      v.map((x, i) => [get(row[i]), get(j), op.i32_add, op.v128_load(), set(x)]),
      // Bytes of rows 2i, 2i + 1 (columns 0–7, 8–15); then 16-bit pieces of row pairs (2i, 2i + 1) by
      // column half; 32-bit pieces of row quads by column quarter; 64-bit pieces of the two row halves.
      round(v, w, 1, idx(8, (k) => [2 * k, 2 * k + 1])),
      round(w, v, 2, idx(8, (k) => [4 * (k >> 1) + (k & 1), 4 * (k >> 1) + 2 + (k & 1)])),
      round(v, w, 4, idx(8, (k) => [8 * (k >> 2) + (k & 3), 8 * (k >> 2) + 4 + (k & 3)])),
      round(w, v, 8, idx(8, (k) => [k, 8 + k])),
      v.map((x, t) => [get(d), get(x), op.v128_store(16 * t)]),
      get(d),
      op.i32(256),
      op.i32_add,
      set(d),
      get(j),
      op.i32(16),
      op.i32_add,
      set(j),
      op.br(0),
    ])]),
  ]);
}

/** The functions `createLutSums` assembles: with relaxed table reads. */
export const INT_LUT_FUNCTIONS: Record<string, Func> = intLutFunctions(true);

let portable: Record<string, Func> | undefined;
/**
 * The functions without relaxed table reads, for a runtime that refuses them (or `LutRoom.relaxed`
 * false): made on first use, since making them cost every load about 50 ms under Deno.
 */
export function portableLutFunctions(): Record<string, Func> {
  return portable ??= intLutFunctions(false);
}

const PAGE = 65536;

/** Bytes of a matrix's codes in the 16-row-block layout (rows rounded up to 16, two codes a byte). */
function codeBytes(m: LutMatrix): number {
  return Math.ceil(m.rows / 16) * 16 * (m.cols / 2);
}

/** Bytes of a matrix's scales in the 16-row-block layout: per block, per group, 16 bytes. */
function scaleBytes(m: LutMatrix): number {
  return Math.ceil(m.rows / 16) * 16 * (m.cols / 32);
}

/**
 * Writes a matrix's codes at `mem[at, …)`: per 16-row block, per pair of columns, the 16 rows' bytes as
 * the file packs them (low nibble the even column), so laying out is a byte transpose; padding rows are
 * 0x88 (code 8 twice: weight 0). Whole blocks go through the module's `layout_codes`, each copied first to
 * `scratchAt` (room for 16 rows); the last rows of a matrix whose rows are not a multiple of 16 byte by
 * byte.
 */
export function layoutCodes(
  m: LutMatrix,
  mem: Uint8Array,
  at: number,
  layout: (src: number, dst: number, pairs: number) => void,
  scratchAt: number,
): void {
  const pairs = m.cols >> 1;
  const full = m.rows >> 4;
  const block = 16 * pairs;
  mem.fill(0x88, at + full * block, at + codeBytes(m));
  const nb = m.nibbles;
  for (let b = 0; b < full; b++) {
    mem.set(nb.subarray(b * block, (b + 1) * block), scratchAt);
    layout(scratchAt, at + b * block, pairs);
  }
  for (let r = full * 16; r < m.rows; r++) {
    const src = r * pairs;
    let dst = at + full * block + (r & 15);
    for (let j = 0; j < pairs; j++) {
      mem[dst] = nb[src + j];
      dst += 16;
    }
  }
}

/**
 * Writes a matrix's scale bytes at `mem[at, …)`: per 16-row block, per group, 16 rows' bytes; padding 0.
 * The scales are copied first, so `at` may be where they lie (a file read into the memory).
 */
export function layoutScales(m: LutMatrix, mem: Uint8Array, at: number): void {
  const groups = m.cols / 32;
  const scales = m.scales.slice();
  mem.fill(0, at, at + scaleBytes(m));
  for (let r = 0; r < m.rows; r++) {
    for (let g = 0; g < groups; g++) {
      mem[at + ((r >> 4) * groups + g) * 16 + (r & 15)] = scales[r * groups + g];
    }
  }
}

/** What the instance must hold beside the matrices (all optional). */
export interface LutRoom {
  /** Bytes of key digit planes (`LutSums.digitsAt`) and of value digit planes (`LutSums.valueDigitsAt`). */
  keyDigitBytes?: number;
  valueDigitBytes?: number;
  /** Positions the attention tables and probabilities must hold, and the head width. */
  positions?: number;
  headDim?: number;
  /** Bytes of the key and value exponent mirrors (`LutSums.keyExpAt`, `valueExpAt`). */
  expMirrorBytes?: number;
  /** Tasks of `attend_heads` one dispatch may hand out (query heads × batch slots; `LutSums.attendTasksAt`). */
  attendTasks?: number;
  /** int32 exponents of the batch slots' heads and gated products ((q + k + v heads + 1) × slots; `LutSums.headExpsAt`). */
  headExps?: number;
  /** int32 entries of room for the engine's own vectors (`LutSums.vectorsAt`). */
  vectorInts?: number;
  /** RoPE's cos and sin tables ([position][head_dim / 2], Q14), copied as int32 (`LutSums.ropeCosAt`). */
  rope?: { cos: Int16Array; sin: Int16Array };
  /** The softmax's exp table and its differences' multiples (kernels/int/tables.ts `LookupTable`). */
  exp?: { t: Int32Array; mul: Int32Array };
  /** false: assemble the plain-swizzle set even where relaxed SIMD is available (for tests). */
  relaxed?: boolean;
  /** The SiLU table and its differences' multiples (`LutSums.siluTAt`, `siluMulAt`). */
  silu?: { t: Int32Array; mul: Int32Array };
  /**
   * Further int32 tables the module's functions read (the engine's q and k gains' multiples for
   * `norm_rope`), copied in order; `LutSums.tablesAt[i]` is table i's byte address.
   */
  tables?: Int32Array[];
  /**
   * Threads that will call `gemv_lut` at once (default 1): each gets its own 128 bytes of scratch at
   * `scratchAt + 128 · thread`, and above 1 the memory is a shared one the module imports, so that
   * workers can instantiate the same bytes over it (`LutShared`).
   */
  threads?: number;
  /** Batch slots: copies of the engine's vectors (`vectorInts` each) and of the input planes (default 1). */
  slots?: number;
  /**
   * Room for the lanes projections (`gemv_lanesP`, kernels/wasm/int-lanes.ts): one work area per thread
   * for up to `lanes` inputs at once over matrices of at most `rows` rows (and the widest matrix's columns).
   */
  lanes?: { lanes: number; rows: number };
  /**
   * Engines that share the matrices (default 1): the memory holds the codes and scales once and, for
   * each of `sharers` engines (a chat server's slot workers), its own copy of everything else (the
   * planes, scratch, vectors, tables, lanes work areas and the KV cache's digit planes and mirrors). The
   * memory is then a shared one. The first engine (`attach` absent) lays the matrices out; each other
   * attaches to its `shared` memory as sharer `slot` and lays out nothing.
   */
  sharers?: number;
  /** Attach to another engine's memory as sharer `slot` (1 to `sharers - 1`, or 0 again when the first is gone). */
  attach?: { shared: LutShared; slot: number };
  /**
   * A file already read into a shared memory (`placedMemory`), as `bytes`, a view from its address 0: a
   * matrix whose codes and scales are views of `bytes` (and whose rows are whole 16-row blocks) is laid
   * out where it lies, so its bytes are written once, by the read. The memory grows to hold the rest
   * after the file. (Laying out into fresh memory costs mostly its first touch, about as much as the read.)
   */
  placed?: { memory: WebAssembly.Memory; bytes: Uint8Array };
}

/**
 * A shared memory to read a file of `size` bytes into, for `LutRoom.placed`, with the view the file goes
 * in (`into` of formats/lut4/lut4.ts `readLut4`). Its maximum is a 32-bit address space's: what it holds
 * beyond the file is known only once the file is read.
 */
export function placedMemory(size: number): { memory: WebAssembly.Memory; bytes: Uint8Array } {
  const memory = new WebAssembly.Memory({
    initial: Math.ceil(size / PAGE),
    maximum: MAX_PAGES,
    shared: true,
  });
  return { memory, bytes: new Uint8Array(memory.buffer, 0, size) };
}

/** What a worker needs to run the same module over the same memory: the bytes and the shared memory. */
export interface LutShared {
  bytes: Uint8Array<ArrayBuffer>;
  memory: WebAssembly.Memory;
  /**
   * Where the engine that laid the matrices out put them (`at`, `scalesAt`), where its own areas begin
   * and where the matrices after them end: an engine that attaches takes them as they are, since a file
   * laid out in place (`LutRoom.placed`) has each matrix where the file had it.
   */
  layout: { at: Int32Array; scalesAt: Int32Array; areasBase: number; matricesEnd: number };
}

/**
 * The module `bytes` with its own memory replaced by an imported shared one (`env.memory`, `pages` pages,
 * at most `maxPages`): the memory section is dropped and an import section put after the type section.
 */
function importSharedMemory(bytes: Uint8Array, pages: number, maxPages = pages): Uint8Array<ArrayBuffer> {
  const name = (s: string) => [...uleb(s.length), ...new TextEncoder().encode(s)];
  const entry = [1, ...name("env"), ...name("memory"), 0x02, 0x03, ...uleb(pages), ...uleb(maxPages)];
  const imports = Uint8Array.from([2, ...uleb(entry.length), ...entry]);
  // Sections are copied as views, not spread into arguments: a code section of a few hundred KB is
  // more arguments than a browser's stack takes.
  const parts: Uint8Array[] = [bytes.subarray(0, 8)];
  let at = 8;
  while (at < bytes.length) {
    const id = bytes[at];
    let size = 0;
    let shift = 0;
    let p = at + 1;
    for (;;) {
      const b = bytes[p++];
      size += (b & 127) * 2 ** shift;
      shift += 7;
      if (b < 128) break;
    }
    const end = p + size;
    if (id !== 5) parts.push(bytes.subarray(at, end));
    if (id === 1) parts.push(imports);
    at = end;
  }
  const out = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let put = 0;
  for (const part of parts) out.set(part, put), put += part.length;
  return out;
}

/** `memory` grown to at least `pages` pages (undefined stays undefined). */
function grown(memory: WebAssembly.Memory | undefined, pages: number): WebAssembly.Memory | undefined {
  const have = memory ? memory.buffer.byteLength / PAGE : 0;
  if (memory && pages > have) memory.grow(pages - have);
  return memory;
}

/** The most pages a WebAssembly memory of 32-bit addresses has (4 GiB). */
const MAX_PAGES = 65536;

/** Where one engine's own areas lie from `base`: everything of the memory but the matrices and the KV cache. */
function areasAt(
  base: number,
  room: LutRoom,
  widest: number,
  tallest: number,
  threads: number,
) {
  const positions = room.positions ?? 0;
  const headDim = room.headDim ?? 0;
  const align = (n: number) => Math.ceil(n / 16) * 16;
  const planesAt = base;
  const slots = Math.max(1, room.slots ?? 1);
  const scratchAt = align(planesAt + widest * 48);
  const inAt = scratchAt + 128 * threads;
  const outAt = align(inAt + widest * 4);
  const expTAt = align(outAt + Math.ceil(Math.max(tallest, headDim) / 16) * 16 * 4);
  const expMulAt = expTAt + (room.exp?.t.length ?? 0) * 4;
  const siluTAt = align(expMulAt + (room.exp?.mul.length ?? 0) * 4);
  const siluMulAt = siluTAt + (room.silu?.t.length ?? 0) * 4;
  const ropeCosAt = align(siluMulAt + (room.silu?.mul.length ?? 0) * 4);
  const ropeSinAt = ropeCosAt + (room.rope?.cos.length ?? 0) * 4;
  const tablesAt: number[] = [];
  let tableEnd = align(ropeSinAt + (room.rope?.sin.length ?? 0) * 4);
  for (const t of room.tables ?? []) {
    tablesAt.push(tableEnd);
    tableEnd = align(tableEnd + t.length * 4);
  }
  const vectorsAt = tableEnd;
  const slotVectorBytes = align((room.vectorInts ?? 0) * 4);
  const slotPlanesAt = vectorsAt + slotVectorBytes * slots;
  const slotPlaneBytes = align(widest * 48);
  const basesAt = slotPlanesAt + (slots > 1 ? slotPlaneBytes * slots : 0);
  const lanesAt = align(basesAt + 4 * slots);
  const lanesBytes = room.lanes ? align(lanesWorkBytes(room.lanes.lanes, widest, room.lanes.rows)) : 0;
  // attend_heads' work areas, one per thread (engines/int/forward.ts hands each thread its share of heads).
  const attendAt = align(lanesAt + lanesBytes * threads);
  const attendBytes = room.headDim && positions ? align(attendWorkBytes(room.headDim, positions)) : 0;
  const attendTasksAt = attendAt + attendBytes * threads;
  // The slots' exponents (`norm_rope`'s, `quantize_heads`' and `gated_product`'s), slot after slot.
  const headExpsAt = attendTasksAt + TASK_BYTES * (room.attendTasks ?? 0);
  const end = align(headExpsAt + 4 * (room.headExps ?? 0));
  return {
    planesAt,
    scratchAt,
    inAt,
    outAt,
    expTAt,
    expMulAt,
    siluTAt,
    siluMulAt,
    ropeCosAt,
    ropeSinAt,
    vectorsAt,
    slotVectorBytes,
    slotPlanesAt,
    slotPlaneBytes,
    basesAt,
    lanesAt,
    lanesBytes,
    attendAt,
    attendBytes,
    attendTasksAt,
    headExpsAt,
    tablesAt,
    end,
  };
}

/** Where one engine's KV cache copies lie from `base` (16-aligned): digit planes, then exponent mirrors. */
function cacheAt(base: number, room: LutRoom) {
  const align = (n: number) => Math.ceil(n / 16) * 16;
  const digitsAt = base;
  const valueDigitsAt = align(digitsAt + (room.keyDigitBytes ?? 0));
  const keyExpAt = align(valueDigitsAt + (room.valueDigitBytes ?? 0));
  const valueExpAt = keyExpAt + (room.expMirrorBytes ?? 0);
  return { digitsAt, valueDigitsAt, keyExpAt, valueExpAt, end: valueExpAt + (room.expMirrorBytes ?? 0) };
}

/**
 * An instance holding `mats`' codes and scales, with room for the planes of the widest input, the
 * scratch of the projections and attention, and the digit planes `room` asks for; `at[i]` and
 * `scalesAt[i]` are the byte addresses of `mats[i]`'s codes and scales. Null where the runtime lacks
 * WebAssembly SIMD (the engine then runs the TypeScript kernels alone), or where `sharers` engines'
 * areas do not fit one memory (each then lays out its own).
 */
export function createLutSums(
  mats: LutMatrix[],
  room: LutRoom = {},
): { lut: LutSums; at: Int32Array; scalesAt: Int32Array; shared: LutShared | null } | null {
  if (typeof WebAssembly === "undefined") return null;
  let widest = 0;
  let tallest = 0;
  for (const m of mats) {
    if (m.cols % 32 !== 0) throw new RangeError(`${m.name}: ${m.cols} columns, expected a multiple of 32`);
    widest = Math.max(widest, m.cols);
    tallest = Math.max(tallest, m.rows);
  }
  const threads = Math.max(1, room.threads ?? 1);
  const align = (n: number) => Math.ceil(n / 16) * 16;
  const at = new Int32Array(mats.length);
  const scalesAt = new Int32Array(mats.length);
  // Sharer 0's areas first (after a placed file), then the matrices not laid out in place, then its KV
  // cache; each further sharer's areas and KV cache after them, a stride apart.
  const given = room.attach?.shared.layout;
  const placed = room.attach ? undefined : room.placed;
  const inPlace = (m: LutMatrix) =>
    placed !== undefined && m.nibbles.buffer === placed.bytes.buffer &&
    m.scales.buffer === placed.bytes.buffer &&
    m.rows % 16 === 0;
  const areaBytes = areasAt(0, room, widest, tallest, threads).end;
  const areasBase = given?.areasBase ?? align(placed ? placed.bytes.byteOffset + placed.bytes.length : 0);
  const first = areasAt(areasBase, room, widest, tallest, threads);
  let next = given?.matricesEnd ?? first.end;
  if (given) at.set(given.at), scalesAt.set(given.scalesAt);
  else {
    mats.forEach((m, i) => {
      if (inPlace(m)) {
        at[i] = m.nibbles.byteOffset;
        scalesAt[i] = m.scales.byteOffset;
        return;
      }
      at[i] = align(next);
      scalesAt[i] = at[i] + codeBytes(m);
      next = scalesAt[i] + scaleBytes(m);
    });
  }
  const firstCache = cacheAt(align(next), room);
  const sharers = Math.max(1, room.sharers ?? 1);
  const stride = align(areaBytes) + align(firstCache.end - firstCache.digitsAt);
  const sharerAt = (k: number) => align(firstCache.end) + (k - 1) * stride;
  const slot = room.attach?.slot ?? 0;
  const area = slot === 0 ? first : areasAt(sharerAt(slot), room, widest, tallest, threads);
  const cache = slot === 0 ? firstCache : cacheAt(sharerAt(slot) + align(areaBytes), room);
  const { planesAt, scratchAt, inAt, outAt, expTAt, expMulAt } = area;
  const { siluTAt, siluMulAt, ropeCosAt, ropeSinAt, vectorsAt, slotVectorBytes, slotPlanesAt } = area;
  const { slotPlaneBytes, basesAt, lanesAt, lanesBytes, attendAt, attendBytes, attendTasksAt, headExpsAt } =
    area;
  const { tablesAt } = area;
  const { digitsAt, valueDigitsAt, keyExpAt, valueExpAt } = cache;
  const pages = Math.ceil((sharers === 1 ? firstCache.end : sharerAt(sharers)) / PAGE);
  if (pages > MAX_PAGES) {
    if (sharers > 1) return null; // the caller lays out a memory of its own instead
    throw new RangeError(
      `the model needs ${pages} pages of WebAssembly memory, more than ${MAX_PAGES} (4 GiB)`,
    );
  }
  const shared = threads > 1 || sharers > 1 || placed !== undefined;
  // A placed file's memory was made before its size was known: its maximum is the address space's.
  const maxPages = placed ? MAX_PAGES : pages;
  const build = (functions: Record<string, Func>) => {
    const plain = assemble({ pages, functions });
    return shared ? importSharedMemory(plain, pages, maxPages) : plain;
  };
  let bytes = room.attach?.shared.bytes ??
    build(room.relaxed === false ? portableLutFunctions() : INT_LUT_FUNCTIONS);
  if (!room.attach && !WebAssembly.validate(bytes)) bytes = build(portableLutFunctions());
  if (!WebAssembly.validate(bytes)) return null;
  const memory = room.attach?.shared.memory ?? grown(placed?.memory, pages) ??
    (shared ? new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true }) : null);
  const instance = new WebAssembly.Instance(new WebAssembly.Module(bytes), memory ? { env: { memory } } : {});
  const exports = instance.exports as unknown as
    & { memory: WebAssembly.Memory }
    & Pick<
      LutSums,
      | "planes_offset"
      | "planes_digits"
      | "planes_unsigned"
      | "gemv_lut"
      | "gemv_lanes4"
      | "gemv_lanes8"
      | "gemv_lanes16"
      | "gemv_lanes32"
      | "scores"
      | "softmax"
      | "mix"
      | "quantize"
      | "swiglu"
      | "rmsnorm"
      | "add_sat"
      | "rope"
      | "silu"
      | "attend_heads"
      | "cache_digits"
      | "norm_rope"
      | "quantize_heads"
      | "gated_product"
    >
    & { layout_codes(src: number, dst: number, pairs: number): void };
  const mem8 = new Uint8Array(exports.memory.buffer);
  if (!room.attach) {
    mats.forEach((m, i) => {
      // The input planes' room (48 bytes a column) holds 16 rows of codes (8 bytes a column). In place,
      // each block is copied there before its own bytes are overwritten.
      layoutCodes(m, mem8, at[i], exports.layout_codes, planesAt);
      layoutScales(m, mem8, scalesAt[i]);
    });
  }
  const mem32 = new Int32Array(exports.memory.buffer);
  if (room.exp) {
    mem32.set(room.exp.t, expTAt >> 2);
    mem32.set(room.exp.mul, expMulAt >> 2);
  }
  if (room.silu) {
    mem32.set(room.silu.t, siluTAt >> 2);
    mem32.set(room.silu.mul, siluMulAt >> 2);
  }
  (room.tables ?? []).forEach((t, i) => mem32.set(t, tablesAt[i] >> 2));
  if (room.rope) {
    mem32.set(room.rope.cos, ropeCosAt >> 2);
    mem32.set(room.rope.sin, ropeSinAt >> 2);
  }
  return {
    lut: {
      planes_offset: exports.planes_offset,
      planes_digits: exports.planes_digits,
      planes_unsigned: exports.planes_unsigned,
      gemv_lut: exports.gemv_lut,
      gemv_lanes4: exports.gemv_lanes4,
      gemv_lanes8: exports.gemv_lanes8,
      gemv_lanes16: exports.gemv_lanes16,
      gemv_lanes32: exports.gemv_lanes32,
      scores: exports.scores,
      softmax: exports.softmax,
      mix: exports.mix,
      quantize: exports.quantize,
      swiglu: exports.swiglu,
      rmsnorm: exports.rmsnorm,
      add_sat: exports.add_sat,
      rope: exports.rope,
      silu: exports.silu,
      attend_heads: exports.attend_heads,
      cache_digits: exports.cache_digits,
      norm_rope: exports.norm_rope,
      quantize_heads: exports.quantize_heads,
      gated_product: exports.gated_product,
      mem8,
      mem32,
      planesAt,
      scratchAt,
      inAt,
      inIndex: inAt >> 2,
      outAt,
      outIndex: outAt >> 2,
      digitsAt,
      valueDigitsAt,
      expTAt,
      expMulAt,
      expLen1: Math.max((room.exp?.t.length ?? 1) - 1, 0),
      keyExpAt,
      valueExpAt,
      vectorsAt,
      slotVectorBytes,
      slotPlanesAt,
      slotPlaneBytes,
      basesAt,
      basesIndex: basesAt >> 2,
      lanesAt,
      lanesBytes,
      lanesMax: room.lanes ? room.lanes.lanes : 0,
      attendAt,
      attendBytes,
      attendPositions: Math.ceil((room.positions ?? 0) / 16) * 16,
      attendTasksAt,
      headExpsAt,
      headExpsIndex: headExpsAt >> 2,
      tablesAt: Int32Array.from(tablesAt),
      ropeCosAt,
      ropeSinAt,
      siluTAt,
      siluMulAt,
    },
    at,
    scalesAt,
    shared: memory ? { bytes, memory, layout: { at, scalesAt, areasBase, matricesEnd: next } } : null,
  };
}

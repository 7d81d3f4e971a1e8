// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The WebAssembly SIMD kernels, generated as instruction sequences with kernels/wasm/asm.ts: the
 * matrix product, the causal row softmax and its backward, and the SwiGLU gate and its backward.
 *
 * The matrix product is packed: `pack_a` copies A (any two strides, so plain, transposed and strided
 * views all work) into panels of MR rows laid out k-major, each element splatted to a whole vector,
 * `pack_b` copies B into panels of NR columns, and `gemm` runs an MR x NR register tile over each
 * pair of panels, UNROLL steps of k a pass. Edge panels are padded
 * with zeros, so every tile runs the same code: each output is, wherever it sits, the same f32 sum in
 * the same order,
 * `s = 0; for k in 0..K: s = s + a[m,k] * b[k,n]` (each product and each sum rounded to f32, no
 * fused multiply-add), then `c = s` or `c = c + s`. That fixed order makes the results identical on
 * every runtime and for every M: a one-row decode gives the bits of the same row in a full prefill.
 *
 * Arguments are i32: pointers are byte addresses, sizes and strides are counts of f32 elements.
 * @module
 */
import { type Code, F32, fn, type Func, I32, op, V128, type ValType } from "./asm.ts";

/** Register tile: MR rows of A by NR columns of B (NR a multiple of 4). */
export const MR = 4, NR = 8;
/** Steps of the k loop per pass (the remainder runs one at a time). */
export const UNROLL = 4;

const { get, set } = op;

/** Numbers a function's locals: parameters first, then each `local(type)` call. */
export function locals(paramCount: number) {
  const types: ValType[] = [];
  return {
    types,
    local(t: ValType): number {
      types.push(t);
      return paramCount + types.length - 1;
    },
  };
}

/** `for (i = from; i < to; i += step) body`; `to` is re-evaluated each pass. */
export function forLoop(i: number, from: Code, to: Code, step: number, body: Code[]): Code {
  return [
    from,
    set(i),
    op.block([op.loop([get(i), to, op.i32_ge_s, op.br_if(1), ...body, get(i), op.i32(step), op.i32_add, set(i), op.br(0)])]),
  ];
}

/** `x = x + n` for an i32 local. */
export const bump = (x: number, n: Code): Code => [get(x), n, op.i32_add, set(x)];
/** `min(x, y)` of two i32 expressions (each evaluated twice). */
const minI32 = (x: Code, y: Code): Code => [x, y, x, y, op.i32_lt_s, op.select];

/**
 * One packing routine for both operands: element (i, k) of a matrix, i < rows, is src[i*is + k*ks];
 * it goes to dst[i / W][k][i % W] for panels of W = MR rows of A or W = NR columns of B. A last,
 * partial panel is padded with zeros. When is = 1 the W values of a panel are adjacent in memory and
 * move as vectors (B of dy @ W, A of dy^T @ x); otherwise one by one.
 *
 * With `splat`, each element is written four times, as a whole f32x4 (16 bytes): the tile then
 * reads A with plain vector loads. `v128.load32_splat` ran at about half speed on JavaScriptCore
 * (the tile's GFLOP/s went from about 24 to 35 on Bun, 24 to 30 on Deno, with this layout).
 *
 * pack(src, is, ks, rows, K, dst)
 */
function pack(W: number, splat: boolean): Func {
  const [src, is, ks, rows, K, dst] = [0, 1, 2, 3, 4, 5];
  const L = locals(6);
  const i0 = L.local(I32), k = L.local(I32), from = L.local(I32), to = L.local(I32), ksB = L.local(I32), isB = L.local(I32);
  const v = L.local(V128);
  const off = Array.from({ length: W }, () => L.local(I32)); // off[j] = j * is * 4
  const E = splat ? 16 : 4; // bytes per packed element
  const element = (j: number): Code => [get(from), get(off[j]), op.i32_add, op.f32_load()];
  const store = (j: number, value: Code): Code =>
    splat ? [get(to), value, op.f32x4_splat, op.v128_store(E * j)] : [get(to), value, op.f32_store(E * j)];
  const lane = (l: number) => Array.from({ length: 16 }, (_, b) => 4 * l + (b % 4));
  const vectors = (q: number): Code =>
    splat
      ? [
        get(from), op.v128_load(16 * q), set(v),
        [0, 1, 2, 3].map((l) => [get(to), get(v), get(v), op.i8x16_shuffle(lane(l)), op.v128_store(E * (4 * q + l))]),
      ]
      : [get(to), get(from), op.v128_load(16 * q), op.v128_store(16 * q)];
  const perK = (body: Code[]): Code =>
    forLoop(k, op.i32(0), get(K), 1, [...body, bump(from, get(ksB)), bump(to, op.i32(E * W))]);
  return fn([I32, I32, I32, I32, I32, I32], [], L.types, [
    get(ks), op.i32(4), op.i32_mul, set(ksB),
    get(is), op.i32(4), op.i32_mul, set(isB),
    off.map((o, j) => [get(isB), op.i32(j), op.i32_mul, set(o)]),
    get(dst), set(to),
    forLoop(i0, op.i32(0), get(rows), W, [
      get(src), get(i0), get(isB), op.i32_mul, op.i32_add, set(from),
      get(i0), op.i32(W), op.i32_add, get(rows), op.i32_le_s,
      op.if_(
        [
          // Panels narrower than a vector (W = 1, for one-row products) always go one by one.
          W % 4 === 0
            ? [
              get(is), op.i32(1), op.i32_eq,
              op.if_(
                [perK(Array.from({ length: W / 4 }, (_, q) => vectors(q)))],
                [perK(Array.from({ length: W }, (_, j) => store(j, element(j))))],
              ),
            ]
            : perK(Array.from({ length: W }, (_, j) => store(j, element(j)))),
        ],
        [perK(Array.from({ length: W }, (_, j) =>
          store(j, [
            get(i0), op.i32(j), op.i32_add, get(rows), op.i32_lt_s,
            op.if_f32([element(j)], [op.f32(0)]),
          ])
        ))],
      ),
    ]),
  ]);
}

/**
 * pack_a(src, rs, ks, M, K, dst): A(m, k) = src[m*rs + k*ks] into panels of MR rows, each element
 * splatted to four lanes (16 bytes).
 */
export const packA = (mr = MR): Func => pack(mr, true);
/** pack_b(src, cs, ks, N, K, dst): B(k, n) = src[k*ks + n*cs] into panels of NR columns. */
export const packB = (nr = NR): Func => pack(nr, false);

/**
 * Four f32 from the 16-byte bf16 vector on the stack: a bf16 panel row holds its 8 values in the order
 * n0, n4, n1, n5, n2, n6, n3, n7 (`pack_bf16`), so each 32-bit lane is (n_j low, n_(j+4) high) and one
 * shift (n0–n3, `high` false) or one mask (n4–n7) puts four of them in f32's high half: two operations
 * where widening in panel order took four.
 */
const bf16Lanes = (high: boolean): Code =>
  high
    ? [op.v128_const(new Uint8Array(Int32Array.from([-65536, -65536, -65536, -65536]).buffer)), op.v128_and]
    : [op.i32(16), op.i32x4_shl];

/**
 * gemm(pa, pb, M, N, K, c, ldc, accumulate, tmp): C[m, n] = (accumulate ? C[m, n] : 0) + sum_k A B
 * over packed panels (A's splatted, as `pack_a` writes them), C row-major with row stride ldc.
 * `tmp` holds MR*NR floats for edge tiles. With `bf16`, B's panels hold bfloat16 (the high half of
 * each f32, as `pack_bf16` writes them), widened exactly as they are loaded: the same sums, the same
 * bits as over the f32 panels they came from, from half the bytes.
 */
export function gemm(MR_ = MR, NR_ = NR, unroll = UNROLL, bf16 = false): Func {
  const MR = MR_, NR = NR_;
  if (bf16 && NR % 8 !== 0) throw new RangeError(`gemm: bf16 panels need NR a multiple of 8, got ${NR}`);
  const [pa, pb, M, N, K, c, ldc, accumulate, tmp] = [0, 1, 2, 3, 4, 5, 6, 7, 8];
  const L = locals(9);
  const m0 = L.local(I32), n0 = L.local(I32), a = L.local(I32), b = L.local(I32), k = L.local(I32);
  const panelA = L.local(I32), ldcB = L.local(I32), out = L.local(I32), r = L.local(I32), j = L.local(I32);
  const addr = L.local(I32), t = L.local(F32);
  const nb = NR / 4;
  const acc = Array.from({ length: MR * nb }, () => L.local(V128)); // acc[r * nb + j]
  const bv = Array.from({ length: nb }, () => L.local(V128));
  const av = L.local(V128);
  const A = (rr: number, jj: number) => acc[rr * nb + jj];
  // One vector of B: four f32, or four bf16 from a 16-byte load (`bf16Lanes`).
  const widen = (x: number, jj: number): Code =>
    bf16 ? [get(b), op.v128_load(16 * (jj >> 1)), bf16Lanes(jj % 2 === 1), set(x)] : [get(b), op.v128_load(16 * jj), set(x)];

  const step: Code[] = [
    bv.map(widen),
    Array.from({ length: MR }, (_, rr) => [
      get(a), op.v128_load(16 * rr), set(av),
      bv.map((x, jj) => [get(A(rr, jj)), get(av), get(x), op.f32x4_mul, op.f32x4_add, set(A(rr, jj))]),
    ]),
    bump(a, op.i32(16 * MR)),
    bump(b, op.i32((bf16 ? 2 : 4) * NR)),
  ];
  const fullTile: Code[] = [
    get(accumulate),
    op.if_(
      Array.from({ length: MR }, (_, rr) => [
        bv.map((_, jj) => [get(out), get(out), op.v128_load(16 * jj), get(A(rr, jj)), op.f32x4_add, op.v128_store(16 * jj)]),
        bump(out, get(ldcB)),
      ]),
      Array.from({ length: MR }, (_, rr) => [
        bv.map((_, jj) => [get(out), get(A(rr, jj)), op.v128_store(16 * jj)]),
        bump(out, get(ldcB)),
      ]),
    ),
  ];
  const edgeTile: Code[] = [
    Array.from({ length: MR }, (_, rr) => bv.map((_, jj) => [get(tmp), get(A(rr, jj)), op.v128_store(16 * (rr * nb + jj))])),
    forLoop(r, op.i32(0), minI32([get(M), get(m0), op.i32_sub], op.i32(MR)), 1, [
      forLoop(j, op.i32(0), minI32([get(N), get(n0), op.i32_sub], op.i32(NR)), 1, [
        get(out), get(r), get(ldcB), op.i32_mul, op.i32_add, get(j), op.i32(4), op.i32_mul, op.i32_add, set(addr),
        get(tmp), get(r), op.i32(NR), op.i32_mul, get(j), op.i32_add, op.i32(4), op.i32_mul, op.i32_add,
        op.f32_load(), set(t),
        get(addr),
        get(addr), op.f32_load(), get(t), op.f32_add,
        get(t),
        get(accumulate),
        op.select,
        op.f32_store(),
      ]),
    ]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32], [], L.types, [
    get(ldc), op.i32(4), op.i32_mul, set(ldcB),
    get(pa), set(panelA),
    forLoop(m0, op.i32(0), get(M), MR, [
      get(pb), set(b),
      forLoop(n0, op.i32(0), get(N), NR, [
        acc.map((x) => [op.v128_const(new Uint8Array(16)), set(x)]),
        get(panelA), set(a),
        get(K), set(k),
        unroll > 1
          ? op.block([op.loop([
            get(k), op.i32(unroll), op.i32_lt_s, op.br_if(1),
            ...Array(unroll).fill(step).flat(), get(k), op.i32(unroll), op.i32_sub, set(k), op.br(0),
          ])])
          : [],
        op.block([op.loop([get(k), op.i32_eqz, op.br_if(1), ...step, get(k), op.i32(1), op.i32_sub, set(k), op.br(0)])]),
        // out = c + (m0 * ldc + n0) * 4; b now points at the next panel of B.
        get(c), get(m0), get(ldcB), op.i32_mul, op.i32_add, get(n0), op.i32(4), op.i32_mul, op.i32_add, set(out),
        get(m0), op.i32(MR), op.i32_add, get(M), op.i32_le_s,
        get(n0), op.i32(NR), op.i32_add, get(N), op.i32_le_s,
        op.i32_and,
        op.if_(fullTile, edgeTile),
      ]),
      get(panelA), get(K), op.i32(16 * MR), op.i32_mul, op.i32_add, set(panelA),
    ]),
  ]);
}

/**
 * gemv_panels(pa, pb, groups, K, c): the one-row product over `groups` × P whole panels of B at once
 * (P = `panels`), A packed by `pack_a` with MR = 1 (x[k] splatted, 16 bytes per k), C's row at `c`
 * written (not accumulated). Each output is the same f32 sum in the same k order as `gemm` with MR = 1
 * gives it (`s = 0; s = s + a[k] * b[k, n]` per k), so the bits are the same; what changes is that P
 * panels' 2P accumulators advance together: a one-row tile has only two vectors of sums, whose adds
 * then wait on each other every k, while 2P independent chains keep the adder busy, and x[k] is loaded
 * once for all of them. With `bf16` the panels hold bfloat16 (`pack_bf16`), widened as they load.
 */
export function gemvPanels(panels: number, bf16: boolean): Func {
  const [pa, pb, groups, K, c] = [0, 1, 2, 3, 4];
  const L = locals(5);
  const g = L.local(I32), k = L.local(I32), a = L.local(I32), panelB = L.local(I32), out = L.local(I32);
  const b = Array.from({ length: panels }, () => L.local(I32));
  const acc = Array.from({ length: 2 * panels }, () => L.local(V128)); // acc[2 * panel + half]
  const av = L.local(V128), bv = L.local(V128);
  const E = bf16 ? 2 : 4; // bytes per weight
  // One k of every panel at offset `u` k's from the pointers.
  const stepAt = (u: number): Code => [
    get(a), op.v128_load(16 * u), set(av),
    b.map((p, j) => bf16
      ? [
        get(p), op.v128_load(16 * u), set(bv),
        [0, 1].map((h) => [
          get(acc[2 * j + h]), get(av), get(bv), bf16Lanes(h === 1), op.f32x4_mul, op.f32x4_add, set(acc[2 * j + h]),
        ]),
      ]
      : [0, 1].map((h) => [
        get(acc[2 * j + h]), get(av), get(p), op.v128_load(32 * u + 16 * h), op.f32x4_mul, op.f32x4_add,
        set(acc[2 * j + h]),
      ])),
  ];
  const advance = (steps: number): Code => [
    bump(a, op.i32(16 * steps)),
    b.map((p) => bump(p, op.i32(E * NR * steps))),
    get(k), op.i32(steps), op.i32_sub, set(k),
  ];
  return fn([I32, I32, I32, I32, I32], [], L.types, [
    get(K), op.i32(E * NR), op.i32_mul, set(panelB),
    get(c), set(out),
    forLoop(g, op.i32(0), get(groups), 1, [
      b.map((p, j) => [get(pb), get(panelB), op.i32(j), op.i32_mul, op.i32_add, set(p)]),
      acc.map((x) => [op.v128_const(new Uint8Array(16)), set(x)]),
      get(pa), set(a),
      get(K), set(k),
      op.block([op.loop([
        get(k), op.i32(UNROLL), op.i32_lt_s, op.br_if(1),
        Array.from({ length: UNROLL }, (_, u) => stepAt(u)),
        advance(UNROLL),
        op.br(0),
      ])]),
      op.block([op.loop([get(k), op.i32_eqz, op.br_if(1), stepAt(0), advance(1), op.br(0)])]),
      acc.map((x, i) => [get(out), get(x), op.v128_store(16 * i)]),
      bump(out, op.i32(4 * NR * panels)),
      bump(pb, [get(panelB), op.i32(panels), op.i32_mul]),
    ]),
  ]);
}

/**
 * pack_bf16(src, K, panels, dst) -> lost: `panels` panels of 8 rows of a row-major f32 matrix
 * (src, K a multiple of 4) into pack_b's panel layout as bfloat16 (the high half of each value):
 * four k at a time, 8 row vectors become four k-major rows of 8 by byte shuffles. Returns 1 if any
 * low half was not zero (the bf16 copy is not exact), else 0.
 */
export function packBf16(): Func {
  const [src, K, panels, dst] = [0, 1, 2, 3];
  const L = locals(4);
  const p = L.local(I32), k = L.local(I32), rowB = L.local(I32), base = L.local(I32), out = L.local(I32);
  const r = Array.from({ length: 8 }, () => L.local(V128));
  const t = Array.from({ length: 4 }, () => L.local(V128));
  const u0 = L.local(V128), u1 = L.local(V128), v0 = L.local(V128), v1 = L.local(V128), lost = L.local(V128);
  const lanes32 = (ls: number[]) => ls.flatMap((l) => [4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3]);
  const lanes64 = (ls: number[]) => ls.flatMap((l) => Array.from({ length: 8 }, (_, b) => 8 * l + b));
  // high halves of lane i of x and of y, side by side, for i = 0..3
  const pairHigh = [2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31];
  const lowMask = new Uint8Array(16).map((_, b) => (b % 4 < 2 ? 0xff : 0));
  return fn([I32, I32, I32, I32], [I32], L.types, [
    get(K), op.i32(4), op.i32_mul, set(rowB),
    get(dst), set(out),
    op.v128_const(new Uint8Array(16)), set(lost),
    forLoop(p, op.i32(0), get(panels), 1, [
      get(src), get(p), get(rowB), op.i32(8), op.i32_mul, op.i32_mul, op.i32_add, set(base),
      forLoop(k, op.i32(0), get(K), 4, [
        r.map((x, j) => [get(base), get(rowB), op.i32(j), op.i32_mul, op.i32_add, op.v128_load(), set(x)]),
        get(lost), r.map((x, j) => (j === 0 ? [get(x)] : [get(x), op.v128_or])), op.v128_const(lowMask), op.v128_and,
        op.v128_or, set(lost),
        // Rows j and j + 4 side by side: the panel row's order n0, n4, n1, n5, … (`bf16Lanes`).
        t.map((x, j) => [get(r[j]), get(r[j + 4]), op.i8x16_shuffle(pairHigh), set(x)]),
        get(t[0]), get(t[1]), op.i8x16_shuffle(lanes32([0, 4, 1, 5])), set(u0),
        get(t[0]), get(t[1]), op.i8x16_shuffle(lanes32([2, 6, 3, 7])), set(u1),
        get(t[2]), get(t[3]), op.i8x16_shuffle(lanes32([0, 4, 1, 5])), set(v0),
        get(t[2]), get(t[3]), op.i8x16_shuffle(lanes32([2, 6, 3, 7])), set(v1),
        get(out), get(u0), get(v0), op.i8x16_shuffle(lanes64([0, 2])), op.v128_store(0),
        get(out), get(u0), get(v0), op.i8x16_shuffle(lanes64([1, 3])), op.v128_store(16),
        get(out), get(u1), get(v1), op.i8x16_shuffle(lanes64([0, 2])), op.v128_store(32),
        get(out), get(u1), get(v1), op.i8x16_shuffle(lanes64([1, 3])), op.v128_store(48),
        bump(out, op.i32(64)),
        bump(base, op.i32(16)),
      ]),
    ]),
    get(lost), op.v128_any_true,
  ]);
}

/**
 * e^x for each lane of the v128 on the stack (inputs are clamped to [-87, 88]), as a
 * fixed sequence of f32 operations: x = n ln2 + r with n = round(x / ln2) and ln2 split in two
 * (Cody-Waite), e^r by Cephes' degree-7 polynomial in Horner form, 2^n from the exponent bits.
 * Relative error about 2e-7. Uses the given v128 locals as temporaries; leaves e^x on the stack.
 */
function expLanes(x: number, n: number, r: number): Code {
  const c = (v: number) => [op.f32(v), op.f32x4_splat];
  const poly = [1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
  return [
    set(x),
    get(x), c(-87.0), op.f32x4_max, c(88.0), op.f32x4_min, set(x),
    get(x), c(1.44269504088896341), op.f32x4_mul, op.f32x4_nearest, set(n),
    get(x), get(n), c(0.693359375), op.f32x4_mul, op.f32x4_sub,
    get(n), c(-2.12194440e-4), op.f32x4_mul, op.f32x4_sub, set(r),
    // p = ((((p0 r + p1) r + p2) r + p3) r + p4) r + p5;  e^r = 1 + r + r^2 p
    c(poly[0]),
    poly.slice(1).map((p) => [get(r), op.f32x4_mul, c(p), op.f32x4_add]),
    get(r), get(r), op.f32x4_mul, op.f32x4_mul,
    get(r), op.f32x4_add, c(1), op.f32x4_add,
    // times 2^n: (n + 127) << 23 as f32 bits
    get(n), op.i32x4_trunc_sat_f32x4_s, op.i32(127), op.i32x4_splat, op.i32x4_add, op.i32(23), op.i32x4_shl,
    op.f32x4_mul,
  ];
}

/** Horizontal sum of a v128 local in a fixed order: (l0 + l1) + (l2 + l3). */
const hsum = (v: number): Code => [
  get(v), op.f32x4_extract_lane(0), get(v), op.f32x4_extract_lane(1), op.f32_add,
  get(v), op.f32x4_extract_lane(2), get(v), op.f32x4_extract_lane(3), op.f32_add,
  op.f32_add,
];

/**
 * softmax_rows(s, rows, ld, valid0, scale): for row i of s (row stride ld), the first
 * n = min(valid0 + i, ld) entries become softmax(scale * x) and the rest of the row becomes 0 (the
 * causal mask). Sums run four lanes over groups of four, then the lanes, then the tail, in that order.
 */
export function softmaxRows(): Func {
  const [s, rows, ld, valid0, scale] = [0, 1, 2, 3, 4];
  const L = locals(5);
  const i = L.local(I32), j = L.local(I32), n = L.local(I32), row = L.local(I32), n4 = L.local(I32);
  const mx = L.local(F32), sum = L.local(F32), inv = L.local(F32);
  const v = L.local(V128), acc = L.local(V128), vs = L.local(V128), t1 = L.local(V128), t2 = L.local(V128), t3 = L.local(V128);
  const addr = [get(row), get(j), op.i32(4), op.i32_mul, op.i32_add];
  return fn([I32, I32, I32, I32, F32], [], L.types, [
    get(scale), op.f32x4_splat, set(vs),
    get(s), set(row),
    forLoop(i, op.i32(0), get(rows), 1, [
      minI32([get(valid0), get(i), op.i32_add], get(ld)), set(n),
      get(n), op.i32(-4), op.i32_and, set(n4),
      // pass 1: scale, and the maximum
      op.f32(-Infinity), op.f32x4_splat, set(acc),
      forLoop(j, op.i32(0), get(n4), 4, [
        addr, addr, op.v128_load(), get(vs), op.f32x4_mul, op.v128_store(),
        get(acc), addr, op.v128_load(), op.f32x4_max, set(acc),
      ]),
      get(acc), op.f32x4_extract_lane(0), get(acc), op.f32x4_extract_lane(1), op.f32_max,
      get(acc), op.f32x4_extract_lane(2), get(acc), op.f32x4_extract_lane(3), op.f32_max, op.f32_max, set(mx),
      forLoop(j, get(n4), get(n), 1, [
        addr, addr, op.f32_load(), get(scale), op.f32_mul, op.f32_store(),
        get(mx), addr, op.f32_load(), op.f32_max, set(mx),
      ]),
      // pass 2: e^(x - max), and the sum
      op.f32(0), op.f32x4_splat, set(acc),
      forLoop(j, op.i32(0), get(n4), 4, [
        addr, op.v128_load(), get(mx), op.f32x4_splat, op.f32x4_sub, expLanes(v, t1, t2), set(t3),
        addr, get(t3), op.v128_store(),
        get(acc), get(t3), op.f32x4_add, set(acc),
      ]),
      hsum(acc), set(sum),
      forLoop(j, get(n4), get(n), 1, [
        addr, op.f32_load(), get(mx), op.f32_sub, op.f32x4_splat, expLanes(v, t1, t2), op.f32x4_extract_lane(0), set(inv),
        addr, get(inv), op.f32_store(),
        get(sum), get(inv), op.f32_add, set(sum),
      ]),
      // pass 3: normalise, and zero the masked tail
      op.f32(1), get(sum), op.f32_div, set(inv),
      get(inv), op.f32x4_splat, set(acc),
      forLoop(j, op.i32(0), get(n4), 4, [addr, addr, op.v128_load(), get(acc), op.f32x4_mul, op.v128_store()]),
      forLoop(j, get(n4), get(n), 1, [addr, addr, op.f32_load(), get(inv), op.f32_mul, op.f32_store()]),
      forLoop(j, get(n), get(ld), 1, [addr, op.f32(0), op.f32_store()]),
      get(row), get(ld), op.i32(4), op.i32_mul, op.i32_add, set(row),
    ]),
  ]);
}

/**
 * softmax_back_rows(p, d, rows, ld, valid0, scale): the softmax backward in place. For row i with
 * n = min(valid0 + i, ld) valid entries, dot = sum_j p[j] d[j], then d[j] = p[j] (d[j] - dot) scale
 * for j < n and d[j] = 0 past n. `p` holds the probabilities, `d` the gradient of them.
 */
export function softmaxBackRows(): Func {
  const [pp, dd, rows, ld, valid0, scale] = [0, 1, 2, 3, 4, 5];
  const L = locals(6);
  const i = L.local(I32), j = L.local(I32), n = L.local(I32), rp = L.local(I32), rd = L.local(I32), n4 = L.local(I32);
  const dot = L.local(F32);
  const acc = L.local(V128), vd = L.local(V128), vs = L.local(V128);
  const at = (base: number) => [get(base), get(j), op.i32(4), op.i32_mul, op.i32_add];
  return fn([I32, I32, I32, I32, I32, F32], [], L.types, [
    get(scale), op.f32x4_splat, set(vs),
    get(pp), set(rp),
    get(dd), set(rd),
    forLoop(i, op.i32(0), get(rows), 1, [
      minI32([get(valid0), get(i), op.i32_add], get(ld)), set(n),
      get(n), op.i32(-4), op.i32_and, set(n4),
      op.f32(0), op.f32x4_splat, set(acc),
      forLoop(j, op.i32(0), get(n4), 4, [
        get(acc), at(rp), op.v128_load(), at(rd), op.v128_load(), op.f32x4_mul, op.f32x4_add, set(acc),
      ]),
      hsum(acc), set(dot),
      forLoop(j, get(n4), get(n), 1, [get(dot), at(rp), op.f32_load(), at(rd), op.f32_load(), op.f32_mul, op.f32_add, set(dot)]),
      get(dot), op.f32x4_splat, set(vd),
      forLoop(j, op.i32(0), get(n4), 4, [
        at(rd), at(rp), op.v128_load(), at(rd), op.v128_load(), get(vd), op.f32x4_sub, op.f32x4_mul, get(vs), op.f32x4_mul,
        op.v128_store(),
      ]),
      forLoop(j, get(n4), get(n), 1, [
        at(rd), at(rp), op.f32_load(), at(rd), op.f32_load(), get(dot), op.f32_sub, op.f32_mul, get(scale), op.f32_mul,
        op.f32_store(),
      ]),
      forLoop(j, get(n), get(ld), 1, [at(rd), op.f32(0), op.f32_store()]),
      get(rp), get(ld), op.i32(4), op.i32_mul, op.i32_add, set(rp),
      get(rd), get(ld), op.i32(4), op.i32_mul, op.i32_add, set(rd),
    ]),
  ]);
}

/**
 * swiglu(h, g, u, n): h[i] = silu(g[i]) * u[i] with silu(x) = x / (1 + e^-x), four lanes at a time
 * over n rounded up to a multiple of 4 (the caller's buffers are padded to that).
 */
export function swiglu(): Func {
  const [h, g, u, n] = [0, 1, 2, 3];
  const L = locals(4);
  const i = L.local(I32), x = L.local(V128), t1 = L.local(V128), t2 = L.local(V128), t3 = L.local(V128);
  const at = (base: number) => [get(base), get(i), op.i32_add];
  const one = [op.f32(1), op.f32x4_splat];
  return fn([I32, I32, I32, I32], [], L.types, [
    get(n), op.i32(4), op.i32_mul, set(n),
    forLoop(i, op.i32(0), get(n), 16, [
      at(g), op.v128_load(), set(x),
      at(h),
      get(x),
      one, op.v128_const(new Uint8Array(16)), get(x), op.f32x4_sub, expLanes(t1, t2, t3), op.f32x4_add,
      op.f32x4_div,
      at(u), op.v128_load(), op.f32x4_mul,
      op.v128_store(),
    ]),
  ]);
}

/**
 * swiglu_back(dg, du, dh, g, u, n): with s = 1 / (1 + e^-g): du = dh * g * s and
 * dg = dh * u * s * (1 + g * (1 - s)), four lanes at a time as `swiglu`.
 */
export function swigluBack(): Func {
  const [dg, du, dh, g, u, n] = [0, 1, 2, 3, 4, 5];
  const L = locals(6);
  const i = L.local(I32), x = L.local(V128), s = L.local(V128), d = L.local(V128);
  const t1 = L.local(V128), t2 = L.local(V128), t3 = L.local(V128);
  const at = (base: number) => [get(base), get(i), op.i32_add];
  const one = [op.f32(1), op.f32x4_splat];
  return fn([I32, I32, I32, I32, I32, I32], [], L.types, [
    get(n), op.i32(4), op.i32_mul, set(n),
    forLoop(i, op.i32(0), get(n), 16, [
      at(g), op.v128_load(), set(x),
      at(dh), op.v128_load(), set(d),
      one, one, op.v128_const(new Uint8Array(16)), get(x), op.f32x4_sub, expLanes(t1, t2, t3), op.f32x4_add, op.f32x4_div, set(s),
      at(du), get(d), get(x), get(s), op.f32x4_mul, op.f32x4_mul, op.v128_store(),
      at(dg),
      get(d), at(u), op.v128_load(), op.f32x4_mul, get(s), op.f32x4_mul,
      one, get(x), one, get(s), op.f32x4_sub, op.f32x4_mul, op.f32x4_add,
      op.f32x4_mul,
      op.v128_store(),
    ]),
  ]);
}

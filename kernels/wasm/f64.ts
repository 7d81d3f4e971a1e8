// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * Double-precision WebAssembly SIMD kernels for dense linear algebra that must give the bits of a plain
 * scalar loop: GPTQ's factorisations and error feedback (quantize/gptq.ts). Each output is one f64
 * accumulator that starts from the value in memory and takes its terms in a fixed order, one rounded
 * multiply and one rounded add or subtract each (WebAssembly has no fused multiply-add in its
 * deterministic SIMD), exactly what
 * `s = c; for (k = 0; k < K; k++) s -= a[k] * b[k]` computes in JavaScript. The lanes of a vector are
 * different outputs, never parts of one sum, so vectorising changes no bit: a caller may tile, block and
 * split the work between threads any way it likes and still reproduce the scalar loop.
 *
 * - `pack_a64(src, is, ks, rows, K, dst)`: A(i, k) = src[i·is + k·ks] into panels of `MR64` rows,
 *   k-major, each value splatted to a whole vector (16 bytes); a last, partial panel padded with zeros.
 * - `pack_b64(src, cs, ks, N, K, dst)`: B(k, n) = src[k·ks + n·cs] into panels of `NR64` columns, k-major.
 * - `update64_sub(pa, lda, pb, ldb, M, N, K, c, ldc, tmp)`: C[m, n] −= Σ_k A(m, k) B(k, n),
 *   term by term in k order, over packed panels that start `lda` and `ldb` bytes apart (so a caller may
 *   start at any k of a wider packing). C is row-major f64 with row stride ldc; `tmp` holds an edge tile.
 * - `fsub64(x, ldx, m, b, d, ldd)`: for j = 0 … b − 1, row j of X (m values, rows ldx apart) becomes
 *   (X[j] − Σ_{k<j} D[j, k] X[k]) / D[j, j], D a b × b lower triangle (row stride ldd): forward
 *   substitution, vectorised across X's columns.
 * - `add_f32_to_f64(s, p, n)`: s[i] += p[i] for n values, p f32 widened exactly (a covariance sum).
 *
 * Arguments are i32: pointers are byte addresses, sizes and strides counts of f64 (or, for `p`, f32).
 * @module
 */
import { type Code, F64, fn, type Func, I32, op, V128 } from "./asm.ts";
import { bump, forLoop, locals } from "./gen.ts";

const { get, set } = op;

/** Register tile of the update: MR64 rows by NR64 columns (two f64 a vector). */
export const MR64 = 4, NR64 = 4;

/** One packing routine for both operands (see the module doc); `splat` for A's 16-byte elements. */
function pack64(W: number, splat: boolean): Func {
  const [src, is, ks, rows, K, dst] = [0, 1, 2, 3, 4, 5];
  const L = locals(6);
  const i0 = L.local(I32), k = L.local(I32), from = L.local(I32), to = L.local(I32), ksB = L.local(I32), isB = L.local(I32);
  const off = Array.from({ length: W }, () => L.local(I32)); // off[j] = j * is * 8
  const E = splat ? 16 : 8;
  const element = (j: number): Code => [get(from), get(off[j]), op.i32_add, op.f64_load()];
  const store = (j: number, value: Code): Code =>
    splat ? [get(to), value, op.f64x2_splat, op.v128_store(E * j)] : [get(to), value, op.f64_store(E * j)];
  const perK = (body: Code[]): Code =>
    forLoop(k, op.i32(0), get(K), 1, [...body, bump(from, get(ksB)), bump(to, op.i32(E * W))]);
  return fn([I32, I32, I32, I32, I32, I32], [], L.types, [
    get(ks), op.i32(8), op.i32_mul, set(ksB),
    get(is), op.i32(8), op.i32_mul, set(isB),
    off.map((o, j) => [get(isB), op.i32(j), op.i32_mul, set(o)]),
    get(dst), set(to),
    forLoop(i0, op.i32(0), get(rows), W, [
      get(src), get(i0), get(isB), op.i32_mul, op.i32_add, set(from),
      get(i0), op.i32(W), op.i32_add, get(rows), op.i32_le_s,
      op.if_(
        [perK(Array.from({ length: W }, (_, j) => store(j, element(j))))],
        [perK(Array.from({ length: W }, (_, j) =>
          [
            get(i0), op.i32(j), op.i32_add, get(rows), op.i32_lt_s,
            op.if_(
              [store(j, element(j))],
              [store(j, op.f64(0))],
            ),
          ]
        ))],
      ),
    ]),
  ]);
}

/** pack_a64: A into panels of MR64 rows, splatted (see the module doc). */
export const packA64 = (): Func => pack64(MR64, true);
/** pack_b64: B into panels of NR64 columns. */
export const packB64 = (): Func => pack64(NR64, false);

/**
 * update64_sub(pa, lda, pb, ldb, M, N, K, c, ldc, tmp): C −= A B over packed panels, each output's terms
 * subtracted in k order, starting from C's value (see the module doc).
 */
export function update64Sub(MR = MR64, NR = NR64, unroll = 2): Func {
  const [pa, lda, pb, ldb, M, N, K, c, ldc, tmp] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
  const L = locals(10);
  const m0 = L.local(I32), n0 = L.local(I32), a = L.local(I32), b = L.local(I32), k = L.local(I32);
  const panelA = L.local(I32), panelB = L.local(I32), ldcB = L.local(I32), out = L.local(I32);
  const o = L.local(I32), ld = L.local(I32), row = L.local(I32), r = L.local(I32), j = L.local(I32);
  const full = L.local(I32), addr = L.local(I32);
  const nb = NR / 2;
  const acc = Array.from({ length: MR * nb }, () => L.local(V128));
  const bv = Array.from({ length: nb }, () => L.local(V128));
  const av = L.local(V128);
  const A = (rr: number, jj: number) => acc[rr * nb + jj];
  const combine = op.f64x2_sub;
  const step: Code[] = [
    bv.map((x, jj) => [get(b), op.v128_load(16 * jj), set(x)]),
    Array.from({ length: MR }, (_, rr) => [
      get(a), op.v128_load(16 * rr), set(av),
      bv.map((x, jj) => [get(A(rr, jj)), get(av), get(x), op.f64x2_mul, combine, set(A(rr, jj))]),
    ]),
    bump(a, op.i32(16 * MR)),
    bump(b, op.i32(8 * NR)),
  ];
  // The edge tile's element (r, j) of C, and whether it lies inside C.
  const cAddr: Code = [get(out), get(r), get(ldcB), op.i32_mul, op.i32_add, get(j), op.i32(8), op.i32_mul, op.i32_add];
  const tAddr: Code = [get(tmp), get(r), op.i32(NR), op.i32_mul, get(j), op.i32_add, op.i32(8), op.i32_mul, op.i32_add];
  const inside: Code = [
    get(m0), get(r), op.i32_add, get(M), op.i32_lt_s,
    get(n0), get(j), op.i32_add, get(N), op.i32_lt_s,
    op.i32_and,
  ];
  const edgeLoop = (body: Code[]): Code =>
    forLoop(r, op.i32(0), op.i32(MR), 1, [forLoop(j, op.i32(0), op.i32(NR), 1, body)]);
  const rows = (body: (rr: number) => Code): Code => [
    get(o), set(row),
    Array.from({ length: MR }, (_, rr) => [body(rr), bump(row, get(ld))]),
  ];
  return fn([I32, I32, I32, I32, I32, I32, I32, I32, I32, I32], [], L.types, [
    get(ldc), op.i32(8), op.i32_mul, set(ldcB),
    get(pa), set(panelA),
    forLoop(m0, op.i32(0), get(M), MR, [
      get(pb), set(panelB),
      forLoop(n0, op.i32(0), get(N), NR, [
        get(c), get(m0), get(ldcB), op.i32_mul, op.i32_add, get(n0), op.i32(8), op.i32_mul, op.i32_add, set(out),
        get(m0), op.i32(MR), op.i32_add, get(M), op.i32_le_s,
        get(n0), op.i32(NR), op.i32_add, get(N), op.i32_le_s,
        op.i32_and, set(full),
        get(full),
        op.if_(
          [get(out), set(o), get(ldcB), set(ld)],
          [
            // An edge tile runs on a copy of C's part of it, zeros elsewhere.
            edgeLoop([
              tAddr,
              inside, op.if_f64([cAddr, op.f64_load()], [op.f64(0)]),
              op.f64_store(),
            ]),
            get(tmp), set(o), op.i32(8 * NR), set(ld),
          ],
        ),
        rows((rr) => bv.map((_, jj) => [get(row), op.v128_load(16 * jj), set(A(rr, jj))])),
        get(panelA), set(a),
        get(panelB), set(b),
        get(K), set(k),
        unroll > 1
          ? op.block([op.loop([
            get(k), op.i32(unroll), op.i32_lt_s, op.br_if(1),
            ...Array(unroll).fill(step).flat(), get(k), op.i32(unroll), op.i32_sub, set(k), op.br(0),
          ])])
          : [],
        op.block([op.loop([get(k), op.i32_eqz, op.br_if(1), ...step, get(k), op.i32(1), op.i32_sub, set(k), op.br(0)])]),
        rows((rr) => bv.map((_, jj) => [get(row), get(A(rr, jj)), op.v128_store(16 * jj)])),
        get(full), op.i32_eqz,
        op.if_([
          edgeLoop([
            inside,
            op.if_([cAddr, set(addr), get(addr), tAddr, op.f64_load(), op.f64_store()]),
          ]),
        ]),
        bump(panelB, get(ldb)),
      ]),
      bump(panelA, get(lda)),
    ]),
  ]);
}

/**
 * fsub64(x, ldx, m, b, d, ldd): forward substitution of b rows of X against the lower triangle D, in
 * place (see the module doc). Columns go eight at a time (four vectors), then two, then one.
 */
export function fsub64(): Func {
  const [x, ldx, m, b, d, ldd] = [0, 1, 2, 3, 4, 5];
  const L = locals(6);
  const i = L.local(I32), jj = L.local(I32), k = L.local(I32), ldxB = L.local(I32), lddB = L.local(I32);
  const xj = L.local(I32), dj = L.local(I32), xk = L.local(I32), end8 = L.local(I32), end2 = L.local(I32);
  const dv = L.local(V128), ds = L.local(F64);
  const acc = Array.from({ length: 4 }, () => L.local(V128));
  const s = L.local(F64);
  // Columns [i, i + 2w) of rows 0 … b − 1, w vectors of two at a time.
  const chunk = (w: number): Code =>
    forLoop(jj, op.i32(0), get(b), 1, [
      get(x), get(jj), get(ldxB), op.i32_mul, op.i32_add, get(i), op.i32(8), op.i32_mul, op.i32_add, set(xj),
      get(d), get(jj), get(lddB), op.i32_mul, op.i32_add, set(dj),
      acc.slice(0, w).map((v, q) => [get(xj), op.v128_load(16 * q), set(v)]),
      get(x), get(i), op.i32(8), op.i32_mul, op.i32_add, set(xk),
      forLoop(k, op.i32(0), get(jj), 1, [
        get(dj), get(k), op.i32(8), op.i32_mul, op.i32_add, op.v128_load64_splat(), set(dv),
        acc.slice(0, w).map((v, q) => [get(v), get(dv), get(xk), op.v128_load(16 * q), op.f64x2_mul, op.f64x2_sub, set(v)]),
        bump(xk, get(ldxB)),
      ]),
      get(dj), get(jj), op.i32(8), op.i32_mul, op.i32_add, op.v128_load64_splat(), set(dv),
      acc.slice(0, w).map((v, q) => [get(xj), get(v), get(dv), op.f64x2_div, op.v128_store(16 * q)]),
    ]);
  const scalar: Code =
    forLoop(jj, op.i32(0), get(b), 1, [
      get(x), get(jj), get(ldxB), op.i32_mul, op.i32_add, get(i), op.i32(8), op.i32_mul, op.i32_add, set(xj),
      get(d), get(jj), get(lddB), op.i32_mul, op.i32_add, set(dj),
      get(xj), op.f64_load(), set(s),
      get(x), get(i), op.i32(8), op.i32_mul, op.i32_add, set(xk),
      forLoop(k, op.i32(0), get(jj), 1, [
        get(dj), get(k), op.i32(8), op.i32_mul, op.i32_add, op.f64_load(), set(ds),
        get(s), get(ds), get(xk), op.f64_load(), op.f64_mul, op.f64_sub, set(s),
        bump(xk, get(ldxB)),
      ]),
      get(xj),
      get(s), get(dj), get(jj), op.i32(8), op.i32_mul, op.i32_add, op.f64_load(), op.f64_div,
      op.f64_store(),
    ]);
  return fn([I32, I32, I32, I32, I32, I32], [], L.types, [
    get(ldx), op.i32(8), op.i32_mul, set(ldxB),
    get(ldd), op.i32(8), op.i32_mul, set(lddB),
    get(m), op.i32(-8), op.i32_and, set(end8),
    get(m), op.i32(-2), op.i32_and, set(end2),
    forLoop(i, op.i32(0), get(end8), 8, [chunk(4)]),
    forLoop(i, get(end8), get(end2), 2, [chunk(1)]),
    forLoop(i, get(end2), get(m), 1, [scalar]),
  ]);
}

/** add_f32_to_f64(s, p, n): s[i] += p[i], p's f32 values widened exactly, two at a time. */
export function addF32ToF64(): Func {
  const [s, p, n] = [0, 1, 2];
  const L = locals(3);
  const i = L.local(I32), end = L.local(I32), at = L.local(I32), from = L.local(I32);
  return fn([I32, I32, I32], [], L.types, [
    get(n), op.i32(-2), op.i32_and, set(end),
    get(s), set(at), get(p), set(from),
    forLoop(i, op.i32(0), get(end), 2, [
      get(at), get(at), op.v128_load(), get(from), op.v128_load64_zero(), op.f64x2_promote_low_f32x4, op.f64x2_add,
      op.v128_store(),
      bump(at, op.i32(16)), bump(from, op.i32(8)),
    ]),
    forLoop(i, get(end), get(n), 1, [
      get(at), get(at), op.f64_load(), get(from), op.f32_load(), op.f64_promote_f32, op.f64_add, op.f64_store(),
      bump(at, op.i32(8)), bump(from, op.i32(4)),
    ]),
  ]);
}

/** The functions of the f64 module, by export name. */
export function f64Functions(): Record<string, Func> {
  return {
    pack_a64: packA64(),
    pack_b64: packB64(),
    update64_sub: update64Sub(),
    fsub64: fsub64(),
    add_f32_to_f64: addF32ToF64(),
  };
}

/** The exports of an instance of the f64 module (byte addresses, f64 counts). */
export interface F64Exports {
  pack_a64(src: number, is: number, ks: number, rows: number, K: number, dst: number): void;
  pack_b64(src: number, cs: number, ks: number, N: number, K: number, dst: number): void;
  update64_sub(pa: number, lda: number, pb: number, ldb: number, M: number, N: number, K: number, c: number, ldc: number, tmp: number): void;
  fsub64(x: number, ldx: number, m: number, b: number, d: number, ldd: number): void;
  add_f32_to_f64(s: number, p: number, n: number): void;
}

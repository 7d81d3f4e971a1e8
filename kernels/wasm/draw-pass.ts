// deno-fmt-ignore-file -- instruction listings are laid out by hand, one logical step per line
/**
 * The float sampler's first pass (model/draw.ts) as WebAssembly: over one row of f32 logits, each id
 * not masked is scaled to y = (logit − max) · scale (−1024 / temperature: y = −1024 · log p), left out
 * past `out`, counted as too near the floor to say past `sure`, and added to its bucket ⌊y⌋: the mass
 * e^δ / e^0 by a cubic in δ = (⌊y⌋ − y) / 1024, and with `counting` one more in its count. The same
 * operations, in the same order, as model/draw.ts `bucketCandidates` in TypeScript, at a few times its
 * speed: V8 and JavaScriptCore spend 6–10 ns an id on that loop, and a row is 151,936 ids a token.
 *
 * `bucket_pass(logits, never, n, max, scale, out, sure, counting, mass, count, result) → m`: logits n
 * f32 and never n bytes (1: masked) at their byte addresses, max..sure f64, mass f64 and count i32 per
 * bucket (zeroed by the caller); returns the candidates; result[0] (i32) gets the near ones.
 * @module
 */
import { assemble, type Code, F64, fn, type Func, I32, op, type ValType } from "./asm.ts";

const { get, set } = op;
const [logits, never, n, max, scale, out, sure, counting, mass, count, result] = Array.from({ length: 11 }, (_, i) => i);

/** `bucket_pass`, as `createDrawPass` assembles it. */
export function bucketPassFn(): Func {
  const locals: ValType[] = [I32, I32, I32, I32, I32, F64, F64, F64];
  const [i, m, near, b, at, y, d, q] = locals.map((_, k) => 11 + k);
  const inc = (local: number): Code => [get(local), op.i32(1), op.i32_add, set(local)];
  return fn([I32, I32, I32, F64, F64, F64, F64, I32, I32, I32, I32], [I32], locals, [
    op.i32(0), set(i), op.i32(0), set(m), op.i32(0), set(near),
    op.block([op.loop([
      get(i), get(n), op.i32_ge_s, op.br_if(1),
      op.block([
        get(never), get(i), op.i32_add, op.i32_load8_u(), op.br_if(0),
        get(logits), get(i), op.i32(2), op.i32_shl, op.i32_add, op.f32_load(), op.f64_promote_f32,
        get(max), op.f64_sub, get(scale), op.f64_mul, set(y),
        get(y), get(out), op.f64_gt, op.br_if(0),
        get(y), get(sure), op.f64_gt, op.if_([inc(near)]),
        get(y), op.i32_trunc_f64_s, set(b),
        get(b), op.f64_convert_i32_s, get(y), op.f64_sub, op.f64(1 / 1024), op.f64_mul, set(d),
        // 1 + d · (1 + d · (1/2 + d · (1/6))), as the TypeScript writes it.
        op.f64(1), get(d), op.f64(1), get(d), op.f64(1 / 2), get(d), op.f64(1 / 6), op.f64_mul, op.f64_add,
        op.f64_mul, op.f64_add, op.f64_mul, op.f64_add, set(q),
        get(mass), get(b), op.i32(3), op.i32_shl, op.i32_add, set(at),
        get(at), get(at), op.f64_load(), get(q), op.f64_add, op.f64_store(),
        get(counting), op.if_([
          get(count), get(b), op.i32(2), op.i32_shl, op.i32_add, set(at),
          get(at), get(at), op.i32_load(), op.i32(1), op.i32_add, op.i32_store(),
        ]),
        inc(m),
      ]),
      inc(i),
      op.br(0),
    ])]),
    get(result), get(near), op.i32_store(),
    get(m),
  ]);
}

/** One instance with room for a row of `n` logits and `buckets` buckets, and views of its arrays. */
export interface DrawPass {
  n: number;
  run: (...args: number[]) => number;
  logits: Float32Array;
  never: Uint8Array;
  mass: Float64Array;
  count: Int32Array;
  result: Int32Array;
  /** Byte addresses of the arrays above, for `run`. */
  at: { logits: number; never: number; mass: number; count: number; result: number };
}

/**
 * Assembles and instantiates `bucket_pass` with room for `n` logits and `buckets` buckets; null where
 * WebAssembly is missing.
 *
 * @example
 * ```ts
 * import { createDrawPass } from "./draw-pass.ts";
 * const pass = createDrawPass(151936, 38647);
 * pass?.mass.length; // 38647
 * ```
 */
export function createDrawPass(n: number, buckets: number): DrawPass | null {
  if (typeof WebAssembly !== "object") return null;
  const round = (bytes: number) => Math.ceil(bytes / 16) * 16;
  const at = { mass: 0, count: 0, logits: 0, never: 0, result: 0 };
  at.count = round(8 * buckets);
  at.logits = at.count + round(4 * buckets);
  at.never = at.logits + round(4 * n);
  at.result = at.never + round(n);
  const bytes = assemble({ pages: Math.ceil((at.result + 16) / 65536), functions: { bucket_pass: bucketPassFn() } });
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(bytes));
  const memory = (exports.memory as WebAssembly.Memory).buffer as ArrayBuffer;
  return {
    n,
    run: exports.bucket_pass as DrawPass["run"],
    logits: new Float32Array(memory, at.logits, n),
    never: new Uint8Array(memory, at.never, n),
    mass: new Float64Array(memory, at.mass, buckets),
    count: new Int32Array(memory, at.count, buckets),
    result: new Int32Array(memory, at.result, 4),
    at,
  };
}

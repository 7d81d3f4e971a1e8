/**
 * A small seeded random source (xoshiro128**), so models, data order and sampling repeat exactly.
 *
 * Hand-written because no npm package gives a seedable generator that runs unchanged on Deno and Bun
 * and whose state we can save in a checkpoint.
 *
 * @example
 * ```ts
 * import { createRng } from "./random.ts";
 * const rng = createRng(42);
 * rng.next(); // uniform in [0, 1)
 * ```
 * @module
 */

/** A seeded generator; `state` can be saved and handed back to `createRng` to resume. */
export interface Rng {
  /** Uniform in [0, 1), 32 bits of randomness. */
  next(): number;
  /** Standard normal (Box-Muller). */
  normal(): number;
  /** Uniform integer in [0, n). */
  int(n: number): number;
  /** The four 32-bit words of state. */
  state(): number[];
}

/** Makes a generator from a numeric seed, or from a saved state. */
export function createRng(seed: number | number[]): Rng {
  const s = new Uint32Array(4);
  if (Array.isArray(seed)) s.set(seed);
  else {
    // splitmix32 spreads a small seed over the whole state.
    let z = seed >>> 0;
    for (let i = 0; i < 4; i++) {
      z = (z + 0x9e3779b9) >>> 0;
      let t = z;
      t = Math.imul(t ^ (t >>> 16), 0x85ebca6b);
      t = Math.imul(t ^ (t >>> 13), 0xc2b2ae35);
      s[i] = (t ^ (t >>> 16)) >>> 0;
    }
  }
  const nextU32 = (): number => {
    const result = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  };
  const next = () => nextU32() / 4294967296;
  return {
    next,
    normal() {
      const u = 1 - next(), v = next();
      return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    },
    int: (n) => Math.floor(next() * n),
    state: () => Array.from(s),
  };
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/**
 * Exact comparisons for tests: by bit pattern (so -0 and +0 differ, and NaN payloads count), with
 * lengths checked first (a shorter read-back must fail). bun's `toEqual` on typed arrays treats -0 as
 * +0, and `.every` / `forEach` over the read-back pass when it is shorter.
 *
 * @example
 * ```ts
 * expectSameBits(back.data, source.data, "embed");
 * expectSameTensors(read.tensors, written);
 * ```
 * @module
 */
import { expect } from "bun:test";

type Floats = Float32Array | Float64Array | Uint8Array | Uint16Array | Uint32Array;

/** The array's own bytes (not its whole buffer). */
export function bytesOf(a: Floats): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** The index of the first element whose bytes differ, or -1; lengths must agree. */
export function firstBitDifference(got: Floats, want: Floats): number {
  if (got.length !== want.length || got.BYTES_PER_ELEMENT !== want.BYTES_PER_ELEMENT) return 0;
  const a = bytesOf(got), b = bytesOf(want), size = got.BYTES_PER_ELEMENT;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return Math.floor(i / size);
  return -1;
}

/** Fails unless `got` and `want` have the same length and the same bits, naming the first difference. */
export function expectSameBits(got: Floats, want: Floats, label = "values"): void {
  expect(`${label}: length ${got.length}`).toBe(`${label}: length ${want.length}`);
  const i = firstBitDifference(got, want);
  const show = (a: Floats) => (i >= 0 && i < a.length ? `${Object.is(a[i], -0) ? "-0" : a[i]}` : "none");
  expect(`${label}: first difference at ${i} (${show(got)} vs ${show(want)})`)
    .toBe(`${label}: first difference at -1 (none vs none)`);
}

/** Named tensors, as every reader returns them. */
export interface NamedData {
  name: string;
  dims: readonly number[];
  data: Float32Array | Float64Array;
}

/** Fails unless both lists hold the same tensors in the same order: names, dims and every bit. */
export function expectSameTensors(got: readonly NamedData[], want: readonly NamedData[], label = ""): void {
  expect(got.map((t) => `${t.name} [${t.dims.join(",")}]`)).toEqual(
    want.map((t) => `${t.name} [${t.dims.join(",")}]`),
  );
  for (let i = 0; i < want.length; i++) expectSameBits(got[i].data, want[i].data, `${label}${want[i].name}`);
}

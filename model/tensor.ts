/**
 * The one tensor type of ferry: a name, its dims (row-major, outermost first) and f32 data.
 *
 * Every format writer takes `Tensor[]` and every reader gives `Tensor[]` back; the model and the
 * engines are built from them.
 *
 * @example
 * ```ts
 * import { numel, tensor } from "./tensor.ts";
 * const t = tensor("model.norm.weight", [4], new Float32Array([1, 1, 1, 1]));
 * numel(t.dims); // 4
 * ```
 * @module
 */

/** A named f32 tensor. `data.length` always equals the product of `dims`. */
export interface Tensor {
  name: string;
  dims: number[];
  data: Float32Array;
}

/** Number of elements of a tensor with these dims (1 for a scalar, `[]`). */
export function numel(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** Makes a tensor, checking that the data length matches the dims. */
export function tensor(name: string, dims: number[], data?: Float32Array): Tensor {
  const n = numel(dims);
  const d = data ?? new Float32Array(n);
  if (d.length !== n) {
    throw new RangeError(`tensor ${name}: dims [${dims}] hold ${n} values but data has ${d.length}`);
  }
  return { name, dims: [...dims], data: d };
}

/** Finds a tensor by name in a list, or throws naming what is missing. */
export function byName(tensors: readonly Tensor[], name: string): Tensor {
  const t = tensors.find((x) => x.name === name);
  if (!t) throw new Error(`no tensor named ${name}`);
  return t;
}

/** Total number of scalars over a list of tensors. */
export function countParams(tensors: readonly Tensor[]): number {
  let n = 0;
  for (const t of tensors) n += t.data.length;
  return n;
}

/** A deep copy, so a caller can mutate it freely. */
export function cloneTensors(tensors: readonly Tensor[]): Tensor[] {
  return tensors.map((t) => ({ name: t.name, dims: [...t.dims], data: t.data.slice() }));
}

/**
 * A tensor whose values are fetched a chunk at a time, so a writer never holds more than a chunk.
 * `read` returns elements `[start, start + count)`: a view of `scratch` (which holds at least `count`
 * values) or of the tensor's own memory.
 */
export interface TensorSource {
  name: string;
  dims: number[];
  read(start: number, count: number, scratch: Float32Array): Float32Array | Promise<Float32Array>;
  /**
   * The matrix as its file stores it, where that is quantized blocks (a GGUF's Q4_0, Q8_0, ...): a
   * reader that can keep the blocks (the float engine) reads them here instead of `read`'s f32.
   */
  blocks?: StoredBlocks;
}

/** A 2-D tensor's stored blocks: whole rows of whole blocks, each row a run of its blocks' bytes. */
export interface StoredBlocks {
  /** ggml's name of the block type (`Q4_0`, `Q8_0`, `Q4_K`, ...). */
  type: string;
  /**
   * The bytes of rows [row, row + rows): written into `scratch` (which holds them) or a view of the
   * reader's own memory. Refused (as `read` refuses it) where a value they hold is not finite.
   */
  read(row: number, rows: number, scratch: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

/** A tensor in memory as a `TensorSource`. */
export function tensorSource(t: Tensor): TensorSource {
  return { name: t.name, dims: t.dims, read: (start, count) => t.data.subarray(start, start + count) };
}

/** Reads a whole `TensorSource` into memory. */
export async function materialize(src: TensorSource): Promise<Tensor> {
  const data = new Float32Array(numel(src.dims));
  const view = await src.read(0, data.length, data);
  if (view !== data) data.set(view);
  return { name: src.name, dims: [...src.dims], data };
}

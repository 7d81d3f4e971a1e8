/**
 * A worker of the lut4 quantizer's pool (`quantizePool` in quantize/lut4-quantize.ts): it runs the two
 * passes over blocks of rows sent to it, `surveyBlock` and `encodeBlock`, and posts each answer back
 * with the request's id. The answers are the very functions' answers, so the file's bytes do not
 * depend on how many workers there are, or whether there are any.
 *
 * @example
 * ```ts
 * import type { BlockJob } from "./lut4-quantize.ts";
 * declare const block: Float64Array<ArrayBuffer>, job: Omit<BlockJob, "first" | "expBase">;
 * const w = new Worker(new URL("./lut4-worker.ts", import.meta.url).href, { type: "module" });
 * w.postMessage({ id: 1, op: "survey", block, job }, [block.buffer]);
 * ```
 * @module
 */
import { type BlockJob, encodeBlock, surveyBlock } from "./lut4-quantize.ts";

/** A request: a pass over one block. */
export interface PoolRequest {
  id: number;
  op: "survey" | "encode";
  block: Float64Array;
  job: BlockJob;
}

const scope = globalThis as unknown as {
  onmessage: ((e: MessageEvent<PoolRequest>) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
};

/** The buffers of fresh typed arrays, handed over with the answer rather than copied. */
const buffers = (...arrays: ArrayBufferView[]) => arrays.map((a) => a.buffer as ArrayBuffer);

scope.onmessage = (e) => {
  const { id, op, block, job } = e.data;
  try {
    if (op === "survey") {
      const r = surveyBlock(block, job);
      scope.postMessage({ id, result: r }, buffers(r.es, r.ecs, r.ms, r.sses, r.zero));
    } else {
      const r = encodeBlock(block, job);
      scope.postMessage({ id, result: r }, buffers(r.nibbles, r.scales));
    }
  } catch (err) {
    scope.postMessage({ id, error: (err as Error).message });
  }
};

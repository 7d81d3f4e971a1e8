/**
 * The float engine on a lut4 file's bytes: the browser tab's second engine (serve/page/worker.js). The
 * bytes go through the lut4 format's own full checks (`checkLut4`), and the tensors are the ones the
 * format's `read` hands the server's `--engine float` for the same file (`dequantizeLut4`), on the same
 * kernels (WebAssembly SIMD where the runtime has it), frozen as the engine table freezes them. So the
 * tab's float engine is the server's float engine on that file, bit for bit.
 *
 * @example
 * ```ts
 * import { floatEngineFromLut4Bytes } from "./float-from-bytes.ts";
 * const bytes = new Uint8Array(await (await fetch("ferry.lut4")).arrayBuffer());
 * const { engine } = await floatEngineFromLut4Bytes(bytes, "ferry.lut4");
 * engine.kind; // "float"
 * ```
 * @module
 */
import type { Engine } from "../model/engine.ts";
import { dequantizeLut4 } from "../formats/lut4/lut4.ts";
import { createFloatEngine } from "./float.ts";
import { type FromBytesOptions, readBytes } from "./int/from-bytes.ts";

/**
 * Reads `bytes` as the lut4 file `name` (as `intEngineFromBytes` does: `readBytes`, with the same
 * `sha256` and `digest`) and builds the float engine on its dequantized tensors; resolves to the engine
 * and the file's SHA-256 and length.
 */
export async function floatEngineFromLut4Bytes(
  bytes: Uint8Array,
  name: string,
  opts: FromBytesOptions = {},
): Promise<{ engine: Engine; sha256: string; bytes: number }> {
  const { file, tokenizer, specials } = await readBytes(bytes, name, opts);
  // One thread, as the tab's integer engine: its pool's workers are node:worker_threads (the same
  // bits on any number of threads).
  const options = { frozen: true, specials, threads: 1 };
  const engine = createFloatEngine(file.config, dequantizeLut4(file), name, options);
  return { engine: Object.assign(engine, { tokenizer }), sha256: file.sha256, bytes: file.bytes };
}

/**
 * The integer engine from a lut4 file's bytes rather than its path: the entry for a host without a
 * file system, the browser tab's worker (serve/page/worker.js). The bytes go through the lut4 format's
 * own full reader (`parseLut4`), so a wrong or damaged file is refused with the message the command
 * line gives for the same file under the same name, and the engine is the one `loadIntEngine` builds.
 * A file that carries its model's tokenizer (schema `/2`) gets it as engines/mod.ts `loadEngine` gives
 * it: as `engine.tokenizer`, its special ids masked in the sampler.
 *
 * @example
 * ```ts
 * import { intEngineFromBytes } from "./from-bytes.ts";
 * const bytes = new Uint8Array(await (await fetch("ferry.lut4")).arrayBuffer());
 * const { engine } = await intEngineFromBytes(bytes, "ferry.lut4", { threads: 2 });
 * engine.kind; // "int"
 * ```
 * @module
 */
import type { Engine } from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { type SpecialIds, specialIds } from "../../model/sample.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { type Lut4File, parseLut4 } from "../../formats/lut4/lut4.ts";
import { openIntEngine } from "./engine.ts";

/** What `intEngineFromBytes` builds: the engine and the identity of the file it read. */
export interface BytesEngine {
  engine: Engine;
  /** The file's SHA-256 (hex), the name its sessions carry. */
  sha256: string;
  /** The file's length in bytes. */
  bytes: number;
}

/**
 * The steps of a load, in order, as `onPhase` hears them: the file read and checked (its CRC-32s and
 * SHA-256), its tokenizer built, the model laid out for the engine. A host shows them while it waits.
 */
export type LoadPhase = "check" | "tokenizer" | "layout";

/**
 * Reads `bytes` as the lut4 file `name` (the name every refusal begins with) and builds the integer
 * engine on it; `simd: false` forces the TypeScript kernels, as for `intEngineFromFile`. With `sha256`
 * (hex, what a download's manifest promised) a file whose digest differs is refused before it is used.
 * `threads` (default 1) runs the large projections on that many threads, as `openIntEngine` does: in a
 * browser on Web Workers, which need a cross-origin isolated page. `onPhase` hears each step as it starts.
 */
export async function intEngineFromBytes(
  bytes: Uint8Array,
  name: string,
  opts: { simd?: boolean; sha256?: string; threads?: number; onPhase?: (phase: LoadPhase) => void } = {},
): Promise<BytesEngine> {
  const { onPhase, sha256, ...engineOpts } = opts;
  onPhase?.("check");
  const file = parseLut4(bytes, name);
  checkDigest(name, file.sha256, sha256);
  onPhase?.("tokenizer");
  const { tokenizer, specials } = fileTokenizer(file, name);
  onPhase?.("layout");
  const engine = await openIntEngine(file, { threads: 1, ...engineOpts, specials });
  return { engine: Object.assign(engine, { tokenizer }), sha256: file.sha256, bytes: file.bytes };
}

/**
 * The tokenizer a read lut4 file carries (none: the byte tokenizer) and the special ids its engine's
 * sampler masks (absent for a byte model), as `loadEngine` makes them; a tokenizer with more ids than
 * the model's vocab is refused, naming `name`.
 */
export function fileTokenizer(file: Lut4File, name: string): { tokenizer: Tokenizer; specials?: SpecialIds } {
  const tokenizer = loadTokenizer(file.tokenizer, name);
  const vocab = file.config.vocab_size;
  if (tokenizer.size > vocab) {
    throw new FormatError(
      name,
      "VocabMismatch",
      "vocab_size",
      `${name}: vocab_size: the tokenizer has ${tokenizer.size} ids, more than the model's ${vocab}`,
      { expected: `at least ${tokenizer.size}`, found: String(vocab) },
    );
  }
  return { tokenizer, specials: file.tokenizer === undefined ? undefined : specialIds(tokenizer) };
}

/**
 * Refuses a file whose SHA-256 (`found`, hex) is not the one a download's manifest promised
 * (`expected`; absent: nothing promised, nothing checked).
 */
export function checkDigest(name: string, found: string, expected?: string): void {
  if (expected === undefined || expected === found) return;
  throw new FormatError(
    name,
    "DigestMismatch",
    "sha256",
    `${name}: sha256: the file's SHA-256 is ${found}, expected ${expected}: damaged on the way or changed since`,
    { expected, found },
  );
}

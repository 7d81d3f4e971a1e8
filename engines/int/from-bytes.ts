/**
 * The integer engine from a lut4 file's bytes rather than its path: the entry for a host without a
 * file system, the browser tab's worker (serve/page/worker.js). The bytes go through the lut4 format's
 * own full checks (`checkLut4`), so a wrong or damaged file is refused with the message the command
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
import { createHash } from "node:crypto";
import type { Engine } from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import type { SpecialIds } from "../../model/sample.ts";
import type { Tokenizer } from "../../model/tokenizer-types.ts";
import { checkLut4, type Lut4File } from "../../formats/lut4/lut4.ts";
import type { LutRoom } from "../../kernels/wasm/int-lut.ts";
import { fileTokenizer, memoryToPlace, openIntEngine } from "./engine.ts";

export { memoryToPlace };

/** What `intEngineFromBytes` builds: the engine and the identity of the file it read. */
export interface BytesEngine {
  engine: Engine;
  /** The file's SHA-256 (hex), the name its sessions carry. */
  sha256: string;
  /** The file's length in bytes. */
  bytes: number;
  /** Whether the model was laid out in the placed copy (`FromBytesOptions.placed`). */
  inPlace: boolean;
}

/**
 * The steps of a load, in order, as `onPhase` hears them: the file read and checked (its CRC-32s and
 * SHA-256), its tokenizer built, the model laid out for the engine. A host shows them while it waits.
 */
export type LoadPhase = "check" | "tokenizer" | "layout";

/** How a host hands over a file's bytes: what it knows of their digest, and what it wants. */
export interface FromBytesOptions {
  /** The SHA-256 (hex) a download's manifest promised: a file whose digest differs is refused. */
  sha256?: string;
  /**
   * The file's SHA-256 (hex) computed elsewhere from these same bytes: Web Crypto's, running on another
   * thread while the reader checks them (a tab's worker), or the one kept with them when they were first
   * read. The reader then does not hash them itself. Absent: it does (node:crypto's `createHash`).
   */
  digest?: Promise<string>;
  /**
   * A copy of `bytes` that the host already wrote into a shared memory from `memoryToPlace` (the tab
   * writes each downloaded piece into both as it arrives): the checks then run on the copy and the engine
   * lays the model out in place there, instead of copying 0.3 GB into fresh memory after the download.
   * The digest is still that of `bytes`. Ignored when its length is not theirs.
   */
  placed?: LutRoom["placed"];
}

/**
 * Reads `bytes` as the lut4 file `name` (checks, then the digest: `readBytes`) and builds the integer
 * engine on it; `simd: false` forces the TypeScript kernels, as for `intEngineFromFile`. `threads`
 * (default 1) runs the large projections on that many threads, as `openIntEngine` does: in a browser on
 * Web Workers, which need a cross-origin isolated page. `onPhase` hears each step as it starts.
 */
export async function intEngineFromBytes(
  bytes: Uint8Array,
  name: string,
  opts: FromBytesOptions & { simd?: boolean; threads?: number; onPhase?: (phase: LoadPhase) => void } = {},
): Promise<BytesEngine> {
  const { onPhase, sha256, digest, placed: given, ...engineOpts } = opts;
  const placed = given?.bytes.length === bytes.length ? given : undefined;
  onPhase?.("check");
  const { file, tokenizer, specials } = await readBytes(
    placed?.bytes ?? bytes,
    name,
    { sha256, digest },
    onPhase,
  );
  onPhase?.("layout");
  const engine = await openIntEngine(file, { threads: 1, ...engineOpts, specials, placed });
  const inPlace = placed !== undefined;
  return { engine: Object.assign(engine, { tokenizer }), sha256: file.sha256, bytes: file.bytes, inPlace };
}

/**
 * A lut4 file's bytes checked (`checkLut4`), its tokenizer built and its digest known, in that order:
 * a digest computed elsewhere (`opts.digest`) runs beside the first two. A digest other than the one
 * promised (`opts.sha256`) is refused before anything is built on the file.
 */
export async function readBytes(
  bytes: Uint8Array,
  name: string,
  opts: FromBytesOptions,
  onPhase?: (phase: LoadPhase) => void,
): Promise<{ file: Lut4File; tokenizer: Tokenizer; specials?: SpecialIds }> {
  const checked = checkLut4(bytes, name);
  onPhase?.("tokenizer");
  const { tokenizer, specials } = fileTokenizer(checked, name);
  const view = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const sha256 = opts.digest ? await opts.digest : createHash("sha256").update(view).digest("hex");
  checkDigest(name, sha256, opts.sha256);
  return { file: { ...checked, sha256 }, tokenizer, specials };
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

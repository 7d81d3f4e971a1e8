/**
 * The integer engine from a lut4 file's bytes rather than its path: the entry for a host without a
 * file system, the browser tab's worker (serve/page/worker.js). The bytes go through the lut4 format's
 * own full reader (`parseLut4`), so a wrong or damaged file is refused with the message the command
 * line gives for the same file under the same name, and the engine is the one `loadIntEngine` builds.
 *
 * @example
 * ```ts
 * const bytes = new Uint8Array(await (await fetch("ferry.lut4")).arrayBuffer());
 * const engine = intEngineFromBytes(bytes, "ferry.lut4");
 * engine.kind; // "int"
 * ```
 * @module
 */
import type { Engine } from "../../model/engine.ts";
import { FormatError } from "../../model/error.ts";
import { parseLut4 } from "../../formats/lut4.ts";
import { intEngineFromFile } from "./engine.ts";

/** What `intEngineFromBytes` builds: the engine and the identity of the file it read. */
export interface BytesEngine {
  engine: Engine;
  /** The file's SHA-256 (hex), the name its sessions carry. */
  sha256: string;
  /** The file's length in bytes. */
  bytes: number;
}

/**
 * Reads `bytes` as the lut4 file `name` (the name every refusal begins with) and builds the integer
 * engine on it; `simd: false` forces the TypeScript kernels, as for `intEngineFromFile`. With `sha256`
 * (hex, what a download's manifest promised) a file whose digest differs is refused before it is used.
 */
export function intEngineFromBytes(
  bytes: Uint8Array,
  name: string,
  opts: { simd?: boolean; sha256?: string } = {},
): BytesEngine {
  const file = parseLut4(bytes, name);
  checkDigest(name, file.sha256, opts.sha256);
  return { engine: intEngineFromFile(file, opts), sha256: file.sha256, bytes: file.bytes };
}

/**
 * Refuses a file whose SHA-256 (`found`, hex) is not the one a download's manifest promised
 * (`expected`; absent: nothing promised, nothing checked).
 */
export function checkDigest(name: string, found: string, expected?: string): void {
  if (expected === undefined || expected === found) return;
  throw new FormatError(
    name,
    "sha256",
    `${name}: sha256: the file's SHA-256 is ${found}, expected ${expected}: damaged on the way or changed since`,
    { expected, found },
  );
}

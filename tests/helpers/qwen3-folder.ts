/**
 * Qwen3 Hugging Face folders for tests, made by the independent fixture writer
 * (scripts/tools/make-qwen3.ts) and cached per shape, seed and options for the whole test process:
 * the reduced shape (the real 151,936-token vocabulary and tokenizer over a 64-wide, 2-layer body,
 * about 10M parameters) takes about a second to write.
 *
 * @example
 * ```ts
 * const dir = await qwen3Folder({ peaked: true });   // a cached folder under the system temp dir
 * const { config } = await hfFormat.read(dir);
 * ```
 * @module
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  makeQwen3Folder,
  type MakeQwen3Options,
  QWEN3_TOKENIZER_DIR,
} from "../../scripts/tools/make-qwen3.ts";

export { makeQwen3Folder, QWEN3_TOKENIZER_DIR };

const made = new Map<string, Promise<string>>();
let root: string | undefined;

/**
 * A folder with these options (default: the reduced shape, seed 1, bf16, one file, the real
 * tokenizer), written once per process. Treat it as read-only: copy it before changing anything.
 */
export function qwen3Folder(options: Omit<MakeQwen3Options, "onProgress"> = {}): Promise<string> {
  const key = JSON.stringify(options);
  let dir = made.get(key);
  if (!dir) {
    root ??= mkdtempSync(join(tmpdir(), "ferry-qwen3-"));
    const path = join(root, `m${made.size}`);
    dir = makeQwen3Folder(path, options).then(() => path);
    made.set(key, dir);
  }
  return dir;
}

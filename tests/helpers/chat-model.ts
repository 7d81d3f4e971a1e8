// The model the chat tests serve: the small test model's lut4 export (tests/fixtures/small-model, the
// default model until 2026-12-04, a twelfth of today's cost a token), written once per test file into a
// temporary folder and run on the integer engine, as `scripts/chat.ts` serves its default model.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportCheckpoint } from "../../formats/export.ts";
import type { Engine } from "../../model/engine.ts";
import { loadEngine } from "../../engines/mod.ts";
import { CHECKPOINT } from "./lut4-fixture.ts";

/** A lut4 export of the small test model in a fresh temporary folder; `cleanup` removes the folder. */
export async function exportChatModel(): Promise<{ dir: string; path: string; cleanup(): void }> {
  const dir = mkdtempSync(join(tmpdir(), "ferry-chat-"));
  const { file } = await exportCheckpoint({
    input: CHECKPOINT,
    format: "lut4",
    output: join(dir, "ferry.lut4"),
  });
  return { dir, path: file, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The integer engine on that export. */
export async function chatEngine(path: string): Promise<Engine> {
  const engine = await loadEngine(path);
  if (engine.kind !== "int") throw new Error(`expected the int engine for ${path}, got ${engine.kind}`);
  return engine;
}

// TEMPORARY local stand-in (not committed) until arch lands serve/engines.ts.
import { loadTestEngine } from "../tests/helpers/chat-engine.ts";
export async function loadEngine(path: string, kind?: string) {
  const e = await loadTestEngine();
  return { ...e, source: path, start: e.start, restore: e.restore };
}

/**
 * The table scripts/tools/fuzz.ts attacks, built from the registry: every format in `FORMATS`
 * (formats/mod.ts) brings its own fuzz hook (`descriptor.fuzzHook`, a `formats/NAME/NAME-fuzz.ts` module; see
 * formats/fuzz-kit.ts for what a target holds), so a new format is fuzzed without a line here. Beside
 * them, the file kinds that are not export formats but are read all the same (`OTHER_FILE_KINDS`), and
 * the readers beyond a format's own that take its files (`ENGINE_READERS`: engines/ lies outside
 * formats/, so an engine's loader is added here).
 *
 * @example
 * ```ts
 * import { fuzzTargets } from "./fuzz-formats.ts";
 * const targets = await fuzzTargets();
 * Object.keys(targets); // ["dmexp", "hf", "safetensors", "gguf", "f64lines", "lut4", "checkpoint", "session"]
 * ```
 * @module
 */
import { FORMATS } from "../../formats/mod.ts";
import { type FuzzHook, type FuzzTarget, loadFuzzHook } from "../../formats/fuzz-kit.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";

/** File kinds that are not export formats (not in `FORMATS`) but are fuzzed all the same. */
export const OTHER_FILE_KINDS: ReadonlyArray<() => Promise<FuzzHook>> = [
  () => import("../../formats/checkpoint/checkpoint-fuzz.ts"), // training checkpoints: export reads them
  () => import("./fuzz-session.ts"), // the integer engine's saved conversations: chat restores them
];

/** More full readers for a target's files, by target name: an engine's loader, run one step. */
export const ENGINE_READERS: Readonly<Record<string, FuzzTarget["readers"]>> = {
  lut4: {
    // The integer engine's loader, and one forward pass on what it loaded.
    loadIntEngine: async (p) => {
      const engine = await loadIntEngine(p);
      const s = engine.start();
      return { config: engine.config, logits: await s.feed([1, 2, 3], "last"), next: s.pick() };
    },
  },
};

/**
 * Every target the campaign attacks, by name, in registry order then the other file kinds. A format
 * whose hook has no target named after it, or two targets of one name, is refused: the campaign would
 * silently leave it out.
 */
export async function fuzzTargets(): Promise<Record<string, FuzzTarget>> {
  const hooks = [...FORMATS.map((f) => () => loadFuzzHook(f.fuzzHook)), ...OTHER_FILE_KINDS];
  const out: Record<string, FuzzTarget> = {};
  for (const load of hooks) {
    for (const t of (await load()).FUZZ_TARGETS) {
      if (out[t.name]) throw new Error(`fuzz: two targets are named ${t.name}`);
      const extra = ENGINE_READERS[t.name];
      out[t.name] = extra ? { ...t, readers: { ...t.readers, ...extra } } : t;
    }
  }
  const missing = FORMATS.filter((f) => !out[f.name]).map((f) => f.name);
  if (missing.length) throw new Error(`fuzz: no fuzz target named after format ${missing.join(", ")}`);
  return out;
}

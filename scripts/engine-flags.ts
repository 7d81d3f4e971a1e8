/**
 * `--threads N` and `--context N`, the two flags every command that runs an engine shares: their
 * option specs for scripts/cli.ts `cli`, their help lines, and their values checked and turned into
 * engines/mod.ts `EngineLoadOptions` fields (absent flags stay absent: the engine's defaults apply,
 * the machine's cores and min(max_position_embeddings, 4096)).
 *
 * @example
 * ```ts
 * import { ENGINE_FLAGS, engineFlags } from "./engine-flags.ts";
 * import { cli } from "./cli.ts";
 * import { loadEngine } from "../engines/mod.ts";
 * declare const HELP: string, path: string; // the command's --help text; the export to load
 * const { values } = cli(HELP, { ...ENGINE_FLAGS, json: { type: "boolean" } });
 * const engine = await loadEngine(path, undefined, { ...engineFlags(values) });
 * ```
 * @module
 */
import { EXIT_USAGE, fail } from "./cli.ts";
import { DEFAULT_CONTEXT } from "../model/engine.ts";

/** The option specs, to spread into a command's `cli` options. */
export const ENGINE_FLAGS = {
  threads: { type: "string" },
  context: { type: "string" },
} as const;

/** The help lines, to put in a command's HELP text under its options. */
export const ENGINE_FLAGS_HELP =
  `  --threads N         threads one generation runs on           [the machine's cores]
  --context N         positions of the KV cache                [min(max_position_embeddings, ${DEFAULT_CONTEXT})]`;

/** The flags' values as `EngineLoadOptions` fields; a value that is not a positive integer exits 2. */
export function engineFlags(
  values: { threads?: string; context?: string },
): { threads?: number; context?: number } {
  const out: { threads?: number; context?: number } = {};
  for (const name of ["threads", "context"] as const) {
    const raw = values[name];
    if (raw === undefined) continue;
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isInteger(n) || n < 1) {
      fail(`--${name} ${raw}: expected a positive integer`, EXIT_USAGE);
    }
    out[name] = n;
  }
  return out;
}

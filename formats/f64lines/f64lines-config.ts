/**
 * The config beside an f64lines export (formats/f64lines/f64lines.md, "The config beside an export"): f64lines
 * holds named arrays only, so `NAME.config.toml` carries the model config and the weights' origin.
 *
 * @example
 * ```ts
 * import { f64linesConfigPath, readF64linesConfig } from "./f64lines-config.ts";
 * f64linesConfigPath("out/ferry.f64.f64lines"); // "out/ferry.f64.config.toml"
 * const { config, origin } = await readF64linesConfig("out/ferry.f64.config.toml");
 * ```
 * @module
 */
import { readFile } from "node:fs/promises";
import { parse as parseToml, stringify as stringifyToml } from "smol-toml";
import { ConfigError, configToToml, type ModelConfig, notToml, validateConfig } from "../../model/config.ts";
import type { ExportOrigin } from "../format.ts";

/** `a.f64lines` → `a.config.toml`: f64lines holds named arrays only, so an export's shape lives there. */
export function f64linesConfigPath(path: string): string {
  return path.replace(/\.f64lines$/, "") + ".config.toml";
}

/**
 * The text of `NAME.config.toml` beside an f64lines export: the model config, then, when anything of
 * the weights' origin is known, an `[origin]` table (`name`, `step`, `source`; formats/f64lines/f64lines.md).
 *
 * @example
 * ```ts
 * import { f64linesConfigToml } from "./f64lines-config.ts";
 * import { PRESETS } from "../../model/config.ts";
 * const config = PRESETS.default;
 * f64linesConfigToml(config, { name: "ferry", step: 12 }); // "vocab_size = 258\n…\n[origin]\nname = \"ferry\"\nstep = 12\n"
 * ```
 */
export function f64linesConfigToml(config: ModelConfig, origin: ExportOrigin = {}): string {
  const table = Object.fromEntries(Object.entries(origin).filter(([, v]) => v !== undefined));
  return configToToml(config) + (Object.keys(table).length ? "\n" + stringifyToml({ origin: table }) : "");
}

const ORIGIN_TYPES = { name: "string", step: "number", source: "string" } as const;

/**
 * Reads the config beside an f64lines export (`f64linesConfigPath`): the model config, checked as any
 * config is, and its `[origin]` table when it has one (each key optional: `name` and `source` strings,
 * `step` a non-negative integer; no other key). Refusals are `ConfigError`s naming the file and field.
 *
 * @example
 * ```ts
 * import { readF64linesConfig } from "./f64lines-config.ts";
 * const { config, origin } = await readF64linesConfig("out/ferry.f64.config.toml");
 * ```
 */
export async function readF64linesConfig(
  path: string,
): Promise<{ config: ModelConfig; origin: ExportOrigin }> {
  const text = await readFile(path, "utf8");
  let raw: Record<string, unknown>;
  try {
    raw = parseToml(text) as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError(path, "InvalidToml", "(toml)", notToml(e));
  }
  const { origin, ...fields } = raw;
  return { config: validateConfig(fields, path), origin: originTable(origin, path) };
}

function originTable(table: unknown, path: string): ExportOrigin {
  if (table === undefined) return {};
  if (typeof table !== "object" || table === null || Array.isArray(table)) {
    throw new ConfigError(path, "WrongType", "origin", "expected a table of name, step and source", {
      expected: "a table",
      found: typeof table,
    });
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(table)) {
    const want = ORIGIN_TYPES[k as keyof typeof ORIGIN_TYPES];
    if (!want) {
      throw new ConfigError(
        path,
        "UnknownField",
        `origin.${k}`,
        "unknown key (expected name, step, source)",
        {
          expected: "name, step or source",
          found: k,
        },
      );
    }
    if (typeof v !== want || (k === "step" && (!Number.isSafeInteger(v) || (v as number) < 0))) {
      const expected = k === "step" ? "a non-negative integer" : "a string";
      throw new ConfigError(
        path,
        "WrongType",
        `origin.${k}`,
        `expected ${expected}, got ${JSON.stringify(v)}`,
        {
          expected,
          found: String(JSON.stringify(v)),
        },
      );
    }
    out[k] = v;
  }
  return out as ExportOrigin;
}

/**
 * What every ferry command-line entry point shares: argument parsing (node:util's parseArgs), the
 * `--help` text, a progress bar on stderr, and failures that print one clear line and exit non-zero.
 *
 * Exit codes: 0 success, 1 the input was refused (bad file, failed check), 2 usage error.
 *
 * @example
 * ```ts
 * import { cli, progress } from "./cli.ts";
 * declare const HELP: string; // the command's --help text
 * const { values } = cli(HELP, { format: { type: "string", choices: ["dmexp", "gguf"] } });
 * const bar = progress("export", 54);
 * bar.tick(); bar.done();
 * ```
 * @module
 */
import { parseArgs } from "node:util";
import { basename, relative } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { type Kernels, kernelSet } from "../kernels/kernels.ts";
import { unreadable } from "../formats/io.ts";
import { joinParts, SHIPPED_CHECKPOINT } from "../formats/checkpoint/parts.ts";

/** Exit code for refused input (a corrupt file, a failed check). */
export const EXIT_REFUSED = 1;
/** Exit code for a usage error (unknown flag, missing argument). */
export const EXIT_USAGE = 2;

/** One option of a command: parseArgs' own fields, and for a string option the values it accepts. */
export interface OptionSpec {
  type: "string" | "boolean";
  short?: string;
  /** May be given more than once (its values come back as a list). */
  multiple?: boolean;
  default?: string | boolean | string[] | boolean[];
  /** The accepted values; any other is a usage error that suggests the nearest (`did you mean`). */
  choices?: readonly string[];
}

/** The parsed values: a string option is a string (undefined without a default), a boolean a boolean. */
export type Values<O extends Record<string, OptionSpec>> = { [K in keyof O]: Value<O[K]> };
type One<S extends OptionSpec> = S["type"] extends "boolean" ? boolean : string;
type Value<S extends OptionSpec> = S extends { multiple: true }
  ? One<S>[] | (S extends { default: unknown[] } ? never : undefined)
  : One<S> | (S extends { default: string | boolean } ? never : undefined);

/**
 * Parses `process.argv` with the given options plus `--help` / `-h` (prints `help` and exits 0).
 * Usage errors print one line and exit 2: an unknown option (`unknown option --fromat (did you mean
 * --format?)`), a string option without its value, a value a boolean option does not take, and a
 * value outside an option's `choices` (`--format gguff: unknown (expected one of: ...; did you mean
 * gguf?)`).
 *
 * @example
 * ```ts
 * import { cli } from "./cli.ts";
 * declare const HELP: string; // the command's --help text
 * const { values, positionals } = cli(HELP, { json: { type: "boolean" } });
 * ```
 */
export function cli<O extends Record<string, OptionSpec>>(
  help: string,
  options: O,
  args: string[] = process.argv.slice(2),
): { values: Values<O>; positionals: string[] } {
  // Every command may read the shipped model: on a fresh clone it is joined from its parts first.
  joinParts(SHIPPED_CHECKPOINT);
  const all: Record<string, OptionSpec> = { ...options, help: { type: "boolean", short: "h" } };
  const config = Object.fromEntries(
    Object.entries(all).map(([name, { choices: _, ...spec }]) => [name, spec]),
  );
  // Not strict: unknown options come back as tokens, refused below in ferry's words.
  const { values, positionals, tokens } = parseArgs({
    args,
    options: config,
    allowPositionals: true,
    strict: false,
    tokens: true,
  });
  if (values.help === true) {
    console.log(help.trim());
    process.exit(0);
  }
  for (const token of tokens) {
    if (token.kind !== "option") continue;
    const spec = Object.hasOwn(all, token.name) ? all[token.name] : undefined;
    if (!spec) usage(unknownOption(token.rawName, Object.keys(all)));
    if (spec.type === "string" && token.value === undefined) {
      usage(`option ${token.rawName} needs a value`);
    }
    // `--prompt --json` is a forgotten value more often than a prompt; `--prompt=--json` says it is one.
    const name = token.value?.replace(/^--?([^=]*).*$/, "$1");
    if (
      spec.type === "string" && !token.inlineValue && token.value?.startsWith("-") && isOption(name!, all)
    ) {
      usage(
        `option ${token.rawName} needs a value, got option ${token.value} (${token.rawName}=${token.value} if it is one)`,
      );
    }
    if (spec.type === "boolean" && token.inlineValue) usage(`option ${token.rawName} takes no value`);
    if (spec.choices && token.value !== undefined) choice(`--${token.name}`, token.value, spec.choices);
  }
  return { values: values as Values<O>, positionals };
}

// Whether `name` (without its dashes) is one of the options, by long name or short letter.
function isOption(name: string, all: Record<string, OptionSpec>): boolean {
  return Object.hasOwn(all, name) || Object.values(all).some((spec) => spec.short === name);
}

function usage(message: string): never {
  fail(`${message}\n(--help for more)`, EXIT_USAGE);
}

/**
 * A usage error that is not an option's (a missing FILE, an extra argument): `error: message`, the
 * help's `Usage:` line, and exit 2; the whole help is one `--help` away.
 *
 * @example
 * ```ts
 * import { failUsage } from "./cli.ts";
 * declare const HELP: string, positionals: string[]; // as `cli` gives them
 * if (positionals.length !== 1) failUsage(`expected one FILE, got ${positionals.length}`, HELP);
 * ```
 */
export function failUsage(message: string, help: string): never {
  const line = help.split("\n").find((l) => l.startsWith("Usage:"));
  fail(`${message}${line ? `\n${line}` : ""}\n(--help for more)`, EXIT_USAGE);
}

// `--fromat` -> "unknown option --fromat (did you mean --format?)"; `-x` -> "unknown option -x".
function unknownOption(raw: string, names: string[]): string {
  if (!raw.startsWith("--")) return `unknown option ${raw}`;
  const near = didYouMean(raw.slice(2), names);
  return `unknown option ${raw}${near ? ` (did you mean --${near}?)` : ""}`;
}

/**
 * Checks an enumerated value: returns it when it is one of `choices`, else fails with exit 2, listing
 * them and suggesting the nearest.
 *
 * @example
 * ```ts
 * import { choice } from "./cli.ts";
 * choice("--engine", "flaot", ["float", "int"]); // exits 2: --engine flaot: unknown (expected one of: float, int; did you mean float?)
 * ```
 */
export function choice<T extends string>(flag: string, value: string, choices: readonly T[]): T {
  if ((choices as readonly string[]).includes(value)) return value as T;
  const near = didYouMean(value, choices);
  usage(
    `${flag} ${value}: unknown (expected one of: ${choices.join(", ")}${
      near ? `; did you mean ${near}?` : ""
    })`,
  );
}

/**
 * The candidate `typed` most likely meant: the nearest within 2 edits (Damerau-Levenshtein: an
 * insertion, deletion, substitution or swap of neighbours), or else the only candidate it is a prefix
 * of; undefined when neither is unique.
 *
 * @example
 * ```ts
 * import { didYouMean } from "./cli.ts";
 * didYouMean("fromat", ["format", "input"]); // "format"
 * didYouMean("in", ["input", "format"]);     // "input"
 * didYouMean("zzz", ["input", "format"]);    // undefined
 * ```
 */
export function didYouMean(typed: string, candidates: readonly string[]): string | undefined {
  const scored = candidates.map((c) => ({ c, d: editDistance(typed.toLowerCase(), c.toLowerCase()) }));
  const best = Math.min(...scored.map((s) => s.d));
  const nearest = scored.filter((s) => s.d === best);
  if (best <= 2 && nearest.length === 1) return nearest[0].c;
  const prefixed = candidates.filter((c) => typed.length > 0 && c.startsWith(typed));
  return prefixed.length === 1 ? prefixed[0] : undefined;
}

/** Edits between two strings: insertions, deletions, substitutions and swaps of adjacent characters. */
function editDistance(a: string, b: string): number {
  // d[i][j]: the edits from a's first i characters to b's first j (the optimal string alignment form).
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.length][b.length];
}

/** Prints `error: message` to stderr and exits with `code`. */
export function fail(message: string, code = EXIT_REFUSED): never {
  console.error(`error: ${message}`);
  process.exit(code);
}

/**
 * Runs `main`, turning any thrown error into one line on stderr and exit code 1. A file the runtime
 * could not open gets the same sentence every reader gives (formats/io.ts: `PATH: no such file`).
 */
export async function run(main: () => Promise<void> | void): Promise<void> {
  try {
    await main();
  } catch (e) {
    const err = e as Error & { code?: unknown; path?: unknown };
    // The runtime's own file errors (ENOENT, EISDIR...), not a format's refusal that has a code too.
    const errno = typeof err.code === "string" && /^E[A-Z]+$/.test(err.code);
    if (errno && typeof err.path === "string") fail(unreadable(err.path, err).message);
    fail(err.message ?? String(e));
  }
}

/** A progress bar on stderr: label, bar, count, rate and ETA; silent when stderr is not a terminal unless forced. */
export interface Progress {
  tick(n?: number, note?: string): void;
  done(note?: string): void;
}

/** Starts a progress bar for `total` units. */
export function progress(
  label: string,
  total: number,
  opts: { unit?: string; force?: boolean } = {},
): Progress {
  const tty = opts.force || process.stderr.isTTY === true;
  const start = performance.now();
  let count = 0, last = 0;
  const draw = (note = "", final = false) => {
    const now = performance.now();
    if (!final && now - last < 100) return;
    last = now;
    const frac = total > 0 ? Math.min(1, count / total) : 1;
    const width = 24, fill = Math.round(frac * width);
    const secs = (now - start) / 1000;
    const rate = count / Math.max(secs, 1e-9);
    const eta = rate > 0 ? (total - count) / rate : 0;
    const line =
      `${label} [${"#".repeat(fill)}${".".repeat(width - fill)}] ${count}/${total} ${opts.unit ?? "it"}` +
      ` ${fmtRate(rate)} ${opts.unit ?? "it"}/s ${final ? fmtTime(secs) : "ETA " + fmtTime(eta)}${
        note ? " " + note : ""
      }`;
    if (tty) process.stderr.write(`\r\x1b[2K${line}${final ? "\n" : ""}`);
    else if (final) process.stderr.write(line + "\n");
  };
  return {
    tick(n = 1, note) {
      count += n;
      draw(note);
    },
    done(note) {
      draw(note, true);
    },
  };
}

function fmtRate(r: number): string {
  return r >= 1000 ? `${(r / 1000).toFixed(1)}k` : r.toFixed(r >= 10 ? 0 : 1);
}

function fmtTime(s: number): string {
  if (!Number.isFinite(s)) return "?";
  const m = Math.floor(s / 60), sec = Math.round(s % 60);
  return m > 0 ? `${m}m${String(sec).padStart(2, "0")}s` : `${s.toFixed(1)}s`;
}

/** Help line and handling of `--kernels wasm|ref` (the compute kernels; see kernels/kernels.ts). */
export const KERNELS_HELP =
  "  --kernels K        compute kernels: wasm (WebAssembly SIMD) | ref (JavaScript reference)  [wasm]";

/** The kernel set `--kernels` names, to hand to what the script builds; an unknown name is a usage error. */
export function chooseKernels(name: string | undefined): Kernels {
  return kernelSet(choice("--kernels", name ?? "", ["wasm", "ref"] as const));
}

/**
 * The exact command that converts a training checkpoint to dmexp, runnable from the current
 * directory (the script path is made relative to it).
 *
 * @example
 * ```ts
 * import { exportCommand } from "./cli.ts";
 * exportCommand("model/default/ferry.ckpt");
 * // "deno run -A scripts/export.ts --input model/default/ferry.ckpt --format dmexp --output out/ferry.dmexp"
 * ```
 */
export function exportCommand(checkpointPath: string): string {
  const script = relative(process.cwd(), fileURLToPath(new URL("./export.ts", import.meta.url)));
  const stem = basename(checkpointPath).replace(/\.ckpt$/, "");
  return `deno run -A ${shellQuote(script)} --input ${shellQuote(checkpointPath)} --format dmexp --output ${
    shellQuote(`out/${stem}.dmexp`)
  }`;
}

/** The sentence for a training checkpoint handed to a command that reads exports. */
export function checkpointRefusal(path: string): string {
  return `${path} is a ferry training checkpoint (magic FERRYCK): a training run with its optimizer state, ` +
    `not an inference export. Convert it to dmexp with:\n  ${exportCommand(path)}`;
}

function shellQuote(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

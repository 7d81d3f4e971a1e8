/**
 * What every ferry command-line entry point shares: argument parsing (node:util's parseArgs), the
 * `--help` text, a progress bar on stderr, and failures that print one clear line and exit non-zero.
 *
 * Exit codes: 0 success, 1 the input was refused (bad file, failed check), 2 usage error.
 *
 * @example
 * ```ts
 * const args = cli(HELP, { dtype: { type: "string", default: "bf16" } });
 * const bar = progress("export", 54);
 * bar.tick(); bar.done();
 * ```
 * @module
 */
import { parseArgs, type ParseArgsConfig } from "node:util";
import { basename, relative } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { type Kernels, kernelSet } from "../kernels/kernels.ts";

/** Exit code for refused input (a corrupt file, a failed check). */
export const EXIT_REFUSED = 1;
/** Exit code for a usage error (unknown flag, missing argument). */
export const EXIT_USAGE = 2;

type Options = NonNullable<ParseArgsConfig["options"]>;

/**
 * Parses `process.argv` with the given options plus `--help` / `-h` (prints `help` and exits 0).
 * An unknown flag prints the error and the help, and exits 2.
 */
export function cli<O extends Options>(help: string, options: O) {
  try {
    const parsed = parseArgs({
      args: process.argv.slice(2),
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
    if ((parsed.values as Record<string, unknown>).help) {
      console.log(help.trim());
      process.exit(0);
    }
    return parsed;
  } catch (e) {
    console.error(`error: ${(e as Error).message}\n\n${help.trim()}`);
    process.exit(EXIT_USAGE);
  }
}

/** Prints `error: message` to stderr and exits with `code`. */
export function fail(message: string, code = EXIT_REFUSED): never {
  console.error(`error: ${message}`);
  process.exit(code);
}

/** Runs `main`, turning any thrown error into one line on stderr and exit code 1. */
export async function run(main: () => Promise<void> | void): Promise<void> {
  try {
    await main();
  } catch (e) {
    const err = e as Error & { code?: string; path?: string };
    if (err.code === "ENOENT" && err.path) fail(`${err.path}: no such file or directory`);
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
    const line = `${label} [${"#".repeat(fill)}${".".repeat(width - fill)}] ${count}/${total}` +
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
  if (name !== "wasm" && name !== "ref") fail(`--kernels must be wasm or ref, got ${name}`, EXIT_USAGE);
  return kernelSet(name);
}

/**
 * The exact command that converts a training checkpoint to dmexp, runnable from the current
 * directory (the script path is made relative to it).
 *
 * @example
 * ```ts
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

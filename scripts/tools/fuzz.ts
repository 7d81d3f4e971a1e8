/**
 * A mutation campaign against every reader ferry has: valid files of each format are mutated (see
 * scripts/tools/fuzz-mutate.ts, steered by the byte map of each format's fuzz hook, `formats/NAME/NAME-fuzz.ts`,
 * which scripts/tools/fuzz-formats.ts collects from the registry) and fed to the format's full readers
 * and to its minimal reader in readers/. Every outcome is classified:
 *
 * - `refused`    the reader refused with the format's typed error, its `code` one of that class's table
 *                (the minimal reader: exit 1, `FILE: why`)
 * - `identical`  accepted, and returned exactly what the valid file gives
 * - `different`  accepted, and returned something else
 * - `other`      any other exception, or a refusal whose code is not in its class's table (the minimal
 *                reader: a stack trace, or another exit code or form)
 * - `timeout`    no answer within `--timeout` ms
 * - `oversize`   asked for an allocation larger than the file justifies (16 × its size + 16 MiB), or the
 *                process grew past `--max-rss` MiB
 *
 * The cases run in child processes (this script with `--child`), a batch each, so a hang or a runaway
 * allocation is caught from outside: the parent kills the child and goes on with the next case. The
 * minimal readers are standalone scripts; a child runs each one in-process, importing a fresh copy of
 * its source per case with `process.exit` and the console intercepted, which is about 100 times cheaper
 * than a process per case.
 *
 * Usage: deno run -A scripts/tools/fuzz.ts [--cases N] [--seed S] [--format F] [--json] [--list]
 *
 * @example
 * ```ts
 * // bun scripts/tools/fuzz.ts --cases 2000 --seed 1 --format dmexp
 * // bun scripts/tools/fuzz.ts --seed 1 --format gguf --case 123 --save /tmp/case   (replay one case)
 * ```
 * @module
 */
import { spawn } from "node:child_process";
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { crc32 } from "node:zlib";
import process from "node:process";
import { cli, EXIT_USAGE, fail, progress } from "../cli.ts";
import type { FuzzTarget } from "../../formats/fuzz-kit.ts";
import { codesOf, FormatError } from "../../model/error.ts";
import { fuzzTargets } from "./fuzz-formats.ts";
import { caseRng, mutate } from "./fuzz-mutate.ts";

/** Every target, by name: each registered format's (its fuzz hook's) and the other file kinds'. */
const TARGETS = await fuzzTargets();

const HELP = `
Mutate valid files of every format and feed them to the full and minimal readers; count the outcomes.

Usage: deno run -A scripts/tools/fuzz.ts [options]

Options:
  --cases N      cases per format (default 1000)
  --seed S       campaign seed (default 1); case i of seed S is always the same file
  --format F     only this format (${Object.keys(TARGETS).join(", ")}); repeatable
  --case I       run only case I (with --format), print what happened
  --save DIR     with --case: write the mutated file into DIR
  --batch N      cases per child process (default 400)
  --timeout MS   per reader per case (default 10000)
  --max-rss MIB  a child above this resident size is killed: oversize (default 1536)
  --no-minimal   skip the minimal readers
  --no-full      skip the full readers (only the minimal ones)
  --json         print the counts as JSON
  --list         print the target names as a JSON array, and nothing else
  -h, --help     this text

Exit codes: 0 no other exception, timeout or oversize in any reader; 1 some; 2 usage.
`;

/** The outcome classes, in report order. */
export const OUTCOMES = ["refused", "identical", "different", "other", "timeout", "oversize"] as const;
export type Outcome = typeof OUTCOMES[number];

/** One reader's verdict on one case. */
interface Verdict {
  i: number;
  reader: string;
  outcome: Outcome;
  kind: string;
  detail?: string;
  /** For `different`: what no checksum of the format covers that let the change through (format's `explain`). */
  why?: string;
}

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(dirname(SELF), "..", "..");
const MARK = "\u0001fuzz ";

// ---- the child: runs cases [from, to) of one format and prints one line per reader per case ----

class Exit {
  constructor(readonly code: number) {}
}
class Oversize extends Error {
  constructor(readonly bytes: number) {
    super(`allocation of ${bytes} bytes`);
  }
}

let allocLimit = Infinity;

// Every typed array, ArrayBuffer and Array constructor checks the size it is asked for, so an
// allocation sized from an unchecked count is caught before it happens (or fails on its own).
function guardAllocations(): void {
  const g = globalThis as Record<string, unknown>;
  const typed = [
    "ArrayBuffer",
    "SharedArrayBuffer",
    "Uint8Array",
    "Int8Array",
    "Uint8ClampedArray",
    "Uint16Array",
    "Int16Array",
    "Uint32Array",
    "Int32Array",
    "Float32Array",
    "Float64Array",
    "BigInt64Array",
    "BigUint64Array",
    "Float16Array",
  ];
  for (const name of typed) {
    const C = g[name] as (new (...a: unknown[]) => { BYTES_PER_ELEMENT?: number }) & {
      BYTES_PER_ELEMENT?: number;
    };
    if (!C) continue;
    const per = C.BYTES_PER_ELEMENT ?? 1;
    g[name] = new Proxy(C, {
      construct(target, args, newTarget) {
        if (typeof args[0] === "number" && args[0] * per > allocLimit) throw new Oversize(args[0] * per);
        return Reflect.construct(target, args, newTarget);
      },
    });
  }
  const A = Array;
  const check = (args: unknown[]) => {
    if (args.length === 1 && typeof args[0] === "number" && args[0] * 8 > allocLimit) {
      throw new Oversize(args[0] * 8);
    }
  };
  g.Array = new Proxy(A, {
    construct(target, args, newTarget) {
      check(args);
      return Reflect.construct(target, args, newTarget);
    },
    apply(target, self, args) {
      check(args);
      return Reflect.apply(target, self, args);
    },
  });
}

// A stable text for whatever a reader returned: typed arrays by length and CRC, maps and objects by
// sorted key, so two reads of the same content compare equal.
function canon(v: unknown, depth = 0): string {
  if (depth > 64) return "…";
  if (ArrayBuffer.isView(v)) {
    const b = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    return `bytes${b.length}:${crc32(b)}`;
  }
  if (typeof v === "bigint") return `${v}n`;
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v !== "object" || v === null) return JSON.stringify(v) ?? String(v);
  if (v instanceof Map) {
    return `Map{${[...v].map(([k, x]) => `${canon(k)}:${canon(x, depth + 1)}`).sort().join(",")}}`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => canon(x, depth + 1)).join(",")}]`;
  const o = v as Record<string, unknown>;
  return `{${
    Object.keys(o).sort().filter((k) => typeof o[k] !== "function").map((k) =>
      `${k}:${canon(o[k], depth + 1)}`
    ).join(",")
  }}`;
}

interface MinimalRun {
  code: number;
  out: string;
  err: string;
  thrown?: unknown;
}

// Runs a minimal reader's source as a fresh module, as if `runtime reader FILE ARGS...` had been typed.
async function runMinimal(copyDir: string, source: string, n: number, args: string[]): Promise<MinimalRun> {
  const copy = join(copyDir, `r${n}.ts`);
  writeFileSync(copy, source);
  const out: string[] = [], err: string[] = [];
  const saved = {
    argv: process.argv,
    exit: process.exit,
    log: console.log,
    error: console.error,
    warn: console.warn,
    info: console.info,
    outWrite: process.stdout.write,
    errWrite: process.stderr.write,
    exitCode: process.exitCode,
    on: process.on,
    once: process.once,
    addListener: process.addListener,
  };
  // A reader may end its own errors with an "uncaughtException" handler (print one line, exit 1): keep
  // such handlers for this run and call them as the runtime would, instead of installing them for good.
  const handlers: Array<(e: unknown) => void> = [];
  const listen = (real: typeof process.on) =>
    function (event: string, fn: (...a: unknown[]) => void) {
      if (event === "uncaughtException") handlers.push(fn);
      else real.call(process, event, fn);
      return process;
    } as typeof process.on;
  process.on = listen(saved.on),
    process.once = listen(saved.once),
    process.addListener = listen(saved.addListener);
  let code: number | undefined;
  const fmt = (a: unknown[]) => a.map((x) => (typeof x === "string" ? x : String(x))).join(" ");
  process.argv = [process.argv[0], copy, ...args];
  process.exitCode = undefined;
  (process as { exit: (c?: number) => never }).exit = (c?: number) => {
    code ??= c ?? Number(process.exitCode ?? 0);
    throw new Exit(code);
  };
  console.log = console.info = (...a: unknown[]) => void out.push(fmt(a) + "\n");
  console.error = console.warn = (...a: unknown[]) => void err.push(fmt(a) + "\n");
  (process.stdout as { write: unknown }).write = (s: string | Uint8Array) => (out.push(String(s)), true);
  (process.stderr as { write: unknown }).write = (s: string | Uint8Array) => (err.push(String(s)), true);
  let thrown: unknown;
  try {
    await import(pathToFileURL(copy).href);
  } catch (e) {
    if (e instanceof Exit) { /* an exit, its code already kept */ }
    else if (e instanceof Oversize || handlers.length === 0) thrown = e;
    else {
      try {
        for (const h of handlers) h(e);
      } catch (e2) {
        if (!(e2 instanceof Exit)) thrown = e2;
      }
    }
  } finally {
    process.on = saved.on, process.once = saved.once, process.addListener = saved.addListener;
    const finalCode = Number(process.exitCode ?? 0);
    process.argv = saved.argv;
    (process as { exit: unknown }).exit = saved.exit;
    console.log = saved.log,
      console.error = saved.error,
      console.warn = saved.warn,
      console.info = saved.info;
    (process.stdout as { write: unknown }).write = saved.outWrite;
    (process.stderr as { write: unknown }).write = saved.errWrite;
    process.exitCode = saved.exitCode;
    rmSync(copy, { force: true });
    code ??= finalCode;
  }
  return { code: thrown ? -1 : code, out: out.join(""), err: err.join(""), thrown };
}

function emit(obj: unknown): void {
  process.stdout.write(MARK + JSON.stringify(obj) + "\n");
}

async function child(
  name: string,
  seed: number,
  from: number,
  to: number,
  work: string,
  minimal: boolean,
  full = true,
) {
  guardAllocations();
  const fmt = TARGETS[name];
  const seedDir = join(work, "seed");
  const caseDir = mkdtempSync(join(work, "case-"));
  const copyDir = mkdtempSync(join(work, "reader-"));
  cpSync(seedDir, caseDir, { recursive: true });
  const seedMeta = JSON.parse(readFileSync(join(work, "seed.json"), "utf8")) as {
    file: string;
    target: string;
  };
  const file = join(caseDir, relative(seedDir, seedMeta.file));
  const target = join(caseDir, relative(seedDir, seedMeta.target));
  const valid = new Uint8Array(readFileSync(seedMeta.file));
  const map = fmt.map(valid);
  // Imported, a script is not the entry point; it is run as if it were (`import.meta.main` made true).
  const source = fmt.minimal && minimal
    ? readFileSync(join(ROOT, fmt.minimal), "utf8").replaceAll("import.meta.main", "true")
    : undefined;
  let runs = 0;

  // What the readers make of the valid file, at the same path the cases will have.
  writeFileSync(file, valid);
  const baseline: Record<string, string> = {};
  for (const [r, read] of Object.entries(fmt.readers)) baseline[r] = canon(await read(target));
  let tensorNames: string[] = [], minimalBase = "";
  if (source) {
    const listing = await runMinimal(copyDir, source, runs++, [file]);
    // One line per tensor, the name first; a summary line that names the file is not a tensor.
    tensorNames = listing.out.split("\n").filter((l) => l && !l.startsWith(file)).map((l) =>
      l.split(/\s/)[0]
    );
    const all = await runMinimal(copyDir, source, runs++, [file, ...tensorNames]);
    if (all.code !== 0) throw new Error(`${fmt.minimal} does not read the valid file: ${all.err}`);
    minimalBase = all.out;
  }

  try {
    for (let i = from; i < to; i++) {
      const rng = caseRng(seed, i);
      let m = mutate(valid, { ...fmt, map }, rng);
      if (fmt.reseal && rng.next() < 0.5) m = { kind: m.kind + " +resealed", bytes: fmt.reseal(m.bytes) };
      writeFileSync(file, m.bytes);
      allocLimit = 16 * Math.max(m.bytes.length, valid.length) + (16 << 20);
      for (const [r, read] of full ? Object.entries(fmt.readers) : []) {
        emit({ start: i, reader: r });
        let v: Verdict;
        try {
          const got = canon(await read(target));
          v = got === baseline[r]
            ? { i, reader: r, kind: m.kind, outcome: "identical" }
            : { i, reader: r, kind: m.kind, outcome: "different", why: fmt.explain?.(m) };
        } catch (e) {
          v = e instanceof Oversize
            ? { i, reader: r, kind: m.kind, outcome: "oversize", detail: e.message }
            : fmt.refusal(e) && coded(e)
            ? { i, reader: r, kind: m.kind, outcome: "refused" }
            : { i, reader: r, kind: m.kind, outcome: "other", detail: describe(e) };
        }
        emit(v);
      }
      if (source) {
        const r = "minimal";
        emit({ start: i, reader: r });
        const run = await runMinimal(copyDir, source, runs++, [file, ...tensorNames]);
        let v: Verdict;
        if (run.thrown instanceof Oversize) {
          v = { i, reader: r, kind: m.kind, outcome: "oversize", detail: String(run.thrown.message) };
        } else if (run.thrown) {
          v = { i, reader: r, kind: m.kind, outcome: "other", detail: describe(run.thrown) };
        } else if (run.code === 0) {
          v = run.out === minimalBase ? { i, reader: r, kind: m.kind, outcome: "identical" } : {
            i,
            reader: r,
            kind: m.kind,
            outcome: "different",
            why: fmt.explain?.(m) ?? "the minimal reader checks only what its 40 lines check",
          };
        } else if (run.code === 1 && run.err.startsWith(`${file}: `) && !/\n\s+at /.test(run.err)) {
          v = { i, reader: r, kind: m.kind, outcome: "refused" };
        } else {v = {
            i,
            reader: r,
            kind: m.kind,
            outcome: "other",
            detail: `exit ${run.code}: ${run.err.slice(0, 200)}`,
          };}
        emit(v);
      }
      allocLimit = Infinity;
    }
  } finally {
    rmSync(caseDir, { recursive: true, force: true });
    rmSync(copyDir, { recursive: true, force: true });
  }
}

/** Whether a refusal names its rule by a code of its class's table, the table its format's spec explains. */
function coded(e: unknown): boolean {
  return e instanceof FormatError && codesOf(e).includes(e.code);
}

function describe(e: unknown): string {
  const err = e as Error;
  return `${err?.name ?? typeof e}: ${String(err?.message ?? e).split("\n")[0].slice(0, 200)}`;
}

// ---- the parent: makes the valid files, runs the children, enforces the limits, counts ----

/** The counts of one reader of one format, with a few examples of each unwanted outcome. */
export interface ReaderCounts {
  format: string;
  reader: string;
  counts: Record<Outcome, number>;
  /** Up to 40 cases that ended in another exception, a timeout or an oversize allocation. */
  examples: Array<{ case: number; outcome: Outcome; kind: string; detail?: string }>;
  /** Up to 10 cases accepted with a different result (up to 40 when unexplained ones come in). */
  differentExamples: Array<{ case: number; kind: string; why?: string }>;
  /** The accepted-and-different cases by explanation; `UNEXPLAINED` counts those the format cannot explain. */
  explained: Record<string, number>;
  /** Cases run a second time because their child process died without being killed (not counted twice). */
  retried?: Array<{ case: number; exit: string }>;
  /** How many accepted-and-different cases each mutation kind produced. */
  different: Record<string, number>;
}

interface CampaignOptions {
  cases: number;
  seed: number;
  formats: string[];
  batch: number;
  timeoutMs: number;
  maxRssMiB: number;
  minimal: boolean;
  /** Run the full readers (default true). */
  full?: boolean;
  only?: number;
  onCase?: () => void;
}

function runtimeArgs(): string[] {
  // Deno needs `run -A`; Bun runs a script directly.
  return "Deno" in globalThis ? ["run", "-A", "--quiet"] : [];
}

function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

// Runs cases [from, to) in one child; resolves with the index to resume from. A case's verdicts are
// passed on once its last reader has answered; a child that dies in a case without being killed (a
// runtime hiccup, not a reader's doing: the reader's own exits are intercepted) gets that case once more.
function runBatch(
  name: string,
  work: string,
  from: number,
  to: number,
  o: CampaignOptions,
  lastReader: string,
  onVerdict: (v: Verdict) => void,
  retried = -1,
): Promise<{ next: number; retry?: number; exit?: string }> {
  return new Promise((resolve, reject) => {
    const args = [
      ...runtimeArgs(),
      SELF,
      "--child",
      "--format",
      name,
      "--seed",
      String(o.seed),
      "--from",
      String(from),
      "--to",
      String(to),
      "--work",
      work,
    ];
    if (!o.minimal) args.push("--no-minimal");
    if (o.full === false) args.push("--no-full");
    const proc = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    let current: { i: number; reader: string; since: number } | undefined;
    let killedFor: Outcome | undefined, buf = "", errText = "";
    let pending: Verdict[] = [];
    const kill = (why: Outcome) => {
      if (killedFor) return;
      killedFor = why;
      proc.kill("SIGKILL");
    };
    const timer = setInterval(() => {
      if (current && performance.now() - current.since > o.timeoutMs) kill("timeout");
      else if (proc.pid && rssMiB(proc.pid) > o.maxRssMiB) kill("oversize");
    }, 50);
    proc.stdout.setEncoding("utf8");
    proc.stdout.on("data", (chunk: string) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const at = line.indexOf(MARK);
        if (at < 0) continue;
        const msg = JSON.parse(line.slice(at + MARK.length));
        if ("start" in msg) current = { i: msg.start, reader: msg.reader, since: performance.now() };
        else {
          current = undefined;
          pending.push(msg as Verdict);
          if (msg.reader === lastReader) pending.forEach(onVerdict), pending = [];
        }
      }
    });
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (s: string) => (errText = (errText + s).slice(-4000)));
    proc.on("close", (code, signal) => {
      clearInterval(timer);
      const died = current ??
        (pending.length ? { i: pending[0].i, reader: pending.at(-1)!.reader } : undefined);
      if (died && !killedFor && died.i !== retried) {
        resolve({ next: died.i, retry: died.i, exit: signal ?? `exit ${code}` });
      } else if (died) {
        pending.forEach(onVerdict);
        onVerdict({
          i: died.i,
          reader: current?.reader ?? lastReader,
          outcome: killedFor ?? "other",
          kind: "?",
          detail: killedFor
            ? `killed: ${killedFor}`
            : `the child died twice here (exit ${code}): ${errText.slice(-300)}`,
        });
        resolve({ next: died.i + 1 });
      } else if (code === 0) resolve({ next: to });
      else reject(new Error(`fuzz child for ${name} failed (exit ${code}) outside any case: ${errText}`));
    });
  });
}

/** Runs the campaign and returns the counts per format and reader. */
export async function campaign(o: CampaignOptions): Promise<ReaderCounts[]> {
  const base = mkdtempSync(join(process.platform === "linux" ? "/dev/shm" : tmpdir(), "ferry-fuzz-"));
  const results: ReaderCounts[] = [];
  try {
    for (const name of o.formats) {
      const fmt = TARGETS[name];
      const work = join(base, name);
      mkdirSync(join(work, "seed"), { recursive: true });
      const made = await fmt.make(join(work, "seed"));
      writeFileSync(join(work, "seed.json"), JSON.stringify(made));
      const rows = new Map<string, ReaderCounts>();
      const row = (reader: string) => {
        let r = rows.get(reader);
        if (!r) {
          r = {
            format: name,
            reader,
            counts: Object.fromEntries(OUTCOMES.map((k) => [k, 0])) as Record<Outcome, number>,
            examples: [],
            differentExamples: [],
            explained: {},
            different: {},
          };
          rows.set(reader, r);
        }
        return r;
      };
      if (o.full !== false) { for (const r of Object.keys(fmt.readers)) row(r); }
      if (fmt.minimal && o.minimal) row("minimal");
      if (rows.size === 0) continue;
      const lastReader = [...rows.keys()].at(-1);
      const onVerdict = (v: Verdict) => {
        const r = row(v.reader);
        r.counts[v.outcome]++;
        if (v.outcome === "different") {
          r.different[v.kind] = (r.different[v.kind] ?? 0) + 1;
          const why = v.why ?? "UNEXPLAINED";
          r.explained[why] = (r.explained[why] ?? 0) + 1;
        }
        if (
          v.outcome === "different" &&
          (r.differentExamples.length < 10 || (!v.why && r.differentExamples.length < 40))
        ) {
          r.differentExamples.push({ case: v.i, kind: v.kind, why: v.why });
        } else if (
          v.outcome !== "refused" && v.outcome !== "identical" && v.outcome !== "different" &&
          r.examples.length < 40
        ) {
          r.examples.push({ case: v.i, outcome: v.outcome, kind: v.kind, detail: v.detail });
        }
        if (v.reader === lastReader) o.onCase?.();
      };
      const [first, last] = o.only !== undefined ? [o.only, o.only + 1] : [0, o.cases];
      let retried = -1;
      const retries: Array<{ case: number; exit: string }> = [];
      for (let from = first; from < last;) {
        const to = Math.min(last, from + o.batch);
        const r = await runBatch(name, work, from, to, o, lastReader!, onVerdict, retried);
        if (r.retry !== undefined) retries.push({ case: r.retry, exit: r.exit! });
        retried = r.retry ?? -1;
        from = r.next;
      }
      for (const row of rows.values()) row.retried = retries;
      results.push(...rows.values());
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  return results;
}

/** The counts as a table, one row per format and reader. */
export function countsTable(results: ReaderCounts[]): string {
  const head = ["format", "reader", ...OUTCOMES];
  const rows = results.map((r) => [r.format, r.reader, ...OUTCOMES.map((k) => String(r.counts[k]))]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(" | ")} |`;
  return [line(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(line)].join("\n");
}

async function main() {
  const { values } = cli(HELP, {
    cases: { type: "string", default: "1000" },
    seed: { type: "string", default: "1" },
    format: { type: "string", multiple: true },
    case: { type: "string" },
    save: { type: "string" },
    batch: { type: "string", default: "400" },
    timeout: { type: "string", default: "10000" },
    "max-rss": { type: "string", default: "1536" },
    "no-minimal": { type: "boolean", default: false },
    "no-full": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    list: { type: "boolean", default: false },
    child: { type: "boolean", default: false },
    from: { type: "string" },
    to: { type: "string" },
    work: { type: "string" },
  });
  const int = (s: string | undefined, what: string) => {
    const n = Number(s);
    if (!Number.isSafeInteger(n) || n < 0) {
      fail(`--${what} expects a non-negative integer, got ${s}`, EXIT_USAGE);
    }
    return n;
  };
  if (values.list) {
    console.log(JSON.stringify(Object.keys(TARGETS)));
    return;
  }
  const formats = values.format ?? Object.keys(TARGETS);
  for (const f of formats) {
    if (!TARGETS[f]) {
      fail(`--format: unknown format ${f} (expected ${Object.keys(TARGETS).join(", ")})`, EXIT_USAGE);
    }
  }
  const seed = int(values.seed, "seed");
  if (values.child) {
    await child(
      formats[0],
      seed,
      int(values.from, "from"),
      int(values.to, "to"),
      values.work!,
      !values["no-minimal"],
      !values["no-full"],
    );
    await new Promise<void>((done) => process.stdout.write("", () => done())); // flushed before the exit
    process.exit(0);
  }
  if (values.case !== undefined) {
    if (formats.length !== 1) fail("--case needs one --format", EXIT_USAGE);
    const i = int(values.case, "case");
    if (values.save) await saveCase(TARGETS[formats[0]], seed, i, values.save);
  }
  const cases = int(values.cases, "cases");
  const bar = progress("fuzz", values.case !== undefined ? formats.length : cases * formats.length, {
    unit: "case",
  });
  const results = await campaign({
    cases,
    seed,
    formats,
    batch: Math.max(1, int(values.batch, "batch")),
    timeoutMs: int(values.timeout, "timeout"),
    maxRssMiB: int(values["max-rss"], "max-rss"),
    minimal: !values["no-minimal"],
    full: !values["no-full"],
    only: values.case !== undefined ? int(values.case, "case") : undefined,
    onCase: () => bar.tick(),
  });
  bar.done();
  if (values.json) console.log(JSON.stringify({ seed, cases, results }, null, 2));
  else {
    console.log(countsTable(results));
    for (const r of results) {
      for (const e of r.examples.slice(0, 5)) {
        console.log(
          `${r.format} ${r.reader} case ${e.case}: ${e.outcome} after ${e.kind}${
            e.detail ? `: ${e.detail}` : ""
          }`,
        );
      }
      const kinds = Object.entries(r.different).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`);
      if (kinds.length) {
        console.log(`${r.format} ${r.reader} accepted and different, by mutation: ${kinds.join(", ")}`);
        for (const [why, n] of Object.entries(r.explained)) console.log(`  ${n} × ${why}`);
      }
    }
  }
  const bad = results.some((r) => r.counts.other + r.counts.timeout + r.counts.oversize > 0);
  process.exit(bad ? 1 : 0);
}

// Writes case `i`'s mutated file (and the valid one) into `dir`, for a closer look.
async function saveCase(fmt: FuzzTarget, seed: number, i: number, dir: string) {
  mkdirSync(dir, { recursive: true });
  const tmp = mkdtempSync(join(tmpdir(), "ferry-fuzz-case-"));
  try {
    const made = await fmt.make(tmp);
    const valid = new Uint8Array(readFileSync(made.file));
    const rng = caseRng(seed, i);
    let m = mutate(valid, { ...fmt, map: fmt.map(valid) }, rng);
    if (fmt.reseal && rng.next() < 0.5) m = { kind: m.kind + " +resealed", bytes: fmt.reseal(m.bytes) };
    cpSync(tmp, dir, { recursive: true });
    const out = join(dir, relative(tmp, made.file));
    copyFileSync(made.file, out + ".valid");
    writeFileSync(out, m.bytes);
    console.error(`case ${i}: ${m.kind}; wrote ${out} (the valid file is ${out}.valid)`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

if (import.meta.main) await main();

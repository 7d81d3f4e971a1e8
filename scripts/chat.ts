/**
 * Starts the chat server: the Hono app from serve/app.ts on an engine, listening on loopback.
 * With no model named it serves the lut4 export of the default model on the integer engine, exporting
 * it on first run. A training checkpoint is refused with the command that converts it. A model with
 * its own tokenizer (a Hugging Face Qwen3 folder, or an export carrying one; `--tokenizer DIR` for one
 * that does not) is served with its chat template applied and its EOS set honoured.
 *
 * @example
 * ```ts
 * // deno run -A scripts/chat.ts                       # http://127.0.0.1:8080/
 * // bun scripts/chat.ts out/ferry.bf16.dmexp --engine float --port 9000
 * // bun scripts/chat.ts models/Qwen3-0.6B --engine float         # its tokenizer and chat template
 * ```
 * @module
 */
import { open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import process from "node:process";
import { cli, EXIT_REFUSED, EXIT_USAGE, fail, failUsage, run } from "./cli.ts";
import { DEFAULT_INPUT, DEFAULT_OUTPUT, exportCheckpoint, outputPath } from "../formats/export.ts";
import { isCheckpoint } from "../formats/checkpoint/checkpoint.ts";
import { requireInput } from "../formats/io.ts";
import { lut4Format } from "../formats/lut4/lut4.ts";
import { DEFAULT_CONTEXT, type Engine } from "../model/engine.ts";
import { TOKENIZER_FILE_NAMES, type TokenizerFiles } from "../model/tokenizer-types.ts";
import { FormatError } from "../model/error.ts";
import { createApp } from "../serve/app.ts";
import { engineKinds, loadEngine, servedTokenizer } from "../engines/mod.ts";
import { ENGINE_FLAGS, engineFlags } from "./engine-flags.ts";
import { lut4Calibrator } from "../measure/calibrate.ts";
import { AddressInUseError, isLoopback, listen } from "../serve/listen.ts";
import { loadingApp } from "../serve/loading.ts";
import { createSessionStore } from "../serve/sessions/session-store.ts";
import { type Slots, type SlotsOptions, startSlots } from "../serve/slots/slots.ts";
import { CACHE_FLOOR, CACHE_MEMORY_SHARE, CACHE_STATES, stateBytes } from "../serve/slots/prompt-cache.ts";
import { totalmem } from "node:os";

/** The model served when none is named: the default model's lut4 export (out/ferry.q4.lut4). */
export const DEFAULT_MODEL = outputPath(DEFAULT_OUTPUT, lut4Format, DEFAULT_INPUT, lut4Format.defaultDtype);
/** Where saved sessions are kept unless `--sessions` says otherwise. */
export const DEFAULT_SESSIONS = `${DEFAULT_OUTPUT}sessions`;

const HELP = `
Serve a model as a local chat: the page at / and OpenAI-style endpoints under /v1.

Usage: deno run -A scripts/chat.ts [MODEL] [options]
       bun scripts/chat.ts [MODEL] [options]

MODEL is any export (.lut4, .dmexp, .gguf, .f64lines, a Hugging Face folder); with none, the lut4
export of the default model (${DEFAULT_MODEL}), created from ${DEFAULT_INPUT} on first run.

Options:
  --host HOST       address to listen on (default 127.0.0.1: this machine only)
  --port PORT       port (default 8080; 0 picks a free one)
  --engine KIND     int, float, or webgpu (Deno only); default: the format's own engine
  --tokenizer DIR   the tokenizer files (tokenizer.json, tokenizer_config.json with its chat
                    template, generation_config.json, chat_template.jinja) to serve MODEL with,
                    for an export that carries none (default: MODEL's own; a folder's files)
  --sessions DIR    where saved sessions are kept (default ${DEFAULT_SESSIONS})
  --queue N         requests that may wait for a slot before 429 (default 8)
  --parallel N      replies generated at once, each in its own worker (default: the number of
                    cores, here ${cores()}); the slots share one copy of the weights, each with
                    its own KV cache; the server's own thread only does HTTP and holds no weights
                    (WebGPU: one slot). The start-up line says what the weights and a slot's KV
                    cache take
  --cache-mb MB     the prompt cache's bound: saved conversation states whose common prefix with
                    a new prompt is reused, least recently used dropped first (0: off; default:
                    room for ${CACHE_STATES} states of the whole context at the model's bytes per token,
                    at most 1/${1 / CACHE_MEMORY_SHARE} of this machine's memory, here ${
  Math.round(totalmem() * CACHE_MEMORY_SHARE / 2 ** 20)
} MB; the start-up line says the figure)
  --allow-host NAME also accept requests whose Host header names NAME (repeatable; the
                    listening address and localhost, 127.0.0.1, [::1] on its port always are)
  --cors ORIGIN     let web pages from ORIGIN call the server (repeatable; * for any origin)
  --api-key KEY     require "Authorization: Bearer KEY" on every API route (default:
                    \$FERRY_API_KEY; /health and the page stay open)
  --threads N       threads the one slot's products run on with --parallel 1 (default: the
                    cores); with more slots each runs on one thread
  --context N       positions a conversation may hold (default min(max_position_embeddings, ${DEFAULT_CONTEXT}))
  -h, --help        this text

Exit codes: 0 stopped, 1 refused (a checkpoint, a corrupt file), 2 usage.
`;

/**
 * The tokenizer files in folder `dir`: tokenizer.json (required: without it, undefined) and whichever
 * of the others are there.
 */
export async function tokenizerFilesIn(dir: string): Promise<TokenizerFiles | undefined> {
  const read = (name: string) => readFile(join(dir, name), "utf8").catch(() => undefined);
  const json = await read("tokenizer.json");
  if (json === undefined) return undefined;
  const files: TokenizerFiles = { "tokenizer.json": json };
  for (const name of TOKENIZER_FILE_NAMES.slice(1)) {
    const text = await read(name);
    if (text !== undefined) files[name] = text;
  }
  return files;
}

/**
 * The engine to serve: `model` (default: the default model's lut4 export, created when missing) on
 * `kind` (default: the format's natural engine), with the tokenizer in folder `tokenizer` when given,
 * else the one the model carries (its format's `readTokenizer`), and the engine flags (`--threads`,
 * `--context`). A training checkpoint is refused.
 */
export async function openServedEngine(
  model?: string,
  kind?: string,
  tokenizer?: string,
  options: { threads?: number; context?: number } = {},
): Promise<Engine> {
  const files = tokenizer === undefined ? undefined : await tokenizerFilesIn(tokenizer);
  if (tokenizer !== undefined && files === undefined) {
    fail(`--tokenizer ${tokenizer}: no tokenizer.json there`, EXIT_USAGE);
  }
  if (model === undefined && files === undefined) return await openDefault(kind, options);
  const path = model ?? DEFAULT_MODEL;
  if (model !== undefined) await refuseUnservable(model);
  return await loadEngine(path, kind, {
    ...options,
    onNote: (line) => console.error(line),
    tokenizer: files,
  });
}

/** Refuses, before anything listens or loads, a model that is missing or is a training checkpoint. */
/**
 * The chat server's model and slots: the model is loaded by the slot workers (serve/slots/slots.ts
 * `startSlots`), never on the server's own thread, which builds only the tokenizer. The default model
 * is exported first when it is missing or unreadable, as `openServedEngine` does. The WebGPU engine
 * (Deno: its workers have `navigator.gpu` too) holds a device, so it gets one slot.
 */
export async function startServed(
  model: string | undefined,
  kind: string | undefined,
  tokenizer: string | undefined,
  options: { threads?: number; context?: number },
  slotOptions: SlotsOptions,
): Promise<{ engine: Engine; slots: Slots }> {
  // The WebGPU engine holds a device: one slot, in its worker like any other.
  if (kind === "webgpu") slotOptions = { ...slotOptions, parallel: 1 };
  const files = tokenizer === undefined ? undefined : await tokenizerFilesIn(tokenizer);
  if (tokenizer !== undefined && files === undefined) {
    fail(`--tokenizer ${tokenizer}: no tokenizer.json there`, EXIT_USAGE);
  }
  const path = model ?? DEFAULT_MODEL;
  // The tokenizer is built on this thread while the first slot reads the model.
  const start = async () => {
    const served = servedTokenizer(path, files).then((s) => s.tokenizer);
    return await startSlots(path, served, {
      ...slotOptions,
      ...options,
      kind,
      onNote: (line) => console.error(line),
    });
  };
  if (model !== undefined) {
    await refuseUnservable(model);
    return await start();
  }
  if (!(await stat(DEFAULT_MODEL).then(() => true, () => false))) {
    await exportDefault("is missing (first run)");
  }
  try {
    return await start();
  } catch (e) {
    if (!(e instanceof FormatError) || e.field === "engine") throw e;
    await exportDefault(`cannot be read (${e.message})`);
    return await start();
  }
}

/** Exports the default model (calibrated, as `export.ts` writes it by default) to `DEFAULT_MODEL`. */
async function exportDefault(why: string): Promise<void> {
  console.error(`${DEFAULT_MODEL} ${why}: exporting ${DEFAULT_INPUT} to lut4`);
  const made = await exportCheckpoint({
    input: DEFAULT_INPUT,
    output: DEFAULT_MODEL,
    format: "lut4",
    calibrate: lut4Calibrator(),
  });
  console.error(`wrote ${made.file} (${made.bytes.toLocaleString("en-US")} bytes)`);
}

export async function refuseUnservable(model: string): Promise<void> {
  requireInput(model);
  if (!(await stat(model)).isFile()) return;
  const head = new Uint8Array(8);
  const fh = await open(model, "r");
  await fh.read(head, 0, 8, 0).finally(() => fh.close());
  if (isCheckpoint(head)) {
    fail(
      `${model} is a training checkpoint (its weights plus optimizer state), not a model to serve. ` +
        `Convert it first:\n  deno run -A scripts/export.ts --input ${model} --format lut4 --output ${DEFAULT_OUTPUT}`,
      EXIT_REFUSED,
    );
  }
}

/**
 * The default model, exported on first run. The file is ferry's own output, so one it can no longer
 * read (written by an older ferry whose lut4 layout differed) is written again rather than refused.
 */
async function openDefault(
  kind?: string,
  options: { threads?: number; context?: number } = {},
): Promise<Engine> {
  if (!(await stat(DEFAULT_MODEL).then(() => true, () => false))) {
    await exportDefault("is missing (first run)");
  }
  try {
    return await loadEngine(DEFAULT_MODEL, kind, { ...options, onNote: (line) => console.error(line) });
  } catch (e) {
    if (!(e instanceof FormatError) || e.field === "engine") throw e;
    await exportDefault(`cannot be read (${e.message})`);
    return await loadEngine(DEFAULT_MODEL, kind, { ...options, onNote: (line) => console.error(line) });
  }
}

/**
 * What the start-up line says of the prompt cache: its bound, what a token of saved state costs on
 * this engine, and where the bound came from.
 */
/**
 * What the model costs in memory: its weights, held once for every slot or once per slot, and what a
 * slot's KV cache takes at the whole context (a bound: a conversation holds what it used).
 */
export function memoryLine(engine: Engine, slots: Pick<Slots, "parallel" | "sharedWeights">): string {
  const context = engine.context ?? engine.config.max_position_embeddings;
  const kv = `a slot's KV cache up to ${mb(stateBytes(engine, context))} at ${context} positions`;
  if (engine.weightBytes === undefined) return kv;
  const copies = slots.parallel === 1
    ? ""
    : slots.sharedWeights
    ? `, one copy for ${slots.parallel} slots`
    : `, a copy in each of ${slots.parallel} slots`;
  return `weights ${mb(engine.weightBytes)}${copies}; ${kv}`;
}

export function cacheLine(engine: Engine, bytes: number, askedMb: number | undefined): string {
  if (bytes === 0) return "no prompt cache";
  const perToken = stateBytes(engine, 2) - stateBytes(engine, 1);
  const context = engine.context ?? engine.config.max_position_embeddings;
  const room = CACHE_STATES * stateBytes(engine, context);
  const states = `${CACHE_STATES} states of ${context} positions`;
  const why = askedMb !== undefined
    ? "--cache-mb"
    : bytes === CACHE_FLOOR && room < bytes
    ? `the least default; ${states} take ${mb(room)}`
    : bytes < room
    ? `1/${1 / CACHE_MEMORY_SHARE} of ${mb(totalmem())} of memory; ${states} would take ${mb(room)}`
    : `room for ${states}; at most 1/${1 / CACHE_MEMORY_SHARE} of ${mb(totalmem())} of memory`;
  return `prompt cache ${mb(bytes)} (${(perToken / 1024).toFixed(1)} KB a token; ${why})`;
}

/** `n` bytes as KB (2^10) below 1 MB, MB (2^20), or GB (2^30) from 10 GB. */
function mb(n: number): string {
  if (n < 2 ** 20) return `${Math.round(n / 2 ** 10)} KB`;
  return n >= 10 * 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GB` : `${Math.round(n / 2 ** 20)} MB`;
}

/** The cores this machine reports (the default `--parallel`). */
function cores(): number {
  return Math.max(1, navigator.hardwareConcurrency || 1);
}

/** `--name raw` as an integer of at least `min`, or exit 2 naming it. */
function intFlag(name: string, raw: string, min: number): number {
  const x = Number(raw);
  if (!Number.isInteger(x) || x < min) fail(`--${name} ${raw}: expected an integer >= ${min}`, EXIT_USAGE);
  return x;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "8080" },
    engine: { type: "string", choices: engineKinds() },
    tokenizer: { type: "string" },
    sessions: { type: "string", default: DEFAULT_SESSIONS },
    queue: { type: "string", default: "8" },
    parallel: { type: "string" },
    "cache-mb": { type: "string" },
    "allow-host": { type: "string", multiple: true },
    ...ENGINE_FLAGS,
    cors: { type: "string", multiple: true },
    "api-key": { type: "string" },
  });
  if (positionals.length > 1) {
    failUsage(`expected at most one MODEL, got ${positionals.length}`, HELP);
  }
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    fail(`--port ${values.port}: expected 0 to 65535`, EXIT_USAGE);
  }
  const queueLimit = Number(values.queue);
  if (!Number.isInteger(queueLimit) || queueLimit < 0) {
    fail(`--queue ${values.queue}: expected an integer >= 0`, EXIT_USAGE);
  }

  const parallel = intFlag("parallel", values.parallel ?? String(cores()), 1);
  const cacheMb = values["cache-mb"] === undefined ? undefined : intFlag("cache-mb", values["cache-mb"], 0);
  const apiKey = values["api-key"] ?? (process.env.FERRY_API_KEY || undefined);
  const guard = { allowHosts: values["allow-host"], cors: values.cors, apiKey };

  if (positionals[0] !== undefined) await refuseUnservable(positionals[0]);
  // Listen first, so a taken port is said at once and /health answers "loading" while the engine loads.
  let handler = loadingApp(guard);
  const server = await listen((r) => handler.fetch(r), { hostname: values.host!, port }).catch((e) => {
    if (e instanceof AddressInUseError) fail(`port ${port} is in use; pick another with --port N`);
    throw e;
  });
  const address = { hostname: values.host!, port: Number(new URL(server.url).port) };
  handler = loadingApp({ ...guard, address });
  console.error(
    `listening on ${server.url} while the model loads (GET /health answers 503 until it is ready)`,
  );
  const slotOptions = {
    parallel,
    queueLimit,
    cacheBytes: cacheMb === undefined ? undefined : cacheMb * 2 ** 20,
  };
  const { engine, slots } = await startServed(
    positionals[0],
    values.engine,
    values.tokenizer,
    engineFlags(values),
    slotOptions,
  );
  const sessions = await createSessionStore(values.sessions!);
  // Warm before ready: /health says loading until every slot has loaded and run a short reply.
  const warming = performance.now();
  console.error(
    `warming ${slots.parallel} slot${slots.parallel > 1 ? "s" : ""} (/health answers 503 until done)`,
  );
  await slots.warm();
  console.error(`warmed in ${((performance.now() - warming) / 1000).toFixed(1)} s`);
  handler = createApp({ engine, sessions, queueLimit, slots, ...guard, address });
  const loopback = isLoopback(values.host!);
  const tok = engine.tokenizer;
  const tokenizer = tok.kind === "byte"
    ? "byte tokenizer"
    : `its ${tok.size}-id tokenizer, EOS ${tok.eos.join(" ")}`;
  const on = `${engine.source} on the ${engine.kind} engine, ${tokenizer}, ${slots.parallel} slot${
    slots.parallel > 1 ? "s" : ""
  }`;
  console.log(
    `ferry chat: ${server.url}  (${on}; ${memoryLine(engine, slots)}; ${
      cacheLine(engine, slots.cacheBytes, cacheMb)
    }; Ctrl+C stops)`,
  );
  if (!loopback) console.log(`note: listening on ${values.host}, reachable from other machines`);
  const stop = async () => {
    await server.close();
    slots.close();
    engine.dispose?.();
    process.exit(0);
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

if (import.meta.main) await run(main);

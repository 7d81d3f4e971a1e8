/**
 * Generates text from an export on any engine, and from nothing else: pointed at a training checkpoint
 * it says what the file is, prints the exact command that converts it, and exits 1. Greedy by default;
 * the continuation (not the prompt) streams to stdout as it is produced.
 *
 * @example
 * ```ts
 * // deno run -A scripts/generate.ts out/ferry.bf16.dmexp --prompt "The jury said" --max-tokens 64
 * // deno run -A scripts/generate.ts out/ferry.bf16.dmexp --prompt "It was" --temperature 0.8 --top-p 0.9 --seed 3
 * ```
 * @module
 */
import process from "node:process";
import {
  checkpointRefusal,
  chooseKernels,
  cli,
  EXIT_REFUSED,
  EXIT_USAGE,
  fail,
  failUsage,
  KERNELS_HELP,
  type Progress,
  progress,
  run,
} from "./cli.ts";
import { isCheckpointFile } from "../formats/checkpoint/checkpoint.ts";
import { formatOf, FORMATS } from "../formats/mod.ts";
import { engineKinds, loadEngine } from "../engines/mod.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "./engine-flags.ts";
import { configParamCount } from "../model/config.ts";
import { generateTokens } from "../model/generate.ts";
import { contextLength } from "../model/engine.ts";
import {
  checkSampling,
  checkSeed,
  SAMPLING_EXPECTED,
  type SamplingChoice,
  SamplingError,
} from "../model/sampling.ts";

const HELP = `
Generate text from an export: ${FORMATS.map((f) => f.extension).join(" ")} (not from a training
checkpoint: convert that first with scripts/export.ts).

Usage: deno run -A scripts/generate.ts FILE --prompt TEXT [options]

Options:
  --prompt TEXT       the text to continue (required)
  --max-tokens N      at most N new tokens (default 200; capped by the model's context)
  --engine NAME       ${engineKinds().join(", ")} (default: the format's own engine)
  --temperature T     0 is greedy (default 0)
  --top-k K           sample from the K most likely tokens only (default 0: all)
  --min-p P           drop tokens below P times the top token's probability (default 0: none)
  --top-p P           nucleus sampling mass, in (0, 1] (default 1)
  --seed S            sampling seed, an integer (default 0)
${KERNELS_HELP}
${ENGINE_FLAGS_HELP}
  -h, --help          this text

Prints the continuation to stdout as it is produced.
Exit codes: 0 done, 1 refused (not an export, a corrupt file), 2 usage.
`;

/** The flag each option of the sampling contract (model/sampling.ts) is read from. */
const SAMPLING_FLAGS = {
  temperature: "temperature",
  topK: "top-k",
  topP: "top-p",
  minP: "min-p",
  seed: "seed",
};

/**
 * The sampling flags, checked by the one contract: a value out of its range is a usage error naming the
 * flag and what the contract expects. Absent flags take the contract's neutral values (greedy, seed 0).
 */
function samplingFlags(values: Record<string, unknown>): SamplingChoice & { seed: number } {
  const given = (option: keyof typeof SAMPLING_FLAGS): number | undefined => {
    const raw = values[SAMPLING_FLAGS[option]];
    if (typeof raw !== "string") return undefined;
    const x = Number(raw);
    if (raw.trim() === "" || Number.isNaN(x)) {
      fail(`--${SAMPLING_FLAGS[option]} ${raw}: expected ${SAMPLING_EXPECTED[option]}`, EXIT_USAGE);
    }
    return x;
  };
  try {
    const choice = checkSampling({
      temperature: given("temperature"),
      topK: given("topK"),
      topP: given("topP"),
      minP: given("minP"),
    });
    const seed = given("seed");
    return { ...choice, seed: seed === undefined ? 0 : checkSeed(seed) };
  } catch (e) {
    if (!(e instanceof SamplingError)) throw e;
    fail(`--${SAMPLING_FLAGS[e.field]} ${e.found}: expected ${e.expected}`, EXIT_USAGE);
  }
}

function numberFlag(
  name: string,
  raw: string | undefined,
  fallback: number,
  ok: (x: number) => boolean,
  want: string,
): number {
  if (raw === undefined) return fallback;
  const x = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(x) || !ok(x)) {
    fail(`--${name} ${raw}: expected ${want}`, EXIT_USAGE);
  }
  return x;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    prompt: { type: "string" },
    "max-tokens": { type: "string" },
    engine: { type: "string", choices: engineKinds() },
    temperature: { type: "string" },
    "top-k": { type: "string" },
    "min-p": { type: "string" },
    "top-p": { type: "string" },
    seed: { type: "string" },
    kernels: { type: "string", default: "wasm", choices: ["wasm", "ref"] },
    ...ENGINE_FLAGS,
  });
  const kernels = chooseKernels(values.kernels);
  if (positionals.length !== 1) {
    failUsage(`expected one FILE, got ${positionals.length}`, HELP);
  }
  if (values.prompt === undefined) failUsage("--prompt is required", HELP);
  const path = positionals[0];
  const maxTokens = numberFlag(
    "max-tokens",
    values["max-tokens"],
    200,
    (x) => Number.isInteger(x) && x > 0,
    "a positive integer",
  );
  const { seed, ...choice } = samplingFlags(values);
  // A training checkpoint is a run, not a model: say so and how to convert it, and load nothing of it.
  if (await isCheckpointFile(path)) fail(checkpointRefusal(path), EXIT_REFUSED);

  let bar: Progress | undefined, shown = 0;
  const engine = await loadEngine(path, values.engine, {
    kernels,
    ...engineFlags(values),
    onNote: (line) => console.error(line),
    onProgress: (done, total) => {
      if (total < 64 << 20) return; // a small model loads faster than a bar could draw
      bar ??= progress("load", Math.ceil(total / (1 << 20)), { unit: "MiB" });
      const now = Math.floor(done / (1 << 20));
      if (now > shown) bar.tick(now - shown), shown = now;
      if (done === total) bar.done();
    },
  });
  const params = configParamCount(engine.config).toLocaleString("en-US");
  console.error(`${path}: ${formatOf(path).name} export, ${params} params, on the ${engine.kind} engine`);
  // The model's own tokenizer (a byte model's: BOS then bytes); special-token strings are parsed.
  const prompt = engine.tokenizer.encode(values.prompt, { bos: true, specials: true });
  const context = contextLength(engine);
  if (prompt.length >= context) {
    fail(`--prompt is ${prompt.length} tokens with BOS; the model's context holds ${context}`, EXIT_USAGE);
  }
  const decode = engine.tokenizer.streamDecoder();
  const sampling = { maxTokens, ...choice, seed };
  for await (const id of generateTokens(engine, prompt, sampling)) process.stdout.write(decode(id));
  process.stdout.write("\n");
}

if (import.meta.main) await run(main);

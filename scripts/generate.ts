/**
 * Generates text from an export, and from nothing else: pointed at a training checkpoint it says what
 * the file is, prints the exact command that converts it, and exits 1. Greedy by default; the
 * continuation (not the prompt) streams to stdout as it is produced.
 *
 * @example
 * ```ts
 * // deno run -A scripts/generate.ts out/ferry.bf16.dmexp --prompt "The jury said" --max-tokens 64
 * // deno run -A scripts/generate.ts out/ferry.bf16.dmexp --prompt "It was" --temperature 0.8 --top-p 0.9 --seed 3
 * ```
 * @module
 */
import { open, stat } from "node:fs/promises";
import process from "node:process";
import { chooseKernels, cli, EXIT_REFUSED, EXIT_USAGE, fail, KERNELS_HELP, type Progress, progress, run } from "./cli.ts";
import { checkpointRefusal, loadDmexpModel } from "../formats/dmexp.ts";
import { isCheckpoint } from "../formats/checkpoint.ts";
import { createStreamDecoder, encode } from "../model/tokenizer.ts";
import { generate } from "../model/sample.ts";
import type { Model } from "../model/qwen3.ts";
import { countParams } from "../model/tensor.ts";
import { loadExport } from "./load.ts";

const HELP = `
Generate text from an export: .dmexp, .gguf, .f64lines or a Hugging Face folder (not from a training
checkpoint: convert that first with scripts/export.ts).

Usage: deno run -A scripts/generate.ts FILE --prompt TEXT [options]

Options:
  --prompt TEXT       the text to continue (required)
  --max-tokens N      at most N new tokens (default 200; capped by the model's context)
  --temperature T     0 is greedy (default 0)
  --top-p P           nucleus sampling mass, in (0, 1] (default 1)
  --seed S            sampling seed, an integer (default 0)
${KERNELS_HELP}
  -h, --help          this text

Prints the continuation to stdout as it is produced.
Exit codes: 0 done, 1 refused (not an export, a corrupt file), 2 usage.
`;

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
    temperature: { type: "string" },
    "top-p": { type: "string" },
    seed: { type: "string" },
    kernels: { type: "string", default: "wasm" },
  });
  chooseKernels(values.kernels);
  if (positionals.length !== 1) {
    fail(`expected one FILE, got ${positionals.length}\n\n${HELP.trim()}`, EXIT_USAGE);
  }
  if (values.prompt === undefined) fail(`--prompt is required\n\n${HELP.trim()}`, EXIT_USAGE);
  const path = positionals[0];
  const maxTokens = numberFlag(
    "max-tokens",
    values["max-tokens"],
    200,
    (x) => Number.isInteger(x) && x > 0,
    "a positive integer",
  );
  const temperature = numberFlag("temperature", values.temperature, 0, (x) => x >= 0, "a number >= 0");
  const topP = numberFlag("top-p", values["top-p"], 1, (x) => x > 0 && x <= 1, "a number in (0, 1]");
  const seed = numberFlag("seed", values.seed, 0, Number.isSafeInteger, "an integer");

  // A training checkpoint is a run, not a model: say so and how to convert it, and load nothing of it.
  const head = new Uint8Array(8);
  const fh = await stat(path).then((s) => (s.isFile() ? open(path, "r") : undefined), () => undefined);
  if (fh) {
    await fh.read(head, 0, 8, 0).finally(() => fh.close());
    if (isCheckpoint(head)) fail(checkpointRefusal(path), EXIT_REFUSED);
  }

  let model: Model;
  if (path.endsWith(".dmexp")) {
    let bar: Progress | undefined, shown = 0;
    const loaded = await loadDmexpModel(path, {
      onProgress: (done, total) => {
        if (total < 64 << 20) return; // a small model loads faster than a bar could draw
        bar ??= progress("load", Math.ceil(total / (1 << 20)), { unit: "MiB" });
        const now = Math.floor(done / (1 << 20));
        if (now > shown) bar.tick(now - shown), shown = now;
        if (done === total) bar.done();
      },
    });
    model = loaded.model;
    const h = loaded.header;
    console.error(`${path}: ${h.dtype} export of ${h.source}, ${h.num_params.toLocaleString("en-US")} params`);
  } else {
    // Any other export ferry writes: a Hugging Face folder, .gguf or .f64lines.
    const loaded = await loadExport(path);
    model = loaded.model;
    console.error(`${path}: ${loaded.format} export, ${countParams(loaded.tensors).toLocaleString("en-US")} params`);
  }
  const prompt = encode(values.prompt, { bos: true });
  const room = model.config.max_position_embeddings - prompt.length;
  if (room <= 0) {
    fail(
      `--prompt is ${prompt.length} tokens with BOS; the model's context holds ${model.config.max_position_embeddings}`,
      EXIT_USAGE,
    );
  }
  const decode = createStreamDecoder();
  generate(model, prompt, {
    maxTokens: Math.min(maxTokens, room),
    temperature,
    topP,
    seed,
    onToken: (id) => process.stdout.write(decode(id)),
  });
  process.stdout.write("\n");
}

if (import.meta.main) await run(main);

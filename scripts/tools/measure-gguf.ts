/**
 * llama.cpp's own verdict on ferry's GGUF files: the command line of measure/llama-score.ts.
 * Run with Bun (node-llama-cpp is a Node-API addon): `bun scripts/tools/measure-gguf.ts [--json]`.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { cli, EXIT_USAGE, fail, progress, run } from "../cli.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { DEFAULT_INPUT } from "../../formats/checkpoint/parts.ts";
import type { GgufDtype } from "../../formats/gguf/gguf.ts";
import { formatGgufTable, GGUF_DTYPES, heldOutPrompts, measureGguf } from "../../measure/llama-score.ts";
import { PRESETS } from "../../model/config.ts";
import { evalWindows, loadBrown } from "../../model/corpus.ts";
import { initParams } from "../../model/init.ts";
import { buildModel, type Model } from "../../model/qwen3.ts";

/** Where the trained model lives. */

const HELP = `
bun scripts/tools/measure-gguf.ts [options]      (or: deno run -A scripts/tools/measure-gguf.ts)

Writes a model as GGUF in every type ferry supports (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k, iq4_nl,
q4_k_m; --types picks some), loads each into llama.cpp through node-llama-cpp (CPU, one thread) and
prints one row per type. Token ids are fed as ids. Columns:
  mean KL, max KL, top-1   llama.cpp on the file vs ferry's f32 engine on the source weights,
                           next-token distributions at every position of held-out Brown windows
                           (KL(ferry || llama.cpp) in nats; top-1 = same argmax)
  max |Δp|                 largest probability difference over every position and token
  KL same wts, top-1 same  llama.cpp vs ferry's engine on the file's own (dequantized) weights:
                           what llama.cpp's kernels add on top of the file's rounding
  KL rounding              ferry on the file's weights vs ferry on the source: the file's own cost
  greedy =, prefix         prompts whose greedy continuation (past EOS) is identical to ferry f32's,
                           and the mean length of the common prefix

Options:
  --checkpoint PATH    model to measure (default ${DEFAULT_INPUT})
  --random SEED        measure a random model of the default shape instead (init std 0.5)
  --windows N          held-out windows (default 16)
  --window-bytes N     bytes per window (default 256)
  --prompts N          greedy prompts (default 8)
  --tokens N           greedy tokens per prompt (default 64)
  --types T,T,...      only these GGUF types (default: all, in the order above)
  --kv f32|f16         llama.cpp KV cache type (default f32; f16 is llama.cpp's default)
  --keep DIR           write the GGUF files to DIR and keep them
  --json               print JSON instead of a table
  -h, --help           this text
`;

if (import.meta.main) {
  const { values } = cli(HELP, {
    checkpoint: { type: "string", default: DEFAULT_INPUT },
    random: { type: "string" },
    windows: { type: "string", default: "16" },
    "window-bytes": { type: "string", default: "256" },
    prompts: { type: "string", default: "8" },
    tokens: { type: "string", default: "64" },
    kv: { type: "string", default: "f32" },
    types: { type: "string" },
    keep: { type: "string" },
    json: { type: "boolean", default: false },
  });
  await run(async () => {
    const int = (name: string, v: string) => {
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n <= 0) {
        fail(`--${name} expects a positive integer, got ${v}`, EXIT_USAGE);
      }
      return n;
    };
    if (values.kv !== "f32" && values.kv !== "f16") {
      fail(`--kv expects f32 or f16, got ${values.kv}`, EXIT_USAGE);
    }
    let model: Model, source: string;
    if (values.random !== undefined) {
      const seed = int("random", values.random);
      model = buildModel(PRESETS.default, initParams(PRESETS.default, seed, 0.5));
      source = `random default-shape model, seed ${seed}, init std 0.5`;
    } else {
      if (!existsSync(values.checkpoint)) {
        fail(`${values.checkpoint} does not exist (train it first, or pass --random SEED)`);
      }
      const ck = await readCheckpoint(values.checkpoint, { sections: ["model"] });
      model = buildModel(ck.config, ck.model, values.checkpoint);
      source = `${values.checkpoint} (step ${ck.step})`;
    }
    const { heldOut } = await loadBrown();
    const windows = evalWindows(
      heldOut,
      int("windows", values.windows),
      int("window-bytes", values["window-bytes"]),
    );
    const prompts = heldOutPrompts(heldOut, int("prompts", values.prompts));
    const types = values.types === undefined ? GGUF_DTYPES : values.types.split(",") as GgufDtype[];
    const unknown = types.find((t) => !GGUF_DTYPES.includes(t));
    if (unknown !== undefined) {
      fail(`--types: unknown GGUF type ${unknown} (expected ${GGUF_DTYPES.join(", ")})`, EXIT_USAGE);
    }
    const bar = progress("measure-gguf", types.length * 2);
    const rows = await measureGguf(model, {
      types,
      windows,
      prompts,
      tokens: int("tokens", values.tokens),
      kvCache: values.kv === "f16" ? "F16" : "F32",
      dir: values.keep,
      onStep: (what) => what.endsWith("written") || bar.tick(1, what),
    });
    bar.done();
    const setup = {
      model: source,
      llama: "node-llama-cpp 3.21.1 (llama.cpp v0.4.0 prebuilt), CPU, 1 thread",
      kvCache: values.kv,
      windows: windows.length,
      windowBytes: windows[0].length,
      prompts: prompts.length,
      tokens: int("tokens", values.tokens),
    };
    if (values.json) console.log(JSON.stringify({ setup, rows }, null, 2));
    else {
      console.log(`${setup.model}; ${setup.llama}; KV cache ${setup.kvCache}`);
      console.log(
        `${setup.windows} held-out windows of ${setup.windowBytes} bytes; ${setup.prompts} greedy prompts x ${setup.tokens} tokens\n`,
      );
      console.log(formatGgufTable(rows));
    }
  });
}

/**
 * Copies a finished training run into the repository as a shipped model: the checkpoint with its
 * `model` section only (the EMA copy and the AdamW moments are three times the weights' size and
 * nothing but a resumed run reads them), its config snapshot and its log, side by side.
 *
 * @example
 * ```ts
 * // deno run -A scripts/tools/ship-model.ts runs/ferry.ckpt model/default/ferry.ckpt
 * import { shipModel } from "./ship-model.ts";
 * await shipModel("runs/ferry.ckpt", "model/default/ferry.ckpt");
 * ```
 * @module
 */
import { copyFile, mkdir, rename } from "node:fs/promises";
import { dirname } from "node:path";
import process from "node:process";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { configPathFor, readCheckpoint, writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";

const HELP = `
Usage: deno run -A scripts/tools/ship-model.ts RUN.ckpt OUT.ckpt [--json]

Writes OUT.ckpt with RUN.ckpt's model section, step and trainer record (no EMA, no AdamW state: a
fine-tuning run starts its optimizer afresh from it), and copies RUN.config.toml and RUN.log beside it
as OUT.config.toml and OUT.log. The checkpoint is checked (CRC-32, shapes against the snapshot) before
anything is written.

  --json      print what was written as JSON
  -h, --help  this text

Exit codes: 0 written, 1 the run cannot be read, 2 usage.
`;

/** What `shipModel` wrote. */
export interface Shipped {
  checkpoint: string;
  config: string;
  log: string;
  step: number;
  params: number;
}

/** Writes `out` (model section only) and its snapshot and log from the run at `runPath`. */
export async function shipModel(runPath: string, out: string): Promise<Shipped> {
  const run = await readCheckpoint(runPath, { sections: ["model"] });
  const config = configPathFor(out), log = out.replace(/\.ckpt$/, "") + ".log";
  const runLog = runPath.replace(/\.ckpt$/, "") + ".log";
  await mkdir(dirname(out), { recursive: true });
  // The log first, under a temporary name: a failed copy leaves no half-shipped model behind.
  await copyFile(runLog, `${log}.partial`);
  await writeCheckpoint(out, run.config, { step: run.step, model: run.model, trainer: run.trainer });
  await rename(`${log}.partial`, log);
  const params = run.model.reduce((n, t) => n + t.data.length, 0);
  return { checkpoint: out, config, log, step: run.step, params };
}

if (import.meta.main) {
  const { values, positionals } = cli(HELP, { json: { type: "boolean", default: false } });
  if (positionals.length !== 2) fail(`expected RUN.ckpt and OUT.ckpt\n(--help for more)`, EXIT_USAGE);
  const [runPath, out] = positionals;
  if (!out.endsWith(".ckpt")) fail(`${out}: the shipped checkpoint's name must end in .ckpt`, EXIT_USAGE);
  await run(async () => {
    const shipped = await shipModel(runPath, out);
    if (values.json) console.log(JSON.stringify(shipped));
    else {
      process.stdout.write(
        `shipped ${runPath}@step${shipped.step} (${shipped.params.toLocaleString("en")} params) as ` +
          `${shipped.checkpoint}, ${shipped.config}, ${shipped.log}\n`,
      );
    }
  });
}

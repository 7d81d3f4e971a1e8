/**
 * What one sampled draw costs beside a greedy pick, at a real vocabulary (151,936 ids, Qwen3's), on
 * both samplers: the integer engine's (engines/int/sampler.ts `sample` against `greedy`) and the float
 * and WebGPU engines' (model/sample.ts `pickToken` against its temperature-0 argmax). Seeded random
 * logits of two shapes: "spread" (normal, 3 nats: a trained model's spread) and "flat" (0.05 nats: a
 * random-weight model's, where nearly every id survives every cut). Rounds interleave every option
 * set on both samplers; the figures are medians. A benchmark, not a test: figures from a shared
 * machine are noisy.
 *
 * `--model FILE` times whole decoded tokens instead, on the engine the file loads on (`--engine`):
 * per round, each option set decodes `--tokens` tokens after the same prompt in a fresh session, and
 * the report gives each set's token time, its picks' share of a greedy token's time, and its decode
 * rate ÷ greedy's, the sets interleaved within each round.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-sampling.ts
 * // deno run -A scripts/tools/bench-sampling.ts --rounds 5 --json
 * // bun scripts/tools/bench-sampling.ts --model m.dmexp --threads 2 --rounds 5
 * ```
 * @module
 */
import { resolve } from "node:path";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { ENGINE_FLAGS, ENGINE_FLAGS_HELP, engineFlags } from "../engine-flags.ts";
import { loadEngine } from "../../engines/mod.ts";
import { toIntSampling } from "../../engines/int/engine.ts";
import { greedy, sample, SAMPLE_KERNEL_ROOM, samplerScratch, seedRng } from "../../engines/int/sampler.ts";
import { createSampleKernel } from "../../kernels/wasm/int-sample.ts";
import { TABLES } from "../../quantize/lut4-quantize.ts";
import { prepareTable } from "../../kernels/int/tables.ts";
import type { SamplingOptions } from "../../model/engine.ts";
import { createRng } from "../../model/random.ts";
import { pickToken } from "../../model/sample.ts";
import { checkSampling } from "../../model/sampling.ts";

const HELP = `
Time one sampled draw against one greedy pick on the integer and the float sampler, at a real vocabulary.

Usage: bun scripts/tools/bench-sampling.ts [--vocab N] [--rounds N] [--against DIR,...] [--json]
       bun scripts/tools/bench-sampling.ts --model FILE [--engine KIND] [--tokens N] [--rounds N] [--json]

Options:
  --vocab N           ids in a row of logits (default 151936, Qwen3's vocabulary)
  --against DIR,...   also time the integer sampler of these checkouts (each a folder holding another
                      commit of ferry, e.g. from git archive), interleaved in the same rounds
  --rounds N          interleaved rounds; each round times every option set (default 9; 3 with --model)
  --model FILE        time decoded tokens on this export instead: each set's token time, its picks'
                      share of a greedy token, and its decode rate ÷ greedy's
  --engine KIND       the engine for --model (default: the file's own)
  --tokens N          tokens decoded per set and round with --model (default 32)
${ENGINE_FLAGS_HELP}
  --json              print the figures as JSON
  -h, --help          this text
`;

/** The option sets timed: OpenAI's client defaults, the chat page's, and the ones the tests pin. */
const SETS: Array<[name: string, options: SamplingOptions]> = [
  ["greedy", {}],
  ["temperature 1", { temperature: 1 }],
  ["page: t 0.8, top-k 40, min-p 0.05", { temperature: 0.8, topK: 40, minP: 0.05 }],
  ["top-p 0.95", { temperature: 1, topP: 0.95 }],
  ["top-k 1", { temperature: 1, topK: 1 }],
  ["min-p 1", { temperature: 1, minP: 1 }],
  ["t 0.7, top-k 50, top-p 0.9", { temperature: 0.7, topK: 50, topP: 0.9 }],
];

/** Seeded logits with a normal-like spread of `sd` nats (a sum of four uniforms; no transcendentals). */
function logits(n: number, sd: number, seed: number): Float32Array {
  const r = createRng(seed), out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (r.next() + r.next() + r.next() + r.next() - 2) * 1.7320508 * sd;
  return out;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

/** Milliseconds per call of `f`, timed over enough calls to take about 20 ms. */
function timeOne(f: () => unknown): number {
  let calls = 1;
  for (;;) {
    const t = performance.now();
    for (let i = 0; i < calls; i++) f();
    const ms = performance.now() - t;
    if (ms >= 20 || calls >= 4096) return ms / calls;
    calls *= ms < 1 ? 16 : 2;
  }
}

/**
 * `--model`: per round, each option set in turn decodes `tokens` tokens after the same prompt in a
 * fresh session; the time of each feed and each pick is summed. Medians over the rounds.
 */
async function decodeBench(
  path: string,
  kind: string | undefined,
  options: { threads?: number; context?: number },
  tokens: number,
  rounds: number,
): Promise<void> {
  const engine = await loadEngine(path, kind, options);
  const prompt = engine.tokenizer!.encode("The jury said that the city's election was", { bos: true });
  const times = SETS.map(() => ({ token: [] as number[], pick: [] as number[] }));
  for (let r = 0; r < rounds; r++) {
    for (const [i, [, o]] of SETS.entries()) {
      const session = engine.start();
      session.seed(r + 1);
      await session.feed(prompt, "none");
      let pickMs = 0, next = 0;
      const start = performance.now();
      for (let t = 0; t < tokens; t++) {
        const p = performance.now();
        next = session.pick(o);
        pickMs += performance.now() - p;
        await session.feed([next], "none");
      }
      times[i].token.push((performance.now() - start) / tokens);
      times[i].pick.push(pickMs / tokens);
    }
  }
  engine.dispose?.();
  const greedy = median(times[0].token);
  const sets = SETS.map(([name], i) => ({
    name,
    token_ms: +median(times[i].token).toFixed(2),
    pick_ms: +median(times[i].pick).toFixed(3),
    pick_share_of_greedy: +(median(times[i].pick) / greedy).toFixed(4),
    rate_x_greedy: +(greedy / median(times[i].token)).toFixed(3),
  }));
  const runtime = "Bun" in globalThis ? "bun" : "deno";
  const report = {
    runtime,
    model: path,
    engine: engine.kind,
    threads: options.threads,
    tokens,
    rounds,
    sets,
  };
  if (json) return console.log(JSON.stringify(report));
  console.log(
    `${runtime}, ${path} on the ${engine.kind} engine, ${tokens} tokens a set, ${rounds} rounds, medians`,
  );
  console.log(`  ${"options".padEnd(34)} token ms   pick ms   pick ÷ greedy token   rate ÷ greedy`);
  for (const r of sets) {
    console.log(
      `  ${r.name.padEnd(34)} ${r.token_ms.toFixed(2).padStart(8)} ${r.pick_ms.toFixed(3).padStart(9)} ` +
        `${(100 * r.pick_share_of_greedy).toFixed(2).padStart(20)}% ${
          r.rate_x_greedy.toFixed(3).padStart(15)
        }`,
    );
  }
}

let json = false;

/**
 * The integer sampler of another checkout (`--against`): its draw on `q` with its own scratch and
 * WebAssembly pass, seeded as this one's. Its modules are imported from `dir` as they are there.
 */
async function otherSampler(dir: string) {
  const root = new URL(`${resolve(dir)}/`, "file://");
  const m = await import(new URL("engines/int/sampler.ts", root).href);
  const k = await import(new URL("kernels/wasm/int-sample.ts", root).href);
  return {
    dir,
    draws(q: Int32Array, exp: ReturnType<typeof prepareTable>) {
      const kernel = k.createSampleKernel(q.length, m.SAMPLE_KERNEL_ROOM.divLen, exp.t.length) ?? undefined;
      const scratch = m.samplerScratch(q.length, exp, undefined, kernel), rng = new Int32Array(2);
      m.seedRng(rng, 0, 1);
      return (io: ReturnType<typeof toIntSampling>): number =>
        io.tempQ16 > 0 ? m.sample(q, io, rng, scratch) : m.greedy(q, scratch.never);
    },
  };
}

async function main(): Promise<void> {
  const { values } = cli(HELP, {
    vocab: { type: "string", default: "151936" },
    rounds: { type: "string" },
    model: { type: "string" },
    engine: { type: "string" },
    tokens: { type: "string", default: "32" },
    ...ENGINE_FLAGS,
    against: { type: "string" },
    json: { type: "boolean", default: false },
  });
  json = values.json === true;
  const vocab = Number(values.vocab), rounds = Number(values.rounds ?? (values.model ? 3 : 9));
  if (!Number.isInteger(vocab) || vocab < 2 || vocab > 1 << 24) {
    fail(`--vocab ${values.vocab}: expected an integer in [2, 2^24]`, EXIT_USAGE);
  }
  if (!Number.isInteger(rounds) || rounds < 1) {
    fail(`--rounds ${values.rounds}: expected an integer >= 1`, EXIT_USAGE);
  }
  if (values.model !== undefined) {
    const tokens = Number(values.tokens);
    if (!Number.isInteger(tokens) || tokens < 1) {
      fail(`--tokens ${values.tokens}: expected an integer >= 1`, EXIT_USAGE);
    }
    return await decodeBench(values.model, values.engine, engineFlags(values), tokens, rounds);
  }
  const against = await Promise.all((values.against?.split(",") ?? []).map(otherSampler));
  // The exp table every lut4 file holds (quantize/lut4-quantize.ts `makeTables`).
  const expLen = TABLES.expRangeNats * 256 + 2, t = new Int32Array(expLen);
  for (let i = 0; i < expLen; i++) t[i] = Math.round(2 ** TABLES.expQ * Math.exp(-i / 256));
  const exp = prepareTable(t, 0);
  const shapes = [["spread", 3], ["flat", 0.05]] as const;
  const results = shapes.map(([shape, sd]) => {
    const f = logits(vocab, sd, 7), q = Int32Array.from(f, (v) => Math.round(v * 65536));
    // As the integer engine makes it: the pass over the vocabulary in WebAssembly.
    const kernel = createSampleKernel(vocab, SAMPLE_KERNEL_ROOM.divLen, exp.t.length) ?? undefined;
    const scratch = samplerScratch(vocab, exp, undefined, kernel),
      rng = new Int32Array(2),
      frng = createRng(1);
    seedRng(rng, 0, 1);
    const others = against.map((m) => m.draws(q, exp));
    const runs = SETS.map(([, o]) => {
      const io = toIntSampling(o), fo = checkSampling(o);
      return {
        int: o.temperature ? () => sample(q, io, rng, scratch) : () => greedy(q, scratch.never),
        float: () => pickToken(f, 0, vocab, fo, frng),
        others: others.map((draw) => () => draw(io)),
      };
    });
    const ms = SETS.map(() => ({
      int: [] as number[],
      float: [] as number[],
      others: others.map(() => [] as number[]),
    }));
    for (let r = 0; r < rounds; r++) {
      for (const [i, run] of runs.entries()) {
        ms[i].int.push(timeOne(run.int));
        ms[i].float.push(timeOne(run.float));
        run.others.forEach((f, k) => ms[i].others[k].push(timeOne(f)));
      }
    }
    const greedyInt = median(ms[0].int), greedyFloat = median(ms[0].float);
    return {
      shape,
      sd_nats: sd,
      sets: SETS.map(([name], i) => ({
        name,
        int_ms: +median(ms[i].int).toFixed(4),
        int_x_greedy: +(median(ms[i].int) / greedyInt).toFixed(1),
        float_ms: +median(ms[i].float).toFixed(4),
        float_x_greedy: +(median(ms[i].float) / greedyFloat).toFixed(1),
        against: against.map(({ dir }, k) => ({
          dir,
          int_ms: +median(ms[i].others[k]).toFixed(4),
          this_x_that: +(median(ms[i].int) / median(ms[i].others[k])).toFixed(3),
        })),
      })),
    };
  });
  const report = { runtime: "Bun" in globalThis ? "bun" : "deno", vocab, rounds, shapes: results };
  if (json) return console.log(JSON.stringify(report));
  console.log(
    `${report.runtime}, vocab ${vocab}, ${rounds} rounds, medians; x: ÷ the same sampler's greedy pick`,
  );
  for (const s of results) {
    console.log(`\nlogits ${s.shape} (${s.sd_nats} nats)          int ms        x   float ms        x`);
    for (const r of s.sets) {
      console.log(
        `  ${r.name.padEnd(34)} ${r.int_ms.toFixed(3).padStart(8)} ${String(r.int_x_greedy).padStart(8)} ` +
          `${r.float_ms.toFixed(3).padStart(10)} ${String(r.float_x_greedy).padStart(8)}` +
          r.against.map((a) => `   ${a.dir}: int ${a.int_ms.toFixed(3)} ms, this ÷ that ${a.this_x_that}`)
            .join(""),
      );
    }
  }
}

if (import.meta.main) await run(main);

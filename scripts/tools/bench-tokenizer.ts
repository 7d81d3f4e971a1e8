/**
 * How fast ferry's Hugging Face tokenizer (model/hf-tokenizer.ts over `@huggingface/tokenizers`) builds,
 * encodes and decodes on Qwen3's real tokenizer, over Brown corpus text (the first N documents). A
 * benchmark, not a test: figures from a shared machine are noisy.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-tokenizer.ts --docs 40
 * // deno run -A scripts/tools/bench-tokenizer.ts --json
 * ```
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { cli, EXIT_USAGE, fail, run } from "../cli.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { brownDir } from "../../model/corpus.ts";

const HELP = `
Time ferry's Hugging Face tokenizer on Qwen3's real tokenizer files over Brown corpus text.

Usage: bun scripts/tools/bench-tokenizer.ts [--docs N] [--dir DIR] [--json]

Options:
  --docs N    how many Brown documents to encode (default 40, about 0.4 MB)
  --dir DIR   the tokenizer folder (default tests/fixtures/qwen3-tokenizer, the pinned Qwen3 files)
  --json      print the figures as JSON
  -h, --help  this text
`;

function main(): void {
  const { values } = cli(HELP, {
    docs: { type: "string", default: "40" },
    dir: { type: "string", default: "tests/fixtures/qwen3-tokenizer" },
    json: { type: "boolean", default: false },
  });
  const docs = Number(values.docs);
  if (!Number.isInteger(docs) || docs < 1) {
    fail(`--docs ${values.docs}: expected an integer >= 1`, EXIT_USAGE);
  }
  const read = (name: string) => readFileSync(join(values.dir!, name), "utf8");
  let t = performance.now();
  const tok = loadTokenizer({
    "tokenizer.json": read("tokenizer.json"),
    "tokenizer_config.json": read("tokenizer_config.json"),
  }, values.dir!);
  const buildMs = performance.now() - t;
  const names = readdirSync(brownDir()).filter((n) => /^c[a-r]\d\d$/.test(n)).sort().slice(0, docs);
  const text = names.map((n) => readFileSync(join(brownDir(), n), "utf8")).join("\n\n");
  const bytes = new TextEncoder().encode(text).length;
  t = performance.now();
  const ids = tok.encode(text);
  const encodeMs = performance.now() - t;
  t = performance.now();
  const back = tok.decode(ids);
  const decodeMs = performance.now() - t;
  t = performance.now();
  const stream = tok.streamDecoder();
  let streamed = 0;
  for (const id of ids) streamed += stream(id).length;
  const streamMs = performance.now() - t;
  const r = {
    runtime: "Bun" in globalThis ? "bun" : "deno",
    build_ms: Math.round(buildMs),
    bytes,
    tokens: ids.length,
    encode_mb_s: +(bytes / 1e3 / encodeMs).toFixed(2),
    decode_mb_s: +(bytes / 1e3 / decodeMs).toFixed(2),
    stream_tokens_per_ms: +(ids.length / streamMs).toFixed(0),
    round_trip: back === text.normalize("NFC") && streamed === back.length,
  };
  if (values.json) console.log(JSON.stringify(r));
  else {
    console.log(`${r.runtime}: built in ${r.build_ms} ms; ${bytes} bytes -> ${ids.length} tokens`);
    console.log(
      `encode ${r.encode_mb_s} MB/s, decode ${r.decode_mb_s} MB/s, stream ${r.stream_tokens_per_ms} tokens/ms`,
    );
    console.log(`round trip: ${r.round_trip ? "exact" : "DIFFERS"}`);
  }
}

if (import.meta.main) await run(main);

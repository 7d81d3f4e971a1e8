/**
 * llama.cpp as a client for tests and measurement, through node-llama-cpp (pinned 3.21.1) on CPU with
 * one thread: load a GGUF, read its next-token distribution at every position of a sequence of token
 * ids, decode greedily from ids, and tokenize text. Token ids go in as ids, so llama.cpp's tokenizer cannot
 * confound a comparison of the maths.
 *
 * Runs under Bun (and Node); node-llama-cpp is a Node-API addon and uses only its prebuilt
 * `@node-llama-cpp/linux-x64` binary here (`build: "never"`), never a download. It is one of
 * package.json's optionalDependencies, installed by `bun test` / `npm ci` but not by `deno run`;
 * package.json's overrides keep its GPU and ARM builds out of node_modules.
 *
 * @example
 * ```ts
 * import { openLlamaGguf } from "./llama-cpp.ts";
 * const lm = await openLlamaGguf("out/model.f32.gguf");
 * const probs = await lm.nextTokenProbs([256, 72, 105]); // 3 rows of vocab probabilities
 * const ids = await lm.greedy([256, 72, 105], 64);
 * await lm.close();
 * ```
 * @module
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

// The part of node-llama-cpp 3.21.1's API that ferry calls, declared here rather than imported from the
// package: it is an optional dependency that `deno run` does not install, and `deno check` refuses even a
// type-only import of a package outside the install set. Names follow node-llama-cpp's declarations; its
// branded `Token` is a plain number here.

/** What ferry uses of the node-llama-cpp module. */
interface NodeLlamaCpp {
  getLlama(options: {
    gpu: false;
    build: "never";
    maxThreads: number;
    logLevel: string;
    progressLogs: boolean;
  }): Promise<Llama>;
  LlamaLogLevel: { readonly error: string };
}

/** A loaded llama.cpp binding. */
export interface Llama {
  loadModel(options: { modelPath: string; gpuLayers: number }): Promise<LlamaModel>;
}

/** A GGUF model loaded into llama.cpp. */
export interface LlamaModel {
  createContext(options: {
    contextSize: number;
    batchSize: number;
    threads: number;
    sequences: number;
    flashAttention: boolean;
    experimentalKvCacheKeyType: "F32" | "F16";
    experimentalKvCacheValueType: "F32" | "F16";
  }): Promise<LlamaContext>;
  readonly fileInfo: { metadata: { tokenizer?: { ggml?: { tokens?: readonly string[] } } } };
  readonly tokens: { readonly bos: number | null; readonly eos: number | null };
  tokenize(text: string, specialTokens?: boolean): number[];
  detokenize(tokens: readonly number[]): string;
  dispose(): Promise<void>;
}

/** A context (KV cache) of a model. */
export interface LlamaContext {
  getSequence(): LlamaContextSequence;
  dispose(): Promise<void>;
}

/** One sequence of a context. */
export interface LlamaContextSequence {
  clearHistory(): Promise<void>;
  /** One output per input item that asked for one (a sparse array). */
  controlledEvaluate(
    input: [token: number, options: { generateNext: { probabilities: true } }][],
  ): Promise<Array<{ next?: { probabilities?: Map<number, number> } } | undefined>>;
  evaluate(
    tokens: number[],
    options: { temperature: number; yieldEogToken: boolean },
  ): AsyncGenerator<number>;
  evaluateWithoutGeneratingNewTokens(tokens: number[]): Promise<void>;
}

/**
 * node-llama-cpp itself. It is an optional dependency that `deno run` does not install, and Deno
 * refuses a bare import of a package outside its install set, so the package is found by Node's
 * resolution in node_modules (where `bun test` and `npm ci` put it) and imported by path: the same
 * module under Bun and Deno.
 */
async function nodeLlamaCpp(): Promise<NodeLlamaCpp> {
  let path: string;
  try {
    path = createRequire(import.meta.url).resolve("node-llama-cpp");
  } catch {
    throw new Error(
      "node-llama-cpp is not installed: run `bun install` or `npm ci` (`deno run` leaves it out)",
    );
  }
  return await import(pathToFileURL(path).href);
}

let shared: Promise<Llama> | undefined;

/**
 * The one CPU llama.cpp instance of this process, warnings only, at most `maxThreads` threads (1 unless
 * the first call asks for more: the instance is made once, by the first call).
 */
export function cpuLlama(maxThreads = 1): Promise<Llama> {
  shared ??= nodeLlamaCpp().then(({ getLlama, LlamaLogLevel }) =>
    getLlama({
      gpu: false,
      build: "never",
      maxThreads,
      logLevel: LlamaLogLevel.error,
      progressLogs: false,
    })
  );
  return shared;
}

/** Options of `openLlamaGguf`. */
export interface LlamaGgufOptions {
  /**
   * KV cache element type. "F32" (the default here) keeps the F32 file an f32 computation end to
   * end; "F16" is llama.cpp's own default, as a user running the file would get.
   */
  kvCache?: "F32" | "F16";
  /** Context size in tokens (default 512; llama.cpp rounds it up to a multiple of 256). */
  contextSize?: number;
  /** Threads the context computes with (default 1; the process's instance must allow as many). */
  threads?: number;
}

/** A GGUF loaded into llama.cpp. */
export interface LlamaGguf {
  vocab: number;
  /** Token ids of BOS and EOS as llama.cpp reads them from the file. */
  bos: number | null;
  eos: number | null;
  /**
   * For each position of `ids` (fed from an empty context), llama.cpp's probability of every token
   * being next: row t is the softmax of the logits after ids[0..t], `vocab` values per row.
   */
  nextTokenProbs(ids: number[]): Promise<Float64Array[]>;
  /** The `n` tokens llama.cpp picks greedily (temperature 0) after `prompt`, EOS included if chosen. */
  greedy(prompt: number[], n: number): Promise<number[]>;
  /** llama.cpp's tokenization of plain text, no BOS added, special-token text not parsed. */
  tokenize(text: string): number[];
  detokenize(ids: number[]): string;
  close(): Promise<void>;
}

/** Loads a GGUF file into llama.cpp on the CPU, one thread unless `opts.threads` says more. */
export async function openLlamaGguf(path: string, opts: LlamaGgufOptions = {}): Promise<LlamaGguf> {
  const llama = await cpuLlama(opts.threads ?? 1);
  const model = await llama.loadModel({ modelPath: path, gpuLayers: 0 });
  const kv = opts.kvCache ?? "F32";
  const context = await model.createContext({
    contextSize: opts.contextSize ?? 512,
    batchSize: opts.contextSize ?? 512,
    threads: opts.threads ?? 1,
    sequences: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: kv,
    experimentalKvCacheValueType: kv,
  });
  const seq = context.getSequence();
  const vocab = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
  return {
    vocab,
    bos: model.tokens.bos,
    eos: model.tokens.eos,
    async nextTokenProbs(ids) {
      await seq.clearHistory();
      const res = await seq.controlledEvaluate(
        ids.map((t) => [t, { generateNext: { probabilities: true } }]),
      );
      return res.map((r, t) => {
        const probs = r?.next?.probabilities;
        if (!probs) throw new Error(`${path}: llama.cpp gave no probabilities at position ${t}`);
        const row = new Float64Array(vocab);
        for (const [id, p] of probs) row[id] = p;
        return row;
      });
    },
    async greedy(prompt, n) {
      await seq.clearHistory();
      const out: number[] = [];
      if (n <= 0) return out;
      for await (const t of seq.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
        out.push(t);
        if (out.length >= n) break;
      }
      return out;
    },
    tokenize: (text) => model.tokenize(text, false),
    detokenize: (ids) => model.detokenize(ids),
    async close() {
      await context.dispose();
      await model.dispose();
    },
  };
}

/**
 * The engine table and the loader: reader -> tensors -> engine. `ENGINES` is the one registry of
 * engines: each entry names the runtimes it runs on and a factory that builds it from an export, its
 * module imported lazily, so an engine's code (the WebGPU one needs Deno) is loaded only when that
 * engine is asked for. A new engine is one module and one line in `ENGINES`. Which engine runs a
 * format's files by default follows from what the format stores (`FormatDescriptor.weights`), in one
 * table, `DEFAULT_ENGINE`: formats and engines never name each other.
 *
 * @example
 * ```ts
 * import { loadEngine } from "./mod.ts";
 * const engine = await loadEngine("out/ferry.bf16.dmexp");          // float weights: the float engine
 * const int = await loadEngine("out/ferry.bf16.dmexp", "int", {      // any export on any engine
 *   onNote: (line) => console.error(line),                           // "quantized ... to lut4 on load ..."
 * });
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Engine, WeightsShare } from "../model/engine.ts";
import type { Tensor } from "../model/tensor.ts";
import { FormatError } from "../model/error.ts";
import type { Kernels } from "../kernels/kernels.ts";
import { CheckpointError, isCheckpointFile } from "../formats/checkpoint/checkpoint.ts";
import { formatOf } from "../formats/mod.ts";
import type { FormatDescriptor } from "../formats/format.ts";
import { type SpecialIds, specialIds } from "../model/sample.ts";
import { loadTokenizer } from "../model/hf-tokenizer.ts";
import { tableTokenizer, type TokenTable } from "../model/token-table.ts";
import type { Tokenizer, TokenizerFiles } from "../model/tokenizer-types.ts";
import { byteTokenizer } from "../model/tokenizer.ts";

/** What a factory is told besides the path: progress, where to send notes, the float kernels. */
export interface EngineLoadOptions {
  /** Progress while the export is read. */
  onProgress?: (done: number, total: number) => void;
  /**
   * One line for the user (a CLI prints it on stderr) when loading did more than read the file, e.g.
   * `quantized out/ferry.bf16.dmexp to lut4 on load (as export --format lut4 would)`.
   */
  onNote?: (line: string) => void;
  /** The kernel set of an engine that runs on kernels/kernels.ts (the float engine; `--kernels`). */
  kernels?: Kernels;
  /**
   * Threads one generation's products run on, the caller's included (`--threads`; default: the
   * machine's cores). The results are the same bits on any number.
   */
  threads?: number;
  /**
   * Positions a session's KV cache is allocated for (`--context`; default min(max_position_embeddings,
   * 4096)); feeding past it is refused.
   */
  context?: number;
  /**
   * The special ids of the model's own tokenizer, which the engine's sampler never picks (model/sample.ts
   * `neverSampled`); undefined for a byte model. `loadEngine` sets it from the tokenizer it reads: a
   * promise while that tokenizer is still on its way (`tokens`), which a factory awaits only once it
   * needs the ids, after reading the file where it can.
   */
  specials?: SpecialIds | Promise<SpecialIds | undefined>;
  /**
   * Tokenizer files to use instead of the ones the export carries (`chat --tokenizer DIR` for an export
   * without them; a server's slot workers get their server's).
   */
  tokenizer?: TokenizerFiles;
  /**
   * The tokenizer's decoding half instead of its files (model/token-table.ts): a chat server's slot
   * worker, which never encodes, gets it from the server's thread rather than building the tokenizer.
   * A promise lets the load begin before the table exists (the server's first slot reads its model
   * while the server builds the tokenizer); one that resolves to undefined stands for the byte tokenizer
   * (the server's own was).
   */
  tokens?: TokenTable | Promise<TokenTable | undefined>;
  /**
   * One copy of the weights for `count` engines of this file (a chat server's slots, each in its own
   * worker): engine `slot` 0 lays them out in shared memory (its `Engine.shareable`), each other one
   * is handed that as `weights` and only attaches. The integer engine shares its codes and scales,
   * the float engine its packed matrices and norm vectors (reading no file to attach). Engines that
   * cannot share (the WebGPU one, the float one on kernels other than WebAssembly's or without shared
   * memory, the integer one without WebAssembly SIMD or past 4 GiB) ignore it and load a copy.
   */
  share?: WeightsShare;
  /**
   * Set by `loadEngine` for an engine whose entry `readsTokenizer` from this format: the factory builds
   * the export's own tokenizer in the same pass as its weights, masks its special ids and sets it as
   * `engine.tokenizer`.
   */
  withTokenizer?: boolean;
}

/**
 * Builds one kind of engine from an export. The factory reads the file itself (through `format`, or
 * its own reader when the engine runs a format's bytes directly) and refuses a format it cannot run
 * with a `FormatError`.
 */
export type EngineFactory = (
  path: string,
  format: FormatDescriptor,
  options: EngineLoadOptions,
) => Promise<Engine>;

/** A JavaScript runtime ferry runs on. */
export type Runtime = "deno" | "bun";

/** One engine of the table. */
export interface EngineEntry {
  /** The runtimes it runs on; tests/engines/engine.test.ts loads it on the shipped model on each one it claims. */
  runtimes: readonly Runtime[];
  /** Why it does not run on the other runtimes (absent when it runs on all). */
  elsewhere?: string;
  /** Its factory, its module imported only now. */
  factory: () => Promise<EngineFactory>;
  /**
   * True for a format whose own tokenizer the factory reads with the weights (`withTokenizer`), so that
   * `loadEngine` does not read the file a second time for it.
   */
  readsTokenizer?: (format: FormatDescriptor) => boolean;
}

/**
 * The factory of an engine built from a config and named f32 tensors (the float and WebGPU engines):
 * the export is read through its format's full reader, then handed over. Such an engine's module needs
 * to know nothing of formats (model/ and kernels/ may not import formats/).
 */
export function fromTensors(
  create: (
    config: ModelConfig,
    tensors: Tensor[],
    source: string,
    options: EngineLoadOptions,
  ) => Engine | Promise<Engine>,
): EngineFactory {
  return async (path, format, options) => {
    const { config, tensors } = await format.read(path, options);
    return await create(config, tensors, path, options);
  };
}

/** Every engine, by kind; each loads its module only when used (WebGPU code never loads under Bun). */
export const ENGINES: Readonly<Record<string, EngineEntry>> = {
  // The tensors were just read from the file for this engine alone: frozen.
  // A file its format can open for streaming is packed as it is read, never held whole in f32.
  // Given another engine's shared weights, the file is not read at all: they hold everything.
  float: {
    runtimes: ["deno", "bun"],
    factory: async () => {
      const { attachFloatEngine, createFloatEngine, createFloatEngineFromSources } = await import(
        "./float.ts"
      );
      const whole = fromTensors(async (
        config,
        tensors,
        source,
        { kernels, specials, threads, context, share },
      ) =>
        createFloatEngine(config, tensors, source, {
          frozen: true,
          kernels,
          specials: await specials,
          threads,
          context,
          share,
        })
      );
      return async (path, format, options) => {
        const { kernels, threads, context, share, onProgress } = options;
        const specials = await options.specials;
        const frozen = { frozen: true, kernels, specials, threads, context, share };
        if (share?.weights !== undefined) return attachFloatEngine(share.weights, path, frozen);
        if (!format.open) return await whole(path, format, options);
        const m = await format.open(path, { onProgress });
        try {
          return await createFloatEngineFromSources(m.config, m.sources, path, frozen);
        } finally {
          await m.close();
        }
      };
    },
  },
  int: {
    runtimes: ["deno", "bun"],
    factory: async () => (await import("./int/engine.ts")).intEngineFactory,
    readsTokenizer: (format) => format.weights === "lut4",
  },
  webgpu: {
    runtimes: ["deno"],
    elsewhere: "Bun has no WebGPU",
    factory: async () => (await import("./webgpu.ts")).loadWebGpuEngine,
  },
};

/** The engine that runs a format's files unless `--engine` says otherwise, by what the format stores. */
export const DEFAULT_ENGINE: Readonly<Record<FormatDescriptor["weights"], string>> = {
  float: "float",
  lut4: "int",
};

/** The kinds `--engine` accepts. */
export function engineKinds(): string[] {
  return Object.keys(ENGINES);
}

/**
 * Loads an export on an engine: the format is recognised from the path, the engine is `kind` or else
 * the one `DEFAULT_ENGINE` names for what the format stores. Any export runs on any engine (the
 * integer engine quantizes float weights on load, and says so through `onNote`). The tokenizer the
 * export carries (the format's `readTokenizer`; none: the byte tokenizer) becomes `engine.tokenizer`,
 * and its special ids the sampler's mask. A training checkpoint, an unknown path, an unknown engine
 * and a tokenizer with more ids than the model's vocab are refused with a `FormatError` that says which.
 *
 * @example
 * ```ts
 * import { loadEngine } from "./mod.ts";
 * const engine = await loadEngine("out/ferry.f16.gguf", "float");
 * const logits = await engine.start().feed([256, 84, 104, 101]);
 * ```
 */
export async function loadEngine(
  path: string,
  kind?: string,
  options: EngineLoadOptions = {},
): Promise<Engine> {
  if (await isCheckpointFile(path)) {
    throw new CheckpointError(
      path,
      "NotAnExport",
      "magic",
      "a training checkpoint, not an export: export it first",
    );
  }
  const format = formatOf(path);
  const name = kind ?? DEFAULT_ENGINE[format.weights];
  if (!Object.hasOwn(ENGINES, name)) {
    const known = engineKinds().join(", ");
    throw new FormatError(
      path,
      "UnknownEngine",
      "engine",
      `${path}: engine: unknown engine ${name} (known: ${known})`,
      {
        expected: known,
        found: name,
      },
    );
  }
  const given = options.tokens !== undefined || options.tokenizer !== undefined;
  const withTokenizer = !given && ENGINES[name].readsTokenizer?.(format) === true;
  // A table is taken as it comes, maybe later: the factory awaits the special ids only when it needs them.
  const read: Promise<Tokenizer> | undefined = withTokenizer
    ? undefined
    : options.tokens
    ? Promise.resolve(options.tokens).then((table) => table ? tableTokenizer(table, path) : byteTokenizer)
    : Promise.resolve((await servedTokenizer(path, options.tokenizer)).tokenizer);
  read?.catch(() => {}); // a failed load reports its own error; otherwise `read` is awaited below
  const factory = await ENGINES[name].factory();
  const specials = read?.then((t) => t.kind === "byte" ? undefined : specialIds(t));
  specials?.catch(() => {});
  const engine = await factory(path, format, { ...options, specials, withTokenizer });
  const tokenizer = read
    ? await read.catch((e) => (engine.dispose?.(), Promise.reject(e)))
    : engine.tokenizer;
  if (tokenizer.size > engine.config.vocab_size) {
    engine.dispose?.();
    throw new FormatError(
      path,
      "VocabMismatch",
      "vocab_size",
      `${path}: vocab_size: the tokenizer has ${tokenizer.size} ids, more than the model's ${engine.config.vocab_size}`,
      { expected: `at least ${tokenizer.size}`, found: String(engine.config.vocab_size) },
    );
  }
  return Object.assign(engine, { tokenizer });
}

/**
 * The tokenizer an export runs with: built from `files` where given (`--tokenizer`), else from the
 * files the export carries, else ferry's byte tokenizer (`files` then undefined). What `loadEngine`
 * sets as `engine.tokenizer`; the chat server builds it on its own thread, whose model is in its slots.
 *
 * @example
 * ```ts
 * import { servedTokenizer } from "./mod.ts";
 * const { tokenizer } = await servedTokenizer("out/ferry.q4.lut4");
 * tokenizer.encode("The jury", { bos: true });
 * ```
 */
export async function servedTokenizer(
  path: string,
  files?: TokenizerFiles,
): Promise<{ files?: TokenizerFiles; tokenizer: Tokenizer }> {
  const read = files ?? await formatOf(path).readTokenizer?.(path);
  return { files: read, tokenizer: loadTokenizer(read, path) };
}

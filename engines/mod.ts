/**
 * The engine table and the loader: reader -> tensors -> engine. `ENGINES` maps an engine's kind to
 * a factory that builds it from an export; each factory is imported lazily, so an engine's code (the
 * WebGPU one needs Deno) is loaded only when that engine is asked for. A new engine is one module and
 * one line in `ENGINES`.
 *
 * @example
 * ```ts
 * const engine = await loadEngine("out/ferry.bf16.dmexp");          // the format's natural engine
 * const gpu = await loadEngine("out/ferry.bf16.dmexp", "webgpu");   // another, once it is in the table
 * ```
 * @module
 */
import type { ModelConfig } from "../model/config.ts";
import type { Engine } from "../model/engine.ts";
import type { Tensor } from "../model/tensor.ts";
import { FormatError } from "../model/error.ts";
import { CheckpointError, isCheckpointFile } from "../formats/checkpoint.ts";
import { formatOf } from "../formats/mod.ts";
import type { FormatDescriptor } from "../formats/format.ts";
import type { Kernels } from "../kernels/kernels.ts";

/** Options of a factory: progress while the export is read, and the float kernels. */
export interface EngineLoadOptions {
  onProgress?: (done: number, total: number) => void;
  /** The kernel set of an engine that runs on kernels/kernels.ts (the float engine; `--kernels`). */
  kernels?: Kernels;
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
export const ENGINES: Readonly<Record<string, () => Promise<EngineFactory>>> = {
  // The tensors were just read from the file for this engine alone: frozen.
  float: async () => {
    const { createFloatEngine } = await import("./float.ts");
    return fromTensors((config, tensors, source, { kernels }) =>
      createFloatEngine(config, tensors, source, { frozen: true, kernels })
    );
  },
  int: async () => (await import("./int/engine.ts")).intEngineFactory,
  webgpu: async () => (await import("./webgpu.ts")).loadWebGpuEngine,
};

/** The kinds `--engine` accepts. */
export function engineKinds(): string[] {
  return Object.keys(ENGINES);
}

/**
 * Loads an export on an engine: the format is recognised from the path, the engine is `kind` or else
 * the format's natural one (`FormatDescriptor.engine`). A training checkpoint, an unknown path and an
 * unknown engine are refused with a `FormatError` that says which.
 *
 * @example
 * ```ts
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
    throw new CheckpointError(path, "magic", "a training checkpoint, not an export: export it first");
  }
  const format = formatOf(path);
  const name = kind ?? format.engine;
  if (!Object.hasOwn(ENGINES, name)) {
    throw new FormatError(
      path,
      "engine",
      `${path}: engine: unknown engine ${name} (known: ${engineKinds().join(", ")})`,
      {
        expected: engineKinds().join(", "),
        found: name,
      },
    );
  }
  const factory = await ENGINES[name]();
  return await factory(path, format, options);
}

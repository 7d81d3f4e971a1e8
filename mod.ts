/**
 * ferry: get a trained language model out of the lab — exported, proven faithful, and served.
 *
 * This module is the public API. Data flows one way: a checkpoint becomes named f32 tensors, a
 * format writer stores them (`exportCheckpoint`, through the registry `FORMATS`); a reader gives named
 * tensors back to an engine (`loadEngine`, through `ENGINES`), and the engine gives tokens
 * (`generateTokens`).
 *
 * A format's public API is the registry: `FORMATS`, `formatOf`, `formatNamed` and `readExport` reach every
 * format, so a new format adds nothing to this module. The per-format blocks under "Formats" below keep
 * the names code already imports (`readDmexp`, `writeGguf`, ...) and are not extended for new ones.
 *
 * @example
 * ```ts
 * import { encode, exportCheckpoint, generateAll, loadEngine } from "./mod.ts";
 * const { file } = await exportCheckpoint({ format: "gguf", dtype: "q8_0" });
 * const engine = await loadEngine(file);                   // the format's natural engine
 * const ids = await generateAll(engine, encode("The jury said", { bos: true }), { maxTokens: 32 });
 * ```
 * @module
 */

// The registry of formats, the engine interface and table, the generation loop, the one error shape.
export {
  type ExportInput,
  type ExportOrigin,
  type FormatDescriptor,
  formatNamed,
  formatOf,
  FORMATS,
  readExport,
  type ReadResult,
  type WriteResult,
} from "./formats/mod.ts";
export {
  DEFAULT_INPUT,
  DEFAULT_OUTPUT,
  exportCheckpoint,
  type ExportOptions,
  type ExportSummary,
  openInput,
  UsageError,
} from "./formats/export.ts";
export type { Engine, EngineSession, LogitsWanted, SamplingOptions } from "./model/engine.ts";
export {
  DEFAULT_ENGINE,
  type EngineEntry,
  type EngineFactory,
  engineKinds,
  type EngineLoadOptions,
  ENGINES,
  fromTensors,
  loadEngine,
  type Runtime,
} from "./engines/mod.ts";
export { createFloatEngine, floatEngineOf, type FloatEngineOptions } from "./engines/float.ts";
export { generateAll, type GenerateOptions, generateTokens } from "./model/generate.ts";
export {
  checkSampling,
  checkSeed,
  GREEDY,
  MAX_TEMPERATURE,
  SAMPLING_EXPECTED,
  type SamplingChoice,
  SamplingError,
} from "./model/sampling.ts";
export { FormatError, type RefusalDetail } from "./model/error.ts";

// The one tensor type and the model's shape.
export { byName, countParams, numel, type Tensor, tensor } from "./model/tensor.ts";
export {
  checkTensors,
  ConfigError,
  configParamCount,
  configToToml,
  type ModelConfig,
  paramShapes,
  parseConfig,
  PRESETS,
  readConfigFile,
  type TensorMismatch,
  validateConfig,
} from "./model/config.ts";

// The float reference model, the kernel sets it runs on, the tokenizer and the float sampler.
export { buildModel, createCache, forward, type KVCache, type Model } from "./model/qwen3.ts";
export { defaultKernels, KERNELS, type Kernels, kernelSet, type KernelsName } from "./kernels/kernels.ts";
export { initParams } from "./model/init.ts";
export {
  BOS,
  BOS_TOKEN,
  BYTE_CHARS,
  BYTE_VOCAB_SIZE,
  createStreamDecoder,
  decode,
  encode,
  EOS,
  EOS_TOKEN,
} from "./model/tokenizer.ts";
export { pickToken } from "./model/sample.ts";
export { createRng, type Rng } from "./model/random.ts";

// Data and measurement.
export { evalWindows, loadBrown, untag } from "./model/corpus.ts";
export {
  bitsPerByte,
  compareLogits,
  type EngineProfile,
  type LogitComparison,
  profileEngine,
  windowBits,
  windowLogits,
} from "./measure/metrics.ts";

// Training.
export {
  adamwStep,
  clipGradNorm,
  emaUpdate,
  learningRate,
  paramLayout,
  sequenceLossAndGrad,
} from "./model/train.ts";

// Formats, one block per format that predates the registry: kept for the names code imports, not
// grown (a new format is reached through FORMATS, formatOf, formatNamed and readExport above).
export {
  type Checkpoint,
  CheckpointError,
  configPathFor,
  isCheckpoint,
  readCheckpoint,
  writeCheckpoint,
} from "./formats/checkpoint/checkpoint.ts";
export {
  bf16Bits,
  bf16ToF32,
  F16_MAX,
  F16_MIN_NORMAL,
  F16_MIN_SUBNORMAL,
  f16Bits,
  f16ToF32,
  f32ToBf16,
  f32ToF16,
  roundBf16,
  roundF16,
} from "./quantize/float16.ts";
export { materialize, type TensorSource, tensorSource } from "./model/tensor.ts";
export { openCheckpointModel } from "./formats/checkpoint/checkpoint.ts";
export {
  checkShapes,
  DMEXP_VERSION,
  type DmexpDtype,
  DmexpError,
  dmexpFormat,
  type DmexpHeader,
  type DmexpInfo,
  DTYPES,
  inspectDmexp,
  readDmexp,
  verifyDmexp,
  writeDmexp,
} from "./formats/dmexp/dmexp.ts";
export {
  type Dtype as SafetensorsDtype,
  parseSafetensorsHeader,
  readSafetensors,
  readSafetensorsIndex,
  SafetensorsError,
  writeSafetensors,
} from "./formats/safetensors/safetensors.ts";
export {
  isJsonObject,
  JsonNumber,
  type JsonValue,
  parseStrictJson,
  StrictJsonError,
} from "./formats/json.ts";
export {
  byteTokenizerJson,
  configFromHfJson,
  exportHuggingFace,
  type HfDtype,
  hfFormat,
  HuggingFaceError,
  importHuggingFace,
} from "./formats/huggingface/huggingface.ts";
export {
  decodeTensor,
  dequantizeQ4_0,
  dequantizeQ8_0,
  encodeTensor,
  GGML_TYPES,
  type GgufDtype,
  GgufError,
  ggufFormat,
  parseGguf,
  quantizeQ4_0,
  quantizeQ8_0,
  qwen3FromGguf,
  readGguf,
  writeGguf,
} from "./formats/gguf/gguf.ts";
export {
  decodeF64Token,
  encodeF64Token,
  f64linesConfigPath,
  F64LinesError,
  f64linesFormat,
  f64LinesToTensors,
  parseF64Lines,
  readF64Lines,
  stringChecksum,
  tensorsToF64Lines,
  weightsToF64Lines,
  writeF64Lines,
} from "./formats/f64lines/f64lines.ts";

// lut4 and the integer engine: the file, its quantizer, sessions, and the engine.
export {
  dequantizeLut4,
  type Lut4Dtype,
  Lut4Error,
  type Lut4File,
  lut4Format,
  type Lut4Weights,
  parseLut4,
  readLut4,
  writeLut4,
} from "./formats/lut4/lut4.ts";
export { foldedFloat, type HeadMode, quantizeModel, type TensorError } from "./quantize/lut4-quantize.ts";
export { decodeSession, encodeSession, SessionError, writeSessionFile } from "./formats/session/session.ts";
export { intEngineFromFile, loadIntEngine, toIntSampling } from "./engines/int/engine.ts";

// The chat server: the Hono app handed an engine, its session store, and a listener for Deno or Bun.
export { type ChatAppOptions, createApp } from "./serve/app.ts";
export { createSessionStore, type SessionStore } from "./serve/sessions/session-store.ts";
export { listen, type Listening } from "./serve/listen.ts";

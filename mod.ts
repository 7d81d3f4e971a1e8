/**
 * ferry: get a trained language model out of the lab — exported, proven faithful, and served.
 *
 * This module is the public API. Data flows one way: a checkpoint becomes named f32 tensors, a
 * format writer stores them; a reader gives named tensors back to a model or an engine.
 *
 * @example
 * ```ts
 * import { buildModel, createCache, forward, readCheckpoint } from "./mod.ts";
 * const run = await readCheckpoint("model/default/ferry.ckpt", { sections: ["model"] });
 * const model = buildModel(run.config, run.model);
 * const logits = forward(model, createCache(model), [256, 84, 104, 101]);
 * ```
 * @module
 */

// The one tensor type and the model's shape.
export { byName, countParams, numel, type Tensor, tensor } from "./model/tensor.ts";
export {
  ConfigError,
  configParamCount,
  configToToml,
  type ModelConfig,
  paramShapes,
  parseConfig,
  PRESETS,
  readConfigFile,
  validateConfig,
} from "./model/config.ts";

// The float reference model, tokenizer and sampling.
export { buildModel, createCache, forward, type KVCache, type Model } from "./model/qwen3.ts";
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
export { generate, type GenerateOptions, sampleToken } from "./model/sample.ts";
export { createRng, type Rng } from "./model/random.ts";

// Data and measurement.
export { evalWindows, loadBrown, untag } from "./model/corpus.ts";
export { bitsPerByte, compareLogits, type LogitComparison, windowBits, windowLogits } from "./model/measure.ts";

// Training.
export { adamwStep, clipGradNorm, emaUpdate, learningRate, paramLayout, sequenceLossAndGrad } from "./model/train.ts";

// Formats.
export {
  type Checkpoint,
  CheckpointError,
  configPathFor,
  isCheckpoint,
  readCheckpoint,
  writeCheckpoint,
} from "./formats/checkpoint.ts";
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
} from "./formats/float16.ts";
export { materialize, type TensorSource, tensorSource } from "./model/tensor.ts";
export { openCheckpointModel } from "./formats/checkpoint.ts";
export {
  checkShapes,
  DMEXP_VERSION,
  type DmexpDtype,
  DmexpError,
  type DmexpHeader,
  type DmexpInfo,
  DTYPES,
  inspectDmexp,
  loadDmexpModel,
  readDmexp,
  verifyDmexp,
  writeDmexp,
} from "./formats/dmexp.ts";
export {
  type Dtype as SafetensorsDtype,
  parseSafetensorsHeader,
  readSafetensors,
  readSafetensorsIndex,
  SafetensorsError,
  writeSafetensors,
} from "./formats/safetensors.ts";
export { isJsonObject, JsonNumber, type JsonValue, parseStrictJson, StrictJsonError } from "./formats/json.ts";
export {
  byteTokenizerJson,
  configFromHfJson,
  exportHuggingFace,
  type HfDtype,
  HuggingFaceError,
  importHuggingFace,
} from "./formats/huggingface.ts";
export {
  decodeTensor,
  dequantizeQ4_0,
  dequantizeQ8_0,
  encodeTensor,
  GGML_TYPES,
  type GgufDtype,
  GgufError,
  parseGguf,
  quantizeQ4_0,
  quantizeQ8_0,
  qwen3FromGguf,
  readGguf,
  writeGguf,
} from "./formats/gguf.ts";
export {
  decodeF64Token,
  encodeF64Token,
  F64LinesError,
  f64LinesToTensors,
  parseF64Lines,
  readF64Lines,
  stringChecksum,
  tensorsToF64Lines,
  weightsToF64Lines,
  writeF64Lines,
} from "./formats/f64lines.ts";

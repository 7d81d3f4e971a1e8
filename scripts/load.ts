/**
 * Reads any ferry export back into a model, choosing the reader by the path's form: `.dmexp`,
 * a Hugging Face folder (`config.json` inside), `.gguf`, or `.f64lines` (with `NAME.config.toml`
 * beside it). Each reader checks its own file fully before anything is returned.
 *
 * @example
 * ```ts
 * const { model, format } = await loadExport("out/ferry.bf16.dmexp");
 * ```
 * @module
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { readDmexp } from "../formats/dmexp.ts";
import { importHuggingFace } from "../formats/huggingface.ts";
import { readGguf } from "../formats/gguf.ts";
import { readF64Lines } from "../formats/f64lines.ts";
import { type ModelConfig, paramShapes, readConfigFile } from "../model/config.ts";
import { buildModel, type Model } from "../model/qwen3.ts";
import type { Tensor } from "../model/tensor.ts";
import { f64linesConfigPath } from "./export.ts";

/** An export read back: its format, config, tensors and the model built from them. */
export interface LoadedExport {
  format: "dmexp" | "hf" | "gguf" | "f64lines";
  config: ModelConfig;
  tensors: Tensor[];
  model: Model;
}

/** Reads an export of any format ferry writes. */
export async function loadExport(path: string): Promise<LoadedExport> {
  let format: LoadedExport["format"], config: ModelConfig, tensors: Tensor[];
  if (existsSync(path) && statSync(path).isDirectory()) {
    if (!existsSync(join(path, "config.json"))) throw new Error(`${path}: a folder without config.json is not a Hugging Face export`);
    format = "hf";
    ({ config, tensors } = await importHuggingFace(path));
  } else if (path.endsWith(".dmexp")) {
    format = "dmexp";
    ({ config, tensors } = await readDmexp(path));
  } else if (path.endsWith(".gguf")) {
    format = "gguf";
    ({ config, tensors } = await readGguf(path));
  } else if (path.endsWith(".f64lines")) {
    format = "f64lines";
    config = await readConfigFile(f64linesConfigPath(path));
    tensors = await readF64Lines(path, paramShapes(config));
  } else {
    throw new Error(`${path}: not a ferry export (expected .dmexp, .gguf, .f64lines or a Hugging Face folder)`);
  }
  return { format, config, tensors, model: buildModel(config, tensors, path) };
}

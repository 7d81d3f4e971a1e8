// Loading a lut4 file from its path reads it straight into the integer engine's WebAssembly memory and lays
// the matrices out where they lie (kernels/wasm/int-lut.ts `placedMemory`, `LutRoom.placed`); its tokenizer
// is built while the weights are read (formats/lut4/lut4.ts `readLut4`'s `onTokenizer`). The engine must be
// the one a copy of the file builds: the same integers on one thread and on two, the same tokenizer.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crossProcessTest } from "../helpers/fast.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { exportCheckpoint } from "../../formats/export.ts";
import { Lut4Error, parseLut4, readLut4 } from "../../formats/lut4/lut4.ts";
import { createLutSums, placedMemory } from "../../kernels/wasm/int-lut.ts";
import { buildIntModel } from "../../engines/int/model.ts";
import { lutMatrices } from "../../engines/int/simd.ts";
import { intEngineFromFile, loadIntEngine, memoryToPlace } from "../../engines/int/engine.ts";
import { intEngineFromBytes } from "../../engines/int/from-bytes.ts";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine } from "../../model/engine.ts";
import type { TokenizerFiles } from "../../model/tokenizer-types.ts";

setDefaultTimeout(120_000);

const dir = mkdtempSync(join(tmpdir(), "ferry-int-load-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A reduced Qwen3 shape with Qwen3's tokenizer: every matrix's rows are whole 16-row blocks. */
const SHAPE = {
  vocab_size: 151936,
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 32,
  tie_word_embeddings: true,
  max_position_embeddings: 256,
  rope_theta: 1_000_000,
};

let qwen3: Promise<string> | undefined;
function qwen3Lut4(): Promise<string> {
  qwen3 ??= (async () => {
    const out = join(dir, "q.q4.lut4");
    await exportCheckpoint({
      input: await qwen3Folder({ shape: SHAPE, seed: 9 }),
      output: out,
      format: "lut4",
    });
    return out;
  })();
  return qwen3;
}

/** The logits of a prompt and of eight greedy steps after it, one array. */
async function trace(engine: Engine, prompt: number[]): Promise<number[]> {
  const s = engine.start();
  const out = [...await s.feed(prompt)];
  for (let i = 0; i < 8; i++) out.push(...await s.feed([s.pick()]));
  return out;
}

test("readLut4 puts the file where `into` says, hashes it as parseLut4 does, and hands a byte model no tokenizer", async () => {
  const path = await smallLut4();
  const bytes = readFileSync(path);
  let view: Uint8Array | undefined;
  const heard: TokenizerFiles[] = [];
  const file = await readLut4(path, {
    into: (size) => (view = new Uint8Array(new ArrayBuffer(size + 64), 64, size)),
    onTokenizer: (files) => heard.push(files),
  });
  expect(view!.length).toBe(bytes.length);
  expect(Buffer.compare(Buffer.from(view!), bytes)).toBe(0);
  expect(file.sha256).toBe(createHash("sha256").update(bytes).digest("hex"));
  expect(file.sha256).toBe(parseLut4(new Uint8Array(bytes), path).sha256);
  expect(file.weights.layers[0].q.nibbles.buffer).toBe(view!.buffer); // views of the given bytes
  expect(heard).toEqual([]); // schema /1: no tokenizer section
});

test("in place: each matrix of whole 16-row blocks is laid out where the file put it; the others after the file", async () => {
  const path = await smallLut4();
  let placed: ReturnType<typeof placedMemory> | undefined;
  const file = await readLut4(path, { into: (size) => (placed = placedMemory(size)).bytes });
  const mats = lutMatrices(buildIntModel(file.weights, false));
  const offsets = mats.map((m) => [m.nibbles.byteOffset, m.scales.byteOffset]);
  const made = createLutSums(mats, { placed })!;
  expect(made).not.toBeNull();
  expect(made.shared?.memory).toBe(placed!.memory);
  let inPlace = 0;
  mats.forEach((m, i) => {
    if (m.rows % 16 === 0) {
      expect([made.at[i], made.scalesAt[i]]).toEqual(offsets[i]);
      inPlace++;
    } else expect(made.at[i]).toBeGreaterThanOrEqual(file.bytes); // the tied head's 258 rows
  });
  expect(inPlace).toBe(mats.length - 1);
});

test("the engine a path loads (in place) gives the integers of the one its bytes load (copied), on 1 and 2 threads", async () => {
  const path = await smallLut4();
  const prompt = [256, 84, 104, 101, 32, 106, 117, 114, 121];
  for (const threads of [1, 2]) {
    const placed = await loadIntEngine(path, { threads, splitWeights: 0 });
    const copied = (await intEngineFromBytes(new Uint8Array(readFileSync(path)), path, { threads })).engine;
    try {
      expect(await trace(placed, prompt)).toEqual(await trace(copied, prompt));
    } finally {
      placed.dispose?.();
      copied.dispose?.();
    }
  }
});

test("the engine of bytes with a placed copy (the tab's download) lays out there, with the same integers", async () => {
  const path = await smallLut4();
  const bytes = new Uint8Array(readFileSync(path));
  const prompt = [256, 84, 104, 101, 32, 106, 117, 114, 121];
  for (const threads of [1, 2]) {
    const placed = memoryToPlace(bytes.length)!;
    placed.bytes.set(bytes);
    const made = await intEngineFromBytes(bytes, path, { threads, placed });
    const inPlace = made.engine;
    const copied = (await intEngineFromBytes(bytes, path, { threads })).engine;
    try {
      expect(made.inPlace).toBe(true);
      expect(await trace(inPlace, prompt)).toEqual(await trace(copied, prompt));
      // Laid out where it lies: the matrices' 16-row blocks transposed in the placed copy itself.
      expect(Buffer.from(placed.bytes.subarray(0, bytes.length)).equals(bytes)).toBe(false);
    } finally {
      inPlace.dispose?.();
      copied.dispose?.();
    }
  }
  // A copy of another length is not the file's: ignored, the bytes copied as without one.
  const short = memoryToPlace(bytes.length - 16)!;
  const { engine, inPlace } = await intEngineFromBytes(bytes, path, { placed: short });
  expect(inPlace).toBe(false);
  expect(Buffer.from(short.bytes).every((b) => b === 0)).toBe(true);
  expect(await trace(engine, prompt)).toEqual(await trace(intEngineFromFile(await readLut4(path)), prompt));
});

crossProcessTest(
  "a Qwen3 lut4: the path load builds the file's tokenizer with its weights, the engine of its bytes",
  async () => {
    const path = await qwen3Lut4();
    const heard: TokenizerFiles[] = [];
    const file = await readLut4(path, { onTokenizer: (files) => heard.push(files) });
    expect(heard).toEqual([file.tokenizer!]); // once, with the files the checked file carries
    expect(heard[0]).toBe(file.tokenizer!); // decoded once: the full checks took the early decode

    const engine = await loadEngine(path, "int", { threads: 2 });
    const { engine: copied } = await intEngineFromBytes(new Uint8Array(readFileSync(path)), path);
    try {
      expect(engine.tokenizer.kind).toBe("bpe");
      expect(engine.tokenizer).toBe(copied.tokenizer); // built once per process, from the same files
      const prompt = engine.tokenizer.encode("The jury said", { bos: true });
      expect(await trace(engine, prompt)).toEqual(await trace(copied, prompt));
    } finally {
      engine.dispose?.();
      copied.dispose?.();
    }
  },
);

crossProcessTest(
  "a damaged tokenizer section is not handed over early, and the read refuses it as the full checks do",
  async () => {
    const path = await qwen3Lut4();
    const bytes = new Uint8Array(readFileSync(path));
    bytes[bytes.length - 100] ^= 1; // inside the tokenizer section, the file's last bytes
    const damaged = join(dir, "damaged.q4.lut4");
    writeFileSync(damaged, bytes);
    const heard: TokenizerFiles[] = [];
    const err = await readLut4(damaged, { onTokenizer: (files) => heard.push(files) }).catch((e) => e);
    expect(err).toBeInstanceOf(Lut4Error);
    expect(heard).toEqual([]);
    let full: unknown;
    try {
      parseLut4(bytes, damaged);
    } catch (e) {
      full = e;
    }
    expect((err as Lut4Error).code).toBe("ChecksumMismatch");
    expect((err as Lut4Error).message).toBe((full as Lut4Error).message);
    await expect(loadEngine(damaged, "int")).rejects.toThrow((full as Lut4Error).message);
  },
);

// Hostile input (issue 14): each class of finding of the mutation campaign, as a named regression test.
// Every edit here is the attacker's: the format's own checksum, and ferry's where it is forged, are
// recomputed, so what refuses the file is the check named in the test, not a checksum by accident.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import {
  CheckpointError,
  openCheckpointModel,
  readCheckpoint,
  writeCheckpoint,
} from "../../formats/checkpoint/checkpoint.ts";
import { DmexpError, readDmexp, sealHeader, writeDmexp } from "../../formats/dmexp/dmexp.ts";
import {
  exportHuggingFace,
  hfFormat,
  HuggingFaceError,
  importHuggingFace,
} from "../../formats/huggingface/huggingface.ts";
import { MAX_JSON_DEPTH, parseStrictJson, StrictJsonError } from "../../formats/json.ts";
import { GGUF_DIGEST_NEEDLE, GgufError, readGguf, writeGguf } from "../../formats/gguf/gguf.ts";
import {
  readSafetensors,
  readSafetensorsIndex,
  SAFETENSORS_DIGEST_NEEDLE,
  SafetensorsError,
  writeSafetensors,
} from "../../formats/safetensors/safetensors.ts";
import { sealDigest } from "../../formats/digest.ts";
import {
  Lut4Error,
  lut4Format,
  type Lut4Weights,
  maxCacheBytes,
  readLut4,
  writeLut4,
} from "../../formats/lut4/lut4.ts";
import { decodeSession, SessionError } from "../../formats/session/session.ts";
import { loadIntEngine, sessionShape } from "../../engines/int/engine.ts";
import { tensorSource } from "../../model/tensor.ts";
import { spawnSync } from "node:child_process";
import { codesOf, FormatError } from "../../model/error.ts";
import { configToToml, type ModelConfig } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";

const CFG: ModelConfig = {
  vocab_size: 258,
  hidden_size: 8,
  intermediate_size: 8,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 4,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  max_position_embeddings: 64,
  tie_word_embeddings: true,
};
const tensors = initParams(CFG, 3);
const enc = new TextEncoder(), dec = new TextDecoder();
let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "ferry-hostile-"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let n = 0;
const fresh = (ext: string) => join(dir, `f${n++}${ext}`);

/**
 * Awaits a refusal and returns it; fails the test on success, on any other exception type, and on a code
 * outside the class's table (every refusal names its rule by one of its format's codes).
 */
async function refusal<E extends FormatError>(
  p: Promise<unknown>,
  type: new (...a: never[]) => E,
): Promise<E> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof type)) {
      throw new Error(`expected a ${type.name}, got ${(e as Error)?.name}: ${(e as Error)?.message}`);
    }
    expect(`${e.name} ${e.code}: ${codesOf(e).includes(e.code)}`).toBe(`${e.name} ${e.code}: true`);
    return e;
  }
  throw new Error(`expected a ${type.name}, but the file was accepted`);
}

/** Runs `read` and checks it neither took long nor grew the heap: no allocation from an unchecked number. */
async function cheaply<T>(read: () => Promise<T>): Promise<T> {
  const before = process.memoryUsage().rss, t0 = performance.now();
  try {
    return await read();
  } finally {
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(process.memoryUsage().rss - before).toBeLessThan(256 << 20);
  }
}

// ---- dmexp file surgery ----

function dmexpParts(file: Uint8Array) {
  const h = new DataView(file.buffer, file.byteOffset).getUint32(8, true);
  return { header: dec.decode(file.subarray(24, 24 + h)), payload: file.subarray(24 + h) };
}

/** A dmexp file from a header text and payload, with the payload CRC and (when `seal`) header_crc32 recomputed. */
function dmexpFile(header: string, payload: Uint8Array, seal = true): Uint8Array {
  const h = enc.encode(header);
  const prefix = new Uint8Array(24);
  const dv = new DataView(prefix.buffer);
  prefix.set(enc.encode("DMEXPRT\x01"));
  dv.setUint32(8, h.length, true);
  dv.setBigUint64(12, BigInt(payload.length), true);
  dv.setUint32(20, crc32(payload) >>> 0, true);
  const sealed = seal ? sealHeader(prefix, h) : h;
  const out = new Uint8Array(24 + h.length + payload.length);
  out.set(prefix), out.set(sealed, 24), out.set(payload, 24 + h.length);
  return out;
}

async function dmexpWith(edit: (p: { header: string; payload: Uint8Array }) => void, seal = true) {
  const path = fresh(".dmexp");
  await writeDmexp(path, tensors, CFG, { dtype: "bf16", source: "t@step1", step: 1 });
  const parts = dmexpParts(new Uint8Array(readFileSync(path)));
  edit(parts);
  writeFileSync(path, dmexpFile(parts.header, parts.payload, seal));
  return path;
}

// ---- checkpoint file surgery ----

async function checkpointWith(
  edit: (header: Record<string, any>) => void,
  text = (json: string) => json,
): Promise<string> {
  const path = fresh(".ckpt");
  await writeCheckpoint(path, CFG, { step: 5, model: tensors, ema: initParams(CFG, 4) });
  const file = new Uint8Array(readFileSync(path));
  const h = new DataView(file.buffer, file.byteOffset).getUint32(8, true);
  const header = JSON.parse(dec.decode(file.subarray(24, 24 + h)));
  edit(header);
  const hb = enc.encode(text(JSON.stringify(header))), payload = file.subarray(24 + h);
  const out = new Uint8Array(24 + hb.length + payload.length);
  out.set(file.subarray(0, 8));
  const dv = new DataView(out.buffer);
  dv.setUint32(8, hb.length, true);
  dv.setBigUint64(12, BigInt(payload.length), true);
  dv.setUint32(20, crc32(payload, crc32(hb)) >>> 0, true);
  out.set(hb, 24), out.set(payload, 24 + hb.length);
  writeFileSync(path, out);
  return path;
}

const checkpointReaders = {
  readCheckpoint: (p: string) => readCheckpoint(p),
  "readCheckpoint sections=model": (p: string) => readCheckpoint(p, { sections: ["model"] }),
  openCheckpointModel: (p: string) => openCheckpointModel(p).then((m) => m.close()),
};

// ---- GGUF surgery: a u32 metadata value in place ----

function setGgufU32(file: Uint8Array, key: string, value: number): Uint8Array {
  const k = enc.encode(key);
  const at = Buffer.from(file).indexOf(Buffer.from(k));
  expect(at).toBeGreaterThan(0);
  const out = file.slice();
  const dv = new DataView(out.buffer);
  expect(dv.getUint32(at + k.length, true)).toBe(4); // GGUF type u32
  dv.setUint32(at + k.length + 4, value, true);
  return out;
}

describe("1. out of memory from one number: the implied shape is bounded by the file before it is built", () => {
  // Above 2^31 - 1 the config's own limit refuses it; below, the implied tensor count is bounded by the file's.
  for (
    const [layers, field] of [[99999999999, "config"], [2 ** 31, "config"], [
      2 ** 31 - 1,
      "tensors.",
    ]] as const
  ) {
    test(`dmexp: config num_hidden_layers = ${layers} is refused at once (header_crc32 forged too)`, async () => {
      const path = await dmexpWith((p) => {
        p.header = p.header.replace("num_hidden_layers = 2", `num_hidden_layers = ${layers}`);
      });
      const e = await cheaply(() => refusal(readDmexp(path), DmexpError));
      expect(e.field).toStartWith(field);
    });
  }

  test("dmexp: max_position_embeddings = 2^40 is refused (RoPE tables would be sized from it)", async () => {
    const path = await dmexpWith((p) => {
      p.header = p.header.replace("max_position_embeddings = 64", `max_position_embeddings = ${2 ** 40}`);
    });
    const e = await cheaply(() => refusal(readDmexp(path), DmexpError));
    expect(e.message).toContain("max_position_embeddings");
  });

  test("Hugging Face config.json: num_hidden_layers = 99999999999 is refused at once", async () => {
    const folder = fresh(".hf");
    await exportHuggingFace(folder, tensors, CFG, { dtype: "f32" });
    const cfgPath = join(folder, "config.json");
    const text = readFileSync(cfgPath, "utf8");
    const huge = text.replace('"num_hidden_layers": 2', '"num_hidden_layers": 99999999999')
      .replace('"max_window_layers": 2', '"max_window_layers": 99999999999');
    expect(huge).not.toBe(text);
    writeFileSync(cfgPath, huge);
    await cheaply(() => refusal(importHuggingFace(folder), HuggingFaceError));
  });

  for (
    const [key, value] of [["qwen3.block_count", 2 ** 31], ["qwen3.embedding_length", 2 ** 32 - 1]] as const
  ) {
    test(`GGUF: ${key} = ${value} is refused at once (digest forged too)`, async () => {
      const path = fresh(".gguf");
      await writeGguf(path, tensors, CFG, { type: "f16" });
      const forged = sealDigest(
        setGgufU32(new Uint8Array(readFileSync(path)), key, value),
        GGUF_DIGEST_NEEDLE,
      );
      writeFileSync(path, forged);
      await cheaply(() => refusal(readGguf(path), GgufError));
    });
  }

  test("checkpoint: a config snapshot claiming 2^31 - 1 layers is refused at once, naming the section", async () => {
    const path = fresh(".ckpt");
    await writeCheckpoint(path, CFG, { step: 1, model: tensors });
    writeFileSync(
      path.replace(/\.ckpt$/, ".config.toml"),
      configToToml({ ...CFG, num_hidden_layers: 2 ** 31 - 1 }),
    );
    for (const read of Object.values(checkpointReaders)) {
      expect((await cheaply(() => refusal(read(path), CheckpointError))).field).toStartWith("model.");
    }
  });
});

describe("2. checkpoint headers that crashed the readers are refused by field, CRC valid", () => {
  const cases: Array<[string, (h: Record<string, any>) => void, RegExp]> = [
    ["a tensor entry of null", (h) => (h.sections.model[0] = null), /sections\.model\[0\]/],
    ["a tensor entry of true", (h) => (h.sections.model[1] = true), /sections\.model\[1\]/],
    ["dims of null", (h) => (h.sections.model[0].dims = null), /sections\.model\[0\]\.dims/],
    ["dims of a number", (h) => (h.sections.model[0].dims = 5), /sections\.model\[0\]\.dims/],
    ["dims of an object", (h) => (h.sections.model[0].dims = { a: 1 }), /sections\.model\[0\]\.dims/],
    ["a section that is an object", (h) => (h.sections.ema = { a: 1 }), /sections\.ema/],
    ["a tensor name of null", (h) => (h.sections.model[2].name = null), /sections\.model\[2\]\.name/],
    ["a tensor name of 5", (h) => (h.sections.model[2].name = 5), /sections\.model\[2\]\.name/],
    [
      "negative dims [-96, -256]",
      (h) => (h.sections.model[0].dims = [-96, -256]),
      /sections\.model\[0\]\.dims/,
    ],
    ["nested dims", (h) => (h.sections.model[0].dims = [[258], [8]]), /sections\.model\[0\]\.dims/],
    ['step = "x"', (h) => (h.step = "x"), /step/],
    ["an unknown section", (h) => (h.sections.extra = []), /sections\.extra/],
    ["no model section", (h) => delete h.sections.model, /sections\.model/],
  ];
  for (const [what, edit, field] of cases) {
    test(what, async () => {
      const path = await checkpointWith(edit);
      for (const [name, read] of Object.entries(checkpointReaders)) {
        const e = await refusal(read(path), CheckpointError).catch((x) => {
          throw new Error(`${name}: ${x.message}`);
        });
        expect(e.field).toMatch(field);
      }
    });
  }
});

describe("3. checkpoint sizes shifted between tensors are refused", () => {
  test("[2147508224] and [-2147477504] keep the total but are refused, in every reader", async () => {
    const path = await checkpointWith((h) => {
      const [a, b] = [h.sections.model[0], h.sections.model[1]];
      const total = a.dims.reduce((x: number, y: number) => x * y, 1) +
        b.dims.reduce((x: number, y: number) => x * y, 1);
      a.dims = [2147508224];
      b.dims = [total - 2147508224];
    });
    for (const read of Object.values(checkpointReaders)) {
      await cheaply(() => refusal(read(path), CheckpointError));
    }
  });

  test("a small shift (8 values moved from one tensor to the next) is refused by the shape check", async () => {
    const path = await checkpointWith((h) => {
      const [a, b] = [h.sections.model[1], h.sections.model[2]];
      a.dims = [a.dims[0] + 8];
      b.dims = [b.dims[0] * b.dims[1] - 8];
    });
    for (const read of Object.values(checkpointReaders)) {
      const e = await refusal(read(path), CheckpointError);
      expect(e.field).toMatch(/^model\./);
    }
  });

  test("a tensor too big for what is left of the payload is refused before anything is allocated", async () => {
    const path = await checkpointWith((h) => (h.sections.model[0].dims = [2 ** 40]));
    const e = await cheaply(() => refusal(readCheckpoint(path), CheckpointError));
    expect(e.field).toBe("sections.model[0].dims");
  });
});

describe("4. dmexp headers are tamper-evident (header_crc32), compatibly", () => {
  const swapTables = (p: { header: string }) => {
    const parts = p.header.split(/(?=^\[\[tensors\]\]$)/m);
    [parts[2], parts[3]] = [parts[3], parts[2]];
    p.header = parts.join("");
  };
  const edits: Array<[string, (p: { header: string; payload: Uint8Array }) => void]> = [
    ["two [[tensors]] tables swapped", swapTables],
    [
      'dtype "bf16" changed to "f16"',
      (p) => (p.header = p.header.replace('dtype = "bf16"', 'dtype = "f16"')),
    ],
    [
      "rms_norm_eps edited",
      (p) => (p.header = p.header.replace("rms_norm_eps = 0.000001", "rms_norm_eps = 0.1")),
    ],
    [
      "rope_theta edited",
      (p) => (p.header = p.header.replace("rope_theta = 10000.0", "rope_theta = 20000.0")),
    ],
    [
      "max_position_embeddings edited",
      (p) => (p.header = p.header.replace("max_position_embeddings = 64", "max_position_embeddings = 65")),
    ],
    ["a NaN written into the payload (payload CRC recomputed)", (p) => {
      p.payload = p.payload.slice();
      new DataView(p.payload.buffer).setUint16(100, 0x7fc0, true);
    }],
  ];
  for (const [what, edit] of edits) {
    test(`${what}: refused by header_crc32`, async () => {
      const path = await dmexpWith((p) => {
        const before = p.header + p.payload.length;
        edit(p);
        expect(p.header + p.payload.length !== before || p.payload[100] === 0xc0).toBe(true);
      }, false);
      const e = await refusal(readDmexp(path), DmexpError);
      expect(e.field).toBe("header_crc32");
    });
  }

  test("forged (header_crc32 recomputed too): a table swap re-slices the payload, and only the checksum saw it", async () => {
    // The limit of a checksum: whoever recomputes it can reorder tables whose names and dims stay
    // consistent. The file reads, with different values: this is what docs/hostile-input.md's counts call
    // forged.
    const path = await dmexpWith(swapTables);
    const [ok, forged] = [await readDmexp(await dmexpWith(() => {})), await readDmexp(path)];
    expect(forged.tensors.map((t) => t.name).sort()).toEqual(ok.tensors.map((t) => t.name).sort());
    const q = (r: typeof ok) =>
      r.tensors.find((t) => t.name === "model.layers.0.self_attn.q_proj.weight")!.data;
    expect(Buffer.from(q(forged).buffer).equals(Buffer.from(q(ok).buffer))).toBe(false);
  });

  test("forged: a NaN in the payload is refused, naming the tensor (exports hold finite weights)", async () => {
    const path = await dmexpWith((p) => {
      p.payload = p.payload.slice();
      new DataView(p.payload.buffer).setUint16(100, 0x7fc0, true);
    });
    const e = await refusal(readDmexp(path), DmexpError);
    expect(e.field).toBe("tensors.model.embed_tokens.weight");
    expect(e.message).toContain("NaN");
  });

  test("forged: +Inf in an f32 file is refused too", async () => {
    const path = fresh(".dmexp");
    await writeDmexp(path, tensors, CFG, { dtype: "f32", source: "t@step1", step: 1 });
    const parts = dmexpParts(new Uint8Array(readFileSync(path)));
    const payload = parts.payload.slice();
    new DataView(payload.buffer).setFloat32(payload.length - 4, Infinity, true);
    writeFileSync(path, dmexpFile(parts.header, payload));
    expect((await refusal(readDmexp(path), DmexpError)).message).toContain("Infinity");
  });

  test("a file written without header_crc32 (as the reference writes it) still reads, bit for bit", async () => {
    const a = fresh(".dmexp"), b = fresh(".dmexp");
    await writeDmexp(a, tensors, CFG, { dtype: "bf16", source: "t@step1", step: 1, headerChecksum: false });
    await writeDmexp(b, tensors, CFG, { dtype: "bf16", source: "t@step1", step: 1 });
    expect(dmexpParts(new Uint8Array(readFileSync(a))).header).not.toContain("header_crc32");
    const [ra, rb] = [await readDmexp(a), await readDmexp(b)];
    expect(ra.tensors.map((t) => Buffer.from(t.data.buffer).toString("hex")))
      .toEqual(rb.tensors.map((t) => Buffer.from(t.data.buffer).toString("hex")));
  });

  test("a header_crc32 in another form than ferry writes (an integer, or twice) is refused", async () => {
    for (
      const edit of [
        (h: string) => h.replace(/header_crc32 = "[0-9a-f]{8}"/, "header_crc32 = 5"),
        (h: string) => h.replace(/(header_crc32 = "[0-9a-f]{8}")/, "$1\n$1"),
      ]
    ) {
      const path = await dmexpWith((p) => (p.header = edit(p.header)), false);
      expect((await refusal(readDmexp(path), DmexpError)).field).toBe("header_crc32");
    }
  });
});

describe("5. GGUF and safetensors written by ferry carry ferry.sha256, verified when present", () => {
  async function gguf(opts: { digest?: boolean } = {}) {
    const path = fresh(".gguf");
    await writeGguf(path, tensors, CFG, { type: "f16", ...opts });
    return { path, bytes: new Uint8Array(readFileSync(path)) };
  }
  const ggufEdits: Array<[string, (b: Uint8Array) => Uint8Array]> = [
    ["a data byte flipped", (b) => {
      const o = b.slice();
      o[o.length - 40] ^= 1;
      return o;
    }],
    ["two same-shape tensors' names swapped", (b) => {
      const o = Buffer.from(b.slice());
      const a = o.indexOf("blk.0.ffn_gate.weight"), c = o.indexOf("blk.0.ffn_up.weight\u0000".slice(0, 19));
      expect(a > 0 && c > 0).toBe(true);
      // Same length names: attn_q_norm <-> attn_k_norm ([4] each).
      const q = o.indexOf("blk.0.attn_q_norm.weight"), k = o.indexOf("blk.0.attn_k_norm.weight");
      o.write("blk.0.attn_k_norm.weight", q), o.write("blk.0.attn_q_norm.weight", k);
      return new Uint8Array(o);
    }],
    ["a tensor's type changed F16 -> BF16", (b) => {
      const o = Buffer.from(b.slice());
      const name = o.indexOf("blk.0.attn_q.weight");
      const typeAt = name + "blk.0.attn_q.weight".length + 4 + 2 * 8; // after n_dims and two ne
      expect(o.readUInt32LE(typeAt)).toBe(1);
      o.writeUInt32LE(30, typeAt);
      return new Uint8Array(o);
    }],
    ["a hyperparameter edited (rope.freq_base)", (b) => {
      const o = Buffer.from(b.slice());
      const at = o.indexOf("qwen3.rope.freq_base") + "qwen3.rope.freq_base".length;
      expect(o.readUInt32LE(at)).toBe(6); // f32
      o.writeFloatLE(20000, at + 4);
      return new Uint8Array(o);
    }],
  ];
  for (const [what, edit] of ggufEdits) {
    test(`GGUF: ${what} is refused by ferry.sha256`, async () => {
      const { path, bytes } = await gguf();
      writeFileSync(path, edit(bytes));
      expect((await refusal(readGguf(path), GgufError)).field).toBe("ferry.sha256");
    });
  }

  test("GGUF: a file without ferry.sha256 (anyone else's) reads, and the same edit then goes through", async () => {
    const { path, bytes } = await gguf({ digest: false });
    expect(Buffer.from(bytes).includes("ferry.sha256")).toBe(false);
    const before = await readGguf(path);
    writeFileSync(path, ggufEdits[3][1](bytes));
    const after = await readGguf(path);
    expect(after.config.rope_theta).toBe(20000);
    expect(before.config.rope_theta).toBe(10000);
  });

  async function st(opts: { digest?: boolean } = {}) {
    const path = fresh(".safetensors");
    await writeSafetensors(path, tensors, { dtype: "F16", ...opts });
    return { path, bytes: new Uint8Array(readFileSync(path)) };
  }
  const stEdits: Array<[string, (b: Uint8Array) => Uint8Array]> = [
    ["a data byte flipped", (b) => {
      const o = b.slice();
      o[o.length - 3] ^= 0x10;
      return o;
    }],
    ["two same-shape tensors' names swapped", (b) => {
      const o = Buffer.from(b.slice());
      const q = o.indexOf("self_attn.q_norm"), k = o.indexOf("self_attn.k_norm");
      o.write("self_attn.k_norm", q), o.write("self_attn.q_norm", k);
      return new Uint8Array(o);
    }],
    ["a dtype changed F16 -> BF16 (header re-lengthed)", (b) => {
      const n = Number(new DataView(b.buffer, b.byteOffset).getBigUint64(0, true));
      const h = dec.decode(b.subarray(8, 8 + n)).replace('"dtype":"F16"', '"dtype":"BF16"').trimEnd();
      const hb = enc.encode(h.padEnd(Math.ceil(h.length / 8) * 8, " "));
      const o = new Uint8Array(8 + hb.length + b.length - 8 - n);
      new DataView(o.buffer).setBigUint64(0, BigInt(hb.length), true);
      o.set(hb, 8), o.set(b.subarray(8 + n), 8 + hb.length);
      return o;
    }],
  ];
  for (const [what, edit] of stEdits) {
    test(`safetensors: ${what} is refused by ferry.sha256`, async () => {
      const { path, bytes } = await st();
      writeFileSync(path, edit(bytes));
      const e = await refusal(readSafetensors(path), SafetensorsError);
      expect(e.field).toBe("__metadata__.ferry.sha256");
    });
  }

  test("safetensors: forged (digest recomputed), a dtype change reads as the forger wrote it", async () => {
    const { path, bytes } = await st();
    writeFileSync(path, sealDigest(stEdits[2][1](bytes), SAFETENSORS_DIGEST_NEEDLE));
    const back = await readSafetensors(path);
    expect(back.digest?.ok).toBe(true);
    expect(back.tensors.some((t) => t.dtype === "BF16")).toBe(true);
  });

  test("safetensors: a file without ferry.sha256 reads; the verdict is reported when present", async () => {
    const a = await st({ digest: false }), b = await st();
    expect((await readSafetensors(a.path)).digest).toBeUndefined();
    expect((await readSafetensors(b.path)).digest).toEqual({
      stored: expect.stringMatching(/^[0-9a-f]{64}$/),
      computed: expect.stringMatching(/^[0-9a-f]{64}$/),
      ok: true,
    });
  });
});

// ---- lut4 and session files (issue 14, extended as they landed) ----

const LUT_CFG: ModelConfig = {
  ...CFG,
  hidden_size: 32,
  intermediate_size: 32,
  num_hidden_layers: 1,
  head_dim: 16,
  max_position_embeddings: 16,
};

async function smallLut4(): Promise<string> {
  const path = fresh(".lut4");
  await lut4Format.write(path, {
    config: LUT_CFG,
    tensors: initParams(LUT_CFG, 5).map(tensorSource),
    source: "t@step1",
    step: 1,
    name: "t",
  }, { dtype: "q4" });
  return path;
}

/** A lut4 file's header object and data section, and the file framed again (data_crc32 recomputed: forged). */
function lut4Parts(file: Uint8Array) {
  const h = Number(new DataView(file.buffer, file.byteOffset).getBigUint64(8, true));
  return { header: JSON.parse(dec.decode(file.subarray(16, 16 + h))), data: file.slice(16 + h) };
}
function lut4Forged(
  header: Record<string, any>,
  data: Uint8Array,
  edit = (json: string) => json,
): Uint8Array {
  header.data_crc32 = crc32(data) >>> 0;
  let text = edit(JSON.stringify(header));
  text += " ".repeat((64 - ((16 + enc.encode(text).length) % 64)) % 64);
  const hb = enc.encode(text);
  const out = new Uint8Array(16 + hb.length + data.length);
  out.set(enc.encode("UORLUT01"));
  new DataView(out.buffer).setBigUint64(8, BigInt(hb.length), true);
  out.set(hb, 16), out.set(data, 16 + hb.length);
  return out;
}

/** A consistent lut4 file (every span, table and CRC as the writer makes them) of a shape chosen freely. */
async function lut4OfShape(path: string, maxPositions: number) {
  const small = (await readLut4(await smallLut4())).weights;
  const H = 128, hd = 256, qd = H * hd;
  const mat = (name: string, rows: number, cols: number) => ({
    name,
    rows,
    cols,
    expBase: 0,
    nibbles: new Uint8Array((rows * cols) / 2),
    scales: new Uint8Array((rows * cols) / 32),
  });
  const gain = (n: number) => ({ values: new Int16Array(n), exp: -14 });
  const w: Lut4Weights = {
    ...small,
    shape: { vocab: 258, width: 32, layers: 1, heads: H, kvHeads: H, headDim: hd, ffn: 32, maxPositions },
    embed: mat("embed", 258, 32),
    head: null,
    finalGain: gain(32),
    layers: [{
      q: mat("layers.0.q", qd, 32),
      k: mat("layers.0.k", qd, 32),
      v: mat("layers.0.v", qd, 32),
      o: mat("layers.0.o", 32, qd),
      gate: mat("layers.0.gate", 32, 32),
      up: mat("layers.0.up", 32, 32),
      down: mat("layers.0.down", 32, 32),
      qGain: gain(hd),
      kGain: gain(hd),
    }],
    ropeCos: new Int16Array((maxPositions * hd) / 2),
    ropeSin: new Int16Array((maxPositions * hd) / 2),
  };
  await writeLut4(path, w, { source: "forged", ropeTheta: 10000, rmsNormEps: 1e-6 });
  return path;
}

describe("6. lut4: the engine's state is bounded by the file, the data section is canonical, nothing crashes", () => {
  test("a 10 MiB file claiming 2^14 positions × 128 kv heads of 256 (2 GiB of KV cache) is refused at once", async () => {
    const path = await lut4OfShape(fresh(".lut4"), 1 << 14);
    const size = readFileSync(path).length;
    expect(size).toBeLessThan(12 << 20);
    expect(1 * (1 << 14) * 128 * 257 * 4).toBeGreaterThan(maxCacheBytes(size)); // what the engine would allocate
    for (const read of [() => readLut4(path), () => loadIntEngine(path)]) {
      const e = await cheaply(() => refusal(read(), Lut4Error));
      expect(e.field).toBe("shape");
      expect(e.message).toContain("KV cache");
    }
  });

  test("the same shape with 64 positions (its cache justified by the file) reads and runs", async () => {
    const path = await lut4OfShape(fresh(".lut4"), 64);
    const s = (await loadIntEngine(path)).start();
    expect((await s.feed([1, 2], "last")).length).toBe(258);
  });

  test("forged (data_crc32 recomputed): a nonzero padding byte is refused; one model, one data section", async () => {
    const path = await smallLut4();
    const { header, data } = lut4Parts(new Uint8Array(readFileSync(path)));
    const t = header.tables.find((x: any) => x.span.bytes % 64 !== 0);
    data[t.span.offset + t.span.bytes] = 1;
    writeFileSync(path, lut4Forged(header, data));
    expect((await refusal(readLut4(path), Lut4Error)).message).toContain("padding");
  });

  const forged: [string, (h: any, d: DataView) => void, string][] = [
    ["the exp table rising", (h, d) => d.setInt32(h.tables[0].span.offset + 40, 2 ** 30 - 1, true), "exp"],
    ["a RoPE entry beyond ±2^14", (h, d) => d.setInt16(h.tables[2].span.offset, 16385, true), "rope"],
    ["a SiLU entry beyond ±2^22", (h, d) => d.setInt32(h.tables[1].span.offset, (1 << 22) + 1, true), "silu"],
    ["two same-shape matrices trading spans", (h) => {
      const [k, v] = [h.matrices[2], h.matrices[3]];
      [k.nibbles, v.nibbles] = [v.nibbles, k.nibbles];
    }, "layers.0.k.nibbles"], // k now starts later: the bytes it skips are not padding
    ["a table length of 2^31 with its span to match", (h) => {
      h.tables[0].length = 2 ** 31, h.tables[0].span.bytes = 2 ** 33;
    }, "exp"],
    ["layers = 1024", (h) => (h.shape.layers = 1024), "matrices"],
    ["rms_eps one off rms_norm_eps in fixed point", (h) => (h.rms_eps.mantissa += 1), "rms_eps"],
    ["rms_eps.mantissa below 2^15", (h) => (h.rms_eps = { mantissa: 1, exp: -20 }), "rms_eps.mantissa"],
  ];
  for (const [what, edit, field] of forged) {
    test(`forged: ${what} is refused by field (${field})`, async () => {
      const path = await smallLut4();
      const { header, data } = lut4Parts(new Uint8Array(readFileSync(path)));
      edit(header, new DataView(data.buffer));
      writeFileSync(path, lut4Forged(header, data));
      const e = await cheaply(() => refusal(readLut4(path), Lut4Error));
      expect(e.field).toBe(field);
    });
  }

  test("a refusal of a mismatched field carries what was expected and what was found", async () => {
    const path = await smallLut4();
    const { header, data } = lut4Parts(new Uint8Array(readFileSync(path)));
    const { mantissa, exp } = header.rms_eps;
    header.rms_eps.mantissa = mantissa + 1;
    writeFileSync(path, lut4Forged(header, data));
    const e = await refusal(readLut4(path), Lut4Error);
    expect([e.field, e.found]).toEqual(["rms_eps", `{mantissa: ${mantissa + 1}, exp: ${exp}}`]);
    expect(e.expected.startsWith(`{mantissa: ${mantissa}, exp: ${exp}} (rms_norm_eps = `)).toBe(true);
    header.rms_eps.mantissa = 1;
    writeFileSync(path, lut4Forged(header, data));
    const range = await refusal(readLut4(path), Lut4Error);
    expect([range.field, range.expected, range.found]).toEqual([
      "rms_eps.mantissa",
      "an integer in [32768, 65535]",
      "1",
    ]);
  });

  // Found by the campaign: the spec says every header key is required, and the reader let these two through.
  const provenance: [string, (h: any) => void, string, string, string][] = [
    ["no source", (h) => delete h.source, "source", "a string", "undefined"],
    ["source {}", (h) => (h.source = {}), "source", "a string", "{}"],
    ["source 5", (h) => (h.source = 5), "source", "a string", "5"],
    ["no quantizer", (h) => delete h.quantizer, "quantizer", "an object", "undefined"],
    ["quantizer []", (h) => (h.quantizer = []), "quantizer", "an object", "[]"],
    ["quantizer null", (h) => (h.quantizer = null), "quantizer", "an object", "null"],
    ['quantizer "mse"', (h) => (h.quantizer = "mse"), "quantizer", "an object", '"mse"'],
  ];
  for (const [what, edit, field, expected, found] of provenance) {
    test(`a header with ${what} is refused, naming the field, what was expected and what was found`, async () => {
      const path = await smallLut4();
      const { header, data } = lut4Parts(new Uint8Array(readFileSync(path)));
      edit(header);
      writeFileSync(path, lut4Forged(header, data));
      for (const read of [() => readLut4(path), () => lut4Format.read(path), () => loadIntEngine(path)]) {
        const e = await refusal(read(), Lut4Error);
        expect([e.field, e.expected, e.found]).toEqual([field, expected, found]);
        expect(e.message).toBe(`${path}: ${field}: expected ${expected}, got ${found} (WrongType)`);
      }
    });
  }

  test("the writer always writes source and quantizer, and what it writes reads back", async () => {
    const a = await smallLut4();
    const { header } = lut4Parts(new Uint8Array(readFileSync(a)));
    expect([header.source, typeof header.quantizer, Array.isArray(header.quantizer)]).toEqual([
      "t@step1",
      "object",
      false,
    ]);
    // writeLut4 without a quantizer record writes an empty object, which the reader accepts.
    const b = fresh(".lut4");
    await writeLut4(b, (await readLut4(a)).weights, { source: "", ropeTheta: 10000, rmsNormEps: 1e-6 });
    const back = await readLut4(b);
    expect([back.header.source, back.header.quantizer]).toEqual(["", {}]);
    // A source that is not a string is refused by the writer, before anything is written.
    const c = fresh(".lut4");
    const bad = { source: 7 as unknown as string, ropeTheta: 10000, rmsNormEps: 1e-6 };
    const e = await refusal(writeLut4(c, back.weights, bad), Lut4Error);
    expect([e.field, e.expected, e.found]).toEqual(["source", "a string", "7"]);
    expect(() => readFileSync(c)).toThrow();
  });

  crossProcessTest(
    "header_length and truncation: every length the campaign tries is refused cheaply, the minimal reader too",
    async () => {
      const path = await smallLut4();
      const good = new Uint8Array(readFileSync(path));
      const variants: Uint8Array[] = [good.subarray(0, 15), good.subarray(0, good.length - 64)];
      for (const v of [0n, 2n ** 31n, 2n ** 53n, 2n ** 64n - 1n, BigInt(good.length)]) {
        const b = good.slice();
        new DataView(b.buffer).setBigUint64(8, v, true);
        variants.push(b);
      }
      for (const v of variants) {
        writeFileSync(path, v);
        await cheaply(() => refusal(readLut4(path), Lut4Error));
        const r = spawnSync(process.execPath, ["readers/lut4.ts", path], { encoding: "utf8" });
        expect({ code: r.status, lines: r.stderr.trim().split("\n").length }).toEqual({ code: 1, lines: 1 });
        expect(r.stderr.startsWith(`${path}: `)).toBe(true);
      }
    },
  );
});

describe("7. session files: refused by the typed error before anything is sized from them", () => {
  async function sessionOf() {
    const lut = await smallLut4();
    const engine = await loadIntEngine(lut);
    const s = engine.start();
    s.seed(9);
    await s.feed([10, 20, 30], "none");
    return { engine, shape: sessionShape(await readLut4(lut)), bytes: s.save!() };
  }
  const resealed = (good: Uint8Array, edit: (d: DataView) => void) => {
    const b = good.slice();
    const d = new DataView(b.buffer);
    edit(d);
    d.setUint32(b.length - 4, crc32(b.subarray(0, b.length - 4)) >>> 0, true);
    return b;
  };

  for (const [field, at] of [["position", 64], ["vocab", 44], ["layers", 48], ["head_dim", 56]] as const) {
    for (const v of [2 ** 31, 2 ** 32 - 1]) {
      test(`forged: ${field} = ${v} is refused by field, no allocation`, async () => {
        const { engine, shape, bytes } = await sessionOf();
        const b = resealed(bytes, (d) => d.setUint32(at, v, true));
        const e = await cheaply(() =>
          refusal(Promise.resolve().then(() => decodeSession(b, shape, "s")), SessionError)
        );
        expect(e.field).toBe(field);
        await cheaply(() => refusal(Promise.resolve().then(() => engine.restore!(b, "s")), SessionError));
      });
    }
  }

  test("truncated at every byte of the prefix and at the end: refused (crc32 or length), never another error", async () => {
    const { engine, bytes } = await sessionOf();
    for (const n of [0, 8, 12, 44, 64, 79, 80, 83, 84, bytes.length - 4, bytes.length - 1]) {
      await refusal(Promise.resolve().then(() => engine.restore!(bytes.subarray(0, n), "s")), SessionError);
    }
  });
});

// Found by fuzzing: an unknown key holding 100,000 nested arrays was accepted by every reader (JSON.parse
// takes it), and whatever walked the header after it (info printing it) died of a stack overflow.
describe("8. JSON nested 100,000 deep: every reader that parses JSON refuses it, naming the path and the limit", () => {
  const DEEP = "[".repeat(100_000) + "]".repeat(100_000);
  /** A JSON object's text with one more key, `deep`, holding the 100,000 nested arrays. */
  const withDeep = (json: string) => json.slice(0, json.lastIndexOf("}")) + `,"deep":${DEEP}}`;
  const saysLimit = (e: FormatError) => {
    expect(e.message).toContain(
      "deep[0][0][0][0][0][0][0][0][0][0][0]…: nested deeper than 64 levels (the limit)",
    );
    expect(e.expected).toBe("at most 64 levels of nested arrays and objects");
  };

  crossProcessTest(
    "lut4: the full reader, the descriptor's read and inspect, the integer engine",
    async () => {
      const path = await smallLut4();
      const { header, data } = lut4Parts(new Uint8Array(readFileSync(path)));
      writeFileSync(path, lut4Forged(header, data, withDeep));
      for (const read of [readLut4, lut4Format.read, lut4Format.inspect, loadIntEngine]) {
        const e = await cheaply(() => refusal(read(path), Lut4Error));
        expect(e.field).toBe("header");
        saysLimit(e);
      }
      // The minimal reader does not read the key; it may accept the file, never crash.
      const r = spawnSync(process.execPath, ["readers/lut4.ts", path], { encoding: "utf8" });
      expect([0, 1]).toContain(r.status);
      expect(r.stderr.trim().split("\n").filter(Boolean).length).toBeLessThanOrEqual(1);
    },
  );

  crossProcessTest(
    "safetensors: the full reader refuses (InvalidJson); the minimal reader ends in one line",
    async () => {
      const path = fresh(".safetensors");
      const json = enc.encode(withDeep('{"__metadata__":{"format":"pt"}}'));
      const file = new Uint8Array(8 + json.length);
      new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
      file.set(json, 8);
      writeFileSync(path, file);
      const e = await cheaply(() => refusal(readSafetensors(path), SafetensorsError));
      expect(e.code).toBe("InvalidJson");
      saysLimit(e);
      const r = spawnSync(process.execPath, ["readers/safetensors.ts", path], { encoding: "utf8" });
      expect([0, 1]).toContain(r.status);
      expect(r.stderr.trim().split("\n").filter(Boolean).length).toBeLessThanOrEqual(1);
    },
  );

  test("Hugging Face: config.json and a sharded index are refused", async () => {
    const folder = fresh(".hf");
    await exportHuggingFace(folder, tensors, CFG, { dtype: "f32" });
    const config = join(folder, "config.json");
    const good = readFileSync(config, "utf8");
    writeFileSync(config, withDeep(good));
    for (const read of [importHuggingFace, hfFormat.read, hfFormat.inspect]) {
      const e = await cheaply(() => refusal(read(folder), HuggingFaceError));
      expect(e.code).toBe("InvalidJson");
      saysLimit(e);
    }
    writeFileSync(config, good);
    const index = join(folder, "model.safetensors.index.json");
    writeFileSync(index, withDeep('{"weight_map":{}}'));
    const e = await cheaply(() => refusal(readSafetensorsIndex(index), SafetensorsError));
    expect(e.code).toBe("InvalidJson");
    saysLimit(e);
  });

  test("checkpoint: every reader refuses the header", async () => {
    const path = await checkpointWith(() => {}, withDeep);
    for (const read of Object.values(checkpointReaders)) {
      const e = await cheaply(() => refusal(read(path), CheckpointError));
      expect(e.field).toBe("header");
      saysLimit(e);
    }
  });

  test("64 levels read, 65 do not (the limit is exact)", () => {
    const nest = (n: number) => "[".repeat(n) + "]".repeat(n);
    expect(() => parseStrictJson(nest(64))).not.toThrow();
    expect(() => parseStrictJson(nest(65))).toThrow(StrictJsonError);
    expect(() => parseStrictJson(`{"a":${nest(63)}}`)).not.toThrow();
    expect(() => parseStrictJson(`{"a":${nest(64)}}`)).toThrow(
      "a[0][0][0][0][0][0][0][0][0][0][0]…: nested deeper",
    );
    expect(MAX_JSON_DEPTH).toBe(64);
  });
});

// Float sessions (formats/session/session.md, version 2) and forks on every engine: save after N tokens,
// restore in a fresh process, M more equal one uninterrupted run of N + M — tokens and logits bit for
// bit — on Bun and Deno, with byte-identical files; refusals name the field (tampered, another model,
// another engine, an integer session); a fork continues exactly as its original, independently; a
// rewound session continues exactly as a fresh read of the prefix it kept.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { crc32 } from "node:zlib";
import { join } from "node:path";
import { CHECKPOINT, scratchDir, smallLut4 } from "../helpers/lut4-fixture.ts";
import { createFloatEngine } from "../../engines/float.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { FLOAT_SESSION_PREFIX, floatModelDigest } from "../../formats/session/session.ts";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine, EngineSession } from "../../model/engine.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";

const ROOT = join(import.meta.dir, "../..");
const N = 12, M = 10;
/** A byte prompt, and a Qwen3 prompt's ids (any ids of its vocabulary serve), each 20 tokens. */
const BYTES = [256, ...[..."The jury said it was"].map((c) => c.charCodeAt(0))];
const QWEN3_IDS = [151644, ...Array.from({ length: 19 }, (_, i) => (i * 7919 + 13) % 150000)];

/** `first` (prompt, N tokens, save), `rest` (restore, M), `whole` (N + M): tokens and a logits digest. */
const script = (mode: string, session: string) => `
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { readCheckpoint } from "${ROOT}/formats/checkpoint/checkpoint.ts";
import { createFloatEngine } from "${ROOT}/engines/float.ts";
const run = await readCheckpoint(${JSON.stringify(CHECKPOINT)}, { sections: ["model"] });
const engine = createFloatEngine(run.config, run.model, "ferry.ckpt");
const opts = { temperature: 0.9, topK: 50, minP: 0.02 };
let s;
if (${JSON.stringify(mode)} === "rest") s = engine.restore(readFileSync(${JSON.stringify(session)}), "s");
else { s = engine.start(); s.seed(20261130); await s.feed([256, 84, 104, 101, 32], "none"); }
const out = [], h = createHash("sha256");
const n = ${JSON.stringify(mode)} === "first" ? ${N} : ${JSON.stringify(mode)} === "rest" ? ${M} : ${N + M};
for (let i = 0; i < n; i++) {
  const id = s.pick(opts);
  out.push(id);
  const logits = await s.feed([id], "last");
  // The logits of the M steps after the save point, in both the restored and the whole run.
  if (${JSON.stringify(mode)} === "rest" || i >= ${N}) h.update(new Uint8Array(logits.buffer));
}
if (${JSON.stringify(mode)} === "first") writeFileSync(${JSON.stringify(session)}, s.save());
console.log(JSON.stringify({ tokens: out, logits: h.digest("hex") }));
`;

function runIn(runtime: string, code: string) {
  const args = runtime === "deno" ? ["eval", "--ext=ts", code] : ["--eval", code];
  const r = spawnSync(runtime, args, { encoding: "utf8", cwd: ROOT });
  if (r.status !== 0) throw new Error(`${runtime} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

crossProcessTest(
  "float engine: save after N, restore in a fresh process, M more = N + M uninterrupted; Deno and Bun agree",
  () => {
    const dir = scratchDir(), files: Record<string, string> = {}, runs: Record<string, unknown> = {};
    for (const rt of ["bun", "deno"]) {
      const session = join(dir, `${rt}.session`);
      const first = runIn(rt, script("first", session));
      const rest = runIn(rt, script("rest", session));
      const whole = runIn(rt, script("whole", session));
      expect([...first.tokens, ...rest.tokens]).toEqual(whole.tokens);
      expect(rest.logits).toBe(whole.logits);
      files[rt] = Buffer.from(readFileSync(session)).toString("base64");
      runs[rt] = { first, rest, whole };
    }
    expect(files.deno).toBe(files.bun);
    expect(runs.deno).toEqual(runs.bun);
  },
  180_000,
);

/** M sampled tokens and every step's logits: what a session does next. */
async function continueFor(s: EngineSession, steps: number) {
  const tokens: number[] = [], logits: number[] = [];
  for (let i = 0; i < steps; i++) {
    const id = s.pick({ temperature: 1.1, topP: 0.95 });
    tokens.push(id);
    logits.push(...await s.feed([id], "last"));
  }
  return { tokens, logits };
}

test("in-process save/restore on the float engine: the same tokens and logits bit for bit", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const engine = createFloatEngine(run.config, run.model!, "ferry.ckpt");
  const s = engine.start();
  s.seed(7);
  await s.feed([256, 72, 101, 108, 108, 111], "none");
  await continueFor(s, 5);
  const back = engine.restore!(s.save!(), "s");
  expect(back.position).toBe(s.position);
  expect(back.tokens).toEqual(s.tokens);
  const want = await continueFor(s, M), got = await continueFor(back, M);
  expect(got.tokens).toEqual(want.tokens);
  expect(Float32Array.from(got.logits)).toEqual(Float32Array.from(want.logits));
  // A fresh session saves (position 0) and restores too.
  expect(engine.restore!(engine.start().save!(), "s").position).toBe(0);
});

test("float sessions refused by field: tampered, another model, another engine, an integer session", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const engine = createFloatEngine(run.config, run.model!, "ferry.ckpt");
  const s = engine.start();
  s.seed(3);
  await s.feed([256, 65, 66, 67], "none");
  const good = s.save!();
  const resealed = (edit: (dv: DataView) => void) => {
    const b = Uint8Array.from(good), dv = new DataView(b.buffer);
    edit(dv);
    dv.setUint32(b.length - 4, crc32(b.subarray(0, b.length - 4)) >>> 0, true);
    return b;
  };
  const flipped = Uint8Array.from(good);
  flipped[FLOAT_SESSION_PREFIX + 5] ^= 1;
  const cases: [Uint8Array, RegExp][] = [
    [good.subarray(0, good.length - 10), /crc32|length/],
    [flipped, /crc32/],
    [resealed((dv) => dv.setUint32(8, 3, true)), /version/],
    [resealed((dv) => dv.setUint32(64, 5, true)), /length/],
    [resealed((dv) => dv.setUint32(FLOAT_SESSION_PREFIX, 300, true)), /tokens\[0\]/],
    [resealed((dv) => dv.setUint32(88, 0, true)), /flags/],
    [resealed((dv) => dv.setUint32(84, 2, true)), /engine: expected 1 \(float\), got 2 \(webgpu/],
    [resealed((dv) => [68, 72, 76, 80].forEach((o) => dv.setUint32(o, 0, true))), /rng/],
    [resealed((dv) => dv.setFloat32(FLOAT_SESSION_PREFIX + 4 * 4, NaN, true)), /logits/],
    // The last value before the CRC is the last layer's.
    [
      resealed((dv) => dv.setFloat32(dv.byteLength - 8, Infinity, true)),
      new RegExp(`layers\\[${run.config.num_hidden_layers - 1}\\]\\.values`),
    ],
  ];
  for (const [bytes, field] of cases) expect(() => engine.restore!(bytes, "s")).toThrow(field);
  // Another model: one weight changed changes the digest.
  const other = run.model!.map((t) => ({ ...t, data: t.data.slice() }));
  other[0].data[0] += 1e-3;
  expect(floatModelDigest(run.config, other)).not.toBe(floatModelDigest(run.config, run.model!));
  expect(() => createFloatEngine(run.config, other, "other").restore!(good, "s")).toThrow(/model_sha256/);
  // An integer session on the float engine, and a float one on the integer engine: the version says which.
  const int = await loadIntEngine(await smallLut4());
  const intBytes = int.start().save!();
  expect(() => engine.restore!(intBytes, "s")).toThrow(
    /version: expected 2 \(a float-engine session\), got 1/,
  );
  expect(() => int.restore!(good, "s")).toThrow(/version: expected 1 \(an integer-engine session\), got 2/);
  // Nothing was touched: the live session continues as a fresh restore does.
  expect(engine.restore!(good, "s").pick({ temperature: 1 })).toBe(s.pick({ temperature: 1 }));
});

test("fork on the float and integer engines: the same continuation bit for bit, and independent", async () => {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const engines = [
    createFloatEngine(run.config, run.model!, "ferry.ckpt"),
    await loadIntEngine(await smallLut4()),
  ];
  for (const engine of engines) {
    const s = engine.start();
    s.seed(11);
    await s.feed([256, 84, 104, 101], "none");
    await continueFor(s, 4);
    const copy = s.fork!(), saved = s.save!();
    expect(copy.tokens).toEqual(s.tokens);
    const a = await continueFor(s, M);
    // The original moved on; the fork still continues from where it was taken, as a restore does.
    const b = await continueFor(copy, M), c = await continueFor(engine.restore!(saved, "s"), M);
    expect(`${engine.kind} ${b.tokens}`).toBe(`${engine.kind} ${a.tokens}`);
    expect(Float32Array.from(b.logits)).toEqual(Float32Array.from(a.logits));
    expect(c.tokens).toEqual(a.tokens);
    expect(copy.position).toBe(s.position);
    // Independent: feeding the fork leaves the original where it was.
    const at = s.position;
    await copy.fork!().feed([65, 66], "none");
    expect(s.position).toBe(at);
  }
});

test(
  "rewind on the float and integer engines (byte model and a reduced Qwen3): bit-identical to a fresh prefill of the prefix",
  async () => {
    const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
    const qwen3 = await qwen3Folder({ peaked: true });
    const cases: [string, Engine, number[]][] = [
      ["float byte", createFloatEngine(run.config, run.model!, "ferry.ckpt"), BYTES],
      ["int byte", await loadIntEngine(await smallLut4()), BYTES],
      ["float qwen3", await loadEngine(qwen3, "float"), QWEN3_IDS],
      ["int qwen3", await loadEngine(qwen3, "int"), QWEN3_IDS],
    ];
    for (const [name, engine, ids] of cases) {
      const k = 9, rest = ids.slice(k + 5, k + 11);
      // The whole prompt read in one batch, then cut back to its first k tokens.
      const cut = engine.start();
      cut.seed(4);
      await cut.feed(ids.slice(0, k + 5), "none");
      await continueFor(cut, 3);
      cut.rewind!(k);
      expect(`${name} ${cut.position} ${cut.tokens}`).toBe(`${name} ${k} ${ids.slice(0, k)}`);
      // No distribution until the next feed: pick, logprobs and save refuse.
      expect(() => cut.pick({})).toThrow(/rewind/);
      expect(() => cut.logprobs([1], 1)).toThrow(/rewind/);
      expect(() => cut.save!()).toThrow(/rewind/);
      expect(() => cut.rewind!(k + 1)).toThrow(RangeError);
      expect(() => cut.rewind!(-1)).toThrow(RangeError);
      cut.seed(4); // the draws above moved its sampler on; the rewind keeps the sampler's state
      // Only the prefix, read fresh.
      const fresh = engine.start();
      fresh.seed(4);
      await fresh.feed(ids.slice(0, k), "none");
      const a = await cut.feed(rest, "last"), b = await fresh.feed(rest, "last");
      expect(`${name} ${a.every((v, i) => Object.is(v, b[i]))}`).toBe(`${name} true`);
      expect(Buffer.from(cut.save!()).equals(Buffer.from(fresh.save!()))).toBe(true);
      expect((await continueFor(cut, 4)).tokens).toEqual((await continueFor(fresh, 4)).tokens);
    }
  },
  60_000,
);

// Sessions: N tokens, save, restore in a fresh process, M more equals one uninterrupted run of N + M;
// Deno and Bun write byte-identical session files and pick identical tokens; a session for another
// model, a truncated or tampered file, or fields that disagree are refused before anything changes;
// saves are atomic.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { crc32 } from "node:zlib";
import { join } from "node:path";
import { scratchDir, smallLut4 } from "../helpers/lut4-fixture.ts";
import { readLut4, writeLut4 } from "../../formats/lut4/lut4.ts";
import { SESSION_PREFIX, writeSessionFile } from "../../formats/session/session.ts";
import { intEngineFromFile } from "../../engines/int/engine.ts";

const ROOT = join(import.meta.dir, "../..");
const N = 12, M = 10;

/** A script run by either runtime: `first` (prompt, N tokens, save), `rest` (restore, M), `whole` (N + M). */
const script = (lut: string, mode: string, session: string) => `
import { loadIntEngine } from "${ROOT}/engines/int/engine.ts";
import { writeSessionFile } from "${ROOT}/formats/session/session.ts";
import { readFileSync } from "node:fs";
const engine = await loadIntEngine(${JSON.stringify(lut)});
const opts = { temperature: 0.9, topK: 50, minP: 0.02 };
let s;
if (${JSON.stringify(mode)} === "rest") s = engine.restore(readFileSync(${JSON.stringify(session)}), "s");
else { s = engine.start(); s.seed(20261130); await s.feed([256, 84, 104, 101, 32], "none"); }
const out = [];
const n = ${JSON.stringify(mode)} === "first" ? ${N} : ${JSON.stringify(mode)} === "rest" ? ${M} : ${N + M};
for (let i = 0; i < n; i++) { const id = s.pick(opts); out.push(id); await s.feed([id], "none"); }
if (${JSON.stringify(mode)} === "first") await writeSessionFile(${JSON.stringify(session)}, s.save());
console.log(out.join(","));
`;

function runIn(runtime: string, code: string): string {
  const args = runtime === "deno" ? ["eval", "--ext=ts", code] : ["--eval", code];
  const r = spawnSync(runtime, args, { encoding: "utf8", cwd: ROOT });
  if (r.status !== 0) throw new Error(`${runtime} failed: ${r.stderr}`);
  return r.stdout.trim();
}

crossProcessTest(
  "save after N, restore in a fresh process, M more = N + M uninterrupted; Deno and Bun agree byte for byte",
  async () => {
    const lut = await smallLut4();
    const dir = scratchDir();
    const results: Record<string, { first: string; rest: string; whole: string; file: string }> = {};
    for (const rt of ["bun", "deno"]) {
      const session = join(dir, `${rt}.session`);
      const first = runIn(rt, script(lut, "first", session));
      const rest = runIn(rt, script(lut, "rest", session));
      const whole = runIn(rt, script(lut, "whole", session));
      expect(`${first},${rest}`).toBe(whole);
      expect(whole.split(",").length).toBe(N + M);
      results[rt] = {
        first,
        rest,
        whole,
        file: createHash("sha256").update(readFileSync(session)).digest("hex"),
      };
    }
    expect(results.deno).toEqual(results.bun);
    expect(readdirSync(dir).filter((f) => f.includes(".tmp"))).toEqual([]);
  },
  180_000,
);

test(
  "sessions for another model, truncated, tampered or inconsistent are refused before any change",
  async () => {
    const file = await readLut4(await smallLut4());
    const engine = intEngineFromFile(file);
    const s = engine.start();
    s.seed(3);
    await s.feed([256, 65, 66, 67], "none");
    const good = s.save!();
    const resealed = (edit: (b: Uint8Array, dv: DataView) => void) => {
      const b = Uint8Array.from(good);
      const dv = new DataView(b.buffer);
      edit(b, dv);
      dv.setUint32(b.length - 4, crc32(b.subarray(0, b.length - 4)) >>> 0, true);
      return b;
    };
    // Another model: the same weights with the head stored separately have another SHA-256.
    const other = join(scratchDir(), "other.lut4");
    await writeLut4(other, {
      ...file.weights,
      head: { ...file.weights.embed, name: "head" },
      finalGain: null,
    }, { source: "x", ropeTheta: 10000, rmsNormEps: 1e-6 });
    const otherEngine = intEngineFromFile(await readLut4(other));
    expect(() => otherEngine.restore!(good, "s")).toThrow(/model_sha256/);
    const cases: [Uint8Array, RegExp][] = [
      [good.subarray(0, good.length - 10), /crc32|length/],
      [
        (() => {
          const b = Uint8Array.from(good);
          b[SESSION_PREFIX + 2] ^= 4;
          return b;
        })(),
        /crc32/,
      ],
      [resealed((_, dv) => dv.setUint32(64, 5, true)), /length/], // position disagrees with the size
      [resealed((_, dv) => dv.setUint32(SESSION_PREFIX, 300, true)), /tokens\[0\]/],
      [resealed((_, dv) => dv.setUint32(76, 0, true)), /flags/],
      [resealed((_, dv) => dv.setUint32(44, 259, true)), /vocab/],
      [resealed((b, dv) => dv.setInt16(b.length - 4 - 2 * 2 * 4 - 2, 4000, true)), /values|value_exp|keys/],
      [
        resealed((_, dv) => {
          dv.setInt32(68, 0, true);
          dv.setInt32(72, 0, true);
        }),
        /rng/,
      ],
    ];
    for (const [bytes, field] of cases) expect(() => engine.restore!(bytes, "s")).toThrow(field);
    // The live session is untouched and still continues as before.
    const again = engine.restore!(good, "s");
    expect(again.pick({ temperature: 1 })).toBe(s.pick({ temperature: 1 }));
    expect(again.position).toBe(4);
  },
  180_000,
);

test("writeSessionFile replaces a file atomically and leaves no temporary file", async () => {
  const dir = scratchDir();
  const path = join(dir, "a.session");
  await writeSessionFile(path, new Uint8Array([1, 2, 3]));
  await writeSessionFile(path, new Uint8Array([4, 5]));
  expect(Array.from(readFileSync(path))).toEqual([4, 5]);
  expect(readdirSync(dir)).toEqual(["a.session"]);
}, 180_000);

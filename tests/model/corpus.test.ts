// The train / held-out split of the Brown corpus: what docs/training.md says about it is what loadBrown does.
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { brownDir, evalWindows, HELD_OUT_EVERY, loadBrown, untag } from "../../model/corpus.ts";

const dir = brownDir();
const names = readdirSync(dir).filter((n) => /^c[a-r]\d\d$/.test(n)).sort();
const heldOutNames = names.filter((_, i) => i % HELD_OUT_EVERY === HELD_OUT_EVERY - 1);
const PAGE = readFileSync("docs/training.md", "utf8");

/** Genre letter → name, from the corpus's own CONTENTS file ("M: FICTION: SCIENCE"). */
function genres(): Map<string, string> {
  const out = new Map<string, string>();
  const contents = readFileSync(join(dir, "CONTENTS"), "utf8");
  for (const line of contents.slice(0, contents.indexOf("LIST OF TEXTS")).split("\n")) {
    const m = /^([A-R])[.:] (.+)$/.exec(line.trim());
    if (m) out.set(m[1].toLowerCase(), m[2]);
  }
  return out;
}

test("the split: 500 documents, every 20th held out, 25 in all, the texts loadBrown returns", async () => {
  const corpus = await loadBrown();
  expect(names.length).toBe(500);
  expect(corpus.documents).toBe(500);
  expect(heldOutNames.length).toBe(25);
  const text = (list: string[]) =>
    list.map((n) => untag(readFileSync(join(dir, n), "utf8"))).join("\n\n") + "\n";
  const enc = new TextEncoder();
  expect(Buffer.from(corpus.heldOut).equals(Buffer.from(enc.encode(text(heldOutNames))))).toBe(true);
  expect(
    Buffer.from(corpus.train).equals(
      Buffer.from(enc.encode(text(names.filter((n) => !heldOutNames.includes(n))))),
    ),
  ).toBe(true);
  const says = "every 20th document — 25 documents, 5%";
  expect(PAGE.replace(/\s+/g, " ").includes(says) ? says : `docs/training.md does not say: ${says}`).toBe(
    says,
  );
}, 30_000);

test(
  "no held-out document reaches training: no 64-byte piece of any of them (one per KiB) occurs in training",
  async () => {
    const { train } = await loadBrown();
    const trainBuf = Buffer.from(train.buffer, train.byteOffset, train.byteLength);
    const leaks: string[] = [];
    let pieces = 0;
    for (const n of heldOutNames) {
      const doc = Buffer.from(untag(readFileSync(join(dir, n), "utf8")));
      for (let at = 0; at + 64 <= doc.length; at += 1024) {
        pieces++;
        if (trainBuf.indexOf(doc.subarray(at, at + 64)) >= 0) leaks.push(`${n}@${at}`);
      }
    }
    expect(pieces).toBeGreaterThan(250);
    expect(leaks).toEqual([]);
  },
  30_000,
);

test(
  "the held-out documents cover 14 of the 15 genres, all but science fiction, as docs/training.md says",
  () => {
    const all = genres();
    expect(all.size).toBe(15);
    const covered = new Set(heldOutNames.map((n) => n[1]));
    expect(covered.size).toBe(14);
    const missing = [...all.keys()].filter((g) => !covered.has(g)).map((g) => all.get(g));
    expect(missing).toEqual(["FICTION: SCIENCE"]);
    expect(names.filter((n) => n[1] === "m").length).toBe(6);
    const says = "from 14 of the 15 genres (all but science fiction, whose 6 documents are all trained on)";
    expect(PAGE.replace(/\s+/g, " ").includes(says) ? says : `docs/training.md does not say: ${says}`).toBe(
      says,
    );
  },
  30_000,
);

test(
  "the 64 evaluation windows are held-out text only: each lies in the held-out text and none occurs in training",
  async () => {
    const { train, heldOut } = await loadBrown();
    const windows = evalWindows(heldOut);
    expect(windows.length).toBe(64);
    const trainBuf = Buffer.from(train.buffer, train.byteOffset, train.byteLength);
    const heldBuf = Buffer.from(heldOut.buffer, heldOut.byteOffset, heldOut.byteLength);
    for (const w of windows) {
      expect(w.length).toBe(256);
      expect(w.buffer).toBe(heldOut.buffer); // a view of the held-out bytes, not a copy of something else
      expect(heldBuf.indexOf(Buffer.from(w))).toBeGreaterThanOrEqual(0);
      expect(trainBuf.indexOf(Buffer.from(w))).toBe(-1);
    }
    // Evenly spread: the first starts at the start of the held-out text, the last ends at its end.
    expect(windows[0].byteOffset).toBe(heldOut.byteOffset);
    expect(windows[63].byteOffset + 256).toBe(heldOut.byteOffset + heldOut.length);
  },
  30_000,
);

// A seeded, bounded mutation campaign per format (scripts/tools/fuzz.ts), full and minimal readers. The long
// campaign (100,000 cases per format) and its counts are in docs/hostile-input.md; this one keeps the
// property from regressing: no reader crashes, hangs or over-allocates, and every change a full reader
// accepts is one the format's explanation covers (a forged checksum, or something no checksum covers).
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { FORMATS } from "../../formats/mod.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
// The campaign's targets, as the fuzzer lists them: every registered format's fuzz hook, then the other
// file kinds (checkpoint, session). Derived, not written down: a new format is fuzzed here by registering.
const listed = spawnSync(process.execPath, ["scripts/tools/fuzz.ts", "--list"], {
  cwd: ROOT,
  encoding: "utf8",
});
const TARGETS: string[] = JSON.parse(listed.stdout);
const CASES = 300, SEED = 20261130;
// lut4 runs three full readers (one a forward pass) and a minimal reader that prints every table: fewer cases.
const CASES_OF: Record<string, number> = { lut4: 180, "lut4-tokenizer": 180 };

interface Row {
  format: string;
  reader: string;
  counts: Record<string, number>;
  explained: Record<string, number>;
  examples: Array<{ case: number; outcome: string; kind: string; detail?: string }>;
  differentExamples: Array<{ case: number; kind: string; why?: string }>;
}

function campaign(format: string, cases: number): Row[] {
  const r = spawnSync(
    process.execPath,
    [
      "scripts/tools/fuzz.ts",
      "--format",
      format,
      "--cases",
      String(cases),
      "--seed",
      String(SEED),
      "--json",
      "--timeout",
      "20000",
    ],
    { cwd: ROOT, encoding: "utf8", maxBuffer: 64 << 20 },
  );
  if (r.status !== 0 && r.status !== 1) throw new Error(`fuzz.ts exited ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout).results;
}

test("the campaign attacks every registered format, and the other file kinds", () => {
  expect(listed.status).toBe(0);
  expect(TARGETS).toEqual(expect.arrayContaining(FORMATS.map((f) => f.name)));
  expect(TARGETS).toEqual(expect.arrayContaining(["checkpoint", "session", "safetensors"]));
  expect(new Set(TARGETS).size).toBe(TARGETS.length);
});

describe(`scripts/tools/fuzz.ts, ${CASES} cases per format (lut4 ${CASES_OF.lut4}), seed ${SEED}`, () => {
  for (const format of TARGETS) {
    const CASES = CASES_OF[format] ?? 300;
    test(
      `${format}: every reader refuses cleanly or returns a result; a full reader's changed result is explained`,
      () => {
        const rows = campaign(format, CASES);
        expect(rows.length).toBeGreaterThan(0);
        for (const row of rows) {
          const label = `${format} ${row.reader}`;
          const minimal = row.reader === "minimal";
          const total = Object.values(row.counts).reduce((a, b) => a + b, 0);
          expect({ label, total }).toEqual({ label, total: CASES });
          // Nothing but refusals and results: no other exception, no hang, no allocation the file did not justify.
          expect({
            label,
            other: row.counts.other,
            timeout: row.counts.timeout,
            oversize: row.counts.oversize,
            examples: row.examples,
          })
            .toEqual({ label, other: 0, timeout: 0, oversize: 0, examples: [] });
          // The campaign reached both sides: it refused most files and accepted some. A minimal reader
          // reads fewer sections (none of a tokenizer target's tokenizer section), so about half of its
          // mutations pass it by design: a third is its floor.
          expect({ label, refused: row.counts.refused > CASES / (minimal ? 3 : 2) }).toEqual({
            label,
            refused: true,
          });
          expect(row.counts.identical + row.counts.different).toBeGreaterThan(0);
          if (!minimal) {
            const unexplained = row.differentExamples.filter((d) => !d.why);
            expect({ label, unexplained }).toEqual({ label, unexplained: [] });
          }
        }
      },
      120_000,
    );
  }
});

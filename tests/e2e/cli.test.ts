// What every command line shares (scripts/cli.ts), as a user meets it, under Deno and Bun: an unknown
// option or an unknown value of an enumerated one is one line with "did you mean" and exit 2; a missing
// input is one sentence (formats/io.ts) and exit 1, whichever command opens it; --help exits 0. And
// info's one layout for every format, its --json, and a header too deep for recursion. (Tests may not
// import scripts/, so each is asserted through the commands.)
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { exportCheckpoint } from "../../formats/export.ts";
import { formatOf } from "../../formats/mod.ts";
import { writeCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { PRESETS } from "../../model/config.ts";
import { initParams } from "../../model/init.ts";
import { FormatError } from "../../model/error.ts";

const ROOT = join(import.meta.dir, "../..");
const dir = mkdtempSync(join(tmpdir(), "ferry-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Runtime = "deno" | "bun";
const RUNTIMES: Runtime[] = ["deno", "bun"];
type Result = { code: number | null; out: string; err: string };

/** Runs `script args` under a runtime, several at a time (each command start is most of the time here). */
function runAll(jobs: Array<[Runtime, string, string[]]>, width = 4): Promise<Result[]> {
  const one = ([runtime, script, args]: [Runtime, string, string[]]) =>
    new Promise<Result>((resolve) => {
      const argv = runtime === "deno" ? ["run", "-A", script, ...args] : [script, ...args];
      execFile(
        runtime,
        argv,
        { cwd: ROOT, timeout: 50_000, maxBuffer: 1 << 26, env: { ...process.env, NO_COLOR: "1" } },
        (e, out, err) => resolve({ code: e ? (typeof e.code === "number" ? e.code : null) : 0, out, err }),
      );
    });
  const lanes = Array.from({ length: width }, () => Promise.resolve());
  return Promise.all(jobs.map((job, i) => {
    const lane = lanes[i % width].then(() => one(job));
    lanes[i % width] = lane.then(() => undefined);
    return lane;
  }));
}

/** Every job's result as `runtime script args -> exit N: first stderr line`, for one readable failure. */
function said(jobs: Array<[Runtime, string, string[]]>, results: Result[]): string[] {
  return results.map((r, i) =>
    `${jobs[i][0]} ${jobs[i][1]} ${jobs[i][2].join(" ")} -> exit ${r.code}: ${r.err.split("\n")[0]}`
  );
}

// Every user command, with a typo of one of its own options and the option meant.
const COMMANDS: Array<[script: string, typo: string, meant: string]> = [
  ["scripts/export.ts", "--fromat", "--format"],
  ["scripts/generate.ts", "--promt", "--prompt"],
  ["scripts/info.ts", "--jsno", "--json"],
  ["scripts/eval.ts", "--windws", "--windows"],
  ["scripts/measure.ts", "--windws", "--windows"],
  ["scripts/gap.ts", "--haed", "--head"],
  ["scripts/train.ts", "--stpes", "--steps"],
  ["scripts/chat.ts", "--prot", "--port"],
  ["scripts/tools/fuzz.ts", "--seeed", "--seed"],
];

describe("unknown options and values", () => {
  test(
    "the suggestion: within two edits (a swap is one) or the only completion of a prefix; else none",
    async () => {
      const typos: Array<[string, string | undefined]> = [
        ["--fromat", "--format"], // a swap
        ["--formt", "--format"], // a deletion
        ["--inptu", "--input"],
        ["--form", "--format"], // two edits, and a prefix
        ["--pre", "--preset"], // three edits, but the only option it begins
        ["--zzzzzz", undefined],
        ["--o", "--output"], // nothing within two edits, but the only option it begins
      ];
      const jobs = typos.map(([t]) => ["bun", "scripts/export.ts", [t]] as [Runtime, string, string[]]);
      jobs.push(["bun", "scripts/export.ts", ["--format", "dmexp", "--dtype", "f8"]]); // f16 and f32 tie
      const results = await runAll(jobs);
      expect(results.map((r) => r.err.split("\n")[0])).toEqual([
        ...typos.map(([t, m]) => `error: unknown option ${t}${m ? ` (did you mean ${m}?)` : ""}`),
        "error: --dtype f8: no format stores it (dmexp: f32/f16/bf16)",
      ]);
    },
    120_000,
  );

  test("every command names an unknown option and the one meant, in one line, exit 2", async () => {
    const jobs: Array<[Runtime, string, string[]]> = [];
    for (const runtime of RUNTIMES) {
      for (const [script, typo] of COMMANDS) jobs.push([runtime, script, [typo, "x"]]);
      jobs.push([runtime, "scripts/export.ts", ["--zzzzzz"]]);
    }
    const results = await runAll(jobs);
    const want = jobs.map(([, script, [typo]]) => {
      const meant = COMMANDS.find(([s, t]) => s === script && t === typo)?.[2];
      return `exit 2: error: unknown option ${typo}${meant ? ` (did you mean ${meant}?)` : ""}`;
    });
    expect(results.map((r) => `exit ${r.code}: ${r.err.split("\n")[0]}`)).toEqual(want);
    for (const r of results) {
      expect(r.out).toBe("");
      expect(r.err.trimEnd().split("\n").length).toBeLessThanOrEqual(2); // the line, and where the help is
    }
  }, 240_000);

  test(
    "an unknown value of an enumerated option suggests the value meant; a value missing is said, exit 2",
    async () => {
      const cases: Array<[string, string[], string]> = [
        [
          "scripts/export.ts",
          ["--format", "gguff"],
          "--format gguff: unknown (expected one of: all, dmexp, hf, gguf, f64lines, lut4; did you mean gguf?)",
        ],
        ["scripts/export.ts", ["--dtype", "bf61"], "did you mean bf16?"],
        ["scripts/export.ts", ["--preset", "defualt"], "did you mean default?"],
        [
          "scripts/generate.ts",
          ["x.gguf", "--prompt", "a", "--engine", "flaot"],
          "--engine flaot: unknown (expected one of: float, int, webgpu; did you mean float?)",
        ],
        ["scripts/eval.ts", ["--weights", "emaa"], "did you mean ema?"],
        [
          "scripts/generate.ts",
          ["x.gguf", "--prompt", "--max-tokens", "3"],
          "--prompt needs a value, got option --max-tokens",
        ],
        ["scripts/info.ts", ["x.gguf", "--json=yes"], "option --json takes no value"],
        ["scripts/gap.ts", ["--head", "tide"], "did you mean tied?"],
        ["scripts/measure.ts", ["--kernels", "wsam"], "did you mean wasm?"],
        ["scripts/measure.ts", ["--only", "gguf:q8_1"], "did you mean gguf:q8_0?"],
        ["scripts/train.ts", ["--out", "x.ckpt", "--preset", "tinny"], "did you mean tiny?"],
      ];
      const jobs = RUNTIMES.flatMap((rt) => cases.map(([s, a]) => [rt, s, a] as [Runtime, string, string[]]));
      const results = await runAll(jobs);
      const got = results.map((r, i) => `exit ${r.code}: ${r.err.includes(cases[i % cases.length][2])}`);
      expect(said(jobs, results).filter((_, i) => got[i] !== "exit 2: true")).toEqual([]);
    },
    240_000,
  );

  test(
    "a missing or extra argument is the error, the Usage line and where the rest is: exit 2, no help dump",
    async () => {
      const cases: Array<[string, string[], string]> = [
        ["scripts/info.ts", [], "error: expected one FILE, got 0"],
        ["scripts/generate.ts", ["x.gguf"], "error: --prompt is required"],
        ["scripts/export.ts", ["x.ckpt"], "error: unexpected argument x.ckpt (use --input)"],
      ];
      const jobs = RUNTIMES.flatMap((rt) => cases.map(([s, a]) => [rt, s, a] as [Runtime, string, string[]]));
      const results = await runAll(jobs);
      expect(results.map((r) => [r.code, ...r.err.trimEnd().split("\n").map((l) => l.split(" ")[0])]))
        .toEqual(
          jobs.map(() => [2, "error:", "Usage:", "(--help"]),
        );
      expect(results.map((r) => r.err.split("\n")[0])).toEqual(
        jobs.map((_, i) => cases[i % cases.length][2]),
      );
    },
    120_000,
  );
});

describe("--help and --json", () => {
  test(
    "every command prints its usage for --help and exits 0; the data-printing ones take --json",
    async () => {
      const jobs = RUNTIMES.flatMap((rt) =>
        COMMANDS.map(([s]) => [rt, s, ["--help"]] as [Runtime, string, string[]])
      );
      const results = await runAll(jobs);
      expect(said(jobs, results).filter((_, i) => results[i].code !== 0)).toEqual([]);
      const data = ["export", "info", "eval", "measure", "gap", "train"].map((n) => `scripts/${n}.ts`);
      for (const [i, r] of results.entries()) {
        expect(r.out).toMatch(/Usage: /);
        if (data.includes(jobs[i][1])) {
          expect(`${jobs[i][1]}: ${r.out.includes("--json")}`).toBe(
            `${jobs[i][1]}: true`,
          );
        }
      }
    },
    240_000,
  );
});

describe("a missing input", () => {
  beforeAll(() => {
    mkdirSync(join(dir, "folder.gguf"));
    writeFileSync(join(dir, "file.hf"), "not a folder");
  });

  test(
    "is one sentence from every command that opens one: PATH: no such file (Unreadable), exit 1",
    async () => {
      const nope = (name: string) => join(dir, name);
      const cases: Array<[string, string[], string]> = [
        ["scripts/info.ts", [nope("nope.gguf")], nope("nope.gguf")],
        ["scripts/info.ts", [nope("nope.hf")], nope("nope.hf")],
        ["scripts/info.ts", [nope("nope.f64lines")], nope("nope.f64lines")],
        ["scripts/generate.ts", [nope("nope.gguf"), "--prompt", "a"], nope("nope.gguf")],
        ["scripts/generate.ts", [nope("nope.dmexp"), "--prompt", "a"], nope("nope.dmexp")],
        ["scripts/generate.ts", [nope("nope.lut4"), "--prompt", "a"], nope("nope.lut4")],
        ["scripts/eval.ts", [nope("nope.gguf")], nope("nope.gguf")],
        ["scripts/eval.ts", [nope("nope.ckpt")], nope("nope.ckpt")],
        ["scripts/export.ts", ["--input", nope("nope.ckpt")], nope("nope.ckpt")],
        ["scripts/export.ts", ["--input", nope("nope.gguf"), "--format", "dmexp"], nope("nope.gguf")],
        ["scripts/measure.ts", [nope("nope.ckpt")], nope("nope.ckpt")],
        ["scripts/gap.ts", [nope("nope.ckpt")], nope("nope.ckpt")],
      ];
      const jobs = RUNTIMES.flatMap((rt) => cases.map(([s, a]) => [rt, s, a] as [Runtime, string, string[]]));
      const results = await runAll(jobs);
      expect(results.map((r) => `exit ${r.code}: ${r.err.trimEnd()}`)).toEqual(
        jobs.map((_, i) => `exit 1: error: ${cases[i % cases.length][2]}: no such file (Unreadable)`),
      );
    },
    240_000,
  );

  test("a folder where a file is expected, and a file where a folder is, say so", async () => {
    const jobs: Array<[Runtime, string, string[]]> = RUNTIMES.flatMap((rt) =>
      [
        [rt, "scripts/info.ts", [join(dir, "folder.gguf")]],
        [rt, "scripts/generate.ts", [join(dir, "folder.gguf"), "--prompt", "a"]],
        [rt, "scripts/info.ts", [join(dir, "file.hf")]],
      ] as Array<[Runtime, string, string[]]>
    );
    const results = await runAll(jobs);
    const want = [
      `exit 1: error: ${join(dir, "folder.gguf")}: is a folder, expected a file (Unreadable)`,
      `exit 1: error: ${join(dir, "folder.gguf")}: is a folder, expected a file (Unreadable)`,
      `exit 1: error: ${join(dir, "file.hf")}: is a file, expected a folder (Unreadable)`,
    ];
    expect(results.map((r) => `exit ${r.code}: ${r.err.trimEnd()}`)).toEqual([...want, ...want]);
  }, 120_000);

  test("formatOf refuses it as a FormatError naming the file (field file)", () => {
    let err: unknown;
    try {
      formatOf(join(dir, "nope.gguf"));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FormatError);
    expect((err as FormatError).field).toBe("file");
    expect((err as Error).message).toBe(`${join(dir, "nope.gguf")}: no such file (Unreadable)`);
  });
});

describe("scripts/info.ts", () => {
  const files: string[] = [];
  beforeAll(async () => {
    // Widths in multiples of 32, so lut4 can store it too.
    const cfg = { ...PRESETS.tiny, hidden_size: 32, intermediate_size: 64, head_dim: 8 };
    await writeCheckpoint(join(dir, "m.ckpt"), cfg, { step: 3, model: initParams(cfg, 9) });
    for (const format of ["dmexp", "hf", "gguf", "f64lines", "lut4"]) {
      files.push((await exportCheckpoint({ input: join(dir, "m.ckpt"), output: dir, format })).file);
    }
  });

  test(
    "lays out every format the same way: file, format, bytes (with separators), checks in hex with ok",
    async () => {
      const jobs = files.map((f) => ["bun", "scripts/info.ts", [f]] as [Runtime, string, string[]]);
      const results = await runAll(jobs);
      for (const [i, r] of results.entries()) {
        const lines = r.out.split("\n");
        const where = `${files[i]}: `;
        expect(where + r.code).toBe(where + 0);
        expect(where + lines.slice(0, 4).map((l) => l.split(/\s+/)[0]).join(" ")).toBe(
          where + "file format bytes checks",
        );
        expect(lines[2]).toMatch(/^bytes {12}\d{1,3}(,\d{3})+( |$)/);
        const checks = lines.slice(4, lines.findIndex((l, j) => j > 4 && !l.startsWith("  ")));
        expect(checks.length).toBeGreaterThan(0);
        const verdict = /^ {2}\S+ +(([0-9a-f]{8}|[0-9a-f]{64}) +)?ok\b/; // a 32-bit sum in 8 digits, SHA-256 in 64
        expect(checks.filter((c) => !verdict.test(c)).map((c) => where + c)).toEqual([]);
        const sections = ["checks", "config", "tensors"].map((s) => lines.indexOf(s));
        expect(where + sections.every((at, k) => at > (sections[k - 1] ?? 0))).toBe(where + true);
      }
      const [dmexp, , , f64lines, lut4] = results.map((r) => r.out);
      expect(dmexp).toMatch(/^ {2}crc32 +[0-9a-f]{8} +ok, the payload is intact$/m); // not 0x...
      expect(lut4).toMatch(/^ {2}data_crc32 +[0-9a-f]{8} +ok$/m); // hex, not decimal
      expect(f64lines).toMatch(/^ {2}fnv1a32 +[0-9a-f]{8} +ok, every data line is as written$/m);
    },
    120_000,
  );

  test("--json is the format's inspect() data, the same under Deno and Bun", async () => {
    const jobs = RUNTIMES.flatMap((rt) =>
      files.map((f) => [rt, "scripts/info.ts", [f, "--json"]] as [Runtime, string, string[]])
    );
    const results = await runAll(jobs);
    for (const [i, r] of results.entries()) {
      const path = files[i % files.length];
      expect(r.code).toBe(0);
      const want = JSON.parse(JSON.stringify(await formatOf(path).inspect(path)));
      expect(JSON.parse(r.out)).toEqual(want);
      expect(r.out).toBe(JSON.stringify(want, null, 2) + "\n");
    }
  }, 120_000);

  test(
    "a lut4 header nested 60 deep prints (cut short) and --json writes it whole; 100,000 deep is one refusal",
    async () => {
      const lut4 = files[4];
      const file = readFileSync(lut4);
      const hlen = Number(file.readBigUInt64LE(8));
      const nested = (depth: number) => {
        let header = file.toString("utf8", 16, 16 + hlen).trimEnd().replace(
          /\}$/,
          `,"notes":${"[".repeat(depth)}${"]".repeat(depth)}}`,
        );
        while ((16 + Buffer.byteLength(header)) % 64 !== 0) header += " "; // the data stays 64-byte aligned
        const prefix = Buffer.from(file.subarray(0, 16));
        prefix.writeBigUInt64LE(BigInt(Buffer.byteLength(header)), 8);
        const path = join(dir, `deep${depth}.lut4`);
        writeFileSync(path, Buffer.concat([prefix, Buffer.from(header), file.subarray(16 + hlen)]));
        return path;
      };
      // Within the readers' nesting limit (64, formats/json.ts), info prints without recursion.
      const deep = nested(60);
      const jobs = RUNTIMES.flatMap((rt) =>
        [[rt, "scripts/info.ts", [deep]], [rt, "scripts/info.ts", [deep, "--json"]]] as Array<
          [Runtime, string, string[]]
        >
      );
      const results = await runAll(jobs);
      expect(said(jobs, results).filter((_, i) => results[i].code !== 0)).toEqual([]);
      for (const [i, r] of results.entries()) {
        if (jobs[i][2].length === 1) {
          expect(r.out).toMatch(/^notes {12}\[+/m);
          continue;
        }
        let notes = JSON.parse(r.out).notes, depth = 0;
        while (Array.isArray(notes) && notes.length === 1) notes = notes[0], depth++;
        expect(depth + (Array.isArray(notes) ? 1 : 0)).toBe(60);
      }
      // Past it, the reader refuses the header in one line naming the limit: no stack overflow.
      const deeper = nested(100_000);
      const refusals = await runAll(
        RUNTIMES.map((rt) => [rt, "scripts/info.ts", [deeper]] as [Runtime, string, string[]]),
      );
      for (const r of refusals) {
        expect(r.code).toBe(1);
        expect(r.err.trim().split("\n")).toHaveLength(1);
        expect(r.err).toContain("nested deeper than 64 levels");
      }
    },
    120_000,
  );
});

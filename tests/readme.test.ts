// The README's figures, asserted by running the commands it names, on a reduced budget where the full
// measurement is a benchmark (fewer windows, fewer prompts, ten training steps), and exactly where the
// README states something exact (sizes, zero differences, the training log, the EMA figure).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readCheckpoint } from "../formats/checkpoint.ts";
import { parseGguf } from "../formats/gguf.ts";
import { configParamCount, paramShapes } from "../model/config.ts";

setDefaultTimeout(60_000); // per file: Bun 1.4.5 applies a preload's default to the first test file only

const README = readFileSync("README.md", "utf8");
const CHECKPOINT = "model/default/ferry.ckpt";
const dir = mkdtempSync(join(tmpdir(), "ferry-readme-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function sh(cmd: string, args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 26 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The first fenced block of the README that follows `after`. */
function blockAfter(after: string): string {
  const at = README.indexOf(after);
  expect(at).toBeGreaterThanOrEqual(0);
  const open = README.indexOf("```", at), start = README.indexOf("\n", open) + 1;
  return README.slice(start, README.indexOf("```", start));
}

/** Rows of the README's markdown table that follows `after`, as trimmed cells. */
function tableAfter(after: string): string[][] {
  const at = README.indexOf(after);
  expect(at).toBeGreaterThanOrEqual(0);
  const lines = README.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (let i = first + 2; i < lines.length && lines[i].startsWith("|"); i++) {
    rows.push(lines[i].split("|").slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

const num = (s: string) => Number(s.replaceAll(",", ""));

/** Fails, quoting only `text`, unless the README says it (line breaks count as spaces). */
function readmeSays(text: string): void {
  const flat = README.replace(/\s+/g, " ");
  expect(flat.includes(text) ? text : `README does not say: ${text}`).toBe(text);
}

describe("the main job: deno run -A scripts/export.ts", () => {
  test("prints the README's sizes, and each size is the arithmetic from the parameter count", async () => {
    const out = join(dir, "out");
    const r = sh("deno", ["run", "-A", "scripts/export.ts", "--output", out]);
    expect(r.code).toBe(0);
    // The README shows the output with out/ as the folder.
    expect(r.out.replaceAll(out + "/", "out/")).toBe(blockAfter("The first command prints:"));

    const ck = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
    const P = configParamCount(ck.config);
    expect(P).toBe(468_256);
    readmeSays(`(${P.toLocaleString("en-US")} params`);
    expect(ck.model.reduce((n, t) => n + t.data.length, 0)).toBe(P);
    const size = (f: string) => statSync(join(out, f)).size;

    // dmexp: 24-byte prefix + TOML header + 2 bytes per parameter (README, "### dmexp").
    const dm = readFileSync(join(out, "ferry.bf16.dmexp"));
    const H = dm.readUInt32LE(8);
    expect(Number(dm.readBigUInt64LE(12))).toBe(2 * P);
    expect(size("ferry.bf16.dmexp")).toBe(24 + H + 2 * P);

    // Hugging Face: model.safetensors is 8 + its JSON header + 4 bytes per parameter; the folder's size
    // (what export prints) is that plus the small JSON files beside it.
    const hfDir = join(out, "ferry.f32.hf");
    const st = readFileSync(join(hfDir, "model.safetensors"));
    expect(st.length).toBe(8 + Number(st.readBigUInt64LE(0)) + 4 * P);
    const folder = readdirSync(hfDir).reduce((n, f) => n + statSync(join(hfDir, f)).size, 0);
    expect(r.out).toContain(`${folder.toLocaleString("en-US")} bytes  ${hfDir}`);

    // GGUF f16: every matrix 2 bytes per parameter, every norm vector 4 (kept f32), each tensor padded
    // to 32 bytes, after the header.
    const g = parseGguf(new Uint8Array(readFileSync(join(out, "ferry.f16.gguf"))));
    const shapes = paramShapes(ck.config);
    const matrices = shapes.filter((s) => s.dims.length === 2).reduce((n, s) => n + s.dims[0] * s.dims[1], 0);
    const norms = shapes.filter((s) => s.dims.length === 1).reduce((n, s) => n + s.dims[0], 0);
    expect(matrices + norms).toBe(P);
    expect(g.tensors.reduce((n, t) => n + t.bytes.length, 0)).toBe(2 * matrices + 4 * norms);
    const padded = g.tensors.reduce((n, t) => n + Math.ceil(t.bytes.length / 32) * 32, 0);
    expect(size("ferry.f16.gguf")).toBe(g.dataOffset + padded);
  }, 120_000);
});

describe("what each export costs: deno run -A scripts/measure.ts, on 4 windows and 2 prompts", () => {
  // The README's table is the full run (64 windows, 8 prompts). What does not depend on the budget is
  // asserted exactly (bytes, zero differences, identical continuations); the bits-per-byte bound of the
  // 2-byte formats is asserted at the full 64 windows by the next test.
  type Row = {
    format: string;
    dtype: string;
    bytes: number;
    max_abs_delta: number;
    mean_abs_delta: number;
    top1: number;
    mean_kl: number;
    bpb_gap: number;
    greedy_identical: number;
  };
  let r = { code: null as number | null, out: "", err: "" };
  let result: { windows: number; prompts: number; rows: Row[] } | undefined;
  beforeAll(() => {
    r = sh("deno", ["run", "-A", "scripts/measure.ts", "--windows", "4", "--prompts", "2", "--json"]);
    if (r.code === 0) result = JSON.parse(r.out);
  }, 300_000);
  const readme = tableAfter("Source: held-out");

  test("runs, and writes every format and dtype of the README's table, in its order and at its sizes", () => {
    expect(r.err.includes("Error")).toBe(false);
    expect(r.code).toBe(0);
    expect(result!.windows).toBe(4);
    expect(result!.prompts).toBe(2);
    expect(result!.rows.map((x) => `${x.format} ${x.dtype} ${x.bytes}`)).toEqual(
      readme.map((c) => `${c[0]} ${c[1]} ${num(c[2])}`),
    );
    // Hugging Face's 2-byte files hold dmexp's weights: identical figures, so the 64-window test below
    // need not measure them again.
    for (const d of ["f16", "bf16"]) {
      const pick = (f: string) => {
        const { format: _f, bytes: _b, ...rest } = result!.rows.find((x) => x.format === f && x.dtype === d)!;
        return rest;
      };
      expect(pick("hf")).toEqual(pick("dmexp"));
    }
  });

  test("f32 exports and f64lines are bit-exact: every difference is 0, not small, and every continuation identical", () => {
    const exact = result!.rows.filter((x) => x.dtype === "f32" || x.format === "f64lines");
    expect(exact.map((x) => `${x.format} ${x.dtype}`)).toEqual([
      "dmexp f32",
      "hf f32",
      "gguf f32",
      "f64lines f64",
    ]);
    for (const x of exact) {
      const { format, dtype, max_abs_delta, mean_abs_delta, top1, mean_kl, bpb_gap, greedy_identical } = x;
      expect({ format, dtype, max_abs_delta, mean_abs_delta, top1, mean_kl, bpb_gap, greedy_identical })
        .toEqual({
          format,
          dtype,
          max_abs_delta: 0,
          mean_abs_delta: 0,
          top1: 1,
          mean_kl: 0,
          bpb_gap: 0,
          greedy_identical: 2,
        });
    }
    // The README's rows for them say exactly that.
    for (const c of readme.filter((c) => c[1] === "f32" || c[0] === "f64lines")) {
      expect(c.slice(3).join(" ")).toBe("0.00e+0 0.00e+0 100.00% 0.00e+0 " + c[7] + " +0.0000 8/8");
    }
  });

  test("2-byte formats keep every greedy continuation; f16 costs about a tenth of bf16's logit error", () => {
    const two = result!.rows.filter((x) => x.dtype === "f16" || x.dtype === "bf16");
    expect(two.length).toBe(6);
    for (const x of two) {
      expect(`${x.format} ${x.dtype} ${x.greedy_identical}/2`).toBe(`${x.format} ${x.dtype} 2/2`);
    }
    for (const f of ["dmexp", "hf", "gguf"]) {
      const f16 = two.find((x) => x.format === f && x.dtype === "f16")!;
      const bf16 = two.find((x) => x.format === f && x.dtype === "bf16")!;
      expect(f16.max_abs_delta).toBeGreaterThan(0);
      expect(f16.mean_abs_delta / bf16.mean_abs_delta).toBeLessThan(0.25);
    }
  });

  test("quantized GGUF: Q8_0's KL is under a tenth of Q4_0's, and Q4_0 costs bits per byte", () => {
    const row = (d: string) => result!.rows.find((x) => x.format === "gguf" && x.dtype === d)!;
    expect(row("q8_0").mean_kl).toBeLessThan(row("q4_0").mean_kl / 10);
    expect(row("q4_0").bpb_gap).toBeGreaterThan(0.005);
  });
});

describe("the 2-byte bits-per-byte bound, at the README's full 64 windows", () => {
  // The bound is a property of the 64-window average: single windows move by up to ±1.6e-3 bits per
  // byte under bf16 (measured on the shipped model), so 4 windows cannot test it. Hugging Face's f16
  // and bf16 files hold the same weights as dmexp's (the reduced run above shows identical rows), so
  // dmexp and GGUF (which keeps norms in f32) cover every distinct 2-byte model.
  test(
    "deno run -A scripts/measure.ts --only dmexp:f16,dmexp:bf16,gguf:f16,gguf:bf16: every |gap| within the README's bound",
    () => {
      const r = sh("deno", [
        "run",
        "-A",
        "scripts/measure.ts",
        "--only",
        "dmexp:f16,dmexp:bf16,gguf:f16,gguf:bf16",
        "--prompts",
        "1",
        "--json",
      ]);
      expect(r.code).toBe(0);
      const res = JSON.parse(r.out) as {
        windows: number;
        source_bpb: number;
        rows: Array<{ format: string; dtype: string; bpb_gap: number; greedy_identical: number }>;
      };
      expect(res.windows).toBe(64);
      readmeSays(`**${res.source_bpb.toFixed(4)}**`);
      const bound = Number(/Both 2-byte formats keep bits per byte within (\S+) of/.exec(README)?.[1]);
      expect(bound).toBeGreaterThan(0);
      expect(res.rows.length).toBe(4);
      for (const x of res.rows) {
        expect(
          `${x.format} ${x.dtype} |gap| ${
            Math.abs(x.bpb_gap) <= bound ? "within" : `${x.bpb_gap} beyond`
          } ${bound}`,
        )
          .toBe(`${x.format} ${x.dtype} |gap| within ${bound}`);
        expect(x.greedy_identical).toBe(1);
      }
    },
    300_000,
  );
});

describe("the default model's training figures", () => {
  const log = readFileSync("model/default/ferry.log", "utf8").trimEnd().split("\n");
  const command = blockAfter("It was trained with this command").replace(/\\\n\s*/g, " ").trim().split(/\s+/);

  test(
    "the step count, batch and tokens agree between the README, the command, the log and the checkpoint",
    async () => {
      const ck = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
      const flag = (f: string) => command[command.indexOf(f) + 1];
      const steps = Number(flag("--steps")), batch = Number(flag("--batch")), seq = 256;
      expect(ck.step).toBe(steps);
      expect(log[1]).toBe(
        `# steps=${steps} batch=${batch} seq=${seq} lr=${Number(flag("--lr"))} warmup=${
          flag("--warmup")
        } seed=${flag("--seed")} workers=2`,
      );
      const last = log.at(-1)!.split("\t");
      expect(last.slice(0, 2)).toEqual([String(steps), String(steps * batch * seq)]);
      readmeSays(`${steps.toLocaleString("en-US")} steps × ${batch} sequences × ${seq} bytes`);
      readmeSays(`${(steps * batch * seq).toLocaleString("en-US")} tokens`);
      readmeSays(`model/default/ferry.ckpt@step${steps}`);
    },
    30_000,
  );

  test("the EMA figure: deno run -A scripts/eval.ts --weights ema gives the README's number", () => {
    const r = sh("deno", ["run", "-A", "scripts/eval.ts", "--weights", "ema", "--json"]);
    expect(r.code).toBe(0);
    const res = JSON.parse(r.out) as { weights: string; windows: number; heldout_bpb: number };
    expect(res.weights).toBe("ema");
    expect(res.windows).toBe(64);
    readmeSays(`the EMA copy gives ${res.heldout_bpb.toFixed(4)})`);
  }, 120_000);

  // Ten steps are the least that reach a logged line (the trainer logs every tenth step). tok_per_s is
  // the machine's speed, not the maths, so it is the one column left out.
  for (const [runtime, launch] of [["bun", ["bun"]], ["deno", ["deno", "run", "-A"]]] as const) {
    test(
      `${runtime}: the README's training command, stopped after 10 steps, prints the log's first line to every digit`,
      () => {
        expect(command.slice(0, 2)).toEqual(["bun", "scripts/train.ts"]);
        const out = join(dir, `train-${runtime}`, "ferry.ckpt");
        const args = command.slice(1).map((a, i, all) => (all[i - 1] === "--out" ? out : a));
        // The shipped run predates the WebAssembly kernels: the JavaScript reference reproduces it.
        const r = sh(launch[0], [...launch.slice(1), ...args, "--kernels", "ref", "--stop-after", "10"]);
        expect(r.code).toBe(0);
        const mine = readFileSync(out.replace(/\.ckpt$/, ".log"), "utf8").trimEnd().split("\n");
        expect(mine.length).toBe(4);
        // Today's header also names the kernel set, which the shipped log's header did not yet record.
        expect(mine[1].endsWith(" kernels=ref")).toBe(true);
        mine[1] = mine[1].slice(0, -" kernels=ref".length);
        expect(mine.slice(0, 3)).toEqual(log.slice(0, 3));
        const drop = (line: string) => line.split("\t").filter((_, i) => i !== 5).join("\t");
        expect(log[3].split("\t")[0]).toBe("10");
        expect(drop(mine[3])).toBe(drop(log[3]));
      },
      600_000,
    );
  }
});

describe("every benchmark figure in the README names the command that produced it", () => {
  // [where the figure is, a command that must appear in the same section before it (or right after)]
  const FIGURES: Array<[string, string]> = [
    ["trainer on bun 1.4.5, wasm kernels, default config", "bun scripts/tools/bench-train.ts --kernels wasm"],
    ["form                        M x K x N", "bun scripts/tools/bench-kernels.ts"],
    ["| runtime | engine | decode tok/s", "bun scripts/tools/bench-engine.ts"],
    ["one readback (16 bytes, mapAsync)", "deno run -A scripts/tools/bench-webgpu.ts"],
    ["| run | ok | 429 | hung up", "bun scripts/tools/load-test.ts"],
    ["| format | full reader | refused", "bun scripts/tools/fuzz.ts --cases 100000"],
    ["averaged about", "ferry.log"],
    ["**held-out bits per byte**", "deno run -A scripts/eval.ts"],
    ["the EMA copy gives", "--weights ema"],
    ["| format | dtype | bytes | max abs Δlogit", "deno run -A scripts/measure.ts"],
    ["type    bytes   mean KL", "bun scripts/tools/measure-gguf.ts"],
    ["| plain copy (read + write + fsync + rename)", "deno run -A scripts/tools/bench-dmexp.ts"],
    ["| plain copy (read + write + fsync + rename)", "bun scripts/tools/bench-dmexp.ts"],
    ["f64lines vs JSON, deno", "deno run -A scripts/tools/bench-f64lines.ts"],
    ["f64lines vs JSON, bun", "bun scripts/tools/bench-f64lines.ts"],
  ];
  for (const [figure, cmd] of FIGURES) {
    test(`${figure.slice(0, 40)}… names \`${cmd}\``, () => {
      const at = README.indexOf(figure);
      expect(at).toBeGreaterThanOrEqual(0);
      const sectionStart = README.lastIndexOf("\n#", at);
      const sectionEnd = README.indexOf("\n#", at + 1);
      const section = README.slice(sectionStart, sectionEnd < 0 ? undefined : sectionEnd);
      expect(section.includes(cmd) ? cmd : `not in its section: ${cmd}`).toBe(cmd);
    });
  }
});

// The calibration flags scripts/export.ts and scripts/measure.ts share (scripts/calibration-flags.ts):
// contradicting flags, a bad number and an imatrix nothing would write are usage errors (exit 2) naming
// the flag, before any model is read.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import process from "node:process";

const exportWith = (...args: string[]) =>
  spawnSync(process.execPath, ["scripts/export.ts", "--input", "no-such.ckpt", ...args], {
    encoding: "utf8",
  });

test("contradicting or malformed calibration flags exit 2, saying which", () => {
  const cases: Array<[string[], string]> = [
    [["--calibrate", "0", "--calibration", "x.txt"], "--calibrate 0 turns calibration off"],
    [["--calibrate", "0", "--imatrix-out", "x.gguf"], "--calibrate 0 turns calibration off"],
    [
      ["--calibrate", "3", "--calibration-tokens", "100"],
      "--calibrate N and --calibration-tokens N both set the budget",
    ],
    [["--imatrix", "x.gguf", "--calibration", "x.txt"], "--imatrix FILE replaces calibration"],
    [["--calibrate", "-1"], "--calibrate -1: expected a whole number (0: none)"],
    [["--calibration-tokens", "0"], "--calibration-tokens 0: expected a positive integer"],
    [["--format", "dmexp", "--imatrix-out", "x.gguf"], "--imatrix-out x.gguf: nothing here is calibrated"],
    [["--format", "gguf", "--dtype", "q8_0", "--imatrix-out", "x.gguf"], "nothing here is calibrated"],
  ];
  for (const [args, message] of cases) {
    const r = exportWith(...args);
    expect(r.stderr).toContain(message);
    expect(r.status).toBe(2);
  }
  // A calibrated dtype is accepted (the missing input is what fails, exit 1).
  const ok = exportWith("--format", "gguf", "--dtype", "q4_k_m", "--imatrix-out", "x.gguf");
  expect(ok.stderr).toContain("no-such.ckpt");
  expect(ok.status).toBe(1);
});

// The lut4 projection in WGSL: bit for bit the CPU integer kernel (run under Deno), and audited to hold
// no multiply, divide or float in its source.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { auditWgsl } from "../helpers/wgsl-audit.ts";
import { gpuTest } from "../helpers/webgpu-adapter.ts";
import { LUT4_WGSL } from "../helpers/webgpu-lut4.ts";
import { GEMV } from "../../kernels/webgpu/wgsl.ts";

describe("WGSL integer audit", () => {
  test("tests/helpers/webgpu-lut4.wgsl has no multiply, divide, remainder or float", () => {
    const source = readFileSync(LUT4_WGSL, "utf8");
    expect(source).toContain("fn gemv");
    expect(auditWgsl(source)).toEqual([]);
  });

  test("the scan catches each kind of forbidden token, and ignores comments", () => {
    const cases: [string, string][] = [
      ["let y = a * b;", "*"],
      ["y *= 2;", "*="],
      ["let y = a / b;", "/"],
      ["let y = a % 3u;", "%"],
      ["let v = (*p)[0];", "*"],
      ["var z: f32;", "f32"],
      ["let w = vec4f(0);", "vec4f"],
      ["enable f16;", "enable"],
      ["let a = 1.5;", "1.5"],
      ["let a = 2e3;", "2e3"],
      ["let a = 1f;", "1f"],
      ["let a = 0x1p4;", "0x1p4"],
      ["let d = dot(a, b);", "dot"],
    ];
    for (const [src, token] of cases) expect(auditWgsl(src).map((f) => f.token)).toContain(token);
    expect(auditWgsl("// a * b / c 1.5 f32\n/* x * y /* nested */ 2.0 */\nlet a = 0xff + 12u;")).toEqual([]);
    expect(auditWgsl(GEMV).length).toBeGreaterThan(0); // the float kernels would fail it
  });
});

gpuTest(
  "the WGSL lut4 kernel equals kernels/int/gemv.ts bit for bit, on every lut4 matrix of the default model",
  () => {
    const r = spawnSync("deno", ["run", "-A", "tests/e2e/webgpu-int.deno.ts"], {
      encoding: "utf8",
      timeout: 240_000,
    });
    if (r.status !== 0) throw new Error(`tests/e2e/webgpu-int.deno.ts failed (${r.status}):\n${r.stderr}`);
    const out = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
    expect(out.skip).toBeUndefined(); // the adapter probe found one
    expect(out.mismatch).toBeNull();
    expect(out.compared).toBeGreaterThan(9000);
    expect(out.saturated).toBeGreaterThan(0); // the saturating paths were exercised
    // Every lut4 matrix of the default model (6 layers × 7, and the tied embedding that is also the head).
    expect(out.modelMatrices.length).toBe(43);
    expect(out.modelMatrices).toContain("embed");
    expect(out.modelMatrices).toContain("layers.5.down");
  },
  300_000,
);

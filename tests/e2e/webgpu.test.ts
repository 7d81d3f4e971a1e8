// The WebGPU engine (Deno) against the CPU reference on the default model: logits within a measured
// bound and identical greedy continuations. Where Deno has no adapter (tests/helpers/webgpu-adapter.ts)
// they are reported skipped, with the reason; on a machine without a GPU, `.ci/run` installs lavapipe.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";
import { exportCheckpoint } from "../../formats/export.ts";
import { GpuUnavailable, openGpu } from "../../kernels/webgpu/device.ts";
import { gpuTest } from "../helpers/webgpu-adapter.ts";

/** Largest |logit difference| allowed. Measured 1.5e-5 on lavapipe (logits up to ~20); f32 sums differ. */
const LOGIT_BOUND = 1e-4;

function deno(script: string, timeout = 240_000) {
  const r = spawnSync("deno", ["run", "-A", script], { encoding: "utf8", timeout });
  if (r.status !== 0) throw new Error(`${script} failed (${r.status}):\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

test("under Bun the device factory says WebGPU needs Deno", async () => {
  const err = await openGpu().catch((e) => e);
  expect(err).toBeInstanceOf(GpuUnavailable);
  expect(err.message).toContain("Bun has no WebGPU");
  expect(err.message).toContain("Deno");
});

test("under Deno with no adapter the device factory names the fix", () => {
  // A backend this platform does not have: Deno gets no adapter at all, as on a machine with no driver.
  const r = spawnSync("deno", [
    "eval",
    "--ext=ts",
    `
    import { openGpu } from "./kernels/webgpu/device.ts";
    await openGpu().then((g) => console.log("got " + g.name), (e) => console.log(e.name + ": " + e.message));
  `,
  ], { encoding: "utf8", env: { ...process.env, DENO_WEBGPU_BACKEND: "metal" } });
  expect(r.stdout).toContain("GpuUnavailable: WebGPU is unavailable: Deno found no adapter");
  expect(r.stdout).toContain("apt-get install mesa-vulkan-drivers");
});

describe("WebGPU float engine on the default model", () => {
  let result: any;
  const get = () => result ??= deno("tests/e2e/webgpu-float.deno.ts");

  gpuTest(
    "logits match the CPU engine within the bound; 2 greedy 64-token continuations are identical",
    () => {
      const r = get();
      expect(r.skip).toBeUndefined(); // the adapter probe found one
      console.log(`adapter: ${r.adapter}${r.fallback ? " (software)" : ""}; max |logit diff| ${r.maxDiff}`);
      expect(r.maxLogit).toBeGreaterThan(1);
      expect(r.maxDiff).toBeLessThanOrEqual(LOGIT_BOUND);
      expect(r.gpuTexts.length).toBe(2);
      for (let i = 0; i < 2; i++) {
        expect(r.gpuTexts[i].length).toBe(64);
        expect(r.gpuTexts[i]).toEqual(r.cpuTexts[i]);
      }
    },
    300_000,
  );

  gpuTest(
    "a context longer than one attention tile (1031 positions) matches the CPU within the bound",
    () => {
      const r = get();
      console.log(`1031 positions: max |logit diff| ${r.longDiff}`);
      expect(r.longDiff).toBeLessThanOrEqual(LOGIT_BOUND);
    },
  );

  gpuTest("seeded sampling through the shared generation loop draws the CPU engine's tokens", () => {
    const r = get();
    expect(r.sampled[0].length).toBe(16);
    expect(r.sampled[0]).toEqual(r.sampled[1]);
  });

  gpuTest(
    "bad tokens, a full context, sampling without logits and options out of the contract are refused, leaving the session as it was",
    () => {
      const r = get();
      expect(r.refusals).toEqual([
        "token id 1000 is outside [0, 258)",
        "token id -1 is outside [0, 258)",
        "context full: 2 + 512 positions exceed the cache's 512",
        "webgpu session: this engine reads back only the argmax after feed(tokens, 'none'); feed with 'last' to sample",
        "SamplingError temperature",
        "SamplingError topP",
        "SamplingError seed",
      ]);
      expect(r.after.position).toBe(2);
      expect(r.after.next).toBe(r.after.cpuNext);
    },
  );
});

test(
  "--engine webgpu: generate under Deno gives the float engine's text; under Bun it says to use Deno",
  async () => {
    const dir = mkdtempSync(join(tmpdir(), "ferry-webgpu-cli-"));
    try {
      const file = join(dir, "ferry.f32.dmexp");
      await exportCheckpoint({ output: file, format: "dmexp", dtype: "f32" });
      const args = ["scripts/generate.ts", file, "--prompt", "The jury said", "--max-tokens", "24"];
      const float = spawnSync("deno", ["run", "-A", ...args], { encoding: "utf8" });
      const gpu = spawnSync("deno", ["run", "-A", ...args, "--engine", "webgpu"], { encoding: "utf8" });
      const bun = spawnSync("bun", [...args, "--engine", "webgpu"], { encoding: "utf8" });
      expect(bun.status).toBe(1);
      expect(bun.stderr).toContain("WebGPU is unavailable: Bun has no WebGPU; run this under Deno");
      expect(float.status).toBe(0);
      if (gpu.stderr.includes("WebGPU is unavailable")) {
        console.warn(`webgpu generate skipped: ${gpu.stderr.trim()}`);
        return;
      }
      expect(gpu.status).toBe(0);
      expect(gpu.stderr).toContain("on the webgpu engine");
      expect(float.stdout.length).toBeGreaterThan(10);
      expect(gpu.stdout).toBe(float.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
  120_000,
);

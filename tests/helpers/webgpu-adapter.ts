// Whether Deno can get a WebGPU adapter on this machine, asked once per test file by a Deno child. The
// tests that need one are declared with `gpuTest`: without an adapter they are reported as skipped and
// the reason is printed once, so a machine without a GPU or lavapipe says what it did not run.
import { test } from "bun:test";
import { spawnSync } from "node:child_process";

const PROBE = `import { openGpu } from "./kernels/webgpu/device.ts";
try { await openGpu(); console.log(""); } catch (e) { console.log((e as Error).message); }`;

const probe = spawnSync("deno", ["eval", "--ext=ts", PROBE], { encoding: "utf8", timeout: 60_000 });

/** Why Deno has no WebGPU adapter here, or "" when it has one. */
export const NO_ADAPTER = probe.status === 0
  ? probe.stdout.trim()
  : `the adapter probe (deno eval) failed: ${probe.stderr || probe.error}`;

/** `test` where Deno has a WebGPU adapter; skipped, with the reason printed, where it has none. */
export const gpuTest: typeof test = NO_ADAPTER ? test.skip : test;

if (NO_ADAPTER) console.warn(`WebGPU tests skipped: ${NO_ADAPTER}`);

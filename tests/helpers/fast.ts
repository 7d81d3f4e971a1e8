// The fast loop (`bun run test:fast`, FERRY_FAST=1) runs the quick in-process tests only: tests/setup.ts
// leaves out tests/e2e/ and tests/llama/; a test elsewhere that starts another process (a Deno child, a
// CLI, a server in a child) is declared with `crossProcessTest`, and one that is a measurement in
// miniature (a model run over many calibration or held-out windows) with `slowTest`; the fast loop skips
// both.
import { test } from "bun:test";
import process from "node:process";

/** True in the fast loop. */
export const FAST = process.env.FERRY_FAST === "1";

/** `test`, skipped by the fast loop: for a test that starts another process. */
export const crossProcessTest: typeof test = FAST ? test.skip : test;

/** `test`, skipped by the fast loop: for a test that runs a model over many windows (tens of seconds). */
export const slowTest: typeof test = FAST ? test.skip : test;

// The fast loop (`bun run test:fast`, FERRY_FAST=1) runs the in-process tests only: tests/setup.ts leaves
// out tests/e2e/ and tests/llama/, and a test elsewhere that starts another process (a Deno child, a CLI,
// a server in a child) is declared with `crossProcessTest`, which the fast loop skips.
import { test } from "bun:test";
import process from "node:process";

/** True in the fast loop. */
export const FAST = process.env.FERRY_FAST === "1";

/** `test`, skipped by the fast loop: for a test that starts another process. */
export const crossProcessTest: typeof test = FAST ? test.skip : test;

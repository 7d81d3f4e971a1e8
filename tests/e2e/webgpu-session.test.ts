// WebGPU sessions (Deno; tests/e2e/webgpu-session.deno.ts): save, restore and fork mid-conversation
// continue bit for bit (tokens and logits), after a one-chunk and a multi-chunk prompt; a float-engine
// or tampered session is refused; logprobs are the f64 log-softmax; the GPU's argmax and sampling never
// pick BOS. Where Deno has no adapter they are reported skipped, with the reason
// (tests/helpers/webgpu-adapter.ts).
import { expect } from "bun:test";
import { spawnSync } from "node:child_process";
import { BOS } from "../../model/tokenizer.ts";
import { gpuTest } from "../helpers/webgpu-adapter.ts";

let result: any;
const get = () => {
  if (result) return result;
  const r = spawnSync("deno", ["run", "-A", "tests/e2e/webgpu-session.deno.ts"], {
    encoding: "utf8",
    timeout: 240_000,
  });
  if (r.status !== 0) throw new Error(`webgpu-session.deno.ts failed (${r.status}):\n${r.stderr}`);
  result = JSON.parse(r.stdout.trim().split("\n").at(-1)!);
  // The adapter probe found one, so the script must have run, not skipped.
  if (result.skip) {
    throw new Error(`webgpu-session.deno.ts skipped after the probe found an adapter: ${result.skip}`);
  }
  return result;
};

gpuTest(
  "WebGPU: save/restore and fork continue bit for bit (tokens and logits), after 1 and 3 chunks",
  () => {
    const [short, long] = get().continuations;
    expect(short.position).toBe(10);
    expect(long.position).toBe(304);
    for (const c of [short, long]) {
      expect(c.whole.tokens.length).toBe(10);
      expect(c.restored).toEqual(c.whole);
      expect(c.fork).toEqual(c.whole);
      expect(c.resaved).toBe(true);
    }
  },
  240_000,
);

gpuTest("WebGPU: a float-engine session is refused by its engine field, a tampered one by its CRC-32", () => {
  const [other, tampered] = get().refusals;
  expect(other).toMatch(/engine: expected 2 \(webgpu\), got 1 \(float/);
  expect(tampered).toMatch(/crc32/);
}, 240_000);

gpuTest("WebGPU: logprobs are the f64 log-softmax of the pending logits and sum (exp) to 1", () => {
  const { got, want, sum } = get().logprobs;
  expect(got).toEqual(want);
  expect(Math.abs(sum - 1)).toBeLessThan(1e-9);
  expect(got.top.length).toBe(5);
}, 240_000);

gpuTest(
  "WebGPU: BOS is the forced model's argmax, and neither the GPU's argmax nor sampling picks it",
  () => {
    for (const f of get().forced) {
      expect(f.rawArgmax).toBe(BOS);
      expect(f.greedy.length).toBe(20);
      expect([...f.greedy, ...f.hot].includes(BOS)).toBe(false);
    }
    expect(get().forced[1].hot.length).toBe(40);
  },
  240_000,
);

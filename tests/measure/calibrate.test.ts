// The layer-at-a-time calibration pass (measure/calibrate.ts `calibrationPass`) against the
// window-at-a-time one on the WebAssembly kernel set (`columnImportance`, `inputCovariance`): the same
// statistics bit for bit, in the same order and with the same shared arrays, on 1 and 2 threads, with
// windows of unequal lengths and an untied head; and Deno's statistics against Bun's.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { crossProcessTest } from "../helpers/fast.ts";
import { calibrationPass, columnImportance, inputCovariance } from "../../measure/calibrate.ts";
import { kernelSet } from "../../kernels/kernels.ts";
import { FUZZ_LUT4_CONFIG } from "../../formats/fuzz-kit.ts";
import { initParams } from "../../model/init.ts";
import type { ModelConfig } from "../../model/config.ts";
import { tensorSource } from "../../model/tensor.ts";

const same = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  a.length === b.length && Array.from(a).every((v, i) => Object.is(v, b[i]));

const configs: ModelConfig[] = [
  { ...FUZZ_LUT4_CONFIG, max_position_embeddings: 64 },
  {
    ...FUZZ_LUT4_CONFIG,
    hidden_size: 256,
    intermediate_size: 640,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 64,
    num_hidden_layers: 2,
    max_position_embeddings: 64,
    tie_word_embeddings: false,
  },
];

test("calibrationPass gives the window-at-a-time pass's statistics, bit for bit, on 1 and 2 threads", async () => {
  for (const config of configs) {
    const tensors = initParams(config, 3), V = config.vocab_size;
    const windows = [
      Array.from({ length: 40 }, (_, i) => (i * 7 + 3) % V),
      Array.from({ length: 33 }, (_, i) => (i * 11 + 5) % V),
    ];
    const wasm = kernelSet("wasm");
    const cov = inputCovariance(config, tensors, windows, wasm);
    const imp = columnImportance(config, tensors, windows, wasm);
    for (const threads of [1, 2]) {
      const layers: number[] = [];
      const full = await calibrationPass(config, tensors.map(tensorSource), windows, {
        threads,
        onLayer: (done, total) => layers.push(done, total),
      });
      // Past `spillBytes` the covariances go to a file and come back the same, shared arrays included.
      const spilled = await calibrationPass(config, tensors.map(tensorSource), windows, {
        threads,
        spillBytes: 0,
      });
      expect(spilled.covariance).not.toBeInstanceOf(Map);
      expect([...spilled.covariance!.keys()]).toEqual([...cov.keys()]);
      for (const [name, c] of cov) expect(same(spilled.covariance!.get(name)!, c)).toBe(true);
      const alone = await calibrationPass(config, tensors.map(tensorSource), windows, {
        needs: "importance",
        threads,
      });
      const L = config.num_hidden_layers;
      expect(layers).toEqual(Array.from({ length: L + 1 }, (_, i) => [i + 1, L + 1]).flat());
      expect(alone.covariance).toBeUndefined();
      expect([...full.covariance!.keys()]).toEqual([...cov.keys()]);
      expect([...full.importance.keys()]).toEqual([...imp.keys()]);
      for (const [name, c] of cov) expect(same(full.covariance!.get(name)!, c)).toBe(true);
      for (const [name, v] of imp) {
        expect(same(full.importance.get(name)!, v)).toBe(true);
        expect(same(alone.importance.get(name)!, v)).toBe(true);
      }
      // q, k and v read one input, as gate and up do: one array each.
      for (const { covariance } of [full, spilled]) {
        const c = (n: string) => covariance!.get(`model.layers.${L - 1}.${n}.weight`);
        expect(c("self_attn.k_proj")).toBe(c("self_attn.q_proj"));
        expect(c("mlp.up_proj")).toBe(c("mlp.gate_proj"));
        expect(c("mlp.down_proj")).not.toBe(c("mlp.gate_proj"));
      }
    }
  }
});

const SCRIPT = (root: string) => `
  import { calibrationPass } from ${JSON.stringify(root + "measure/calibrate.ts")};
  import { initParams } from ${JSON.stringify(root + "model/init.ts")};
  import { tensorSource } from ${JSON.stringify(root + "model/tensor.ts")};
  import { createHash } from "node:crypto";
  const config = ${JSON.stringify(configs[1])};
  const windows = [Array.from({ length: 40 }, (_, i) => (i * 7 + 3) % config.vocab_size)];
  const { importance, covariance } = await calibrationPass(config, initParams(config, 3).map(tensorSource), windows, { threads: 2 });
  const h = createHash("sha256");
  for (const m of [importance, covariance]) for (const [k, v] of m) h.update(k).update(new Uint8Array(v.buffer));
  console.log(h.digest("hex"));
`;

crossProcessTest("Deno's calibration pass gives Bun's statistics", () => {
  const root = fileURLToPath(new URL("../../", import.meta.url));
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { encoding: "utf8", cwd: root });
    expect(r.stderr.replace(/^Download .*\n/gm, "")).toBe("");
    expect(r.status).toBe(0);
    return r.stdout.trim();
  };
  const deno = run("deno", ["eval", "--ext=ts", SCRIPT(root)]);
  expect(deno).toMatch(/^[0-9a-f]{64}$/);
  expect(deno).toBe(run("bun", ["--eval", SCRIPT(root)]));
});

// Two slots share one copy of the weights, measured in a spawned chat server: its resident memory
// (VmRSS, the slot workers included) with two slots is within half a copy of the weights of its memory
// with one. The model is a reduced Qwen3 whose 78M-parameter tied embedding makes its bf16 weights
// (about 160 MB, kept as bf16 by the float engine) dwarf a slot's KV cache at 256 positions (1 MB), so
// a slot with its own copy would cost the whole weights again. Bun only: under Deno the resident memory
// of one server moves between runs by more than this margin (its collector runs when it likes; at the
// 0.6B shape docs/chat-server.md gives both runtimes' figures).
import { expect, setDefaultTimeout, test } from "bun:test";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";

setDefaultTimeout(120_000);

const ROOT = join(import.meta.dir, "../..");
const SHAPE = { hidden_size: 512, intermediate_size: 1536, num_attention_heads: 8, num_key_value_heads: 4 };

/** VmRSS of a process, in MB of 2^20 bytes. */
function rssMB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8").split("\n").find((l) => l.startsWith("VmRSS:"));
  return Number(line!.split(/\s+/)[1]) / 1024;
}

/** Starts `scripts/chat.ts` on `slots` slots, asks two short completions, and returns its RSS and start-up line. */
async function serverMemory(model: string, slots: number): Promise<{ rss: number; line: string }> {
  const args = [
    ...["scripts/chat.ts", model, "--parallel", String(slots), "--port", "0"],
    ...["--cache-mb", "0", "--context", "256"],
  ];
  const child = spawn("bun", args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
  try {
    let out = "";
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (d) => {
        out += d;
        const found = out.split("\n").find((l) => l.startsWith("ferry chat: "));
        if (found) resolve(found);
      });
      child.on("close", (code) => reject(new Error(`chat.ts exited ${code} before listening: ${out}`)));
    });
    const url = line.split(/\s+/)[2];
    for (const seed of [1, 2]) {
      const res = await fetch(new URL("v1/completions", url), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "Hello", max_tokens: 4, seed }),
      });
      expect(res.status).toBe(200);
      await res.json();
    }
    return { rss: rssMB(child.pid!), line };
  } finally {
    child.kill();
  }
}

test.skipIf(!existsSync("/proc/self/status"))(
  "a second slot costs well under a copy of the weights (a spawned server's VmRSS, 1 and 2 slots)",
  async () => {
    const folder = await qwen3Folder({ shape: SHAPE });
    const one = await serverMemory(folder, 1);
    const two = await serverMemory(folder, 2);
    const weights = Number(/weights (\d+) MB/.exec(two.line)?.[1]);
    expect(two.line).toContain("one copy for 2 slots");
    expect(weights).toBeGreaterThan(140);
    const said = `2 slots ${two.rss.toFixed(0)} MB, 1 slot ${one.rss.toFixed(0)} MB, weights ${weights} MB`;
    expect(
      `${said}${two.rss - one.rss <= weights / 2 ? "" : ": the second slot costs over half the weights"}`,
    )
      .toBe(said);
    console.log(said);
  },
);

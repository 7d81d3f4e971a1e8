// scripts/chat.ts FOLDER on a reduced Qwen3 folder, under Bun and Deno: it reads the folder's tokenizer,
// applies its chat template with chat_template_kwargs, and its slot workers (Bun, --parallel 2) generate
// with the same tokenizer (the reply equals this process's greedy decode of the same prompt); the slots
// are warmed before it says it is ready, and /health answers loading until then.
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine } from "../../model/engine.ts";
import { generateAll } from "../../model/generate.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { qwen3TokenizerFiles } from "../helpers/tokenizer-check.ts";

setDefaultTimeout(90_000);

let engine: Engine;

beforeAll(async () => {
  engine = await loadEngine(await qwen3Folder({ peaked: true }), "float", {
    tokenizer: qwen3TokenizerFiles(),
  });
});

/**
 * `scripts/chat.ts` on `args` under `runtime`, until it prints its URL; `warming`: what `/health`
 * answered to a request sent once the server said it was warming its slots (undefined if it never did).
 */
function startChat(
  runtime: readonly string[],
  args: string[],
  sessions: string,
): Promise<{ child: ChildProcess; url: string; out: () => string; warming: Promise<unknown> }> {
  const child = spawn(runtime[0], [
    ...runtime.slice(1),
    "scripts/chat.ts",
    ...args,
    "--port",
    "0",
    "--sessions",
    sessions,
  ], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "", warming: Promise<unknown> = Promise.resolve(undefined), probed = false;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL after 50 s:\n${out}`)), 50_000);
    child.stderr!.on("data", (d) => {
      out += d;
      const listening = out.match(/listening on (http:\/\/\S+)/)?.[1];
      if (listening && !probed && /warming \d+ slot/.test(out)) {
        probed = true;
        warming = fetch(new URL("health", listening)).then(async (r) => [r.status, await r.json()]);
      }
    });
    child.stdout!.on("data", (d) => {
      out += d;
      const m = out.match(/ferry chat: (http:\/\/\S+)/);
      if (m) clearTimeout(timer), resolve({ child, url: m[1], out: () => out, warming });
    });
    child.on("exit", (code) => reject(new Error(`exited ${code}:\n${out}`)));
  });
}

// Bun with two slot workers, Deno with one (each loads the model; the server's thread only the tokenizer).
for (const [runtime, parallel] of [[["bun"], "2"], [["deno", "run", "-A"], "1"]] as const) {
  test(
    `${runtime[0]}: scripts/chat.ts FOLDER serves a Qwen3 folder with its tokenizer and template`,
    async () => {
      const dir = await qwen3Folder({ peaked: true });
      const sessions = mkdtempSync(join(tmpdir(), "ferry-chat-qwen3-"));
      const { child, url, out, warming } = await startChat(
        runtime,
        [dir, "--engine", "float", "--parallel", parallel],
        sessions,
      );
      try {
        expect(out()).toContain("151669-id tokenizer, EOS 151645 151643");
        // What memory goes to: the float engine's packed weights, one copy for the slots; a slot's KV at its context.
        const copies = parallel === "2" ? ", one copy for 2 slots" : "";
        expect(out()).toMatch(
          new RegExp(`weights \\d+ [KM]B${copies}; a slot's KV cache up to \\d+ [KM]B at \\d+ positions`),
        );
        // Warm before ready: the slots warmed before the server said so, /health said loading meanwhile
        // (two workers take seconds to load, so the probe lands there; one thread may be done first).
        expect(out()).toMatch(new RegExp(`warming ${parallel} slots?[^]*warmed in [\\d.]+ s[^]*ferry chat:`));
        if (parallel === "2") expect(await warming).toEqual([503, { status: "loading" }]);
        expect((await fetch(new URL("health", url))).status).toBe(200);
        const models = await (await fetch(new URL("v1/models", url))).json() as any;
        expect(models.data[0]).toMatchObject({ tokenizer: "bpe", chat_template: true });
        const body = {
          messages: [{ role: "user", content: "Hi" }],
          chat_template_kwargs: { enable_thinking: false },
          max_tokens: 6,
          temperature: 0,
        };
        const prompt =
          await (await fetch(new URL("apply-template", url), { method: "POST", body: JSON.stringify(body) }))
            .json() as any;
        expect(prompt.prompt).toEndWith("<|im_start|>assistant\n<think>\n\n</think>\n\n");
        // Two slots: the reply is generated in a worker, which loads the model with the same tokenizer.
        const r = await (await fetch(new URL("v1/chat/completions", url), {
          method: "POST",
          body: JSON.stringify(body),
        }))
          .json() as any;
        expect(r.usage.prompt_tokens).toBe(engine.tokenizer.encode(prompt.prompt, { specials: true }).length);
        // The greedy reply this process's engine gives: the worker decoded with the same tokenizer.
        const ids = engine.tokenizer.encode(prompt.prompt, { specials: true });
        const local = engine.tokenizer.decode(await generateAll(engine, ids, { maxTokens: 6 }));
        expect(r.choices[0].message.content).toBe(local);
      } finally {
        child.kill("SIGTERM");
        rmSync(sessions, { recursive: true, force: true });
      }
    },
    90_000,
  );
}

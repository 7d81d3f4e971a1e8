// scripts/chat.ts FOLDER on a reduced Qwen3 folder, under Bun and Deno: it reads the folder's tokenizer,
// applies its chat template with chat_template_kwargs, and its slot workers (Bun, --parallel 2) generate
// with the same tokenizer (the reply equals this process's greedy decode of the same prompt).
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

/** `scripts/chat.ts` on `args` under `runtime`, until it prints its URL. */
function startChat(
  runtime: readonly string[],
  args: string[],
  sessions: string,
): Promise<{ child: ChildProcess; url: string; out: () => string }> {
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
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL after 50 s:\n${out}`)), 50_000);
    child.stderr!.on("data", (d) => (out += d));
    child.stdout!.on("data", (d) => {
      out += d;
      const m = out.match(/ferry chat: (http:\/\/\S+)/);
      if (m) clearTimeout(timer), resolve({ child, url: m[1], out: () => out });
    });
    child.on("exit", (code) => reject(new Error(`exited ${code}:\n${out}`)));
  });
}

// Bun with two slot workers (each loads the model and its tokenizer); Deno on its own thread, to keep the
// file short (the same route code either way).
for (const [runtime, parallel] of [[["bun"], "2"], [["deno", "run", "-A"], "1"]] as const) {
  test(
    `${runtime[0]}: scripts/chat.ts FOLDER serves a Qwen3 folder with its tokenizer and template`,
    async () => {
      const dir = await qwen3Folder({ peaked: true });
      const sessions = mkdtempSync(join(tmpdir(), "ferry-chat-qwen3-"));
      const { child, url, out } = await startChat(
        runtime,
        [dir, "--engine", "float", "--parallel", parallel],
        sessions,
      );
      try {
        expect(out()).toContain("151669-id tokenizer, EOS 151645 151643");
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

// scripts/chat.ts under both runtimes: it prints the URL it listens on (loopback by default) and
// serves there; a port already taken and a training checkpoint are refused with what to do instead;
// the load test runs clean on a small bounded load.
import { expect, test } from "bun:test";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import process from "node:process";

/** Starts the chat script and resolves with the URL it prints. */
function start(
  cmd: string[],
  sessions: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string; said: string }> {
  const child = spawn(cmd[0], [...cmd.slice(1), "--port", "0", "--sessions", sessions], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let out = "", err = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL after 50 s:\n${out}\n${err}`)), 50_000);
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.on("data", (d) => {
      out += d;
      const m = out.match(/ferry chat: (http:\/\/\S+)/);
      if (m) clearTimeout(timer), resolve({ child, url: m[1], said: out });
    });
    child.on("exit", (code) => reject(new Error(`exited ${code}:\n${out}\n${err}`)));
  });
}

const RUNS = [
  ["bun", ["bun", "scripts/chat.ts"], "int"],
  ["deno", ["deno", "run", "-A", "scripts/chat.ts"], "int"],
  ["bun --engine float", ["bun", "scripts/chat.ts", "--engine", "float"], "float"],
] as const;

for (const [name, cmd, kind] of RUNS) {
  test(
    `${name}: scripts/chat.ts serves the default model's lut4 export on loopback and prints its URL`,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "ferry-chat-cli-"));
      const { child, url, said } = await start([...cmd], dir);
      try {
        expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
        // The start-up line says what the weights take, and that the slots share them (both engines).
        const slots = Number(/(\d+) slots?;/.exec(said)![1]);
        const copies = slots === 1 ? "" : `, one copy for ${slots} slots`;
        expect(said).toMatch(new RegExp(`weights \\d+ [KM]B${copies}; a slot's KV cache up to`));
        const models = await (await fetch(new URL("v1/models", url))).json() as any;
        expect(models.data[0]).toMatchObject({ id: "ferry.q4.lut4", engine: kind });
        const res = await fetch(new URL("v1/completions", url), {
          method: "POST",
          body: JSON.stringify({ prompt: "The jury said", max_tokens: 8, temperature: 0, stream: true }),
        });
        expect(await res.text()).toEndWith("data: [DONE]\n\n");
        expect((await fetch(url)).headers.get("content-type")).toStartWith("text/html");
      } finally {
        child.kill("SIGTERM");
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
}

test("--api-key (or FERRY_API_KEY), --cors and --allow-host reach the server; /health stays open", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-chat-cli-"));
  const cmd = ["bun", "scripts/chat.ts", "--cors", "http://localhost:5173", "--allow-host", "chat.lan"];
  const { child, url } = await start(cmd, dir, { FERRY_API_KEY: "s3cret" });
  try {
    expect(await (await fetch(new URL("health", url))).json()).toEqual({ status: "ok" });
    expect((await fetch(new URL("v1/models", url))).status).toBe(401);
    const auth = { Authorization: "Bearer s3cret" };
    expect((await fetch(new URL("v1/models", url), { headers: auth })).status).toBe(200);
    const cors = await fetch(new URL("v1/models", url), {
      headers: { ...auth, Origin: "http://localhost:5173" },
    });
    expect(cors.headers.get("access-control-allow-origin")).toBe("http://localhost:5173");
    const evil = await fetch(new URL("v1/models", url), {
      headers: { ...auth, Origin: "http://evil.example" },
    });
    expect(evil.status).toBe(403);
  } finally {
    child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a port in use is refused naming the port and --port, under both runtimes", async () => {
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
  const port = (taken.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), "ferry-chat-cli-"));
  try {
    for (const cmd of [["bun"], ["deno", "run", "-A"]]) {
      const args = [...cmd.slice(1), "scripts/chat.ts", "--port", String(port), "--sessions", dir];
      const r = spawnSync(cmd[0], args, { encoding: "utf8" });
      expect(r.stderr).toContain(`port ${port} is in use; pick another with --port N`);
      expect(r.status).toBe(1);
    }
  } finally {
    taken.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a training checkpoint is refused with the command that converts it", () => {
  const r = spawnSync("bun", ["scripts/chat.ts", "model/default/ferry.ckpt"], { encoding: "utf8" });
  expect(r.status).toBe(1);
  expect(r.stderr).toContain("training checkpoint");
  expect(r.stderr).toContain("scripts/export.ts --input model/default/ferry.ckpt --format lut4");
});

test("usage errors exit 2", () => {
  expect(spawnSync("bun", ["scripts/chat.ts", "--port", "http"], { encoding: "utf8" }).status).toBe(2);
  expect(
    spawnSync("bun", ["scripts/tools/load-test.ts", "--url", "http://example.com/"], { encoding: "utf8" })
      .status,
  ).toBe(2);
});

test("the load test: every answer well formed or a clean 429, disconnects, memory back at baseline", () => {
  const r = spawnSync("bun", [
    "scripts/tools/load-test.ts",
    "--requests",
    "40",
    "--clients",
    "8",
    "--disconnect",
    "5",
    "--queue",
    "2",
    "--max-tokens",
    "8",
    "--json",
  ], {
    encoding: "utf8",
  });
  expect(r.status).toBe(0);
  const out = JSON.parse(r.stdout);
  expect(out.failures).toEqual([]);
  expect(out.ok + out.rejected_429 + out.disconnected).toBe(40);
  expect(out.bad).toBe(0);
  expect(out.disconnected).toBeGreaterThan(0);
  expect(out.served_after).toBe(true);
  expect(out.memory_checked).toBe(true);
}, 60_000);

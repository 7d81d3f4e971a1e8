// serve/listen.ts on real sockets, under Deno and Bun (the chat app on a scripted engine in a child process,
// tests/helpers/timeout-server.ts): a connection that sends part of a request line and then nothing is
// closed (Deno: after the header timeout asked for, 1 s here; Bun: after its own fixed ~10 s, which
// idleTimeout does not change), while plain requests, a second request on a kept-alive connection sent
// later than the timeout, a streamed reply that outlasts it, the Host check, and a client's disconnect
// stopping its generation all work as they did.
import { afterAll, beforeAll, describe, expect } from "bun:test";
import { crossProcessTest, FAST } from "../helpers/fast.ts";
import { type ChildProcess, spawn } from "node:child_process";
import { connect, type Socket } from "node:net";

const TIMEOUT_S = 1;

/** Starts the fixture under `cmd` and resolves with the child and the URL it prints. */
function start(cmd: string[], mode: string[] = []): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(cmd[0], [
    ...cmd.slice(1),
    "tests/helpers/timeout-server.ts",
    String(TIMEOUT_S),
    ...mode,
  ], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "", err = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL after 30 s:\n${out}\n${err}`)), 30_000);
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.on("data", (d) => {
      out += d;
      const m = out.match(/http:\/\/\S+/);
      if (m) clearTimeout(timer), resolve({ child, url: m[0] });
    });
    child.on("exit", (code) => reject(new Error(`exited ${code}:\n${out}\n${err}`)));
  });
}

/** A raw connection that collects what it receives; `closed` resolves with the ms from opening to close. */
function open(port: number) {
  const t0 = performance.now();
  const socket: Socket = connect(port, "127.0.0.1");
  let text = "";
  socket.on("data", (d) => (text += d));
  socket.on("error", () => {});
  const closed = new Promise<number>((resolve) => socket.on("close", () => resolve(performance.now() - t0)));
  const connected = new Promise<void>((resolve) => socket.on("connect", resolve));
  return { socket, closed, connected, text: () => text };
}

/** Waits until `cond()` holds, polling every 20 ms, or fails after `ms`. */
async function until(cond: () => boolean | Promise<boolean>, ms: number, what: string) {
  const end = performance.now() + ms;
  while (!(await cond())) {
    if (performance.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const RUNTIMES = [
  // Deno: the TCP front's deadline, TIMEOUT_S from the connection's opening; the front guards only an
  // address other machines reach, so the server listens on all of them (the test connects over loopback).
  ["deno", ["deno", "run", "-A"], [TIMEOUT_S * 1000 - 100, TIMEOUT_S * 1000 + 1500], "0.0.0.0"],
  // Bun: its own fixed header timeout (10 s, checked on a 4 s tick: closed at about 12 s in Bun 1.4.5).
  ["bun", ["bun"], [9_000, 15_000], "127.0.0.1"],
] as const;

for (const [name, cmd, [least, most], host] of RUNTIMES) {
  describe(`${name} on ${host}`, () => {
    let child: ChildProcess, url: string, port: number, partial: ReturnType<typeof open>;
    beforeAll(async () => {
      if (FAST) return;
      ({ child, url } = await start([...cmd], ["wait", host]));
      port = Number(new URL(url).port);
      partial = open(port);
      await partial.connected;
      partial.socket.write("GET /health HT");
    });
    afterAll(() => {
      child?.kill("SIGTERM");
    });

    crossProcessTest(
      "requests are served; a kept-alive connection's next request, sent after the timeout, too",
      async () => {
        expect(await (await fetch(new URL("health", url))).json()).toEqual({ status: "ok" });
        const c = open(port);
        await c.connected;
        const get = `GET /health HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
        c.socket.write(get);
        await until(() => c.text().includes('{"status":"ok"}'), 5_000, "the first answer");
        await new Promise((r) => setTimeout(r, TIMEOUT_S * 1000 + 500));
        c.socket.write(get);
        await until(() => c.text().split('{"status":"ok"}').length === 3, 5_000, "the second answer");
        c.socket.destroy();
      },
    );

    crossProcessTest("a foreign Host is still 403 over the socket", async () => {
      const c = open(port);
      await c.connected;
      c.socket.write("GET /v1/models HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
      await c.closed;
      expect(c.text()).toStartWith("HTTP/1.1 403");
      expect(c.text()).toContain("Host header");
    });

    crossProcessTest("a streamed chat reply that outlasts the timeout arrives whole", async () => {
      const t0 = performance.now();
      const res = await fetch(new URL("v1/chat/completions", url), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 100, stream: true }),
      });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(performance.now() - t0).toBeGreaterThan(TIMEOUT_S * 1000); // 100 tokens at 20 ms
      const content = [...text.matchAll(/"content":"([^"]*)"/g)].map((m) => m[1]).join("");
      expect(content).toBe("word ".repeat(20));
      expect(text).toEndWith("data: [DONE]\n\n");
    });

    crossProcessTest("a client gone mid-stream stops its generation", async () => {
      const metric = async () => {
        const text = await (await fetch(new URL("metrics", url))).text();
        return Number(/^ferry_active_slots (\d+)/m.exec(text)![1]);
      };
      const body = JSON.stringify({
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 300,
        stream: true,
      });
      const c = open(port);
      await c.connected;
      c.socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\n` +
          `Content-Length: ${body.length}\r\n\r\n${body}`,
      );
      await until(() => c.text().includes('"content":"w'), 5_000, "the first token");
      expect(await metric()).toBe(1);
      c.socket.destroy(); // 300 tokens would take 6 s more
      await until(async () => (await metric()) === 0, 2_000, "the generation stopped");
    });

    // Opened in beforeAll and checked last, so the other tests run while it waits (12 s under Bun).
    crossProcessTest(
      "a connection that sends part of a request line and then nothing is closed",
      async () => {
        const ms = await partial.closed;
        expect(ms).toBeGreaterThan(least);
        expect(ms).toBeLessThan(most);
        expect(partial.text()).toBe(""); // closed, not answered
      },
      most + 5_000,
    );
  });
}

// A reply computed on the server's own thread (an engine in memory served with `createSlots`' one slot, as
// a library user may; the chat server itself generates in slot workers) must still stream as it is
// generated and let other requests in. Under Deno a message turn between tokens never let the runtime look
// at its sockets, so a reply's bytes left only at its end (serve/slots/next-turn.ts takes a timer's turn there).
for (const [name, cmd] of RUNTIMES) {
  describe(`${name}, a reply computed on the server's thread (loopback)`, () => {
    let child: ChildProcess, url: string;
    beforeAll(async () => {
      if (FAST) return;
      ({ child, url } = await start([...cmd], ["busy"]));
    });
    afterAll(() => {
      child?.kill("SIGTERM");
    });

    crossProcessTest(
      "streams as it is generated, and a request sent meanwhile is answered before it ends",
      async () => {
        const t0 = performance.now();
        const res = await fetch(new URL("v1/completions", url), {
          method: "POST",
          body: JSON.stringify({ prompt: "Hi", max_tokens: 300, stream: true }), // 2 ms a token: 600 ms
        });
        const reader = res.body!.getReader();
        const decoder = new TextDecoder();
        let text = "", firstText = 0, health: Promise<number> | undefined;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
          if (!firstText && text.includes('"text":"w')) {
            firstText = performance.now() - t0;
            const sent = performance.now();
            health = fetch(new URL("health", url)).then(async (r) => {
              expect(await r.json()).toEqual({ status: "ok" });
              return performance.now() - sent;
            });
          }
        }
        const total = performance.now() - t0;
        expect(text).toEndWith("data: [DONE]\n\n");
        expect(text.match(/"text":"w/g)?.length).toBe(60); // 300 tokens of "word "
        expect(firstText).toBeLessThan(total * 0.4);
        // About 20 ms on both runtimes; Deno took 230 ms before its turns let it look at its sockets.
        expect(await health!).toBeLessThan(120);
      },
    );
  });
}

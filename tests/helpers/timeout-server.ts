// The chat app on a scripted engine, as a child process under either runtime (tests/serve/listen.test.ts):
// `deno run -A tests/helpers/timeout-server.ts SECONDS [busy|wait] [HOST]` or `bun tests/helpers/timeout-server.ts
// SECONDS [busy|wait] [HOST]` listens on HOST (default 127.0.0.1; Deno's header timeout needs one off loopback)
// with that header timeout and prints its URL. Each reply is a run of words, 20 ms
// a token waited, so a stream of a few hundred tokens outlasts the timeout; with `busy`, 2 ms a token
// computed on the server's thread, as a real engine on one slot computes.
import process from "node:process";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";
import { scriptedEngine } from "./scripted-engine.ts";

const engine = scriptedEngine(() => "word ".repeat(400));
if (process.argv[3] === "busy") engine.busyMs = 2;
else engine.delayMs = 20;
const served: { app?: ReturnType<typeof createApp> } = {};
const hostname = process.argv[4] ?? "127.0.0.1";
const server = await listen((r) => served.app!.fetch(r), {
  hostname,
  port: 0,
  headerTimeoutS: Number(process.argv[2]),
});
served.app = createApp({
  engine,
  address: { hostname, port: Number(new URL(server.url).port) },
});
console.log(server.url);
process.on("SIGTERM", async () => {
  await server.close();
  process.exit(0);
});

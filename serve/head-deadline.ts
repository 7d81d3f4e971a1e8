/**
 * A header deadline for `Deno.serve`, which has none of its own (denoland/deno#3515): a TCP front on the
 * public address holds each new connection until its first request head is complete (an empty line),
 * closing it if that takes longer than the deadline, and only then hands it, bytes and all, to
 * `Deno.serve` listening on a Unix socket in a private temporary folder (mode 0700, so no other user can
 * reach the server past the front). From then on the front only copies bytes both ways, so requests,
 * keep-alive, streamed replies and disconnects behave as they do on `Deno.serve` directly; each byte is
 * copied once more in JavaScript, which costs a streamed reply nothing measurable (docs/chat-server.md,
 * "Limits").
 *
 * As with Bun's own header timeout, only a connection's first request head is timed:
 * where one request ends and the next begins on a kept-alive connection would take parsing the bodies.
 * The server behind the front sees every client as the Unix socket; the app reads no peer address (the
 * Host and Origin checks read headers), so nothing trusts it.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { serveWithHeadDeadline } from "./head-deadline.ts";
 * const app = new Hono();
 * const server = await serveWithHeadDeadline(app.fetch, { hostname: "127.0.0.1", port: 8080, timeoutMs: 10_000 });
 * console.log(server.port); // 8080
 * await server.close();
 * ```
 * @module
 */

/** A request head longer than this with no end yet is handed on as it is (Deno answers 400 to it). */
const MAX_HEAD_BYTES = 128 * 1024;

/** The front and the server behind it. */
export interface Fronted {
  /** The port the front listens on (the one asked for, or the one picked for port 0). */
  port: number;
  /** Stops the front, closes the connections it still holds, shuts the server down, removes the socket. */
  close(): Promise<void>;
}

/**
 * Serves `fetch` on `hostname:port` under Deno, closing a connection whose first request head is not
 * complete within `timeoutMs` of its opening. A taken port throws Deno's `AddrInUse` (code `EADDRINUSE`).
 */
export async function serveWithHeadDeadline(
  fetch: (request: Request) => Response | Promise<Response>,
  opts: { hostname: string; port: number; timeoutMs: number },
): Promise<Fronted> {
  const front = Deno.listen({ hostname: opts.hostname, port: opts.port }); // first: a taken port throws here
  const dir = await Deno.makeTempDir({ prefix: "ferry-serve-" });
  const path = `${dir}/http.sock`;
  let ready: () => void;
  const bound = new Promise<void>((resolve) => (ready = resolve));
  const server = Deno.serve(
    { transport: "unix", path, onListen: () => ready() },
    (request) => fetch(request),
  );
  await bound;

  const held = new Set<Deno.Conn>(); // connections whose head is still arriving
  const accepting = (async () => {
    for await (const conn of front) {
      held.add(conn);
      admit(conn, path, opts.timeoutMs).finally(() => held.delete(conn));
    }
  })().catch(() => {}); // the listener closed
  return {
    port: (front.addr as Deno.NetAddr).port,
    async close() {
      front.close();
      await accepting;
      for (const conn of held) closeQuietly(conn);
      await server.shutdown();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

/** Reads `conn` until its request head ends or the deadline passes; hands it on, or closes it. */
async function admit(conn: Deno.Conn, path: string, timeoutMs: number): Promise<void> {
  // A streamed reply is many small writes: send each at once rather than waiting to fill a packet.
  (conn as Deno.TcpConn).setNoDelay?.(true);
  const timer = setTimeout(() => closeQuietly(conn), timeoutMs); // a pending read then ends in an error
  let head = new Uint8Array(0);
  try {
    const buf = new Uint8Array(16 * 1024);
    while (!headEnds(head) && head.length <= MAX_HEAD_BYTES) {
      const n = await conn.read(buf);
      if (n === null) return closeQuietly(conn); // gone before a whole head
      const more = new Uint8Array(head.length + n);
      more.set(head);
      more.set(buf.subarray(0, n), head.length);
      head = more;
    }
  } catch {
    return closeQuietly(conn); // the deadline closed it, or the client reset it
  } finally {
    clearTimeout(timer);
  }
  let inner: Deno.UnixConn;
  try {
    inner = await Deno.connect({ transport: "unix", path });
    await writeAll(inner, head);
  } catch {
    return closeQuietly(conn); // the server is shutting down
  }
  pipe(conn, inner, true);
  pipe(inner, conn, false);
}

/** Whether `bytes` hold an empty line (CRLF CRLF, or bare LFs as lenient parsers accept), ending a head. */
function headEnds(bytes: Uint8Array): boolean {
  for (let i = bytes.indexOf(10); i >= 0 && i + 1 < bytes.length; i = bytes.indexOf(10, i + 1)) {
    if (bytes[i + 1] === 10 || (bytes[i + 1] === 13 && bytes[i + 2] === 10)) return true;
  }
  return false;
}

/**
 * Copies `from` to `to` until `from` ends. The client's end of its sending (`halfClose`) is passed on as
 * such, so the server sees exactly what it would have seen (Deno's HTTP layer takes it as a disconnect
 * and aborts the request); the server's end, or any error, closes both.
 */
async function pipe(from: Deno.Conn, to: Deno.Conn, halfClose: boolean): Promise<void> {
  const buf = new Uint8Array(64 * 1024);
  try {
    for (;;) {
      const n = await from.read(buf);
      if (n === null) break;
      await writeAll(to, buf.subarray(0, n));
    }
    if (halfClose) return await to.closeWrite();
  } catch { /* either side went away */ }
  closeQuietly(from);
  closeQuietly(to);
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  for (let at = 0; at < bytes.length;) at += await conn.write(bytes.subarray(at));
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch { /* already closed */ }
}

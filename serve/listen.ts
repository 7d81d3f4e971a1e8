/**
 * Puts a fetch handler on a socket under whichever runtime is running: `Deno.serve` or `Bun.serve`.
 * A new connection whose first request head has not arrived within about 10 s is closed, so idle or
 * trickling sockets cannot pile up. Bun does it by itself, on any address (a fixed 10 s on a 4 s tick:
 * about 12 s in Bun 1.4.5, trickled bytes or `idleTimeout` change nothing). `Deno.serve` has no hook for
 * it (denoland/deno#3515), so under Deno, on an address other machines can reach, a TCP front holds
 * each new connection until its head is complete, closing it at a deadline from its opening
 * (`headerTimeoutS`), and only then hands it to `Deno.serve` behind it (`head-deadline.ts`). On a
 * loopback address (the default) only this machine's own programs connect, which the front would not
 * protect from anything it cannot do by other means, so `Deno.serve` listens itself and no byte is
 * copied. On both, only a connection's first head is timed. Bun also closes a
 * connection quiet for `idleTimeout` once a request is in, which would cut a request waiting in the
 * generation queue (no bytes flow until its turn) or a slow stream, so each request's idle timeout is
 * turned off with `server.timeout(request, 0)`. A port already taken is an `AddressInUseError` under
 * either runtime (each says it its own way, Deno without the port).
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { listen } from "./listen.ts";
 * const app = new Hono();
 * const server = await listen(app.fetch, { hostname: "127.0.0.1", port: 8080 });
 * console.log(server.url); // http://127.0.0.1:8080/
 * await server.close();
 * ```
 * @module
 */
import { serveWithHeadDeadline } from "./head-deadline.ts";

/** A listening server. */
export interface Listening {
  /** Where it listens, e.g. `http://127.0.0.1:8080/`. */
  url: string;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

type Handler = (request: Request) => Response | Promise<Response>;

/** Seconds a new connection may take to send its first request head under Deno, as Bun's own timer. */
const HEADER_TIMEOUT_S = 10;

/** Where and how to listen. */
export interface ListenOptions {
  hostname: string;
  /** 0: any free port. */
  port: number;
  /**
   * Seconds a new connection may take to send its first request head (default 10); Deno off loopback
   * only (Bun's is fixed, and on loopback Deno's server listens without the front).
   */
  headerTimeoutS?: number;
}

/** The address asked for is taken (both runtimes' errors carry the code `EADDRINUSE`). */
export class AddressInUseError extends Error {
  constructor(readonly hostname: string, readonly port: number) {
    super(`${hostname} port ${port} is already in use`);
    this.name = "AddressInUseError";
  }
}

/** Whether `hostname` is a loopback address: 127.0.0.0/8, `::1` or `localhost`. */
export function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** Serves `fetch` on `hostname:port` (port 0: any free port); a taken port is an `AddressInUseError`. */
export async function listen(fetch: Handler, opts: ListenOptions): Promise<Listening> {
  try {
    return await serve(fetch, opts);
  } catch (e) {
    if ((e as { code?: unknown }).code === "EADDRINUSE") {
      throw new AddressInUseError(opts.hostname, opts.port);
    }
    throw e;
  }
}

async function serve(fetch: Handler, opts: ListenOptions): Promise<Listening> {
  const g = globalThis as any;
  const host = (h: string) => (h.includes(":") ? `[${h}]` : h);
  if (g.Bun) {
    const server = g.Bun.serve({
      hostname: opts.hostname,
      port: opts.port,
      idleTimeout: 10, // Bun's default, named: off for each request below
      fetch(request: Request, srv: any) {
        srv.timeout(request, 0);
        return fetch(request);
      },
    });
    return { url: `http://${host(opts.hostname)}:${server.port}/`, close: () => server.stop(true) };
  }
  if (g.Deno && isLoopback(opts.hostname)) {
    const bound = Promise.withResolvers<number>();
    const server = g.Deno.serve(
      { hostname: opts.hostname, port: opts.port, onListen: (a: { port: number }) => bound.resolve(a.port) },
      fetch,
    );
    const port = await bound.promise;
    return { url: `http://${host(opts.hostname)}:${port}/`, close: () => server.shutdown() };
  }
  if (g.Deno) {
    const server = await serveWithHeadDeadline(fetch, {
      hostname: opts.hostname,
      port: opts.port,
      timeoutMs: (opts.headerTimeoutS ?? HEADER_TIMEOUT_S) * 1000,
    });
    return { url: `http://${host(opts.hostname)}:${server.port}/`, close: () => server.close() };
  }
  throw new Error("listen: needs Deno or Bun");
}

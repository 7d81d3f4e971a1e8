/**
 * Puts a fetch handler on a socket under whichever runtime is running: `Deno.serve` or `Bun.serve`.
 * Bun closes a connection that is quiet for 10 s by default, which would cut a request waiting in the
 * generation queue (no bytes flow until its turn) or a slow stream, so each request's idle timeout is
 * turned off with `server.timeout(request, 0)`. A port already taken is an `AddressInUseError` under
 * either runtime (each says it its own way, Deno without the port). Only Bun can close a connection
 * whose headers never finish (`HEADER_TIMEOUT_S`); Deno offers no hook for it.
 *
 * @example
 * ```ts
 * const server = await listen(app.fetch, { hostname: "127.0.0.1", port: 8080 });
 * console.log(server.url); // http://127.0.0.1:8080/
 * await server.close();
 * ```
 * @module
 */

/** A listening server. */
export interface Listening {
  /** Where it listens, e.g. `http://127.0.0.1:8080/`. */
  url: string;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

type Handler = (request: Request) => Response | Promise<Response>;

/**
 * Bun closes a connection quiet this long while its request headers are still arriving (its
 * `idleTimeout`). Deno.serve has no such hook (denoland/deno#3515): a connection that never finishes its
 * headers stays open until the client gives up.
 */
const HEADER_TIMEOUT_S = 10;

/** The address asked for is taken (both runtimes' errors carry the code `EADDRINUSE`). */
export class AddressInUseError extends Error {
  constructor(readonly hostname: string, readonly port: number) {
    super(`${hostname} port ${port} is already in use`);
    this.name = "AddressInUseError";
  }
}

/** Serves `fetch` on `hostname:port` (port 0: any free port); a taken port is an `AddressInUseError`. */
export async function listen(fetch: Handler, opts: { hostname: string; port: number }): Promise<Listening> {
  try {
    return await serve(fetch, opts);
  } catch (e) {
    if ((e as { code?: unknown }).code === "EADDRINUSE") {
      throw new AddressInUseError(opts.hostname, opts.port);
    }
    throw e;
  }
}

async function serve(fetch: Handler, opts: { hostname: string; port: number }): Promise<Listening> {
  const g = globalThis as any;
  const host = (h: string) => (h.includes(":") ? `[${h}]` : h);
  if (g.Bun) {
    const server = g.Bun.serve({
      hostname: opts.hostname,
      port: opts.port,
      idleTimeout: HEADER_TIMEOUT_S, // until a request's headers are in; then off for that request
      fetch(request: Request, srv: any) {
        srv.timeout(request, 0);
        return fetch(request);
      },
    });
    return { url: `http://${host(opts.hostname)}:${server.port}/`, close: () => server.stop(true) };
  }
  if (g.Deno) {
    let ready: (port: number) => void;
    const bound = new Promise<number>((resolve) => (ready = resolve));
    const server = g.Deno.serve({
      hostname: opts.hostname,
      port: opts.port,
      onListen: (addr: { port: number }) => ready(addr.port),
    }, fetch);
    const port = await bound;
    return { url: `http://${host(opts.hostname)}:${port}/`, close: () => server.shutdown() };
  }
  throw new Error("listen: needs Deno or Bun");
}

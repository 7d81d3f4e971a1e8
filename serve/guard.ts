/**
 * The checks every request passes before a route sees it, as Hono middleware: headers over the limit
 * (431), a `Host` that is not this server's address (403: DNS rebinding), an `Origin` that is not this
 * server's own and not allowed by `--cors` (403: a web page driving the local model), CORS headers and
 * preflights for the origins that are allowed, and the API key when there is one (401).
 *
 * A browser sends `Origin` with every cross-origin request and every POST, including the "simple"
 * `Content-Type: text/plain` POST that needs no preflight, so refusing a foreign `Origin` here stops a
 * page on another site before any generation runs.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { guard } from "./guard.ts";
 * const app = new Hono();
 * const address = { hostname: "127.0.0.1", port: 8080 };
 * for (const check of guard({ address, cors: ["http://localhost:5173"], apiKey: "s3cret" })) app.use(check);
 * ```
 * @module
 */
import type { Context, MiddlewareHandler } from "hono";
import { cors as honoCors } from "hono/cors";
import { createHash, timingSafeEqual } from "node:crypto";
import { ApiError } from "./errors.ts";
import { routeOf } from "./routes/table.ts";

/** What the guard checks against. */
export interface GuardOptions {
  /** The address the server listens on; without it any port of a loopback name is accepted. */
  address?: { hostname: string; port: number };
  /** More host names a `Host` header may carry (`--allow-host`), on any port. */
  allowHosts?: readonly string[];
  /** Origins other than the server's own that may call it (`--cors`); `*` allows every origin. */
  cors?: readonly string[];
  /** When set, every route but the open ones needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** The most bytes of request headers, names and values (default 16 KiB); more is 431. */
  maxHeaderBytes?: number;
}

/** Names that always mean this machine. */
const LOOPBACK = ["localhost", "127.0.0.1", "[::1]"];

/**
 * Whether `path` is open without the API key: its route in serve/routes/table.ts says so (the health
 * check, the icon, the page and its files, the tab's modules); every other path asks for the key.
 */
export function isOpenRoute(path: string): boolean {
  return routeOf(path)?.open ?? false;
}

/** The guard middleware, checks in order: header size, Host, Origin (with CORS), API key. */
export function guard(opts: GuardOptions): MiddlewareHandler[] {
  const maxHeaderBytes = opts.maxHeaderBytes ?? 16 * 1024;
  const cors = (opts.cors ?? []).map((o) => o.toLowerCase().replace(/\/$/, ""));
  const corsHeaders = cors.length === 0 ? undefined : honoCors({
    origin: cors.includes("*") ? "*" : cors,
    allowMethods: ["GET", "HEAD", "POST", "OPTIONS"],
    allowHeaders: ["Authorization", "Content-Type"],
    exposeHeaders: ["Retry-After"],
    maxAge: 600,
  });
  const checks: MiddlewareHandler[] = [
    async (c, next) => {
      let bytes = 0;
      c.req.raw.headers.forEach((v, k) => (bytes += k.length + v.length + 4));
      if (bytes > maxHeaderBytes) {
        throw new ApiError(
          431,
          `request headers are larger than ${maxHeaderBytes} bytes`,
          null,
          "headers_too_large",
        );
      }
      await next();
    },
    async (c, next) => {
      checkHost(c, opts);
      checkOrigin(c, cors);
      if (corsHeaders) return await corsHeaders(c, next);
      if (c.req.method === "OPTIONS") return c.body(null, 204, { Allow: "GET, HEAD, POST, OPTIONS" });
      await next();
    },
  ];
  if (opts.apiKey !== undefined) checks.push(apiKeyCheck(opts.apiKey));
  return checks;
}

/** The `Host` the request names (a request built in process has none: its URL's). */
function hostOf(c: Context): string {
  return (c.req.header("host") ?? new URL(c.req.url).host).toLowerCase();
}

function checkHost(c: Context, opts: GuardOptions): void {
  const host = hostOf(c);
  let url: URL | undefined;
  try {
    url = new URL(`http://${host}`);
  } catch { /* refused below */ }
  const port = url?.port || "80";
  const own = opts.address;
  const ownName = own && (own.hostname.includes(":") ? `[${own.hostname}]` : own.hostname).toLowerCase();
  const names = ownName ? [...LOOPBACK, ownName] : LOOPBACK;
  const ok = url !== undefined && url.host === host &&
    ((names.includes(url.hostname) && (!own || port === String(own.port))) ||
      (opts.allowHosts ?? []).some((n) => n.toLowerCase() === url!.hostname));
  if (ok) return;
  const where = own ? ` (${ownName}:${own.port})` : "";
  throw new ApiError(
    403,
    `Host header ${
      JSON.stringify(host)
    } is not this server's address${where}; allow a name with --allow-host NAME`,
    null,
    "host_not_allowed",
  );
}

function checkOrigin(c: Context, cors: readonly string[]): void {
  const origin = c.req.header("origin")?.toLowerCase();
  if (origin === undefined || origin === `http://${hostOf(c)}`) return;
  if (cors.includes("*") || cors.includes(origin)) return;
  throw new ApiError(
    403,
    `Origin header ${JSON.stringify(origin)} is not this server's own; allow it with --cors ORIGIN`,
    null,
    "origin_not_allowed",
  );
}

const digest = (s: string) => createHash("sha256").update(s).digest();

/** 401 unless `Authorization: Bearer <key>`, compared in constant time (as digests, so length too). */
function apiKeyCheck(key: string): MiddlewareHandler {
  const want = digest(key);
  return async (c, next) => {
    if (!isOpenRoute(c.req.path)) {
      const m = /^Bearer +(.+)$/i.exec(c.req.header("authorization") ?? "");
      if (!m || !timingSafeEqual(digest(m[1].trim()), want)) {
        throw new ApiError(
          401,
          "Authorization: expected Bearer and this server's API key",
          null,
          "invalid_api_key",
          { "WWW-Authenticate": "Bearer" },
        );
      }
    }
    await next();
  };
}

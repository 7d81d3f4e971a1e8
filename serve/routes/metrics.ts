/**
 * `GET /metrics`: the server's metrics (serve/metrics.ts) in Prometheus' text format, with the load
 * read at the moment of the scrape.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { metricsRoutes } from "./metrics.ts";
 * import type { ServerContext } from "../context.ts";
 * declare const ctx: ServerContext;
 * const app = new Hono();
 * app.route("/", metricsRoutes(ctx));
 * await (await app.request("/metrics")).text(); // "# HELP ferry_requests_total ..."
 * ```
 * @module
 */
import { Hono } from "hono";
import type { ServerContext } from "../context.ts";
import { ROUTES } from "./table.ts";

const { metrics } = ROUTES;

/** The metrics route. */
export function metricsRoutes(ctx: ServerContext): Hono {
  return new Hono().on(metrics.methods, metrics.path, (c) =>
    c.body(ctx.metrics.render(ctx.load()), 200, {
      "Content-Type": "text/plain; version=0.0.4; charset=utf-8",
    }));
}

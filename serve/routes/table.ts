/**
 * Every route of the server, one line each: where its group is mounted (`app.route(base, …)` in
 * serve/app.ts), its path in Hono's syntax, its methods, the label its requests are counted under in
 * `/metrics` (its full path unless the line says otherwise), and whether it is open without the API
 * key. The route modules register their handlers from it (`app.on(r.methods, r.path, …)`), `/metrics`
 * counts by it (`routeLabel`) and the guard asks it which paths are open (`routeOf`): a new route is
 * one line here and its handler. tests/serve/route-table.test.ts checks that the app registers exactly
 * these routes.
 *
 * A path whose last segment is a parameter (`:id`) or `*` covers every path under that prefix, at any
 * depth: one label for every id, and one line for the page's files (`/page/*`, registered one by one
 * in routes/page.ts). The label and the open decision go by the path alone, whatever the method: a
 * `POST /health` is open and counted as `/health` (and answered 404). A path no line covers is counted
 * as `other` and needs the key.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { routeLabel, routeOf, ROUTES } from "./table.ts";
 * new Hono().on(ROUTES.models.methods, ROUTES.models.path, (c) => c.json({}));
 * routeLabel("/v1/sessions/0123abcd"); // "/v1/sessions/:id"
 * routeOf("/page/chat.js")?.open;       // true
 * ```
 * @module
 */

/** The methods a route answers (HEAD is answered by GET's handler). */
export type Method = "GET" | "POST";

/** One route. */
export interface Route {
  /** Where its group is mounted with `app.route()`: {@link API}, or the root when absent. */
  base?: string;
  /** Its path within the group, in Hono's syntax. */
  path: string;
  methods: Method[];
  /** Its requests' label in `/metrics` (`ferry_requests_total{route=…}`); absent: its full path. */
  label?: string;
  /** Open without the API key (serve/guard.ts); every other route needs `Authorization: Bearer KEY`. */
  open: boolean;
}

/** Where the OpenAI routes are mounted. */
export const API = "/v1";

/**
 * The routes, in the order serve/app.ts mounts their groups. Open: the health check, the icon, the
 * page and its files, and the tab's modules under `/src/` (the repository's own code, types stripped),
 * which the browser fetches for a module Worker and its imports with no way to add a header; the page
 * sends the key with every API call (serve/page/api.js). The tab's modules have always been counted as
 * `other` in `/metrics`.
 */
export const ROUTES = {
  health: { path: "/health", methods: ["GET"], open: true },
  favicon: { path: "/favicon.ico", methods: ["GET"], open: true },
  index: { path: "/", methods: ["GET"], open: true },
  pageFiles: { path: "/page/*", methods: ["GET"], open: true },
  modules: { path: "/src/*", methods: ["GET"], label: "other", open: true },
  tokenize: { path: "/tokenize", methods: ["POST"], open: false },
  detokenize: { path: "/detokenize", methods: ["POST"], open: false },
  applyTemplate: { path: "/apply-template", methods: ["POST"], open: false },
  metrics: { path: "/metrics", methods: ["GET"], open: false },
  models: { base: API, path: "/models", methods: ["GET"], open: false },
  sessions: { base: API, path: "/sessions", methods: ["POST"], open: false },
  sessionFile: { base: API, path: "/sessions/:id", methods: ["GET"], open: false },
  completions: { base: API, path: "/completions", methods: ["POST"], open: false },
  chatCompletions: { base: API, path: "/chat/completions", methods: ["POST"], open: false },
} satisfies Record<string, Route>;

/** The path a route answers at: its group's base and its own path. */
export function fullPath(route: Route): string {
  return (route.base ?? "") + route.path;
}

/** Each route with the test for the request paths it covers. */
const MATCHERS: Array<{ route: Route; covers: (path: string) => boolean }> = Object.values(ROUTES)
  .map((route: Route) => {
    const full = fullPath(route);
    const last = full.slice(full.lastIndexOf("/") + 1);
    if (last !== "*" && !last.startsWith(":")) return { route, covers: (p: string) => p === full };
    const prefix = full.slice(0, full.length - last.length);
    return { route, covers: (p: string) => p.startsWith(prefix) };
  });

/** The route of the table that covers the request path `path`, or undefined. */
export function routeOf(path: string): Route | undefined {
  return MATCHERS.find((m) => m.covers(path))?.route;
}

/** The label `path` is counted under in `/metrics`: its route's, else `other`. */
export function routeLabel(path: string): string {
  const route = routeOf(path);
  return route ? route.label ?? fullPath(route) : "other";
}

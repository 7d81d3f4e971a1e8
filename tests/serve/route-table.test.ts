// The route table (serve/routes/table.ts) is the one list of the server's routes: the app registers
// exactly its routes, with its methods (the page's files each under `/page/*`), `/metrics` counts
// requests under its labels (ids folded, the page's files one label, unknown paths `other`), and the
// guard leaves open exactly the paths its open routes cover.
import { expect, test } from "bun:test";
import { createApp } from "../../serve/app.ts";
import { isOpenRoute } from "../../serve/guard.ts";
import { fullPath, type Route, routeLabel, routeOf, ROUTES } from "../../serve/routes/table.ts";
import { scriptedEngine } from "../helpers/scripted-engine.ts";

const app = () => createApp({ engine: scriptedEngine(() => "Hi.") });

test("the app registers exactly the table's routes, each with the table's methods", () => {
  const registered = app().routes.filter((r) => r.method !== "ALL"); // the middleware: `ALL /*`
  expect(registered.length).toBeGreaterThan(20);
  const used = new Set<Route>();
  for (const { method, path } of registered) {
    const route = routeOf(path);
    // A route of its own is registered at its full path; a file of the page under the `/page/*` line.
    const ok = route !== undefined && (route.methods as string[]).includes(method) &&
      (fullPath(route) === path || route === ROUTES.pageFiles);
    expect({ method, path, ok }).toEqual({ method, path, ok: true });
    used.add(route!);
  }
  expect(Object.entries(ROUTES).filter(([, r]) => !used.has(r)).map(([name]) => name)).toEqual([]);
});

test("labels and the open decision go by the path: ids folded, prefixes covered, the rest other and guarded", () => {
  const cases: Array<[string, string, boolean]> = [
    ["/", "/", true],
    ["/health", "/health", true],
    ["/health/", "other", false],
    ["/favicon.ico", "/favicon.ico", true],
    ["/page/chat.js", "/page/*", true],
    ["/page/", "/page/*", true],
    ["/page/vendor/x/y", "/page/*", true],
    ["/page", "other", false],
    ["/src/serve/page/worker.js", "other", true],
    ["/src", "other", false],
    ["/tokenize", "/tokenize", false],
    ["/detokenize", "/detokenize", false],
    ["/apply-template", "/apply-template", false],
    ["/metrics", "/metrics", false],
    ["/v1/models", "/v1/models", false],
    ["/v1/completions", "/v1/completions", false],
    ["/v1/chat/completions", "/v1/chat/completions", false],
    ["/v1/sessions", "/v1/sessions", false],
    ["/v1/sessions/", "/v1/sessions/:id", false],
    ["/v1/sessions/0123/abcd", "/v1/sessions/:id", false],
    ["/v1/nothing", "other", false],
    ["/index.html", "other", false],
  ];
  for (const [path, label, open] of cases) {
    expect({ path, label: routeLabel(path), open: isOpenRoute(path) }).toEqual({ path, label, open });
  }
});

test("/metrics counts each request under its route's label", async () => {
  const a = app();
  for (const path of ["/page/chat.js", "/v1/sessions/abc", "/src/serve/page/worker.js", "/nothing"]) {
    await a.request(path);
  }
  const text = await (await a.request("/metrics")).text();
  for (
    const sample of [
      'ferry_requests_total{route="/page/*",status="200"} 1',
      'ferry_requests_total{route="/v1/sessions/:id",status="501"} 1',
      'ferry_requests_total{route="other",status="200"} 1',
      'ferry_requests_total{route="other",status="404"} 1',
    ]
  ) {
    expect(text).toContain(sample);
  }
});

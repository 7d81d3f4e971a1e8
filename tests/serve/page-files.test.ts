// How the chat page's files are served (serve/routes/page.ts): the page's own modules and the two
// libraries it imports at run time, marked and DOMPurify, from node_modules under fixed paths, each as
// JavaScript; nothing else of node_modules, and no directory listing; the cross-origin isolation headers on
// the page's paths.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pageRoutes } from "../../serve/routes/page.ts";
import { createApp } from "../../serve/app.ts";
import { scriptedEngine } from "../helpers/scripted-engine.ts";

const app = pageRoutes();

test("the page's modules and the vendored libraries are served as JavaScript", async () => {
  for (
    const path of [
      "/page/chat.js",
      "/page/api.js",
      "/page/markdown.js",
      "/page/store.js",
      "/page/idb.js",
      "/page/view.js",
      "/page/follow.js",
    ]
  ) {
    const res = await app.request(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
  }
  const marked = await app.request("/page/vendor/marked.js");
  expect(marked.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
  const text = await marked.text();
  expect(text).toBe(
    readFileSync(join(import.meta.dir, "../../node_modules/marked/lib/marked.esm.js"), "utf8").replace(
      /\n\/\/# sourceMappingURL=\S+\s*$/,
      "\n",
    ),
  );
  expect(text).toContain("export{");
  const purify = await (await app.request("/page/vendor/purify.js")).text();
  expect(purify).toContain("export { purify_default as default }");
});

test("every module the page's modules import is served, and only idb.js opens IndexedDB", async () => {
  const seen = new Set<string>(), queue = ["/page/chat.js"];
  for (let path; (path = queue.pop()) !== undefined;) {
    if (seen.has(path)) continue;
    seen.add(path);
    const res = await app.request(path);
    expect({ path, status: res.status }).toEqual({ path, status: 200 });
    const code = await res.text();
    for (const m of code.matchAll(/^import [^;]*?from "\.\/([\w-]+\.js)";$/gm)) queue.push(`/page/${m[1]}`);
    // One copy of the open and transaction rules (serve/page/idb.js), whichever store uses them.
    expect({ path, opens: code.includes("indexedDB.open") }).toEqual({
      path,
      opens: path === "/page/idb.js",
    });
  }
  expect([...seen]).toContain("/page/store.js");
  expect([...seen]).toContain("/page/tab-store.js");
  expect([...seen]).toContain("/page/idb.js");
});

test("the index's import map names exactly the vendored paths", async () => {
  const html = await (await app.request("/")).text();
  expect(html).toContain('"marked": "/page/vendor/marked.js"');
  expect(html).toContain('"dompurify": "/page/vendor/purify.js"');
});

test("nothing else under /page/ or node_modules is reachable, and no folder is listed", async () => {
  for (
    const path of [
      "/page/vendor/",
      "/page/vendor",
      "/page/",
      "/page/vendor/marked.esm.js",
      "/page/vendor/../../package.json",
      "/page/vendor/%2e%2e/%2e%2e/package.json",
      "/node_modules/marked/package.json",
      "/page/vendor/marked.js.map",
    ]
  ) {
    expect((await app.request(path)).status).toBe(404);
  }
});

test("the page, its modules and its model manifest carry the cross-origin isolation headers; the API not", async () => {
  const full = createApp({ engine: scriptedEngine(() => "A") });
  for (const path of ["/", "/page/chat.js", "/page/model.json", "/src/serve/page/worker.js"]) {
    const res = await full.request(path);
    expect(res.status).toBe(200);
    expect(res.headers.get("cross-origin-opener-policy")).toBe("same-origin");
    expect(res.headers.get("cross-origin-embedder-policy")).toBe("require-corp");
  }
  const api = await full.request("/v1/models");
  expect(api.status).toBe(200);
  expect(api.headers.get("cross-origin-embedder-policy")).toBeNull();
});

/**
 * The chat page: `GET /` and its stylesheet and ES modules under `/page/`, the files in `serve/page/`
 * served as they are (read once, when the routes are made; `no-cache`, so an edit shows on reload).
 * The two libraries the page imports at run time, marked (Markdown) and DOMPurify (the HTML sanitizer),
 * are served from node_modules under fixed paths in `/page/vendor/`: exactly those two files, so no
 * other file of node_modules is reachable and there is no directory listing.
 *
 * For "run in this tab" (serve/page/tab.js), the engine's own TypeScript modules are served under
 * `/src/` as JavaScript with their types stripped (serve/browser-modules.ts: exactly the import closure
 * of the tab's worker, rebuilt when a file changes, with an `ETag`), and the served model under
 * `/page/model/NAME` with its manifest `/page/model.json` (name, size, SHA-256), when the model is a
 * lut4 file, the one format the tab's integer engine reads.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { pageRoutes } from "./page.ts";
 * const app = new Hono();
 * app.route("/", pageRoutes());
 * (await app.request("/")).headers.get("content-type"); // "text/html; charset=utf-8"
 * (await app.request("/page/vendor/marked.js")).headers.get("content-type"); // "text/javascript; ..."
 * ```
 * @module
 */
import { Hono } from "hono";
import { createReadStream, readFileSync, statSync } from "node:fs";
import { fileSha256 } from "../../formats/digest-record.ts";
import { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";
import { Readable } from "node:stream";
import { browserModules, jsName } from "../browser-modules.ts";
import { ROUTES } from "./table.ts";

const HTML = "text/html; charset=utf-8";
const CSS = "text/css; charset=utf-8";
const JS = "text/javascript; charset=utf-8";

/** Route -> file in serve/page/ and its content type. */
const PAGE_FILES: Record<string, [string, string]> = {
  "/": ["index.html", HTML],
  "/page/style.css": ["style.css", CSS],
  "/page/chat.js": ["chat.js", JS],
  "/page/api.js": ["api.js", JS],
  "/page/markdown.js": ["markdown.js", JS],
  "/page/store.js": ["store.js", JS],
  "/page/idb.js": ["idb.js", JS],
  "/page/view.js": ["view.js", JS],
  "/page/follow.js": ["follow.js", JS],
  "/page/tab.js": ["tab.js", JS],
  "/page/tab-store.js": ["tab-store.js", JS],
};

/**
 * Route -> [package, its ES module build relative to the folder of the file `require` resolves]. The
 * packages' `exports` maps hide their dist folders from `import.meta.resolve`, so the folder is found
 * through the CommonJS entry, which lies beside the ES build in both packages.
 */
const VENDOR_FILES: Record<string, [string, string]> = {
  "/page/vendor/marked.js": ["marked", "marked.esm.js"],
  "/page/vendor/purify.js": ["dompurify", "purify.es.mjs"],
};

/** The bytes of a vendored file, its source-map comment dropped (the map is not served). */
function vendorFile(pkg: string, file: string): string {
  const require = createRequire(import.meta.url);
  const text = readFileSync(join(dirname(require.resolve(pkg)), file), "utf8");
  return text.replace(/\n\/\/# sourceMappingURL=\S+\s*$/, "\n");
}

/** What the page routes are told: the served model's file, offered to the tab when it is lut4. */
export interface PageOptions {
  /** The path the server's model was loaded from (`Engine.source`). */
  model?: string;
}

/** The manifest of the tab's model: what `/page/model.json` answers (scripts/page.ts writes the same). */
export interface TabManifest {
  /** False on a static copy (scripts/page.ts): there is no server, the page runs in the tab only. */
  server: boolean;
  /** The lut4 file to fetch, relative to `/page/`, or null with the reason when there is none. */
  model: { name: string; url: string; bytes: number; sha256: string } | null;
  reason?: string;
}

/** The manifest for the server's model: a lut4 file is offered; anything else is explained. */
async function serverManifest(model: string | undefined): Promise<TabManifest> {
  if (!model) return { server: true, model: null, reason: "the server names no model file" };
  const name = basename(model);
  if (!name.endsWith(".lut4")) {
    return {
      server: true,
      model: null,
      reason:
        `the server's model ${name} is not a lut4 file (export it with --format lut4), or choose one from disk`,
    };
  }
  const bytes = statSync(model).size;
  return { server: true, model: { name, url: `model/${name}`, bytes, sha256: await fileSha256(model) } };
}

/** The tab's worker and the modules it imports under `/src/` (their repository paths; types stripped). */
function moduleRoutes(app: Hono): void {
  const { modules } = ROUTES;
  const under = modules.path.replace(/\*$/, ""); // "/src/"
  app.on(modules.methods, modules.path, (c) => {
    let path: string;
    try {
      path = decodeURIComponent(c.req.path.slice(under.length));
    } catch {
      return c.json({ error: { message: "a malformed module path" } }, 400);
    }
    const module = browserModules().get(path);
    if (!module) return c.json({ error: { message: `no module ${path} for the tab` } }, 404);
    const headers = { "Content-Type": JS, "Cache-Control": "no-cache", "ETag": module.etag };
    if (c.req.header("if-none-match") === module.etag) return c.body(null, 304, headers);
    return c.body(module.code, 200, headers);
  });
}

/** `/page/model.json` and the model file itself, streamed from disk. */
function modelRoutes(app: Hono, model: string | undefined): void {
  const stampOf = () => (model ? `${statSync(model, { throwIfNoEntry: false })?.mtimeMs}` : "");
  // Hashed now (or its digest record read), while the server starts: the page's first request does not wait.
  const made = () => {
    const m = { stamp: stampOf(), made: serverManifest(model) };
    m.made.catch(() => {}); // a failure is answered when the manifest is asked for
    return m;
  };
  let manifest = made();
  app.get("/page/model.json", async (c) => {
    if (manifest.stamp !== stampOf()) manifest = made();
    return c.json(await manifest.made, 200, { "Cache-Control": "no-cache" });
  });
  if (!model || !model.endsWith(".lut4")) return;
  app.get(`/page/model/${basename(model)}`, (c) => {
    const size = statSync(model).size;
    const body = Readable.toWeb(createReadStream(model)) as ReadableStream<Uint8Array>;
    return c.body(body, 200, {
      "Content-Type": "application/octet-stream",
      "Content-Length": String(size),
      "Cache-Control": "no-cache",
    });
  });
}

/** One file of the page: its route, its bytes and its content type. */
export interface PageFile {
  route: string;
  body: string | Uint8Array<ArrayBuffer>;
  type: string;
}

/**
 * The page's own files (serve/page/ and the two vendored libraries), as the routes serve them; with
 * the tab's module closure under `/src/` when `modules` is set, each named `.js` (scripts/page.ts
 * writes all of them).
 */
export function pageFiles(opts: { modules?: boolean } = {}): PageFile[] {
  const out: PageFile[] = [];
  for (const [route, [file, type]] of Object.entries(PAGE_FILES)) {
    out.push({ route, body: readFileSync(new URL(`../page/${file}`, import.meta.url)), type });
  }
  for (const [route, [pkg, file]] of Object.entries(VENDOR_FILES)) {
    out.push({ route, body: vendorFile(pkg, file), type: JS });
  }
  if (opts.modules) {
    // Named .js: a static host may not know .ts as JavaScript (serve/browser-modules.ts `jsNames`).
    for (const [path, m] of browserModules(undefined, { jsNames: true })) {
      out.push({ route: `/src/${jsName(path)}`, body: m.code, type: JS });
    }
  }
  return out;
}

/**
 * The headers that make the page cross-origin isolated (so it has SharedArrayBuffer, which threads in
 * the tab need): sent with every page route, the tab's modules and its model file. The page loads
 * nothing from another origin, so nothing is blocked. scripts/page.ts writes them for static hosts.
 */
export const ISOLATION_HEADERS = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
} as const;

/** The page routes; `opts.model` is the served model's file, offered to the tab when it is lut4. */
export function pageRoutes(opts: PageOptions = {}): Hono {
  const app = new Hono();
  // On the page's own paths only: the API's answers are not documents and keep their headers.
  for (const path of ["/", "/page/*", ROUTES.modules.path]) {
    app.use(path, async (c, next) => {
      await next();
      for (const [name, value] of Object.entries(ISOLATION_HEADERS)) c.res.headers.set(name, value);
    });
  }
  for (const { route, body, type } of pageFiles()) {
    app.get(route, (c) => c.body(body, 200, { "Content-Type": type, "Cache-Control": "no-cache" }));
  }
  moduleRoutes(app);
  modelRoutes(app, opts.model);
  return app;
}

/**
 * The chat page: `GET /` and its stylesheet and ES modules under `/page/`, the files in `serve/page/`
 * served as they are (read once, when the routes are made; `no-cache`, so an edit shows on reload).
 * The two libraries the page imports at run time, marked (Markdown) and DOMPurify (the HTML sanitizer),
 * are served from node_modules under fixed paths in `/page/vendor/`: exactly those two files, so no
 * other file of node_modules is reachable and there is no directory listing.
 *
 * @example
 * ```ts
 * app.route("/", pageRoutes());
 * (await app.request("/")).headers.get("content-type"); // "text/html; charset=utf-8"
 * (await app.request("/page/vendor/marked.js")).headers.get("content-type"); // "text/javascript; ..."
 * ```
 * @module
 */
import { Hono } from "hono";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

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
  "/page/view.js": ["view.js", JS],
  "/page/follow.js": ["follow.js", JS],
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

/** The page routes. */
export function pageRoutes(): Hono {
  const app = new Hono();
  const serve = (route: string, body: string | Uint8Array<ArrayBuffer>, type: string) =>
    app.get(route, (c) => c.body(body, 200, { "Content-Type": type, "Cache-Control": "no-cache" }));
  for (const [route, [file, type]] of Object.entries(PAGE_FILES)) {
    serve(route, readFileSync(new URL(`../page/${file}`, import.meta.url)), type);
  }
  for (const [route, [pkg, file]] of Object.entries(VENDOR_FILES)) serve(route, vendorFile(pkg, file), JS);
  return app;
}

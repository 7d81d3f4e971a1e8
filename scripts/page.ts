/**
 * Writes the chat page as a folder any static file host serves: the page, the integer engine's modules
 * (the tab worker's import closure, types stripped, as the server serves them: serve/browser-modules.ts)
 * and, when given, a lut4 model with its manifest. Opened from such a host, the page runs the model in
 * the tab only (there is no server to run it on) and says so; without a model in the folder, the user
 * chooses a lut4 file from disk.
 *
 * The folder is written under a temporary name beside DIR and renamed at the end, so a half-written
 * folder never looks like a page. An existing DIR is replaced only with `--force`.
 *
 * Exit codes: 0 written, 1 refused (the model is not a valid lut4 file, DIR exists), 2 usage.
 *
 * @example
 * ```ts
 * // deno run -A scripts/page.ts --out site out/ferry.lut4
 * // python3 -m http.server -d site   (or any static host)
 * ```
 * @module
 */
import { copyFile, mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import process from "node:process";
import { cli, EXIT_REFUSED, fail, failUsage, run } from "./cli.ts";
import { readLut4 } from "../formats/lut4/lut4.ts";
import { FormatError } from "../model/error.ts";
import { ISOLATION_HEADERS, pageFiles, type TabManifest } from "../serve/routes/page.ts";
import { fileSha256 } from "../formats/digest-record.ts";

const HELP = `
Write the chat page as a static folder that runs a model in the browser tab, with no ferry server.

Usage: deno run -A scripts/page.ts --out DIR [MODEL.lut4] [--force] [--json]

DIR gets index.html, page/ (the page, its libraries, the model's manifest and the model) and src/
(the integer engine's modules as JavaScript). Serve DIR with any static file host and open it: the
page loads MODEL into the tab (kept in the browser for the next visit). Without MODEL, the page asks
for a lut4 file from disk. MODEL is checked with the full lut4 reader first.

Options:
  --out DIR   the folder to write (required)
  --force     replace DIR if it exists
  --json      print what was written as JSON
  -h, --help  this text

Exit codes: 0 written, 1 refused (not a valid lut4 file, DIR exists), 2 usage.
`;

/** The index for a static host: every site-absolute `/page/` reference made relative to the folder. */
function staticIndex(html: string): string {
  return html.replaceAll('"/page/', '"./page/');
}

/** What the manifest says of `model` (checked by the lut4 reader), or of its absence. */
async function manifestOf(model: string | undefined): Promise<TabManifest> {
  if (!model) return { server: false, model: null, reason: "this page ships no model" };
  try {
    await readLut4(model);
  } catch (e) {
    if (e instanceof FormatError) fail(e.message);
    throw e;
  }
  const name = basename(model);
  return {
    server: false,
    model: { name, url: `model/${name}`, bytes: (await stat(model)).size, sha256: await fileSha256(model) },
  };
}

/** Writes every file of the folder into `dir`. */
async function writeFolder(dir: string, model: string | undefined, manifest: TabManifest): Promise<number> {
  let files = 0;
  const put = async (route: string, body: string | Uint8Array) => {
    const file = join(dir, route === "/" ? "index.html" : route.slice(1));
    await mkdir(dirname(file), { recursive: true });
    await writeFile(file, body);
    files++;
  };
  for (const f of pageFiles({ modules: true })) {
    await put(
      f.route,
      f.route === "/" ? staticIndex(new TextDecoder().decode(f.body as Uint8Array)) : f.body,
    );
  }
  await put("/page/model.json", JSON.stringify(manifest, null, 2) + "\n");
  // The isolation headers in the form Netlify and Cloudflare Pages read (docs/browser-tab.md: other hosts).
  const headers = Object.entries(ISOLATION_HEADERS).map(([k, v]) => `  ${k}: ${v}\n`).join("");
  await put("/_headers", `/*\n${headers}`);
  if (model && manifest.model) {
    await mkdir(join(dir, "page", "model"), { recursive: true });
    await copyFile(model, join(dir, "page", manifest.model.url));
    files++;
  }
  return files;
}

await run(async () => {
  const { values, positionals } = cli(HELP, {
    out: { type: "string" },
    force: { type: "boolean" },
    json: { type: "boolean" },
  });
  if (!values.out) failUsage("--out DIR is required", HELP);
  if (positionals.length > 1) failUsage(`one model at most, got ${positionals.length}`, HELP);
  const out = resolve(values.out);
  const model = positionals[0];
  if (model && !model.endsWith(".lut4")) {
    fail(`${model}: the tab runs lut4 files (export one with --format lut4), not ${basename(model)}`);
  }
  const exists = await stat(out).then(() => true, () => false);
  if (exists && !values.force) fail(`${out}: exists; pass --force to replace it`, EXIT_REFUSED);
  const manifest = await manifestOf(model);
  const temp = `${out}.tmp-${process.pid}`;
  await rm(temp, { recursive: true, force: true });
  try {
    const files = await writeFolder(temp, model, manifest);
    if (exists) await rm(out, { recursive: true, force: true });
    await rename(temp, out);
    const said = { out, files, model: manifest.model };
    console.log(
      values.json
        ? JSON.stringify(said, null, 2)
        : `wrote ${out}: ${files} files${
          manifest.model ? `, model ${manifest.model.name} (${manifest.model.bytes} bytes)` : ", no model"
        }; serve it with any static file host`,
    );
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
});

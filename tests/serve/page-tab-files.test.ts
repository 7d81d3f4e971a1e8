// What the tab is served (serve/browser-modules.ts, serve/routes/page.ts): the worker's import closure
// under /src/ as JavaScript with the types stripped by amaro, each file the repository's own less its
// types and with only its non-browser specifiers rewritten; nothing outside that closure, no path out
// of it; the audited serving modules among them and none of them reaching the node: stand-in; the
// stand-in's SHA-256 and CRC-32 equal node's; the model's manifest and file; and the bytes entry of the
// integer engine (engines/int/from-bytes.ts): the engine the path loader builds, the reader's refusals.
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { crc32 } from "node:zlib";
import { intEngineFromBytes } from "../../engines/int/from-bytes.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { floatEngineFromLut4Bytes } from "../../engines/float-from-bytes.ts";
import { loadEngine } from "../../engines/mod.ts";
import { parseLut4 } from "../../formats/lut4/lut4.ts";
import { generateAll } from "../../model/generate.ts";
import { encode } from "../../model/tokenizer.ts";
import { browserModules, REPO_ROOT, stripTypes, TAB_ENTRIES } from "../../serve/browser-modules.ts";
import { pageRoutes } from "../../serve/routes/page.ts";
import { smallLut4 } from "../helpers/lut4-fixture.ts";
// @ts-ignore: plain JavaScript for the browser, with no type declarations
import * as standIn from "../../serve/page/worker-node.js";

const app = pageRoutes();

/** tests/kernels/audit.test.ts's list of audited files, read from its source (importing it would run its tests). */
const AUDITED = [
  ...readFileSync(join(import.meta.dir, "../kernels/audit.test.ts"), "utf8")
    .split("export const AUDITED = [")[1].split("];")[0].matchAll(/"([^"]+)"/g),
].map((m) => m[1]);

test("the worker's closure is served under /src/ as JavaScript, with ETags that answer 304", async () => {
  const modules = browserModules();
  expect([...modules.keys()]).toContain(TAB_ENTRIES[0]);
  for (
    const path of [
      "engines/int/from-bytes.ts",
      "formats/lut4/lut4.ts",
      "serve/slots/slot-run.ts",
      "serve/page/worker-node.js",
    ]
  ) {
    expect(modules.has(path)).toBe(true);
    const res = await app.request(`/src/${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(res.headers.get("cache-control")).toBe("no-cache");
    expect(await res.text()).toBe(modules.get(path)!.code);
    const again = await app.request(`/src/${path}`, {
      headers: { "If-None-Match": res.headers.get("etag")! },
    });
    expect(again.status).toBe(304);
  }
  // No type survives: every served file parses as JavaScript (Bun's parser, told it is plain JS).
  const js = new Bun.Transpiler({ loader: "js" });
  for (const m of modules.values()) expect(() => js.scan(m.code)).not.toThrow();
  expect(() => js.scan("let typed: number = 1;")).toThrow(); // the check can fail
});

test("each served module is the repository's file less its types, only non-browser specifiers rewritten", () => {
  for (const [path, m] of browserModules()) {
    const source = readFileSync(join(REPO_ROOT, path), "utf8");
    const stripped = path.endsWith(".ts") ? stripTypes(source, path) : source;
    // Undo the rewrites: what is left must be exactly the stripped file.
    const undone = m.code
      .replace(/"(?:\.{1,2}\/)+(?:serve\/)?(?:page\/)?worker-node\.js"/g, '"NODE"')
      .replace(/"(?:\.\.\/)+node_modules\/smol-toml\/dist\/index\.js"/g, '"smol-toml"')
      .replace(/"(?:\.\.\/)+node_modules\/@huggingface\/jinja\/dist\/index\.js"/g, '"@huggingface/jinja"')
      .replace(
        /"(?:\.\.\/)+node_modules\/@huggingface\/tokenizers\/dist\/tokenizers\.mjs"/g,
        '"@huggingface/tokenizers"',
      );
    // A `node:` specifier left as it is (in a doc comment's example) reads the same on both sides.
    const node = (text: string) => text.replace(/"node:[a-z_/]+"/g, '"NODE"');
    expect(node(undone)).toBe(node(stripped));
  }
});

test("the audited serving modules are served, and none of them reaches the node: stand-in", () => {
  const modules = browserModules();
  expect(AUDITED.length).toBeGreaterThan(10);
  for (const path of AUDITED) {
    expect(modules.has(path)).toBe(true);
    expect(modules.get(path)!.imports).not.toContain("serve/page/worker-node.js");
  }
});

test("nothing outside the closure is served, and no path leads out of it", async () => {
  for (
    const path of [
      "/src/",
      "/src/scripts/chat.ts",
      "/src/serve/app.ts",
      "/src/package.json",
      "/src/../package.json",
      "/src/%2e%2e/package.json",
      "/src/engines/int/../../package.json",
      "/src/engines/int/%2e%2e/%2e%2e/deno.json",
      "/src/node_modules/smol-toml/package.json",
      "/src/serve/page/chat.js",
      "/src/model/tokenizer",
      "/src/%E0%A4%A",
    ]
  ) {
    expect([404, 400]).toContain((await app.request(path)).status);
  }
});

test("every name a served module imports from node: is one the stand-in exports", () => {
  const missing: string[] = [];
  for (const [path, m] of browserModules()) {
    const code = m.code.replace(/\/\*[\s\S]*?\*\//g, ""); // not the doc comments' examples
    for (
      const [, names] of code.matchAll(/^import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*"[^"]*worker-node\.js"/gm)
    ) {
      for (const name of names.split(",").map((n) => n.trim().split(/\s+as\s+/)[0]).filter(Boolean)) {
        if (!(name in standIn)) missing.push(`${path}: ${name}`);
      }
    }
  }
  expect(missing).toEqual([]);
});

test("the node: stand-in hashes and checksums as node does", () => {
  for (const n of [0, 1, 55, 56, 63, 64, 65, 1000, 100_003]) {
    const data = new Uint8Array(randomBytes(n));
    expect(standIn.createHash("sha256").update(data).digest("hex")).toBe(
      createHash("sha256").update(data).digest("hex"),
    );
    // Fed in pieces, as the readers feed it.
    const h = standIn.createHash("sha256");
    for (let at = 0; at < n; at += 17) h.update(data.subarray(at, at + 17));
    expect(h.digest("hex")).toBe(createHash("sha256").update(data).digest("hex"));
    expect(standIn.crc32(data)).toBe(crc32(data) >>> 0);
    // Continued from an earlier part's CRC, as the readers stream it.
    const cut = n >> 1;
    expect(standIn.crc32(data.subarray(cut), standIn.crc32(data.subarray(0, cut)))).toBe(crc32(data) >>> 0);
  }
  expect(() => standIn.readFile("x")).toThrow("readFile: there is no file system in the browser tab");
});

test("a digest handed over (Web Crypto's, or the one kept) is the file's identity, checked against the promise", async () => {
  const bytes = new Uint8Array(readFileSync(await smallLut4()));
  const node = createHash("sha256").update(bytes).digest("hex");
  // Web Crypto's digest is node's, as the tab's worker turns it into hex.
  const subtle = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  expect(Array.from(subtle, (b) => b.toString(16).padStart(2, "0")).join("")).toBe(node);
  // The reader does not hash what it is handed: the digest given is the one the engine carries.
  const given = "ab".repeat(32);
  const made = await intEngineFromBytes(bytes, "ferry.lut4", { digest: Promise.resolve(given) });
  expect(made.sha256).toBe(given);
  expect((await floatEngineFromLut4Bytes(bytes, "ferry.lut4", { digest: Promise.resolve(given) })).sha256)
    .toBe(given);
  // A digest other than the one a download promised is refused, naming both.
  await expect(
    intEngineFromBytes(bytes, "ferry.lut4", { digest: Promise.resolve(given), sha256: node }),
  ).rejects.toThrow(`ferry.lut4: sha256: the file's SHA-256 is ${given}, expected ${node}`);
  // A damaged file is refused by the checks whatever digest comes with it.
  const damaged = bytes.slice();
  damaged[damaged.length - 100] ^= 0xff;
  await expect(intEngineFromBytes(damaged, "ferry.lut4", { digest: Promise.resolve(node) })).rejects
    .toThrow("ferry.lut4");
});

test("the manifest offers the served lut4 file with its SHA-256; another format is explained", async () => {
  const lut4 = await smallLut4();
  const bytes = readFileSync(lut4);
  const served = pageRoutes({ model: lut4 });
  const m = await (await served.request("/page/model.json")).json();
  expect(m).toEqual({
    server: true,
    model: {
      name: "ferry.lut4",
      url: "model/ferry.lut4",
      bytes: bytes.length,
      sha256: createHash("sha256").update(bytes).digest("hex"),
    },
  });
  const file = await served.request("/page/model/ferry.lut4");
  expect(file.headers.get("content-length")).toBe(String(bytes.length));
  expect(new Uint8Array(await file.arrayBuffer())).toEqual(new Uint8Array(bytes));
  const other = await (await pageRoutes({ model: "out/ferry.bf16.dmexp" }).request("/page/model.json"))
    .json();
  expect(other.model).toBeNull();
  expect(other.reason).toContain("ferry.bf16.dmexp is not a lut4 file");
  expect((await pageRoutes({ model: "out/ferry.bf16.dmexp" }).request("/page/model/ferry.bf16.dmexp")).status)
    .toBe(404);
});

test("the bytes entries build the engines the path loaders build, and refuse what the reader refuses", async () => {
  const lut4 = await smallLut4();
  const bytes = new Uint8Array(readFileSync(lut4));
  const made = await intEngineFromBytes(bytes, "ferry.lut4");
  const onDisk = await loadIntEngine(lut4);
  const prompt = encode("The jury said", { bos: true });
  const opts = { maxTokens: 24, temperature: 0.8, topK: 40, seed: 7 };
  expect(await generateAll(made.engine, prompt, opts)).toEqual(await generateAll(onDisk, prompt, opts));
  expect(made.sha256).toBe(createHash("sha256").update(bytes).digest("hex"));
  const float = (await floatEngineFromLut4Bytes(bytes, "ferry.lut4")).engine;
  expect(float.kind).toBe("float");
  expect(await generateAll(float, prompt, opts)).toEqual(
    await generateAll(await loadEngine(lut4, "float"), prompt, opts),
  );
  // As in a page that is not cross-origin isolated (the tab's worker): no SharedArrayBuffer at all.
  const sab = globalThis.SharedArrayBuffer;
  let unshared;
  try {
    (globalThis as { SharedArrayBuffer?: unknown }).SharedArrayBuffer = undefined;
    unshared = (await floatEngineFromLut4Bytes(bytes, "ferry.lut4")).engine;
  } finally {
    globalThis.SharedArrayBuffer = sab;
  }
  expect(await generateAll(unshared, prompt, opts)).toEqual(await generateAll(float, prompt, opts));
  await expect(intEngineFromBytes(bytes, "ferry.lut4", { sha256: "0".repeat(64) })).rejects.toThrow(
    `ferry.lut4: sha256: the file's SHA-256 is ${made.sha256}, expected ${"0".repeat(64)}`,
  );
  const damaged = bytes.slice();
  damaged[damaged.length - 100] ^= 0xff;
  let said = "";
  try {
    parseLut4(damaged, "ferry.lut4");
  } catch (e) {
    said = (e as Error).message;
  }
  expect(said).toContain("ferry.lut4");
  await expect(intEngineFromBytes(damaged, "ferry.lut4")).rejects.toThrow(said);
});

crossProcessTest(
  "scripts/page.ts writes the static folder whole, and refuses a bad model, an existing folder, bad usage",
  async () => {
    const lut4 = await smallLut4();
    const dir = join(mkdtempSync(join(tmpdir(), "ferry-page-")), "site");
    const page = (...args: string[]) => {
      const r = Bun.spawnSync(["bun", "scripts/page.ts", ...args], { cwd: REPO_ROOT });
      return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
    };
    const made = page("--out", dir, lut4, "--json");
    expect(made.code).toBe(0);
    const said = JSON.parse(made.out);
    expect(said.model.name).toBe("ferry.lut4");
    expect(readFileSync(join(dir, "page", "model", "ferry.lut4"))).toEqual(readFileSync(lut4));
    const manifest = JSON.parse(readFileSync(join(dir, "page", "model.json"), "utf8"));
    expect(manifest).toEqual({ server: false, model: said.model });
    // The index refers to the folder relatively; the modules are .js, importing .js.
    const index = readFileSync(join(dir, "index.html"), "utf8");
    expect(index).toContain('"marked": "./page/vendor/marked.js"');
    expect(index).not.toContain('"/page/');
    const worker = readFileSync(join(dir, "src", "serve", "page", "worker.js"), "utf8");
    expect(worker).toContain('from "../../engines/int/from-bytes.js"');
    expect(readdirSync(join(dir, "src", "engines", "int")).every((f) => f.endsWith(".js"))).toBe(true);
    expect(readdirSync(dirname(dir))).toEqual(["site"]); // no temporary folder left behind
    // The isolation headers, in the form Netlify and Cloudflare Pages read.
    expect(readFileSync(join(dir, "_headers"), "utf8")).toBe(
      "/*\n  Cross-Origin-Opener-Policy: same-origin\n  Cross-Origin-Embedder-Policy: require-corp\n",
    );

    const again = page("--out", dir, lut4);
    expect(again.code).toBe(1);
    expect(again.err).toBe(`error: ${dir}: exists; pass --force to replace it\n`);
    expect(page("--out", dir, lut4, "--force").code).toBe(0);
    const bad = join(dirname(dir), "bad.lut4");
    writeFileSync(bad, "not a model at all, just text\n".repeat(8));
    const refused = page("--out", join(dirname(dir), "other"), bad);
    let reader = "";
    try {
      parseLut4(new Uint8Array(readFileSync(bad)), bad);
    } catch (e) {
      reader = (e as Error).message;
    }
    expect(refused.code).toBe(1);
    expect(refused.err).toBe(`error: ${reader}\n`);
    expect(page(lut4).code).toBe(2);
    expect(page("--out", dir, "out/ferry.bf16.dmexp").code).toBe(1);
  },
);

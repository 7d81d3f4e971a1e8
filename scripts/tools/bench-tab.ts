/**
 * How fast the model runs in the browser tab: prefill and decode tokens per second of the integer
 * engine in the tab's Web Worker (serve/page/worker.js, in Debian's Chromium), against the same engine
 * on the server's runtimes (Bun in this process, Deno in a child process), and against wllama
 * (llama.cpp compiled to WebAssembly, npm `@wllama/wllama`) running ferry's Q4_0 GGUF export of the
 * same model in the same Chromium, on the same number of threads (`--threads`, default 1). wllama is no dependency of the project: the pinned
 * version is used from node_modules when it is there, else fetched once with `bun install` into a
 * per-user cache ($XDG_CACHE_HOME/ferry/wllama-3.13.0, or ~/.cache/ferry/...). Also the time from opening the page to the first
 * token of a reply in tab mode: cold (a fresh browser profile: the model is downloaded) and warm (a
 * reload: the model comes from IndexedDB).
 *
 * Every engine is timed the same way: `--prompt` tokens fed at once on a fresh session (prefill), then
 * `--decode` greedy tokens, each picked and fed (decode); the best of `--runs` rounds, each round
 * timing every engine once (so a burst of load on a shared machine falls on all of them). wllama
 * reports its own prompt and predicted timings (llama.cpp's server timings) for the same prompt and
 * token budget.
 *
 * @example
 * ```ts
 * // bun scripts/tools/bench-tab.ts --runs 3 --json
 * // bun scripts/tools/bench-tab.ts --model q06.lut4 --gguf q06.q4_0.gguf --threads 2 --decode 32
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { cli, failUsage, run } from "../cli.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { loadEngine } from "../../engines/mod.ts";
import { readCheckpoint } from "../../formats/checkpoint/checkpoint.ts";
import { ggufFormat } from "../../formats/gguf/gguf.ts";
import { lut4Format } from "../../formats/lut4/lut4.ts";
import type { ModelConfig } from "../../model/config.ts";
import type { Engine } from "../../model/engine.ts";
import { tensorSource } from "../../model/tensor.ts";
import { loadTokenizer } from "../../model/hf-tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";

const HELP = `
Prefill and decode speed of the integer engine in the browser tab, against the server's engine (Bun,
Deno) and wllama (llama.cpp in WebAssembly) on ferry's Q4_0 GGUF, on the same number of threads; and
the time from page load to the first token, cold and warm. The model is the shipped one, exported here,
or any model's lut4 and Q4_0 GGUF exports given together (--model, --gguf).

Usage: bun scripts/tools/bench-tab.ts [--model FILE --gguf FILE] [--threads N] [--prompt N] [--decode N]
                                      [--runs N] [--chromium PATH] [--json]

Options:
  --model FILE       a lut4 export to measure (with --gguf: the same model's Q4_0 GGUF, for wllama);
                     default: the shipped model, exported to both here
  --gguf FILE        see --model
  --threads N        threads of every engine: the tab's worker, the server's, wllama's (default 1); the
                     tab needs cross-origin isolation for more than one, which the page has
  --prompt N         prompt tokens fed at once, in the model's own tokens (default 128)
  --decode N         greedy tokens generated after it (default 128)
  --runs N           runs of each measurement; the best is reported (default 3)
  --chromium PATH    the Chromium to drive (default $FERRY_CHROMIUM, else /usr/bin/chromium);
                     \`bun tests/helpers/chromium.ts\` prints the path of the pinned headless Chromium
                     the tests use, fetching it first if needed
  --json             print the figures as JSON
  -h, --help         this text

wllama (@wllama/wllama 3.13.0) comes from node_modules when it is installed there, else it is fetched
once with \`bun install\` into $XDG_CACHE_HOME/ferry/wllama-3.13.0 (default ~/.cache/ferry/...).
`;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CHECKPOINT = join(ROOT, "model", "default", "ferry.ckpt");
/** The Chromium driven when neither --chromium nor FERRY_CHROMIUM names one. */
export const DEFAULT_CHROMIUM = "/usr/bin/chromium";
/** wllama, pinned: the version the figures in docs/browser-tab.md were measured with. */
const WLLAMA_PACKAGE = "@wllama/wllama";
const WLLAMA_VERSION = "3.13.0";
/**
 * playwright-core, imported by a name held in a variable: it is a test-only package that Deno does not
 * install, and the Deno child process (`--engine-only`) must not need it.
 */
export const PLAYWRIGHT = "playwright-core";

/** The longest a step in a page may take: loading a 0.6B-parameter model into a tab takes tens of seconds. */
const PAGE_TIMEOUT_MS = 600_000;

/** One engine's best prefill and decode rates. */
interface Rates {
  prefillTps: number;
  decodeTps: number;
}

/**
 * The prompt: the first `n` tokens of plain text in the model's own tokenizer (BOS first where it has one;
 * the byte model's are BOS and n - 1 bytes), and their text without BOS, which wllama reads.
 */
async function promptOf(lut4: string, n: number): Promise<{ ids: number[]; text: string }> {
  const tokenizer = loadTokenizer(await lut4Format.readTokenizer!(lut4), lut4);
  const base = "The jury said it did find that the city had been run well and that the election was fair. ";
  const ids = tokenizer.encode(base.repeat(n), { bos: true }).slice(0, n);
  return { ids, text: tokenizer.decode(ids) };
}

/** The best of `runs` timings in tokens per second. */
function best(runs: Timing[], prompt: number, decode: number): Rates {
  return {
    prefillTps: Math.max(...runs.map((r) => prompt / (r.prefillMs / 1000))),
    decodeTps: Math.max(...runs.map((r) => decode / (r.decodeMs / 1000))),
  };
}

/** One timing: the prompt fed at once, then the decode. */
interface Timing {
  prefillMs: number;
  decodeMs: number;
}

/** What wllama reports of one completion (llama.cpp's server timings). */
interface WllamaTimings {
  prompt_n: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_per_second: number;
}

/** The integer engine in this process, once: the same loop as the worker's `bench`. */
async function engineTiming(engine: Engine, prompt: number[], decode: number): Promise<Timing> {
  const s = engine.start();
  const t0 = performance.now();
  await s.feed(prompt, "none");
  const t1 = performance.now();
  for (let i = 0; i < decode; i++) await s.feed([s.pick()], "none");
  return { prefillMs: t1 - t0, decodeMs: performance.now() - t1 };
}

/**
 * The same under Deno, in a child process running this script with `--engine-only`: a warm-up run,
 * then the timed one (the first run of a fresh process includes WebAssembly's tier-up).
 */
function denoTiming(lut4: string, promptTokens: number, decode: number, threads: number): Timing {
  const args = ["run", "-A", join(ROOT, "scripts/tools/bench-tab.ts"), "--engine-only", lut4];
  const r = spawnSync(
    "deno",
    [...args, "--prompt", `${promptTokens}`, "--decode", `${decode}`, "--threads", `${threads}`],
    { encoding: "utf8" },
  );
  if (r.status !== 0) throw new Error(`deno engine run failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!);
}

/**
 * Opening the page to the first text of a reply in tab mode: cold (a fresh profile: the model is
 * downloaded) and warm (a reload: the model comes from IndexedDB). What runs in the page is given as
 * source text: this script is type-checked without the DOM.
 */
// deno-lint-ignore no-explicit-any
async function firstTokenTimes(page: any, url: string): Promise<{ coldMs: number; warmMs: number }> {
  const status = (re: string) => `${re}.test(document.getElementById("tab-status").textContent)`;
  const replied = '!document.querySelector("#log li.streaming")';
  const firstToken = async () => {
    await page.fill("#prompt", "Where is the jury?");
    await page.press("#prompt", "Enter");
    await page.waitForFunction(`(() => {
      const li = document.querySelector("#log li.assistant:last-child");
      return li !== null && (li.textContent.length > 40 || !li.classList.contains("streaming"));
    })()`);
  };
  const t0 = performance.now();
  await page.goto(url);
  // The switch works once the page has connected (a large model's server answers later than a small one's).
  await page.waitForFunction('document.getElementById("model").textContent !== "connecting…"');
  await page.selectOption("#where", "tab");
  await page.waitForFunction('!document.getElementById("tab-panel").hidden');
  await page.click("#tab-load-server");
  await page.waitForFunction(status("/downloaded from the server/"));
  await firstToken();
  const coldMs = performance.now() - t0;
  await page.waitForFunction(replied);
  // The bytes go to IndexedDB after the load has answered: a reload before they are there would find none.
  await page.waitForFunction(status("/browser keeps/"));
  const t1 = performance.now();
  await page.reload();
  await page.waitForFunction(status("/kept in this browser/"));
  await firstToken();
  const warmMs = performance.now() - t1;
  await page.waitForFunction(replied);
  return { coldMs, warmMs };
}

/** The default model exported as lut4 and as ferry's Q4_0 GGUF into `dir`. */
async function exports(dir: string): Promise<{ lut4: string; gguf: string; config: ModelConfig }> {
  const run = await readCheckpoint(CHECKPOINT, { sections: ["model"] });
  const input = {
    config: run.config,
    tensors: run.model!.map(tensorSource),
    source: "ferry.ckpt",
    step: run.step,
    name: "ferry",
  };
  const lut4 = join(dir, "ferry.lut4"), gguf = join(dir, "ferry.q4_0.gguf");
  await lut4Format.write(lut4, input, { dtype: "q4" });
  await ggufFormat.write(gguf, { ...input, tensors: run.model!.map(tensorSource) }, { dtype: "q4_0" });
  return { lut4, gguf, config: run.config };
}

/**
 * Flags and environment for the Chromium at `path`. The tests' pinned headless build (the folder that
 * `bun tests/helpers/chromium.ts` unpacks, with its fonts.conf and NSS libraries in lib/) needs those
 * beside it and no zygote; a system Chromium needs neither.
 */
export function chromiumLaunch(path: string): { args: string[]; env?: Record<string, string | undefined> } {
  const dir = dirname(path);
  if (!existsSync(join(dir, "fonts.conf"))) return { args: ["--no-sandbox", "--headless=new"] };
  const libs = [join(dir, "lib"), process.env.LD_LIBRARY_PATH].filter(Boolean).join(":");
  return {
    args: ["--no-sandbox", "--no-zygote"],
    env: { ...process.env, LD_LIBRARY_PATH: libs, FONTCONFIG_PATH: dir },
  };
}

/** The installed version of a package folder, or undefined when there is none. */
function installedVersion(dir: string): string | undefined {
  try {
    return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version;
  } catch {
    return undefined;
  }
}

/**
 * The folder of the pinned wllama package (its `esm/` is what the page loads): `root`'s node_modules when
 * it holds that version, else a per-user cache, `$XDG_CACHE_HOME/ferry/wllama-3.13.0` (default
 * `~/.cache/ferry/...`), filled on first use by `bun install` of that one package. The install runs in a
 * scratch folder renamed into place when done, so an interrupted fetch leaves no half-filled cache.
 *
 * @example
 * ```ts
 * import { join } from "node:path";
 * import { wllamaDir } from "./bench-tab.ts";
 * const esm = join(wllamaDir(), "esm");
 * ```
 */
export function wllamaDir(root: string = ROOT): string {
  const local = join(root, "node_modules", WLLAMA_PACKAGE);
  if (installedVersion(local) === WLLAMA_VERSION) return local;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  const cache = join(base, "ferry", `wllama-${WLLAMA_VERSION}`);
  const cached = join(cache, "node_modules", WLLAMA_PACKAGE);
  if (installedVersion(cached) === WLLAMA_VERSION) return cached;
  const scratch = `${cache}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(scratch, { recursive: true });
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({ private: true, dependencies: { [WLLAMA_PACKAGE]: WLLAMA_VERSION } }),
  );
  // Under Bun, the running executable; under Deno (or Node), the bun on the PATH.
  const bun = process.versions.bun ? process.execPath : "bun";
  const install = spawnSync(bun, ["install", "--production", "--ignore-scripts", "--silent"], {
    cwd: scratch,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (install.status !== 0) {
    rmSync(scratch, { recursive: true, force: true });
    const why = install.error ? install.error.message : `exit ${install.status}`;
    throw new Error(`fetching ${WLLAMA_PACKAGE}@${WLLAMA_VERSION} with bun install failed (${why})`);
  }
  if (installedVersion(join(scratch, "node_modules", WLLAMA_PACKAGE)) !== WLLAMA_VERSION) {
    rmSync(scratch, { recursive: true, force: true });
    throw new Error(`bun install did not install ${WLLAMA_PACKAGE}@${WLLAMA_VERSION} in ${scratch}`);
  }
  rmSync(cache, { recursive: true, force: true });
  try {
    renameSync(scratch, cache);
  } catch (e) {
    // Another run filled the cache first: keep its copy.
    rmSync(scratch, { recursive: true, force: true });
    if (installedVersion(cached) !== WLLAMA_VERSION) throw e;
  }
  console.error(`bench-tab: fetched ${WLLAMA_PACKAGE}@${WLLAMA_VERSION} (not in node_modules) into ${cache}`);
  return cached;
}

/** A static server for wllama's files and the GGUF, cross-origin isolated (wllama's threads need it). */
function wllamaServer(gguf: string, wllama: string): Promise<{ url: string; close: () => void }> {
  const esm = join(wllama, "esm");
  const types: Record<string, string> = {
    ".js": "text/javascript",
    ".wasm": "application/wasm",
    ".html": "text/html",
  };
  const server = createServer(async (req, res) => {
    const path = normalize(new URL(req.url!, "http://x").pathname);
    const headers = {
      "Cross-Origin-Opener-Policy": "same-origin",
      "Cross-Origin-Embedder-Policy": "require-corp",
    };
    const file = path === "/model.gguf"
      ? gguf
      : path.startsWith("/wllama/")
      ? join(esm, path.slice(8))
      : null;
    if (path === "/") {
      return res.writeHead(200, { ...headers, "Content-Type": "text/html" }).end("<!doctype html><p>wllama");
    }
    if (!file || !file.startsWith(esm) && file !== gguf || !(await stat(file).catch(() => null))) {
      return res.writeHead(404, headers).end();
    }
    res.writeHead(200, { ...headers, "Content-Type": types[extname(file)] ?? "application/octet-stream" });
    res.end(await readFile(file));
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      resolve({ url: `http://127.0.0.1:${port}/`, close: () => server.close() });
    })
  );
}

if (import.meta.main) {
  await run(main);
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, {
    prompt: { type: "string", default: "128" },
    decode: { type: "string", default: "128" },
    runs: { type: "string", default: "3" },
    chromium: { type: "string", default: process.env.FERRY_CHROMIUM || DEFAULT_CHROMIUM },
    json: { type: "boolean" },
    model: { type: "string" },
    gguf: { type: "string" },
    threads: { type: "string", default: "1" },
    "engine-only": { type: "boolean" },
  });
  const promptN = Number(values.prompt), decode = Number(values.decode), runs = Number(values.runs);
  const threads = Number(values.threads);
  if (!(Number.isInteger(threads) && threads >= 1 && threads <= 64)) {
    failUsage(`--threads ${values.threads}: expected a whole number from 1 to 64`, HELP);
  }
  if ((values.model === undefined) !== (values.gguf === undefined)) {
    failUsage("--model and --gguf go together: the same model's lut4 and Q4_0 GGUF exports", HELP);
  }
  if (values["engine-only"]) {
    const { ids } = await promptOf(positionals[0], promptN);
    const engine = await loadIntEngine(positionals[0], { threads });
    await engineTiming(engine, ids, decode);
    console.log(JSON.stringify(await engineTiming(engine, ids, decode)));
    return;
  }
  const chromiumPath = values.chromium;
  if (!existsSync(chromiumPath)) {
    throw new Error(
      `no Chromium at ${chromiumPath}: give --chromium PATH or set FERRY_CHROMIUM ` +
        "(`bun tests/helpers/chromium.ts` prints the path of the pinned headless Chromium the tests use)",
    );
  }
  const wllamaFolder = wllamaDir();
  const dir = await mkdtemp(join(tmpdir(), "ferry-bench-tab-"));
  // deno-lint-ignore no-explicit-any
  const { chromium } = (await import(PLAYWRIGHT)) as { chromium: any };
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    ...chromiumLaunch(chromiumPath),
  });
  try {
    const { lut4, gguf } = values.model !== undefined
      ? { lut4: values.model, gguf: values.gguf! }
      : await exports(dir);
    const { ids: prompt, text } = await promptOf(lut4, promptN);

    // The tab: the ferry server hands out the page, the modules and the model; the worker runs it. The
    // server's engine, with the file's tokenizer, is also the one timed under Bun.
    const engine = await loadEngine(lut4, "int", { threads });
    const server = await listen(createApp({ engine }).fetch, { hostname: "127.0.0.1", port: 0 });
    const page = await (await browser.newContext()).newPage();
    // A real model's download, load and replies take minutes in a tab, not Playwright's default 30 s.
    page.setDefaultTimeout(PAGE_TIMEOUT_MS);
    const { coldMs, warmMs } = await firstTokenTimes(page, server.url);

    // wllama on ferry's Q4_0 GGUF, CPU only, in the same Chromium, on as many threads.
    const ws = await wllamaServer(gguf, wllamaFolder);
    const wpage = await (await browser.newContext()).newPage();
    wpage.setDefaultTimeout(PAGE_TIMEOUT_MS);
    await wpage.goto(ws.url);
    await wpage.evaluate(`(async () => {
      const { Wllama } = await import("/wllama/index.js");
      globalThis.w = new Wllama({ default: "/wllama/wasm/wllama.wasm" }, { suppressNativeLog: true });
      await w.loadModelFromUrl("/model.gguf", {
        n_threads: ${threads}, n_ctx: ${Math.max(512, 2 * (promptN + decode))}, n_batch: 512, n_gpu_layers: 0,
      });
    })()`);

    // Rounds, each engine once per round, so a burst of load on the shared machine hits all of them.
    const times = { tab: [] as Timing[], bun: [] as Timing[], deno: [] as Timing[] };
    const wllamaRuns: WllamaTimings[] = [];
    // A first, untimed run of the tab and of this process: the Deno child makes one too (tier-up).
    const benchInTab = `import("/page/tab.js").then((t) => t.benchTab(${
      JSON.stringify(prompt)
    }, ${decode}, ${threads}))`;
    await page.evaluate(benchInTab);
    await engineTiming(engine, prompt, decode);
    for (let r = 0; r < runs; r++) {
      times.tab.push(await page.evaluate(benchInTab));
      times.bun.push(await engineTiming(engine, prompt, decode));
      times.deno.push(denoTiming(lut4, promptN, decode, threads));
      wllamaRuns.push(
        await wpage.evaluate(`w.createCompletion({
          prompt: ${JSON.stringify(text)},
          max_tokens: ${decode},
          temperature: 0,
          ignore_eos: true,
          cache_prompt: false,
        }).then((res) => res.timings)`),
      );
    }
    ws.close();
    await server.close();
    const tab = best(times.tab, prompt.length, decode);
    const bun = best(times.bun, prompt.length, decode);
    const deno = best(times.deno, prompt.length, decode);
    const wllama = {
      prefillTps: Math.max(...wllamaRuns.map((t) => t.prompt_per_second)),
      decodeTps: Math.max(...wllamaRuns.map((t) => t.predicted_per_second)),
      promptTokens: wllamaRuns[0].prompt_n,
      decodeTokens: wllamaRuns[0].predicted_n,
    };

    const result = {
      model: values.model ?? "the shipped model",
      threads,
      promptTokens: prompt.length,
      decodeTokens: decode,
      runs,
      tab,
      serverBun: bun,
      serverDeno: deno,
      wllama,
      tabVsWllamaDecode: tab.decodeTps / wllama.decodeTps,
      tabVsServerDecode: tab.decodeTps / Math.max(bun.decodeTps, deno.decodeTps),
      firstTokenMs: { cold: coldMs, warm: warmMs },
    };
    if (values.json) {
      console.log(JSON.stringify(result, null, 2));
      return;
    }
    const row = (name: string, r: Rates) =>
      `${name.padEnd(28)} ${r.prefillTps.toFixed(0).padStart(8)} ${r.decodeTps.toFixed(0).padStart(8)}`;
    console.log(
      `${result.model}: prompt ${prompt.length} tokens, decode ${decode}, ${threads} thread(s), best of ${runs}; tok/s:`,
    );
    console.log(`${"".padEnd(28)}  prefill   decode`);
    console.log(row("tab (int, Chromium worker)", tab));
    console.log(row("server int engine, Bun", bun));
    console.log(row("server int engine, Deno", deno));
    console.log(row("wllama Q4_0 GGUF", wllama));
    console.log(
      `tab decode: ${result.tabVsWllamaDecode.toFixed(2)}x wllama, ${
        result.tabVsServerDecode.toFixed(2)
      }x the server`,
    );
    console.log(`page load to first token: cold ${coldMs.toFixed(0)} ms, warm ${warmMs.toFixed(0)} ms`);
  } finally {
    await browser.close();
    await rm(dir, { recursive: true, force: true });
    process.exitCode ??= 0;
  }
}

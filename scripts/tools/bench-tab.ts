/**
 * How fast the model runs in the browser tab: prefill and decode tokens per second of the integer
 * engine in the tab's Web Worker (serve/page/worker.js, in Debian's Chromium), against the same engine
 * on the server's runtimes (Bun in this process, Deno in a child process), and against wllama
 * (llama.cpp compiled to WebAssembly, npm `@wllama/wllama`) running ferry's Q4_0 GGUF export of the
 * same model in the same Chromium, one thread each. Also the time from opening the page to the first
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
 * ```
 * @module
 */
import { spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import process from "node:process";
import { cli, run } from "../cli.ts";
import { loadIntEngine } from "../../engines/int/engine.ts";
import { readCheckpoint } from "../../formats/checkpoint.ts";
import { ggufFormat } from "../../formats/gguf.ts";
import { lut4Format } from "../../formats/lut4.ts";
import type { ModelConfig } from "../../model/config.ts";
import type { Engine } from "../../model/engine.ts";
import { tensorSource } from "../../model/tensor.ts";
import { encode } from "../../model/tokenizer.ts";
import { createApp } from "../../serve/app.ts";
import { listen } from "../../serve/listen.ts";

const HELP = `
Prefill and decode speed of the integer engine in the browser tab, against the server's engine (Bun,
Deno) and wllama (llama.cpp in WebAssembly) on ferry's Q4_0 GGUF, one thread each; and the time from
page load to the first token, cold and warm.

Usage: bun scripts/tools/bench-tab.ts [--prompt N] [--decode N] [--runs N] [--json]

Options:
  --prompt N   prompt tokens fed at once (default 128)
  --decode N   greedy tokens generated after it (default 128)
  --runs N     runs of each measurement; the best is reported (default 3)
  --json       print the figures as JSON
  -h, --help   this text
`;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CHECKPOINT = join(ROOT, "model", "default", "ferry.ckpt");
const CHROMIUM = "/usr/bin/chromium";
/**
 * playwright-core, imported by a name held in a variable: it is a test-only package that Deno does not
 * install, and the Deno child process (`--engine-only`) must not need it.
 */
const PLAYWRIGHT = "playwright-core";

/** One engine's best prefill and decode rates. */
interface Rates {
  prefillTps: number;
  decodeTps: number;
}

/** The prompt: `n` tokens of plain text (BOS and n - 1 bytes), the same text every engine reads. */
function promptText(n: number): string {
  const base = "The jury said it did find that the city had been run well and that the election was fair. ";
  return base.repeat(Math.ceil(n / base.length)).slice(0, n - 1);
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
function denoTiming(lut4: string, promptTokens: number, decode: number): Timing {
  const args = ["run", "-A", join(ROOT, "scripts/tools/bench-tab.ts"), "--engine-only", lut4];
  const r = spawnSync("deno", [...args, "--prompt", `${promptTokens}`, "--decode", `${decode}`], {
    encoding: "utf8",
  });
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
  await page.selectOption("#where", "tab");
  await page.click("#tab-load-server");
  await page.waitForFunction(status("/downloaded from the server/"));
  await firstToken();
  const coldMs = performance.now() - t0;
  await page.waitForFunction(replied);
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

/** A static server for wllama's files and the GGUF, cross-origin isolated (wllama's threads need it). */
function wllamaServer(gguf: string): Promise<{ url: string; close: () => void }> {
  const esm = join(ROOT, "node_modules", "@wllama", "wllama", "esm");
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

await run(async () => {
  const { values, positionals } = cli(HELP, {
    prompt: { type: "string", default: "128" },
    decode: { type: "string", default: "128" },
    runs: { type: "string", default: "3" },
    json: { type: "boolean" },
    "engine-only": { type: "boolean" },
  });
  const promptN = Number(values.prompt), decode = Number(values.decode), runs = Number(values.runs);
  const text = promptText(promptN);
  const prompt = encode(text, { bos: true });
  if (values["engine-only"]) {
    const engine = await loadIntEngine(positionals[0]);
    await engineTiming(engine, prompt, decode);
    console.log(JSON.stringify(await engineTiming(engine, prompt, decode)));
    return;
  }
  const dir = await mkdtemp(join(tmpdir(), "ferry-bench-tab-"));
  // deno-lint-ignore no-explicit-any
  const { chromium } = (await import(PLAYWRIGHT)) as { chromium: any };
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ["--no-sandbox", "--headless=new"],
  });
  try {
    const { lut4, gguf } = await exports(dir);

    // The tab: the ferry server hands out the page, the modules and the model; the worker runs it.
    const engine = await loadIntEngine(lut4);
    const server = await listen(createApp({ engine }).fetch, { hostname: "127.0.0.1", port: 0 });
    const page = await (await browser.newContext()).newPage();
    const { coldMs, warmMs } = await firstTokenTimes(page, server.url);

    // wllama on ferry's Q4_0 GGUF, one thread, CPU only, in the same Chromium.
    const ws = await wllamaServer(gguf);
    const wpage = await (await browser.newContext()).newPage();
    await wpage.goto(ws.url);
    await wpage.evaluate(`(async () => {
      const { Wllama } = await import("/wllama/index.js");
      globalThis.w = new Wllama({ default: "/wllama/wasm/wllama.wasm" }, { suppressNativeLog: true });
      await w.loadModelFromUrl("/model.gguf", { n_threads: 1, n_ctx: 512, n_batch: 512, n_gpu_layers: 0 });
    })()`);

    // Rounds, each engine once per round, so a burst of load on the shared machine hits all of them.
    const times = { tab: [] as Timing[], bun: [] as Timing[], deno: [] as Timing[] };
    const wllamaRuns: WllamaTimings[] = [];
    const bunEngine = await loadIntEngine(lut4);
    for (let r = 0; r < runs; r++) {
      times.tab.push(
        await page.evaluate(
          `import("/page/tab.js").then((t) => t.benchTab(${JSON.stringify(prompt)}, ${decode}))`,
        ),
      );
      times.bun.push(await engineTiming(bunEngine, prompt, decode));
      times.deno.push(denoTiming(lut4, promptN, decode));
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
    console.log(`prompt ${prompt.length} tokens, decode ${decode}, best of ${runs}; tok/s:`);
    console.log(`${"".padEnd(28)}  prefill   decode`);
    console.log(row("tab (int, Chromium worker)", tab));
    console.log(row("server int engine, Bun", bun));
    console.log(row("server int engine, Deno", deno));
    console.log(row("wllama Q4_0 GGUF, 1 thread", wllama));
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
});

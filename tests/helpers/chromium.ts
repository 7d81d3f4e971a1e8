// The Chromium the browser tests drive. By default a pinned headless build from the npm registry:
// @sparticuz/chromium ships chrome-headless-shell, brotli-packed, with SwiftShader and the NSS libraries
// it links, so a machine with only Bun and Deno (no root, no apt) can run the page tests. It is fetched
// with `bun install` and unpacked once into a per-user cache. FERRY_CHROMIUM=/path/to/chrome overrides it
// (Debian's /usr/bin/chromium, say). Written here rather than through the package's own executablePath(),
// which unpacks into a shared /tmp/chromium that parallel test processes would race on.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import process from "node:process";
import { brotliDecompressSync } from "node:zlib";

export const CHROMIUM_PACKAGE = "@sparticuz/chromium";
export const CHROMIUM_VERSION = "153.0.0";

/** How to start the browser: the executable, the environment it needs, and its own command-line flags. */
export interface ChromiumBuild {
  executablePath: string;
  env: Record<string, string>;
  args: string[];
  /** In words, for a test's log: which Chromium runs. */
  source: string;
}

/** The cache folder of the pinned build: $XDG_CACHE_HOME/ferry, or ~/.cache/ferry. */
export function chromiumCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "ferry", `chromium-${CHROMIUM_VERSION}`);
}

/** The Chromium to drive, fetched and unpacked on first use (about 70 MB from the registry, 230 MB unpacked). */
export function chromiumBuild(): ChromiumBuild {
  const chosen = process.env.FERRY_CHROMIUM;
  if (chosen) {
    if (!existsSync(chosen)) throw new Error(`FERRY_CHROMIUM=${chosen}: no such file`);
    // The pinned build named by its path (as `bun tests/helpers/chromium.ts` prints it) runs as the
    // pinned build: with its fonts and libraries, or the page tests' layouts differ.
    const folder = dirname(chosen);
    if (basename(chosen) === "chromium" && existsSync(join(folder, "fonts.conf"))) return pinnedBuild(folder);
    return { executablePath: chosen, env: {}, args: ["--no-sandbox"], source: `FERRY_CHROMIUM (${chosen})` };
  }
  const dir = chromiumCacheDir();
  if (!existsSync(join(dir, "chromium"))) withLock(`${dir}.lock`, () => existsSync(dir) || unpackInto(dir));
  return pinnedBuild(dir);
}

/** How to start the pinned build unpacked in `dir`. */
function pinnedBuild(dir: string): ChromiumBuild {
  return {
    executablePath: join(dir, "chromium"),
    // The NSS libraries of the package come first, so a machine without libnss3 runs it too; fontconfig
    // reads the package's fonts through the fonts.conf written beside them.
    env: {
      LD_LIBRARY_PATH: [join(dir, "lib"), process.env.LD_LIBRARY_PATH].filter(Boolean).join(":"),
      FONTCONFIG_PATH: dir,
    },
    // chrome-headless-shell needs no zygote and, run as root or without user namespaces, no sandbox.
    args: ["--no-sandbox", "--no-zygote"],
    source: `${CHROMIUM_PACKAGE}@${CHROMIUM_VERSION} from the npm registry (${dir})`,
  };
}

/** Fetches the package into a scratch folder beside `dir`, unpacks it there, then renames it into place. */
function unpackInto(dir: string): void {
  const scratch = `${dir}.tmp-${process.pid}`;
  rmSync(scratch, { recursive: true, force: true });
  mkdirSync(join(scratch, "out"), { recursive: true });
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({ private: true, dependencies: { [CHROMIUM_PACKAGE]: CHROMIUM_VERSION } }),
  );
  // Bun is the runtime running the tests, so it is there; it reads the same registry settings as npm.
  const bun = process.versions.bun ? process.execPath : "bun";
  const install = spawnSync(bun, ["install", "--production", "--ignore-scripts", "--silent"], {
    cwd: scratch,
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (install.status !== 0) {
    throw new Error(
      `fetching ${CHROMIUM_PACKAGE}@${CHROMIUM_VERSION} with bun install failed (exit ${install.status})`,
    );
  }
  const bin = join(scratch, "node_modules", CHROMIUM_PACKAGE, "bin");
  const out = join(scratch, "out");
  writeFileSync(join(out, "chromium"), brotliDecompressSync(readFileSync(join(bin, "chromium.br"))), {
    mode: 0o755,
  });
  // SwiftShader lands beside the executable (Chromium looks there); the NSS libraries in lib/; the fonts.
  for (const archive of ["swiftshader.tar.br", "al2023.tar.br", "fonts.tar.br"]) {
    const tar = spawnSync("tar", ["-x", "-C", out], {
      input: brotliDecompressSync(readFileSync(join(bin, archive))),
    });
    if (tar.status !== 0) {
      throw new Error(`unpacking ${archive} of ${CHROMIUM_PACKAGE} failed: ${tar.stderr}`);
    }
  }
  writeFileSync(
    join(out, "fonts.conf"),
    `<?xml version="1.0"?>\n<fontconfig><dir>${join(dir, "fonts")}</dir>` +
      `<cachedir>${join(dir, "fonts-cache")}</cachedir></fontconfig>\n`,
  );
  renameSync(out, dir);
  rmSync(scratch, { recursive: true, force: true });
}

/** Runs `work` holding a lock folder, so parallel test processes fetch the build once; a stale lock is taken. */
function withLock(lock: string, work: () => unknown): void {
  mkdirSync(join(lock, ".."), { recursive: true });
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 5 * 60_000) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) throw new Error(`waited 10 minutes for ${lock}; remove it if no test runs`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    work();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  // `bun tests/helpers/chromium.ts` fetches the build if needed and prints its path (bench-tab's --chromium).
  console.log(chromiumBuild().executablePath);
}

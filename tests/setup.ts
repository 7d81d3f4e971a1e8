// Preloaded by bun test (bunfig.toml): on a fresh clone, install the npm dependencies first.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
if (!existsSync(join(root, "node_modules", "smol-toml"))) {
  console.error("tests/setup.ts: node_modules is missing; running bun install");
  const r = spawnSync("bun", ["install", "--no-save"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) throw new Error("bun install failed; install the dependencies with `bun install` or `npm ci`");
}

// The prompt cache on a model with Qwen3's real tokenizer and template (a reduced random Qwen3 folder,
// tests/helpers/qwen3-folder.ts), turn 2 of a chat (tests/helpers/qwen3-turns.ts): with thinking off,
// the template drops turn 1's empty think block, and turn 2 reuses the whole common prefix of the two
// prompts (turn 1's prompt less that block); with thinking on, all of turn 1's prompt and the reply,
// resent in the tokens it was generated as. Read ahead while the user types (serve/slots/slots.ts
// `Lease.prime`), turn 2 reuses all but its new message either way. Replies equal a cache-less server's;
// float and integer engines under Bun, the float engine under Deno.
import { beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import process from "node:process";
import { loadEngine } from "../../engines/mod.ts";
import type { Engine } from "../../model/engine.ts";
import { crossProcessTest } from "../helpers/fast.ts";
import { withoutDenoDownloads } from "../helpers/deno.ts";
import { qwen3Folder } from "../helpers/qwen3-folder.ts";
import { type TwoTurns, twoTurns } from "../helpers/qwen3-turns.ts";

const ROOT = join(import.meta.dir, "../..");
/** Tokens of the empty think block the thinking-off prompt ends with: <think> \n\n </think> \n\n. */
const EMPTY_THINK = 4;
let folder: string;
const engines: Record<string, Engine> = {};

beforeAll(async () => {
  folder = await qwen3Folder({ peaked: true });
  for (const kind of ["float", "int"]) engines[kind] = await loadEngine(folder, kind);
}, 60_000);

/** The checks on one runtime's result for one engine. */
function check(
  name: string,
  thinking: boolean,
  { on, off, primed }: { on: TwoTurns; off: TwoTurns; primed: TwoTurns },
) {
  expect(`${name} ${on.replies}`).toBe(`${name} ${off.replies}`);
  expect(`${name} ${primed.replies}`).toBe(`${name} ${off.replies}`);
  expect(off.cached).toBe(0);
  // Read ahead: only the new message, its end and the reply's opening are left to read.
  expect(`${name} ${primed.cached}`).toBe(`${name} ${primed.prompt2 - primed.tail}`);
  expect(primed.tail).toBeLessThan(16);
  if (!thinking) {
    expect(`${name} ${on.cached}`).toBe(`${name} ${on.common}`);
    expect(on.prompts[0] - on.common).toBe(EMPTY_THINK);
  } else {
    // The random model opens no think block: the reply is all content, resent right after turn 1's
    // prompt, and reused in the tokens it was generated as (serve/chat/reply-tokens.ts).
    expect(on.replies[0].startsWith("|")).toBe(true);
    expect(on.common).toBe(on.prompts[0]);
    expect(`${name} ${on.cached}`).toBe(`${name} ${on.prompts[0] + on.reply}`);
  }
}

for (const kind of ["float", "int"]) {
  for (const thinking of [false, true]) {
    test(`${kind} engine, thinking ${thinking ? "on" : "off"}: turn 2 reuses the common prefix, or all read ahead`, async () => {
      check(kind, thinking, await twoTurns(engines[kind], thinking));
    });
  }
}

crossProcessTest("under Deno, the float engine's turn 2 reuses the common prefix too", () => {
  const script = `
    import { loadEngine } from "${ROOT}/engines/mod.ts";
    import { twoTurns } from "${ROOT}/tests/helpers/qwen3-turns.ts";
    const engine = await loadEngine(${JSON.stringify(folder)}, "float");
    console.log(JSON.stringify([await twoTurns(engine, false), await twoTurns(engine, true)]));
  `;
  const deno = spawnSync("deno", ["eval", "--ext=ts", script], {
    encoding: "utf8",
    cwd: ROOT,
    env: process.env,
  });
  expect(withoutDenoDownloads(deno.stderr)).toBe("");
  expect(deno.status).toBe(0);
  const [off, on] = JSON.parse(deno.stdout);
  check("deno float", false, off);
  check("deno float", true, on);
}, 60_000);

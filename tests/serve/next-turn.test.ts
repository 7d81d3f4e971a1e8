// serve/slots/next-turn.ts: a turn resolves on every runtime; callers that ask while one is pending share it; a
// Deno process that took turns still exits on its own; and in a worker under either runtime a turn lets the
// worker's own messages in (a slot worker hears its abort mid-reply).
import { expect, test } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nextTurn } from "../../serve/slots/next-turn.ts";

/**
 * Turns for 60 ms with a timer running beside them: the timer must fire more than once (the loop really
 * turned; a loop that never let timers in would count none), and concurrent callers must each be
 * answered. The tick count is a floor, not a rate: on two busy cores a 1 ms timer fired 5 times in 60 ms. Run here under Bun and, as its source, in a Deno child.
 */
async function turnsBesideATimer(turn: () => Promise<void>): Promise<{ turns: number; ticks: number }> {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 1);
  const start = performance.now();
  let turns = 0;
  while (performance.now() - start < 60) {
    await Promise.all([turn(), turn(), turn()]);
    turns++;
  }
  clearInterval(timer);
  return { turns, ticks };
}

const SCRIPT = `
import { nextTurn } from "${new URL("../../serve/slots/next-turn.ts", import.meta.url).href}";
const turnsBesideATimer = ${turnsBesideATimer.toString()};
console.log(JSON.stringify(await turnsBesideATimer(nextTurn)));
`;

/** Runs SCRIPT from a file (`deno eval` would grant every permission) under `flags`. */
function runDeno(flags: string[]) {
  const dir = mkdtempSync(join(tmpdir(), "ferry-turn-test-"));
  try {
    writeFileSync(join(dir, "turns.ts"), SCRIPT);
    const r = spawnSync("deno", ["run", ...flags, join(dir, "turns.ts")], {
      encoding: "utf8",
      timeout: 30_000,
    });
    return { status: r.status, signal: r.signal, stderr: r.stderr, out: r.stdout.trim() };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("Bun: concurrent turns all resolve, and timers run between them", async () => {
  const { turns, ticks } = await turnsBesideATimer(nextTurn);
  expect(turns).toBeGreaterThan(100);
  expect(ticks).toBeGreaterThan(1);
});

crossProcessTest(
  "Deno's main thread: timer turns resolve, let timers run, and the process exits by itself",
  () => {
    const r = runDeno(["-A"]);
    expect(r.signal).toBeNull(); // not killed by the timeout: nothing held the process open
    expect(r.status).toBe(0);
    const { turns, ticks } = JSON.parse(r.out);
    expect(turns).toBeGreaterThan(3);
    expect(ticks).toBeGreaterThan(1);
  },
);

/** Starts tests/helpers/turning-worker.ts, stops it after 100 ms, and gives what it says and when. */
const STOP_SCRIPT = `
const w = new Worker(${
  JSON.stringify(new URL("../helpers/turning-worker.ts", import.meta.url).href)
}, { type: "module" });
const said = new Promise((resolve) => (w.onmessage = (e) => resolve(e.data)));
w.postMessage("go");
await new Promise((r) => setTimeout(r, 100));
const t0 = performance.now();
w.postMessage("stop");
const r = await said;
w.terminate();
console.log(JSON.stringify({ ...r, heardMs: performance.now() - t0 }));
`;

/** The worker is stopped by a message between its stretches of work (asserted for both runtimes). */
function expectHeard(out: string) {
  const r = JSON.parse(out);
  expect(r.stopped).toBe(true); // not the 5,000-turn cap (10 s)
  expect(r.turns).toBeGreaterThan(0);
  expect(r.heardMs).toBeLessThan(2_000); // a few turns even on two busy cores; without them, never
}

crossProcessTest("a Deno worker hears a message between its turns", () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-turn-test-"));
  try {
    writeFileSync(join(dir, "stop.ts"), STOP_SCRIPT);
    const r = spawnSync("deno", ["run", "-A", join(dir, "stop.ts")], { encoding: "utf8", timeout: 30_000 });
    expect(r.status).toBe(0);
    expectHeard(r.stdout.trim());
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a Bun worker hears a message between its turns", async () => {
  const w = new Worker(new URL("../helpers/turning-worker.ts", import.meta.url).href, { type: "module" });
  const said = new Promise<unknown>((resolve) => (w.onmessage = (e) => resolve(e.data)));
  w.postMessage("go");
  await new Promise((r) => setTimeout(r, 100));
  const t0 = performance.now();
  w.postMessage("stop");
  const r = await said as object;
  w.terminate();
  expectHeard(JSON.stringify({ ...r, heardMs: performance.now() - t0 }));
});

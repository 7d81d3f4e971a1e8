// serve/sessions/session-limits.ts and serve/sessions/session-store.ts: the newest sessions kept within a count and a byte
// bound, the newest always (the tab's worker keeps its sessions by the same rule).
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createSessionStore } from "../../serve/sessions/session-store.ts";
import { overLimits } from "../../serve/sessions/session-limits.ts";

const saved = (bytes: number[]) => bytes.map((b, i) => ({ name: `s${i}`, time: i, bytes: b }));

describe("overLimits", () => {
  test("drops the oldest past the count, oldest first", () => {
    expect(overLimits(saved([1, 1, 1, 1]), { sessions: 2, bytes: 100 }).map((s) => s.name)).toEqual([
      "s0",
      "s1",
    ]);
  });

  test("keeps the newest run within the bytes; everything older goes, small or not", () => {
    const drop = overLimits(saved([5, 10, 60, 30]), { sessions: 10, bytes: 95 });
    expect(drop.map((s) => s.name)).toEqual(["s0", "s1"]); // 30 + 60 kept; 10 more is over
    expect(overLimits(saved([5, 10, 60, 30]), { sessions: 10, bytes: 100 }).map((s) => s.name)).toEqual([
      "s0",
    ]);
  });

  test("the newest is kept whatever its size; nothing is dropped within the limits", () => {
    expect(overLimits(saved([5, 500]), { sessions: 10, bytes: 100 }).map((s) => s.name)).toEqual(["s0"]);
    expect(overLimits(saved([5, 5]), { sessions: 2, bytes: 10 })).toEqual([]);
  });
});

test("the store deletes what falls outside its byte bound, and keeps reading the rest", async () => {
  const dir = mkdtempSync(join(tmpdir(), "ferry-sessions-"));
  try {
    const store = await createSessionStore(dir, { bytes: 2_500 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push(await store.put(new Uint8Array(1_000).fill(i)));
      await Bun.sleep(5); // distinct modification times
    }
    expect(readdirSync(dir).length).toBe(2);
    expect(await store.get(ids[0])).toBeUndefined();
    expect(await store.get(ids[1])).toBeUndefined();
    expect((await store.get(ids[3]))![0]).toBe(3);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// scripts/cli.ts's progress line, as a command that is not on a terminal prints it when done: the count
// and its total carry the unit ("2274/2274 MiB"), not only the rate. Run in a child process: tests
// import no scripts/ module.
import { expect } from "bun:test";
import { crossProcessTest } from "../helpers/fast.ts";
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const CLI = join(import.meta.dir, "../../scripts/cli.ts");

crossProcessTest("the progress line gives the unit of its count", () => {
  const code = `
    import { progress } from ${JSON.stringify(CLI)};
    const bar = progress("export lut4", 5, { unit: "MiB" });
    bar.tick(3); bar.tick(2); bar.done();
    const plain = progress("eval", 2);
    plain.tick(2); plain.done();
  `;
  const r = spawnSync("bun", ["--eval", code], { encoding: "utf8" });
  expect(r.status).toBe(0);
  const lines = r.stderr.trim().split("\n");
  expect(lines[0]).toMatch(/^export lut4 \[#{24}\] 5\/5 MiB [\d.]+\S* MiB\/s /);
  expect(lines[1]).toMatch(/^eval \[#{24}\] 2\/2 it /);
});

/**
 * Runs one export in this process and prints, as JSON, how far its resident memory grew: the RSS after
 * the modules are loaded (`baseline`), the highest RSS sampled every 10 ms while the export ran, and the
 * kernel's high-water mark (`maxRss`, /proc/self/status VmHWM), all in bytes. tests/e2e/memory-bound.test.ts spawns it, so the growth
 * it measures is the export's alone.
 *
 * @example
 * ```ts
 * // bun tests/helpers/export-rss.ts IN.hf OUT.bf16.dmexp dmexp
 * // {"baseline":61734912,"peak":90112000,"maxRss":90112000}
 * // bun tests/helpers/export-rss.ts IN.bf16.dmexp - load-float   (loads its weights on the float engine)
 * ```
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { exportCheckpoint } from "../../formats/export.ts";

const [input, output, format] = process.argv.slice(2);
// `load-float` loads `input`'s weights on the float engine instead (`output` unused): what loading them
// costs, without the tokenizer loadEngine would build beside them.
const engine = format === "load-float"
  ? await (await import("../../engines/mod.ts")).ENGINES.float.factory()
  : null;
const dmexp = format === "load-float" ? (await import("../../formats/dmexp/dmexp.ts")).dmexpFormat : null;
const baseline = process.memoryUsage().rss;
let peak = baseline;
const timer = setInterval(() => peak = Math.max(peak, process.memoryUsage().rss), 10);
if (engine && dmexp) (await engine(input, dmexp, { threads: 1 })).dispose?.();
else await exportCheckpoint({ input, output, format });
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
// The kernel's high-water mark of this process's own memory: VmHWM, not getrusage's maxRSS, which a
// spawned process inherits from its parent at fork (so a test runner's size would count as growth).
const hwm = /VmHWM:\s*(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
const maxRss = hwm ? Number(hwm[1]) * 1024 : peak;
console.log(JSON.stringify({ baseline, peak, maxRss }));

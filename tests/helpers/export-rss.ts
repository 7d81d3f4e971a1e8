/**
 * Runs one export in this process and prints, as JSON, how far its resident memory grew: the RSS after
 * the modules are loaded (`baseline`), the highest RSS sampled every 10 ms while the export ran, and the
 * kernel's high-water mark (`maxRss`, /proc/self/status VmHWM), all in bytes. tests/memory-bound.test.ts spawns it, so the growth
 * it measures is the export's alone.
 *
 * @example
 * ```ts
 * // bun tests/helpers/export-rss.ts IN.hf OUT.bf16.dmexp dmexp
 * // {"baseline":61734912,"peak":90112000,"maxRss":90112000}
 * ```
 * @module
 */
import { readFileSync } from "node:fs";
import process from "node:process";
import { exportCheckpoint } from "../../formats/export.ts";

const [input, output, format] = process.argv.slice(2);
const baseline = process.memoryUsage().rss;
let peak = baseline;
const timer = setInterval(() => peak = Math.max(peak, process.memoryUsage().rss), 10);
await exportCheckpoint({ input, output, format });
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
// The kernel's high-water mark of this process's own memory: VmHWM, not getrusage's maxRSS, which a
// spawned process inherits from its parent at fork (so a test runner's size would count as growth).
const hwm = /VmHWM:\s*(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
const maxRss = hwm ? Number(hwm[1]) * 1024 : peak;
console.log(JSON.stringify({ baseline, peak, maxRss }));

/**
 * Runs one export in this process and prints, as JSON, how far its resident memory grew: the RSS after
 * the modules are loaded (`baseline`), the highest RSS sampled every 10 ms while the export ran, and the
 * kernel's high-water mark (`maxRss`), all in bytes. tests/memory-bound.test.ts spawns it, so the growth
 * it measures is the export's alone.
 *
 * @example
 * ```ts
 * // bun tests/helpers/export-rss.ts IN.hf OUT.bf16.dmexp dmexp
 * // {"baseline":61734912,"peak":90112000,"maxRss":90112000}
 * ```
 * @module
 */
import process from "node:process";
import { exportCheckpoint } from "../../formats/export.ts";

const [input, output, format] = process.argv.slice(2);
const baseline = process.memoryUsage().rss;
let peak = baseline;
const timer = setInterval(() => peak = Math.max(peak, process.memoryUsage().rss), 10);
await exportCheckpoint({ input, output, format });
clearInterval(timer);
peak = Math.max(peak, process.memoryUsage().rss);
const maxRss = process.resourceUsage().maxRSS * 1024;
console.log(JSON.stringify({ baseline, peak, maxRss }));

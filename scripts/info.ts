/**
 * Says everything an export says about itself, and whether its checks hold, without building a model:
 * the answer to "someone handed me one file on a machine that has never seen this repository". The
 * format is recognised from the path (formats/mod.ts) and its `inspect` does the work. A dmexp file
 * whose config is not a ferry config (one written by another implementation) is still shown.
 *
 * Exit codes: 0 the file is intact, 1 refused (not an export, corrupt, or its header disagrees with its
 * own config), 2 usage.
 *
 * @example
 * ```ts
 * // deno run -A scripts/info.ts out/ferry.bf16.dmexp
 * // deno run -A scripts/info.ts out/ferry.bf16.dmexp --json | jq .header.max_abs
 * ```
 * @module
 */
import process from "node:process";
import {
  checkpointRefusal,
  cli,
  EXIT_REFUSED,
  EXIT_USAGE,
  fail,
  type Progress,
  progress,
  run,
} from "./cli.ts";
import { type DmexpDtype, DTYPE_BYTES } from "../formats/dmexp.ts";
import { formatOf, FORMATS } from "../formats/mod.ts";
import { isCheckpointFile } from "../formats/checkpoint.ts";
import { F16_MAX, F16_MIN_NORMAL } from "../formats/float16.ts";
import { numel } from "../model/tensor.ts";

const HELP = `
Print every header field of an export and verify it, without building a model.

Usage: deno run -A scripts/info.ts FILE [--json]

FILE is any export: ${FORMATS.map((f) => `${f.extension} (${f.name})`).join(", ")}. A dmexp file's
checksum is verified and reported even when it fails.

Options:
  --json      print the result as JSON
  -h, --help  this text

Exit codes: 0 intact, 1 refused (not an export, checksum mismatch, header disagrees with its config), 2 usage.
`;

// The dmexp inspection (dmexpInfoJson's shape) as text: one field per line, then the config and tensors.
// deno-lint-ignore no-explicit-any
function dmexpText(info: any): string {
  const { tensors, config, ...fields } = info.header as Record<string, unknown> & {
    tensors: Array<{ name: string; dims: number[]; overflowed: number }>;
    config: string;
  };
  const h = fields as Record<string, unknown> & {
    dtype: DmexpDtype;
    num_params: number;
    flushed: number;
    max_abs: number;
    min_nonzero_abs: number;
  };
  const n = (x: number) => x.toLocaleString("en-US");
  const standard = [
    "format",
    "dtype",
    "source",
    "step",
    "num_params",
    "num_tensors",
    "flushed",
    "max_abs",
    "min_nonzero_abs",
  ];
  const rows: Array<[string, unknown]> = [
    ["file", info.file],
    [
      "bytes",
      `${n(info.bytes)} = 24 prefix + ${n(info.header_length)} header + ${n(info.payload_length)} payload`,
    ],
    ["version", info.version],
    [
      "checksum",
      info.crc32.ok
        ? `crc32 ${info.crc32.stored}: ok, the payload is intact`
        : `MISMATCH: stored ${info.crc32.stored}, payload's ${info.crc32.computed}: the payload is corrupt`,
    ],
    [
      "header check",
      !info.header_crc32
        ? "none (no header_crc32 key: a file written without ferry's header checksum)"
        : info.header_crc32.ok
        ? `header_crc32 ${info.header_crc32.stored}: ok, the header is as written`
        : `MISMATCH: stored ${info.header_crc32.stored}, prefix and header give ${info.header_crc32.computed}: the header was changed`,
    ],
    ["format", h.format],
    ["dtype", `${h.dtype} (${DTYPE_BYTES[h.dtype]} bytes per value)`],
    ["source", h.source],
    ["step", h.step],
    ["num_params", n(h.num_params)],
    ["num_tensors", h.num_tensors],
    ["flushed", `${n(h.flushed)} non-zero weights became zero when narrowed`],
    ["max_abs", h.max_abs],
    ["min_nonzero_abs", h.min_nonzero_abs],
    ["f16 range", f16Fit(h.max_abs, h.min_nonzero_abs)],
    ...Object.entries(h).filter(([k]) => !standard.includes(k)),
    [
      "model",
      info.model.ok
        ? "ferry can load it: the config is a ferry config and every tensor has the shape it implies"
        : info.model.field === "config"
        ? "ferry cannot build a model from this config (not a ferry config); the container itself is intact"
        : `REFUSED: ${info.model.reason}`,
    ],
  ];
  const lines = rows.map(([k, v]) => `${k.padEnd(16)} ${typeof v === "string" ? v : JSON.stringify(v)}`);
  lines.push("config", ...config.trimEnd().split("\n").map((l) => `  ${l}`));
  const width = Math.max(...tensors.map((t) => t.name.length));
  lines.push("tensors");
  for (const t of tensors) {
    lines.push(
      `  ${t.name.padEnd(width)}  [${t.dims.join(", ")}]  ${
        n(numel(t.dims))
      } values  overflowed ${t.overflowed}`,
    );
  }
  return lines.join("\n");
}

// Any other format's inspection as text: scalar fields one per line, lists one entry per line.
function genericText(info: Record<string, unknown>): string {
  const lines: string[] = [];
  for (const [k, v] of Object.entries(info)) {
    if (Array.isArray(v)) {
      lines.push(
        k,
        ...v.map((e) =>
          `  ${
            typeof e === "object"
              ? Object.values(e as object).map((x) => Array.isArray(x) ? `[${x.join(", ")}]` : x).join("  ")
              : e
          }`
        ),
      );
    } else if (v && typeof v === "object") {
      lines.push(
        k,
        ...Object.entries(v).map(([a, b]) =>
          `  ${a.padEnd(40)} ${typeof b === "string" ? b : JSON.stringify(b)}`
        ),
      );
    } else lines.push(`${k.padEnd(16)} ${typeof v === "string" ? v : JSON.stringify(v)}`);
  }
  return lines.join("\n");
}

// The ADR's decision rule, stated for the file at hand: compare the range with f16's.
function f16Fit(maxAbs: number, minNonzero: number): string {
  if (maxAbs > F16_MAX) return `max_abs ${maxAbs} > ${F16_MAX}: f16 cannot hold this model; bf16 can`;
  const low = minNonzero > 0 && minNonzero < F16_MIN_NORMAL
    ? `; weights below ${
      F16_MIN_NORMAL.toExponential(1)
    } (f16's smallest normal) lose precision in f16 and may flush to zero`
    : "";
  return `max_abs <= ${F16_MAX}: every weight fits f16${low}`;
}

async function main(): Promise<void> {
  const { values, positionals } = cli(HELP, { json: { type: "boolean" } });
  if (positionals.length !== 1) {
    fail(`expected one FILE, got ${positionals.length}\n\n${HELP.trim()}`, EXIT_USAGE);
  }
  const path = positionals[0];
  if (await isCheckpointFile(path)) fail(checkpointRefusal(path), EXIT_REFUSED);
  const format = formatOf(path);
  let bar: Progress | undefined, shown = 0;
  const info = await format.inspect(path, {
    onProgress: (done, total) => {
      if (total < 64 << 20) return;
      bar ??= progress("verify", Math.ceil(total / (1 << 20)), { unit: "MiB" });
      const now = Math.floor(done / (1 << 20));
      if (now > shown) bar.tick(now - shown), shown = now;
      if (done === total) bar.done();
    },
  });
  console.log(
    values.json
      ? JSON.stringify(info, null, 2)
      : format.name === "dmexp"
      ? dmexpText(info)
      : genericText(info),
  );
  // A dmexp file is shown even when its checks fail; the verdict is the exit code.
  // deno-lint-ignore no-explicit-any
  const v = info as any;
  if (
    format.name === "dmexp" &&
    (!v.crc32.ok || v.header_crc32?.ok === false || (!v.model.ok && v.model.field !== "config"))
  ) {
    process.exitCode = EXIT_REFUSED;
  }
}

if (import.meta.main) await run(main);

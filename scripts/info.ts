/**
 * Says everything a dmexp file says about itself, and whether its checksum holds, without building a
 * model: the answer to "someone handed me one file on a machine that has never seen this repository".
 * A file whose config is not a ferry config (one written by another implementation) is still shown.
 *
 * Exit codes: 0 the file is intact, 1 refused (not a dmexp, corrupt, or its header disagrees with its
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
import { cli, EXIT_REFUSED, EXIT_USAGE, fail, type Progress, progress, run } from "./cli.ts";
import { type DmexpInfo, DTYPE_BYTES, hex32, inspectDmexp } from "../formats/dmexp.ts";
import { F16_MAX, F16_MIN_NORMAL } from "../formats/float16.ts";
import { numel } from "../model/tensor.ts";

const HELP = `
Print every header field of a dmexp file and verify its checksum, without building a model.

Usage: deno run -A scripts/info.ts FILE [--json]

Options:
  --json      print the result as JSON
  -h, --help  this text

Exit codes: 0 intact, 1 refused (not a dmexp file, checksum mismatch, header disagrees with its config), 2 usage.
`;

/** The JSON form of an inspection: every header key, the checksum verdict and the model verdict. */
export function infoJson(info: DmexpInfo): Record<string, unknown> {
  const { extra, tensors, ...keys } = info.header;
  return {
    file: info.path,
    bytes: info.fileBytes,
    version: info.version,
    header_length: info.headerLength,
    payload_length: info.payloadLength,
    crc32: { stored: hex32(info.crc32.stored), computed: hex32(info.crc32.computed), ok: info.crc32.ok },
    header_crc32: info.headerCrc32 ?? null,
    header: { ...keys, ...extra, tensors },
    model: info.model.ok ? { ok: true } : { ok: false, field: info.model.field, reason: info.model.reason },
  };
}

/** The human form: one field per line, then the config text and the tensor list. */
export function infoText(info: DmexpInfo): string {
  const h = info.header, n = (x: number) => x.toLocaleString("en-US");
  const rows: Array<[string, unknown]> = [
    ["file", info.path],
    [
      "bytes",
      `${n(info.fileBytes)} = 24 prefix + ${n(info.headerLength)} header + ${n(info.payloadLength)} payload`,
    ],
    ["version", info.version],
    [
      "checksum",
      info.crc32.ok
        ? `crc32 ${hex32(info.crc32.stored)}: ok, the payload is intact`
        : `MISMATCH: stored ${hex32(info.crc32.stored)}, payload's ${
          hex32(info.crc32.computed)
        }: the payload is corrupt`,
    ],
    [
      "header check",
      !info.headerCrc32
        ? "none (no header_crc32 key: a file written without ferry's header checksum)"
        : info.headerCrc32.ok
        ? `header_crc32 ${info.headerCrc32.stored}: ok, the header is as written`
        : `MISMATCH: stored ${info.headerCrc32.stored}, prefix and header give ${info.headerCrc32.computed}: the header was changed`,
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
    ...Object.entries(h.extra),
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
  lines.push("config", ...h.config.trimEnd().split("\n").map((l) => `  ${l}`));
  const width = Math.max(...h.tensors.map((t) => t.name.length));
  lines.push("tensors");
  for (const t of h.tensors) {
    lines.push(
      `  ${t.name.padEnd(width)}  [${t.dims.join(", ")}]  ${
        n(numel(t.dims))
      } values  overflowed ${t.overflowed}`,
    );
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
  let bar: Progress | undefined, shown = 0;
  const info = await inspectDmexp(positionals[0], {
    onProgress: (done, total) => {
      if (total < 64 << 20) return;
      bar ??= progress("verify", Math.ceil(total / (1 << 20)), { unit: "MiB" });
      const now = Math.floor(done / (1 << 20));
      if (now > shown) bar.tick(now - shown), shown = now;
      if (done === total) bar.done();
    },
  });
  console.log(values.json ? JSON.stringify(infoJson(info), null, 2) : infoText(info));
  const refused = !info.crc32.ok || info.headerCrc32?.ok === false ||
    (!info.model.ok && info.model.field !== "config");
  if (refused) process.exitCode = EXIT_REFUSED;
}

if (import.meta.main) await run(main);

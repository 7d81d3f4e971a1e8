// What the README and docs tests share: the pages' text, and readers of their blocks, tables and sections.
import { expect } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const README = readFileSync("README.md", "utf8");
export const page = (name: string) => readFileSync(join("docs", name), "utf8");

/** Runs a command to its end: exit code, stdout and stderr as text. */
export function sh(cmd: string, args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 26 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The first fenced block of `text` that follows `after`. */
export function blockAfter(text: string, after: string): string {
  const at = text.indexOf(after);
  expect(at).toBeGreaterThanOrEqual(0);
  const open = text.indexOf("```", at), start = text.indexOf("\n", open) + 1;
  return text.slice(start, text.indexOf("```", start));
}

/** Rows of the markdown table of `text` that follows `after`, as trimmed cells. */
export function tableAfter(text: string, after: string): string[][] {
  const at = text.indexOf(after);
  expect(at).toBeGreaterThanOrEqual(0);
  const lines = text.slice(at).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: string[][] = [];
  for (let i = first + 2; i < lines.length && lines[i].startsWith("|"); i++) {
    rows.push(lines[i].split("|").slice(1, -1).map((c) => c.trim()));
  }
  return rows;
}

/** The text of the `## heading` section of `text`, up to the next `## `. */
export function section(text: string, heading: string): string {
  const at = text.indexOf(`\n## ${heading}\n`);
  expect(at >= 0 ? heading : `no section: ${heading}`).toBe(heading);
  const end = text.indexOf("\n## ", at + 1);
  return text.slice(at, end < 0 ? undefined : end);
}

export const num = (s: string) => Number(s.replaceAll(",", ""));

/** Fails, quoting only `text`, unless `where` says it (line breaks count as spaces). */
export function says(where: string, text: string): void {
  const body = where === "README.md" ? README : page(where);
  const flat = body.replace(/\s+/g, " ");
  expect(flat.includes(text) ? text : `${where} does not say: ${text}`).toBe(text);
}

/** A command line as written in a README block, split into words (double quotes group). */
export function words(line: string): string[] {
  return [...line.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => m[1] ?? m[2]);
}

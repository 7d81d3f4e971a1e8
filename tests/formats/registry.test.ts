// The format registry (formats/mod.ts `FORMATS`) is the one list of formats: export, load, info, measure
// and the fuzzer iterate it. So a format must not be registerable without what the rest of the house
// expects of it: its own folder of formats/ holding its spec (formats/FOLDER/NAME.md) and its fuzz hook
// (formats/FOLDER/NAME-fuzz.ts, a target named after it), and a standalone minimal reader (readers/NAME.ts). This test fails when one is missing, and shows it
// would by catching a fake registration.
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { FORMATS } from "../../formats/mod.ts";
import type { FormatDescriptor } from "../../formats/format.ts";
import { dmexpFormat } from "../../formats/dmexp/dmexp.ts";
import { loadFuzzHook } from "../../formats/fuzz-kit.ts";

const ROOT = join(import.meta.dir, "../..");

/** What each format lacks, one line per problem (`NAME: what`); empty when every format is complete. */
async function registryProblems(formats: readonly FormatDescriptor[]): Promise<string[]> {
  const out: string[] = [];
  const file = (f: FormatDescriptor, what: string, path: unknown, where: RegExp, shape: string) => {
    const ok = typeof path === "string" && where.test(path) && existsSync(join(ROOT, path));
    if (!ok) out.push(`${f.name}: no ${what} (${shape}): ${String(path)}`);
  };
  for (const f of formats) {
    file(f, "spec", f.spec, /^formats\/[a-z0-9]+\/[a-z0-9-]+\.md$/, "formats/FOLDER/NAME.md");
    file(f, "minimal reader", f.minimalReader, /^readers\/[a-z0-9-]+\.ts$/, "readers/NAME.ts");
    const folder = typeof f.spec === "string" ? f.spec.slice(0, f.spec.lastIndexOf("/") + 1) : "";
    if (typeof f.fuzzHook !== "string" || !folder || !f.fuzzHook.startsWith(folder)) {
      out.push(`${f.name}: its fuzz hook is not beside its spec: ${String(f.fuzzHook)}`);
    }
    let names: string[] = [];
    try {
      const hook = await loadFuzzHook(f.fuzzHook);
      const targets = hook.FUZZ_TARGETS ?? [];
      names = targets.map((t) => t.name);
      for (const t of targets) {
        const complete = [t.make, t.map, t.refusal].every((x) => typeof x === "function") &&
          Object.keys(t.readers ?? {}).length > 0;
        if (!complete) out.push(`${f.name}: fuzz target ${t.name} lacks make, map, readers or refusal`);
      }
    } catch (e) {
      out.push(`${f.name}: no fuzz hook: ${(e as Error)?.message ?? e}`);
      continue;
    }
    if (!names.includes(f.name)) out.push(`${f.name}: its fuzz hook has no target named ${f.name}`);
  }
  const dup = (key: (f: FormatDescriptor) => string) =>
    formats.map(key).filter((k, i, all) => all.indexOf(k) !== i);
  for (const n of dup((f) => f.name)) out.push(`${n}: registered twice`);
  for (const x of dup((f) => f.extension)) out.push(`${x}: two formats share this extension`);
  return out;
}

test("every registered format has its spec, its minimal reader and its fuzz hook", async () => {
  expect(FORMATS.length).toBeGreaterThanOrEqual(5);
  expect(await registryProblems(FORMATS)).toEqual([]);
});

test("a format registered without them is caught, each thing by name", async () => {
  const fake: FormatDescriptor = {
    ...dmexpFormat,
    name: "fake",
    extension: ".fake",
    spec: "formats/fake/fake.md",
    minimalReader: "readers/fake.ts",
  };
  expect(await registryProblems([...FORMATS, fake])).toEqual([
    "fake: no spec (formats/FOLDER/NAME.md): formats/fake/fake.md",
    "fake: no minimal reader (readers/NAME.ts): readers/fake.ts",
    "fake: its fuzz hook is not beside its spec: formats/dmexp/dmexp-fuzz.ts",
    "fake: its fuzz hook has no target named fake",
  ]);
  // A descriptor written without the fields at all (a plain object cast to the type), and a hook module
  // that does not exist, are caught the same way rather than crashing the check.
  const bare = { ...dmexpFormat, name: "bare", extension: ".bare" } as Partial<FormatDescriptor>;
  delete bare.spec, delete bare.minimalReader;
  bare.fuzzHook = "formats/bare/no-such-fuzz.ts";
  const problems = await registryProblems([bare as FormatDescriptor]);
  expect(problems.slice(0, 3)).toEqual([
    "bare: no spec (formats/FOLDER/NAME.md): undefined",
    "bare: no minimal reader (readers/NAME.ts): undefined",
    "bare: its fuzz hook is not beside its spec: formats/bare/no-such-fuzz.ts",
  ]);
  expect(problems[3]).toStartWith("bare: no fuzz hook: ");
  // Paths outside their folder do not count, even when the file exists.
  const elsewhere = { ...dmexpFormat, spec: "README.md", minimalReader: "formats/dmexp/dmexp.ts" };
  expect(await registryProblems([elsewhere])).toEqual([
    "dmexp: no spec (formats/FOLDER/NAME.md): README.md",
    "dmexp: no minimal reader (readers/NAME.ts): formats/dmexp/dmexp.ts",
    "dmexp: its fuzz hook is not beside its spec: formats/dmexp/dmexp-fuzz.ts",
  ]);
  expect(await registryProblems([dmexpFormat, dmexpFormat])).toEqual([
    "dmexp: registered twice",
    ".dmexp: two formats share this extension",
  ]);
});

test("each format's hook targets read the format's own files (the target's name is the format's)", async () => {
  for (const f of FORMATS) {
    const { FUZZ_TARGETS } = await loadFuzzHook(f.fuzzHook);
    const own = FUZZ_TARGETS.find((t) => t.name === f.name)!;
    expect({ format: f.name, minimal: own.minimal ?? null }).toEqual({
      format: f.name,
      // hf attacks config.json, which has no minimal reader; its weights' reader runs on the safetensors target.
      minimal: f.name === "hf" ? null : f.minimalReader,
    });
  }
});

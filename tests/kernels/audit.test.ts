// The zero-multiply audit: every serving source file of the integer engine is parsed with @babel/parser
// and every function in it is checked for the forbidden classes — `*`, `/`, `%`, `**` and their compound
// assignments; `Math.*`; non-integer numeric literals (and NaN, Infinity); float typed arrays; float
// DataView access; and calls into code outside the audited set except the allow-list (allocation and
// errors). It prints the per-function counts and the list of functions.
// The WebAssembly the engine instantiates is audited by opcode: integer multiply, divide, remainder,
// every float opcode and every opcode not classified in LUT_OPCODES fail; per-function counts printed.
//
// What it proves: those constructs are absent from the source of the audited functions. What it does
// not: it says nothing about the JavaScript engine's machine code (a JIT may use a multiplier for
// `a[i]` addressing or for `|` on doubles), about functions outside the set (the adapter in
// engines/int/engine.ts, the lut4 reader, the CLI), or about model quality. See formats/lut4/lut4.md.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
// @babel/parser 7: a TypeScript AST, types included, with positions, in 5.4 MB (typescript: 23.6 MB).
import { parse } from "@babel/parser";
import type { Identifier, MemberExpression, Node, OptionalMemberExpression, PrivateName } from "@babel/types";
import { fn, I32, op, V128 } from "../../kernels/wasm/asm.ts";
import { INT_LUT_FUNCTIONS, portableLutFunctions } from "../../kernels/wasm/int-lut.ts";
import { LUT_OPCODES, opcodeCensus } from "../../kernels/wasm/lut.ts";
import { INT_SAMPLE_FUNCTIONS } from "../../kernels/wasm/int-sample.ts";

const ROOT = join(import.meta.dir, "../..");

/** The serving sources: the kernels, the prepared model, the forward, the sampler. */
export const AUDITED = [
  "kernels/int/check.ts",
  "kernels/int/round.ts",
  "kernels/int/mul.ts",
  "kernels/int/isqrt.ts",
  "kernels/int/gemv.ts",
  "kernels/int/gemv-lut.ts",
  "kernels/int/norm.ts",
  "kernels/int/tables.ts",
  "kernels/int/rope.ts",
  "kernels/int/attention.ts",
  "engines/int/model.ts",
  "engines/int/forward.ts",
  "engines/int/simd.ts",
  "engines/int/sampler.ts",
  "engines/int/boundary.ts",
  "engines/int/threads.ts",
];

/** Calls allowed outside the audited set: allocation and errors (constructors) and array growth. */
const ALLOWED_CONSTRUCTORS = new Set([
  "Int32Array",
  "Int16Array",
  "Int8Array",
  "Uint8Array",
  "Uint16Array",
  "Uint32Array",
  "Error",
  "RangeError",
]);
// The WebAssembly functions of kernels/wasm/int-lut.ts (`lut.gemv_lut(…)` and the rest): their bytes are
// audited by opcode below.
// The sampler's pass (kernels/wasm/int-sample.ts) likewise; `set` is a typed array's copy into its memory.
const ALLOWED_METHODS = new Set([
  "push",
  "set",
  ...Object.keys(INT_LUT_FUNCTIONS),
  ...Object.keys(INT_SAMPLE_FUNCTIONS),
]);
// The thread pool's hand-offs (engines/int/threads.ts): integer loads, stores, adds, waits and wake-ups
// on the shared control words, and nothing else of `Atomics`.
const ALLOWED_ATOMICS = new Set(["load", "store", "add", "wait", "notify"]);
const FLOAT_ARRAYS = new Set(["Float16Array", "Float32Array", "Float64Array"]);
const FLOAT_VIEW = /^(get|set)Float(16|32|64)$/;
const OPS: Record<string, "mul" | "div" | "rem" | "pow"> = {
  "*": "mul",
  "*=": "mul",
  "/": "div",
  "/=": "div",
  "%": "rem",
  "%=": "rem",
  "**": "pow",
  "**=": "pow",
};
export const CLASSES = [
  "mul",
  "div",
  "rem",
  "pow",
  "math",
  "floatLiteral",
  "floatArray",
  "floatView",
  "outsideCall",
] as const;
type Counts = Record<typeof CLASSES[number], number>;

export interface AuditResult {
  functions: Map<string, Counts>;
  findings: string[];
}

/** The child nodes of a Babel node in source order, as `ts.forEachChild` visits a TypeScript node's. */
function children(n: Node): Node[] {
  const values: unknown[] = Object.values(n).flat();
  return values.filter((v): v is Node => typeof (v as Node | null)?.type === "string")
    .sort((a, b) => a.start! - b.start!);
}

type Dotted = (MemberExpression | OptionalMemberExpression) & { property: Identifier | PrivateName };
/** `a.b`, `a?.b`, `a.#b`: TypeScript's PropertyAccessExpression (`a[b]` is not one). */
const isDotted = (n: Node): n is Dotted =>
  (n.type === "MemberExpression" || n.type === "OptionalMemberExpression") && !n.computed;
const dotName = (n: Dotted) => n.property.type === "Identifier" ? n.property.name : `#${n.property.id.name}`;

/** Audits sources (path → text); `known` names the functions callable inside the set. */
export function audit(sources: Record<string, string>): AuditResult {
  const files = Object.entries(sources).map(([fileName, text]) => ({
    fileName,
    text,
    // `(a)` kept as a node and `import(…)` parsed as a call, as TypeScript parses them.
    program: parse(text, {
      sourceType: "module",
      plugins: ["typescript"],
      attachComment: false,
      createParenthesizedExpressions: true,
      createImportExpressions: false,
    }).program,
  }));
  const known = new Set<string>();
  const functions = new Map<string, Counts>();
  const findings: string[] = [];
  // Every function declared in the set (declarations and consts bound to functions) may be called.
  for (const f of files) {
    const collect = (n: Node) => {
      if ((n.type === "FunctionDeclaration" || n.type === "TSDeclareFunction") && n.id) known.add(n.id.name);
      if (
        n.type === "VariableDeclarator" && n.id.type === "Identifier" &&
        n.init?.type === "ArrowFunctionExpression"
      ) known.add(n.id.name);
      children(n).forEach(collect);
    };
    collect(f.program);
  }
  for (const f of files) {
    for (const st of f.program.body) {
      if (st.type === "ImportDeclaration" && st.importKind !== "type") {
        const spec = st.source.value;
        const valueImports = st.specifiers.filter((e) =>
          e.type === "ImportSpecifier" && e.importKind !== "type"
        );
        const target = join(f.fileName, "..", spec).replace(/^\.\//, "");
        if (valueImports.length > 0 && !sources[target]) {
          findings.push(`${f.fileName}: imports values from ${spec}, outside the audited set`);
        }
      }
    }
    const source = (n: Node) => f.text.slice(n.start!, n.end!);
    // Babel gives a shorthand's name (`{ x }`, `import { x }`) two Identifiers over the same text and `#x`
    // one; TypeScript one and none: the second and the one in `#x` are skipped.
    const seen = new Set<number>();
    const visit = (n: Node, parent: Node | null, owner: string) => {
      if (n.type === "PrivateName" || (n.type === "Identifier" && seen.has(n.start!))) return;
      if (n.type === "Identifier") seen.add(n.start!);
      let here = owner;
      if ((n.type === "FunctionDeclaration" || n.type === "TSDeclareFunction") && n.id) {
        here = `${f.fileName}:${n.id.name}`;
      } else if (
        // TypeScript's MethodDeclaration and GetAccessor: methods and getters (their overload and abstract
        // signatures too) and getter signatures; not constructors, setters or method signatures.
        (n.type === "ClassMethod" || n.type === "ClassPrivateMethod" || n.type === "ObjectMethod" ||
          n.type === "TSDeclareMethod" || n.type === "TSMethodSignature") &&
        (n.kind === "get" || (n.kind === "method" && n.type !== "TSMethodSignature"))
      ) {
        here = `${f.fileName}:${n.computed ? `[${source(n.key)}]` : source(n.key)}`;
      } else if (
        (n.type === "ArrowFunctionExpression" || n.type === "FunctionExpression") &&
        parent?.type === "VariableDeclarator" && parent.id.type === "Identifier"
      ) {
        here = `${f.fileName}:${parent.id.name}`;
      }
      if (!functions.has(here)) functions.set(here, Object.fromEntries(CLASSES.map((c) => [c, 0])) as Counts);
      const count = (c: typeof CLASSES[number], what: string) => {
        functions.get(here)![c]++;
        findings.push(`${f.fileName}:${n.loc!.start.line} ${c}: ${what}`);
      };
      if ((n.type === "BinaryExpression" || n.type === "AssignmentExpression") && OPS[n.operator]) {
        count(OPS[n.operator], source(n));
      }
      if (isDotted(n) && n.object.type === "Identifier" && n.object.name === "Math") count("math", source(n));
      // Not a safe integer: a fraction or past 2^53 (`1e3` and `1.0` are integers). Shown as String(value).
      if (n.type === "NumericLiteral" && !Number.isSafeInteger(n.value)) {
        count("floatLiteral", String(n.value));
      }
      // An Identifier's name; Babel 7 holds a type parameter's name (`<T>`) as a string, not an Identifier.
      const name = n.type === "Identifier" || n.type === "TSTypeParameter" ? n.name : undefined;
      if (name === "NaN" || name === "Infinity") count("floatLiteral", name);
      if (name !== undefined && FLOAT_ARRAYS.has(name)) count("floatArray", name);
      if (isDotted(n) && FLOAT_VIEW.test(dotName(n))) count("floatView", source(n));
      if (n.type === "CallExpression" || n.type === "OptionalCallExpression" || n.type === "NewExpression") {
        const callee = n.callee;
        let ok = false;
        if (callee.type === "Identifier") {
          ok = known.has(callee.name) ||
            (n.type === "NewExpression" && ALLOWED_CONSTRUCTORS.has(callee.name));
        } else if (isDotted(callee)) {
          const atomics = callee.object.type === "Identifier" && callee.object.name === "Atomics";
          ok = atomics ? ALLOWED_ATOMICS.has(dotName(callee)) : ALLOWED_METHODS.has(dotName(callee));
        }
        if (!ok) count("outsideCall", source(callee));
      }
      for (const c of children(n)) visit(c, n, here);
    };
    visit(f.program, null, `${f.fileName}:(module)`);
  }
  return { functions, findings };
}

test("the integer engine's serving functions hold no multiply, divide, float or outside call", () => {
  const sources = Object.fromEntries(AUDITED.map((p) => [p, readFileSync(join(ROOT, p), "utf8")]));
  const { functions, findings } = audit(sources);
  const rows = [...functions].filter(([name]) => !name.endsWith(":(module)"));
  console.log(
    `audited ${rows.length} functions in ${AUDITED.length} files; per function: ${CLASSES.join(" ")}`,
  );
  for (const [name, c] of rows) console.log(`  ${name.padEnd(44)} ${CLASSES.map((k) => c[k]).join(" ")}`);
  const totals = CLASSES.map((k) => [...functions.values()].reduce((s, c) => s + c[k], 0));
  console.log(`  totals${" ".repeat(38)} ${totals.join(" ")}`);
  expect(findings).toEqual([]);
  // The functions that serve a token are all in the list.
  for (
    const f of [
      "gemv",
      "gemvLut",
      "inputPlanes",
      "activationTables",
      "rmsnorm",
      "isqrtScaled",
      "recip16",
      "divShifted",
      "attendGroup",
      "probabilities",
      "expNeg",
      "silu",
      "ropeHead",
      "mulS16",
      "step",
      "attentionBatch",
      "attendHeads",
      "mlpBatch",
      "productBatch",
      "gemvLanes",
      "headLogits",
      "buildIntModel",
      "sample",
      "drawBelow",
      "nextU32",
      "greedy",
      "shift",
      "quantizeBits",
      "feedTokens",
      "rememberedSampling",
      "queueGemv",
      "runQueued",
      "serveCalls",
    ]
  ) {
    expect(rows.some(([n]) => n.endsWith(`:${f}`))).toBe(true);
  }
});

test("the audit catches each forbidden class", () => {
  const bad = `
import { thing } from "./elsewhere.ts";
export function f(a: number, b: number) {
  let x = a * b; x /= 2; x = x % 3; x = x ** 2;
  const y = Math.floor(a) + 0.5 + 1e3;
  const z = new Float32Array(4); const dv = new DataView(z.buffer); dv.getFloat32(0);
  thing(a);
  return x + y;
}`;
  const { findings } = audit({ "kernels/int/bad.ts": bad });
  const kinds = new Set(findings.map((s) => s.split(" ")[1]?.replace(":", "")));
  for (
    const k of ["mul", "div", "rem", "pow", "math", "floatLiteral", "floatArray", "floatView", "outsideCall"]
  ) expect(kinds.has(k)).toBe(true);
  expect(findings.some((s) => s.includes("outside the audited set"))).toBe(true);
});

// The WebAssembly the engine runs, audited by opcode: every function of the module, decoded from the
// very records kernels/wasm/int-lut.ts assembles. Classes: integer multiply, divide, remainder; any
// float opcode; and any opcode (SIMD or not) that is not in the classified list LUT_OPCODES.
const WASM_CLASSES = ["mul", "div", "rem", "float", "unclassified"] as const;
const ALLOWED_OPCODES = new Set<string>(Object.values(LUT_OPCODES).flat());
// One-byte float opcodes (core spec 5.4): loads/stores, constants, compares, arithmetic, conversions
// (the conversion range also holds integer wrap/extend, which this engine does not use: refused too).
const FLOAT_BYTES = [[0x2a, 0x2b], [0x38, 0x39], [0x43, 0x44], [0x5b, 0x66], [0x8b, 0xbf]];

/** Per function, the forbidden-class counts of its opcodes (and the findings naming them). */
function auditWasm(funcs: Record<string, ReturnType<typeof fn>>) {
  const counts = new Map<string, Record<typeof WASM_CLASSES[number], number>>();
  const census = new Map<string, Map<string, number>>();
  const findings: string[] = [];
  for (const [name, f] of Object.entries(funcs)) {
    const c = Object.fromEntries(WASM_CLASSES.map((k) => [k, 0])) as Record<
      typeof WASM_CLASSES[number],
      number
    >;
    const ops = opcodeCensus(f);
    for (const [opName, n] of ops) {
      let cls: typeof WASM_CLASSES[number] | null = null;
      const code = /^unknown 0x([0-9a-f]{2})$/.exec(opName)?.[1]; // a one-byte opcode the census does not name
      const byte = code === undefined ? -1 : parseInt(code, 16);
      if (/(^|[._])f(32|64)/.test(opName) || FLOAT_BYTES.some(([lo, hi]) => byte >= lo && byte <= hi)) {
        cls = "float";
      } else if (/\.mul|_mul/.test(opName) || byte === 0x7e) cls = "mul";
      else if (/\.div|_div/.test(opName) || [0x6d, 0x6e, 0x7f, 0x80].includes(byte)) cls = "div";
      else if (/\.rem|_rem/.test(opName) || [0x6f, 0x70, 0x81, 0x82].includes(byte)) cls = "rem";
      else if (!ALLOWED_OPCODES.has(opName)) cls = "unclassified";
      if (cls) {
        c[cls] += n;
        findings.push(`${name}: ${cls}: ${opName} x${n}`);
      }
    }
    counts.set(name, c);
    census.set(name, ops);
  }
  return { counts, census, findings };
}

test("the integer engine's WebAssembly holds no multiply, divide, float or unclassified opcode", () => {
  // Both sets the engine may assemble: with relaxed table reads, and the portable one.
  const portable = Object.entries(portableLutFunctions()).map(([name, f]) => [`${name} (portable)`, f]);
  const { counts, census, findings } = auditWasm({
    ...INT_LUT_FUNCTIONS,
    ...Object.fromEntries(portable),
    ...INT_SAMPLE_FUNCTIONS,
  });
  console.log(`audited ${counts.size} WebAssembly functions; per function: ${WASM_CLASSES.join(" ")}`);
  for (const [name, c] of counts) {
    console.log(`  wasm:${name.padEnd(39)} ${WASM_CLASSES.map((k) => c[k]).join(" ")}`);
    console.log(`    opcodes: ${[...census.get(name)!].map(([o, n]) => `${o} ${n}`).join(", ")}`);
  }
  expect(findings).toEqual([]);
  for (
    const name of [
      "planes_offset",
      "gemv_lut",
      "gemv_lanes4",
      "gemv_lanes8",
      "gemv_lanes16",
      "gemv_lanes32",
      "scores",
      "softmax",
      "mix",
      "rmsnorm",
      "rope",
      "sample_masses",
    ]
  ) {
    expect(counts.has(name)).toBe(true);
  }
  // The lanes projection reads its pair tables by address, not by swizzle: per row and group 16 code
  // bytes, and P/4 vector loads per byte (16 pairs, 4 vectors at P = 16).
  const lanes16 = census.get("gemv_lanes16")!;
  expect(lanes16.has("i8x16.swizzle") || lanes16.has("i8x16.relaxed_swizzle")).toBe(false);
  expect(lanes16.get("i32.load8_u")).toBeGreaterThanOrEqual(16);
  // A projection group's 32 columns, three table reads each, unrolled, in the lean and in the exact group
  // loop; and the lean step's reads per quarter (kernels/wasm/int-lean.ts): in each of its five kinds a
  // spread of m and four masks at it, in the two kinds of d ≤ 1 a spread of d = 0, in the kind of d ≤ 3
  // a spread of d and two masks at it. Relaxed in one set, plain in the other.
  const reads = 2 * 96 + 4 * (5 * 5 + 2 * 1 + 3);
  expect(census.get("gemv_lut")!.get("i8x16.relaxed_swizzle")).toBe(reads);
  expect(census.get("gemv_lut (portable)")!.get("i8x16.swizzle")).toBe(reads);
});

test("the WebAssembly audit catches multiply, divide, float and unknown SIMD opcodes", () => {
  const bad = fn([I32], [], [V128], [
    op.get(0),
    op.get(0),
    op.i32_mul,
    op.get(0),
    op.i32_div_u,
    op.i32_rem_u,
    op.i32_add,
    [0x1a],
    op.get(1),
    op.get(1),
    [0xfd, 0xb5, 0x01],
    op.set(1), // i32x4.mul
    op.get(1),
    op.get(1),
    op.f32x4_div,
    op.set(1), // a SIMD opcode the census does not name
    op.get(1),
    op.get(1),
    [0xfd, 0xe6, 0x01],
    op.set(1), // f32x4.mul
  ]);
  const { findings } = auditWasm({ bad });
  const kinds = new Set(findings.map((f) => f.split(": ")[1]));
  for (const k of ["mul", "div", "rem", "float", "unclassified"]) expect(kinds.has(k)).toBe(true);
  expect(findings.some((f) => f.includes("i32x4.mul"))).toBe(true);
  expect(findings.some((f) => f.includes("unknown 0xfde7"))).toBe(true);
});

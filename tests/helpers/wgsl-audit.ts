/**
 * The integer audit for WGSL: a tokenizer-level scan of a shader's source for anything that multiplies,
 * divides or touches floats. Comments are dropped first (WGSL block comments nest); what is left is
 * split into identifiers, numbers and operators, and each token is judged on its own, so `*` is caught
 * as a multiply, a pointer dereference or a `*=` alike.
 *
 * @example
 * ```ts
 * auditWgsl("let y = x * 2;"); // [{ line: 1, token: "*", why: "multiply, divide or remainder operator" }]
 * ```
 * @module
 */

/** One forbidden token. */
export interface WgslFinding {
  line: number;
  token: string;
  why: string;
}

/** Float types, their short aliases, the f16 extension, and built-ins that multiply or work in floats. */
const FORBIDDEN_WORDS = new Map<string, string>([
  ...["f32", "f16", "vec2f", "vec3f", "vec4f", "vec2h", "vec3h", "vec4h"].map((w) =>
    [w, "float type"] as const
  ),
  ...["mat2x2f", "mat3x3f", "mat4x4f", "mat2x2h", "mat3x3h", "mat4x4h"].map((w) =>
    [w, "float type"] as const
  ),
  ["enable", "extension (f16)"],
  ...["dot", "dot4I8Packed", "dot4U8Packed", "fma", "ldexp", "frexp", "modf", "pow", "sqrt", "inverseSqrt"]
    .map((w) => [w, "built-in that multiplies or works in floats"] as const),
  ...["exp", "exp2", "log", "log2", "bitcast", "pack2x16float", "unpack2x16float"]
    .map((w) => [w, "built-in that multiplies or works in floats"] as const),
]);

/** Every forbidden token of `source`, with its line; an empty list means the shader passes. */
export function auditWgsl(source: string): WgslFinding[] {
  const found: WgslFinding[] = [];
  let i = 0, line = 1;
  const n = source.length;
  while (i < n) {
    const ch = source[i];
    if (ch === "\n") {
      line++, i++;
    } else if (/\s/.test(ch)) {
      i++;
    } else if (source.startsWith("//", i)) {
      while (i < n && source[i] !== "\n") i++;
    } else if (source.startsWith("/*", i)) {
      let depth = 0;
      do {
        if (source.startsWith("/*", i)) depth++, i += 2;
        else if (source.startsWith("*/", i)) depth--, i += 2;
        else if (source[i] === "\n") line++, i++;
        else i++;
      } while (depth > 0 && i < n);
    } else if (/[A-Za-z_]/.test(ch)) {
      const word = /^[A-Za-z_][A-Za-z0-9_]*/.exec(source.slice(i))![0];
      const why = FORBIDDEN_WORDS.get(word);
      if (why) found.push({ line, token: word, why });
      i += word.length;
    } else if (/[0-9]/.test(ch) || (ch === "." && /[0-9]/.test(source[i + 1] ?? ""))) {
      const hex = /^0[xX]([0-9a-fA-F]*)(\.[0-9a-fA-F]*)?([pP][+-]?[0-9]+)?([fhiu])?/.exec(source.slice(i));
      const dec = /^([0-9]*)(\.[0-9]*)?([eE][+-]?[0-9]+)?([fhiu])?/.exec(source.slice(i))!;
      const m = hex ?? dec;
      const float = m[2] !== undefined || m[3] !== undefined || m[4] === "f" || m[4] === "h";
      if (float) found.push({ line, token: m[0], why: "float literal" });
      i += m[0].length;
    } else {
      const op = /^(\*=|\/=|%=|[*/%])/.exec(source.slice(i));
      if (op) found.push({ line, token: op[0], why: "multiply, divide or remainder operator" });
      i += op ? op[0].length : 1;
    }
  }
  return found;
}

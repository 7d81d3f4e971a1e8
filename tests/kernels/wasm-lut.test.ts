// The SIMD table look-up offered to the integer engine (kernels/wasm/lut.ts): exact against a plain
// sum of table reads, at the extremes of its stated range, and made only of the opcodes it declares.
import { expect, test } from "bun:test";
import { assemble, fn, op, V128 } from "../../kernels/wasm/asm.ts";
import { lut16Rows, LUT_OPCODES, lutPlanes, opcodeCensus } from "../../kernels/wasm/lut.ts";
import { createRng } from "../../model/random.ts";

const rng = createRng(5);
const bytes = assemble({ pages: 1, functions: { lut16_rows: lut16Rows() } });
const ex = new WebAssembly.Instance(new WebAssembly.Module(bytes)).exports as unknown as {
  memory: WebAssembly.Memory;
  lut16_rows(tabs: number, codes: number, cols: number, out: number): void;
};

test("lut16_rows: 16 rows of sum_c tab_c[code], exact over the whole range of entries and columns", () => {
  for (
    const [cols, fill] of [[1, "random"], [7, "random"], [32, "random"], [128, "random"], [128, "max"], [
      128,
      "min",
    ]] as const
  ) {
    const tab = Int32Array.from(
      { length: 16 * cols },
      () => fill === "max" ? 2 ** 23 - 1 : fill === "min" ? -(2 ** 23) : rng.int(2 ** 24) - 2 ** 23,
    );
    const codes = Uint8Array.from({ length: 16 * cols }, () => rng.int(16));
    const planes = new Uint8Array(48 * cols);
    lutPlanes(tab, cols, planes);
    const mem = new Uint8Array(ex.memory.buffer);
    mem.set(planes, 0), mem.set(codes, 8192);
    ex.lut16_rows(0, 8192, cols, 16384);
    const got = Array.from(new Int32Array(ex.memory.buffer, 16384, 16));
    const want = Array.from({ length: 16 }, (_, r) => {
      let s = 0;
      for (let c = 0; c < cols; c++) s += tab[16 * c + codes[16 * c + r]];
      return s;
    });
    expect(got).toEqual(want);
  }
});

test("lut16_rows uses only the opcodes it declares: no multiply, divide or float", () => {
  const allowed = new Set<string>(Object.values(LUT_OPCODES).flat());
  const census = opcodeCensus(lut16Rows());
  expect([...census.keys()].filter((n) => !allowed.has(n))).toEqual([]);
  expect(census.get("i8x16.swizzle")).toBe(3);
  // The census sees what it must refuse: a multiply, and an opcode it does not know.
  const bad = fn([], [], [V128], [
    op.get(0),
    op.get(0),
    [0xfd, 0xb5, 0x01],
    op.set(0),
    op.get(0),
    op.get(0),
    op.f32x4_div,
    op.set(0),
  ]);
  expect([...opcodeCensus(bad).keys()]).toEqual(["local.get", "i32x4.mul", "local.set", "unknown 0xfde7"]);
});

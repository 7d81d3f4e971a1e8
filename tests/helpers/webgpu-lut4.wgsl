// The lut4 projection in WGSL: out = W x for a lut4 matrix W, bit for bit the CPU kernel of
// kernels/int/gemv.ts (read its contract there). Integers only: u32 and i32, adds, shifts, masks and
// compares; no multiply, divide, remainder or float anywhere, which tests/e2e/webgpu-int.test.ts audits.
//
// Two entry points share the bindings:
//   tables: tab[16c + u] = (u - 8) x_c for every column c, by addition (one thread a column);
//   gemv:   one workgroup a row; its threads round the groups' products in parallel, then one thread
//           adds them in group order with int32 saturation, as the CPU does.

struct P {
  rows: u32,
  cols: u32,
  groups: u32,
  // ACC_EXP + 4 - expBase - xExp: group g shifts by base - de.
  base: i32,
  // outExp - ACC_EXP.
  final_shift: i32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<i32>;
@group(0) @binding(2) var<storage, read_write> tab: array<i32>;
@group(0) @binding(3) var<storage, read> nibbles: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<i32>;

const I32_MAX: i32 = 2147483647;
const I32_MIN: i32 = -2147483647 - 1;
const WG: u32 = 64u;
// Groups of 32 columns a row may have (kernels/webgpu/lut4.ts MAX_GROUPS).
const MAX_GROUPS: u32 = 256u;

var<workgroup> part: array<i32, MAX_GROUPS>;

// a times b for run-time u32 values, by shift-and-add over the bits of b (b < 2^16 here).
fn mul_u(a: u32, b: u32) -> u32 {
  var r = 0u;
  for (var i = 0u; i < 16u; i++) {
    r += (a << i) & (0u - ((b >> i) & 1u));
  }
  return r;
}

// Byte i of the codes and of the scales, each stored four bytes to a u32, little-endian.
fn nibble_byte(i: u32) -> u32 {
  return (nibbles[i >> 2u] >> ((i & 3u) << 3u)) & 255u;
}

fn scale_byte(i: u32) -> u32 {
  return (scales[i >> 2u] >> ((i & 3u) << 3u)) & 255u;
}

// round_half_up(v 2^-s), saturated to int32 (kernels/int/round.ts shift).
fn shift(v: i32, s: i32) -> i32 {
  if (s > 0) {
    if (s >= 32) { return 0; }
    return (v >> u32(s)) + ((v >> u32(s - 1)) & 1);
  }
  if (s == 0) { return v; }
  let k = u32(-s);
  if (k >= 31u) {
    if (v == 0) { return 0; }
    return select(I32_MIN, I32_MAX, v > 0);
  }
  let lim = I32_MAX >> k;
  if (v > lim) { return I32_MAX; }
  if (v < -lim - 1) { return I32_MIN; }
  return v << k;
}

// (16 + m) a for a scale mantissa m in [0, 16) (kernels/int/mul.ts mulScale).
fn mul_scale(a: i32, m: i32) -> i32 {
  return (a << 4u) + (a & -(m & 1)) + ((a << 1u) & -((m >> 1u) & 1)) + ((a << 2u) & -((m >> 2u) & 1)) +
    ((a << 3u) & -(m >> 3u));
}

@compute @workgroup_size(64)
fn tables(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  if (c >= p.cols) { return; }
  let v = x[c];
  let neg = -v;
  let t = c << 4u;
  tab[t + 8u] = 0;
  tab[t + 9u] = v;
  tab[t + 7u] = neg;
  var up = v;
  var down = neg;
  for (var u = 10u; u < 16u; u++) {
    up = up + v;
    tab[t + u] = up;
  }
  for (var u = 7u; u > 0u; u--) {
    down = down + neg;
    tab[t + u - 1u] = down;
  }
}

@compute @workgroup_size(64)
fn gemv(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let r = wid.x;
  let row_bytes = p.cols >> 1u;
  let row_nib = mul_u(row_bytes, r);
  let row_scale = mul_u(p.groups, r);
  for (var g = lid.x; g < p.groups; g += WG) {
    var b = row_nib + (g << 4u);
    var t = g << 9u;
    var a = 0;
    for (var j = 0u; j < 16u; j++) {
      let byte = nibble_byte(b);
      a = a + tab[t + (byte & 15u)] + tab[t + 16u + (byte >> 4u)];
      t = t + 32u;
      b = b + 1u;
    }
    let scale = i32(scale_byte(row_scale + g));
    let prod = mul_scale(a, scale & 15);
    part[g] = shift(prod, p.base - (scale >> 4u));
  }
  workgroupBarrier();
  if (lid.x != 0u) { return; }
  var acc = 0;
  for (var g = 0u; g < p.groups; g++) {
    let c = part[g];
    let s = acc + c;
    // Signed overflow of the wrapping add: both operands differ in sign from the sum.
    if (((acc ^ s) & (c ^ s)) < 0) {
      acc = select(I32_MIN, I32_MAX, acc > 0);
    } else {
      acc = s;
    }
  }
  out[r] = shift(acc, p.final_shift);
}

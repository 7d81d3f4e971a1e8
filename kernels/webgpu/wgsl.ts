/**
 * WGSL sources of the float kernels the Qwen3 forward needs, one compute shader each. Every shader reads
 * its sizes from a small uniform struct at binding 0, so one compiled pipeline serves every shape;
 * the engine (`engine.ts`) binds buffers in the order of the bindings below.
 *
 * All maths is f32. Reductions (dot products, norms, softmax) sum in a different order than the CPU
 * reference, which sums in f64, so results agree within a measured bound, not bit for bit.
 * @module
 */

/** Threads of the 1-D kernels and of each reduction. */
export const WG = 64;
/** Output rows one workgroup of the one-row product computes. */
export const GEMV_ROWS = 4;
/** Side of the output tile one workgroup of the many-row product computes. */
export const TILE = 64;

/**
 * One-row (decode) product `out[m, n] = dot(x[m, :], w[n, :])`, K a multiple of 4: each workgroup takes
 * GEMV_ROWS rows of w; its 64 lanes stride along K in vec4 steps and meet in workgroup memory to reduce.
 * Grid: (ceil(N / GEMV_ROWS), M).
 */
export const GEMV = /* wgsl */ `
struct P { M: u32, K: u32, N: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
var<workgroup> red: array<vec4<f32>, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = lid.x;
  let K4 = p.K / 4u;
  let n0 = wid.x * ${GEMV_ROWS}u;
  let m = wid.y;
  let last = p.N - 1u;
  var acc = vec4<f32>(0.0);
  for (var k = t; k < K4; k += ${WG}u) {
    let xv = x[m * K4 + k];
    acc.x += dot(xv, w[min(n0, last) * K4 + k]);
    acc.y += dot(xv, w[min(n0 + 1u, last) * K4 + k]);
    acc.z += dot(xv, w[min(n0 + 2u, last) * K4 + k]);
    acc.w += dot(xv, w[min(n0 + 3u, last) * K4 + k]);
  }
  red[t] = acc;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  if (t < ${GEMV_ROWS}u && n0 + t < p.N) { out[m * p.N + n0 + t] = red[0][t]; }
}`;

/**
 * Many-row (prefill) product `out[m, n] = dot(x[m, :], w[n, :])`: each workgroup of 16 × 16 threads
 * computes a 64 × 64 output tile, 4 × 4 values a thread, staging 64 × 16 slices of x and of w through
 * workgroup memory so each loaded value feeds 64 products. Grid: (ceil(N / 64), ceil(M / 64)).
 */
export const MATMUL = /* wgsl */ `
struct P { M: u32, K: u32, N: u32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
const TS = ${TILE}u;
const BK = 16u;
var<workgroup> xs: array<f32, ${TILE * 16}>;
var<workgroup> ws: array<f32, ${TILE * 16}>;
@compute @workgroup_size(16, 16)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.y * 16u + lid.x;
  let m0 = wid.y * TS;
  let n0 = wid.x * TS;
  var acc: array<f32, 16>;
  for (var k0 = 0u; k0 < p.K; k0 += BK) {
    for (var i = 0u; i < 4u; i++) {
      let e = tid + i * 256u;
      let r = e / BK;
      let c = e % BK;
      let k = k0 + c;
      var xv = 0.0;
      if (m0 + r < p.M && k < p.K) { xv = x[(m0 + r) * p.K + k]; }
      xs[e] = xv;
      var wv = 0.0;
      if (n0 + r < p.N && k < p.K) { wv = w[(n0 + r) * p.K + k]; }
      ws[e] = wv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk++) {
      var a: array<f32, 4>;
      var b: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        a[i] = xs[(lid.y * 4u + i) * BK + kk];
        b[i] = ws[(lid.x * 4u + i) * BK + kk];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i * 4u + j] += a[i] * b[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let n = n0 + lid.x * 4u + j;
      if (m < p.M && n < p.N) { out[m * p.N + n] = acc[i * 4u + j]; }
    }
  }
}`;

/** RMSNorm of each row (one workgroup a row): out = x * w / sqrt(mean(x²) + eps). Grid: (rows). */
export function rmsnormSource(inPlace: boolean): string {
  const io = inPlace
    ? "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n" +
      "@group(0) @binding(2) var<storage, read> w: array<f32>;"
    : "@group(0) @binding(1) var<storage, read> x: array<f32>;\n" +
      "@group(0) @binding(2) var<storage, read> w: array<f32>;\n" +
      "@group(0) @binding(3) var<storage, read_write> out: array<f32>;";
  return /* wgsl */ `
struct P { rows: u32, dim: u32, eps: f32, pad: u32 }
@group(0) @binding(0) var<uniform> p: P;
${io}
var<workgroup> red: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = lid.x;
  let o = (wid.y * 65535u + wid.x) * p.dim;
  if (wid.y * 65535u + wid.x >= p.rows) { return; }
  var ss = 0.0;
  for (var i = t; i < p.dim; i += ${WG}u) { let v = x[o + i]; ss += v * v; }
  red[t] = ss;
  workgroupBarrier();
  for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
    if (t < s) { red[t] += red[t + s]; }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(red[0] / f32(p.dim) + p.eps);
  for (var i = t; i < p.dim; i += ${WG}u) { ${inPlace ? "x" : "out"}[o + i] = x[o + i] * inv * w[i]; }
}`;
}

/** Rotate-half RoPE in place on x: [T, heads, hd] from the CPU's own cos/sin tables. Grid: T·heads·hd/2. */
export const ROPE = /* wgsl */ `
struct P { T: u32, heads: u32, hd: u32, pos0: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> cosT: array<f32>;
@group(0) @binding(3) var<storage, read> sinT: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let half = p.hd / 2u;
  let idx = gid.x;
  if (idx >= p.T * p.heads * half) { return; }
  let i = idx % half;
  let row = idx / half;
  let pos = p.pos0 + row / p.heads;
  let o = row * p.hd;
  let c = cosT[pos * half + i];
  let s = sinT[pos * half + i];
  let x1 = x[o + i];
  let x2 = x[o + i + half];
  x[o + i] = x1 * c - x2 * s;
  x[o + i + half] = x2 * c + x1 * s;
}`;

/** Appends k and v ([T, kvDim]) to one layer's cache at row pos0. Grid: T·kvDim. */
export const KV_STORE = /* wgsl */ `
struct P { n: u32, at: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> v: array<f32>;
@group(0) @binding(3) var<storage, read_write> kc: array<f32>;
@group(0) @binding(4) var<storage, read_write> vc: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x >= p.n) { return; }
  kc[p.at + gid.x] = k[gid.x];
  vc[p.at + gid.x] = v[gid.x];
}`;

/** Scores one attention workgroup holds at a time; longer contexts go through in tiles of this many. */
export const ATTN_TILE = 1024;
/** Largest head_dim the attention kernel takes (4 output dims a thread). */
export const MAX_HEAD_DIM = 4 * WG;

/**
 * Causal attention with grouped KV heads over the GPU-resident cache: one workgroup per (head, row).
 * Scores for up to ATTN_TILE positions at a time live in workgroup memory; across tiles the softmax is
 * merged online (running max and sum, earlier partial sums rescaled), so any context length fits.
 * Up to ATTN_TILE positions, it is one max-shifted softmax. Grid: (heads, T).
 */
export const ATTENTION = /* wgsl */ `
struct P { pos0: u32, nh: u32, nkv: u32, hd: u32, scale: f32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> kc: array<f32>;
@group(0) @binding(3) var<storage, read> vc: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
var<workgroup> sc: array<f32, ${ATTN_TILE}>;
var<workgroup> red: array<f32, ${WG}>;
@compute @workgroup_size(${WG})
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let tid = lid.x;
  let h = wid.x;
  let t = wid.y;
  let n = p.pos0 + t + 1u;
  let kvDim = p.nkv * p.hd;
  let ko = (h / (p.nh / p.nkv)) * p.hd;
  let qo = (t * p.nh + h) * p.hd;
  var mRun = -3.0e38;
  var lRun = 0.0;
  var acc = vec4<f32>(0.0);
  for (var base = 0u; base < n; base += ${ATTN_TILE}u) {
    let cnt = min(${ATTN_TILE}u, n - base);
    var mx = -3.0e38;
    for (var j = tid; j < cnt; j += ${WG}u) {
      var s = 0.0;
      let kp = (base + j) * kvDim + ko;
      for (var i = 0u; i < p.hd; i++) { s += q[qo + i] * kc[kp + i]; }
      s *= p.scale;
      sc[j] = s;
      mx = max(mx, s);
    }
    red[tid] = mx;
    workgroupBarrier();
    for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
      if (tid < s) { red[tid] = max(red[tid], red[tid + s]); }
      workgroupBarrier();
    }
    let mNew = max(mRun, red[0]);
    let corr = exp(mRun - mNew);
    workgroupBarrier();
    var sum = 0.0;
    for (var j = tid; j < cnt; j += ${WG}u) { let e = exp(sc[j] - mNew); sc[j] = e; sum += e; }
    red[tid] = sum;
    workgroupBarrier();
    for (var s = ${WG / 2}u; s > 0u; s >>= 1u) {
      if (tid < s) { red[tid] += red[tid + s]; }
      workgroupBarrier();
    }
    lRun = lRun * corr + red[0];
    for (var d = 0u; d < 4u; d++) {
      let i = tid + d * ${WG}u;
      if (i < p.hd) {
        var a = 0.0;
        for (var j = 0u; j < cnt; j++) { a += sc[j] * vc[(base + j) * kvDim + ko + i]; }
        acc[d] = acc[d] * corr + a;
      }
    }
    mRun = mNew;
    workgroupBarrier();
  }
  for (var d = 0u; d < 4u; d++) {
    let i = tid + d * ${WG}u;
    if (i < p.hd) { out[qo + i] = acc[d] / lRun; }
  }
}`;

/** x += y. Grid: n. */
export const ADD = /* wgsl */ `
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> x: array<f32>;
@group(0) @binding(2) var<storage, read> y: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x < p.n) { x[gid.x] += y[gid.x]; }
}`;

/** gate = silu(gate) * up. Grid: n. */
export const SWIGLU = /* wgsl */ `
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> gate: array<f32>;
@group(0) @binding(2) var<storage, read> up: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x >= p.n) { return; }
  let g = gate[gid.x];
  gate[gid.x] = g / (1.0 + exp(-g)) * up[gid.x];
}`;

/** x[t, :] = table[tokens[t], :]. Grid: T·dim. */
export const EMBED = /* wgsl */ `
struct P { n: u32, dim: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x >= p.n) { return; }
  let t = gid.x / p.dim;
  x[gid.x] = table[tokens[t] * p.dim + gid.x % p.dim];
}`;

/** out[0, :] = x[row, :]. Grid: dim. */
export const COPY_ROW = /* wgsl */ `
struct P { row: u32, dim: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u) {
  if (gid.x < p.dim) { out[gid.x] = x[p.row * p.dim + gid.x]; }
}`;

/**
 * Index of the largest of x[off..off+n) into out[0], the lowest index on a tie and 0 when nothing beats
 * -infinity (NaN never wins), as the CPU argmax. One workgroup of 256.
 */
export const ARGMAX = /* wgsl */ `
struct P { n: u32, off: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  let t = lid.x;
  var v = -3.4028235e38;
  var best = 0xffffffffu;
  for (var i = t; i < p.n; i += 256u) {
    let xi = x[p.off + i];
    if (xi > v || (best == 0xffffffffu && xi == v)) { v = xi; best = i; }
  }
  bv[t] = v;
  bi[t] = best;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (t < s) {
      let ov = bv[t + s];
      let oi = bi[t + s];
      if (oi != 0xffffffffu && (bi[t] == 0xffffffffu || ov > bv[t] || (ov == bv[t] && oi < bi[t]))) {
        bv[t] = ov;
        bi[t] = oi;
      }
    }
    workgroupBarrier();
  }
  if (t == 0u) { out[0] = select(bi[0], 0u, bi[0] == 0xffffffffu); }
}`;

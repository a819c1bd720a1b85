#pragma once
// norm_rope.cuh: the step's first phase, the embedding rows and each
// token's RoPE angles (cos and sin, computed once per step; phase_qkv in
// attention.cuh rotates with them), and the RMSNorm factors of a phase's
// input rows (the gain and factor are applied where the rows are read: dot2
// or stage, gemv.cuh). Float32 angles with cos/sin in float64, RMSNorm sums
// in float64, as package model computes them.
#include "numerics.cuh"

namespace {

constexpr int kFuseNorm = 16;  // up to this many tokens, every block computes the norms itself

// Embedding, RoPE angles and the token's KV cache offset (t_kv: its
// position's place in its block, for layer 0 and KV head 0): one block per
// token.
__device__ __forceinline__ void phase_embed(Dev &d, int T) {
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    if (threadIdx.x == 0) {
      const int pos = d.t_pos[t], blk = d.btab[d.t_slot[t] * d.max_bpb + pos / d.bs];
      d.t_kv[t] = ((size_t)blk * d.n_kv * d.bs + pos % d.bs) * d.hd;
    }
    const int half = d.rope_dim / 2;
    for (int i = threadIdx.x; i < half; i += kThreads) {
      const float a = ((float)d.t_pos[t] * d.rope_scale) * d.inv_freq[i];
      d.rope_cs[t * 64 + i] = make_float2((float)cos((double)a), (float)sin((double)a));
    }
    const int id = d.t_id[t];
    float *x = d.x + (size_t)t * d.dim;
    for (int c = threadIdx.x * 8; c < d.dim; c += kThreads * 8) {
      float f[8];
      load8(d.embed, id, c, f);
      for (int i = 0; i < 8; i++) x[c + i] = f[i];
    }
  }
}

// norm_factors' operations for 2 to kFuseNorm rows at once, into sh: each
// thread's sums of squares for every row (its loads all in flight), each
// warp's sums (warp_sum_d), then thread t adds the warps' in order, as
// block_sum_d does; one barrier instead of two a row (batch 16: 2.65 →
// 2.37 ms, bench/logs/issue15-round36-norms.log). Not inlined: its
// registers stay out of the kernel's.
__device__ __noinline__ void fused_norms(Dev &d, const float *x, int T, const int *map, float *sh) {
  static_assert(kFuseNorm <= kThreads, "a thread per row of the fused norms");
  __shared__ double part[kWarps][kFuseNorm];
  const float *xr[kFuseNorm];
  double ss[kFuseNorm];
#pragma unroll
  for (int t = 0; t < kFuseNorm; t++) {
    xr[t] = t < T ? x + (size_t)(map ? map[t] : t) * d.dim : x;
    ss[t] = 0;
  }
  for (int i = threadIdx.x; i < d.dim; i += kThreads) {
#pragma unroll
    for (int t = 0; t < kFuseNorm; t++)
      if (t < T) ss[t] += (double)xr[t][i] * (double)xr[t][i];
  }
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
#pragma unroll
  for (int t = 0; t < kFuseNorm; t++) {
    if (t < T) {
      const double v = warp_sum_d(ss[t]);
      if (lane == 0) part[w][t] = v;
    }
  }
  __syncthreads();
  if ((int)threadIdx.x < T) {
    double tot = 0;
    for (int i = 0; i < kWarps; i++) tot += part[i][threadIdx.x];
    sh[threadIdx.x] = (float)(1.0 / sqrt((double)((float)(tot / d.dim) + d.eps)));
  }
  __syncthreads();
}

// The RMSNorm factors of T rows of x (row map[t] when map is set). Few
// rows: every block computes them into sh (no barrier). Many: one block per
// row writes d.inv, then a grid barrier; with xb set, the block also writes
// the row normalised with gain g and rounded to BF16, as the tensor-core
// products stage it (g[c] * (x[c] * inv), then one rounding: mma.cuh
// gstage), into row t of xb (pitch d.dim), so that every block staging it
// copies it instead of computing it again.
__device__ const float *norm_factors(Dev &d, const float *x, int T, const int *map, float *sh, double *shd,
                                     const float *g = nullptr, __nv_bfloat16 *xb = nullptr) {
  auto one = [&](int t) {
    const float *xr = x + (size_t)(map ? map[t] : t) * d.dim;
    double ss = 0;
    for (int i = threadIdx.x; i < d.dim; i += kThreads) ss += (double)xr[i] * (double)xr[i];
    ss = block_sum_d(ss, shd);
    return (float)(1.0 / sqrt((double)((float)(ss / d.dim) + d.eps)));
  };
  if (T == 1) {  // batch 1 keeps its code (the batched form below costs it registers: 1.86 → 2.0 ms a step)
    const float v = one(0);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    return sh;
  }
  if (T <= kFuseNorm) {
    fused_norms(d, x, T, map, sh);
    return sh;
  }
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const float v = one(t);
    if (threadIdx.x == 0) d.inv[t] = v;
    if (!xb) continue;
    const float *xr = x + (size_t)(map ? map[t] : t) * d.dim;
    for (int c = threadIdx.x * 8; c < d.dim; c += kThreads * 8) {
      const float4 a = *reinterpret_cast<const float4 *>(xr + c), b = *reinterpret_cast<const float4 *>(xr + c + 4);
      const float4 ga = *reinterpret_cast<const float4 *>(g + c), gb = *reinterpret_cast<const float4 *>(g + c + 4);
      const float f[8] = {ga.x * (a.x * v), ga.y * (a.y * v), ga.z * (a.z * v), ga.w * (a.w * v),
                          gb.x * (b.x * v), gb.y * (b.y * v), gb.z * (b.z * v), gb.w * (b.w * v)};
      *reinterpret_cast<uint4 *>(xb + (size_t)t * d.dim + c) = pack8(f);
    }
  }
  gsync();
  return d.inv;
}

}  // namespace

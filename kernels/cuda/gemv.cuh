#pragma once
// gemv.cuh: the matrix products. A phase's input rows (In, staged in shared
// memory by stage), the dot products of a pair of weight rows with up to
// kTokChunk input rows in each weight type (dot2), and the matrix phases
// other than QKV: the output and down projections added to the residual,
// gate/up with SiLU, and the LM head (with the greedy token's order key).
#include "numerics.cuh"

namespace {

constexpr int kG = 4;          // 16-byte weight chunks a lane loads before using them

// An input of a matrix-vector phase: row t is x + (map ? map[t] : t) * ld;
// with g set, the value used is g[c] * (x[c] * inv[t]) (RMSNorm on the fly,
// the same float operations as the CPU's normalised copy). The tensor-core
// products of more than kSmallM rows (mma.cuh) may get the rows already as
// they stage them instead (in_bf16): with bf16 set, row t is b + t * ld,
// normalised and rounded once by the phase that wrote it with the same
// operations (norm_factors, attention, the gate/up epilogue), and g, inv
// and map are not read.
struct In {
  union {
    const float *x;
    const __nv_bfloat16 *b;
  };
  int ld;
  bool bf16;
  const float *g, *inv;
  const int *map;
};
__device__ __forceinline__ In in_f32(const float *x, int ld, const float *g = nullptr, const float *inv = nullptr,
                                     const int *map = nullptr) {
  In in;
  in.x = x;
  in.ld = ld;
  in.bf16 = false;
  in.g = g;
  in.inv = inv;
  in.map = map;
  return in;
}
__device__ __forceinline__ In in_bf16(const __nv_bfloat16 *b, int ld) {
  In in = in_f32(nullptr, ld);
  in.b = b;
  in.bf16 = true;
  return in;
}

__device__ __forceinline__ uint4 ldw8(const void *p) {
  uint4 v = make_uint4(0, 0, 0, 0);
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

__device__ __forceinline__ uint4 ldw(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int TY> struct WT;
template <> struct WT<RLM_TYPE_BF16> {
  static constexpr int E = 8, B = 2;
  static __device__ __forceinline__ void cvt(uint4 v, float *f) {
    const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 t = __bfloat1622float2(p[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
};
template <> struct WT<RLM_TYPE_F16> {
  static constexpr int E = 8, B = 2;
  static __device__ __forceinline__ void cvt(uint4 v, float *f) {
    const __half2 *p = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 t = __half22float2(p[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  }
};
template <> struct WT<RLM_TYPE_Q8_0> {
  static constexpr int E = 8, B = 1;
  // v.x, v.y hold 8 int8 quants; the scale is applied by the caller.
  static __device__ __forceinline__ void cvt(uint4 v, float *f) {
    const int8_t *q = reinterpret_cast<const int8_t *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = (float)q[i];
  }
};
template <> struct WT<RLM_TYPE_F32> {
  static constexpr int E = 4, B = 4;
  static __device__ __forceinline__ void cvt(uint4 v, float *f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
};

// Dot products of two weight rows (r0, r1), columns [c_lo, c_hi), with
// input rows t0..t0+nt (nt ≤ kTokChunk); every lane gets the sums. A lane
// loads kG 16-byte chunks of each row before using them.
template <int TY>
__device__ __forceinline__ void dot2_t(const DMat &m, int r0, int r1, const In &in, int t0, int nt, int c_lo, int c_hi,
                                       float (&a0)[kTokChunk], float (&a1)[kTokChunk]) {
  constexpr int E = WT<TY>::E, B = WT<TY>::B;
  const int lane = threadIdx.x & 31;
  float s0[kTokChunk], s1[kTokChunk];
#pragma unroll
  for (int t = 0; t < kTokChunk; t++) s0[t] = s1[t] = 0.f;
  const char *w0 = reinterpret_cast<const char *>(m.w) + (size_t)r0 * m.cols * B;
  const char *w1 = reinterpret_cast<const char *>(m.w) + (size_t)r1 * m.cols * B;
  const float *xr[kTokChunk];
  float inv[kTokChunk];
#pragma unroll
  for (int t = 0; t < kTokChunk; t++) {
    const int tt = t0 + min(t, nt - 1);
    xr[t] = in.x + (size_t)(in.map ? in.map[tt] : tt) * in.ld;
    inv[t] = in.g ? in.inv[tt] : 1.f;
  }
  for (int c0 = c_lo + lane * E; c0 < c_hi; c0 += 32 * E * kG) {
    uint4 v0[kG], v1[kG];
#pragma unroll
    for (int g = 0; g < kG; g++) {
      const int c = c0 + g * 32 * E;
      if (c < c_hi) {
        if (TY == RLM_TYPE_Q8_0) {
          v0[g] = ldw8(w0 + (size_t)c);
          v1[g] = ldw8(w1 + (size_t)c);
        } else {
          v0[g] = ldw(w0 + (size_t)c * B);
          v1[g] = ldw(w1 + (size_t)c * B);
        }
      }
    }
#pragma unroll
    for (int g = 0; g < kG; g++) {
      const int c = c0 + g * 32 * E;
      if (c >= c_hi) break;
      float f0[E], f1[E], gg[E];
      WT<TY>::cvt(v0[g], f0);
      WT<TY>::cvt(v1[g], f1);
      if (TY == RLM_TYPE_Q8_0) {  // weight = scale × quant, as the CPU dequantizes
        const float sa = m.sc[(size_t)r0 * (m.cols / 32) + c / 32], sb = m.sc[(size_t)r1 * (m.cols / 32) + c / 32];
#pragma unroll
        for (int e = 0; e < E; e++) {
          f0[e] = sa * f0[e];
          f1[e] = sb * f1[e];
        }
      }
      if (in.g) {
#pragma unroll
        for (int e = 0; e < E; e += 4) {
          const float4 q = *reinterpret_cast<const float4 *>(in.g + c + e);
          gg[e] = q.x; gg[e + 1] = q.y; gg[e + 2] = q.z; gg[e + 3] = q.w;
        }
      }
#pragma unroll
      for (int t = 0; t < kTokChunk; t++) {
        if (t >= nt) break;
        float xv[E];
#pragma unroll
        for (int e = 0; e < E; e += 4) {
          const float4 q = *reinterpret_cast<const float4 *>(xr[t] + c + e);
          xv[e] = q.x; xv[e + 1] = q.y; xv[e + 2] = q.z; xv[e + 3] = q.w;
        }
        if (in.g) {
#pragma unroll
          for (int e = 0; e < E; e++) xv[e] = gg[e] * (xv[e] * inv[t]);
        }
#pragma unroll
        for (int e = 0; e < E; e++) {
          s0[t] = fmaf(f0[e], xv[e], s0[t]);
          s1[t] = fmaf(f1[e], xv[e], s1[t]);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokChunk; t++) {
    a0[t] = warp_sum(s0[t]);
    a1[t] = warp_sum(s1[t]);
  }
}

__device__ __forceinline__ void dot2(const DMat &m, int r0, int r1, const In &in, int t0, int nt, int c_lo, int c_hi,
                                     float (&a0)[kTokChunk], float (&a1)[kTokChunk]) {
  if (m.type == RLM_TYPE_BF16) dot2_t<RLM_TYPE_BF16>(m, r0, r1, in, t0, nt, c_lo, c_hi, a0, a1);
  else if (m.type == RLM_TYPE_F16) dot2_t<RLM_TYPE_F16>(m, r0, r1, in, t0, nt, c_lo, c_hi, a0, a1);
  else if (m.type == RLM_TYPE_Q8_0) dot2_t<RLM_TYPE_Q8_0>(m, r0, r1, in, t0, nt, c_lo, c_hi, a0, a1);
  else dot2_t<RLM_TYPE_F32>(m, r0, r1, in, t0, nt, c_lo, c_hi, a0, a1);
}
__device__ __forceinline__ void dot2(const DMat &m, int r0, int r1, const In &in, int t0, int nt,
                                     float (&a0)[kTokChunk], float (&a1)[kTokChunk]) {
  dot2(m, r0, r1, in, t0, nt, 0, m.cols, a0, a1);
}

// stage copies a phase's input rows, normalised where in.g is set, into
// the block's shared memory when they fit (decode: up to kTokChunk rows),
// so the matrix loops read them from shared memory and the norm is applied
// once per block instead of once per weight row. Otherwise in is returned.
__device__ In stage(const In &in, int T, int cols, float *smem, size_t cap) {
  if (T > kTokChunk || (size_t)T * cols * sizeof(float) > cap) return in;
  __syncthreads();  // the previous user of the shared memory is done
  for (int t = 0; t < T; t++) {
    const float *x = in.x + (size_t)(in.map ? in.map[t] : t) * in.ld;
    float *dst = smem + (size_t)t * cols;
    if (in.g) {
      const float inv = in.inv[t];
      for (int c = threadIdx.x; c < cols; c += kThreads) dst[c] = in.g[c] * (x[c] * inv);
    } else {
      for (int c = threadIdx.x; c < cols; c += kThreads) dst[c] = x[c];
    }
  }
  __syncthreads();
  return in_f32(smem, cols);
}

// The sampler's order keys (sample.cuh), used by the LM-head phase.
__device__ __forceinline__ unsigned long long keyof(float z, int id);
__device__ __forceinline__ float clean(float z);

// x[t][r] += W[r] · in[t]: one warp per pair of rows. When there are at
// most half as many row pairs as warps (the output and down projections),
// two warps of a block share a pair, each taking half of the columns, and
// the first adds both halves in a fixed order: the split depends only on
// the matrix and the grid, so results stay batch invariant.
__device__ void phase_residual(Dev &d, const DMat &W, const In &in, float *part) {
  const int T = d.n_tok, units = (W.rows + 1) / 2;
  if (2 * units > nwarps()) {
    for (int u = gwarp(); u < units; u += nwarps()) {
      const int r0 = 2 * u, r1 = min(2 * u + 1, W.rows - 1);
      for (int t0 = 0; t0 < T; t0 += kTokChunk) {
        const int nt = min(kTokChunk, T - t0);
        float a0[kTokChunk], a1[kTokChunk];
        dot2(W, r0, r1, in, t0, nt, a0, a1);
        if ((threadIdx.x & 31) == 0)
          for (int i = 0; i < nt; i++) {
            d.x[(size_t)(t0 + i) * d.dim + r0] += a0[i];
            if (r1 != r0) d.x[(size_t)(t0 + i) * d.dim + r1] += a1[i];
          }
      }
    }
    return;
  }
  constexpr int per_block = kWarps / 2;
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, half = w / per_block, slotw = w % per_block;
  const int split = (W.cols / 2 + 255) / 256 * 256;
  for (int base = blockIdx.x * per_block; base < units; base += gridDim.x * per_block) {
    const int u = base + slotw;
    const bool ok = u < units;
    const int r0 = 2 * u, r1 = min(2 * u + 1, W.rows - 1);
    for (int t0 = 0; t0 < T; t0 += kTokChunk) {
      const int nt = min(kTokChunk, T - t0);
      float a0[kTokChunk], a1[kTokChunk];
      if (ok) dot2(W, r0, r1, in, t0, nt, half ? split : 0, half ? W.cols : split, a0, a1);
      if (ok && half == 1 && lane == 0)
        for (int i = 0; i < nt; i++) {
          part[(slotw * kTokChunk + i) * 2] = a0[i];
          part[(slotw * kTokChunk + i) * 2 + 1] = a1[i];
        }
      __syncthreads();
      if (ok && half == 0 && lane == 0)
        for (int i = 0; i < nt; i++) {
          d.x[(size_t)(t0 + i) * d.dim + r0] += a0[i] + part[(slotw * kTokChunk + i) * 2];
          if (r1 != r0) d.x[(size_t)(t0 + i) * d.dim + r1] += a1[i] + part[(slotw * kTokChunk + i) * 2 + 1];
        }
      __syncthreads();
    }
  }
}

// h[t][r] = silu(gate_r · xn[t]) * (up_r · xn[t]): one warp per row pair.
__device__ void phase_ffn_up(Dev &d, const DLayer &L, const In &in) {
  const int T = d.n_tok;
  for (int r = gwarp(); r < d.ffn; r += nwarps()) {
    for (int t0 = 0; t0 < T; t0 += kTokChunk) {
      const int nt = min(kTokChunk, T - t0);
      float g[kTokChunk], u[kTokChunk];
      dot2(L.gu, r, r + d.ffn, in, t0, nt, g, u);
      if ((threadIdx.x & 31) == 0)
        for (int i = 0; i < nt; i++) {
          const float s = g[i] / (1.f + (float)exp((double)-g[i]));
          d.h[(size_t)(t0 + i) * d.ffn + r] = s * u[i];
        }
    }
  }
}

// logits[row] = output · norm(x[r_tok[row]]) for the sampling rows. For
// up to kBestRows rows it also finds each row's largest order key (the
// greedy token, ties to the lower id) and whether any logit is finite: per
// block in shared memory, then one atomicMax (and store) per block and row. A maximum does not depend on the order of
// the updates, so this stays deterministic.
constexpr int kBestRows = 256;

__device__ void phase_head(Dev &d, const In &in, unsigned long long *sbest, int *sfin) {
  const int R = d.n_rows;
  const bool best = R <= kBestRows;
  if (best) {
    for (int i = threadIdx.x; i < R; i += kThreads) sbest[i] = 0, sfin[i] = 0;
    __syncthreads();
  }
  for (int u = gwarp(); 2 * u < d.vocab; u += nwarps()) {
    const int r0 = 2 * u, r1 = min(2 * u + 1, d.vocab - 1);
    for (int t0 = 0; t0 < R; t0 += kTokChunk) {
      const int nt = min(kTokChunk, R - t0);
      float a0[kTokChunk], a1[kTokChunk];
      dot2(d.output, r0, r1, in, t0, nt, a0, a1);
      if ((threadIdx.x & 31) == 0)
        for (int i = 0; i < nt; i++) {
          d.logits[(size_t)(t0 + i) * d.vocab + r0] = a0[i];
          if (r1 != r0) d.logits[(size_t)(t0 + i) * d.vocab + r1] = a1[i];
          // The raw values: clean() makes +Inf the largest float.
          const bool fin = isfinite(a0[i]) || isfinite(a1[i]);
          if (best) {
            atomicMax(&sbest[t0 + i], umax64(keyof(clean(a0[i]), r0), keyof(clean(a1[i]), r1)));
            if (fin) sfin[t0 + i] = 1;
          } else if (fin && !d.r_finite[t0 + i]) {
            d.r_finite[t0 + i] = 1;  // every writer writes 1
          }
        }
    }
  }
  if (best) {
    __syncthreads();
    for (int i = threadIdx.x; i < R; i += kThreads) {
      atomicMax(&d.r_best[i], sbest[i]);
      if (sfin[i]) d.r_finite[i] = 1;
    }
  }
}

}  // namespace

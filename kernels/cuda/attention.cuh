#pragma once
// attention.cuh: the QKV phase (the stacked Q/K/V projection, bias, RoPE
// rotation, K and V written to the paged float16 cache) and attention over
// the cache (online softmax over chunks of 32 positions, folded in a fixed
// order).
#include "gemv.cuh"
#include "norm_rope.cuh"

namespace {

// QKV: one warp per pair of rows (a RoPE pair, or two unrotated rows);
// rotated K and V go to the paged cache, rotated Q to d.q.
__device__ void phase_qkv(Dev &d, const DLayer &L, int layer, const In &in) {
  const int qd = d.n_head * d.hd, kvd = d.n_kv * d.hd, half = d.rope_dim / 2;
  const int per_head = half + (d.hd - d.rope_dim) / 2;
  const int n_head_units = (d.n_head + d.n_kv) * per_head;
  const int units = n_head_units + kvd / 2;
  const int T = d.n_tok;
  for (int u = gwarp(); u < units; u += nwarps()) {
    int r0, r1, pair = -1;
    if (u < n_head_units) {
      const int head = u / per_head, k = u % per_head;
      const int base = head < d.n_head ? head * d.hd : qd + (head - d.n_head) * d.hd;
      if (k < half) {
        pair = k;
        if (d.neox) { r0 = base + k; r1 = base + k + half; }
        else { r0 = base + 2 * k; r1 = base + 2 * k + 1; }
      } else {
        r0 = base + d.rope_dim + 2 * (k - half);
        r1 = r0 + 1;
      }
    } else {
      r0 = qd + kvd + 2 * (u - n_head_units);
      r1 = r0 + 1;
    }
    const float b0 = L.qkv_bias ? L.qkv_bias[r0] : 0.f;
    const float b1 = L.qkv_bias ? L.qkv_bias[r1] : 0.f;
    for (int t0 = 0; t0 < T; t0 += kTokChunk) {
      const int nt = min(kTokChunk, T - t0);
      float a0[kTokChunk], a1[kTokChunk];
      dot2(L.qkv, r0, r1, in, t0, nt, a0, a1);
      if ((threadIdx.x & 31) != 0) continue;
      for (int i = 0; i < nt; i++) {
        const int t = t0 + i;
        float v0 = a0[i] + b0, v1 = a1[i] + b1;
        const int pos = d.t_pos[t];
        if (pair >= 0) {
          const float2 cs = d.rope_cs[t * 64 + pair];
          const float c = cs.x, s = cs.y;
          const float x0 = v0, x1 = v1;
          v0 = x0 * c - x1 * s;
          v1 = x0 * s + x1 * c;
        }
        const int slot = d.t_slot[t];
        if (r0 < qd) {
          d.q[(size_t)t * qd + r0] = v0;
          d.q[(size_t)t * qd + r1] = v1;
          continue;
        }
        const bool isv = r0 >= qd + kvd;
        const int rr0 = r0 - qd - (isv ? kvd : 0), rr1 = r1 - qd - (isv ? kvd : 0);
        const int kvh = rr0 / d.hd;
        const int blk = d.btab[slot * d.max_bpb + pos / d.bs];
        __half *cache = isv ? d.vcache : d.kcache;
        const size_t base = ((((size_t)layer * d.num_blocks + blk) * d.n_kv + kvh) * d.bs + pos % d.bs) * d.hd;
        cache[base + rr0 % d.hd] = __float2half_rn(v0);
        cache[base + rr1 % d.hd] = __float2half_rn(v1);
      }
    }
  }
}

// Attention over positions lo..pos of the token's slot, in float32: lo is
// 0, or pos - window + 1 with a sliding window (as the CPU's
// Config.windowStart). A unit is one (token, query head). The positions
// from the multiple of 32 at or below lo are cut into chunks of 32 (those
// below lo masked like those past pos); a
// warp scores a chunk (a key per lane), stages its values in shared memory
// and produces the chunk's partial softmax (max, sum, weighted values);
// the partials are folded into the result in chunk order. With no more
// units than blocks, a whole block takes a unit and its warps compute 16
// chunks at a time, which warp 0 folds in order; otherwise each warp takes
// units of its own and folds as it goes. The fold order is the same either
// way, so a token's attention does not depend on how many others there are.
constexpr int kAttnWarpFloats = 128 + 32 * 128 / 2;  // query + a 32 × 128 float16 value tile
constexpr int kAttnFoldFloats = kWarps * (2 + 128);  // the block's partials
// The shared memory before the products' ring, in floats: attention's
// regions and partials, which the products' staging reuses (as sized for
// RLM_SMEM_WARPS warps, kWarps unless set).
#ifndef RLM_SMEM_WARPS
#define RLM_SMEM_WARPS kWarps
#endif
constexpr int kSmemFloats = RLM_SMEM_WARPS * kAttnWarpFloats + RLM_SMEM_WARPS * (2 + 128);
static_assert(kSmemFloats >= kWarps * kAttnWarpFloats + kAttnFoldFloats, "RLM_SMEM_WARPS");

__device__ __forceinline__ void attn_fold(float &m, float &l, float (&acc)[4], float mc, float lc, const float (&ac)[4]) {
  if (mc == -INFINITY) return;
  const float M = fmaxf(m, mc);
  const float a = m == -INFINITY ? 0.f : __expf(m - M), b = __expf(mc - M);
  l = l * a + lc * b;
#pragma unroll
  for (int k = 0; k < 4; k++) acc[k] = acc[k] * a + ac[k] * b;
  m = M;
}

// One chunk's partial: positions p0..p0+31 (those in lo..pos) of (layer, kvh).
__device__ __forceinline__ void attn_chunk(const Dev &d, int layer, int kvh, const int *tab, int p0, int lo, int pos,
                                           const float *q, __half *vt, float scale, float &mc, float &lc,
                                           float (&ac)[4]) {
  const int lane = threadIdx.x & 31, hd = d.hd;
  const int p = p0 + lane;
  const bool seen = p >= lo && p <= pos;
  float s = -INFINITY;
  if (seen) {
    const int blk = tab[p / d.bs];
    const size_t kbase = ((((size_t)layer * d.num_blocks + blk) * d.n_kv + kvh) * d.bs + p % d.bs) * hd;
    const uint4 *k4 = reinterpret_cast<const uint4 *>(d.kcache + kbase);
    const uint4 *v4 = reinterpret_cast<const uint4 *>(d.vcache + kbase);
    uint4 *t4 = reinterpret_cast<uint4 *>(vt + lane * hd);
    float dot = 0.f;
    for (int i0 = 0; i0 < hd / 8; i0 += 8) {
      uint4 kk[8], vv[8];
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (i0 + i < hd / 8) {
          kk[i] = k4[i0 + i];
          vv[i] = v4[i0 + i];
        }
#pragma unroll
      for (int i = 0; i < 8; i++)
        if (i0 + i < hd / 8) {
          float kf[8];
          WT<RLM_TYPE_F16>::cvt(kk[i], kf);
#pragma unroll
          for (int e = 0; e < 8; e++) dot = fmaf(q[8 * (i0 + i) + e], kf[e], dot);
          t4[i0 + i] = vv[i];
        }
    }
    s = dot * scale;
  }
  __syncwarp();
  float mx = s;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  mc = mx;
#pragma unroll
  for (int k = 0; k < 4; k++) ac[k] = 0.f;
  if (mx == -INFINITY) {  // no position in this chunk
    lc = 0.f;
    return;
  }
  const float e = seen ? __expf(s - mx) : 0.f;
  lc = warp_sum(e);
  // Only the lanes that staged a value are read: a masked lane's tile row
  // holds whatever was there, which 0 × (a NaN or an infinity) would not
  // cancel.
  const int np = min(32, pos - p0 + 1);
  for (int j = max(0, lo - p0); j < np; j++) {
    const float ej = __shfl_sync(0xffffffffu, e, j);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int dd = lane + 32 * k;
      if (dd < hd) ac[k] = fmaf(ej, __half2float(vt[j * hd + dd]), ac[k]);
    }
  }
  __syncwarp();
}

__device__ void phase_attn(Dev &d, int layer, float *sh) {
  const int T = d.n_tok, hd = d.hd, group = d.n_head / d.n_kv, qd = d.n_head * hd;
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
  float *q = sh + wib * kAttnWarpFloats;
  __half *vt = reinterpret_cast<__half *>(q + 128);
  float *pm = sh + kWarps * kAttnWarpFloats, *pl = pm + kWarps, *pa = pl + kWarps;  // pa: [kWarps][128]
  const float scale = (float)(1.0 / sqrt((double)hd));
  const int units = T * d.n_head;
  const bool coop = units <= (int)gridDim.x;
  const int u0 = coop ? blockIdx.x : gwarp(), ustep = coop ? gridDim.x : nwarps();
  for (int u = u0; u < units; u += ustep) {
    const int t = u / d.n_head, h = u % d.n_head, kvh = h / group;
    const int slot = d.t_slot[t], pos = d.t_pos[t];
    const int lo = d.window > 0 ? max(0, pos - d.window + 1) : 0, c0 = lo & ~31;
    const int *tab = d.btab + slot * d.max_bpb;
    for (int i = lane; i < hd; i += 32) q[i] = d.q[(size_t)t * qd + h * hd + i];
    __syncwarp();
    float m = -INFINITY, l = 0.f, acc[4] = {0, 0, 0, 0};  // dims lane + 32k (hd ≤ 128)
    if (!coop) {
      for (int p0 = c0; p0 <= pos; p0 += 32) {
        float mc, lc, ac[4];
        attn_chunk(d, layer, kvh, tab, p0, lo, pos, q, vt, scale, mc, lc, ac);
        attn_fold(m, l, acc, mc, lc, ac);
      }
    } else {
      for (int r0 = c0; r0 <= pos; r0 += 32 * kWarps) {
        float mc, lc, ac[4];
        attn_chunk(d, layer, kvh, tab, r0 + 32 * wib, lo, pos, q, vt, scale, mc, lc, ac);
        if (lane == 0) {
          pm[wib] = mc;
          pl[wib] = lc;
        }
#pragma unroll
        for (int k = 0; k < 4; k++)
          if (lane + 32 * k < hd) pa[wib * 128 + lane + 32 * k] = ac[k];
        __syncthreads();
        if (wib == 0)
          for (int w = 0; w < kWarps; w++) {
            float aw[4];
#pragma unroll
            for (int k = 0; k < 4; k++) aw[k] = lane + 32 * k < hd ? pa[w * 128 + lane + 32 * k] : 0.f;
            attn_fold(m, l, acc, pm[w], pl[w], aw);
          }
        __syncthreads();
      }
      if (wib != 0) continue;
    }
    const float inv = 1.f / l;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int dd = lane + 32 * k;
      if (dd >= hd) continue;
      const float v = acc[k] * inv;
      if (d.mma && d.n_tok > kFuseNorm) d.ab[(size_t)t * qd + h * hd + dd] = __float2bfloat16_rn(v);  // as the product stages it
      else d.att[(size_t)t * qd + h * hd + dd] = v;
    }
    __syncwarp();
  }
}

}  // namespace

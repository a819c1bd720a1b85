// device.cu: the persistent decode kernel of ringlm's CUDA device.
//
// One cooperative kernel is launched once per device and runs until STOP.
// Block 0 is the leader: it polls the submit ring in mapped pinned host
// memory, executes the control ops (OPEN_SLOT, GRANT_BLOCKS, CLOSE_SLOT)
// against slot state kept in device memory, and turns a STEP into a step
// description (tokens, positions, slots, sampling rows) in device memory.
// Then every block runs the step's forward pass, phase by phase with grid
// barriers between phases, samples, and writes the TOKEN completions; the
// leader ends the step with STEP_DONE and publishes.
//
// Numerics follow the CPU reference (package model): float32 activations,
// RMSNorm sums in float64, RoPE angles in float32 with cos/sin in float64,
// float16 KV cache. Every output element is computed by one warp or one
// block in a fixed order, so a sequence's results do not depend on its
// batch mates (batch invariance).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ring.h"
#include "ringlm_cuda.h"

namespace cg = cooperative_groups;

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxStop = 256;   // stop ids a slot may hold
constexpr int kMaxBias = 1024;  // logit-bias pairs a slot may hold
constexpr int kTokChunk = 4;    // tokens a warp multiplies per weight load
constexpr int kRecBatch = 32;   // submit records copied at once

struct DMat {
  const void *w;  // Q8_0: the int8 quants, row-major
  int type, rows, cols;
  const float *sc;  // Q8_0: one scale per 32 weights, [rows][cols/32]
};

struct DLayer {
  const float *attn_norm, *ffn_norm;
  DMat qkv;              // Q rows, then K rows, then V rows
  const float *qkv_bias; // q_dim + 2 kv_dim, or null
  DMat o;
  DMat gu;               // gate rows, then up rows
  DMat down;
};

struct Slot {
  int open, finished, last, sampled;
  int pos, max_tokens, flags, prompt_len;
  float temperature, top_p, min_p;
  int top_k;
  float rep_pen;
  int rep_last_n;
  float presence, frequency;
  unsigned long long seed;
  int n_stop, n_bias, n_eos, hist_from;
  int eos[RLM_MAX_EOS];
  int gen_from;  // first position counted as generated (-1: none yet)
  int n_top;     // alternatives per TOKEN (TOP_LOGPROBS records)
  int n_blocks;  // block-table entries granted
};

// Everything the kernel reads, in device memory.
struct Dev {
  // model
  int n_layer, dim, n_head, n_kv, hd, ffn, vocab, rope_dim, neox;
  float rope_scale, eps;
  const float *inv_freq;  // rope_dim/2
  DMat embed, output;
  const float *out_norm;
  const DLayer *layers;
  // KV pool: [layer][block][kv head][bs][hd], float16
  __half *kcache, *vcache;
  int num_blocks, bs, max_bpb, ctx;
  // slots
  int slots;
  Slot *slot;
  int *btab;  // [slots][max_bpb]
  int *hist;  // [slots][ctx]: the token at each observed position
  int *stop_ids;  // [slots][kMaxStop]
  int *bias_tok;  // [slots][kMaxBias]
  float *bias_val;
  // step buffers
  int max_tok;
  float *x, *q, *att, *h;  // [max_tok][dim | q_dim | q_dim | ffn]
  int *t_slot, *t_pos, *t_id;   // per token
  int *r_tok, *r_slot;          // per sampling row: its token index and slot
  int *r_fast;                  // per sampling row: greedy with nothing to adjust (argmax in the head phase)
  unsigned long long *r_best;   // per sampling row: the head phase's largest order key
  unsigned long long *r_comp;   // per sampling row: its completion index
  float *logits;                // [slots][vocab]
  double *w_scr;                // [grid][vocab]
  unsigned *bits_scr;           // [grid][vocab/32 + 1]
  int *cnt_scr;                 // [grid][vocab]
  unsigned *stage;              // leader's copy of a payload
  int stage_cap;                // words
  // arena (device view of the mapped host memory)
  char *arena;
  // leader ↔ grid
  int n_tok, n_rows, stop, executed;
  unsigned long long step_id, step_start, sub_cons, cprod, ccons;
  int fault;  // a device-side invariant broke (detail for the host)
  float *inv;  // [max(max_tok, slots)] RMSNorm factors when computed by a phase of their own
  float2 *rope_cs;  // [max_tok][64]: cos and sin of each token's RoPE angles, computed once per step
  // RINGLM_CUDA_PROFILE=1: block 0 adds each phase's time (ns, grid barrier
  // included) and prints the totals when the kernel stops.
  int profile;
  unsigned long long prof[12], prof_last;
  unsigned long long trap_step, steps_seen;  // fault injection (rlm_opts.trap_step): trap on that STEP
};

__device__ __forceinline__ unsigned long long globaltimer();

__device__ __forceinline__ void prof_mark(Dev &d, int phase) {
  if (d.profile && blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long now = globaltimer();
    if (phase > 0) d.prof[phase] += now - d.prof_last;
    else d.prof[11]++;
    d.prof_last = now;
  }
}

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ---------------------------------------------------------------- numerics

__device__ __forceinline__ void load8(const DMat &m, int row, int col, float *f) {
  if (m.type == RLM_TYPE_BF16) {
    const uint4 v = *reinterpret_cast<const uint4 *>(
        reinterpret_cast<const __nv_bfloat16 *>(m.w) + (size_t)row * m.cols + col);
    const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 t = __bfloat1622float2(p[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  } else if (m.type == RLM_TYPE_F16) {
    const uint4 v = *reinterpret_cast<const uint4 *>(
        reinterpret_cast<const __half *>(m.w) + (size_t)row * m.cols + col);
    const __half2 *p = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 t = __half22float2(p[i]);
      f[2 * i] = t.x;
      f[2 * i + 1] = t.y;
    }
  } else if (m.type == RLM_TYPE_Q8_0) {
    const uint2 v = *reinterpret_cast<const uint2 *>(reinterpret_cast<const int8_t *>(m.w) + (size_t)row * m.cols + col);
    const float s = m.sc[(size_t)row * (m.cols / 32) + col / 32];
    const int8_t *q = reinterpret_cast<const int8_t *>(&v);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] = s * (float)q[i];
  } else {  // F32
    const float4 *p = reinterpret_cast<const float4 *>(
        reinterpret_cast<const float *>(m.w) + (size_t)row * m.cols + col);
    float4 a = p[0], b = p[1];
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
    f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum of a double (all threads get it). sh: kWarps doubles.
__device__ double block_sum_d(double v, double *sh) {
  v = warp_sum_d(v);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  double t = 0;
  for (int i = 0; i < kWarps; i++) t += sh[i];
  return t;
}

__device__ __forceinline__ unsigned long long umax64(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
__device__ __forceinline__ unsigned long long umin64(unsigned long long a, unsigned long long b) { return a < b ? a : b; }

__device__ unsigned long long block_max_u64(unsigned long long v, unsigned long long *sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = umax64(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  unsigned long long t = 0;
  for (int i = 0; i < kWarps; i++) t = umax64(t, sh[i]);
  return t;
}

__device__ unsigned long long block_min_u64(unsigned long long v, unsigned long long *sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = umin64(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) sh[w] = v;
  __syncthreads();
  unsigned long long t = ~0ull;
  for (int i = 0; i < kWarps; i++) t = umin64(t, sh[i]);
  return t;
}

// ---------------------------------------------------------------- GEMV

constexpr int kG = 4;          // 16-byte weight chunks a lane loads before using them
constexpr int kFuseNorm = 16;  // up to this many tokens, every block computes the norms itself

// An input of a matrix-vector phase: row t is x + (map ? map[t] : t) * ld;
// with g set, the value used is g[c] * (x[c] * inv[t]) (RMSNorm on the fly,
// the same float operations as the CPU's normalised copy).
struct In {
  const float *x;
  int ld;
  const float *g, *inv;
  const int *map;
};

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
  return In{smem, cols, nullptr, nullptr, nullptr};
}

// The RMSNorm factors of T rows of x (row map[t] when map is set). Few
// rows: every block computes them into sh (no barrier). Many: one block per
// row writes d.inv, then a grid barrier.
__device__ const float *norm_factors(Dev &d, const float *x, int T, const int *map, float *sh, double *shd) {
  auto one = [&](int t) {
    const float *xr = x + (size_t)(map ? map[t] : t) * d.dim;
    double ss = 0;
    for (int i = threadIdx.x; i < d.dim; i += kThreads) ss += (double)xr[i] * (double)xr[i];
    ss = block_sum_d(ss, shd);
    return (float)(1.0 / sqrt((double)((float)(ss / d.dim) + d.eps)));
  };
  if (T <= kFuseNorm) {
    for (int t = 0; t < T; t++) {
      const float v = one(t);
      if (threadIdx.x == 0) sh[t] = v;
    }
    __syncthreads();
    return sh;
  }
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    const float v = one(t);
    if (threadIdx.x == 0) d.inv[t] = v;
  }
  cg::this_grid().sync();
  return d.inv;
}

// ---------------------------------------------------------------- phases

__device__ __forceinline__ unsigned long long keyof(float z, int id);
__device__ __forceinline__ float clean(float z);

__device__ __forceinline__ int gwarp() { return blockIdx.x * kWarps + (threadIdx.x >> 5); }
__device__ __forceinline__ int nwarps() { return gridDim.x * kWarps; }

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

// Attention over positions 0..pos of the token's slot, in float32. A unit
// is one (token, query head). The positions are cut into chunks of 32; a
// warp scores a chunk (a key per lane), stages its values in shared memory
// and produces the chunk's partial softmax (max, sum, weighted values);
// the partials are folded into the result in chunk order. With no more
// units than blocks, a whole block takes a unit and its warps compute 16
// chunks at a time, which warp 0 folds in order; otherwise each warp takes
// units of its own and folds as it goes. The fold order is the same either
// way, so a token's attention does not depend on how many others there are.
constexpr int kAttnWarpFloats = 128 + 32 * 128 / 2;  // query + a 32 × 128 float16 value tile
constexpr int kAttnFoldFloats = kWarps * (2 + 128);  // the block's partials

__device__ __forceinline__ void attn_fold(float &m, float &l, float (&acc)[4], float mc, float lc, const float (&ac)[4]) {
  if (mc == -INFINITY) return;
  const float M = fmaxf(m, mc);
  const float a = m == -INFINITY ? 0.f : __expf(m - M), b = __expf(mc - M);
  l = l * a + lc * b;
#pragma unroll
  for (int k = 0; k < 4; k++) acc[k] = acc[k] * a + ac[k] * b;
  m = M;
}

// One chunk's partial: positions p0..p0+31 (those ≤ pos) of (layer, kvh).
__device__ __forceinline__ void attn_chunk(const Dev &d, int layer, int kvh, const int *tab, int p0, int pos,
                                           const float *q, __half *vt, float scale, float &mc, float &lc,
                                           float (&ac)[4]) {
  const int lane = threadIdx.x & 31, hd = d.hd;
  const int p = p0 + lane;
  float s = -INFINITY;
  if (p <= pos) {
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
  const float e = p <= pos ? __expf(s - mx) : 0.f;
  lc = warp_sum(e);
  const int np = min(32, pos - p0 + 1);
  for (int j = 0; j < np; j++) {
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
    const int *tab = d.btab + slot * d.max_bpb;
    for (int i = lane; i < hd; i += 32) q[i] = d.q[(size_t)t * qd + h * hd + i];
    __syncwarp();
    float m = -INFINITY, l = 0.f, acc[4] = {0, 0, 0, 0};  // dims lane + 32k (hd ≤ 128)
    if (!coop) {
      for (int p0 = 0; p0 <= pos; p0 += 32) {
        float mc, lc, ac[4];
        attn_chunk(d, layer, kvh, tab, p0, pos, q, vt, scale, mc, lc, ac);
        attn_fold(m, l, acc, mc, lc, ac);
      }
    } else {
      for (int r0 = 0; r0 <= pos; r0 += 32 * kWarps) {
        float mc, lc, ac[4];
        attn_chunk(d, layer, kvh, tab, r0 + 32 * wib, pos, q, vt, scale, mc, lc, ac);
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
      if (dd < hd) d.att[(size_t)t * qd + h * hd + dd] = acc[k] * inv;
    }
    __syncwarp();
  }
}

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
// greedy token, ties to the lower id): per block in shared memory, then one
// atomicMax per block and row. A maximum does not depend on the order of
// the updates, so this stays deterministic.
constexpr int kBestRows = 256;

__device__ void phase_head(Dev &d, const In &in, unsigned long long *sbest) {
  const int R = d.n_rows;
  const bool best = R <= kBestRows;
  if (best) {
    for (int i = threadIdx.x; i < R; i += kThreads) sbest[i] = 0;
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
          if (best) atomicMax(&sbest[t0 + i], umax64(keyof(clean(a0[i]), r0), keyof(clean(a1[i]), r1)));
        }
    }
  }
  if (best) {
    __syncthreads();
    for (int i = threadIdx.x; i < R; i += kThreads) atomicMax(&d.r_best[i], sbest[i]);
  }
}

// ---------------------------------------------------------------- sampling

__device__ __forceinline__ unsigned ordf(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long keyof(float z, int id) {
  return ((unsigned long long)ordf(z) << 32) | (0xFFFFFFFFu - (unsigned)id);
}
__device__ __forceinline__ int idof(unsigned long long k) { return (int)(0xFFFFFFFFu - (unsigned)(k & 0xFFFFFFFFu)); }
__device__ __forceinline__ float clean(float z) {
  if (isnan(z)) return -INFINITY;
  if (z == INFINITY) return 3.40282347e38f;
  if (z == 0.f) return 0.f;  // -0 → +0
  return z;
}

__device__ void philox(unsigned ctr[4], unsigned key[2]) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    const unsigned hi0 = __umulhi(0xD2511F53u, ctr[0]), lo0 = 0xD2511F53u * ctr[0];
    const unsigned hi1 = __umulhi(0xCD9E8D57u, ctr[2]), lo1 = 0xCD9E8D57u * ctr[2];
    const unsigned c0 = hi1 ^ ctr[1] ^ key[0], c2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = c0; ctr[1] = lo1; ctr[2] = c2; ctr[3] = lo0;
  }
}

__device__ float uniform(unsigned long long seed, unsigned long long pos) {
  unsigned ctr[4] = {(unsigned)pos, (unsigned)(pos >> 32), 0u, 0u};
  unsigned key[2] = {(unsigned)seed, (unsigned)(seed >> 32)};
  philox(ctr, key);
  return (float)(ctr[0] >> 8) * (1.0f / 16777216.0f);
}

struct SampleShared {
  double hist[256];
  double red[kWarps];
  unsigned long long redk[kWarps];
  unsigned long long prefix;
  double above;
  int found;
};

// Among candidates z > -inf with key ≥ floor, in descending key order: the
// key of the first whose running weight (w, or 1 when w is null) reaches
// target (≥; > when strict). false when the total falls short.
__device__ bool wselect(const float *z, const double *w, int n, unsigned long long floor, double target, bool strict,
                        unsigned long long *out, SampleShared &sh) {
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.above = 0;
    sh.found = 1;
  }
  for (int pass = 0; pass < 8; pass++) {
    const int shift = 56 - 8 * pass;
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    const unsigned long long prefix = sh.prefix;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float zi = z[i];
      if (zi == -INFINITY) continue;
      const unsigned long long k = keyof(zi, i);
      if (k < floor) continue;
      if (pass > 0 && (k >> (shift + 8)) != prefix) continue;
      atomicAdd(&sh.hist[(k >> shift) & 255], w ? w[i] : 1.0);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double cum = sh.above;
      int chosen = -1, last_nonempty = -1;
      for (int dg = 255; dg >= 0; dg--) {
        const double hv = sh.hist[dg];
        if (hv == 0) continue;
        last_nonempty = dg;
        const double nc = cum + hv;
        if (strict ? nc > target : nc >= target) {
          chosen = dg;
          break;
        }
        cum = nc;
      }
      if (chosen < 0) {
        if (pass == 0 || last_nonempty < 0) sh.found = 0;
        chosen = last_nonempty < 0 ? 0 : last_nonempty;
        // rounding between passes: take the smallest non-empty digit
        cum = sh.above;
        for (int dg = 255; dg > chosen; dg--) cum += sh.hist[dg];
      }
      sh.above = cum;
      sh.prefix = (prefix << 8) | (unsigned long long)chosen;
      if (pass == 0 && sh.found == 0) sh.prefix = 0;
    }
    __syncthreads();
    if (!sh.found) return false;
  }
  *out = sh.prefix;
  return true;
}

// Samples sampling row `row` of the current step; returns the token and
// its logprob (when asked) per the sample package specification.
__device__ void sample_row(Dev &d, int row, SampleShared &sh, int *tok_out, float *lp_out, unsigned *top_tok,
                           float *top_lp) {
  const int V = d.vocab;
  const int slot = d.r_slot[row];
  Slot &s = d.slot[slot];
  float *z = d.logits + (size_t)row * V;
  double *w = d.w_scr + (size_t)blockIdx.x * V;
  unsigned *bits = d.bits_scr + (size_t)blockIdx.x * (V / 32 + 1);
  int *cnt = d.cnt_scr + (size_t)blockIdx.x * V;
  const int pos = s.pos;  // the position the new token will occupy
  // 1. clean; 2. bias
  for (int i = threadIdx.x; i < V; i += kThreads) z[i] = clean(z[i]);
  __syncthreads();
  for (int i = threadIdx.x; i < s.n_bias; i += kThreads) {
    const int t = d.bias_tok[slot * kMaxBias + i];
    z[t] = clean(z[t] + d.bias_val[slot * kMaxBias + i]);
  }
  __syncthreads();
  // 3. repetition penalty over the window, once per distinct token
  const int *hist = d.hist + (size_t)slot * d.ctx;
  if (s.rep_pen != 1.f && s.rep_last_n != 0) {
    int from = s.hist_from;
    if (s.rep_last_n > 0) from = max(from, pos - s.rep_last_n);
    for (int i = from + threadIdx.x; i < pos; i += kThreads) {
      const int t = hist[i];
      const unsigned b = 1u << (t & 31);
      if (!(atomicOr(&bits[t >> 5], b) & b)) {
        const float v = z[t];
        z[t] = clean(v > 0 ? __fdiv_rn(v, s.rep_pen) : __fmul_rn(v, s.rep_pen));
      }
    }
    __syncthreads();
    for (int i = from + threadIdx.x; i < pos; i += kThreads) bits[hist[i] >> 5] = 0;
    __syncthreads();
  }
  if ((s.presence != 0.f || s.frequency != 0.f) && s.gen_from >= 0) {
    const int from = max(s.gen_from, s.hist_from);
    for (int i = from + threadIdx.x; i < pos; i += kThreads) atomicAdd(&cnt[hist[i]], 1);
    __syncthreads();
    for (int i = from + threadIdx.x; i < pos; i += kThreads) {
      const int t = hist[i];
      const int c = atomicExch(&cnt[t], 0);
      if (c > 0) z[t] = clean(__fsub_rn(z[t], __fadd_rn(__fmul_rn((float)c, s.frequency), s.presence)));
    }
    __syncthreads();
  }
  // 4-5. order: the top candidate
  unsigned long long best = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) best = umax64(best, keyof(z[i], i));
  best = block_max_u64(best, sh.redk);
  const unsigned neg_inf_key = ordf(-INFINITY);
  if ((unsigned)(best >> 32) <= neg_inf_key) {  // every z is -inf
    *tok_out = 0;
    *lp_out = 0.f;
    if (threadIdx.x == 0)
      for (int k = 0; k < s.n_top; k++) top_tok[k] = RLM_TOP_NONE, top_lp[k] = 0.f;
    return;
  }
  const float zmax = __uint_as_float((best >> 63) ? (unsigned)(best >> 32) & 0x7FFFFFFFu : ~(unsigned)(best >> 32));
  int tok = idof(best);
  const bool want_lp = (s.flags & RLM_SLOT_LOGPROBS) != 0;
  double sum1 = 0;  // sum of exp(z - zmax) at T = 1 (logprobs)
  if (want_lp) {
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      if (zi != -INFINITY) sum1 += exp((double)zi - (double)zmax);
    }
    sum1 = block_sum_d(sum1, sh.red);
  }
  if (s.temperature > 0.f) {
    // 6. weights
    const double invT = 1.0 / (double)s.temperature;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      w[i] = zi == -INFINITY ? 0.0 : exp(((double)zi - (double)zmax) * invT);
    }
    __syncthreads();
    unsigned long long floor = 0;
    // 7. top-k
    if (s.top_k > 0 && s.top_k < V) {
      unsigned long long k;
      if (wselect(z, nullptr, V, 0, (double)s.top_k, false, &k, sh)) floor = k;
    }
    // 8. top-p
    if (s.top_p < 1.f) {
      double Z = 0;
      for (int i = threadIdx.x; i < V; i += kThreads)
        if (z[i] != -INFINITY && keyof(z[i], i) >= floor) Z += w[i];
      Z = block_sum_d(Z, sh.red);
      unsigned long long k;
      if (wselect(z, w, V, floor, (double)s.top_p * Z, false, &k, sh)) floor = umax64(floor, k);
    }
    // 9. min-p
    if (s.min_p > 0.f) {
      const double lmin = log((double)s.min_p);
      unsigned long long k = ~0ull;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float zi = z[i];
        if (zi == -INFINITY) continue;
        const double x = ((double)zi - (double)zmax) * invT;
        if (x >= lmin) k = umin64(k, keyof(zi, i));
      }
      k = block_min_u64(k, sh.redk);
      floor = umax64(floor, k);
    }
    // 10. draw
    double S = 0;
    for (int i = threadIdx.x; i < V; i += kThreads)
      if (z[i] != -INFINITY && keyof(z[i], i) >= floor) S += w[i];
    S = block_sum_d(S, sh.red);
    const double target = (double)uniform(s.seed, (unsigned long long)pos) * S;
    unsigned long long k;
    if (wselect(z, w, V, floor, target, true, &k, sh)) {
      tok = idof(k);
    } else {  // rounding left the sum short: the last kept candidate with w > 0
      unsigned long long m = ~0ull;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float zi = z[i];
        if (zi != -INFINITY && w[i] > 0 && keyof(zi, i) >= floor) m = umin64(m, keyof(zi, i));
      }
      m = block_min_u64(m, sh.redk);
      tok = idof(m);
    }
  }
  *tok_out = tok;
  const double lse = log(sum1);
  *lp_out = want_lp ? (float)(((double)z[tok] - (double)zmax) - lse) : 0.f;
  // Alternatives: the first n_top tokens of the order (z = -inf excluded).
  unsigned long long below = ~0ull;
  for (int k = 0; k < s.n_top; k++) {
    unsigned long long m = 0;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      if (zi == -INFINITY) continue;
      const unsigned long long ki = keyof(zi, i);
      if (ki < below) m = umax64(m, ki);
    }
    m = block_max_u64(m, sh.redk);
    if (threadIdx.x == 0) {
      if (m == 0 || (unsigned)(m >> 32) <= ordf(-INFINITY)) {
        top_tok[k] = RLM_TOP_NONE;
        top_lp[k] = 0.f;
      } else {
        top_tok[k] = (unsigned)idof(m);
        top_lp[k] = (float)(((double)z[idof(m)] - (double)zmax) - lse);
      }
    }
    below = m == 0 ? 0 : m;
    __syncthreads();
  }
}

// ---------------------------------------------------------------- leader

struct Leader {
  Dev &d;
  const rlm_header *h;
  rlm_ring_ctl *sub, *com;
  unsigned *stg;

  __device__ void put(const rlm_completion &c) {
    const uint32_t cap = h->compl_cap;
    while (d.cprod - d.ccons >= cap) {
      rlm_store_release(&com->prod, d.cprod);  // never wait holding unpublished records
      d.ccons = rlm_load_acquire(&com->cons);
      if (d.cprod - d.ccons >= cap) __nanosleep(500);
    }
    *rlm_completion_at(d.arena, h, d.cprod) = c;
    d.cprod++;
  }
  __device__ void publish() {
    __threadfence_system();
    rlm_store_release(&com->prod, d.cprod);
  }
  __device__ void error(uint64_t id, uint32_t slot, uint32_t code, uint32_t detail) {
    rlm_completion c;
    memset(&c, 0, sizeof c);
    c.kind = RLM_KIND_ERROR;
    c.slot = slot;
    c.step = id;
    c.u.err.code = code;
    c.u.err.detail = detail;
    put(c);
  }
  __device__ void simple(uint32_t kind, uint64_t id, uint32_t slot) {
    rlm_completion c;
    memset(&c, 0, sizeof c);
    c.kind = kind;
    c.slot = slot;
    c.step = id;
    put(c);
  }
};

// Copies n staging words from off into d.stage with the whole block.
__device__ void copy_run(Dev &d, const unsigned *stg, uint32_t off, uint32_t n, uint32_t at) {
  for (uint32_t i = threadIdx.x; i < n; i += kThreads) d.stage[at + i] = stg[off + i];
}

// The leader (block 0) consumes records until a STEP is ready to run (then
// d.n_tok > 0 or d.n_rows ≥ 0 with the step set up) or STOP. Returns with
// d.stop set, or a step described in d. Runs with all threads of block 0.
__device__ void leader_fetch(Dev &d) {
  __shared__ __align__(16) rlm_submit recs[kRecBatch];
  __shared__ unsigned long long s_prod;
  const rlm_header *h = (const rlm_header *)d.arena;
  Leader L{d, h, rlm_submit_ctl(d.arena, h), rlm_completion_ctl(d.arena, h), rlm_staging(d.arena, h)};
  const unsigned *stg = L.stg;
  for (;;) {
    // Wait for records (publishing what we wrote first).
    if (threadIdx.x == 0) {
      unsigned long long p = rlm_load_acquire(&L.sub->prod);
      int spins = 0;
      while (p == d.sub_cons) {
        if (spins++ == 0) L.publish();
        __nanosleep(spins < 64 ? 100 : 1000);
        p = rlm_load_acquire(&L.sub->prod);
      }
      s_prod = p;
    }
    __syncthreads();
    const unsigned long long prod = s_prod;
    const int nrec = (int)min((unsigned long long)kRecBatch, prod - d.sub_cons);
    // Copy the records with the whole block: 16 bytes a thread.
    for (int i = threadIdx.x; i < nrec * 4; i += kThreads) {
      const uint4 *src = reinterpret_cast<const uint4 *>(rlm_submit_at(d.arena, h, d.sub_cons + i / 4));
      reinterpret_cast<uint4 *>(&recs[i / 4])[i % 4] = src[i % 4];
    }
    __syncthreads();
    for (int ri = 0; ri < nrec; ri++) {
      const rlm_submit r = recs[ri];
      const uint32_t op = r.op;
      bool payload_ok = r.payload_len == 0 || rlm_staging_ok(h, r.payload_off, r.payload_len);
      if (op == RLM_OP_STOP) {
        if (threadIdx.x == 0) {
          L.simple(RLM_KIND_STOPPED, r.id, RLM_NO_SLOT);
          L.publish();
          d.sub_cons++;
          rlm_store_release(&L.sub->cons, d.sub_cons);
          d.stop = 1;
        }
        __syncthreads();
        return;
      }
      if (op == RLM_OP_OPEN_SLOT) {
        // Copy the payload, then validate it with one thread.
        const bool fits = payload_ok && r.payload_len <= (uint32_t)d.stage_cap && r.payload_len >= RLM_SLOT_PARAMS_WORDS;
        if (fits) copy_run(d, stg, r.payload_off, r.payload_len, 0);
        __syncthreads();
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else if (!payload_ok || r.payload_len < RLM_SLOT_PARAMS_WORDS) L.error(r.id, r.slot, RLM_CODE_BAD_PAYLOAD, r.payload_off);
          else if (r.payload_len > (uint32_t)d.stage_cap) L.error(r.id, r.slot, RLM_CODE_BAD_PARAMS, RLM_SP_OFF_N_HIST);
          else {
            const unsigned *p = d.stage;
            const rlm_slot_params *sp = reinterpret_cast<const rlm_slot_params *>(p);
            const uint32_t n_stop = sp->n_stop, n_bias = sp->n_bias, n_hist = sp->n_hist, n_eos = sp->n_eos;
            int bad = -1;
            if ((uint64_t)RLM_SLOT_PARAMS_WORDS + n_stop + 2ull * n_bias + n_hist != r.payload_len) bad = RLM_SP_OFF_N_STOP;
            else if (n_stop > (uint32_t)kMaxStop) bad = RLM_SP_OFF_N_STOP;
            else if (n_bias > (uint32_t)kMaxBias) bad = RLM_SP_OFF_N_BIAS;
            else if (n_eos > RLM_MAX_EOS) bad = RLM_SP_OFF_N_EOS;
            else if (sp->flags & ~RLM_SLOT_FLAGS_KNOWN) bad = RLM_SP_OFF_FLAGS;
            else if (sp->n_top > RLM_MAX_TOP || (sp->n_top > 0 && !(sp->flags & RLM_SLOT_LOGPROBS))) bad = RLM_SP_OFF_N_TOP;
            else if (sp->start_pos > (uint32_t)d.ctx || n_hist > sp->start_pos) bad = RLM_SP_OFF_START_POS;
            else if (!(sp->temperature >= 0.f) || isinf(sp->temperature)) bad = RLM_SP_OFF_TEMPERATURE;
            else if (!(sp->top_p > 0.f && sp->top_p <= 1.f)) bad = RLM_SP_OFF_TOP_P;
            else if (!(sp->min_p >= 0.f && sp->min_p <= 1.f)) bad = RLM_SP_OFF_MIN_P;
            else if (!(sp->repeat_penalty > 0.f) || isinf(sp->repeat_penalty)) bad = RLM_SP_OFF_REPEAT_PENALTY;
            else if (sp->repeat_last_n < -1) bad = RLM_SP_OFF_REPEAT_LAST_N;
            else if (isnan(sp->presence) || isinf(sp->presence)) bad = RLM_SP_OFF_PRESENCE;
            else if (isnan(sp->frequency) || isinf(sp->frequency)) bad = RLM_SP_OFF_FREQUENCY;
            for (uint32_t i = 0; bad < 0 && i < n_bias; i++) {
              const uint32_t t = p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i];
              const float b = __uint_as_float(p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1]);
              if (t >= (uint32_t)d.vocab) bad = RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i;
              else if (!(b >= -100.f && b <= 100.f)) bad = RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1;
            }
            if (bad >= 0) {
              L.error(r.id, r.slot, RLM_CODE_BAD_PARAMS, (uint32_t)bad);
            } else {
              Slot &s = d.slot[r.slot];
              s.open = 1;
              s.finished = 0;
              s.last = -1;
              s.sampled = 0;
              s.pos = sp->start_pos;
              s.max_tokens = sp->max_tokens;
              s.flags = sp->flags;
              s.prompt_len = sp->prompt_len;
              s.temperature = sp->temperature;
              s.top_p = sp->top_p;
              s.min_p = sp->min_p;
              s.top_k = sp->top_k;
              s.rep_pen = sp->repeat_penalty;
              s.rep_last_n = sp->repeat_last_n;
              s.presence = sp->presence;
              s.frequency = sp->frequency;
              s.seed = (unsigned long long)sp->seed_lo | ((unsigned long long)sp->seed_hi << 32);
              s.n_stop = n_stop;
              s.n_bias = n_bias;
              s.n_eos = n_eos;
              for (uint32_t i = 0; i < n_eos; i++) s.eos[i] = sp->eos[i];
              s.hist_from = sp->start_pos - n_hist;
              s.gen_from = sp->prompt_len > 0 ? (int)sp->prompt_len : -1;
              s.n_blocks = 0;
              s.n_top = sp->n_top;
              for (uint32_t i = 0; i < n_stop; i++) d.stop_ids[r.slot * kMaxStop + i] = p[RLM_SLOT_PARAMS_WORDS + i];
              for (uint32_t i = 0; i < n_bias; i++) {
                d.bias_tok[r.slot * kMaxBias + i] = p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i];
                d.bias_val[r.slot * kMaxBias + i] = __uint_as_float(p[RLM_SLOT_PARAMS_WORDS + n_stop + 2 * i + 1]);
              }
              int *hist = d.hist + (size_t)r.slot * d.ctx;
              const unsigned *hp = p + RLM_SLOT_PARAMS_WORDS + n_stop + 2 * n_bias;
              for (uint32_t i = 0; i < n_hist; i++) hist[s.hist_from + i] = hp[i] < (uint32_t)d.vocab ? hp[i] : 0;
            }
          }
        }
        __syncthreads();
        continue;
      }
      if (op == RLM_OP_GRANT_BLOCKS) {
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (!d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else if (!payload_ok || r.grant_count != r.payload_len || r.grant_first > (uint32_t)d.slot[r.slot].n_blocks ||
                   (uint64_t)r.grant_first + r.grant_count > (uint64_t)d.max_bpb)
            L.error(r.id, r.slot, RLM_CODE_BAD_PAYLOAD, r.payload_off);
          else {
            int bad = -1;
            for (uint32_t i = 0; i < r.grant_count; i++) {
              const uint32_t id = stg[r.payload_off + i];
              if (id >= (uint32_t)d.num_blocks) { bad = (int)id; break; }
            }
            if (bad >= 0) L.error(r.id, r.slot, RLM_CODE_NO_BLOCK, (uint32_t)bad);
            else {
              for (uint32_t i = 0; i < r.grant_count; i++) d.btab[r.slot * d.max_bpb + r.grant_first + i] = stg[r.payload_off + i];
              d.slot[r.slot].n_blocks = max(d.slot[r.slot].n_blocks, (int)(r.grant_first + r.grant_count));
            }
          }
        }
        __syncthreads();
        continue;
      }
      if (op == RLM_OP_CLOSE_SLOT) {
        if (threadIdx.x == 0) {
          if (r.slot >= (uint32_t)d.slots) L.error(r.id, r.slot, RLM_CODE_BAD_SLOT, r.slot);
          else if (!d.slot[r.slot].open) L.error(r.id, r.slot, RLM_CODE_SLOT_STATE, op);
          else {
            d.slot[r.slot].open = 0;
            L.simple(RLM_KIND_SLOT_CLOSED, r.id, r.slot);
          }
        }
        __syncthreads();
        continue;
      }
      if (op != RLM_OP_STEP) {
        if (threadIdx.x == 0) L.error(r.id, RLM_NO_SLOT, RLM_CODE_BAD_OP, op);
        __syncthreads();
        continue;
      }
      // STEP. Fault injection for the tests of fault handling.
      if (threadIdx.x == 0 && ++d.steps_seen == d.trap_step) __trap();
      // Copy the entry list, then validate entry by entry.
      const uint32_t n = r.slot;
      const bool shape_ok = payload_ok && (uint64_t)n * RLM_STEP_ENTRY_WORDS == r.payload_len &&
                            r.payload_len <= (uint32_t)d.stage_cap;
      if (shape_ok) copy_run(d, stg, r.payload_off, r.payload_len, 0);
      __syncthreads();
      __shared__ int s_ok;
      if (threadIdx.x == 0) {
        d.step_start = globaltimer();
        d.step_id = r.id;
        bool ok = shape_ok;
        if (ok) {
          uint64_t toks = 0;
          uint32_t samples = 0;
          for (uint32_t i = 0; i < n; i++) {
            toks += d.stage[i * 4 + RLM_ENT_OFF_N_TOKENS];
            if (d.stage[i * 4 + RLM_ENT_OFF_FLAGS] & RLM_ENTRY_SAMPLE) samples++;
          }
          ok = toks == r.step_tokens && samples == r.step_sample && toks <= (uint64_t)d.max_tok;
        }
        s_ok = ok;
        if (!ok) L.error(r.id, RLM_NO_SLOT, RLM_CODE_BAD_PAYLOAD, r.payload_off);
      }
      __syncthreads();
      if (!s_ok) {
        if (threadIdx.x == 0) {
          rlm_completion c;
          memset(&c, 0, sizeof c);
          c.kind = RLM_KIND_STEP_DONE;
          c.step = r.id;
          c.u.step_done.start_ns = d.step_start;
          c.u.step_done.end_ns = globaltimer();
          L.put(c);
        }
        __syncthreads();
        continue;
      }
      // Entries: thread 0 decides, the block copies token runs.
      __shared__ int s_tok, s_rows, s_exec;
      if (threadIdx.x == 0) s_tok = s_rows = s_exec = 0;
      __syncthreads();
      for (uint32_t i = 0; i < n; i++) {
        const uint32_t eslot = d.stage[i * 4 + RLM_ENT_OFF_SLOT], ntok = d.stage[i * 4 + RLM_ENT_OFF_N_TOKENS];
        const uint32_t toff = d.stage[i * 4 + RLM_ENT_OFF_TOKEN_OFF], flags = d.stage[i * 4 + RLM_ENT_OFF_FLAGS];
        __shared__ int s_run;  // 1: copy tokens from staging, 2: feedback, 0: skip
        if (threadIdx.x == 0) {
          s_run = 0;
          if (eslot >= (uint32_t)d.slots) L.error(r.id, eslot, RLM_CODE_BAD_SLOT, eslot);
          else {
            Slot &s = d.slot[eslot];
            const bool feedback = toff == RLM_TOKEN_OFF_FEEDBACK;
            if (!s.open) L.error(r.id, eslot, RLM_CODE_SLOT_STATE, RLM_OP_STEP);
            else if (s.finished) L.simple(RLM_KIND_SKIPPED, r.id, eslot);
            else if (feedback && (ntok != 1 || s.last < 0)) { L.error(r.id, eslot, RLM_CODE_NO_FEEDBACK, ntok); s.finished = 1; }
            else if (!feedback && (ntok == 0 || !rlm_staging_ok(h, toff, ntok))) { L.error(r.id, eslot, RLM_CODE_BAD_PAYLOAD, toff); s.finished = 1; }
            else if ((s.pos + (int)ntok - 1) / d.bs >= s.n_blocks || s.pos + (int)ntok > d.ctx) { L.error(r.id, eslot, RLM_CODE_NO_BLOCK, s.pos + ntok - 1); s.finished = 1; }
            else s_run = feedback ? 2 : 1;
          }
        }
        __syncthreads();
        if (s_run == 0) continue;
        const int t0 = s_tok;
        if (s_run == 2) {
          if (threadIdx.x == 0) d.t_id[t0] = d.slot[eslot].last;
        } else {
          for (uint32_t j = threadIdx.x; j < ntok; j += kThreads) d.t_id[t0 + j] = (int)stg[toff + j];
        }
        __syncthreads();
        if (threadIdx.x == 0) {
          Slot &s = d.slot[eslot];
          int bad = -1;
          if (s_run == 1)
            for (uint32_t j = 0; j < ntok; j++)
              if ((uint32_t)d.t_id[t0 + j] >= (uint32_t)d.vocab) { bad = j; break; }
          if (bad >= 0) {
            L.error(r.id, eslot, RLM_CODE_BAD_TOKEN, (uint32_t)d.t_id[t0 + bad]);
            s.finished = 1;
          } else {
            int *hist = d.hist + (size_t)eslot * d.ctx;
            for (uint32_t j = 0; j < ntok; j++) {
              d.t_slot[t0 + j] = eslot;
              d.t_pos[t0 + j] = s.pos + j;
              if (s_run == 1) hist[s.pos + j] = d.t_id[t0 + j];
            }
            s.pos += ntok;
            s_tok = t0 + ntok;
            s_exec++;
            if (flags & RLM_ENTRY_SAMPLE) {
              d.r_tok[s_rows] = t0 + ntok - 1;
              d.r_slot[s_rows] = eslot;
              d.r_best[s_rows] = 0;
              d.r_fast[s_rows] = s.temperature == 0.f && s.n_bias == 0 && (s.rep_pen == 1.f || s.rep_last_n == 0) &&
                                 s.presence == 0.f && s.frequency == 0.f && !(s.flags & RLM_SLOT_LOGPROBS);
              s_rows++;
            }
          }
        }
        __syncthreads();
      }
      if (threadIdx.x == 0) {
        d.n_tok = s_tok;
        d.n_rows = s_rows;
        d.executed = s_exec;
        // Reserve the TOKEN completions after the errors already written.
        const uint32_t cap = h->compl_cap;
        // A row takes its TOKEN and ceil(n_top/2) TOP_LOGPROBS records.
        unsigned long long need = 1;
        for (int i = 0; i < s_rows; i++) need += 1 + (d.slot[d.r_slot[i]].n_top + 1) / 2;
        if (need > cap) need = cap;  // cannot happen with the engine's ring sizes; never wait forever
        while (d.cprod + need - d.ccons > cap) {
          rlm_store_release(&L.com->prod, d.cprod);
          d.ccons = rlm_load_acquire(&L.com->cons);
          if (d.cprod + need - d.ccons > cap) __nanosleep(500);
        }
        for (int i = 0; i < s_rows; i++) {
          d.r_comp[i] = d.cprod;
          d.cprod += 1 + (d.slot[d.r_slot[i]].n_top + 1) / 2;
        }
        // The records up to this STEP are consumed: their payloads are copied.
        d.sub_cons += ri + 1;
        rlm_store_release(&L.sub->cons, d.sub_cons);
      }
      __syncthreads();
      return;
    }
    // Every copied record was a control op.
    if (threadIdx.x == 0) {
      d.sub_cons += nrec;
      L.publish();
      rlm_store_release(&L.sub->cons, d.sub_cons);
    }
    __syncthreads();
  }
}

__device__ void leader_finish(Dev &d) {
  if (threadIdx.x != 0) return;
  const rlm_header *h = (const rlm_header *)d.arena;
  Leader L{d, h, rlm_submit_ctl(d.arena, h), rlm_completion_ctl(d.arena, h), rlm_staging(d.arena, h)};
  rlm_completion c;
  memset(&c, 0, sizeof c);
  c.kind = RLM_KIND_STEP_DONE;
  c.slot = d.executed;
  c.step = d.step_id;
  c.u.step_done.start_ns = d.step_start;
  c.u.step_done.end_ns = globaltimer();
  L.put(c);
  L.publish();
}

// ---------------------------------------------------------------- kernel

__global__ void __launch_bounds__(kThreads, 1) persistent(Dev *dp) {
  cg::grid_group grid = cg::this_grid();
  Dev &d = *dp;
  __shared__ double shd[kWarps];
  __shared__ SampleShared ssh;
  __shared__ unsigned top_tok[RLM_MAX_TOP];
  __shared__ float top_lp[RLM_MAX_TOP];
  extern __shared__ __align__(16) float shq[];  // kWarps × kAttnWarpFloats
  __shared__ float sinv[kFuseNorm];
  __shared__ float spart[kWarps * kTokChunk];
  const size_t smem_cap = sizeof(float) * (kWarps * kAttnWarpFloats + kAttnFoldFloats);
  __shared__ unsigned long long sbest[kBestRows];
  for (;;) {
    if (blockIdx.x == 0) leader_fetch(d);
    grid.sync();
    if (*(volatile int *)&d.stop) {
      if (d.profile && blockIdx.x == 0 && threadIdx.x == 0) {
        const double n = d.prof[11] ? (double)d.prof[11] : 1.0;
        printf("ringlm cuda profile: %llu steps; µs/step: embed %.1f qkv %.1f attn %.1f o %.1f ffn-up %.1f down %.1f head %.1f sample %.1f\n",
               d.prof[11], d.prof[1] / n / 1e3, d.prof[2] / n / 1e3, d.prof[3] / n / 1e3, d.prof[4] / n / 1e3,
               d.prof[5] / n / 1e3, d.prof[6] / n / 1e3, d.prof[7] / n / 1e3, d.prof[8] / n / 1e3);
      }
      break;
    }
    const int T = *(volatile int *)&d.n_tok, R = *(volatile int *)&d.n_rows;
    if (T > 0) {
      prof_mark(d, 0);
      // embedding and RoPE angles: one block per token
      for (int t = blockIdx.x; t < T; t += gridDim.x) {
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
      grid.sync();
      prof_mark(d, 1);
      for (int l = 0; l < d.n_layer; l++) {
        const DLayer &L = d.layers[l];
        const float *inv = norm_factors(d, d.x, T, nullptr, sinv, shd);
        phase_qkv(d, L, l, stage(In{d.x, d.dim, L.attn_norm, inv, nullptr}, T, d.dim, shq, smem_cap));
        grid.sync();
        prof_mark(d, 2);
        phase_attn(d, l, shq);
        grid.sync();
        prof_mark(d, 3);
        phase_residual(d, L.o, stage(In{d.att, d.n_head * d.hd, nullptr, nullptr, nullptr}, T, d.n_head * d.hd, shq, smem_cap), spart);
        grid.sync();
        prof_mark(d, 4);
        inv = norm_factors(d, d.x, T, nullptr, sinv, shd);
        phase_ffn_up(d, L, stage(In{d.x, d.dim, L.ffn_norm, inv, nullptr}, T, d.dim, shq, smem_cap));
        grid.sync();
        prof_mark(d, 5);
        phase_residual(d, L.down, stage(In{d.h, d.ffn, nullptr, nullptr, nullptr}, T, d.ffn, shq, smem_cap), spart);
        grid.sync();
        prof_mark(d, 6);
      }
      if (R > 0) {
        const float *inv = norm_factors(d, d.x, R, d.r_tok, sinv, shd);
        phase_head(d, stage(In{d.x, d.dim, d.out_norm, inv, d.r_tok}, R, d.dim, shq, smem_cap), sbest);
        grid.sync();
        prof_mark(d, 7);
        const rlm_header *h = (const rlm_header *)d.arena;
        for (int r = blockIdx.x; r < R; r += gridDim.x) {
          int tok;
          float lp;
          if (d.r_fast[r] && R <= kBestRows) {  // greedy: the head phase found it
            const unsigned long long k = d.r_best[r];
            tok = (unsigned)(k >> 32) <= ordf(-INFINITY) ? 0 : idof(k);
            lp = 0.f;
          } else {
            sample_row(d, r, ssh, &tok, &lp, top_tok, top_lp);
          }
          if (threadIdx.x == 0) {
            Slot &s = d.slot[d.r_slot[r]];
            const int pos = s.pos;
            d.hist[(size_t)d.r_slot[r] * d.ctx + min(pos, d.ctx - 1)] = tok;
            if (s.gen_from < 0) s.gen_from = pos;
            s.last = tok;
            s.sampled++;
            uint32_t fin = RLM_FINISH_NONE;
            bool stop = false;
            if (!(s.flags & RLM_SLOT_IGNORE_EOS))
              for (int i = 0; i < s.n_eos; i++) stop |= s.eos[i] == tok;
            for (int i = 0; i < s.n_stop; i++) stop |= d.stop_ids[d.r_slot[r] * kMaxStop + i] == tok;
            if (stop) fin = RLM_FINISH_STOP;
            else if (s.max_tokens > 0 && s.sampled >= s.max_tokens) fin = RLM_FINISH_LENGTH;
            if (fin != RLM_FINISH_NONE) s.finished = 1;
            rlm_completion c;
            memset(&c, 0, sizeof c);
            c.kind = RLM_KIND_TOKEN;
            c.slot = d.r_slot[r];
            c.step = d.step_id;
            c.u.token.token = tok;
            c.u.token.logprob = lp;
            c.u.token.finish = fin;
            c.u.token.position = pos;
            *rlm_completion_at(d.arena, h, d.r_comp[r]) = c;
            for (int k = 0; k < s.n_top; k += 2) {
              rlm_completion tc;
              memset(&tc, 0, sizeof tc);
              tc.kind = RLM_KIND_TOP_LOGPROBS;
              tc.slot = d.r_slot[r];
              tc.step = d.step_id;
              tc.u.top.token0 = top_tok[k];
              tc.u.top.logprob0 = top_lp[k];
              tc.u.top.token1 = k + 1 < s.n_top ? top_tok[k + 1] : RLM_TOP_NONE;
              tc.u.top.logprob1 = k + 1 < s.n_top ? top_lp[k + 1] : 0.f;
              *rlm_completion_at(d.arena, h, d.r_comp[r] + 1 + k / 2) = tc;
            }
            __threadfence_system();
          }
          __syncthreads();
        }
      }
      grid.sync();
      prof_mark(d, 8);
    }
    if (blockIdx.x == 0) leader_finish(d);
  }
}

// ---------------------------------------------------------------- host

void seterr(char *err, size_t n, const char *fmt, ...) {
  if (!err || n == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

#define CKR(call, ret)                                                                  \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      seterr(err, errlen, "%s: %s (%s)", #call, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
      return ret;                                                                       \
    }                                                                                   \
  } while (0)

}  // namespace

struct rlm_ctx {
  int device = 0;
  Dev h{};          // host copy of the device struct
  Dev *dptr = nullptr;
  std::vector<void *> allocs;
  std::vector<DLayer> layers;
  cudaStream_t stream = nullptr, side = nullptr;
  rlm_info info{};
  bool started = false, waited = false;
  int wait_rc = 0;
  char wait_err[512] = {0};
  size_t shmem = 0;
};

// Bytes of n weights as the device keeps them (Q8_0: int8 quants plus a
// float scale per 32).
static size_t type_bytes(uint32_t t, uint64_t n) {
  switch (t) {
    case RLM_TYPE_F32: return n * 4;
    case RLM_TYPE_F16:
    case RLM_TYPE_BF16: return n * 2;
    case RLM_TYPE_Q8_0: return n + n / 32 * 4;
  }
  return 0;
}

extern "C" {

int rlm_probe(char *err, size_t errlen) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    seterr(err, errlen, "no CUDA device: %s", cudaGetErrorString(e));
    return -1;
  }
  if (n == 0) {
    seterr(err, errlen, "no CUDA device");
    return -1;
  }
  return n;
}

void *rlm_host_alloc(uint64_t bytes, char *err, size_t errlen) {
  void *p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    seterr(err, errlen, "cudaHostAlloc(%llu bytes): %s", (unsigned long long)bytes, cudaGetErrorString(e));
    return nullptr;
  }
  memset(p, 0, bytes);
  return p;
}

int rlm_host_free(void *p, char *err, size_t errlen) {
  cudaError_t e = cudaFreeHost(p);
  if (e != cudaSuccess) {
    seterr(err, errlen, "cudaFreeHost: %s", cudaGetErrorString(e));
    return -1;
  }
  return 0;
}

static void *dalloc(rlm_ctx *c, size_t bytes, cudaError_t *e) {
  void *p = nullptr;
  *e = cudaMalloc(&p, bytes ? bytes : 1);
  if (*e == cudaSuccess) {
    c->allocs.push_back(p);
    cudaMemset(p, 0, bytes ? bytes : 1);
  }
  return p;
}

void rlm_destroy(rlm_ctx *c) {
  if (!c) return;
  cudaSetDevice(c->device);
  if (c->started && !c->waited) {
    // The kernel still runs: the host must have sent STOP; wait for it.
    cudaStreamSynchronize(c->stream);
  }
  for (void *p : c->allocs) cudaFree(p);
  if (c->stream) cudaStreamDestroy(c->stream);
  if (c->side) cudaStreamDestroy(c->side);
  delete c;
}

rlm_ctx *rlm_create(const rlm_model *m, const rlm_opts *o, char *err, size_t errlen) {
  if (!m || !o || m->abi != RLM_CUDA_ABI) {
    seterr(err, errlen, "ABI mismatch: library %d, caller %u", RLM_CUDA_ABI, m ? m->abi : 0);
    return nullptr;
  }
  if (m->head_dim > 128 || m->head_dim % 2 || m->dim % 8 || m->ffn % 8 || (m->n_head * m->head_dim) % 8 ||
      m->n_kv_head == 0 || m->n_head % m->n_kv_head) {
    seterr(err, errlen, "unsupported shape: dim %u, ffn %u, heads %u/%u, head_dim %u (need head_dim ≤ 128, widths multiple of 8)",
           m->dim, m->ffn, m->n_head, m->n_kv_head, m->head_dim);
    return nullptr;
  }
  if (o->kv_type != RLM_TYPE_F16) {
    seterr(err, errlen, "KV type %u: the CUDA device keeps a float16 KV cache", o->kv_type);
    return nullptr;
  }
  auto okType = [](uint32_t t) {
    return t == RLM_TYPE_F32 || t == RLM_TYPE_F16 || t == RLM_TYPE_BF16 || t == RLM_TYPE_Q8_0;
  };
  rlm_ctx *c = new rlm_ctx();
  c->device = o->device;
  // From here failures must free c.
  auto bail = [&]() { rlm_destroy(c); return (rlm_ctx *)nullptr; };
#define CK(call) CKR(call, bail())
  CK(cudaSetDevice(o->device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, o->device));
  snprintf(c->info.name, sizeof c->info.name, "%.127s", prop.name);
  c->info.sm_count = prop.multiProcessorCount;
  if (!prop.cooperativeLaunch) {
    seterr(err, errlen, "%s cannot launch cooperative kernels", prop.name);
    return bail();
  }
  CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c->side, cudaStreamNonBlocking));
  size_t free_b = 0, total_b = 0;
  CK(cudaMemGetInfo(&free_b, &total_b));
  c->info.total_bytes = total_b;

  // Weights: sizes first, to fail early with what is needed.
  const uint32_t qd = m->n_head * m->head_dim, kvd = m->n_kv_head * m->head_dim;
  uint64_t wbytes = 0;
  auto matBytes = [&](const rlm_matrix &x) { return (uint64_t)type_bytes(x.type, (uint64_t)x.rows * x.cols); };
  wbytes += matBytes(m->embed);
  if (m->output.data && m->output.data != m->embed.data) wbytes += matBytes(m->output);
  for (uint32_t l = 0; l < m->n_layer; l++) {
    const rlm_layer &L = m->layers[l];
    wbytes += matBytes(L.q) + matBytes(L.k) + matBytes(L.v) + matBytes(L.out) + matBytes(L.gate) + matBytes(L.up) + matBytes(L.down);
    wbytes += 4ull * (2 * m->dim + qd + 2 * kvd);
  }
  if (wbytes + (256ull << 20) > free_b) {
    seterr(err, errlen, "the model needs %.2f GiB of GPU memory (plus work buffers); %s has %.2f GiB free of %.2f",
           wbytes / 1073741824.0, prop.name, free_b / 1073741824.0, total_b / 1073741824.0);
    return bail();
  }
  cudaError_t ae;
  // Allocations inside the lambdas below report through ok.
#define DALLOC_OR(ptr, type, count, onfail)                                                    \
  do {                                                                                         \
    ptr = (type *)dalloc(c, sizeof(type) * (size_t)(count), &ae);                              \
    if (ae != cudaSuccess) {                                                                   \
      seterr(err, errlen, "cudaMalloc(%s, %.1f MiB): %s", #ptr, sizeof(type) * (double)(count) / 1048576.0, cudaGetErrorString(ae)); \
      onfail;                                                                                  \
    }                                                                                          \
  } while (0)
#define DALLOC(ptr, type, count) DALLOC_OR(ptr, type, count, return bail())
  auto upload = [&](const void *src, size_t bytes, void *dst) -> bool {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  };
  // A device matrix from up to three host matrices stacked by rows.
  auto stack = [&](DMat *out, const rlm_matrix *parts, int np, const char *what) -> bool {
    uint32_t rows = 0, cols = parts[0].cols, type = parts[0].type;
    for (int i = 0; i < np; i++) {
      if (!parts[i].data) continue;
      if (!okType(parts[i].type) || parts[i].type != type || parts[i].cols != cols) {
        seterr(err, errlen, "%s: type %u / %u columns not supported by the CUDA device (F32, F16, BF16, Q8_0; one type per stack)",
               what, parts[i].type, parts[i].cols);
        return false;
      }
      rows += parts[i].rows;
    }
    if (type == RLM_TYPE_Q8_0) {
      // GGUF blocks of {f16 scale, 32 int8} become an int8 matrix and a
      // float scale matrix, so the kernel loads aligned 8-byte runs.
      if (cols % 32) {
        seterr(err, errlen, "%s: Q8_0 rows of %u columns", what, cols);
        return false;
      }
      const size_t nb = cols / 32;
      int8_t *dq;
      float *ds;
      DALLOC_OR(dq, int8_t, (size_t)rows * cols, return false);
      DALLOC_OR(ds, float, (size_t)rows * nb, return false);
      size_t row = 0;
      for (int i = 0; i < np; i++) {
        if (!parts[i].data) continue;
        const uint8_t *src = reinterpret_cast<const uint8_t *>(parts[i].data);
        const size_t n = parts[i].rows;
        std::vector<int8_t> q(n * cols);
        std::vector<float> sc(n * nb);
        for (size_t blk = 0; blk < n * nb; blk++) {
          const uint8_t *p = src + blk * 34;
          __half_raw hr;
          hr.x = (unsigned short)(p[0] | (p[1] << 8));
          sc[blk] = __half2float(__half(hr));
          memcpy(&q[blk * 32], p + 2, 32);
        }
        if (!upload(q.data(), n * cols, dq + row * cols) || !upload(sc.data(), n * nb * 4, ds + row * nb)) {
          seterr(err, errlen, "%s: upload failed", what);
          return false;
        }
        row += n;
      }
      *out = DMat{dq, (int)type, (int)rows, (int)cols, ds};
      return true;
    }
    char *dst;
    DALLOC_OR(dst, char, type_bytes(type, (uint64_t)rows * cols), return false);
    size_t off = 0;
    for (int i = 0; i < np; i++) {
      if (!parts[i].data) continue;
      const size_t b = type_bytes(type, (uint64_t)parts[i].rows * cols);
      if (!upload(parts[i].data, b, dst + off)) {
        seterr(err, errlen, "%s: upload failed", what);
        return false;
      }
      off += b;
    }
    *out = DMat{dst, (int)type, (int)rows, (int)cols, nullptr};
    return true;
  };
  auto vec = [&](const float *src, size_t n, float **out) -> bool {
    float *p;
    DALLOC_OR(p, float, n, return false);
    if (src && !upload(src, n * 4, p)) return false;
    *out = p;
    return true;
  };
  Dev &d = c->h;
  d.n_layer = m->n_layer;
  d.dim = m->dim;
  d.n_head = m->n_head;
  d.n_kv = m->n_kv_head;
  d.hd = m->head_dim;
  d.ffn = m->ffn;
  d.vocab = m->vocab;
  d.rope_dim = m->rope_dim;
  d.neox = m->rope_neox;
  d.rope_scale = m->rope_scale;
  d.eps = m->norm_eps;
  {
    std::vector<float> inv(m->rope_dim / 2);
    for (uint32_t i = 0; i < inv.size(); i++) {
      inv[i] = (float)(1.0 / pow((double)m->rope_base, (double)((float)(2 * i) / (float)m->rope_dim)));
      if (m->rope_factor) inv[i] /= m->rope_factor[i];
    }
    float *p;
    if (!vec(inv.data(), inv.size(), &p)) return bail();
    d.inv_freq = p;
  }
  if (!stack(&d.embed, &m->embed, 1, "token_embd")) return bail();
  if (m->output.data && m->output.data != m->embed.data) {
    if (!stack(&d.output, &m->output, 1, "output")) return bail();
  } else {
    d.output = d.embed;
  }
  {
    float *p;
    if (!vec(m->out_norm, m->dim, &p)) return bail();
    d.out_norm = p;
  }
  c->layers.resize(m->n_layer);
  for (uint32_t l = 0; l < m->n_layer; l++) {
    const rlm_layer &S = m->layers[l];
    DLayer &L = c->layers[l];
    float *p;
    if (!vec(S.attn_norm, m->dim, &p)) return bail();
    L.attn_norm = p;
    if (!vec(S.ffn_norm, m->dim, &p)) return bail();
    L.ffn_norm = p;
    const rlm_matrix qkv[3] = {S.q, S.k, S.v};
    if (!stack(&L.qkv, qkv, 3, "attn_qkv")) return bail();
    if ((uint32_t)L.qkv.rows != qd + 2 * kvd) {
      seterr(err, errlen, "layer %u: QKV has %d rows, want %u", l, L.qkv.rows, qd + 2 * kvd);
      return bail();
    }
    L.qkv_bias = nullptr;
    if (S.q_bias || S.k_bias || S.v_bias) {
      std::vector<float> b(qd + 2 * kvd, 0.f);
      if (S.q_bias) memcpy(b.data(), S.q_bias, qd * 4);
      if (S.k_bias) memcpy(b.data() + qd, S.k_bias, kvd * 4);
      if (S.v_bias) memcpy(b.data() + qd + kvd, S.v_bias, kvd * 4);
      if (!vec(b.data(), b.size(), &p)) return bail();
      L.qkv_bias = p;
    }
    if (!stack(&L.o, &S.out, 1, "attn_output")) return bail();
    const rlm_matrix gu[2] = {S.gate, S.up};
    if (!stack(&L.gu, gu, 2, "ffn_gate/up")) return bail();
    if ((uint32_t)L.gu.rows != 2 * m->ffn) {
      seterr(err, errlen, "layer %u: gate+up has %d rows, want %u", l, L.gu.rows, 2 * m->ffn);
      return bail();
    }
    if (!stack(&L.down, &S.down, 1, "ffn_down")) return bail();
  }
  {
    DLayer *p;
    DALLOC(p, DLayer, m->n_layer);
    CK(cudaMemcpy(p, c->layers.data(), sizeof(DLayer) * m->n_layer, cudaMemcpyHostToDevice));
    d.layers = p;
  }
  c->info.weight_bytes = wbytes;

  // Grid size: one block per SM (the kernel is written for 512 threads).
  c->shmem = sizeof(float) * (kWarps * kAttnWarpFloats + kAttnFoldFloats);
  CK(cudaFuncSetAttribute(persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)c->shmem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent, kThreads, c->shmem));
  if (per_sm < 1) {
    seterr(err, errlen, "the persistent kernel does not fit on an SM of %s", prop.name);
    return bail();
  }
  int grid = prop.multiProcessorCount * per_sm;
  if (o->grid_blocks > 0 && (int)o->grid_blocks < grid) grid = o->grid_blocks;
  c->info.grid_blocks = grid;
  c->info.threads = kThreads;

  // Work buffers.
  d.trap_step = o->trap_step;
  d.slots = o->slots;
  d.bs = o->block_size ? o->block_size : 16;
  d.max_bpb = o->max_blocks_per_slot;
  d.ctx = d.max_bpb * d.bs;
  d.max_tok = o->max_step_tokens;
  if (d.slots <= 0 || d.max_bpb <= 0 || d.max_tok <= 0) {
    seterr(err, errlen, "slots %u, max_blocks_per_slot %u and max_step_tokens %u must be positive", o->slots,
           o->max_blocks_per_slot, o->max_step_tokens);
    return bail();
  }
  size_t before = 0;
  CK(cudaMemGetInfo(&before, &total_b));
  const int T = d.max_tok, V = d.vocab;
  DALLOC(d.slot, Slot, d.slots);
  DALLOC(d.btab, int, (size_t)d.slots * d.max_bpb);
  DALLOC(d.hist, int, (size_t)d.slots * d.ctx);
  DALLOC(d.stop_ids, int, (size_t)d.slots * kMaxStop);
  DALLOC(d.bias_tok, int, (size_t)d.slots * kMaxBias);
  DALLOC(d.bias_val, float, (size_t)d.slots * kMaxBias);
  DALLOC(d.x, float, (size_t)T * d.dim);
  DALLOC(d.inv, float, max(T, d.slots));
  DALLOC(d.rope_cs, float2, (size_t)T * 64);
  DALLOC(d.q, float, (size_t)T * qd);
  DALLOC(d.att, float, (size_t)T * qd);
  DALLOC(d.h, float, (size_t)T * d.ffn);
  DALLOC(d.t_slot, int, T);
  DALLOC(d.t_pos, int, T);
  DALLOC(d.t_id, int, T);
  DALLOC(d.r_tok, int, d.slots);
  DALLOC(d.r_slot, int, d.slots);
  DALLOC(d.r_fast, int, d.slots);
  DALLOC(d.r_best, unsigned long long, d.slots);
  DALLOC(d.r_comp, unsigned long long, d.slots);
  DALLOC(d.logits, float, (size_t)d.slots * V);
  DALLOC(d.w_scr, double, (size_t)grid * V);
  DALLOC(d.bits_scr, unsigned, (size_t)grid * (V / 32 + 1));
  DALLOC(d.cnt_scr, int, (size_t)grid * V);
  d.stage_cap = max(4 * d.slots * 4, (int)RLM_SLOT_PARAMS_WORDS + kMaxStop + 2 * kMaxBias + d.ctx);
  d.stage_cap = max(d.stage_cap, 4 * 4096);
  DALLOC(d.stage, unsigned, d.stage_cap);
  size_t after = 0;
  CK(cudaMemGetInfo(&after, &total_b));
  c->info.work_bytes = before > after ? before - after : 0;

  // KV pool.
  const uint64_t per_block = 2ull * d.n_layer * d.n_kv * d.bs * d.hd * sizeof(__half);
  uint64_t nb = o->num_blocks;
  if (nb == 0) {
    uint64_t budget = after > (512ull << 20) ? (after - (512ull << 20)) * 9 / 10 : 0;
    if (o->kv_max_bytes && budget > o->kv_max_bytes) budget = o->kv_max_bytes;
    nb = budget / per_block;
  }
  if (nb == 0 || nb * per_block + (64ull << 20) > after) {
    seterr(err, errlen, "the KV pool needs %.2f GiB for %llu blocks of %u positions (%.2f MiB each); %.2f GiB free after the weights",
           (double)(max(nb, (uint64_t)1) * per_block) / 1073741824.0, (unsigned long long)max(nb, (uint64_t)1), d.bs,
           per_block / 1048576.0, after / 1073741824.0);
    return bail();
  }
  d.num_blocks = (int)nb;
  DALLOC(d.kcache, __half, nb * per_block / 4);
  DALLOC(d.vcache, __half, nb * per_block / 4);
  c->info.num_blocks = (uint32_t)nb;
  c->info.kv_bytes = nb * per_block;
  CK(cudaMemGetInfo(&after, &total_b));
  c->info.free_bytes = after;
  return c;
#undef CK
}

int rlm_get_info(rlm_ctx *c, rlm_info *out) {
  if (!c || !out) return -1;
  *out = c->info;
  return 0;
}

int rlm_start(rlm_ctx *c, void *arena, uint64_t arena_bytes, char *err, size_t errlen) {
  if (c->started) {
    seterr(err, errlen, "the kernel is already running");
    return -1;
  }
  const int chk = rlm_header_check((const rlm_header *)arena, arena_bytes);
  if (chk != 0) {
    seterr(err, errlen, "arena header refused (check %d)", chk);
    return -1;
  }
  CKR(cudaSetDevice(c->device), -1);
  void *dev_arena = nullptr;
  CKR(cudaHostGetDevicePointer(&dev_arena, arena, 0), -1);
  Dev &d = c->h;
  d.arena = (char *)dev_arena;
  d.n_tok = d.n_rows = d.stop = d.executed = 0;
  d.sub_cons = d.cprod = d.ccons = 0;
  d.steps_seen = 0;
  {
    const char *pe = getenv("RINGLM_CUDA_PROFILE");
    d.profile = pe && *pe && strcmp(pe, "0") != 0;
    memset(d.prof, 0, sizeof d.prof);
    d.prof_last = 0;
  }
  if (!c->dptr) {
    cudaError_t ae;
    c->dptr = (Dev *)dalloc(c, sizeof(Dev), &ae);
    if (ae != cudaSuccess) {
      seterr(err, errlen, "cudaMalloc: %s", cudaGetErrorString(ae));
      return -1;
    }
  }
  CKR(cudaMemcpy(c->dptr, &d, sizeof(Dev), cudaMemcpyHostToDevice), -1);
  void *args[] = {&c->dptr};
  CKR(cudaLaunchCooperativeKernel((void *)persistent, dim3(c->info.grid_blocks), dim3(kThreads), args, c->shmem, c->stream), -1);
  c->info.launches++;
  c->started = true;
  c->waited = false;
  return 0;
}

int rlm_wait(rlm_ctx *c, char *err, size_t errlen) {
  if (!c->started) {
    seterr(err, errlen, "the kernel was not started");
    return -1;
  }
  if (c->waited) {
    if (c->wait_rc) seterr(err, errlen, "%s", c->wait_err);
    return c->wait_rc;
  }
  cudaSetDevice(c->device);
  cudaError_t e = cudaStreamSynchronize(c->stream);
  c->waited = true;
  if (e != cudaSuccess) {
    snprintf(c->wait_err, sizeof c->wait_err, "the persistent kernel failed: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    c->wait_rc = -1;
    seterr(err, errlen, "%s", c->wait_err);
    return -1;
  }
  c->started = false;  // may be started again on a fresh arena
  return 0;
}

int rlm_query(rlm_ctx *c, char *err, size_t errlen) {
  if (!c->started) return c->wait_rc ? -1 : 0;
  cudaSetDevice(c->device);
  cudaError_t e = cudaStreamQuery(c->stream);
  if (e == cudaErrorNotReady) return 1;
  if (e == cudaSuccess) return 0;
  seterr(err, errlen, "the persistent kernel failed: %s", cudaGetErrorString(e));
  return -1;
}

int rlm_read_logits(rlm_ctx *c, uint32_t row, float *out, uint32_t n, char *err, size_t errlen) {
  if (row >= (uint32_t)c->h.slots || n > (uint32_t)c->h.vocab) {
    seterr(err, errlen, "row %u / count %u out of range", row, n);
    return -1;
  }
  CKR(cudaSetDevice(c->device), -1);
  CKR(cudaMemcpyAsync(out, c->h.logits + (size_t)row * c->h.vocab, (size_t)n * 4, cudaMemcpyDeviceToHost, c->side), -1);
  CKR(cudaStreamSynchronize(c->side), -1);
  return 0;
}

int rlm_copy_bandwidth(rlm_ctx *c, uint64_t bytes, double *gbps, char *err, size_t errlen) {
  CKR(cudaSetDevice(c->device), -1);
  void *a = nullptr, *b = nullptr;
  CKR(cudaMalloc(&a, bytes), -1);
  if (cudaMalloc(&b, bytes) != cudaSuccess) {
    cudaFree(a);
    seterr(err, errlen, "cudaMalloc(%llu) for the copy benchmark failed", (unsigned long long)bytes);
    return -1;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->side);  // warm-up
  const int reps = 10;
  cudaEventRecord(e0, c->side);
  for (int i = 0; i < reps; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, c->side);
  cudaEventRecord(e1, c->side);
  cudaError_t e = cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  if (e != cudaSuccess) {
    seterr(err, errlen, "copy benchmark: %s", cudaGetErrorString(e));
    return -1;
  }
  *gbps = 2.0 * (double)bytes * reps / (ms * 1e-3) / 1e9;
  return 0;
}

}  // extern "C"

#pragma once
// matmul.cuh: the matrix phases on the tensor cores (gemm, mma.cuh), each
// a product over all of the step's rows and an epilogue: QKV (bias, RoPE,
// K and V into the paged float16 cache), the output and down projections
// added to the residual stream, gate/up with SiLU, and the LM head (logits
// and the greedy order keys). The CUDA-core phases of gemv.cuh and
// attention.cuh do the same work one weight row pair per warp; they remain
// for RINGLM_CUDA_GEMV=1 and for shapes the products do not take.
#include "mma.cuh"

namespace {

struct MPhase {
  void *smem;
  size_t cap;
  GemmScratch s;
};

// QKV: rows permuted into RoPE pairs (qkv_pair), so a thread holds both
// halves of a pair for its token.
__device__ void mphase_qkv(Dev &d, const DLayer &L, int layer, const In &in, const MPhase &mp) {
  // Dev's fields as values the epilogue captures (read through Dev, each
  // would be loaded again after every store the compiler cannot prove
  // apart from it).
  const int n_head = d.n_head, n_kv = d.n_kv, hd = d.hd, rope_dim = d.rope_dim, neox = d.neox;
  const int qd = n_head * hd, kvd = n_kv * hd, npairs = (qd + 2 * kvd) / 2;
  const float *const bias = L.qkv_bias;
  const float2 *const rope_cs = d.rope_cs;
  const size_t *const t_kv = d.t_kv;
  float *const q = d.q;
  // ((((layer · blocks + blk) · n_kv + kv head) · bs + pos % bs) · hd, with
  // the token's part (blk, pos) from the embedding phase: one load here
  // instead of three dependent ones (t_pos, t_slot, then btab).
  const size_t lay = (size_t)layer * d.num_blocks * n_kv * d.bs * hd, hstride = (size_t)d.bs * hd;
  __half *const kc = d.kcache + lay, *const vc = d.vcache + lay;
  gemm(L.qkv, in, d.n_tok, mp.smem, mp.cap, mp.s, [=](int t, int n, float v0, float v1) {
    const int p = (n / 16) * 8 + n % 16;
    if (p >= npairs) return;
    const QKVPair pr = qkv_pair(p, n_head, n_kv, hd, rope_dim, neox);
    if (bias) {
      v0 += bias[pr.r0];
      v1 += bias[pr.r1];
    }
    if (pr.rope >= 0) {
      const float2 cs = rope_cs[t * 64 + pr.rope];
      const float x0 = v0, x1 = v1;
      v0 = x0 * cs.x - x1 * cs.y;
      v1 = x0 * cs.y + x1 * cs.x;
    }
    if (pr.r0 < qd) {
      q[(size_t)t * qd + pr.r0] = v0;
      q[(size_t)t * qd + pr.r1] = v1;
      return;
    }
    const bool isv = pr.r0 >= qd + kvd;
    const int rr0 = pr.r0 - qd - (isv ? kvd : 0), rr1 = pr.r1 - qd - (isv ? kvd : 0);
    __half *cache = (isv ? vc : kc) + (size_t)(rr0 / hd) * hstride + t_kv[t];
    cache[rr0 % hd] = __float2half_rn(v0);
    cache[rr1 % hd] = __float2half_rn(v1);
  });
}

// x[t][n] += W[n] · in[t] (the output and down projections). Each element
// has one writer in the phase, so the addition is a reduction sent to
// memory (red.global.add.f32: one rounding to nearest, as x + y) and the
// thread does not wait a round trip for x before its next output (a
// 2048-token prefill 36.2 → 34.8 ms with t_kv below,
// bench/logs/issue15-round32-epilogue.log). Float atomics on global memory
// flush subnormal values (below 1.2e-38) to zero where the CPU keeps them:
// far below the closeness the GPU is held to, and the same in every batch.
__device__ void mphase_residual(Dev &d, const DMat &W, const In &in, const MPhase &mp) {
  float *const xr = d.x;
  const int dim = d.dim, rows = W.rows;
  gemm(W, in, d.n_tok, mp.smem, mp.cap, mp.s, [=](int t, int n, float v0, float v1) {
    float *x = xr + (size_t)t * dim;
    if (n < rows) atomicAdd(x + n, v0);
    if (n + 8 < rows) atomicAdd(x + n + 8, v1);
  });
}

// h[t][r] = silu(gate_r · in[t]) * (up_r · in[t]) (above kSmallM rows into
// d.hb as BF16, rounded once as the down projection's staging would): gate
// and up rows interleaved by eights at upload, so a thread holds both.
__device__ void mphase_ffn_up(Dev &d, const DLayer &L, const In &in, const MPhase &mp) {
  const bool b16 = d.n_tok > kSmallM;
  const int ffn = d.ffn;
  __nv_bfloat16 *const hb = d.hb;
  float *const h = d.h;
  gemm<true>(L.gu, in, d.n_tok, mp.smem, mp.cap, mp.s, [=](int t, int n, float g, float u) {
    const int r = (n / 16) * 8 + n % 16;
    if (r >= ffn) return;
    const float s = g / (1.f + (float)exp((double)-g));
    if (b16) hb[(size_t)t * ffn + r] = __float2bfloat16_rn(s * u);  // as the down projection stages it
    else h[(size_t)t * ffn + r] = s * u;
  });
}

// logits[row] = output · norm(x[r_tok[row]]), with each row's largest order
// key and whether it has a finite logit, as phase_head (gemv.cuh) keeps them.
__device__ void mphase_head(Dev &d, const In &in, const MPhase &mp, unsigned long long *sbest, int *sfin) {
  const int R = d.n_rows;
  const bool best = R <= kBestRows;
  if (best) {
    for (int i = threadIdx.x; i < R; i += kThreads) sbest[i] = 0, sfin[i] = 0;
    __syncthreads();
  }
  const int vocab = d.vocab;
  float *const logits = d.logits;
  int *const r_finite = d.r_finite;
  auto one = [=](int t, int n, float v) {
    if (n >= vocab) return;
    logits[(size_t)t * vocab + n] = v;
    const bool fin = isfinite(v);
    if (best) {
      atomicMax(&sbest[t], keyof(clean(v), n));  // the raw value: clean() makes +Inf the largest float
      if (fin) sfin[t] = 1;
    } else if (fin && !r_finite[t]) {
      r_finite[t] = 1;  // every writer writes 1
    }
  };
  gemm(d.output, in, R, mp.smem, mp.cap, mp.s, [=](int t, int n, float v0, float v1) {
    one(t, n, v0);
    one(t, n + 8, v1);
  });
  if (best) {
    __syncthreads();
    for (int i = threadIdx.x; i < R; i += kThreads) {
      atomicMax(&d.r_best[i], sbest[i]);
      if (sfin[i]) d.r_finite[i] = 1;
    }
  }
}

}  // namespace

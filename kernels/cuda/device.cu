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
//
// One translation unit (make cuda compiles kernels/cuda/*.cu), in files by
// concern; this file includes them in order and holds the kernel's loop:
//
//   state.cuh      constants, DMat / DLayer / Slot / Dev, the phase timer
//   numerics.cuh   weight loads, warp and block reductions
//   norm_rope.cuh  embedding and RoPE angles, RMSNorm factors
//   gemv.cuh       matrix products: dot2, stage; residual, FFN, LM-head phases
//   attention.cuh  QKV (RoPE, paged KV cache), attention on the CUDA cores
//   attn_tc.cuh    attention on the tensor cores: chunk partials folded in order
//   sample.cuh     the sampler (Go twin: package sample), the sampling phase
//   exec.cuh       the leader, the ring protocol (Go twin: kernels/exec.go)
//   host.cuh       the C API of ringlm_cuda.h (rlm_create, rlm_start, …)
//   sample_check.cuh  rlm_test_sample: the sampler and OPEN_SLOT on given rows, for tests
//   mma.cuh        the tensor-core product: units of 256 weight rows × a chunk of
//                  columns over the grid, batch invariant by construction
//   matmul.cuh     the matrix phases on it (QKV, residual, FFN up, LM head)
//   gemm_check.cuh rlm_test_gemm: the product over a matrix, for tests and timing
#include "state.cuh"
#include "numerics.cuh"
#include "norm_rope.cuh"
#include "gemv.cuh"
#include "attention.cuh"
#include "attn_tc.cuh"
#include "sample.cuh"
#include "exec.cuh"
#include "matmul.cuh"

namespace {

// The kernel: per step, the leader fetches it, then every block runs its
// phases, a grid barrier after each; prof_mark(d, n) ends phase n's time.
__global__ void __launch_bounds__(kThreads, 1) persistent(Dev *dp) {
  cg::grid_group grid = cg::this_grid();
  Dev &d = *dp;
  __shared__ double shd[kWarps];
  __shared__ SampleShared ssh;
  __shared__ unsigned top_tok[RLM_MAX_TOP];
  __shared__ float top_lp[RLM_MAX_TOP];
  extern __shared__ __align__(16) float shq[];  // kWarps × kAttnWarpFloats, then the products' weight ring
  __shared__ float sinv[kFuseNorm];
  __shared__ float spart[kWarps * kTokChunk];
  const size_t smem_cap = sizeof(float) * kSmemFloats;
  __shared__ unsigned long long sbest[kBestRows];
  __shared__ int sfin[kBestRows];
  for (;;) {
    if (blockIdx.x == 0) leader_fetch(d);
    gsync();
    if (*(volatile int *)&d.stop) {
      if (d.profile && blockIdx.x == 0 && threadIdx.x == 0) {
        const double n = d.prof[11] ? (double)d.prof[11] : 1.0;
        printf("ringlm cuda profile: %llu steps; µs/step: embed %.1f qkv %.1f attn %.1f o %.1f ffn-up %.1f down %.1f head %.1f sample %.1f\n",
               d.prof[11], d.prof[1] / n / 1e3, d.prof[2] / n / 1e3, d.prof[3] / n / 1e3, d.prof[4] / n / 1e3,
               d.prof[5] / n / 1e3, d.prof[6] / n / 1e3, d.prof[7] / n / 1e3, d.prof[8] / n / 1e3);
        for (int k = 0; k < 2; k++)
          printf("ringlm cuda profile: products of %s rows, block 0, µs/step: staging %.1f weight loop %.1f sums+epilogue %.1f spread barrier %.1f spread sums %.1f\n",
                 k ? "many" : "few", d.gprof[k][0] / n / 1e3, d.gprof[k][1] / n / 1e3, d.gprof[k][2] / n / 1e3, d.gprof[k][3] / n / 1e3,
                 d.gprof[k][4] / n / 1e3);
        if (kProfBlocks && d.profile > 1) {
          static const char *const name[9] = {"", "embed", "qkv", "attn", "o", "ffn-up", "down", "head", "sample"};
          for (int p = 1; p <= 8; p++)
            printf("ringlm cuda profile: %s, µs/step: the blocks' work mean %.1f, slowest %.1f; barrier after the last %.1f\n",
                   name[p], d.pbusy[p] / n / gridDim.x / 1e3, d.pslow[p] / n / 1e3, d.psync[p] / n / 1e3);
          const double u = d.aprof[4] ? (double)d.aprof[4] : 1.0;
          printf("ringlm cuda profile: attention, %.1f units a step; µs a unit: setup %.2f chunks %.2f fold %.2f write %.2f\n",
                 d.aprof[4] / n, d.aprof[0] / u / 1e3, d.aprof[1] / u / 1e3, d.aprof[2] / u / 1e3, d.aprof[3] / u / 1e3);
        }
      }
      break;
    }
    const int T = *(volatile int *)&d.n_tok, R = *(volatile int *)&d.n_rows;
    if (T > 0) {
      prof_mark(d, 0);
      prof_block_start(d);
      const size_t rcap = smem_cap + kRingBytes;  // the products' shared memory: the ring after the rest
      // Each product's first weights are requested before the barrier (and
      // the phase) before it: gemm_prime.
      if (kTcOnly || d.mma) gemm_prime(d.layers[0].qkv, T, shq, rcap);
      phase_embed(d, T);
      prof_sync(d, grid, 1);
      const MPhase mp{shq, rcap, GemmScratch{d.gpart, d.gcnt, d.profile ? &d.gprof[0][0] : nullptr}};
      // With the tensor-core products of more than kSmallM (= kFuseNorm)
      // rows, the norm phase (of its own then) also writes the normalised
      // rows in BF16, and attention and gate/up write their outputs in BF16
      // (d.ab, d.hb): each product's blocks copy their inputs as they stage
      // them.
      __nv_bfloat16 *const xb = kTcOnly || d.mma ? d.xb : nullptr;
      for (int l = 0; l < d.n_layer; l++) {
        const DLayer &L = d.layers[l];
        const float *inv = norm_factors(d, d.x, T, nullptr, sinv, shd, L.attn_norm, xb);
        const In xn = T > kFuseNorm && xb ? in_bf16(xb, d.dim) : in_f32(d.x, d.dim, L.attn_norm, inv);
        if (kTcOnly || d.mma) {
          mphase_qkv(d, L, l, xn, mp);
          gemm_prime(L.o, T, shq, rcap);
        } else phase_qkv(d, L, l, stage(xn, T, d.dim, shq, smem_cap));
        prof_sync(d, grid, 2);
        if (kTcOnly || d.attn_tc) phase_attn_tc(d, l, shq);
        else phase_attn(d, l, shq);
        prof_sync(d, grid, 3);
        const In att = T > kSmallM && (kTcOnly || d.mma) ? in_bf16(d.ab, d.n_head * d.hd) : in_f32(d.att, d.n_head * d.hd);
        if (kTcOnly || d.mma) {
          mphase_residual(d, L.o, att, mp);
          gemm_prime<true>(L.gu, T, shq, rcap);
        } else phase_residual(d, L.o, stage(att, T, d.n_head * d.hd, shq, smem_cap), spart);
        prof_sync(d, grid, 4);
        inv = norm_factors(d, d.x, T, nullptr, sinv, shd, L.ffn_norm, xb);
        const In fn = T > kFuseNorm && xb ? in_bf16(xb, d.dim) : in_f32(d.x, d.dim, L.ffn_norm, inv);
        if (kTcOnly || d.mma) {
          mphase_ffn_up(d, L, fn, mp);
          gemm_prime(L.down, T, shq, rcap);
        } else phase_ffn_up(d, L, stage(fn, T, d.dim, shq, smem_cap));
        prof_sync(d, grid, 5);
        const In h = T > kSmallM && (kTcOnly || d.mma) ? in_bf16(d.hb, d.ffn) : in_f32(d.h, d.ffn);
        if (kTcOnly || d.mma) {
          mphase_residual(d, L.down, h, mp);
          if (l + 1 < d.n_layer) gemm_prime(d.layers[l + 1].qkv, T, shq, rcap);
          else if (R > 0) gemm_prime(d.output, R, shq, rcap);
        } else phase_residual(d, L.down, stage(h, T, d.ffn, shq, smem_cap), spart);
        prof_sync(d, grid, 6);
      }
      if (R > 0) {
        const float *inv = norm_factors(d, d.x, R, d.r_tok, sinv, shd, d.out_norm, xb);
        const In xo = R > kFuseNorm && xb ? in_bf16(xb, d.dim) : in_f32(d.x, d.dim, d.out_norm, inv, d.r_tok);
        if (kTcOnly || d.mma) mphase_head(d, xo, mp, sbest, sfin);
        else phase_head(d, stage(xo, R, d.dim, shq, smem_cap), sbest, sfin);
        prof_sync(d, grid, 7);
        phase_sample(d, R, ssh, top_tok, top_lp);
      }
      prof_sync(d, grid, 8);
    }
    if (blockIdx.x == 0) leader_finish(d);
  }
}

}  // namespace

#include "host.cuh"
#ifdef RLM_QMOD
// device_q.cu's module: its kernel and barrier for the default module's host
// code (host.cuh), and the product test over block-quantized parts.
extern "C" const void *rlm_qmod_kernel(void) { return (const void *)persistent; }
extern "C" int rlm_qmod_gbar(void **p) { return cudaGetSymbolAddress(p, g_bar) == cudaSuccess ? 0 : -1; }
#elif defined(RLM_TCMOD)
// device_tc.cu's module: its kernel and barrier, likewise.
extern "C" const void *rlm_tcmod_kernel(void) { return (const void *)persistent; }
extern "C" int rlm_tcmod_gbar(void **p) { return cudaGetSymbolAddress(p, g_bar) == cudaSuccess ? 0 : -1; }
#else
#include "sample_check.cuh"
#endif
#ifndef RLM_TCMOD
#include "gemm_check.cuh"
#endif

// spillprobe.cu: how many bytes ptxas spills in the tensor-core attention
// (phase_attn_tc_hd, a noinline function) depending on what else the kernel
// calls. bench/gpu/spillprobe.sh builds each variant with -Xptxas -v in
// seconds (the persistent kernel's module takes minutes); issue 15,
// fifteenth session: alone 66 bytes stored for the head dimension 64,
// beside the CUDA-core attention (phase_attn, even noinline behind a branch
// never taken) 642-662, as in the persistent kernel.
#include "state.cuh"
#include "numerics.cuh"
#include "norm_rope.cuh"
#include "gemv.cuh"
#include "attention.cuh"
#include "attn_tc.cuh"
#include "sample.cuh"
namespace {
// A sibling that needs about 115 registers and no stack.
template <int N> __device__ __noinline__ void wide(float *out, const float *in, int n) {
  float acc[N];
#pragma unroll
  for (int i = 0; i < N; i++) acc[i] = in[i * 32 + threadIdx.x];
  for (int k = 0; k < n; k++) {
    const float x = in[k + 7];
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = acc[i] * x + acc[(i + 1) % N];
  }
#pragma unroll
  for (int i = 0; i < N; i++) out[i * 32 + threadIdx.x] = acc[i];
}
// A sibling with a stack frame (a dynamically indexed array).
__device__ __noinline__ void stacked(float *out, const float *in, int n) {
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = in[i * 32 + threadIdx.x];
  out[threadIdx.x] = a[n & 63];
}
__device__ __noinline__ void cores(Dev &d, int l, float *sh) { phase_attn(d, l, sh); }

__global__ void __launch_bounds__(kThreads, 1) probe(Dev *dp) {
  extern __shared__ float sh[];
  Dev &d = *dp;
  for (int l = 0; l < d.n_layer; l++) {
    phase_attn_tc_hd<64>(d, l, sh);
#if PROBE == 1  // a second head dimension
    if (d.hd == 32) phase_attn_tc_hd<32>(d, l, sh);
#elif PROBE == 2  // the CUDA-core attention inlined
    phase_attn(d, l, sh);
#elif PROBE == 3  // the CUDA-core attention noinline, behind a branch
    if (d.hd == 5) cores(d, l, sh);
#elif PROBE == 4
    wide<110>(d.att, d.q, l);
#elif PROBE == 5
    stacked(d.att, d.q, l);
#endif
  }
}
}  // namespace
void probe_launch(Dev *d) { probe<<<132, kThreads, 150000>>>(d); }

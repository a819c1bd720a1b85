#pragma once
// gemm_check.cuh: rlm_test_gemm (ringlm_cuda.h), a test-only entry point
// that runs the tensor-core tile product (mma.cuh) over a whole matrix, one
// block per SM taking tiles in turn as the persistent kernel's phases will,
// so that a Go test can check its numbers and its batch invariance and a
// benchmark can time it. Included by device.cu after host.cuh.
#include "mma.cuh"

namespace {

__global__ void to_bf16(const float *x, __nv_bfloat16 *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = __float2bfloat16_rn(x[i]);
}

template <int NB, int SPW>
__global__ void __launch_bounds__(kThreads, 1) gemm_check(const __nv_bfloat16 *W, int N, int K, const __nv_bfloat16 *X,
                                                           int M, float *Y) {
  __shared__ float red[kWarps * 16 * 8 * NB];
  const int tiles = (N + 8 * NB - 1) / (8 * NB);
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int n0 = t * 8 * NB;
    tile_product<NB, SPW>(W, N, K, n0, X, K, M, red,
                          [&](int m, int j, float v) { Y[(size_t)m * N + n0 + j] = v; });
  }
}

// The shape of the product for K: the steps a warp takes (a power of two
// at least ceil(K / 16 / kWarps)) and as many n8 tiles as keep the weight
// fragments within 64 registers.
template <int SPW>
cudaError_t launch_gemm(int grid, const __nv_bfloat16 *W, int N, int K, const __nv_bfloat16 *X, int M, float *Y) {
  constexpr int NB = SPW >= 32 ? 1 : SPW >= 16 ? 2 : 4;
  gemm_check<NB, SPW><<<grid, kThreads>>>(W, N, K, X, M, Y);
  return cudaGetLastError();
}

cudaError_t run_gemm(int grid, const __nv_bfloat16 *W, int N, int K, const __nv_bfloat16 *X, int M, float *Y) {
  const int spw = (K / 16 + kWarps - 1) / kWarps;
  if (spw <= 1) return launch_gemm<1>(grid, W, N, K, X, M, Y);
  if (spw <= 2) return launch_gemm<2>(grid, W, N, K, X, M, Y);
  if (spw <= 4) return launch_gemm<4>(grid, W, N, K, X, M, Y);
  if (spw <= 8) return launch_gemm<8>(grid, W, N, K, X, M, Y);
  if (spw <= 16) return launch_gemm<16>(grid, W, N, K, X, M, Y);
  return launch_gemm<kMmaMaxSteps>(grid, W, N, K, X, M, Y);
}

}  // namespace

extern "C" int rlm_test_gemm(uint32_t M, uint32_t N, uint32_t K, const float *X, const uint16_t *W, float *Y,
                             uint32_t iters, double *ms, char *err, size_t errlen) {
  if (M == 0 || N == 0 || K == 0 || K % 16 || K > 16 * kWarps * kMmaMaxSteps) {
    seterr(err, errlen, "rlm_test_gemm: M %u, N %u, K %u (K a multiple of 16, at most %d)", M, N, K,
           16 * kWarps * kMmaMaxSteps);
    return -1;
  }
  CKR(cudaSetDevice(0), -1);
  int sms = 0;
  CKR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), -1);
  float *dx = nullptr, *dy = nullptr;
  __nv_bfloat16 *dxb = nullptr, *dw = nullptr;
  auto bail = [&]() {
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dxb);
    cudaFree(dw);
    return -1;
  };
  CKR(cudaMalloc(&dx, sizeof(float) * (size_t)M * K), bail());
  CKR(cudaMalloc(&dxb, 2 * (size_t)M * K), bail());
  CKR(cudaMalloc(&dw, 2 * (size_t)N * K), bail());
  CKR(cudaMalloc(&dy, sizeof(float) * (size_t)M * N), bail());
  CKR(cudaMemcpy(dx, X, sizeof(float) * (size_t)M * K, cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(dw, W, 2 * (size_t)N * K, cudaMemcpyHostToDevice), bail());
  to_bf16<<<256, 256>>>(dx, dxb, (size_t)M * K);
  CKR(cudaGetLastError(), bail());
  CKR(run_gemm(sms, dw, N, K, dxb, M, dy), bail());  // warm-up, and the answer
  CKR(cudaDeviceSynchronize(), bail());
  if (iters > 0) {
    cudaEvent_t a, b;
    CKR(cudaEventCreate(&a), bail());
    CKR(cudaEventCreate(&b), bail());
    CKR(cudaEventRecord(a), bail());
    for (uint32_t i = 0; i < iters; i++) CKR(run_gemm(sms, dw, N, K, dxb, M, dy), bail());
    CKR(cudaEventRecord(b), bail());
    CKR(cudaEventSynchronize(b), bail());
    float t = 0;
    CKR(cudaEventElapsedTime(&t, a, b), bail());
    *ms = (double)t / iters;
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  CKR(cudaMemcpy(Y, dy, sizeof(float) * (size_t)M * N, cudaMemcpyDeviceToHost), bail());
  bail();
  return 0;
}

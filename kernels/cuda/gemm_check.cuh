#pragma once
// gemm_check.cuh: rlm_test_gemm and rlm_test_gemm_q (ringlm_cuda.h), test-only entry points
// that run the tensor-core product (mma.cuh) over a whole matrix, one
// block per SM taking units in turn as the persistent kernel's phases do
// (same chunks, same shared memory), so that a Go test can check its
// numbers and its batch invariance and a benchmark can time it. Included
// by device.cu after host.cuh.
#include "mma.cuh"

namespace {

// XB set: the inputs as BF16 rows already (in_bf16), as the persistent
// kernel's phases hand them over from attention, gate/up and a norm phase
// at more than kSmallM rows.
__global__ void __launch_bounds__(kThreads, 1) gemm_check(DMat W, const float *X, const __nv_bfloat16 *XB, int M,
                                                           GemmScratch s, float *Y, size_t cap) {
  extern __shared__ __align__(16) float gsm[];
  const int N = W.rows;
  gemm_prime<true>(W, M, gsm, cap);
  gemm<true>(W, XB && M > kSmallM ? in_bf16(XB, W.cols) : in_f32(X, W.cols), M, gsm, cap, s, [=](int t, int n, float v0, float v1) {
    if (n < N) Y[(size_t)t * N + n] = v0;
    if (n + 8 < N) Y[(size_t)t * N + n + 8] = v1;
  });
}

}  // namespace

// gemm_check_run runs gemm_check over dm (on the device; dm.nk not yet
// set) for rlm_test_gemm and rlm_test_gemm_q: from float inputs, then from
// the same inputs rounded to BF16 on the host (the same bits, or an error),
// then iters timed runs of the latter; Y gets the answer.
static int gemm_check_run(DMat dm, uint32_t M, const float *X, float *Y, uint32_t iters, int grid, double *ms, char *err,
                          size_t errlen) {
  const uint32_t N = (uint32_t)dm.rows, K = (uint32_t)dm.cols;
  const size_t cap = sizeof(float) * kSmemFloats + kRingBytes;  // the persistent kernel's
  dm.nk = choose_nk((int)N, (int)K, grid);
  const int nk = dm.nk;
  const size_t tiles = (N + kGemmRows - 1) / kGemmRows, passes = (M + kPass - 1) / kPass;
  float *dx = nullptr, *dy = nullptr, *dpart = nullptr;
  int *dcnt = nullptr;
  __nv_bfloat16 *dxb = nullptr;
  auto bail = [&]() {
    cudaFree(dx);
    cudaFree(dxb);
    cudaFree(dy);
    cudaFree(dpart);
    cudaFree(dcnt);
    return -1;
  };
  CKR(cudaMalloc(&dx, sizeof(float) * (size_t)M * K), bail());
  CKR(cudaMalloc(&dy, sizeof(float) * (size_t)M * N), bail());
  CKR(cudaMalloc(&dpart, sizeof(float) * (nk > 1 ? (size_t)nk * M * tiles * kGemmRows : 1)), bail());
  CKR(cudaMalloc(&dcnt, sizeof(int) * passes * tiles), bail());
  CKR(cudaMemset(dcnt, 0, sizeof(int) * passes * tiles), bail());
  CKR(cudaMemcpy(dx, X, sizeof(float) * (size_t)M * K, cudaMemcpyHostToDevice), bail());
  {  // the same inputs rounded to BF16 on the host
    std::vector<__nv_bfloat16> xb((size_t)M * K);
    for (size_t i = 0; i < xb.size(); i++) xb[i] = __float2bfloat16_rn(X[i]);
    CKR(cudaMalloc(&dxb, 2 * xb.size()), bail());
    CKR(cudaMemcpy(dxb, xb.data(), 2 * xb.size(), cudaMemcpyHostToDevice), bail());
  }
  CKR(cudaFuncSetAttribute(gemm_check, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cap), bail());
  const GemmScratch gs{dpart, dcnt};
  // Cooperative, as the persistent kernel is: a product of many rows and
  // several chunks sums them after a grid barrier.
  int m = (int)M;
  float *y = dy;
  size_t capv = cap;
  GemmScratch gsv = gs;
  const __nv_bfloat16 *xbv = nullptr;
  void *gb = nullptr;  // the grid barrier's state (gsync)
  CKR(cudaGetSymbolAddress(&gb, g_bar), bail());
  CKR(cudaMemset(gb, 0, sizeof(GridBar)), bail());
  void *args[] = {&dm, &dx, &xbv, &m, &gsv, &y, &capv};
  auto launch = [&]() { return cudaLaunchCooperativeKernel((void *)gemm_check, dim3(grid), dim3(kThreads), args, cap, 0); };
  CKR(launch(), bail());  // warm-up, and the answer from float inputs
  CKR(cudaDeviceSynchronize(), bail());
  // From BF16 inputs (copied as they are staged), the same bits; this path
  // is the one timed.
  std::vector<float> yf((size_t)M * N), yb((size_t)M * N);
  CKR(cudaMemcpy(yf.data(), dy, sizeof(float) * yf.size(), cudaMemcpyDeviceToHost), bail());
  CKR(cudaMemset(dy, 0xff, sizeof(float) * yf.size()), bail());
  xbv = dxb;
  CKR(launch(), bail());
  CKR(cudaDeviceSynchronize(), bail());
  CKR(cudaMemcpy(yb.data(), dy, sizeof(float) * yb.size(), cudaMemcpyDeviceToHost), bail());
  for (size_t i = 0; i < yf.size(); i++)
    if (memcmp(&yf[i], &yb[i], 4) != 0) {
      seterr(err, errlen, "rlm_test_gemm: output (%zu, %zu) is %g from float inputs, %g from the same inputs in BF16", i / N,
             i % N, (double)yf[i], (double)yb[i]);
      bail();
      return -1;
    }
  if (iters > 0) {
    cudaEvent_t a, b;
    CKR(cudaEventCreate(&a), bail());
    CKR(cudaEventCreate(&b), bail());
    CKR(cudaEventRecord(a), bail());
    for (uint32_t i = 0; i < iters; i++) CKR(launch(), bail());
    CKR(cudaEventRecord(b), bail());
    CKR(cudaEventSynchronize(b), bail());
    float t = 0;
    CKR(cudaEventElapsedTime(&t, a, b), bail());
    *ms = (double)t / iters;
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  memcpy(Y, yf.data(), sizeof(float) * yf.size());
  bail();
  return 0;
}

// The grid of rlm_test_gemm*: one block per SM, or grid_blocks when fewer.
static int gemm_check_grid(uint32_t grid_blocks, char *err, size_t errlen) {
  CKR(cudaSetDevice(0), -1);
  int sms = 0;
  CKR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), -1);
  return grid_blocks > 0 && (int)grid_blocks < sms ? (int)grid_blocks : sms;
}

#ifndef RLM_QMOD  // the default module
extern "C" int rlm_test_gemm(uint32_t M, uint32_t N, uint32_t K, const float *X, const uint16_t *W, float *Y,
                             uint32_t iters, uint32_t grid_blocks, double *ms, char *err, size_t errlen) {
  if (M == 0 || N == 0 || K == 0 || K % 32) {
    seterr(err, errlen, "rlm_test_gemm: M %u, N %u, K %u (K a multiple of 32)", M, N, K);
    return -1;
  }
  const int grid = gemm_check_grid(grid_blocks, err, errlen);
  if (grid < 0) return -1;
  __nv_bfloat16 *dw = nullptr;
  const size_t t16 = (N + 15) / 16;
  CKR(cudaMalloc(&dw, 2 * t16 * 16 * K), -1);
  {  // the product's packed order, as rlm_create uploads the phases' matrices
    const std::vector<uint8_t> rowmajor(reinterpret_cast<const uint8_t *>(W), reinterpret_cast<const uint8_t *>(W) + 2 * (size_t)N * K);
    const std::vector<uint8_t> packed = pack_tiles(rowmajor, N, K, 2);
    if (cudaMemcpy(dw, packed.data(), packed.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      seterr(err, errlen, "rlm_test_gemm: upload failed");
      cudaFree(dw);
      return -1;
    }
  }
  const int rc = gemm_check_run(DMat{dw, RLM_TYPE_BF16, (int)N, (int)K, nullptr, 1}, M, X, Y, iters, grid, ms, err, errlen);
  cudaFree(dw);
  return rc;
}
#endif

#ifdef RLM_QMOD  // device_q.cu's module: the block-quantized parts
extern "C" int rlm_test_gemm_q(uint32_t M, const float *X, const rlm_matrix *parts, uint32_t nparts, float *Y, uint32_t iters,
                               uint32_t grid_blocks, double *ms, char *err, size_t errlen) {
  if (M == 0 || nparts == 0) {
    seterr(err, errlen, "rlm_test_gemm_q: M %u, %u parts", M, nparts);
    return -1;
  }
  QHost q;
  if (!qany_build(parts, (int)nparts, nullptr, "rlm_test_gemm_q", q, err, errlen)) return -1;
  if (q.rows == 0 || q.cols == 0 || q.cols > 8192) {
    seterr(err, errlen, "rlm_test_gemm_q: %d × %d (K at most 8192)", q.rows, q.cols);
    return -1;
  }
  const int grid = gemm_check_grid(grid_blocks, err, errlen);
  if (grid < 0) return -1;
  uint8_t *dw = nullptr, *ds = nullptr;
  qp_tile *dt = nullptr;
  auto bail = [&]() {
    cudaFree(dw);
    cudaFree(ds);
    cudaFree(dt);
    return -1;
  };
  CKR(cudaMalloc(&dw, q.codes.size() + 16), bail());
  CKR(cudaMalloc(&ds, q.scales.size() + 16), bail());
  CKR(cudaMalloc(&dt, q.tiles.size() * sizeof(qp_tile)), bail());
  CKR(cudaMemcpy(dw, q.codes.data(), q.codes.size(), cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(ds, q.scales.data(), q.scales.size(), cudaMemcpyHostToDevice), bail());
  CKR(cudaMemcpy(dt, q.tiles.data(), q.tiles.size() * sizeof(qp_tile), cudaMemcpyHostToDevice), bail());
  const int rc = gemm_check_run(DMat{dw, RLM_TYPE_QANY, q.rows, q.cols, nullptr, 1, dt, ds}, M, X, Y, iters, grid, ms, err,
                                errlen);
  bail();
  return rc;
}
#endif  // RLM_QMOD

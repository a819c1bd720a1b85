#pragma once
// mma.cuh: the tensor-core tile product of issue 15, Y = X · Wᵀ for a tile
// of weight rows and every input row at once (mma.sync m16n8k16, BF16
// inputs, FP32 accumulation), built so that a row's result does not depend
// on how many rows share the step or where the row sits:
//
//  - K is cut into 16-column steps, and the steps into kWarps contiguous
//    chunks (chunk c: steps [c·S/16, (c+1)·S/16) of S): the split depends
//    on K alone;
//  - a block takes a tile of 8·NB weight rows and all M input rows; warp c
//    takes chunk c, loads its weight fragments once into registers (the
//    weights are read once per product, whatever M is) and runs every
//    16-row tile of inputs through them, one accumulator from zero over
//    its steps in increasing order;
//  - the chunks' partial sums are added in chunk order, from zero, by one
//    thread per output element.
//
// So each output element is the same sequence of operations for any M, any
// tile of inputs and any position inside it; and a tiling for large M that
// keeps the same chunks (a fresh accumulator per chunk, added to a running
// total in chunk order) computes the same bits. Not used by the phases yet:
// rlm_test_gemm (gemm_check.cuh) runs it for tests and measurements.
#include "numerics.cuh"

namespace {

// The largest number of 16-column steps a warp takes (K ≤ 16 × 16 × 32 =
// 8192 columns) and of n8 tiles a block takes.
constexpr int kMmaMaxSteps = 32;
constexpr int kMmaMaxNB = 4;

__device__ __forceinline__ unsigned ld_bf16x2(const __nv_bfloat16 *p) {
  return *reinterpret_cast<const unsigned *>(p);
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// tile_product runs, with all threads of the block, the weight rows
// [n0, n0 + 8·NB) of W (bf16, rows × K, row-major; rows at or past `rows`
// read as zero) against the M input rows of X (bf16, row stride ldx), and
// hands each result to out(m, j, value) for row n0 + j. SPW bounds the
// steps of a chunk: SPW ≥ ceil(K / 16 / kWarps). red is shared memory
// of kWarps × 16 × 8·NB floats.
template <int NB, int SPW, class Out>
__device__ void tile_product(const __nv_bfloat16 *W, int rows, int K, int n0, const __nv_bfloat16 *X, int ldx, int M,
                             float *red, Out out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, q = lane & 3;  // fragment row group, column pair
  const int S = K / 16;
  const int s0 = warp * S / kWarps, s1 = (warp + 1) * S / kWarps;  // the warp's chunk of steps
  // The warp's weight fragments: for step s0 + i and n8 tile j, rows
  // n0 + 8j + g, columns 2q, 2q+1 and 2q+8, 2q+9 of the step.
  unsigned b[SPW][NB][2];
#pragma unroll
  for (int i = 0; i < SPW; i++) {
    const int s = s0 + i;
#pragma unroll
    for (int j = 0; j < NB; j++) {
      const int r = n0 + 8 * j + g;
      if (s < s1 && r < rows) {
        const __nv_bfloat16 *p = W + (size_t)r * K + 16 * s + 2 * q;
        b[i][j][0] = ld_bf16x2(p);
        b[i][j][1] = ld_bf16x2(p + 8);
      } else {
        b[i][j][0] = b[i][j][1] = 0u;
      }
    }
  }
  for (int m0 = 0; m0 < M; m0 += 16) {
    float acc[NB][4];
#pragma unroll
    for (int j = 0; j < NB; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    const int ra = m0 + g, rb = m0 + g + 8;
#pragma unroll
    for (int i = 0; i < SPW; i++) {
      const int s = s0 + i;
      if (s >= s1) break;
      const int c = 16 * s + 2 * q;
      unsigned a[4];
      a[0] = ra < M ? ld_bf16x2(X + (size_t)ra * ldx + c) : 0u;
      a[1] = rb < M ? ld_bf16x2(X + (size_t)rb * ldx + c) : 0u;
      a[2] = ra < M ? ld_bf16x2(X + (size_t)ra * ldx + c + 8) : 0u;
      a[3] = rb < M ? ld_bf16x2(X + (size_t)rb * ldx + c + 8) : 0u;
#pragma unroll
      for (int j = 0; j < NB; j++) mma_bf16(acc[j], a, b[i][j][0], b[i][j][1]);
    }
    // The warps' partial sums, then their sum in warp order.
    constexpr int W8 = 8 * NB;
#pragma unroll
    for (int j = 0; j < NB; j++) {
      float *p = red + (size_t)warp * 16 * W8;
      p[g * W8 + 8 * j + 2 * q] = acc[j][0];
      p[g * W8 + 8 * j + 2 * q + 1] = acc[j][1];
      p[(g + 8) * W8 + 8 * j + 2 * q] = acc[j][2];
      p[(g + 8) * W8 + 8 * j + 2 * q + 1] = acc[j][3];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 16 * W8; e += kThreads) {
      const int m = m0 + e / W8, j = e % W8;
      if (m < M && n0 + j < rows) {
        float sum = 0.f;
        for (int w = 0; w < kWarps; w++) sum += red[(size_t)w * 16 * W8 + e];
        out(m, j, sum);
      }
    }
    __syncthreads();
  }
}

}  // namespace

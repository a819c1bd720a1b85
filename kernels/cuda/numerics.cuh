#pragma once
// numerics.cuh: an 8-wide load of a weight row in any of its types (load8;
// the block-quantized types through qpack.h's dequantization),
// warp and block reductions (float and double sums, 64-bit key max/min),
// and a warp's place in the grid.
#include "state.cuh"

namespace {

// Two floats as BF16 (round to nearest even), lo in the low half; eight
// as a 16-byte run. The one rounding of a product's inputs (mma.cuh).
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned *>(&v);
}

__device__ __forceinline__ uint4 pack8(const float *f) {
  return make_uint4(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]), pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7]));
}

// Eight values of row `row` of a block-quantized matrix (RLM_TYPE_QANY,
// packed in the product's order: qpack.h) from column col (a multiple of 8:
// one run), in float32 as ggml's reference dequantizes them. Not inlined:
// one copy of the types' code (the embedding phase is its only reader).
struct F8 {
  float4 lo, hi;
};
__device__ __noinline__ F8 qany_load8(const DMat &m, int row, int col) {
  const qp_tile T = m.qt[row / 16];
  const int h = (row / 8) & 1, g = row % 8, j = col / 32, q = (col % 32) / 8;
  uint64_t a;
  uint32_t b;
  qp_lane_planes(T.lay, h, 4 * g + q,
                 reinterpret_cast<const uint8_t *>(m.w) + (size_t)T.code16 * 16 + (size_t)j * qp_lay_block(T.lay), &a, &b);
  float f[8];
  qp_run(qp_lay_type(T.lay, h), a, b, m.qs + T.sc[h] + (size_t)g * T.stride[h], j, q, f);
  return F8{make_float4(f[0], f[1], f[2], f[3]), make_float4(f[4], f[5], f[6], f[7])};
}

__device__ __forceinline__ void load8(const DMat &m, int row, int col, float *f) {
  if (kQany && m.type == RLM_TYPE_QANY) {
    const F8 v = qany_load8(m, row, col);
    f[0] = v.lo.x, f[1] = v.lo.y, f[2] = v.lo.z, f[3] = v.lo.w;
    f[4] = v.hi.x, f[5] = v.hi.y, f[6] = v.hi.z, f[7] = v.hi.w;
  } else if (m.type == RLM_TYPE_BF16) {
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

__device__ __forceinline__ int gwarp() { return blockIdx.x * kWarps + (threadIdx.x >> 5); }
__device__ __forceinline__ int nwarps() { return gridDim.x * kWarps; }

}  // namespace

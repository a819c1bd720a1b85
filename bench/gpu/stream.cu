// stream.cu: how fast can 132 blocks x 16 warps stream packed weights from
// HBM into a warp's hands? (issue 15; bench/logs/issue15-stream-h100.log)
// Build and run on the GPU host:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o stream bench/gpu/stream.cu && ./stream
// Register loads (LDG.128, P in flight), cp.async
// (16 B per lane into a per-warp smem ring), TMA 1D bulk copies
// (cp.async.bulk, per-warp ring of S stages of SB bytes, mbarrier).
// Phases of Bm bytes (rotating through a 2 GiB buffer: no L2 reuse), a
// grid barrier between phases, as the persistent kernel does.
#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
namespace cg = cooperative_groups;
constexpr int kThreads = 512, kWarps = 16;
__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ uint4 ldw(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ void mbar_init(uint32_t a, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_tx(uint32_t a, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ bool mbar_try(uint32_t a, uint32_t par) {
  uint32_t ok;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(a), "r"(par) : "memory");
  return ok;
}
__device__ __forceinline__ void tma1d(uint32_t dst, const void *src, unsigned bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
__device__ __forceinline__ void cpa16(uint32_t dst, const void *src) { asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory"); }

struct P { const char *buf; size_t bufsz, Bm, U; int phases; unsigned *sink; };

// method 0: registers, PF uint4 per lane in flight (a lane's 16 B of each 512 B).
template <int PF> __global__ void __launch_bounds__(kThreads, 1) k_reg(P p) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gw = blockIdx.x * kWarps + warp, W = gridDim.x * kWarps;
  unsigned acc = 0;
  size_t off = 0;
  for (int ph = 0; ph < p.phases; ph++) {
    const char *base = p.buf + off;
    const size_t units = p.Bm / p.U, per = p.U / 512;
    for (size_t u = gw; u < units; u += W) {
      const char *s = base + u * p.U + lane * 16;
      uint4 r[PF];
#pragma unroll
      for (int i = 0; i < PF; i++) if (i < per) r[i] = ldw(s + (size_t)i * 512);
      for (size_t i0 = 0; i0 < per; i0 += PF) {
#pragma unroll
        for (int i = 0; i < PF; i++) {
          if (i0 + i < per) {
            acc ^= r[i].x ^ r[i].y ^ r[i].z ^ r[i].w;
            if (i0 + i + PF < per) r[i] = ldw(s + (i0 + i + PF) * 512);
          }
        }
      }
    }
    off += p.Bm; if (off + p.Bm > p.bufsz) off = 0;
    cg::this_grid().sync();
  }
  if (acc == 0x12345678) p.sink[0] = acc;
}

// method 1: cp.async, D stages of 512 B per warp (16 B a lane), a lane reads back its own.
template <int D> __global__ void __launch_bounds__(kThreads, 1) k_cpa(P p) {
  extern __shared__ __align__(128) char sm[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gw = blockIdx.x * kWarps + warp, W = gridDim.x * kWarps;
  char *ring = sm + warp * D * 512 + lane * 16;
  unsigned acc = 0;
  size_t off = 0;
  for (int ph = 0; ph < p.phases; ph++) {
    const char *base = p.buf + off;
    const size_t units = p.Bm / p.U, per = p.U / 512;
    for (size_t u = gw; u < units; u += W) {
      const char *s = base + u * p.U + lane * 16;
#pragma unroll
      for (int i = 0; i < D; i++) { if (i < per) cpa16(sa(ring + i * 512), s + (size_t)i * 512); asm volatile("cp.async.commit_group;"); }
      for (size_t i = 0; i < per; i++) {
        asm volatile("cp.async.wait_group %0;" ::"n"(D - 1) : "memory");
        const uint4 v = *reinterpret_cast<const uint4 *>(ring + (i % D) * 512);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
        if (i + D < per) cpa16(sa(ring + (i % D) * 512), s + (i + D) * 512);
        asm volatile("cp.async.commit_group;");
      }
      asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
    off += p.Bm; if (off + p.Bm > p.bufsz) off = 0;
    cg::this_grid().sync();
  }
  if (acc == 0x12345678) p.sink[0] = acc;
}

// method 2: TMA bulk copies, S stages of SB bytes per warp; lane 0 issues.
template <int S, int SB> __global__ void __launch_bounds__(kThreads, 1) k_tma(P p) {
  extern __shared__ __align__(128) char sm[];
  __shared__ __align__(8) unsigned long long bars[kWarps * S];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gw = blockIdx.x * kWarps + warp, W = gridDim.x * kWarps;
  char *ring = sm + warp * S * SB;
  if (lane == 0) for (int i = 0; i < S; i++) mbar_init(sa(&bars[warp * S + i]), 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncwarp();
  unsigned acc = 0, cnt = 0;  // cnt: stages consumed by this warp, for parity
  size_t off = 0;
  for (int ph = 0; ph < p.phases; ph++) {
    const char *base = p.buf + off;
    const size_t units = p.Bm / p.U, per = p.U / SB;
    for (size_t u = gw; u < units; u += W) {
      const char *s = base + u * p.U;
      if (lane == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int i = 0; i < S && i < per; i++) {
          const int st = (cnt + i) % S;
          mbar_tx(sa(&bars[warp * S + st]), SB);
          tma1d(sa(ring + st * SB), s + (size_t)i * SB, SB, sa(&bars[warp * S + st]));
        }
      }
      for (size_t i = 0; i < per; i++, cnt++) {
        const int st = cnt % S;
        while (!mbar_try(sa(&bars[warp * S + st]), (cnt / S) & 1)) {}
#pragma unroll
        for (int k = 0; k < SB / 512; k++) {
          const uint4 v = *reinterpret_cast<const uint4 *>(ring + st * SB + k * 512 + lane * 16);
          acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        __syncwarp();
        if (lane == 0 && i + S < per) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          mbar_tx(sa(&bars[warp * S + st]), SB);
          tma1d(sa(ring + st * SB), s + (i + S) * SB, SB, sa(&bars[warp * S + st]));
        }
      }
    }
    off += p.Bm; if (off + p.Bm > p.bufsz) off = 0;
    cg::this_grid().sync();
  }
  if (acc == 0x12345678) p.sink[0] = acc;
}

template <class K> void run(const char *name, K kern, size_t smem, P p, int sms) {
  cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  void *args[] = {&p};
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  cudaLaunchCooperativeKernel((void *)kern, sms, kThreads, args, smem, 0);
  cudaEventRecord(a);
  cudaLaunchCooperativeKernel((void *)kern, sms, kThreads, args, smem, 0);
  cudaEventRecord(b); cudaEventSynchronize(b);
  cudaError_t e = cudaGetLastError();
  float ms = 0; cudaEventElapsedTime(&ms, a, b);
  const double us = ms * 1e3 / p.phases;
  printf("%-22s Bm %7.2f MB  U %6zu B  %8.2f us/phase  %7.0f GB/s  %s\n", name, p.Bm / 1e6, p.U, us, p.Bm / us / 1e3, e ? cudaGetErrorString(e) : "");
}

int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  P p{};
  p.bufsz = (size_t)2 << 30;
  char *buf; cudaMalloc(&buf, p.bufsz); cudaMemset(buf, 1, p.bufsz);
  cudaMalloc(&p.sink, 64);
  p.buf = buf;
  {  // copy bandwidth reference
    char *dst; cudaMalloc(&dst, (size_t)1 << 30);
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    cudaMemcpy(dst, buf, (size_t)1 << 30, cudaMemcpyDeviceToDevice);
    cudaEventRecord(a);
    for (int i = 0; i < 5; i++) cudaMemcpy(dst, buf + ((size_t)i % 2) * ((size_t)1 << 30), (size_t)1 << 30, cudaMemcpyDeviceToDevice);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms; cudaEventElapsedTime(&ms, a, b);
    printf("copy bandwidth (1 GiB D2D, read+write): %.0f GB/s\n", 2.0 * 5 * (1 << 30) / (ms * 1e6));
    cudaFree(dst);
  }
  struct Shape { const char *nm; size_t Bm, U; } shapes[] = {
      {"gate-up 1B", 67108864, 32768}, {"down 1B", 33554432, 16384}, {"o 1B", 8388608, 4096},
      {"qkv 1B", 12582912, 6144}, {"head 1B", 525336576, 65536}};
  for (auto &sh : shapes) {
    p.Bm = sh.Bm; p.U = sh.U; p.phases = (int)(((size_t)4 << 30) / sh.Bm); if (p.phases > 400) p.phases = 400; if (p.phases < 8) p.phases = 8;
    printf("== %s\n", sh.nm);
    run("reg PF4", k_reg<4>, 0, p, sms);
    run("reg PF8", k_reg<8>, 0, p, sms);
    run("reg PF16", k_reg<16>, 0, p, sms);
    run("cp.async D4", k_cpa<4>, kWarps * 4 * 512, p, sms);
    run("cp.async D8", k_cpa<8>, kWarps * 8 * 512, p, sms);
    run("cp.async D16", k_cpa<16>, kWarps * 16 * 512, p, sms);
    if (sh.U % 2048 == 0) {
      run("tma S2 x 2K", k_tma<2, 2048>, kWarps * 2 * 2048, p, sms);
      run("tma S4 x 2K", k_tma<4, 2048>, kWarps * 4 * 2048, p, sms);
      run("tma S3 x 4K", k_tma<3, 4096>, kWarps * 3 * 4096, p, sms);
      run("tma S6 x 2K", k_tma<6, 2048>, kWarps * 6 * 2048, p, sms);
    }
    run("tma S4 x 1K", k_tma<4, 1024>, kWarps * 4 * 1024, p, sms);
    run("tma S8 x 1K", k_tma<8, 1024>, kWarps * 8 * 1024, p, sms);
  }
  return 0;
}

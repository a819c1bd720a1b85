// wgmma.cu: would wgmma (sm_90a) lift the persistent kernel's many-row
// products? (issue 15). The 2048-row gate/up product of Llama-3.2-1B
// (Y[2048][16384] = X[2048][2048] · W[16384][2048]ᵀ, BF16 in, FP32
// accumulation) with the persistent kernel's block shape: one block of 512
// threads per SM (4 warpgroups, 128 registers a thread), units of AR
// weight rows × BN input rows, a tile's passes on consecutive blocks,
// stages of 64 columns in S slots, S - 2 of them ahead, operands in the
// canonical K-major layout without swizzle. Three ways to feed wgmma:
//  - gemm_wg: both operands copied by every thread with cp.async, a block
//    barrier a stage;
//  - gemm_tma: operands packed on the host in the slots' layout, one
//    thread's 1D bulk copies (TMA) completing on the slot's mbarrier,
//    slots released by the warpgroups' arrivals;
//  - gemm_areg: the persistent kernel's loader (a warp's 16 weight rows
//    through its own cp.async ring, into registers: wgmma's A), the inputs
//    staged by the block (B from shared memory).
// Each checks its products against a float reference, and the bits of
// wgmma's sums (n64, n128, A from registers) against mma.sync m16n8k16's,
// k16 steps in order from zero as the kernel accumulates. The mma.sync
// product of the kernel takes 639 µs (BenchmarkTileProduct/gateup/M2048,
// bench/logs/issue15-round45-two-tiles.log); results:
// bench/logs/issue15-round50-wgmma-h100.log.
// Build and run on the GPU host:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o wgmma bench/gpu/wgmma.cu && ./wgmma
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                        \
  do {                                                                               \
    cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

constexpr int kThreads = 512, KS = 64;

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cpa16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// A shared-memory matrix descriptor, no swizzle: start address, leading
// byte offset (between core matrices along K), stride byte offset (between
// 8-row groups).
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) | ((uint64_t)(sbo >> 4) << 32);
}

template <int N> __device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], uint64_t a, uint64_t b);
template <> __device__ __forceinline__ void wgmma_bf16<64>(float (&d)[32], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(1));
}
template <> __device__ __forceinline__ void wgmma_bf16<128>(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(1));
}
template <> __device__ __forceinline__ void wgmma_bf16<256>(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1));
}
// A from registers (a warp's 16 rows, mma.sync's A fragment), B from shared memory.
__device__ __forceinline__ void wgmma_reg64(float (&d)[32], unsigned a0, unsigned a1, unsigned a2, unsigned a3, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b), "r"(1));
}

// A tile of R rows × KS columns in a slot, canonical K-major without
// swizzle: per k16 step a block of R rows × 32 bytes; in it, 8-row groups
// 256 bytes apart, each two core matrices (8 rows × 16 bytes, 128 bytes)
// 128 bytes apart.
__device__ __forceinline__ uint32_t toff(int R, int r, int k8) {
  return (uint32_t)((k8 / 2) * R * 32 + (r / 8) * 256 + (k8 % 2) * 128 + (r % 8) * 16);
}

// A warpgroup's accumulators to Y: d[4i + e] is weight row r (+ 8 for
// e ≥ 2) and input row m0 + 8i + 2 (lane % 4) + e % 2, r being the lane's
// row: 16 × its warp in the warpgroup + lane / 4 past the warpgroup's first.
template <int NW>
__device__ __forceinline__ void store(float *Y, const float (&d)[NW / 2], int r, int m0, int N, int lane) {
#pragma unroll
  for (int i = 0; i < NW / 8; i++)
#pragma unroll
    for (int e = 0; e < 4; e++) Y[(size_t)(m0 + 8 * i + 2 * (lane % 4) + (e % 2)) * N + r + (e / 2) * 8] = d[4 * i + e];
}

// check_time launches a product once, holds Y's sampled outputs (ms, ns) to
// ref, then times 20 more launches: the largest relative error, and *us.
template <class F>
static double check_time(F launch, float *Y, int M, int N, const std::vector<int> &ms, const std::vector<int> &ns,
                         const std::vector<float> &ref, double *us) {
  CK(cudaMemset(Y, 0, sizeof(float) * M * N));
  launch();
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> y((size_t)M * N);
  CK(cudaMemcpy(y.data(), Y, sizeof(float) * y.size(), cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < ms.size(); i++) {
    const double v = y[(size_t)ms[i] * N + ns[i]], e = fabs(v - ref[i]) / (fabs(ref[i]) + 1.0);
    if (e > worst) worst = e;
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int it = 20;
  CK(cudaEventRecord(a));
  for (int i = 0; i < it; i++) launch();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float t = 0;
  CK(cudaEventElapsedTime(&t, a, b));
  *us = t * 1e3 / it;
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return worst;
}

// Warpgroup w takes weight rows 64 (w % WM) and input rows BN / WN (w / WM)
// of the unit: WM × WN = 4.
template <int BN, int S, int WM>
__global__ void __launch_bounds__(kThreads, 1) gemm_wg(const __nv_bfloat16 *__restrict__ W, const __nv_bfloat16 *__restrict__ X,
                                                     float *__restrict__ Y, int M, int N, int K, int swap) {
  extern __shared__ __align__(1024) unsigned char sm[];
  constexpr int AR = 64 * WM, WN = 4 / WM, NW = BN / WN;  // weight rows a unit, input rows a warpgroup
  constexpr int AB = AR * KS * 2, BB = BN * KS * 2, SB = AB + BB;
  const int tid = threadIdx.x, wg = tid / 128, t = tid % 128, warp = t / 32, lane = t % 32;
  const int tiles = N / AR, passes = M / BN, units = tiles * passes, nst = K / KS;
  const uint32_t base = sa(sm);
  const uint32_t lbo = swap ? 256 : 128, sbo = swap ? 128 : 256;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int tile = u / passes, pass = u % passes;
    const __nv_bfloat16 *Wt = W + (size_t)tile * AR * K, *Xt = X + (size_t)pass * BN * K;
    auto load = [&](int st) {
      if (st < nst) {
        const uint32_t slot = base + (st % S) * SB;
        const int kc = st * KS;
        for (int c = tid; c < AR * 8; c += kThreads) {
          const int r = c / 8, k8 = c % 8;
          cpa16(slot + toff(AR, r, k8), Wt + (size_t)r * K + kc + k8 * 8);
        }
        for (int c = tid; c < BN * 8; c += kThreads) {
          const int r = c / 8, k8 = c % 8;
          cpa16(slot + AB + toff(BN, r, k8), Xt + (size_t)r * K + kc + k8 * 8);
        }
      }
      cp_commit();
    };
    float d[NW / 2];
#pragma unroll
    for (int i = 0; i < NW / 2; i++) d[i] = 0.f;
    __syncthreads();  // the slots' previous readers are done
#pragma unroll
    for (int i = 0; i < S - 2; i++) load(i);
    for (int st = 0; st < nst; st++) {
      cp_wait<S - 3>();
      fence_async();
      __syncthreads();
      load(st + S - 2);
      const uint32_t slot = base + (st % S) * SB;
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < KS / 16; ks++) {
        const uint64_t da = desc(slot + ks * AR * 32 + (wg % WM) * 64 / 8 * 256, lbo, sbo);
        const uint64_t db = desc(slot + AB + ks * BN * 32 + (wg / WM) * NW / 8 * 256, lbo, sbo);
        wgmma_bf16<NW>(d, da, db);
      }
      wg_commit();
      wg_wait<1>();
    }
    wg_wait<0>();
    cp_wait<0>();
    store<NW>(Y, d, tile * AR + (wg % WM) * 64 + warp * 16 + lane / 4, pass * BN + (wg / WM) * NW, N, lane);
  }
}

__device__ __forceinline__ void mbar_init(uint32_t a, unsigned n) { asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(a), "r"(n) : "memory"); }
__device__ __forceinline__ void mbar_tx(uint32_t a, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t a) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(a) : "memory"); }
__device__ __forceinline__ void mbar_wait(uint32_t a, uint32_t par) {
  uint32_t ok = 0;
  while (!ok)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}" : "=r"(ok) : "r"(a), "r"(par) : "memory");
}
__device__ __forceinline__ void bulk(uint32_t dst, const void *src, unsigned bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

// The same product from operands packed on the host in the slots' layout
// (a (tile, stage) block of W and a (pass, stage) block of X each one
// contiguous range), copied by thread 0 with 1D bulk copies (TMA) that
// complete on the slot's "full" barrier; each warpgroup arrives on the
// slot's "empty" barrier once its wgmma have read it.
template <int BN, int S, int WM>
__global__ void __launch_bounds__(kThreads, 1) gemm_tma(const unsigned char *__restrict__ Wp, const unsigned char *__restrict__ Xp,
                                                      float *__restrict__ Y, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char sm[];
  constexpr int AR = 64 * WM, WN = 4 / WM, NW = BN / WN;
  constexpr int AB = AR * KS * 2, BB = BN * KS * 2, SB = AB + BB;
  __shared__ __align__(8) uint64_t full[S], empty[S];
  const int tid = threadIdx.x, wg = tid / 128, t = tid % 128, warp = t / 32, lane = t % 32;
  const int tiles = N / AR, passes = M / BN, units = tiles * passes, nst = K / KS;
  const uint32_t base = sa(sm);
  if (tid == 0) {
    for (int i = 0; i < S; i++) mbar_init(sa(&full[i]), 1), mbar_init(sa(&empty[i]), 4);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  long g = 0;  // the block's stages so far (every unit has nst)
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int tile = u / passes, pass = u % passes;
    const unsigned char *Wt = Wp + (size_t)tile * nst * AB, *Xt = Xp + (size_t)pass * nst * BB;
    auto load = [&](int st) {  // thread 0: stage st of this unit
      const long L = g + st;
      const int slot = (int)(L % S);
      const long n = L / S;
      if (n >= 1) mbar_wait(sa(&empty[slot]), (uint32_t)((n - 1) & 1));
      const uint32_t fb = sa(&full[slot]);
      mbar_tx(fb, SB);
      const uint32_t dst = base + slot * SB;
      for (int c = 0; c < AB; c += 8192) bulk(dst + c, Wt + (size_t)st * AB + c, min(8192, AB - c), fb);
      bulk(dst + AB, Xt + (size_t)st * BB, BB, fb);
    };
    float d[NW / 2];
#pragma unroll
    for (int i = 0; i < NW / 2; i++) d[i] = 0.f;
    if (tid == 0)
      for (int i = 0; i < S - 2 && i < nst; i++) load(i);
    for (int st = 0; st < nst; st++) {
      if (tid == 0 && st + S - 2 < nst) load(st + S - 2);
      const long c = g + st;
      const int slot = (int)(c % S);
      mbar_wait(sa(&full[slot]), (uint32_t)((c / S) & 1));
      wg_fence();
#pragma unroll
      for (int ks = 0; ks < KS / 16; ks++) {
        const uint32_t s0 = base + slot * SB;
        const uint64_t da = desc(s0 + ks * AR * 32 + (wg % WM) * 64 / 8 * 256, 128, 256);
        const uint64_t db = desc(s0 + AB + ks * BN * 32 + (wg / WM) * NW / 8 * 256, 128, 256);
        wgmma_bf16<NW>(d, da, db);
      }
      wg_commit();
      wg_wait<1>();
      if (st > 0 && t == 0) mbar_arrive(sa(&empty[(c - 1) % S]));
    }
    wg_wait<0>();
    if (t == 0) mbar_arrive(sa(&empty[(g + nst - 1) % S]));
    g += nst;
    store<NW>(Y, d, tile * AR + (wg % WM) * 64 + warp * 16 + lane / 4, pass * BN + (wg / WM) * NW, N, lane);
  }
}

// pack lays a rows × K row-major BF16 matrix out as the slots hold it: per
// block of R rows and stage of KS columns one contiguous range, toff's order.
static std::vector<unsigned char> pack(const std::vector<__nv_bfloat16> &a, int rows, int K, int R) {
  std::vector<unsigned char> p((size_t)rows * K * 2);
  const int nst = K / KS;
  for (int n = 0; n < rows; n++)
    for (int k = 0; k < K; k += 8) {
      const int b = n / R, r = n % R, st = k / KS, k8 = (k % KS) / 8;
      const size_t off = ((size_t)b * nst + st) * R * KS * 2 + ((k8 / 2) * R * 32 + (r / 8) * 256 + (k8 % 2) * 128 + (r % 8) * 16);
      memcpy(&p[off], &a[(size_t)n * K + k], 16);
    }
  return p;
}

template <int BN, int S, int WM>
bool run_tma(const std::vector<__nv_bfloat16> &w, const std::vector<__nv_bfloat16> &x, float *Y, int M, int N, int K, int sms,
             const std::vector<int> &ms, const std::vector<int> &ns, const std::vector<float> &ref) {
  constexpr int AR = 64 * WM, SB = (AR + BN) * KS * 2;
  const size_t smem = (size_t)S * SB;
  if (smem > 227 * 1024 - 1024) {
    printf("%d slots of %d KB do not fit\n", S, SB / 1024);
    return false;
  }
  const std::vector<unsigned char> wp = pack(w, N, K, AR), xp = pack(x, M, K, BN);
  unsigned char *dw, *dx;
  CK(cudaMalloc(&dw, wp.size()));
  CK(cudaMalloc(&dx, xp.size()));
  CK(cudaMemcpy(dw, wp.data(), wp.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, xp.data(), xp.size(), cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(gemm_tma<BN, S, WM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  double us = 0;
  const double worst = check_time([&]() { gemm_tma<BN, S, WM><<<sms, kThreads, smem>>>(dw, dx, Y, M, N, K); }, Y, M, N, ms, ns, ref, &us);
  printf("TMA: units %d x %d, wgmma m64n%dk16, %d slots of %d KB: %.1f us, %.0f TFLOPS, largest error %.3g %s\n", AR, BN,
         BN * WM / 4, S, SB / 1024, us, 2.0 * M * N * K / (us * 1e-6) / 1e12, worst, worst < 1e-2 ? "ok" : "WRONG");
  cudaFree(dw);
  cudaFree(dx);
  return worst < 1e-2;
}

__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}

// The persistent kernel's loader with wgmma: a warp streams its 16 weight
// rows through its own cp.async ring (runs packed so that a lane's 16
// bytes are its A fragments of both k16 steps of a 32-column group, in
// order) and reads them into registers, the warpgroup's 64 rows are
// wgmma's A from registers; the unit's 64 input rows are B, staged by the
// whole block with cp.async in the canonical layout. Units of 256 × 64.
template <int S>
__global__ void __launch_bounds__(kThreads, 1) gemm_areg(const unsigned char *__restrict__ Wp, const __nv_bfloat16 *__restrict__ X,
                                                       float *__restrict__ Y, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char sm[];
  constexpr int AR = 256, BN = 64, WB = 2048, BB = BN * KS * 2;
  const int tid = threadIdx.x, wg = tid / 128, w16 = tid / 32, lane = tid % 32, warp = w16 % 4;
  const int tiles = N / AR, passes = M / BN, units = tiles * passes, nst = K / KS, G = K / 32;
  const uint32_t bbase = sa(sm), abase = bbase + S * BB + w16 * S * WB;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int tile = u / passes, pass = u % passes, t16 = tile * 16 + w16;
    const unsigned char *Wt = Wp + (size_t)t16 * G * 1024;
    const __nv_bfloat16 *Xt = X + (size_t)pass * BN * K;
    auto load = [&](int st) {
      if (st < nst) {
#pragma unroll
        for (int i = 0; i < 4; i++) cpa16(abase + (st % S) * WB + i * 512 + lane * 16, Wt + (size_t)st * WB + i * 512 + lane * 16);
        const int r = tid / 8, k8 = tid % 8;
        cpa16(bbase + (st % S) * BB + toff(BN, r, k8), Xt + (size_t)r * K + st * KS + k8 * 8);
      }
      cp_commit();
    };
    float d[32];
#pragma unroll
    for (int i = 0; i < 32; i++) d[i] = 0.f;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < S - 2; i++) load(i);
    for (int st = 0; st < nst; st++) {
      cp_wait<S - 3>();
      fence_async();
      __syncthreads();
      load(st + S - 2);
      const uint32_t as = abase + (st % S) * WB, bs = bbase + (st % S) * BB;
      const uint4 lo0 = lds128(as + lane * 16), hi0 = lds128(as + 512 + lane * 16);
      const uint4 lo1 = lds128(as + 1024 + lane * 16), hi1 = lds128(as + 1536 + lane * 16);
      wg_fence();
      wgmma_reg64(d, lo0.x, hi0.x, lo0.y, hi0.y, desc(bs, 128, 256));
      wgmma_reg64(d, lo0.z, hi0.z, lo0.w, hi0.w, desc(bs + BN * 32, 128, 256));
      wgmma_reg64(d, lo1.x, hi1.x, lo1.y, hi1.y, desc(bs + 2 * BN * 32, 128, 256));
      wgmma_reg64(d, lo1.z, hi1.z, lo1.w, hi1.w, desc(bs + 3 * BN * 32, 128, 256));
      wg_commit();
      wg_wait<0>();
    }
    cp_wait<0>();
    store<64>(Y, d, tile * AR + wg * 64 + warp * 16 + lane / 4, pass * BN, N, lane);
  }
}

// pack_runs lays W out for gemm_areg: per 16-row tile and 32-column group a
// kilobyte, lane l = 4g + q's 16 bytes of row g at 16 l and of row g + 8 at
// 512 + 16 l: columns 2q, 2q+1, 8+2q, 9+2q (the first k16 step's a0/a2, or
// a1/a3), then 16+2q, 17+2q, 24+2q, 25+2q (the second's).
static std::vector<unsigned char> pack_runs(const std::vector<__nv_bfloat16> &w, int N, int K) {
  std::vector<unsigned char> p((size_t)N * K * 2);
  const int G = K / 32;
  const int cols[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  for (int t16 = 0; t16 < N / 16; t16++)
    for (int j = 0; j < G; j++)
      for (int l = 0; l < 32; l++)
        for (int h = 0; h < 2; h++) {
          const int g = l / 4, q = l % 4, row = t16 * 16 + g + 8 * h;
          __nv_bfloat16 *o = reinterpret_cast<__nv_bfloat16 *>(&p[((size_t)t16 * G + j) * 1024 + h * 512 + l * 16]);
          for (int i = 0; i < 8; i++) o[i] = w[(size_t)row * K + j * 32 + cols[i] + 2 * q];
        }
  return p;
}

template <int S>
bool run_areg(const std::vector<__nv_bfloat16> &w, const __nv_bfloat16 *X, float *Y, int M, int N, int K, int sms,
              const std::vector<int> &ms, const std::vector<int> &ns, const std::vector<float> &ref) {
  const size_t smem = (size_t)S * (64 * KS * 2 + 16 * 2048);
  const std::vector<unsigned char> wp = pack_runs(w, N, K);
  unsigned char *dw;
  CK(cudaMalloc(&dw, wp.size()));
  CK(cudaMemcpy(dw, wp.data(), wp.size(), cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(gemm_areg<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  double us = 0;
  const double worst = check_time([&]() { gemm_areg<S><<<sms, kThreads, smem>>>(dw, X, Y, M, N, K); }, Y, M, N, ms, ns, ref, &us);
  printf("A in registers (per-warp ring), B staged: units 256 x 64, %d slots: %.1f us, %.0f TFLOPS, largest error %.3g %s\n", S, us,
         2.0 * M * N * K / (us * 1e-6) / 1e12, worst, worst < 1e-2 ? "ok" : "WRONG");
  cudaFree(dw);
  return worst < 1e-2;
}

// The same product with mma.sync m16n8k16, a warp per 16 weight rows × 8
// input rows, k16 steps in order from zero (as the persistent kernel's
// products accumulate a chunk): are wgmma's sums the same bits?
__global__ void mma_ref(const __nv_bfloat16 *__restrict__ W, const __nv_bfloat16 *__restrict__ X, float *__restrict__ Y, int M, int N,
                        int K) {
  const int gw = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int tn = N / 16, tm = M / 8;
  if (gw >= tn * tm) return;
  const int n0 = gw % tn * 16, m0 = gw / tn * 8;
  auto u32 = [](const __nv_bfloat16 *p) { return *reinterpret_cast<const unsigned *>(p); };
  float c[4] = {0.f, 0.f, 0.f, 0.f};
  for (int k = 0; k < K; k += 16) {
    const __nv_bfloat16 *wl = W + (size_t)(n0 + g) * K + k, *wh = W + (size_t)(n0 + g + 8) * K + k, *x = X + (size_t)(m0 + g) * K + k;
    const unsigned a0 = u32(wl + 2 * q), a1 = u32(wh + 2 * q), a2 = u32(wl + 8 + 2 * q), a3 = u32(wh + 8 + 2 * q);
    const unsigned b0 = u32(x + 2 * q), b1 = u32(x + 8 + 2 * q);
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
  Y[(size_t)(m0 + 2 * q) * N + n0 + g] = c[0];
  Y[(size_t)(m0 + 2 * q + 1) * N + n0 + g] = c[1];
  Y[(size_t)(m0 + 2 * q) * N + n0 + g + 8] = c[2];
  Y[(size_t)(m0 + 2 * q + 1) * N + n0 + g + 8] = c[3];
}

static void compare(const char *what, const std::vector<float> &a, const std::vector<float> &b) {
  size_t diff = 0;
  double worst = 0;
  for (size_t i = 0; i < a.size(); i++)
    if (memcmp(&a[i], &b[i], 4) != 0) {
      diff++;
      worst = fmax(worst, fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-6));
    }
  printf("%s: %zu of %zu outputs differ in their bits (largest relative difference %.3g)\n", what, diff, a.size(), worst);
}

__global__ void ref_kernel(const __nv_bfloat16 *W, const __nv_bfloat16 *X, float *R, const int *ms, const int *ns, int n, int K) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.f;
  for (int k = 0; k < K; k++) s += __bfloat162float(X[(size_t)ms[i] * K + k]) * __bfloat162float(W[(size_t)ns[i] * K + k]);
  R[i] = s;
}

template <int BN, int S, int WM>
bool run(const __nv_bfloat16 *W, const __nv_bfloat16 *X, float *Y, int M, int N, int K, int sms, int swap,
         const std::vector<int> &ms, const std::vector<int> &ns, const std::vector<float> &ref) {
  constexpr int AR = 64 * WM, SB = (AR + BN) * KS * 2;
  const size_t smem = (size_t)S * SB;
  if (smem > 227 * 1024) {
    printf("%d slots of %d KB do not fit\n", S, SB / 1024);
    return false;
  }
  CK(cudaFuncSetAttribute(gemm_wg<BN, S, WM>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  double us = 0;
  const double worst = check_time([&]() { gemm_wg<BN, S, WM><<<sms, kThreads, smem>>>(W, X, Y, M, N, K, swap); }, Y, M, N, ms, ns, ref, &us);
  printf("units %d x %d, wgmma m64n%dk16, %d slots of %d KB, desc %s: %.1f us, %.0f TFLOPS, largest error %.3g %s\n", AR, BN,
         BN * WM / 4, S, SB / 1024,
         swap ? "lbo 256 sbo 128" : "lbo 128 sbo 256", us, 2.0 * M * N * K / (us * 1e-6) / 1e12, worst, worst < 1e-2 ? "ok" : "WRONG");
  return worst < 1e-2;
}

int main() {
  const int M = 2048, N = 16384, K = 2048;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<__nv_bfloat16> w((size_t)N * K), x((size_t)M * K);
  uint32_t s = 12345;
  auto rnd = [&]() {
    s = s * 1664525u + 1013904223u;
    return ((s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  };
  for (auto &v : w) v = __float2bfloat16(rnd() * 0.05f);
  for (auto &v : x) v = __float2bfloat16(rnd());
  __nv_bfloat16 *dw, *dx;
  float *dy, *dr;
  int *dm, *dn;
  CK(cudaMalloc(&dw, 2 * w.size()));
  CK(cudaMalloc(&dx, 2 * x.size()));
  CK(cudaMalloc(&dy, sizeof(float) * M * N));
  CK(cudaMemcpy(dw, w.data(), 2 * w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x.data(), 2 * x.size(), cudaMemcpyHostToDevice));
  const int nref = 4096;
  std::vector<int> ms(nref), ns(nref);
  for (int i = 0; i < nref; i++) ms[i] = (int)((rnd() + 1) * 0.5f * M) % M, ns[i] = (int)((rnd() + 1) * 0.5f * N) % N;
  ms[0] = 0, ns[0] = 0, ms[1] = M - 1, ns[1] = N - 1, ms[2] = 9, ns[2] = 17;
  std::vector<float> ref(nref);
  CK(cudaMalloc(&dr, sizeof(float) * nref));
  CK(cudaMalloc(&dm, sizeof(int) * nref));
  CK(cudaMalloc(&dn, sizeof(int) * nref));
  CK(cudaMemcpy(dm, ms.data(), sizeof(int) * nref, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dn, ns.data(), sizeof(int) * nref, cudaMemcpyHostToDevice));
  ref_kernel<<<(nref + 127) / 128, 128>>>(dw, dx, dr, dm, dn, nref, K);
  CK(cudaMemcpy(ref.data(), dr, sizeof(float) * nref, cudaMemcpyDeviceToHost));
  printf("Y[%d][%d] = X[%d][%d] · W[%d][%d]ᵀ on %d SMs, one 512-thread block each\n", M, N, M, K, N, K, sms);
  const int swap = 0;  // lbo 128 / sbo 256 (the other way round gives wrong products: round 46)
  run<64, 4, 4>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);   // 256 × 64: the persistent kernel's unit
  run<64, 5, 4>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);
  run<128, 4, 4>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);  // 256 × 128
  run<256, 4, 2>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);  // 128 × 256
  run<128, 4, 2>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);  // 128 × 128
  run<128, 6, 2>(dw, dx, dy, M, N, K, sms, swap, ms, ns, ref);
  std::vector<float> y64((size_t)M * N), y128((size_t)M * N), ymma((size_t)M * N), yreg((size_t)M * N);
  run_areg<4>(w, dx, dy, M, N, K, sms, ms, ns, ref);
  run_areg<5>(w, dx, dy, M, N, K, sms, ms, ns, ref);
  CK(cudaMemcpy(yreg.data(), dy, sizeof(float) * yreg.size(), cudaMemcpyDeviceToHost));
  run_tma<64, 4, 4>(w, x, dy, M, N, K, sms, ms, ns, ref);
  CK(cudaMemcpy(y64.data(), dy, sizeof(float) * y64.size(), cudaMemcpyDeviceToHost));
  run_tma<64, 5, 4>(w, x, dy, M, N, K, sms, ms, ns, ref);
  run_tma<128, 4, 4>(w, x, dy, M, N, K, sms, ms, ns, ref);
  run_tma<128, 6, 2>(w, x, dy, M, N, K, sms, ms, ns, ref);
  run_tma<256, 4, 2>(w, x, dy, M, N, K, sms, ms, ns, ref);
  CK(cudaMemcpy(y128.data(), dy, sizeof(float) * y128.size(), cudaMemcpyDeviceToHost));
  mma_ref<<<(N / 16) * (M / 8) / 8, 256>>>(dw, dx, dy, M, N, K);
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(ymma.data(), dy, sizeof(float) * ymma.size(), cudaMemcpyDeviceToHost));
  compare("wgmma m64n64k16 against m64n128k16", y64, y128);
  compare("wgmma m64n128k16 against mma.sync m16n8k16", y128, ymma);
  compare("wgmma with A from registers against mma.sync m16n8k16", yreg, ymma);
  return 0;
}

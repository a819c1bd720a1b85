#pragma once
// mma.cuh: the tensor-core matrix product of the phases (issue 15):
// Y = X · Wᵀ for the step's M input rows at once (mma.sync m16n8k16, BF16
// inputs, FP32 accumulation), with the weights streamed once per step
// (later passes of many rows from L2) and the work split over the SMs by an
// explicit tile list:
//
//  - a unit is (tile, chunk): kGemmRows = 256 weight rows (16 per warp)
//    × one chunk of the matrix's 32-column groups. The number of chunks
//    (DMat.nk) is fixed per matrix when it is uploaded, from its shape and
//    the grid (choose_nk in host.cuh), never from M. Block b takes units
//    b, b + grid, …;
//  - the weights are the mma's A operand (16 rows × 16 columns, streamed by
//    each warp through its own ring of stages in shared memory with
//    cp.async, from a copy packed at upload so that a warp streams its rows
//    as one contiguous range; dequantized to BF16 as they leave the ring:
//    BF16, F16, Q8_0, F32, and the block-quantized types of qpack.h at
//    their own width, dequantized exactly as ggml's reference does then
//    rounded once); the input rows are the B operand, staged
//    in shared memory as BF16, for the whole phase when they fit and the
//    block's units cover every chunk, else per unit, pass and kSG × 32
//    columns of the unit's chunk. They are rounded once: by the phase
//    that writes them (attention, gate/up, a norm phase of its own at more
//    than kFuseNorm rows: In.b), and then copied; else (a norm folded into
//    the product, few rows) converted as they are staged, RMSNorm applied
//    on the way with the CPU's float operations, as the norm phase does;
//  - inside a 32-column group, the columns are fed to the two k16 steps in
//    a fixed permuted order (a lane loads 8 consecutive values of a row,
//    16 bytes, for both steps); weights and inputs use the same order;
//  - each output element is one accumulator from zero over its chunk's
//    steps in increasing order; a matrix of several chunks writes the
//    chunks' partial sums to global memory, and they are added in chunk
//    order, from zero, before the epilogue (by the last block to finish a
//    tile, found with an atomic counter per tile and pass, for one row;
//    by the whole grid after a barrier for more, mma.cuh kSpreadM); or,
//    at one row (kLocalM), a block takes all the chunks of its m16 tiles
//    (a warp a chunk) and adds them itself in shared memory
//    (gemm_local_t: the same operations, no partial sums in global memory,
//    no counter); or,
//    when a product has enough (tile, pass) pairs of many rows to fill
//    3/8 of the grid, a block takes all of a tile's chunks for one pass
//    and adds their sums in chunk order itself (gemm_whole_t: the same
//    operations, no partial sums in global memory).
//
// So an output element is the same sequence of operations whatever M is,
// wherever its row sits in the step and whichever block computes it: the
// product is batch invariant by construction. The epilogue gets, per
// thread, two outputs of one input row: weight rows n and n + 8 (the lane's
// rows of an m16 tile), which is how the QKV phase gets both halves of a
// RoPE pair and the FFN phase a gate row with its up row (host.cuh permutes
// those matrices' rows at upload so that the pairs meet).
#include "gemv.cuh"
#include <type_traits>

namespace {

constexpr int kGemmRows = 16 * kWarps;  // weight rows of a unit: an m16 tile per warp
#ifndef RLM_KSG
#define RLM_KSG 16
#endif
constexpr int kSG = RLM_KSG;  // 32-column groups staged at a time when the inputs do not fit whole
// Above kSpreadM rows a product's chunks are summed by the whole grid after
// a barrier; up to it by the last block of each tile (the same sums). The
// last block's chain (counter, fences, reads) costs one row less than a
// barrier; from two rows on, the barrier costs less (batch 16: 4,202 tok/s
// against 4,896, bench/logs/issue15-round15.log).
#ifndef RLM_SPREAD_M
#define RLM_SPREAD_M 1
#endif
constexpr int kSpreadM = RLM_SPREAD_M;
// Two shapes of the same product (the same operations for every output
// element: only how many input rows share a weight tile differ): up to
// kSmallM rows, one pass of 16 rows; above, passes of kPass rows (kPass / 8
// n8 tiles of accumulators per warp).
constexpr int kSmallM = 16;
// BF16 input rows (In.bf16) come with more than kFuseNorm rows: only the
// many-row shape reads them.
static_assert(kSmallM == kFuseNorm, "BF16 inputs exactly when the many-row shape runs");
#ifndef RLM_KPASS
#define RLM_KPASS 64
#endif
constexpr int kPass = RLM_KPASS;
// The weights reach a warp through shared memory (cp.async, 16 bytes a
// lane, L1 bypassed): a ring of stages per warp, one (16-row tile,
// 32-column group) block a stage, kRingWarpBytes a warp in flight. Loads
// into registers stall on their own registers (and spill them, in the
// persistent kernel); the ring keeps the bytes in flight without them
// (bench/logs/issue15-stream-h100.log: 2.0 TB/s from registers, 2.8–3.0
// through the ring).
constexpr int kRingWarpBytes = 4096;
constexpr int kRingBytes = kWarps * kRingWarpBytes;  // at the end of the product's shared memory

// Staged row pitch in BF16 elements for cols (a multiple of 32): a row is
// 64 bytes past a multiple of 128, so the 16-byte loads of the 8 rows of
// an n8 tile fall in different banks.
__host__ __device__ constexpr int gemm_pitch(int cols) { return cols + ((cols % 64) ? 0 : 32); }

__device__ __forceinline__ void mma_bf16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                         unsigned b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The weights as the product reads them (packed at upload, host.cuh
// pack_tiles): per 16-row tile and 32-column group a block of 64 runs of 8
// values, lane l = 4g + q's run of row g (columns 8q..8q+7) at l and of row
// g + 8 at 32 + l; blocks in column order, tiles one after another. A warp
// streams its tile as one contiguous range, 512 bytes a load (BF16).
template <int TY> struct WRun { static constexpr int bytes = 16; };  // BF16, F16
template <> struct WRun<RLM_TYPE_Q8_0> { static constexpr int bytes = 8; };
template <> struct WRun<RLM_TYPE_F32> { static constexpr int bytes = 32; };
// The block-quantized types (qpack.h): a block is 32 (wa + wb) bytes a
// half, at most 512; the ring's stages are 512 bytes apart whatever the
// tile's types (8 stages), and a stage is filled with the block's own bytes.
template <> struct WRun<RLM_TYPE_QANY> { static constexpr int bytes = 8; };

__device__ __forceinline__ uint4 lds128(uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint4 lds64(uint32_t a) {
  uint4 v = make_uint4(0, 0, 0, 0);
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds32(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds16(uint32_t a) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ uint32_t lds8(uint32_t a) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
// cp.async of 16 bytes, zero-filled when n is 0 (a tile past the matrix).
__device__ __forceinline__ void cp16(uint32_t dst, const void *src, int n) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// A lane's run of a weight block in the ring (a: its shared address) as
// 8 BF16 values (s: a Q8_0 row's scale for the group).
template <int TY> struct WRaw;
template <> struct WRaw<RLM_TYPE_BF16> {
  uint4 v;
  __device__ __forceinline__ void read(uint32_t a, float) { v = lds128(a); }
  __device__ __forceinline__ uint4 bf16() const { return v; }
};
template <> struct WRaw<RLM_TYPE_F16> {
  uint4 v;
  __device__ __forceinline__ void read(uint32_t a, float) { v = lds128(a); }
  __device__ __forceinline__ uint4 bf16() const {
    float f[8];
    WT<RLM_TYPE_F16>::cvt(v, f);
    return pack8(f);
  }
};
template <> struct WRaw<RLM_TYPE_Q8_0> {
  uint4 v;
  float s;
  __device__ __forceinline__ void read(uint32_t a, float sc) {
    v = lds64(a);
    s = sc;
  }
  __device__ __forceinline__ uint4 bf16() const {  // weight = scale × quant, then one rounding
    float f[8];
    WT<RLM_TYPE_Q8_0>::cvt(v, f);
#pragma unroll
    for (int i = 0; i < 8; i++) f[i] *= s;
    return pack8(f);
  }
};
// A block-quantized run: its planes (as qp_pack_run writes them), its
// type, its row's scale records and its group. Dequantized by one
// function, not inlined, for every type (a switch inside): ptxas compiles
// it once, not once per product and epilogue.
__device__ __noinline__ uint4 qany_bf16(uint32_t t, unsigned long long a, uint32_t b, const uint8_t *s, int j) {
  float f[8];
  qp_run(t, a, b, s, j, threadIdx.x & 3, f);
  return pack8(f);
}
template <> struct WRaw<RLM_TYPE_QANY> {
  unsigned long long a;
  uint32_t b, t;
  const uint8_t *s;
  int j;
  __device__ __forceinline__ uint4 bf16() const { return qany_bf16(t, a, b, s, j); }
};
// qp_fmt_of as a constant.
__host__ __device__ constexpr qp_fmt qp_fmt_const(uint32_t t) {
  qp_fmt f{};
  qp_fmt_of(t, &f);
  return f;
}
// The types most files hold, whose tiles (both halves of the one type) take
// gemm_group_q, decoded inline with the type a constant: Q4_K and Q6_K
// (Q4_K_M, Q5_K_M), Q5_K, Q4_0, Q8_0 (beside them), MXFP4 (GPT-OSS's
// experts). The others take qany_bf16.
#define RLM_QFAST(X) X(RLM_TYPE_Q4_K) X(RLM_TYPE_Q6_K) X(RLM_TYPE_Q5_K) X(RLM_TYPE_Q4_0) X(RLM_TYPE_Q8_0) X(RLM_TYPE_MXFP4)
__device__ __forceinline__ bool qany_fast_type(uint32_t t) {
#define RLM_QFAST_IS(T) t == T ||
  return RLM_QFAST(RLM_QFAST_IS) false;
#undef RLM_QFAST_IS
}
template <> struct WRaw<RLM_TYPE_F32> {
  uint4 a, b;
  __device__ __forceinline__ void read(uint32_t p, float) {
    a = lds128(p);
    b = lds128(p + 16);
  }
  __device__ __forceinline__ uint4 bf16() const {
    return make_uint4(pack_bf16(__uint_as_float(a.x), __uint_as_float(a.y)),
                      pack_bf16(__uint_as_float(a.z), __uint_as_float(a.w)),
                      pack_bf16(__uint_as_float(b.x), __uint_as_float(b.y)),
                      pack_bf16(__uint_as_float(b.z), __uint_as_float(b.w)));
  }
};

// gstage writes input rows m0..m0+mrows, columns [c0, c0+ncols), as BF16
// into xs (row pitch `pitch`), with the whole block: in.g set means
// g[c] * (x[c] * inv[t]) (the CPU's RMSNorm operations), rounded once.
// Rows already in BF16 (in.b) are copied: up to two 16-byte runs a thread
// with both loads issued before the stores; more with cp.async, every run
// in flight at once and no registers held (a float row's loads wait one
// after another: each iteration's store to shared memory may alias the
// next one's loads). The cp.async copies end before gstage returns, and
// with them every earlier cp.async of the thread (the weight ring's
// prefetch), hence plain loads for few runs.
// B16 false (the products of up to kSmallM rows, which never get BF16
// rows): float rows only, and none of the copy's code.
// cjump: the staged columns from csplit on come from cjump columns further
// in the row (gemm_halves_t stages two ranges side by side).
template <bool B16>
__device__ __forceinline__ void gstage(const In &in, int m0, int mrows, int c0, int ncols, __nv_bfloat16 *xs, int pitch,
                                       int csplit = 0, int cjump = 0) {
  const int per_row = ncols / 8, runs = mrows * per_row;
  auto col = [&](int r) { return c0 + r * 8 + (r * 8 >= csplit ? cjump : 0); };  // r: a run of the row
  auto src = [&](int e) { return in.b + (size_t)(m0 + e / per_row) * in.ld + col(e % per_row); };
  auto dst = [&](int e) { return xs + (size_t)(e / per_row) * pitch + (e % per_row) * 8; };
  if (B16 && in.bf16 && runs <= 2 * kThreads) {
    const int e0 = threadIdx.x, e1 = threadIdx.x + kThreads;
    uint4 v0 = make_uint4(0, 0, 0, 0), v1 = v0;
    if (e0 < runs) v0 = __ldcg(reinterpret_cast<const uint4 *>(src(e0)));
    if (e1 < runs) v1 = __ldcg(reinterpret_cast<const uint4 *>(src(e1)));
    if (e0 < runs) *reinterpret_cast<uint4 *>(dst(e0)) = v0;
    if (e1 < runs) *reinterpret_cast<uint4 *>(dst(e1)) = v1;
    return;
  }
  if (B16 && in.bf16) {
    const uint32_t base = (uint32_t)__cvta_generic_to_shared(xs);
    for (int e = threadIdx.x; e < runs; e += kThreads)
      cp16(base + (uint32_t)(reinterpret_cast<const char *>(dst(e)) - reinterpret_cast<const char *>(xs)), src(e), 16);
    cp_commit();
    cp_wait<0>();
    return;
  }
  for (int e = threadIdx.x; e < mrows * per_row; e += kThreads) {
    const int t = e / per_row, c = col(e % per_row), tt = m0 + t;
    const float *x = in.x + (size_t)(in.map ? in.map[tt] : tt) * in.ld + c;
    const float4 a = *reinterpret_cast<const float4 *>(x), b = *reinterpret_cast<const float4 *>(x + 4);
    float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    if (in.g) {
      const float inv = in.inv[tt];
      const float4 ga = *reinterpret_cast<const float4 *>(in.g + c), gb = *reinterpret_cast<const float4 *>(in.g + c + 4);
      const float g[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
#pragma unroll
      for (int i = 0; i < 8; i++) v[i] = g[i] * (v[i] * inv);
    }
    *reinterpret_cast<uint4 *>(xs + (size_t)t * pitch + (e % per_row) * 8) = pack8(v);
  }
}

// Where a product keeps its cross-block state: the chunks' partial sums
// ([chunk][M][tiles × kGemmRows] floats) and a counter per (pass, tile),
// zero between products (the last block of a tile resets its counter).
struct GemmScratch {
  float *part;
  int *cnt;
  unsigned long long *prof;  // RINGLM_CUDA_PROFILE: Dev.gprof, else null
};

// The chunks' partial sums of outputs at and 8 past: part[c * stride + at],
// added in chunk order from zero.
__device__ __forceinline__ void chunk_sum(const float *part, int nk, size_t stride, size_t at, float &lo, float &hi) {
  lo = 0.f;
  hi = 0.f;
  for (int c = 0; c < nk; c++) {
    lo += __ldcg(part + c * stride + at);
    hi += __ldcg(part + c * stride + at + 8);
  }
}

// A product's time in its parts, for block 0 (GemmScratch.prof).
struct GemmClock {
  unsigned long long *p;
  unsigned long long t;
  __device__ GemmClock(unsigned long long *prof, int many)
      : p(prof && blockIdx.x == 0 && threadIdx.x == 0 ? prof + 5 * many : nullptr), t(p ? globaltimer() : 0) {}
  __device__ __forceinline__ void lap(int part) {
    if (p) {
      const unsigned long long now = globaltimer();
      p[part] += now - t;
      t = now;
    }
  }
};

// WStream's block-quantized fields (below), in its QANY instances only.
struct WQNone {};
template <int TPW> struct WQFields {
  uint32_t qlay[TPW] = {}, qpf[TPW] = {};
  const uint8_t *qlo[TPW] = {}, *qhi[TPW] = {};
  uint32_t qfast[TPW] = {};  // the halves' type where they share one of RLM_QFAST's, else 0
  // gemm_group_q's K-quant records, unpacked once a super-block (qp_rec_*):
  // per half four words of 6-bit scales (Q6_K: the lane's eight int8
  // scales in two) and d (and dmin); rsb: the super-block they are of.
  uint32_t rw[2][4] = {};
  float rd[2][2] = {};
  int rsb = -1;
};

// A warp's stream of weight blocks through its ring: a unit's blocks are
// the warp's TPW 16-row tiles (one, or two for gemm_whole2_t), groups
// j0..j1 of them; issue starts the copy of group j into stage st (a
// stage: the group's block of each tile, in tile order) and loads a Q8_0
// group's row scales into registers, as far ahead; prime issues a unit's
// first D groups. The ring is the last kRingBytes of the product's shared
// memory (smem, cap). A block-quantized tile (RLM_TYPE_QANY) brings its
// record (qp_tile) at at16: its blocks' bytes and planes, the lane's two
// rows' scale records, read as the runs are dequantized (issue prefetches
// them into L1 as far ahead as the copies), so the stream holds no scale
// per stage.
template <int TY, int TPW = 1> struct WStream {
  static constexpr int RUN = WRun<TY>::bytes, BLK = 64 * RUN;  // a (16-row tile, 32-column group) block
  static constexpr int SBLK = TPW * BLK;                       // a stage
  static constexpr int D = kRingWarpBytes / SBLK;              // stages
  static_assert(D >= 2 && kSG % D == 0, "ring stages");
  // The products' loops over a round of stages unroll it (a stage's Q8_0
  // scales are registers), except for the block-quantized types: their
  // stage's fields are addresses only, and unrolled their step (a switch
  // over the common types, gemm_group_any) spills: Q4_K_M 1B decode batch
  // 1 2.03 -> 2.51 ms, batch 64 3.95 -> 4.68 (H200, round 75).
  static constexpr int U = TY == RLM_TYPE_QANY ? 1 : D;
  const DMat &W;
  uint32_t ring;
  int warp, lane, G;
  const char *pb[TPW] = {};
  const float *slo[TPW] = {}, *shi[TPW] = {};
  float sl[TPW][D], sh[TPW][D];
  // QANY: the tile's qp_tile.lay, the lane's rows' scale records, and
  // their record bytes and groups a record (qp_tile.pf, 8 bits each); an
  // empty member for the other types.
  std::conditional_t<TY == RLM_TYPE_QANY, WQFields<TPW>, WQNone> q;
  __device__ __forceinline__ WStream(const DMat &w, void *smem, size_t cap)
      : W(w),
        ring((uint32_t)__cvta_generic_to_shared(reinterpret_cast<char *>(smem) + cap - kRingBytes) +
             (threadIdx.x >> 5) * kRingWarpBytes),
        warp(threadIdx.x >> 5), lane(threadIdx.x & 31), G(w.cols / 32) {}
  __device__ __forceinline__ int units() const { return (W.rows + TPW * kGemmRows - 1) / (TPW * kGemmRows) * W.nk; }
  // The warp's t-th tile is m16 tile t16.
  __device__ __forceinline__ void at16(int t, int t16) {
    const int rlo = t16 * 16 + (lane >> 2);
    pb[t] = t16 * 16 < W.rows ? reinterpret_cast<const char *>(W.w) + (size_t)t16 * G * BLK : nullptr;
    slo[t] = TY == RLM_TYPE_Q8_0 && pb[t] ? W.sc + (size_t)rlo * G : nullptr;
    shi[t] = TY == RLM_TYPE_Q8_0 && pb[t] ? W.sc + (size_t)(rlo + 8) * G : nullptr;
    if constexpr (TY == RLM_TYPE_QANY) {
      q.qlay[t] = 0;
      if (pb[t]) {
        const uint4 *rec = reinterpret_cast<const uint4 *>(W.qt + t16);
        const uint4 r0 = __ldg(rec), r1 = __ldg(rec + 1);  // {code16, lay, sc[0], sc[1]}, {stride[2], pf[2]}
        pb[t] = reinterpret_cast<const char *>(W.w) + (size_t)r0.x * 16;
        q.qlay[t] = r0.y;
        q.qlo[t] = W.qs + r0.z + (size_t)(lane >> 2) * r1.x;
        q.qhi[t] = W.qs + r0.w + (size_t)(lane >> 2) * r1.y;
        q.qpf[t] = (r1.z & 0xFF) | (r1.z >> 16) << 8 | (r1.w & 0xFF) << 16 | (r1.w >> 16) << 24;
        q.qfast[t] = qp_lay_type(r0.y, 0) == qp_lay_type(r0.y, 1) && qany_fast_type(qp_lay_type(r0.y, 0)) ? qp_lay_type(r0.y, 0) : 0;
        q.rsb = -1;
      } else {
        q.qfast[t] = 0;
      }
    }
  }
  __device__ __forceinline__ void at(int u) {
    const int tile = u / W.nk;
#pragma unroll
    for (int t = 0; t < TPW; t++) at16(t, tile * (TPW * kGemmRows / 16) + warp * TPW + t);
  }
  __device__ __forceinline__ void issue(int j, int st, bool copy = true) {
#pragma unroll
    for (int t = 0; t < TPW; t++) {
      if constexpr (TY == RLM_TYPE_QANY) {
        if (!pb[t]) continue;  // nothing to copy: its runs are never used
        const int bytes = qp_lay_block(q.qlay[t]);
        if (copy && lane * 16 < bytes)
          cp16(ring + st * SBLK + t * BLK + lane * 16, pb[t] + (size_t)j * bytes + lane * 16, 16);
        const uint32_t pf = q.qpf[t];
        asm volatile("prefetch.global.L1 [%0];" ::"l"(q.qlo[t] + (size_t)(j >> ((pf >> 8) & 0xFF)) * (pf & 0xFF)));
        asm volatile("prefetch.global.L1 [%0];" ::"l"(q.qhi[t] + (size_t)(j >> (pf >> 24)) * ((pf >> 16) & 0xFF)));
        continue;
      }
      if (copy) {
        const char *src = pb[t] ? pb[t] + (size_t)j * BLK : reinterpret_cast<const char *>(W.w);
#pragma unroll
        for (int k = 0; k < BLK / 512; k++)
          cp16(ring + st * SBLK + t * BLK + k * 512 + lane * 16, src + k * 512 + lane * 16, pb[t] ? 16 : 0);
      }
      if (TY == RLM_TYPE_Q8_0) {
        sl[t][st] = slo[t] ? __ldg(slo[t] + j) : 0.f;
        sh[t][st] = shi[t] ? __ldg(shi[t] + j) : 0.f;
      }
    }
  }
  // issue for a tile of one type QT (gemm_group_q): its block's bytes a
  // constant; the scale records prefetched into L1 only where group j
  // starts a new record line's worth (a K-quant super-block; 16 groups of
  // the 32-column types).
  template <uint32_t QT> __device__ __forceinline__ void issue_q(int j, int st) {
    static_assert(TY == RLM_TYPE_QANY && TPW == 1, "issue_q");
    constexpr qp_fmt F = qp_fmt_const(QT);
    constexpr int bytes = 64 * (F.wa + F.wb);
    if (!pb[0]) return;
    if (lane * 16 < bytes) cp16(ring + st * SBLK + lane * 16, pb[0] + (size_t)j * bytes + lane * 16, 16);
    if ((j & (F.gsh ? 7 : 15)) == 0) {
      asm volatile("prefetch.global.L1 [%0];" ::"l"(q.qlo[0] + (size_t)(j >> F.gsh) * F.rec));
      asm volatile("prefetch.global.L1 [%0];" ::"l"(q.qhi[0] + (size_t)(j >> F.gsh) * F.rec));
    }
  }
  // copy false: the copies were issued before (gemm_prime); only the
  // registers' part.
  __device__ __forceinline__ void prime(int u, bool copy = true) {
    at(u);
    prime_chunk(u % W.nk, copy);
  }
  // A lane's run of half h of tile t's block in stage i (group j) into w.
  __device__ __forceinline__ void read(WRaw<TY> &w, int i, int t, int h, int j) const {
    if constexpr (TY == RLM_TYPE_QANY) {
      const uint32_t lay = q.qlay[t], wa = qp_lay_wa(lay, h), wb = qp_lay_wb(lay, h);
      const uint32_t base = ring + i * SBLK + t * BLK + qp_lay_half(lay, h);
      if (wa == 8) {
        const uint4 v = lds64(base + lane * 8);
        w.a = (unsigned long long)v.y << 32 | v.x;
      } else {
        w.a = wa == 4 ? lds32(base + lane * 4) : wa == 2 ? lds16(base + lane * 2) : 0;
      }
      w.b = wb == 2 ? lds16(base + 32 * wa + lane * 2) : wb == 1 ? lds8(base + 32 * wa + lane) : 0;
      w.t = qp_lay_type(lay, h);
      w.s = h ? q.qhi[t] : q.qlo[t];
      w.j = j;
    } else {
      w.read(ring + i * SBLK + t * BLK + h * 32 * RUN + lane * RUN, h ? sh[t][i] : sl[t][i]);
    }
  }
  // The first D groups of a chunk of the tiles set by at / at16.
  __device__ __forceinline__ void prime_chunk(int chunk, bool copy = true) {
    const int j0 = chunk * G / W.nk, j1 = (chunk + 1) * G / W.nk;
#pragma unroll
    for (int i = 0; i < D; i++) {
      if (j0 + i < j1) issue(j0 + i, i, copy);
      if (copy) cp_commit();
    }
  }
};

// The tensor-core part of a group step: the 16-row tile's runs lo and hi
// (BF16) against the staged inputs xc, into acc.
template <int NT>
__device__ __forceinline__ void gemm_mma(uint4 lo, uint4 hi, const __nv_bfloat16 *xc, int pitch, int mrows,
                                         float (&acc)[NT][4], bool all) {
  // all: every n8 tile of the staged rows may be read (rows past mrows give
  // outputs nobody reads). Then every tile's first k16 step, then every
  // tile's second: the same two additions per accumulator in the same
  // order, unpredicated (a predicated mma.sync takes a warp sync of its
  // own) and without the second waiting on the first back to back. The
  // 2048-row gate/up product 700 -> 640 µs, a 2048-token prefill 33.3 ->
  // 30.9 ms, batch 64 3.79 -> 3.54 ms (bench/logs/issue15-round44-mma-order.log;
  // Nsight Compute before: tensor pipe 25% busy, a third of the stalls on
  // fixed-latency dependencies, round 41). Else (up to 16 rows, and a
  // partial pass of resident rows) the old loop: the reordered one costs
  // gemm_t registers there (batch 1 1.85 -> 1.93 ms, round 43).
  uint2 b2[NT];
  if (all) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
      const uint4 b = *reinterpret_cast<const uint4 *>(xc + (size_t)nt * 8 * pitch);
      mma_bf16(acc[nt], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
      b2[nt] = make_uint2(b.z, b.w);
    }
#pragma unroll
    for (int nt = 0; nt < NT; nt++) mma_bf16(acc[nt], lo.z, hi.z, lo.w, hi.w, b2[nt].x, b2[nt].y);
    return;
  }
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    if (nt * 8 < mrows) {
      const uint4 b = *reinterpret_cast<const uint4 *>(xc + (size_t)nt * 8 * pitch);
      mma_bf16(acc[nt], lo.x, hi.x, lo.y, hi.y, b.x, b.y);
      mma_bf16(acc[nt], lo.z, hi.z, lo.w, hi.w, b.z, b.w);
    }
  }
}

// A warp's step of a product at group j, ring stage i: wait for the
// group's weights, read them, request group j + D (if below jend) into the
// stage, and accumulate the 16-row tile against the staged inputs xc (the
// lane's row and 8 columns of the group; n8 tiles pitch rows apart) into
// acc, both k16 halves in order. gemm_t and gemm_whole_t share it: the
// same operations in both.
template <int TY, int NT>
__device__ __forceinline__ void gemm_group(WStream<TY> &ws, int i, int j, int jend, const __nv_bfloat16 *xc, int pitch,
                                           int mrows, float (&acc)[NT][4], bool all) {
  constexpr int D = WStream<TY>::D;
  cp_wait<D - 1>();  // this lane's copies of group j are in
  __syncwarp();      // and every lane's
  WRaw<TY> wl, wh;
  ws.read(wl, i, 0, 0, j);
  ws.read(wh, i, 0, 1, j);
  __syncwarp();  // every lane has read stage i before it is refilled
  if (j + D < jend) ws.issue(j + D, i);
  cp_commit();
  uint4 lo, hi;
  if constexpr (TY == RLM_TYPE_QANY) {
    // One call site for both runs (ptxas's time grows with every call).
#pragma unroll 1
    for (int h = 0; h < 2; h++) {
      const uint4 v = (h ? wh : wl).bf16();
      if (h) hi = v;
      else lo = v;
    }
  } else {
    lo = wl.bf16();
    hi = wh.bf16();
  }
  gemm_mma(lo, hi, xc, pitch, mrows, acc, all);
}

// gemm_group's step for a block-quantized tile whose halves are both of
// type QT (one of RLM_QFAST's): the lane's scale records are loaded first,
// so that they arrive while it waits for the group's planes; the planes are
// read at their fixed width; the runs are decoded inline, side by side
// (qp_codes, qp_ab, qp_apply: qp_run's operations).
template <uint32_t QT, int NT>
__device__ __forceinline__ void gemm_group_q(WStream<RLM_TYPE_QANY> &ws, int i, int j, int jend, const __nv_bfloat16 *xc,
                                             int pitch, int mrows, float (&acc)[NT][4], bool all) {
  constexpr int D = WStream<RLM_TYPE_QANY>::D;
  constexpr int WA = qp_fmt_const(QT).wa, WB = qp_fmt_const(QT).wb;
  const int q = ws.lane & 3;
  qp_ab_t al, ah;
  if constexpr (qp_rec_cached(QT)) {
    if ((j >> 3) != ws.q.rsb) {  // a new super-block: its records, unpacked
      ws.q.rsb = j >> 3;
      qp_rec_load(QT, ws.q.qlo[0] + (size_t)(j >> 3) * qp_fmt_const(QT).rec, q, ws.q.rw[0], ws.q.rd[0]);
      qp_rec_load(QT, ws.q.qhi[0] + (size_t)(j >> 3) * qp_fmt_const(QT).rec, q, ws.q.rw[1], ws.q.rd[1]);
    }
    al = qp_rec_ab(QT, ws.q.rw[0], ws.q.rd[0], j & 7);
    ah = qp_rec_ab(QT, ws.q.rw[1], ws.q.rd[1], j & 7);
  } else {
    al = qp_ab(QT, ws.q.qlo[0], j, q);
    ah = qp_ab(QT, ws.q.qhi[0], j, q);
  }
  cp_wait<D - 1>();  // this lane's copies of group j are in
  __syncwarp();      // and every lane's
  const uint32_t base = ws.ring + i * WStream<RLM_TYPE_QANY>::SBLK, hb = 32 * (WA + WB);
  auto plane_a = [&](uint32_t at) -> unsigned long long {
    if constexpr (WA == 8) {
      const uint4 v = lds64(at + ws.lane * 8);
      return (unsigned long long)v.y << 32 | v.x;
    } else if constexpr (WA == 4) {
      return lds32(at + ws.lane * 4);
    } else {
      return lds16(at + ws.lane * 2);
    }
  };
  auto plane_b = [&](uint32_t at) -> uint32_t {
    if constexpr (WB == 2) return lds16(at + 32 * WA + ws.lane * 2);
    else if constexpr (WB == 1) return lds8(at + 32 * WA + ws.lane);
    else return 0;
  };
  const unsigned long long a0 = plane_a(base), a1 = plane_a(base + hb);
  const uint32_t b0 = plane_b(base), b1 = plane_b(base + hb);
  __syncwarp();  // every lane has read stage i before it is refilled
  if (j + D < jend) ws.template issue_q<QT>(j + D, i);
  cp_commit();
  uint32_t E0, O0, E1, O1;
  qp_codes(QT, a0, b0, &E0, &O0);
  qp_codes(QT, a1, b1, &E1, &O1);
  float f0[8], f1[8];
  qp_apply(QT, E0, O0, al, f0);
  qp_apply(QT, E1, O1, ah, f1);
  gemm_mma(pack8(f0), pack8(f1), xc, pitch, mrows, acc, all);
}

// gemm_group for the block-quantized tiles: gemm_group_q for a tile of one
// of the common types, else the generic step.
template <int TY, int NT>
__device__ __forceinline__ void gemm_group_any(WStream<TY> &ws, int i, int j, int jend, const __nv_bfloat16 *xc, int pitch,
                                               int mrows, float (&acc)[NT][4], bool all) {
  if constexpr (TY == RLM_TYPE_QANY) {
    switch (ws.q.qfast[0]) {
#define RLM_QFAST_CASE(T)                                              \
  case T:                                                              \
    gemm_group_q<T, NT>(ws, i, j, jend, xc, pitch, mrows, acc, all);  \
    return;
      RLM_QFAST(RLM_QFAST_CASE)
#undef RLM_QFAST_CASE
    }
  }
  gemm_group<TY, NT>(ws, i, j, jend, xc, pitch, mrows, acc, all);
}

// gemm_t runs Y = in · Wᵀ over M input rows with the whole grid and hands
// every output to epi(t, n, y[t][n], y[t][n + 8]) for the rows n of the
// lower halves of the m16 tiles (n % 16 < 8); n and n + 8 may be past
// W.rows. xs is the block's shared memory (cap bytes; its last kRingBytes
// are the warps' weight rings). A matrix of several chunks is summed, chunk
// by chunk in order, by the last block to finish a tile when M ≤ kSpreadM;
// above, by every block after a grid barrier (the same sums). Not inlined:
// the product gets its registers whatever the phase around it keeps live.
//
// W, in and epi come by value: copies the compiler knows no store touches,
// so their fields stay in registers through the loops.
#ifdef RLM_GEMM_INLINE
#define RLM_GEMM_ATTR __forceinline__
#else
#define RLM_GEMM_ATTR __noinline__
#endif
template <int TY, int PASS, class Epi>
__device__ RLM_GEMM_ATTR void gemm_t(const DMat W, const In in, int M, __nv_bfloat16 *xs, size_t cap, GemmScratch s,
                                    Epi epi) {
  constexpr int NT = PASS / 8;
  __shared__ int s_last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int K = W.cols, G = K / 32, nk = W.nk;
  const int tiles = (W.rows + kGemmRows - 1) / kGemmRows, units = tiles * nk, npad = tiles * kGemmRows;
  const bool spread = nk > 1 && M > kSpreadM;
  WStream<TY> ws(W, xs, cap);
  constexpr int D = WStream<TY>::D;
  cap -= kRingBytes;
  const int pitch_all = gemm_pitch(K);
  // The inputs stay staged for the whole product (all K columns) when a
  // block's units cover them; a block of fewer units than chunks stages
  // only its units' columns, per unit (nk times fewer for one unit).
  const bool resident = M <= PASS && (size_t)((M + 7) / 8 * 8) * pitch_all * 2 <= cap &&
                        (nk == 1 || (units + (int)gridDim.x - 1) / (int)gridDim.x >= nk);
  const int pitch = resident ? pitch_all : gemm_pitch(kSG * 32);
  constexpr int kPairs = kGemmRows / 2;
  GemmClock clk(s.prof, M > kSmallM);
  __syncthreads();  // the previous user of the shared memory is done
  // The first unit's weights are in flight already (gemm_prime, called
  // before the barrier that ends the previous phase).
  bool primed = (int)blockIdx.x < units;
  if (primed) ws.prime(blockIdx.x, false);
  if (resident) {
    gstage<(PASS > kSmallM)>(in, 0, M, 0, K, xs, pitch_all);
    __syncthreads();
  }
  clk.lap(0);
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int tile = u / nk, chunk = u % nk;
    const int j0 = chunk * G / nk, j1 = (chunk + 1) * G / nk;
    const int rlo = tile * kGemmRows + warp * 16 + g, rhi = rlo + 8;
    // Passes inside the unit: the later ones read the unit's weights from L2.
    for (int m0 = 0, pass = 0; m0 < M; m0 += PASS, pass++) {
      clk.lap(2);
      const int mrows = min(PASS, M - m0);
      // A staging buffer holds PASS rows; resident inputs only M (rounded up to 8).
      const bool all = PASS == kPass && (!resident || mrows > PASS - 8);
      const __nv_bfloat16 *xrow = xs + (size_t)((resident ? m0 : 0) + g) * pitch + 8 * q;
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
      if (!primed) ws.prime(u);
      primed = false;
      for (int s0 = j0; s0 < j1; s0 += kSG) {
        const int s1 = min(s0 + kSG, j1);
        int cbase = 0;
        if (!resident) {
          clk.lap(1);
          __syncthreads();
          gstage<(PASS > kSmallM)>(in, m0, mrows, 32 * s0, 32 * (s1 - s0), xs, pitch);
          __syncthreads();
          cbase = 32 * s0;
          clk.lap(0);
        }
        for (int jb = s0; jb < s1; jb += D) {
#pragma unroll WStream<TY>::U
          for (int i = 0; i < D; i++) {
            const int j = jb + i;
            if (j < s1) {
              gemm_group_any<TY>(ws, i, j, j1, xrow + (32 * j - cbase), pitch, mrows, acc, all);
            }
          }
        }
      }
      clk.lap(1);
      if (nk == 1) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int t = m0 + nt * 8 + 2 * q + e;
            if (nt * 8 < mrows && t < M) epi(t, rlo, acc[nt][e], acc[nt][2 + e]);
          }
        continue;
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int t = m0 + nt * 8 + 2 * q + e;
          if (nt * 8 < mrows && t < M) {
            float *p = s.part + ((size_t)chunk * M + t) * npad;
            p[rlo] = acc[nt][e];
            p[rhi] = acc[nt][2 + e];
          }
        }
      if (spread) continue;
      // The block's partial sums before its count, the count before the
      // last block's reads: one thread fences for the block, as a grid
      // barrier does.
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        s_last = atomicAdd(&s.cnt[pass * tiles + tile], 1) == nk - 1;
        if (s_last) __threadfence();
      }
      __syncthreads();
      if (!s_last) continue;
      for (int e = threadIdx.x; e < mrows * kPairs; e += kThreads) {
        const int t = m0 + e / kPairs, p = e % kPairs;
        const int n = tile * kGemmRows + (p / 8) * 16 + p % 8;
        float lo, hi;
        chunk_sum(s.part, nk, (size_t)M * npad, (size_t)t * npad + n, lo, hi);
        epi(t, n, lo, hi);
      }
      if (threadIdx.x == 0) s.cnt[pass * tiles + tile] = 0;
    }
    clk.lap(2);
  }
  cp_wait<0>();
  if (!spread) return;
  gsync();
  clk.lap(3);
  const size_t total = (size_t)tiles * M * kPairs;
  for (size_t e = (size_t)blockIdx.x * kThreads + threadIdx.x; e < total; e += (size_t)gridDim.x * kThreads) {
    const int p = (int)(e % kPairs), t = (int)(e / kPairs % M), tile = (int)(e / kPairs / M);
    const int n = tile * kGemmRows + (p / 8) * 16 + p % 8;
    float lo, hi;
    chunk_sum(s.part, nk, (size_t)M * npad, (size_t)t * npad + n, lo, hi);
    epi(t, n, lo, hi);
  }
  clk.lap(4);
}

// gemm_local_t is gemm_t's product for a step of up to kLocalM rows and a
// matrix of 2..kWarps chunks, without partial sums in global memory: a
// unit is R = kWarps / nk m16 tiles with all their chunks (warp w: tile
// w / nk of the unit, chunk w % nk; warps past R × nk idle), so a block
// adds each tile's chunk sums itself, in chunk order from zero (chunk_sum's
// operations), in shared memory after the staged inputs. The inputs are
// staged once, all K columns (they are few rows: at one row 8-32 KB against
// the unit's 64-512 KB of weights). At one row this replaces the last
// block's chain (a fence, a counter, a fence, then the sums from L2: about
// 4 µs a product at batch 1; batch 1 1.82 -> 1.71 ms a step,
// bench/logs/issue15-round53-56-local.log). Up to 16 rows, every block
// staging every input column cost more than the sums (batch 16 2.39 ->
// 2.55 ms, round 54).
#ifndef RLM_LOCAL_M
#define RLM_LOCAL_M 1
#endif
constexpr int kLocalM = RLM_LOCAL_M;
static_assert(kLocalM >= 0 && kLocalM <= kSmallM, "kLocalM");
__host__ __device__ constexpr size_t gemm_local_smem(int M, int K) {
  return (size_t)((M + 7) / 8 * 8) * gemm_pitch(K) * 2 + (size_t)kWarps * ((M + 7) / 8) * 32 * 16;
}
__device__ __forceinline__ bool gemm_local_ok(const DMat &W, int M, size_t cap) {
  return M >= 1 && M <= kLocalM && W.nk > 1 && W.nk <= kWarps && gemm_local_smem(M, W.cols) <= cap - kRingBytes;
}
// gemm_local_t's units of a matrix: R = kWarps / nk m16 tiles each (gemm_prime
// primes the same first unit).
__device__ __forceinline__ int gemm_local_units(const DMat &W) {
  const int R = kWarps / W.nk;
  return ((W.rows + 15) / 16 + R - 1) / R;
}
template <int TY, class Epi>
__device__ RLM_GEMM_ATTR void gemm_local_t(const DMat W, const In in, int M, __nv_bfloat16 *xs, size_t cap,
                                          GemmScratch s, Epi epi) {
  constexpr int NT = kLocalM > 8 ? 2 : 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int K = W.cols, G = K / 32, nk = W.nk, R = kWarps / nk, nt_used = (M + 7) / 8;
  const int t16s = (W.rows + 15) / 16, units = gemm_local_units(W);
  const int r = warp / nk, chunk = warp % nk, j0 = chunk * G / nk, j1 = (chunk + 1) * G / nk;
  const bool active = r < R;
  WStream<TY> ws(W, xs, cap);
  constexpr int D = WStream<TY>::D;
  const int pitch = gemm_pitch(K);
  // [warp][n8 tile][lane]: the lane's four sums of each n8 tile of its chunk.
  float4 *part = reinterpret_cast<float4 *>(reinterpret_cast<char *>(xs) + (size_t)nt_used * 8 * pitch * 2);
  GemmClock clk(s.prof, 0);
  __syncthreads();  // the previous user of the shared memory is done
  // The first unit's weights are in flight already (gemm_prime).
  bool primed = (int)blockIdx.x < units;
  if (primed && active) {
    ws.at16(0, blockIdx.x * R + r);
    ws.prime_chunk(chunk, false);
  }
  gstage<false>(in, 0, M, 0, K, xs, pitch);
  __syncthreads();
  clk.lap(0);
  const __nv_bfloat16 *xrow = xs + (size_t)g * pitch + 8 * q;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    if (active) {
      float acc[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
      if (!primed) {
        ws.at16(0, u * R + r);
        ws.prime_chunk(chunk);
      }
      for (int jb = j0; jb < j1; jb += D) {
#pragma unroll WStream<TY>::U
        for (int i = 0; i < D; i++) {
          const int j = jb + i;
          if (j < j1) gemm_group_any<TY>(ws, i, j, j1, xrow + 32 * j, pitch, M, acc, false);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
        if (nt < nt_used) part[(warp * nt_used + nt) * 32 + lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
    }
    primed = false;
    clk.lap(1);
    __syncthreads();
    for (int e = threadIdx.x; e < R * nt_used * 32; e += kThreads) {
      const int rr = e / (nt_used * 32), nt = e / 32 % nt_used, ln = e % 32, t16 = u * R + rr;
      if (t16 >= t16s) continue;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      for (int c = 0; c < nk; c++) {
        const float4 p = part[((rr * nk + c) * nt_used + nt) * 32 + ln];
        v.x += p.x;
        v.y += p.y;
        v.z += p.z;
        v.w += p.w;
      }
#pragma unroll
      for (int ee = 0; ee < 2; ee++) {
        const int t = nt * 8 + 2 * (ln & 3) + ee;
        if (t < M) epi(t, t16 * 16 + (ln >> 2), ee ? v.y : v.x, ee ? v.w : v.z);
      }
    }
    __syncthreads();  // the sums are read before the next unit writes them
    clk.lap(2);
  }
  cp_wait<0>();
}

// gemm_whole_t is gemm_t's product (passes of kPass rows) in whole-K
// units, for a matrix of several chunks when M is large enough that its
// (tile, pass) pairs fill 3/8 of the grid or more (gemm_whole_ok; gate/up
// of a 128-token step: 128 units on 132 blocks, a 128-token prefill 5.80
// → 4.86 ms, bench/logs/issue15-round30-whole-7-8.log; at 1/6 of the
// grid, 32 blocks could not do the arithmetic 132 share, round 29): a
// block takes a tile's rows of one pass over every chunk, streaming the tile's weights once
// (across the chunks' boundaries), each chunk's accumulation from zero
// exactly as gemm_t's loop does it, and adds the chunks' sums in chunk
// order from zero (chunk_sum's order) in shared memory, after the staged
// inputs. The same operations for every output element, so a row's
// results do not depend on which mode its step took; without the partial
// sums in global memory (nk × the output) and the grid barrier.
__host__ __device__ constexpr size_t gemm_whole_smem() {
  return (size_t)kPass * gemm_pitch(kSG * 32) * 2 + (size_t)kWarps * (kPass / 8) * 32 * 16;
}
// The share of the grid (eighths) a product's (tile, pass) pairs must fill
// for whole-K units. 3/8 rather than 7/8, and from 17 rows rather than
// 65: gate/up at 17-64 rows (64 units) and the output and down projections
// at 512 rows (64 units) then skip their partial sums and grid barrier
// (batch 64 3.95 → 3.81 ms, a 512-token prefill 14.97 → 11.19 ms,
// bench/logs/issue15-round34-whole-fill.log). Below about a quarter of
// the grid the blocks left idle cost more than the sums (round 29).
#ifndef RLM_WHOLE_FILL
#define RLM_WHOLE_FILL 3
#endif
__device__ __forceinline__ bool gemm_whole_ok(const DMat &W, int M, size_t cap) {
  const int tiles = (W.rows + kGemmRows - 1) / kGemmRows, passes = (M + kPass - 1) / kPass;
  return W.nk > 1 && M > kSmallM && W.type != RLM_TYPE_QANY && tiles * passes * 8 >= (int)gridDim.x * RLM_WHOLE_FILL &&
         gemm_whole_smem() <= cap - kRingBytes;
}
template <int TY, class Epi>
__device__ RLM_GEMM_ATTR void gemm_whole_t(const DMat W, const In in, int M, __nv_bfloat16 *xs, size_t cap, GemmScratch s,
                                          Epi epi) {
  constexpr int PASS = kPass, NT = PASS / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int K = W.cols, G = K / 32, nk = W.nk;
  const int tiles = (W.rows + kGemmRows - 1) / kGemmRows, passes = (M + PASS - 1) / PASS;
  WStream<TY> ws(W, xs, cap);
  constexpr int D = WStream<TY>::D;
  const int pitch = gemm_pitch(kSG * 32);
  // [warp][n8 tile][lane]: the lane's four sums of each n8 tile.
  float4 *tot = reinterpret_cast<float4 *>(reinterpret_cast<char *>(xs) + (size_t)PASS * pitch * 2) +
                (size_t)warp * NT * 32 + lane;
  GemmClock clk(s.prof, 1);
  __syncthreads();  // the previous user of the shared memory is done
  cp_wait<0>();     // gemm_prime's copies are of gemm_t's first unit: not used here
  __syncwarp();
  for (int u = blockIdx.x; u < tiles * passes; u += gridDim.x) {
    // A tile's passes go to consecutive blocks: they stream its weights at
    // about the same time, so HBM gives them once and L2 the rest.
    const int tile = u / passes, m0 = u % passes * PASS, mrows = min(PASS, M - m0);
    const int rlo = tile * kGemmRows + warp * 16 + g;
    const __nv_bfloat16 *xrow = xs + (size_t)g * pitch + 8 * q;
    // One stream over the tile's groups 0..G (the ring's stage of group j
    // is j % D), staged kSG groups at a time; at each chunk's last group
    // its accumulator is added into tot and starts again from zero.
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    int chunk = 0, cend = G / nk;
    ws.at(tile * nk);
#pragma unroll
    for (int i = 0; i < D; i++) {
      if (i < G) ws.issue(i, i);
      cp_commit();
    }
    for (int s0 = 0; s0 < G; s0 += kSG) {
      const int s1 = min(s0 + kSG, G);
      clk.lap(1);
      __syncthreads();
      gstage<true>(in, m0, mrows, 32 * s0, 32 * (s1 - s0), xs, pitch);
      __syncthreads();
      const int cbase = 32 * s0;
      clk.lap(0);
      for (int jb = s0; jb < s1; jb += D) {
#pragma unroll
        for (int i = 0; i < D; i++) {
          const int j = jb + i;
          if (j < s1) {
            gemm_group<TY>(ws, i, j, G, xrow + (32 * j - cbase), pitch, mrows, acc, true);
            if (j + 1 == cend) {  // the chunk's sum into tot, in chunk order from zero (chunk_sum's)
#pragma unroll
              for (int nt = 0; nt < NT; nt++) {
                if (nt * 8 < mrows) {
                  float4 v = chunk ? tot[nt * 32] : make_float4(0.f, 0.f, 0.f, 0.f);
                  v.x += acc[nt][0];
                  v.y += acc[nt][1];
                  v.z += acc[nt][2];
                  v.w += acc[nt][3];
                  tot[nt * 32] = v;
                }
                acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
              }
              chunk++;
              cend = (chunk + 1) * G / nk;
            }
          }
        }
      }
    }
    clk.lap(1);
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int t = m0 + nt * 8 + 2 * q + e;
        if (nt * 8 < mrows && t < M) {
          const float4 v = tot[nt * 32];
          epi(t, rlo, e ? v.y : v.x, e ? v.w : v.z);
        }
      }
    clk.lap(2);
  }
  cp_wait<0>();
}

// gemm_halves_t is gemm_whole_t's product for a matrix of two chunks whose
// whole-K units (256 weight rows) would leave much of the grid idle (gate/up
// at 17-64 rows: 64 units for 132 blocks, the slowest block 1,134 µs a step
// against a mean of 668 at batch 64, bench/logs/issue15-round57-block-profile.log):
// a unit is 128 weight rows of one pass; the block's first eight warps take
// its eight m16 tiles over chunk 0, the last eight the same tiles over chunk
// 1, each half's inputs staged in its own buffer, kSGH groups at a time.
// Each chunk's sum is one accumulator from zero over its groups in order,
// and the two are added in chunk order from zero in shared memory
// (chunk_sum's, and gemm_whole_t's, operations): the same bits.
// gemm_prime<true> primes its first unit.
constexpr int kSGH = 8;  // 32-column groups a half stages at a time (a multiple of every ring's depth)
__host__ __device__ constexpr size_t gemm_halves_smem() {
  return (size_t)kPass * gemm_pitch(2 * kSGH * 32) * 2 + (size_t)kWarps * (kPass / 8) * 32 * 16;
}
#ifndef RLM_HALVES
#define RLM_HALVES 1
#endif
// From 2 rows on (one row takes gemm_local_t): up to kSmallM rows in
// passes of kSmallM (gemm_t's spread product before: the chunks' partial
// sums through L2, a grid barrier of its own, the sums spread over the
// grid), above in passes of kPass. Not for F32 weights (a stage of them
// would not fit the ring twice over a half's staging).
__device__ __forceinline__ int gemm_halves_pass(int M) { return M <= kSmallM ? kSmallM : kPass; }
// Its units of 128 weight rows (gemm_prime primes the same first unit).
__device__ __forceinline__ int gemm_halves_units(const DMat &W) { return (W.rows + kWarps / 2 * 16 - 1) / (kWarps / 2 * 16); }
__device__ __forceinline__ bool gemm_halves_ok(const DMat &W, int M, size_t cap) {
  const int tiles = (W.rows + kGemmRows - 1) / kGemmRows, passes = (M + kPass - 1) / kPass;
  // Half-size units where they fill the grid better than whole ones: at
  // most about one round of them.
  return RLM_HALVES && !kQmod && W.type != RLM_TYPE_F32 && W.type != RLM_TYPE_QANY && W.nk == 2 && W.cols % 64 == 0 && M > kLocalM &&
         2 * tiles * passes * 8 <= (int)gridDim.x * 9 && gemm_halves_smem() <= cap - kRingBytes;
}
// A unit's first ring stages for a warp: its m16 tile, its half's chunk.
template <int TY>
__device__ __forceinline__ void gemm_halves_first(WStream<TY> &ws, int unit, bool copy) {
  constexpr int HW = kWarps / 2, D = WStream<TY>::D;
  const int GH = ws.W.cols / 64, j0 = (ws.warp / HW) * GH;
  ws.at16(0, unit * HW + ws.warp % HW);
#pragma unroll
  for (int i = 0; i < D; i++) {
    if (i < GH) ws.issue(j0 + i, i, copy);
    if (copy) cp_commit();
  }
}
template <int TY, int PASS, class Epi>
__device__ RLM_GEMM_ATTR void gemm_halves_t(const DMat W, const In in, int M, __nv_bfloat16 *xs, size_t cap,
                                           GemmScratch s, Epi epi) {
  constexpr int NT = PASS / 8, HW = kWarps / 2;  // HW: warps a half
  static_assert(kSGH % WStream<TY>::D == 0, "a half's staging holds whole ring rounds");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int half = warp / HW, hw = warp % HW;
  const int G = W.cols / 32, GH = G / 2;  // chunk 0: groups [0, GH); chunk 1: [GH, G) (nk = 2, G even)
  const int units = gemm_halves_units(W), passes = (M + PASS - 1) / PASS;
  WStream<TY> ws(W, xs, cap);
  constexpr int D = WStream<TY>::D;
  // The halves' inputs side by side in a staged row: chunk 0's kSGH
  // groups, then chunk 1's.
  const int pitch = gemm_pitch(2 * kSGH * 32);
  // [warp][n8 tile][lane]: chunk 0's sums (the first half's warps), chunk 1's (the second's).
  float4 *const sums = reinterpret_cast<float4 *>(reinterpret_cast<char *>(xs) + (size_t)PASS * pitch * 2);
  GemmClock clk(s.prof, PASS > kSmallM);
  __syncthreads();  // the previous user of the shared memory is done
  // The first unit's weights are in flight already (gemm_prime).
  bool primed = true;
  for (int u = blockIdx.x; u < units * passes; u += gridDim.x) {
    // A unit's passes go to consecutive blocks (they share its weights through L2).
    const int unit = u / passes, m0 = u % passes * PASS, mrows = min(PASS, M - m0);
    const int t16 = unit * HW + hw, j0 = half * GH, j1 = j0 + GH;
    const __nv_bfloat16 *xrow = xs + (size_t)g * pitch + half * kSGH * 32 + 8 * q;
    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    gemm_halves_first(ws, unit, !primed);
    primed = false;
    for (int s0 = 0; s0 < GH; s0 += kSGH) {
      const int s1 = min(s0 + kSGH, GH);
      clk.lap(1);
      __syncthreads();
      // Chunk 0's groups s0..s0+kSGH at 0 (past s1 they are staged and not
      // read), chunk 1's groups GH+s0..GH+s1 from kSGH groups on.
      gstage<true>(in, m0, mrows, 32 * s0, 32 * (kSGH + s1 - s0), xs, pitch, 32 * kSGH, 32 * (GH - kSGH));
      __syncthreads();
      clk.lap(0);
      for (int jb = s0; jb < s1; jb += D) {
#pragma unroll
        for (int i = 0; i < D; i++) {
          const int j = jb + i;
          if (j < s1) gemm_group<TY>(ws, i, j0 + j, j1, xrow + 32 * (j - s0), pitch, mrows, acc, true);
        }
      }
    }
    clk.lap(1);
#pragma unroll
    for (int nt = 0; nt < NT; nt++) sums[(warp * NT + nt) * 32 + lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
    __syncthreads();
    if (half == 0) {
      const int rlo = t16 * 16 + g;
#pragma unroll
      for (int nt = 0; nt < NT; nt++) {
        const float4 c0 = sums[(warp * NT + nt) * 32 + lane], c1 = sums[((warp + HW) * NT + nt) * 32 + lane];
        float v[4] = {0.f, 0.f, 0.f, 0.f};  // chunk order from zero
        v[0] += c0.x;
        v[1] += c0.y;
        v[2] += c0.z;
        v[3] += c0.w;
        v[0] += c1.x;
        v[1] += c1.y;
        v[2] += c1.z;
        v[3] += c1.w;
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int t = m0 + nt * 8 + 2 * q + e;
          if (nt * 8 < mrows && t < M) epi(t, rlo, v[e], v[2 + e]);
        }
      }
    }
    __syncthreads();  // the sums are read before the next unit writes them
    clk.lap(2);
  }
  cp_wait<0>();
}

// gemm_whole2_t takes a product of one chunk (the LM head) at many rows
// in units of two m16 tiles a warp: a pass of kPass input rows against
// 2 × kGemmRows weight rows, so that every input fragment a warp reads
// from shared memory feeds two mma and every weight fragment eight (1.75
// wavefronts of shared memory an mma against 2.75). A tile pair's passes
// go to consecutive blocks, which share its weights through L2, as in
// gemm_whole_t. Each output element gets gemm_t's operations: one
// accumulator from zero over the groups in order, both k16 steps of a
// group in order, handed to the epilogue as it is. Not for products of
// several chunks: their running sums (128 KB a block) do not fit in shared
// memory, and through L2 the 2048-row gate/up and down products took 711
// and 375 µs against 639 and 328 (bench/logs/issue15-round45-two-tiles.log).
template <int TY, int NT>
__device__ __forceinline__ void gemm_group2(WStream<TY, 2> &ws, int i, int j, int jend, const __nv_bfloat16 *xc,
                                            int pitch, float (&acc)[2][NT][4]) {
  constexpr int D = WStream<TY, 2>::D;
  cp_wait<D - 1>();  // this lane's copies of group j are in
  __syncwarp();      // and every lane's
  WRaw<TY> w0l, w0h, w1l, w1h;
  ws.read(w0l, i, 0, 0, j);
  ws.read(w0h, i, 0, 1, j);
  ws.read(w1l, i, 1, 0, j);
  ws.read(w1h, i, 1, 1, j);
  __syncwarp();  // every lane has read stage i before it is refilled
  if (j + D < jend) ws.issue(j + D, i);
  cp_commit();
  const uint4 lo0 = w0l.bf16(), hi0 = w0h.bf16(), lo1 = w1l.bf16(), hi1 = w1h.bf16();
  // Per n8 tile, the two tiles' first k16 steps, then their second: an
  // accumulator's two steps one mma apart. (The first steps of every n8
  // tile before any second step, as gemm_group does, took 16 more registers
  // and spilled: prefill 2048 39.2 ms against 31.9, round 45.)
#pragma unroll
  for (int nt = 0; nt < NT; nt++) {
    const uint4 b = *reinterpret_cast<const uint4 *>(xc + (size_t)nt * 8 * pitch);
    mma_bf16(acc[0][nt], lo0.x, hi0.x, lo0.y, hi0.y, b.x, b.y);
    mma_bf16(acc[1][nt], lo1.x, hi1.x, lo1.y, hi1.y, b.x, b.y);
    mma_bf16(acc[0][nt], lo0.z, hi0.z, lo0.w, hi0.w, b.z, b.w);
    mma_bf16(acc[1][nt], lo1.z, hi1.z, lo1.w, hi1.w, b.z, b.w);
  }
}

// Two tiles a warp for a product of one chunk whose (tile pair, pass)
// units fill 7/8 of the grid, its weights BF16, F16 or Q8_0 (an F32 stage
// would not leave the ring two). The LM head from 64 rows on: batch 256
// 9.13 -> 8.89 ms a step (bench/logs/issue15-round46-lm-head-two-tiles.log;
// gemm_whole_t for it instead, 9.21-9.25 ms).
#ifndef RLM_WHOLE2
#define RLM_WHOLE2 1
#endif
__device__ __forceinline__ bool gemm_whole2_ok(const DMat &W, int M, size_t cap) {
  const int tiles = (W.rows + 2 * kGemmRows - 1) / (2 * kGemmRows), passes = (M + kPass - 1) / kPass;
  return RLM_WHOLE2 && W.nk == 1 && M > kSmallM && W.type != RLM_TYPE_F32 && W.type != RLM_TYPE_QANY &&
         tiles * passes * 8 >= (int)gridDim.x * 7 &&
         (size_t)kPass * gemm_pitch(kSG * 32) * 2 <= cap - kRingBytes;
}
template <int TY, class Epi>
__device__ RLM_GEMM_ATTR void gemm_whole2_t(const DMat W, const In in, int M, __nv_bfloat16 *xs, size_t cap,
                                           GemmScratch s, Epi epi) {
  constexpr int PASS = kPass, NT = PASS / 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int G = W.cols / 32;
  const int tiles = (W.rows + 2 * kGemmRows - 1) / (2 * kGemmRows), passes = (M + PASS - 1) / PASS;
  WStream<TY, 2> ws(W, xs, cap);
  constexpr int D = WStream<TY, 2>::D;
  const int pitch = gemm_pitch(kSG * 32);
  GemmClock clk(s.prof, 1);
  __syncthreads();  // the previous user of the shared memory is done
  cp_wait<0>();     // gemm_prime's copies are of gemm_t's first unit: not used here
  __syncwarp();
  for (int u = blockIdx.x; u < tiles * passes; u += gridDim.x) {
    const int tile = u / passes, m0 = u % passes * PASS, mrows = min(PASS, M - m0);
    const int r0 = tile * 2 * kGemmRows + warp * 32 + g;  // the lane's row of its first tile; + 16 in the second
    const __nv_bfloat16 *xrow = xs + (size_t)g * pitch + 8 * q;
    float acc[2][NT][4];
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
      for (int nt = 0; nt < NT; nt++) acc[t][nt][0] = acc[t][nt][1] = acc[t][nt][2] = acc[t][nt][3] = 0.f;
    ws.at(tile);
#pragma unroll
    for (int i = 0; i < D; i++) {
      if (i < G) ws.issue(i, i);
      cp_commit();
    }
    for (int s0 = 0; s0 < G; s0 += kSG) {
      const int s1 = min(s0 + kSG, G);
      clk.lap(1);
      __syncthreads();
      gstage<true>(in, m0, mrows, 32 * s0, 32 * (s1 - s0), xs, pitch);
      __syncthreads();
      const int cbase = 32 * s0;
      clk.lap(0);
      for (int jb = s0; jb < s1; jb += D) {
#pragma unroll
        for (int i = 0; i < D; i++) {
          const int j = jb + i;
          if (j < s1) gemm_group2<TY>(ws, i, j, G, xrow + (32 * j - cbase), pitch, acc);
        }
      }
    }
    clk.lap(1);
#pragma unroll
    for (int t = 0; t < 2; t++)
#pragma unroll
      for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int tt = m0 + nt * 8 + 2 * q + e;
          if (nt * 8 < mrows && tt < M) epi(tt, r0 + 16 * t, acc[t][nt][e], acc[t][nt][2 + e]);
        }
    clk.lap(2);
  }
  cp_wait<0>();
}

// gemm_prime starts the copies of this block's first unit of W into the
// ring, so that they run while the block waits at the barrier before the
// product (and through the phase before it: the ring is used by nothing
// else). Every gemm is primed, once, with its matrix, before it runs.
// kHalves: as gemm's (the first unit of gemm_halves_t where it takes the product).
template <bool kHalves = false>
__device__ __noinline__ void gemm_prime(const DMat &W, int M, void *smem, size_t cap) {
  const bool local = gemm_local_ok(W, M, cap), halves = kHalves && !local && gemm_halves_ok(W, M, cap);
  auto go = [&](auto ws) {
    if (halves) {
      const int passes = (M + gemm_halves_pass(M) - 1) / gemm_halves_pass(M);
      if ((int)blockIdx.x < gemm_halves_units(W) * passes)
        gemm_halves_first(ws, (int)blockIdx.x / passes, true);
    } else if (local) {  // gemm_local_t's first unit
      const int R = kWarps / W.nk, r = ws.warp / W.nk;
      if (r < R && (int)blockIdx.x < gemm_local_units(W)) {
        ws.at16(0, blockIdx.x * R + r);
        ws.prime_chunk(ws.warp % W.nk);
      }
    } else if ((int)blockIdx.x < ws.units()) ws.prime(blockIdx.x);
  };
  if constexpr (kQmod) {  // device_q.cu's module: BF16 and the block-quantized types only
    if (W.type == RLM_TYPE_QANY) go(WStream<RLM_TYPE_QANY>(W, smem, cap));
    else go(WStream<RLM_TYPE_BF16>(W, smem, cap));
    return;
  }
  if (W.type == RLM_TYPE_BF16) go(WStream<RLM_TYPE_BF16>(W, smem, cap));
  else if (W.type == RLM_TYPE_F16) go(WStream<RLM_TYPE_F16>(W, smem, cap));
  else if (W.type == RLM_TYPE_Q8_0) go(WStream<RLM_TYPE_Q8_0>(W, smem, cap));
  else if (kQany && W.type == RLM_TYPE_QANY) go(WStream<RLM_TYPE_QANY>(W, smem, cap));
  else go(WStream<RLM_TYPE_F32>(W, smem, cap));
}

// The three shapes the block-quantized module's products take: gemm_local_t
// at one row, gemm_t in passes of kSmallM up to kSmallM rows and of kPass
// above.
template <int TY, class Epi>
__device__ __forceinline__ void gemm_three(const DMat &W, const In &in, int M, __nv_bfloat16 *xs, size_t cap, GemmScratch s,
                                           Epi epi) {
  if (gemm_local_ok(W, M, cap)) gemm_local_t<TY>(W, in, M, xs, cap, s, epi);
  else if (M <= kSmallM) gemm_t<TY, kSmallM>(W, in, M, xs, cap, s, epi);
  else gemm_t<TY, kPass>(W, in, M, xs, cap, s, epi);
}

// kHalves: the caller may take gemm_halves_t's units (the gate/up phase and
// the tests': the only products of two chunks; instantiated for them
// alone, as ptxas takes a long time over every instance).
//
// The block-quantized types (RLM_TYPE_QANY, one instance whatever the
// types: the run's type is read at run time, the same for every lane of a
// half tile) take three shapes only: gemm_local_t at one row, gemm_t in
// passes of kSmallM up to kSmallM rows and of kPass above. Every output
// element gets the same operations in them as in the shapes the other
// types take (see the top of this file), so batch invariance holds; and
// ptxas compiles 3 more instances per epilogue instead of 6 per type.
template <bool kHalves = false, class Epi>
__device__ void gemm(const DMat &W, const In &in, int M, void *smem, size_t cap, GemmScratch s, Epi epi) {
  __nv_bfloat16 *xs = reinterpret_cast<__nv_bfloat16 *>(smem);
  if constexpr (kQany) {
    if (W.type == RLM_TYPE_QANY) {
      gemm_three<RLM_TYPE_QANY>(W, in, M, xs, cap, s, epi);
      return;
    }
  }
  if constexpr (kQmod) {  // device_q.cu's module: the other matrices are BF16, in the same three shapes
    gemm_three<RLM_TYPE_BF16>(W, in, M, xs, cap, s, epi);
    return;
  }
  if (gemm_local_ok(W, M, cap)) {
    if (W.type == RLM_TYPE_BF16) gemm_local_t<RLM_TYPE_BF16>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_F16) gemm_local_t<RLM_TYPE_F16>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_Q8_0) gemm_local_t<RLM_TYPE_Q8_0>(W, in, M, xs, cap, s, epi);
    else gemm_local_t<RLM_TYPE_F32>(W, in, M, xs, cap, s, epi);
    return;
  }
  if constexpr (kHalves) {
    if (gemm_halves_ok(W, M, cap)) {
      if (gemm_halves_pass(M) == kSmallM) {
        if (W.type == RLM_TYPE_BF16) gemm_halves_t<RLM_TYPE_BF16, kSmallM>(W, in, M, xs, cap, s, epi);
        else if (W.type == RLM_TYPE_F16) gemm_halves_t<RLM_TYPE_F16, kSmallM>(W, in, M, xs, cap, s, epi);
        else gemm_halves_t<RLM_TYPE_Q8_0, kSmallM>(W, in, M, xs, cap, s, epi);
      } else {
        if (W.type == RLM_TYPE_BF16) gemm_halves_t<RLM_TYPE_BF16, kPass>(W, in, M, xs, cap, s, epi);
        else if (W.type == RLM_TYPE_F16) gemm_halves_t<RLM_TYPE_F16, kPass>(W, in, M, xs, cap, s, epi);
        else gemm_halves_t<RLM_TYPE_Q8_0, kPass>(W, in, M, xs, cap, s, epi);
      }
      return;
    }
  }
  if (M <= kSmallM) {
    if (W.type == RLM_TYPE_BF16) gemm_t<RLM_TYPE_BF16, kSmallM>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_F16) gemm_t<RLM_TYPE_F16, kSmallM>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_Q8_0) gemm_t<RLM_TYPE_Q8_0, kSmallM>(W, in, M, xs, cap, s, epi);
    else gemm_t<RLM_TYPE_F32, kSmallM>(W, in, M, xs, cap, s, epi);
    return;
  }
  if (gemm_whole2_ok(W, M, cap)) {
    if (W.type == RLM_TYPE_BF16) gemm_whole2_t<RLM_TYPE_BF16>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_F16) gemm_whole2_t<RLM_TYPE_F16>(W, in, M, xs, cap, s, epi);
    else gemm_whole2_t<RLM_TYPE_Q8_0>(W, in, M, xs, cap, s, epi);
    return;
  }
  if (gemm_whole_ok(W, M, cap)) {
    if (W.type == RLM_TYPE_BF16) gemm_whole_t<RLM_TYPE_BF16>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_F16) gemm_whole_t<RLM_TYPE_F16>(W, in, M, xs, cap, s, epi);
    else if (W.type == RLM_TYPE_Q8_0) gemm_whole_t<RLM_TYPE_Q8_0>(W, in, M, xs, cap, s, epi);
    else gemm_whole_t<RLM_TYPE_F32>(W, in, M, xs, cap, s, epi);
    return;
  }
  if (W.type == RLM_TYPE_BF16) gemm_t<RLM_TYPE_BF16, kPass>(W, in, M, xs, cap, s, epi);
  else if (W.type == RLM_TYPE_F16) gemm_t<RLM_TYPE_F16, kPass>(W, in, M, xs, cap, s, epi);
  else if (W.type == RLM_TYPE_Q8_0) gemm_t<RLM_TYPE_Q8_0, kPass>(W, in, M, xs, cap, s, epi);
  else gemm_t<RLM_TYPE_F32, kPass>(W, in, M, xs, cap, s, epi);
}

// The pairs of the QKV matrix, in the order its rows are permuted to at
// upload (pair p: rows 16⌊p/8⌋ + p%8 and that + 8): for each Q head, then
// each K head, the RoPE pairs (rope index k; neox: rows k and k + rope/2,
// else 2k and 2k + 1), then the unrotated dimensions two by two (rope -1);
// then V two by two. Host and device share it.
struct QKVPair {
  int r0, r1, rope;
};
__host__ __device__ inline QKVPair qkv_pair(int p, int n_head, int n_kv, int hd, int rope_dim, int neox) {
  const int qd = n_head * hd, kvd = n_kv * hd, half = rope_dim / 2, per_head = hd / 2;
  const int head_pairs = (n_head + n_kv) * per_head;
  if (p >= head_pairs) {
    const int r0 = qd + kvd + 2 * (p - head_pairs);
    return QKVPair{r0, r0 + 1, -1};
  }
  const int head = p / per_head, k = p % per_head;
  const int base = head < n_head ? head * hd : qd + (head - n_head) * hd;
  if (k < half) return neox ? QKVPair{base + k, base + k + half, k} : QKVPair{base + 2 * k, base + 2 * k + 1, k};
  const int r0 = base + rope_dim + 2 * (k - half);
  return QKVPair{r0, r0 + 1, -1};
}

}  // namespace

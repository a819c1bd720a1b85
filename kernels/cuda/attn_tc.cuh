#pragma once
// attn_tc.cuh: attention on the tensor cores (issue 15), one algorithm for
// prefill chunks and decode tokens alike.
//
// A unit is (tile, KV head, head subset): a tile is up to 16 / hpt tokens
// of one step entry (consecutive positions of one slot: the leader lists
// the tiles, exec.cuh), and the unit's 16 query rows are those tokens ×
// hpt query heads of the KV head's group (hpt = min(group, 16); a larger
// group is cut into subsets). Each query row attends positions lo..pos of
// its slot (lo: 0, or the sliding window's first position).
//
// The positions are cut into chunks of kAttnChunk = 16 at multiples of 16.
// A chunk's partial for a row, from its K and V (float16, staged in shared
// memory with cp.async, read with ldmatrix):
//     S = Q Kᵀ (mma m16n8k16, Q rounded once to float16, FP32 accumulation),
//     s = S · scale · log2 e, masked to -∞ outside lo..pos,
//     m_c = max s, p = 2^(s − m_c), l_c = Σ p (FP32, fixed order),
//     O_c = P V (P rounded to float16, FP32 accumulation, from zero);
// and a row's result is the left fold of its chunks' partials in position
// order, from (m = -∞, l = 0, O = 0):
//     M = max(m, m_c), a = 2^(m − M), b = 2^(m_c − M),
//     l = l·a + l_c·b, O = O·a + O_c·b, m = M
// (a chunk with no position of the row leaves it unchanged), then O / l.
// Every operation is per row: the mma's rows are independent, and no
// value of one row reaches another. So a row's result does not depend on
// its tile mates, on how the chunks are shared among warps, or on how
// many tokens the step has: batch invariant, across prompt chunkings too.
//
// Warps per unit (G): with few units (small decode batches), a group of G
// warps (a power of two up to the block's 16, as many as the grid's warps
// allow) takes a unit, its warps computing G consecutive chunks at a time;
// they leave their partials in shared memory (or global scratch,
// Dev.apart, for head dimensions above 64) and the group's first warp
// folds them in order. With many units (prefill, large
// batches), a warp takes a unit and folds each chunk as it goes, with the
// next chunk's K and V in flight when they fit twice in its shared memory.
// The same partials, folded in the same order: the same bits either way.
#include "mma.cuh"

namespace {

constexpr int kAttnChunk = 16;           // positions a chunk
constexpr int kAttnRegionBytes = 9216;   // a warp's shared memory: K and V of one or two chunks
static_assert(kWarps * kAttnRegionBytes <= sizeof(float) * kSmemFloats,
              "the attention's shared memory");

// Whether the tensor-core attention takes a head dimension of hd (those
// of the architectures' real shapes and of the tests' tiny ones), and the
// partial scratch a warp needs (floats).
__host__ __device__ constexpr bool attn_tc_ok(int hd) { return hd == 32 || hd == 64 || hd == 96 || hd == 128; }
__host__ __device__ constexpr int attn_part_floats(int hd) { return 16 * hd + 32; }

__device__ __forceinline__ void mma_f16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                        unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ unsigned pack_h2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned *>(&h);
}
// Named barrier of a group of n threads (id 1..15; 0 is __syncthreads).
__device__ __forceinline__ void group_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }

// The Dev fields the phase reads, loaded once into registers: read
// through Dev (in global memory), each would be loaded again after every
// store and cp.async the compiler cannot prove apart from it (a chain of
// loads before each K/V copy and each output store).
struct AttnEnv {
  const float *q;
  float *att;
  __nv_bfloat16 *ab;
  const __half *kc, *vc;  // the layer's K and V cache
  const int *btab;
  const int4 *tiles;
  int n_head, n_kv, hpt, nsub, max_bpb, window, bs;
  size_t blk;  // elements from one KV block to the next: n_kv × bs × hd
  bool b16;    // the output in BF16 (d.ab) for the tensor-core output projection of more than kSmallM rows
};
template <int HD> __device__ __forceinline__ AttnEnv attn_env(const Dev &d, int layer) {
  AttnEnv E;
  E.q = d.q;
  E.att = d.att;
  E.ab = d.ab;
  const size_t lay = (size_t)layer * d.num_blocks * d.n_kv * d.bs * HD;
  E.kc = d.kcache + lay;
  E.vc = d.vcache + lay;
  E.btab = d.btab;
  E.tiles = d.a_tile;
  E.n_head = d.n_head;
  E.n_kv = d.n_kv;
  E.hpt = d.a_hpt;
  E.nsub = d.a_nsub;
  E.max_bpb = d.max_bpb;
  E.window = d.window;
  E.bs = d.bs;
  E.blk = (size_t)d.n_kv * d.bs * HD;
  E.b16 = d.mma && d.n_tok > kSmallM;
  return E;
}

// A unit as a lane sees it: its two query rows (g and g + 8 of the m16
// tile, g = lane / 4), the tile's positions, Q as mma A fragments.
template <int HD> struct AttnUnit {
  int kvh, sub, t0;   // KV head, head subset, the tile's first token
  int plo, phi;       // the tile's positions: plo..phi (every row's lo..pos inside)
  const int *tab;     // the slot's block table
  int lo[2], pos[2];  // the lane's rows (pos -1: no row)
  unsigned qa[HD / 16][4];
};

// A row's fold state for the lane's two rows and its 4 values of each n8
// tile of the head dimension.
template <int HD> struct AttnRun {
  float m[2], l[2];
  float o[HD / 8][4];
};

// The lane's row i (0: g, 1: g + 8) of U in d.q (its Q) or d.att (its
// result), as an offset.
template <int HD> __device__ __forceinline__ size_t attn_row_at(const AttnEnv &E, const AttnUnit<HD> &U, int i) {
  const int r = (threadIdx.x & 31) / 4 + 8 * i, group = E.n_head / E.n_kv;
  const int head = U.kvh * group + U.sub * E.hpt + r % E.hpt;
  return (size_t)(U.t0 + r / E.hpt) * (E.n_head * HD) + head * HD;
}

// Unit u's tile and rows: one load (the leader's tile record: first
// token, tokens, slot, first position; a tile's tokens are consecutive
// positions of its slot).
template <int HD> __device__ __forceinline__ void attn_unit(const AttnEnv &E, int u, AttnUnit<HD> &U) {
  const int lane = threadIdx.x & 31, g = lane >> 2;
  const int group = E.n_head / E.n_kv, hpt = E.hpt, nsub = E.nsub;
  const int tile = u / (E.n_kv * nsub), rem = u % (E.n_kv * nsub);
  U.kvh = rem / nsub;
  const int sub = U.sub = rem % nsub;
  const int4 tv = __ldcg(E.tiles + tile);  // written by the leader this step
  const int t0 = U.t0 = tv.x, nt = tv.y, p0 = tv.w;
  U.tab = E.btab + (size_t)tv.z * E.max_bpb;
  U.plo = E.window > 0 ? max(0, p0 - E.window + 1) : 0;
  U.phi = p0 + nt - 1;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const int r = g + 8 * i, tt = r / hpt, hh = sub * hpt + r % hpt;
    const bool ok = tt < nt && hh < group;
    U.pos[i] = ok ? p0 + tt : -1;
    U.lo[i] = ok && E.window > 0 ? max(0, U.pos[i] - E.window + 1) : 0;
  }
}

// Q of the lane's rows as A fragments: row g (regs 0, 2) and g + 8 (1, 3),
// columns 2c, 2c + 1 (0, 1) and 2c + 8, 2c + 9 (2, 3) of each 16-column
// step. After the unit's first K/V copies are issued, so that the two
// loads' latencies overlap.
template <int HD> __device__ __forceinline__ void attn_q(const AttnEnv &E, AttnUnit<HD> &U) {
  const int c = threadIdx.x & 3;
  const float *qrow[2];
#pragma unroll
  for (int i = 0; i < 2; i++) qrow[i] = U.pos[i] >= 0 ? E.q + attn_row_at(E, U, i) : nullptr;
#pragma unroll
  for (int k = 0; k < HD / 16; k++)
#pragma unroll
    for (int i = 0; i < 2; i++) {
      float2 v0 = make_float2(0.f, 0.f), v1 = v0;
      if (qrow[i]) {
        const float *q = qrow[i] + 16 * k + 2 * c;
        v0 = *reinterpret_cast<const float2 *>(q);
        v1 = *reinterpret_cast<const float2 *>(q + 8);
      }
      U.qa[k][i] = pack_h2(v0.x, v0.y);
      U.qa[k][2 + i] = pack_h2(v1.x, v1.y);
    }
}

// The K and V of chunk ch (positions 16ch..16ch + 15) into a stage at
// shared address st: K rows, then V rows, (HD + 8) halves apart; the
// positions outside the tile's plo..phi are zeros. The block table's
// entries are loaded first, all at once, then every copy issued.
template <int HD> __device__ __forceinline__ void attn_issue(const AttnEnv &E, const AttnUnit<HD> &U, int ch, uint32_t st) {
  const int lane = threadIdx.x & 31;
  constexpr int per_row = HD / 8;  // 16-byte pieces of a position's K (or V); lane l takes pieces l, l + 32, …
  constexpr int kvstride = kAttnChunk * (HD + 8) * 2;  // bytes from the K rows to the V rows
  constexpr int per_mat = kAttnChunk * per_row, n = per_mat / 32;
  const __half *kh = E.kc + (size_t)U.kvh * E.bs * HD, *vh = E.vc + (size_t)U.kvh * E.bs * HD;
  size_t off[n];
#pragma unroll
  for (int k = 0; k < n; k++) {
    const int i = lane + 32 * k, row = i / per_row, col = i % per_row;
    const int p = ch * kAttnChunk + row;
    off[k] = p >= U.plo && p <= U.phi ? ((size_t)U.tab[p / E.bs] * E.blk + (size_t)(p % E.bs) * HD + col * 8) : ~(size_t)0;
  }
#pragma unroll
  for (int k = 0; k < n; k++) {
    const int i = lane + 32 * k, row = i / per_row, col = i % per_row;
    const uint32_t dst = st + (uint32_t)((row * (HD + 8) + col * 8) * 2);
    const bool ok = off[k] != ~(size_t)0;
    cp16(dst, kh + (ok ? off[k] : 0), ok ? 16 : 0);
    cp16(dst + kvstride, vh + (ok ? off[k] : 0), ok ? 16 : 0);
  }
}

// A chunk's scores, row maxima m_c, sums l_c and P as A fragments.
template <int HD>
__device__ __forceinline__ void attn_scores(const AttnUnit<HD> &U, uint32_t st, int ch, float scale2, float (&mc)[2],
                                            float (&lc)[2], unsigned (&pa)[4]) {
  const int lane = threadIdx.x & 31, c = lane & 3;
  float s[2][4];
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) s[j][e] = 0.f;
  // ldmatrix ×4: matrices (positions 0-7, dims 0-7), (0-7, 8-15), (8-15,
  // 0-7), (8-15, 8-15) of the step: b0, b1 of n8 tile 0, then of tile 1.
  const uint32_t ka = st + (uint32_t)(((((lane >> 4) & 1) * 8 + (lane & 7)) * (HD + 8) + ((lane >> 3) & 1) * 8) * 2);
#pragma unroll
  for (int k = 0; k < HD / 16; k++) {
    unsigned b[4];
    ldsm4(b, ka + k * 32);
    mma_f16(s[0], U.qa[k][0], U.qa[k][1], U.qa[k][2], U.qa[k][3], b[0], b[1]);
    mma_f16(s[1], U.qa[k][0], U.qa[k][1], U.qa[k][2], U.qa[k][3], b[2], b[3]);
  }
  float m[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int i = e >> 1, p = ch * kAttnChunk + 8 * j + 2 * c + (e & 1);
      const bool live = p >= U.lo[i] && p <= U.pos[i];
      s[j][e] = live ? __fmul_rn(s[j][e], scale2) : -INFINITY;
      m[i] = fmaxf(m[i], s[j][e]);
    }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 1));
    m[i] = fmaxf(m[i], __shfl_xor_sync(0xffffffffu, m[i], 2));
    mc[i] = m[i];
  }
#pragma unroll
  for (int j = 0; j < 2; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int i = e >> 1;
      s[j][e] = m[i] == -INFINITY ? 0.f : ex2(__fsub_rn(s[j][e], m[i]));
    }
#pragma unroll
  for (int i = 0; i < 2; i++) {
    float l = __fadd_rn(__fadd_rn(s[0][2 * i], s[0][2 * i + 1]), __fadd_rn(s[1][2 * i], s[1][2 * i + 1]));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 1));
    l = __fadd_rn(l, __shfl_xor_sync(0xffffffffu, l, 2));
    lc[i] = l;
  }
  // The C fragments of the two n8 tiles are the A fragment of P.
  pa[0] = pack_h2(s[0][0], s[0][1]);
  pa[1] = pack_h2(s[0][2], s[0][3]);
  pa[2] = pack_h2(s[1][0], s[1][1]);
  pa[3] = pack_h2(s[1][2], s[1][3]);
}

// The fold's row factors for a chunk partial (m_c, l_c): a and b, whether
// the chunk has a position of the row; m and l updated.
template <int HD>
__device__ __forceinline__ void attn_fold_rows(AttnRun<HD> &R, const float (&mc)[2], const float (&lc)[2], float (&a)[2],
                                               float (&b)[2], bool (&live)[2]) {
#pragma unroll
  for (int i = 0; i < 2; i++) {
    live[i] = mc[i] != -INFINITY;
    const float M = fmaxf(R.m[i], mc[i]);
    a[i] = R.m[i] == -INFINITY ? 0.f : ex2(__fsub_rn(R.m[i], M));
    b[i] = live[i] ? ex2(__fsub_rn(mc[i], M)) : 0.f;
    if (live[i]) {
      R.l[i] = __fmaf_rn(R.l[i], a[i], __fmul_rn(lc[i], b[i]));
      R.m[i] = M;
    }
  }
}
__device__ __forceinline__ void attn_fold_tile(float (&o)[4], const float (&oc)[4], const float (&a)[2], const float (&b)[2],
                                               const bool (&live)[2]) {
#pragma unroll
  for (int e = 0; e < 4; e++) {
    const int i = e >> 1;
    if (live[i]) o[e] = __fmaf_rn(o[e], a[i], __fmul_rn(oc[e], b[i]));
  }
}

// O_c for n8 tiles 2jj and 2jj + 1 (dims 16jj..16jj + 15) from the V rows
// of the stage: ldmatrix.trans of (positions 0-7, dims 0-7), (8-15, 0-7),
// (0-7, 8-15), (8-15, 8-15).
template <int HD>
__device__ __forceinline__ void attn_pv(uint32_t st, int jj, const unsigned (&pa)[4], float (&o0)[4], float (&o1)[4]) {
  const int lane = threadIdx.x & 31, mi = lane >> 3;
  const uint32_t va = st + (uint32_t)(((kAttnChunk + (mi & 1) * 8 + (lane & 7)) * (HD + 8) + 16 * jj + (mi >> 1) * 8) * 2);
  unsigned b[4];
  ldsm4t(b, va);
#pragma unroll
  for (int e = 0; e < 4; e++) o0[e] = o1[e] = 0.f;
  mma_f16(o0, pa[0], pa[1], pa[2], pa[3], b[0], b[1]);
  mma_f16(o1, pa[0], pa[1], pa[2], pa[3], b[2], b[3]);
}

template <int HD> __device__ __forceinline__ void attn_run_init(AttnRun<HD> &R) {
#pragma unroll
  for (int i = 0; i < 2; i++) {
    R.m[i] = -INFINITY;
    R.l[i] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < HD / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) R.o[j][e] = 0.f;
}

// O / l into d.att for the lane's rows; for a tensor-core output
// projection of more than kSmallM rows, into d.ab as it stages them (BF16,
// rounded once).
template <int HD> __device__ __forceinline__ void attn_write(const AttnEnv &E, const AttnUnit<HD> &U, const AttnRun<HD> &R) {
  const int c = threadIdx.x & 3;
#pragma unroll
  for (int i = 0; i < 2; i++) {
    if (U.pos[i] < 0) continue;
    const float inv = __frcp_rn(R.l[i]);
    const size_t at = attn_row_at(E, U, i) + 2 * c;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
      const float v0 = __fmul_rn(R.o[j][2 * i], inv), v1 = __fmul_rn(R.o[j][2 * i + 1], inv);
      if (E.b16) *reinterpret_cast<unsigned *>(E.ab + at + 8 * j) = pack_bf16(v0, v1);
      else *reinterpret_cast<float2 *>(E.att + at + 8 * j) = make_float2(v0, v1);
    }
  }
}

// Where warp w of this block leaves a chunk's partial: in its shared
// memory after the stage where both fit (head dimensions up to 64: the
// first warp's fold then reads them at shared-memory latency), else in
// global scratch.
template <int HD> __device__ __forceinline__ float *attn_part(const Dev &d, float *sh, int w) {
  constexpr int kStage = 2 * kAttnChunk * (HD + 8) * 2;
  if constexpr (kStage + 4 * attn_part_floats(HD) <= kAttnRegionBytes)
    return reinterpret_cast<float *>(reinterpret_cast<char *>(sh) + w * kAttnRegionBytes + kStage);
  else
    return d.apart + (size_t)(blockIdx.x * kWarps + w) * attn_part_floats(HD);
}

// RINGLM_CUDA_PROFILE=2 in a library built with -DRLM_PROF_BLOCKS: a
// unit's first lane times its parts (Dev.aprof): setup (attn_unit: the
// tile's record), chunks (Q, K/V, scores, P·V, and a group's wait for its
// slowest warp), fold, write.
struct AttnClock {
  unsigned long long *p, t;
  __device__ __forceinline__ AttnClock(Dev &d, bool leader)
      : p(kProfBlocks && d.profile > 1 && leader ? d.aprof : nullptr), t(p ? globaltimer() : 0) {}
  __device__ __forceinline__ void lap(int part) {
    if (p) {
      const unsigned long long now = globaltimer();
      atomicAdd(&p[part], now - t);
      t = now;
    }
  }
};

template <int HD> __device__ __noinline__ void phase_attn_tc_hd(Dev &d, int layer, float *sh) {
  constexpr int kStage = 2 * kAttnChunk * (HD + 8) * 2;  // bytes: K and V of a chunk
  constexpr int kStages = 2 * kStage <= kAttnRegionBytes ? 2 : 1;
  const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5, c = lane & 3, g = lane >> 2;
  const uint32_t region = (uint32_t)__cvta_generic_to_shared(sh) + (uint32_t)(wib * kAttnRegionBytes);
  const float scale2 = (float)(1.4426950408889634 / sqrt((double)HD));
  const int units = d.n_atile * d.n_kv * d.a_nsub;
  const int nw = gridDim.x * kWarps;
  int G = kWarps;
  while (G > 1 && units * G > nw) G >>= 1;
  const int groups = nw / G, gid = blockIdx.x * (kWarps / G) + wib / G, k = wib % G;
  const AttnEnv E = attn_env<HD>(d, layer);
  AttnUnit<HD> U;
  AttnRun<HD> R;
  for (int round = 0;; round++) {
    const int u = round * groups + ((round & 1) ? groups - 1 - gid : gid);  // alternate directions: long and short tiles mix
    if (u >= units) break;
    AttnClock clk(d, lane == 0 && k == 0);
    if (clk.p) atomicAdd(&clk.p[4], 1ull);
    attn_unit<HD>(E, u, U);
    const int cf = U.plo / kAttnChunk, cl = U.phi / kAttnChunk;
    attn_run_init<HD>(R);
    clk.lap(0);
    if (G == 1) {
      if (kStages == 2) {
        attn_issue<HD>(E, U, cf, region);
        cp_commit();
      }
      attn_q<HD>(E, U);
      for (int ch = cf; ch <= cl; ch++) {
        const uint32_t st = region + (kStages == 2 ? (uint32_t)(((ch - cf) & 1) * kStage) : 0u);
        if (kStages == 2) {
          if (ch < cl) attn_issue<HD>(E, U, ch + 1, region + (uint32_t)((((ch - cf) & 1) ^ 1) * kStage));
          cp_commit();
          cp_wait<1>();
        } else {
          attn_issue<HD>(E, U, ch, st);
          cp_commit();
          cp_wait<0>();
        }
        __syncwarp();
        float mc[2], lc[2], a[2], b[2];
        bool live[2];
        unsigned pa[4];
        attn_scores<HD>(U, st, ch, scale2, mc, lc, pa);
        attn_fold_rows<HD>(R, mc, lc, a, b, live);
#pragma unroll
        for (int jj = 0; jj < HD / 16; jj++) {
          float o0[4], o1[4];
          attn_pv<HD>(st, jj, pa, o0, o1);
          attn_fold_tile(R.o[2 * jj], o0, a, b, live);
          attn_fold_tile(R.o[2 * jj + 1], o1, a, b, live);
        }
        __syncwarp();
      }
      cp_wait<0>();
      clk.lap(1);
      attn_write<HD>(E, U, R);
      clk.lap(3);
      continue;
    }
    // A group of G warps: G chunks at a time, partials through global
    // scratch, folded in order by the group's first warp.
    const int bar = 1 + wib / G;
    float *mine = attn_part<HD>(d, sh, wib);
    for (int r0 = cf; r0 <= cl; r0 += G) {
      const int ch = r0 + k;
      if (ch <= cl) {
        attn_issue<HD>(E, U, ch, region);
        cp_commit();
        if (r0 == cf) attn_q<HD>(E, U);  // a warp's Q before its first chunk (the k == 0 warp always has one)
        cp_wait<0>();
        __syncwarp();
        float mc[2], lc[2];
        unsigned pa[4];
        attn_scores<HD>(U, region, ch, scale2, mc, lc, pa);
#pragma unroll
        for (int jj = 0; jj < HD / 16; jj++) {
          float o0[4], o1[4];
          attn_pv<HD>(region, jj, pa, o0, o1);
          reinterpret_cast<float4 *>(mine)[(2 * jj) * 32 + lane] = make_float4(o0[0], o0[1], o0[2], o0[3]);
          reinterpret_cast<float4 *>(mine)[(2 * jj + 1) * 32 + lane] = make_float4(o1[0], o1[1], o1[2], o1[3]);
        }
        if (c == 0) {
          mine[16 * HD + g] = mc[0];
          mine[16 * HD + g + 8] = mc[1];
          mine[16 * HD + 16 + g] = lc[0];
          mine[16 * HD + 16 + g + 8] = lc[1];
        }
        __syncwarp();
      }
      __threadfence_block();
      group_sync(bar, G * 32);
      clk.lap(1);
      if (k == 0) {
        const int n = min(G, cl - r0 + 1);
        for (int w = 0; w < n; w++) {
          const float *pw = attn_part<HD>(d, sh, wib + w);
          const float mc[2] = {pw[16 * HD + g], pw[16 * HD + g + 8]};
          const float lc[2] = {pw[16 * HD + 16 + g], pw[16 * HD + 16 + g + 8]};
          float a[2], b[2];
          bool live[2];
          attn_fold_rows<HD>(R, mc, lc, a, b, live);
#pragma unroll
          for (int j = 0; j < HD / 8; j++) {
            const float4 v = reinterpret_cast<const float4 *>(pw)[j * 32 + lane];
            const float oc[4] = {v.x, v.y, v.z, v.w};
            attn_fold_tile(R.o[j], oc, a, b, live);
          }
        }
      }
      group_sync(bar, G * 32);
      clk.lap(2);
    }
    if (k == 0) attn_write<HD>(E, U, R);
    clk.lap(3);
  }
}

// The attention phase on the tensor cores for the model's head dimension
// (attn_tc_ok).
__device__ void phase_attn_tc(Dev &d, int layer, float *sh) {
  switch (d.hd) {
    case 64: phase_attn_tc_hd<64>(d, layer, sh); break;
    case 128: phase_attn_tc_hd<128>(d, layer, sh); break;
    case 96: phase_attn_tc_hd<96>(d, layer, sh); break;
    case 32: phase_attn_tc_hd<32>(d, layer, sh); break;
    default: break;  // not attn_tc_ok: the host chose phase_attn
  }
}

}  // namespace

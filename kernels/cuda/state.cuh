#pragma once
// state.cuh: the kernel's constants (block shape, per-slot limits, batch
// sizes) and what it keeps in device memory: a weight matrix (DMat), a
// layer (DLayer), a slot's state (Slot), and Dev, everything the kernel
// reads (model, KV pool, slots, step buffers, leader ↔ grid fields); the
// phase timer of RINGLM_CUDA_PROFILE=1 (prof_mark). The headers and the
// anonymous namespace the other parts of device.cu build on.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "qpack.h"
#include "ring.h"
#include "ringlm_cuda.h"

namespace cg = cooperative_groups;

namespace {

// RLM_THREADS: 256 was measured (bench/RESULTS.md, round 111: 255
// registers a thread and almost no spills, but slower at every batch but
// 64): the kernel is written for 512.
#ifndef RLM_THREADS
#define RLM_THREADS 512
#endif
constexpr int kThreads = RLM_THREADS;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxStop = RLM_MAX_STOP;  // stop ids a slot may hold (ringbuf.MaxStop)
constexpr int kMaxBias = RLM_MAX_BIAS;  // logit-bias pairs a slot may hold (ringbuf.MaxBias)
constexpr int kTokChunk = 4;    // tokens a warp multiplies per weight load
constexpr int kRecBatch = 32;   // submit records copied at once

// The block-quantized types' products (RLM_TYPE_QANY, mma.cuh) are in
// device_q.cu's module only (RLM_QANY; make cuda builds it unless
// CUDA_QUANT=0): beside the other types' products ptxas 11.8 took about 21
// minutes over the kernel instead of 5, and the other types' decode ran
// 2-3.5% slower (bench/RESULTS.md). This module (device.cu) stays free of
// them; rlm_create launches the other one's kernel for a model that has
// such weights, and refuses them when the library has no such module.
#ifdef RLM_QANY
constexpr bool kQany = true;
#else
constexpr bool kQany = false;
#endif
// device_q.cu's module (RLM_QMOD) runs only models that have block-
// quantized weights: rlm_create gives it their products as RLM_TYPE_QANY
// (Q8_0 parts too) or BF16 (F16 and F32 matrices, converted at upload: the
// product rounds them to BF16 anyway) and always the tensor-core phases, so
// its kernel holds no other product instances and none of the CUDA-core
// phases (ptxas's time over a module grows faster than the module).
#ifdef RLM_QMOD
constexpr bool kQmod = true;
#else
constexpr bool kQmod = false;
#endif
// device_tc.cu's module (RLM_TCMOD) runs the other models when the
// tensor-core phases and the tensor-core attention both run (the default):
// the same kernel with none of the CUDA-core phases in its module. ptxas
// ties the register assignment of a module's functions together, and
// beside those phases the tensor-core attention and products spilled more
// inside their loops (gemm_whole_t in the QKV phase: 1,088 bytes of loads
// against 572; issue 15, bench/RESULTS.md). device.cu's own kernel, with
// every path, runs the rest
// (RINGLM_CUDA_GEMV=1, RINGLM_CUDA_ATTN=cores, widths or head dimensions
// the tensor-core code does not take).
#ifdef RLM_TCMOD
constexpr bool kTcmod = true;
#else
constexpr bool kTcmod = false;
#endif
// The module's kernel runs the tensor-core phases and attention only.
constexpr bool kTcOnly = kQmod || kTcmod;
// device.cu's own module: the host API (host.cuh) and the test kernels.
#if !defined(RLM_QMOD) && !defined(RLM_TCMOD)
#define RLM_MAINMOD 1
#endif

struct DMat {
  const void *w;  // Q8_0: the int8 quants, row-major; RLM_TYPE_QANY: the code blocks (qpack.h)
  int type, rows, cols;
  const float *sc;  // Q8_0: one scale per 32 weights, [rows][cols/32]
  int nk;           // the tensor-core product's chunks of 32-column groups (mma.cuh), fixed at upload
  // RLM_TYPE_QANY (the block-quantized types at their own width, in the
  // product's order even for the embedding): a record per 16-row tile
  // (its halves' types, its blocks, its scale rows) and the scale records.
  const qp_tile *qt;
  const uint8_t *qs;
};

struct DLayer {
  const float *attn_norm, *ffn_norm;
  DMat qkv;              // Q rows, then K rows, then V rows
  const float *qkv_bias; // q_dim + 2 kv_dim, or null
  DMat o;
  DMat gu;               // gate rows, then up rows
  DMat down;
};

struct Slot {
  int open, finished, last, sampled;
  int pos, max_tokens, flags, prompt_len;
  float temperature, top_p, min_p;
  int top_k;
  float rep_pen;
  int rep_last_n;
  float presence, frequency;
  unsigned long long seed;
  int n_stop, n_bias, n_eos, hist_from;
  int eos[RLM_MAX_EOS];
  int gen_from;  // first position counted as generated (-1: none yet)
  int n_top;     // alternatives per TOKEN (TOP_LOGPROBS records)
  int n_blocks;  // block-table entries granted
};

// Everything the kernel reads, in device memory.
struct Dev {
  // model
  int n_layer, dim, n_head, n_kv, hd, ffn, vocab, rope_dim, neox;
  int window;  // sliding attention window in positions (0: none)
  float rope_scale, eps;
  const float *inv_freq;  // rope_dim/2
  DMat embed, output;
  const float *out_norm;
  const DLayer *layers;
  // KV pool: [layer][block][kv head][bs][hd], float16
  __half *kcache, *vcache;
  int num_blocks, bs, max_bpb, ctx;  // ctx = max_bpb × bs: the stride of a slot's history
  int ctx_limit;                      // the context: positions a slot may hold (≤ ctx)
  // slots
  int slots;
  Slot *slot;
  int *btab;  // [slots][max_bpb]
  int *hist;  // [slots][ctx]: the token at each observed position
  int *stop_ids;  // [slots][kMaxStop]
  int *bias_tok;  // [slots][kMaxBias]
  float *bias_val;
  // step buffers
  int max_tok;
  float *x, *q, *att, *h;  // [max_tok][dim | q_dim | q_dim | ffn]
  // The tensor-core products' inputs as they stage them, in steps of more
  // than 16 rows (BF16; mma only): normalised rows from the norm phase
  // ([max(max_tok, slots)][dim]), the attention output ([max_tok][q_dim],
  // in place of att) and the gate/up output ([max_tok][ffn], in place of h).
  __nv_bfloat16 *xb, *ab, *hb;
  int *t_slot, *t_pos, *t_id;   // per token
  size_t *t_kv;                 // per token: its KV cache offset in layer 0, head 0 (the embedding phase's)
  int *r_tok, *r_slot;          // per sampling row: its token index and slot
  int *r_fast;                  // per sampling row: greedy with nothing to adjust (argmax in the head phase)
  unsigned long long *r_best;   // per sampling row: the head phase's largest order key
  int *r_finite;                // per sampling row: the head phase saw a finite logit
  unsigned long long *r_comp;   // per sampling row: its completion index
  float *logits;                // [slots][vocab]
  double *w_scr;                // [grid][vocab]
  unsigned *bits_scr;           // [grid][vocab/32 + 1]
  int *cnt_scr;                 // [grid][vocab]
  unsigned *stage;              // leader's copy of a payload
  int stage_cap;                // words
  // arena (device view of the mapped host memory)
  char *arena;
  // leader ↔ grid
  int n_tok, n_rows, stop, executed;
  unsigned long long step_id, step_start, sub_cons, cprod, ccons;
  int fault;  // a device-side invariant broke (detail for the host)
  float *inv;  // [max(max_tok, slots)] RMSNorm factors when computed by a phase of their own
  float2 *rope_cs;  // [max_tok][64]: cos and sin of each token's RoPE angles, computed once per step
  // The matrix phases: on the tensor cores (matmul.cuh; QKV and gate/up
  // rows permuted at upload), or on the CUDA cores (gemv.cuh) when 0.
  int mma;
  float *gpart;  // the products' partial sums per chunk (mma.cuh GemmScratch)
  int *gcnt;     // their per-(pass, tile) counters
  // Attention on the tensor cores (attn_tc.cuh), unless 0 (attention.cuh):
  // a unit's query rows are up to a_tpt tokens × a_hpt heads of a KV
  // head's group, cut into a_nsub subsets of heads; the leader lists the
  // step's tiles in a_tile: (first token, tokens, slot, first position).
  int attn_tc, a_hpt, a_tpt, a_nsub, n_atile;
  int4 *a_tile;  // [max_tok]
  float *apart;  // [grid × kWarps][attn_part_floats(hd)]: chunk partials of warp groups
  // RINGLM_CUDA_PROFILE=1: block 0 adds each phase's time (ns, grid barrier
  // included) and prints the totals when the kernel stops.
  int profile;
  unsigned long long prof[12], prof_last;
  // and, inside the products (mma.cuh), block 0's time in their parts:
  // input staging, the weight loop, the chunk sums and epilogues, the
  // grid barrier of a spread product and its sums after it, per product
  // shape (few rows, many).
  unsigned long long gprof[2][5];
  // RINGLM_CUDA_PROFILE=2 also times every block (prof_sync): per phase,
  // the blocks' work from the barrier before (summed over blocks, and the
  // slowest block's), and the barrier's own latency after the last block
  // arrives; pblk[b] is block b's last barrier exit.
  unsigned long long *pblk;
  unsigned long long pbusy[12], pslow[12], psync[12], pstep_slow[12], pstep_done[12];
  // and attention's units (attn_tc.cuh AttnClock): time in setup, chunks,
  // fold and write summed over units, and the units.
  unsigned long long aprof[5];
  unsigned long long trap_step, steps_seen;  // fault injection (rlm_opts.trap_step): trap on that STEP
};

__device__ __forceinline__ unsigned long long globaltimer();

// gsync is the kernel's grid barrier: one release/acquire add per block on
// a counter, and the last block to arrive publishes a new generation on a
// line of its own that the others poll with acquire loads, no fence (the
// launch stays cooperative: every block resident). Cooperative groups'
// barrier (a fence, the add, the poll, a fence on the way out) cost
// 2.1-2.6 µs after the last arrival, 81 barriers a step
// (bench/logs/issue15-round57-block-profile.log); this one, batch 1 1.745
// -> 1.68 ms a step, batch 64 3.52 -> 3.47 on the H100, the same bits
// (bench/logs/issue15-round59-gridbar.log). -DRLM_COOP_BAR builds the
// cooperative groups' one instead.
struct GridBar {
  unsigned count;
  unsigned pad0[31];
  unsigned gen;
  unsigned pad1[31];
};
__device__ GridBar g_bar;  // one persistent kernel per device at a time; zeroed by rlm_start
#ifndef RLM_COOP_BAR
__device__ __forceinline__ void gsync() {
  __syncthreads();  // the block's writes come before thread 0's release
  if (threadIdx.x == 0) {
    unsigned gen, old;
    // The generation before arriving (the release add orders this load
    // before it): it cannot move on before this block arrives.
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(gen) : "l"(&g_bar.gen) : "memory");
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(&g_bar.count) : "memory");
    if (old == gridDim.x - 1) {
      // The last: reset the count for the next barrier, then publish (the
      // release orders the reset before the new generation).
      asm volatile("st.relaxed.gpu.global.u32 [%0], 0;" ::"l"(&g_bar.count) : "memory");
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(&g_bar.gen), "r"(gen + 1) : "memory");
    } else {
      unsigned g;
      do {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(g) : "l"(&g_bar.gen) : "memory");
      } while (g == gen);
    }
  }
  __syncthreads();  // every thread's later accesses come after the acquire
}
#else
__device__ __forceinline__ void gsync() { cg::this_grid().sync(); }
#endif

__device__ __forceinline__ void prof_mark(Dev &d, int phase) {
  if (d.profile && blockIdx.x == 0 && threadIdx.x == 0) {
    const unsigned long long now = globaltimer();
    if (phase > 0) d.prof[phase] += now - d.prof_last;
    else d.prof[11]++;
    d.prof_last = now;
  }
}

// prof_sync is the grid barrier that ends phase n (then prof_mark), timed
// per block at RINGLM_CUDA_PROFILE=2 in a library built with
// -DRLM_PROF_BLOCKS (make cuda CUDA_FLAGS=-DRLM_PROF_BLOCKS): compiled in
// always, the timing's branches cost batch 1 2.6% with the profile off
// (1.705 -> 1.749 ms, bench/logs/issue15-round57-block-profile.log).
#ifdef RLM_PROF_BLOCKS
constexpr bool kProfBlocks = true;
#else
constexpr bool kProfBlocks = false;
#endif
__device__ __forceinline__ void prof_block_start(Dev &d) {
  if (kProfBlocks && d.profile > 1 && threadIdx.x == 0) d.pblk[blockIdx.x] = globaltimer();
}
__device__ __forceinline__ void prof_sync(Dev &d, cg::grid_group &grid, int phase) {
  if (!kProfBlocks) {
    gsync();
    prof_mark(d, phase);
    return;
  }
  if (d.profile > 1) {
    __syncthreads();  // the block's last thread is done
    if (threadIdx.x == 0) {
      const unsigned long long now = globaltimer(), busy = now - d.pblk[blockIdx.x];
      atomicAdd(&d.pbusy[phase], busy);
      atomicMax(&d.pstep_slow[phase], busy);
      atomicMax(&d.pstep_done[phase], now);
    }
  }
  gsync();
  if (d.profile > 1 && threadIdx.x == 0) {
    const unsigned long long now = globaltimer();
    d.pblk[blockIdx.x] = now;
    if (blockIdx.x == 0) {  // every block's atomics came before the barrier; the next ones after the phase's next barrier
      volatile unsigned long long *done = &d.pstep_done[phase], *slow = &d.pstep_slow[phase];
      d.psync[phase] += now > *done ? now - *done : 0;
      d.pslow[phase] += *slow;
      *done = 0;
      *slow = 0;
    }
  }
  prof_mark(d, phase);
}

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace

#pragma once
// sample.cuh: the sampler, per the specification of package sample (its Go
// twin: order keys, Philox, the clean / bias / penalty / top-k / top-p /
// min-p / draw pipeline, logprobs and alternatives), a block per sampling
// row, and the sampling phase, which writes each row's TOKEN and
// TOP_LOGPROBS records into the completion ring.
#include "gemv.cuh"  // kBestRows: the rows whose greedy token the LM-head phase finds

namespace {

__device__ __forceinline__ unsigned ordf(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long keyof(float z, int id) {
  return ((unsigned long long)ordf(z) << 32) | (0xFFFFFFFFu - (unsigned)id);
}
__device__ __forceinline__ int idof(unsigned long long k) { return (int)(0xFFFFFFFFu - (unsigned)(k & 0xFFFFFFFFu)); }
__device__ __forceinline__ float clean(float z) {
  if (isnan(z)) return -INFINITY;
  if (z == INFINITY) return 3.40282347e38f;
  if (z == 0.f) return 0.f;  // -0 → +0
  return z;
}

__device__ void philox(unsigned ctr[4], unsigned key[2]) {
  for (int r = 0; r < 10; r++) {
    if (r > 0) {
      key[0] += 0x9E3779B9u;
      key[1] += 0xBB67AE85u;
    }
    const unsigned hi0 = __umulhi(0xD2511F53u, ctr[0]), lo0 = 0xD2511F53u * ctr[0];
    const unsigned hi1 = __umulhi(0xCD9E8D57u, ctr[2]), lo1 = 0xCD9E8D57u * ctr[2];
    const unsigned c0 = hi1 ^ ctr[1] ^ key[0], c2 = hi0 ^ ctr[3] ^ key[1];
    ctr[0] = c0; ctr[1] = lo1; ctr[2] = c2; ctr[3] = lo0;
  }
}

__device__ float uniform(unsigned long long seed, unsigned long long pos) {
  unsigned ctr[4] = {(unsigned)pos, (unsigned)(pos >> 32), 0u, 0u};
  unsigned key[2] = {(unsigned)seed, (unsigned)(seed >> 32)};
  philox(ctr, key);
  return (float)(ctr[0] >> 8) * (1.0f / 16777216.0f);
}

struct SampleShared {
  double hist[256];
  double red[kWarps];
  unsigned long long redk[kWarps];
  unsigned long long prefix;
  double above;
  int found;
};

// Among candidates z > -inf with key ≥ floor, in descending key order: the
// key of the first whose running weight (w, or 1 when w is null) reaches
// target (≥; > when strict). false when the total falls short.
__device__ bool wselect(const float *z, const double *w, int n, unsigned long long floor, double target, bool strict,
                        unsigned long long *out, SampleShared &sh) {
  if (threadIdx.x == 0) {
    sh.prefix = 0;
    sh.above = 0;
    sh.found = 1;
  }
  for (int pass = 0; pass < 8; pass++) {
    const int shift = 56 - 8 * pass;
    for (int i = threadIdx.x; i < 256; i += kThreads) sh.hist[i] = 0;
    __syncthreads();
    const unsigned long long prefix = sh.prefix;
    for (int i = threadIdx.x; i < n; i += kThreads) {
      const float zi = z[i];
      if (zi == -INFINITY) continue;
      const unsigned long long k = keyof(zi, i);
      if (k < floor) continue;
      if (pass > 0 && (k >> (shift + 8)) != prefix) continue;
      atomicAdd(&sh.hist[(k >> shift) & 255], w ? w[i] : 1.0);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double cum = sh.above;
      int chosen = -1, last_nonempty = -1;
      for (int dg = 255; dg >= 0; dg--) {
        const double hv = sh.hist[dg];
        if (hv == 0) continue;
        last_nonempty = dg;
        const double nc = cum + hv;
        if (strict ? nc > target : nc >= target) {
          chosen = dg;
          break;
        }
        cum = nc;
      }
      if (chosen < 0) {
        if (pass == 0 || last_nonempty < 0) sh.found = 0;
        chosen = last_nonempty < 0 ? 0 : last_nonempty;
        // rounding between passes: take the smallest non-empty digit
        cum = sh.above;
        for (int dg = 255; dg > chosen; dg--) cum += sh.hist[dg];
      }
      sh.above = cum;
      sh.prefix = (prefix << 8) | (unsigned long long)chosen;
      if (pass == 0 && sh.found == 0) sh.prefix = 0;
    }
    __syncthreads();
    if (!sh.found) return false;
  }
  *out = sh.prefix;
  return true;
}

// Samples sampling row `row` of the current step; returns the token and
// its logprob (when asked) per the sample package specification.
__device__ void sample_row(Dev &d, int row, SampleShared &sh, int *tok_out, float *lp_out, unsigned *top_tok,
                           float *top_lp) {
  const int V = d.vocab;
  const int slot = d.r_slot[row];
  Slot &s = d.slot[slot];
  float *z = d.logits + (size_t)row * V;
  double *w = d.w_scr + (size_t)blockIdx.x * V;
  unsigned *bits = d.bits_scr + (size_t)blockIdx.x * (V / 32 + 1);
  int *cnt = d.cnt_scr + (size_t)blockIdx.x * V;
  const int pos = s.pos;  // the position the new token will occupy
  // 1. clean; 2. bias
  for (int i = threadIdx.x; i < V; i += kThreads) z[i] = clean(z[i]);
  __syncthreads();
  for (int i = threadIdx.x; i < s.n_bias; i += kThreads) {
    const int t = d.bias_tok[slot * kMaxBias + i];
    z[t] = clean(z[t] + d.bias_val[slot * kMaxBias + i]);
  }
  __syncthreads();
  // 3. repetition penalty over the window, once per distinct token
  const int *hist = d.hist + (size_t)slot * d.ctx;
  if (s.rep_pen != 1.f && s.rep_last_n != 0) {
    int from = s.hist_from;
    if (s.rep_last_n > 0) from = max(from, pos - s.rep_last_n);
    for (int i = from + threadIdx.x; i < pos; i += kThreads) {
      const int t = hist[i];
      if (t < 0) continue;  // a history token outside the vocabulary
      const unsigned b = 1u << (t & 31);
      if (!(atomicOr(&bits[t >> 5], b) & b)) {
        const float v = z[t];
        z[t] = clean(v > 0 ? __fdiv_rn(v, s.rep_pen) : __fmul_rn(v, s.rep_pen));
      }
    }
    __syncthreads();
    for (int i = from + threadIdx.x; i < pos; i += kThreads)
      if (hist[i] >= 0) bits[hist[i] >> 5] = 0;
    __syncthreads();
  }
  if ((s.presence != 0.f || s.frequency != 0.f) && s.gen_from >= 0) {
    const int from = max(s.gen_from, s.hist_from);
    for (int i = from + threadIdx.x; i < pos; i += kThreads)
      if (hist[i] >= 0) atomicAdd(&cnt[hist[i]], 1);
    __syncthreads();
    for (int i = from + threadIdx.x; i < pos; i += kThreads) {
      const int t = hist[i];
      if (t < 0) continue;
      const int c = atomicExch(&cnt[t], 0);
      if (c > 0) z[t] = clean(__fsub_rn(z[t], __fadd_rn(__fmul_rn((float)c, s.frequency), s.presence)));
    }
    __syncthreads();
  }
  // 4-5. order: the top candidate
  unsigned long long best = 0;
  for (int i = threadIdx.x; i < V; i += kThreads) best = umax64(best, keyof(z[i], i));
  best = block_max_u64(best, sh.redk);
  const unsigned neg_inf_key = ordf(-INFINITY);
  if ((unsigned)(best >> 32) <= neg_inf_key) {  // every z is -inf
    *tok_out = 0;
    *lp_out = 0.f;
    if (threadIdx.x == 0)
      for (int k = 0; k < s.n_top; k++) top_tok[k] = RLM_TOP_NONE, top_lp[k] = 0.f;
    return;
  }
  const float zmax = __uint_as_float((best >> 63) ? (unsigned)(best >> 32) & 0x7FFFFFFFu : ~(unsigned)(best >> 32));
  int tok = idof(best);
  const bool want_lp = (s.flags & RLM_SLOT_LOGPROBS) != 0;
  double sum1 = 0;  // sum of exp(z - zmax) at T = 1 (logprobs)
  if (want_lp) {
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      if (zi != -INFINITY) sum1 += exp((double)zi - (double)zmax);
    }
    sum1 = block_sum_d(sum1, sh.red);
  }
  if (s.temperature > 0.f) {
    // 6. weights
    const double invT = 1.0 / (double)s.temperature;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      w[i] = zi == -INFINITY ? 0.0 : exp(((double)zi - (double)zmax) * invT);
    }
    __syncthreads();
    unsigned long long floor = 0;
    // 7. top-k
    if (s.top_k > 0 && s.top_k < V) {
      unsigned long long k;
      if (wselect(z, nullptr, V, 0, (double)s.top_k, false, &k, sh)) floor = k;
    }
    // 8. top-p
    if (s.top_p < 1.f) {
      double Z = 0;
      for (int i = threadIdx.x; i < V; i += kThreads)
        if (z[i] != -INFINITY && keyof(z[i], i) >= floor) Z += w[i];
      Z = block_sum_d(Z, sh.red);
      unsigned long long k;
      if (wselect(z, w, V, floor, (double)s.top_p * Z, false, &k, sh)) floor = umax64(floor, k);
    }
    // 9. min-p
    if (s.min_p > 0.f) {
      const double lmin = log((double)s.min_p);
      unsigned long long k = ~0ull;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float zi = z[i];
        if (zi == -INFINITY) continue;
        const double x = ((double)zi - (double)zmax) * invT;
        if (x >= lmin) k = umin64(k, keyof(zi, i));
      }
      k = block_min_u64(k, sh.redk);
      floor = umax64(floor, k);
    }
    // 10. draw
    double S = 0;
    for (int i = threadIdx.x; i < V; i += kThreads)
      if (z[i] != -INFINITY && keyof(z[i], i) >= floor) S += w[i];
    S = block_sum_d(S, sh.red);
    const double target = (double)uniform(s.seed, (unsigned long long)pos) * S;
    unsigned long long k;
    if (wselect(z, w, V, floor, target, true, &k, sh)) {
      tok = idof(k);
    } else {  // rounding left the sum short: the last kept candidate with w > 0
      unsigned long long m = ~0ull;
      for (int i = threadIdx.x; i < V; i += kThreads) {
        const float zi = z[i];
        if (zi != -INFINITY && w[i] > 0 && keyof(zi, i) >= floor) m = umin64(m, keyof(zi, i));
      }
      m = block_min_u64(m, sh.redk);
      tok = idof(m);
    }
  }
  *tok_out = tok;
  const double lse = log(sum1);
  *lp_out = want_lp ? (float)(((double)z[tok] - (double)zmax) - lse) : 0.f;
  // Alternatives: the first n_top tokens of the order (z = -inf excluded).
  unsigned long long below = ~0ull;
  for (int k = 0; k < s.n_top; k++) {
    unsigned long long m = 0;
    for (int i = threadIdx.x; i < V; i += kThreads) {
      const float zi = z[i];
      if (zi == -INFINITY) continue;
      const unsigned long long ki = keyof(zi, i);
      if (ki < below) m = umax64(m, ki);
    }
    m = block_max_u64(m, sh.redk);
    if (threadIdx.x == 0) {
      if (m == 0 || (unsigned)(m >> 32) <= ordf(-INFINITY)) {
        top_tok[k] = RLM_TOP_NONE;
        top_lp[k] = 0.f;
      } else {
        top_tok[k] = (unsigned)idof(m);
        top_lp[k] = (float)(((double)z[idof(m)] - (double)zmax) - lse);
      }
    }
    below = m == 0 ? 0 : m;
    __syncthreads();
  }
}

// The sampling phase: a block per sampling row (greedy rows take the LM-head
// phase's token) updates the slot and writes the row's TOKEN and
// TOP_LOGPROBS records into the places the leader reserved.
// take_token records the token a slot sampled (its history, last token
// and count) and returns its finish reason, marking the slot finished on
// one: a stop id or (unless ignore-EOS) an EOS id, else max_tokens
// reached. One thread. Its Go twin is the end of Executor.step.
__device__ uint32_t take_token(Dev &d, int slot, int tok) {
  Slot &s = d.slot[slot];
  const int pos = s.pos;
  d.hist[(size_t)slot * d.ctx + min(pos, d.ctx - 1)] = tok;
  if (s.gen_from < 0) s.gen_from = pos;
  s.last = tok;
  s.sampled++;
  uint32_t fin = RLM_FINISH_NONE;
  bool stop = false;
  if (!(s.flags & RLM_SLOT_IGNORE_EOS))
    for (int i = 0; i < s.n_eos; i++) stop |= s.eos[i] == tok;
  for (int i = 0; i < s.n_stop; i++) stop |= d.stop_ids[slot * kMaxStop + i] == tok;
  if (stop) fin = RLM_FINISH_STOP;
  else if (s.max_tokens > 0 && s.sampled >= s.max_tokens) fin = RLM_FINISH_LENGTH;
  if (fin != RLM_FINISH_NONE) s.finished = 1;
  return fin;
}

// put_top writes sampling row r's n_top alternatives, two a record, into
// the TOP_LOGPROBS places reserved after its TOKEN; without alternatives
// (tok null: the row failed) every pair is RLM_TOP_NONE. One thread.
__device__ void put_top(Dev &d, const rlm_header *h, int r, int n_top, const unsigned *tok, const float *lp) {
  for (int k = 0; k < n_top; k += 2) {
    rlm_completion tc;
    memset(&tc, 0, sizeof tc);
    tc.kind = RLM_KIND_TOP_LOGPROBS;
    tc.slot = d.r_slot[r];
    tc.step = d.step_id;
    tc.u.top.token0 = tok ? tok[k] : RLM_TOP_NONE;
    tc.u.top.logprob0 = tok ? lp[k] : 0.f;
    tc.u.top.token1 = tok && k + 1 < n_top ? tok[k + 1] : RLM_TOP_NONE;
    tc.u.top.logprob1 = tok && k + 1 < n_top ? lp[k + 1] : 0.f;
    *rlm_completion_at(d.arena, h, d.r_comp[r] + 1 + k / 2) = tc;
  }
}

__device__ __forceinline__ void phase_sample(Dev &d, int R, SampleShared &ssh, unsigned *top_tok, float *top_lp) {
  const rlm_header *h = (const rlm_header *)d.arena;
  for (int r = blockIdx.x; r < R; r += gridDim.x) {
    if (!d.r_finite[r]) {
      // No finite logit (NaN or Inf weights, an overflow): ERROR
      // NON_FINITE in the TOKEN's place, its reserved TOP_LOGPROBS places
      // padded with TopNone pairs (the host drops them), the slot finished
      // without a token, as kernels.Executor does.
      if (threadIdx.x == 0) {
        Slot &s = d.slot[d.r_slot[r]];
        rlm_completion c;
        memset(&c, 0, sizeof c);
        c.kind = RLM_KIND_ERROR;
        c.slot = d.r_slot[r];
        c.step = d.step_id;
        c.u.err.code = RLM_CODE_NON_FINITE;
        c.u.err.detail = s.pos;
        *rlm_completion_at(d.arena, h, d.r_comp[r]) = c;
        put_top(d, h, r, s.n_top, nullptr, nullptr);
        s.finished = 1;
        __threadfence_system();
      }
      __syncthreads();
      continue;
    }
    int tok;
    float lp;
    if (d.r_fast[r] && R <= kBestRows) {  // greedy: the head phase found it
      const unsigned long long k = d.r_best[r];
      tok = (unsigned)(k >> 32) <= ordf(-INFINITY) ? 0 : idof(k);
      lp = 0.f;
    } else {
      sample_row(d, r, ssh, &tok, &lp, top_tok, top_lp);
    }
    if (threadIdx.x == 0) {
      Slot &s = d.slot[d.r_slot[r]];
      const int pos = s.pos;
      const uint32_t fin = take_token(d, d.r_slot[r], tok);
      rlm_completion c;
      memset(&c, 0, sizeof c);
      c.kind = RLM_KIND_TOKEN;
      c.slot = d.r_slot[r];
      c.step = d.step_id;
      c.u.token.token = tok;
      c.u.token.logprob = lp;
      c.u.token.finish = fin;
      c.u.token.position = pos;
      *rlm_completion_at(d.arena, h, d.r_comp[r]) = c;
      put_top(d, h, r, s.n_top, top_tok, top_lp);
      __threadfence_system();
    }
    __syncthreads();
  }
}

}  // namespace
